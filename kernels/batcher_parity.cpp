#include "kernels/batcher_parity.h"

#include <cassert>
#include <vector>

namespace graid::kernels {

// One thread's completion queue and the task that drains it on that thread.
struct BatcherParity::ThreadState {
  struct Drain final : Task {
    CompletionQueue* cq = nullptr;
    void run() override { cq->drain(); }
  };
  IoContext* ctx = nullptr;
  Drain drain;
  CompletionQueue cq;

  explicit ThreadState(IoContext& context) : ctx(&context), cq([this] { ctx->post(drain); }) {
    drain.cq = &cq;
  }
};

// One submit(): its jobs, and the completion to run when the last one is done.
struct BatcherParity::Group {
  struct Job final : BatchedJob {
    Group* group = nullptr;
    StripeJob* engine_job = nullptr;  // where verify results go back
    void on_done(Status status) override { group->job_done(*this, std::move(status)); }
  };

  std::vector<Job> jobs;
  std::size_t left = 0;
  Status first_error;
  ParityCompletion* done = nullptr;
  std::unique_ptr<Group> self;  // owned by itself while in flight

  void job_done(Job& job, Status status) {
    job.engine_job->parity_ok = job.job.parity_ok;
    if (!status.is_ok() && first_error.is_ok()) first_error = std::move(status);
    if (--left != 0) return;
    std::unique_ptr<Group> keep = std::move(self);  // freed when this returns
    done->parity_done(std::move(first_error));
  }
};

BatcherParity::BatcherParity(Batcher& batcher) : batcher_(batcher) {}
BatcherParity::~BatcherParity() = default;

BatcherParity::ThreadState& BatcherParity::state_for(IoContext& ctx) {
  MutexLock guard(mu_);
  auto& slot = threads_[&ctx];
  if (!slot) slot = std::make_unique<ThreadState>(ctx);
  return *slot;
}

void BatcherParity::submit(IoContext& ctx, std::span<StripeJob> jobs, ParityCompletion& done) {
  assert(!jobs.empty() && "the engine submits only non-empty parity batches");
  ThreadState& thread = state_for(ctx);
  auto group = std::make_unique<Group>();
  Group& g = *group;
  g.done = &done;
  g.jobs.resize(jobs.size());
  g.left = jobs.size();
  g.self = std::move(group);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    Group::Job& job = g.jobs[i];
    job.group = &g;
    job.engine_job = &jobs[i];
    job.job = jobs[i];
  }
  // The last job may complete (on this thread's next drain) as soon as it is submitted; nothing
  // here touches `g` after the loop's last submit.
  const std::size_t n = g.jobs.size();
  for (std::size_t i = 0; i < n; ++i)
    batcher_.submit(g.jobs[i], thread.cq);
}

}  // namespace graid::kernels
