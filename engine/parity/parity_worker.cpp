#include "graid/parity_worker.h"

#include <algorithm>
#include <utility>

namespace graid {

// A submitted batch; kept alive by itself from the worker until its completion has run on the
// submitter's thread.
struct ParityWorker::Item final : Task {
  IoContext* ctx = nullptr;
  std::span<StripeJob> jobs;
  ParityCompletion* done = nullptr;
  Status status;
  std::unique_ptr<Item> self;
  void run() override {
    std::unique_ptr<Item> keep = std::move(self);
    done->parity_done(std::move(status));
  }
};

ParityWorker::ParityWorker(ParityBackend& backend, unsigned threads) : backend_(backend) {
  for (unsigned i = 0; i < std::max(threads, 1u); ++i)
    threads_.emplace_back([this] { loop(); });
}

ParityWorker::~ParityWorker() {
  {
    MutexLock lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_)
    t.join();
}

void ParityWorker::submit(IoContext& ctx, std::span<StripeJob> jobs, ParityCompletion& done) {
  auto item = std::make_unique<Item>();
  item->ctx = &ctx;
  item->jobs = jobs;
  item->done = &done;
  {
    MutexLock lock(mutex_);
    queue_.push_back(std::move(item));
  }
  cv_.notify_one();
}

void ParityWorker::loop() {
  for (;;) {
    std::unique_ptr<Item> item;
    {
      UniqueLock lock(mutex_);
      while (!stop_ && queue_.empty())
        lock.wait(cv_);
      if (queue_.empty()) return;  // stopping, and every batch has run
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    item->status = backend_.execute(item->jobs);
    batches_.fetch_add(1, std::memory_order_relaxed);
    IoContext* ctx = item->ctx;
    Item& ref = *item;
    ref.self = std::move(item);
    ctx->post(ref);  // the submitter's thread runs the completion
  }
}

}  // namespace graid
