#include "batcher.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace graid::kernels {

std::size_t job_bytes(const StripeJob& job) noexcept {
  return static_cast<std::size_t>(job.chunk_count()) * job.len;
}

// ---- CompletionQueue -----------------------------------------------------------------------

void CompletionQueue::push(BatchedJob& job) {
  // acq_rel/acquire, not just release: a push that finds the queue empty must also see
  // everything the owner did before its drain() emptied it (e.g. the IoContext resetting the
  // task that notify_ is about to post again).
  BatchedJob* head = head_.load(std::memory_order_acquire);
  do {
    job.next_ = head;
  } while (!head_.compare_exchange_weak(head, &job, std::memory_order_acq_rel,
                                        std::memory_order_acquire));
  // Only the push that makes the queue non-empty wakes the owner: any later push lands before
  // the owner's next drain() takes the whole stack.
  if (head == nullptr && notify_) notify_();
}

std::size_t CompletionQueue::drain() {
  BatchedJob* stack = head_.exchange(nullptr, std::memory_order_acq_rel);
  BatchedJob* fifo = nullptr;  // the stack is newest-first; complete oldest-first
  while (stack != nullptr) {
    BatchedJob* next = stack->next_;
    stack->next_ = fifo;
    fifo = stack;
    stack = next;
  }
  std::size_t n = 0;
  while (fifo != nullptr) {
    BatchedJob* job = fifo;
    fifo = job->next_;  // read before on_done: the callback may reuse or free the job
    job->next_ = nullptr;
    job->cq_ = nullptr;
    Status status = std::move(job->status_);
    job->status_ = Status::ok();
    job->on_done(std::move(status));
    ++n;
  }
  return n;
}

// ---- a ParityBackend as a DeviceQueue ------------------------------------------------------

namespace {

class BackendDeviceQueue final : public DeviceQueue {
 public:
  BackendDeviceQueue(ParityBackend& backend, unsigned max_in_flight)
      : backend_(backend), max_in_flight_(max_in_flight == 0 ? 1 : max_in_flight) {}
  std::string_view name() const noexcept override { return backend_.name(); }
  unsigned max_in_flight() const noexcept override { return max_in_flight_; }
  Status run(std::span<StripeJob> jobs) override { return backend_.execute(jobs); }

 private:
  ParityBackend& backend_;
  unsigned max_in_flight_;
};

}  // namespace

std::unique_ptr<DeviceQueue> make_backend_device_queue(ParityBackend& backend,
                                                       unsigned max_in_flight) {
  return std::make_unique<BackendDeviceQueue>(backend, max_in_flight);
}

// ---- Batcher -------------------------------------------------------------------------------

Batcher::Batcher(DeviceQueue& device, ParityBackend& cpu, BatcherOptions options)
    : device_(device), cpu_(cpu), options_(options) {
  const unsigned n = device_.max_in_flight() == 0 ? 1 : device_.max_in_flight();
  launchers_.reserve(n);
  for (unsigned i = 0; i < n; ++i)
    launchers_.emplace_back([this] { launcher_loop(); });
}

Batcher::~Batcher() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : launchers_)
    t.join();
}

void Batcher::complete(BatchedJob& job, Status status, ExecutedOn where) {
  CompletionQueue* cq = job.cq_;  // read first: after push() the job belongs to its owner
  job.status_ = std::move(status);
  job.executed_on_ = where;
  cq->push(job);
}

void Batcher::run_on_cpu_inline(BatchedJob& job, ExecutedOn where) {
  Status status = cpu_.execute(std::span<StripeJob>(&job.job, 1));
  complete(job, std::move(status), where);
}

void Batcher::submit(BatchedJob& job, CompletionQueue& cq) {
  job.cq_ = &cq;
  job.next_ = nullptr;
  job.executed_on_ = ExecutedOn::kNotYet;
  Status valid = validate_job(job.job);
  if (!valid.is_ok()) {
    rejected_jobs_.fetch_add(1, std::memory_order_relaxed);
    complete(job, std::move(valid), ExecutedOn::kRejected);
    return;
  }
  const std::size_t bytes = job_bytes(job.job);
  if (dead_.load(std::memory_order_acquire)) {
    cpu_dead_jobs_.fetch_add(1, std::memory_order_relaxed);
    run_on_cpu_inline(job, ExecutedOn::kCpuDeadDevice);
    return;
  }
  if (bytes < options_.cpu_below_bytes) {
    cpu_small_jobs_.fetch_add(1, std::memory_order_relaxed);
    run_on_cpu_inline(job, ExecutedOn::kCpuSmall);
    return;
  }
  job.submitted_ = std::chrono::steady_clock::now();
  {
    MutexLock lock(mu_);
    if (pending_tail_ == nullptr) {
      pending_head_ = &job;
    } else {
      pending_tail_->next_ = &job;
    }
    pending_tail_ = &job;
    ++pending_jobs_;
    pending_bytes_ += bytes;
  }
  // One launcher is enough to act on a new job; the others wake on their own deadlines.
  cv_.notify_one();
}

Batcher::Reason Batcher::launch_reason(std::chrono::steady_clock::time_point now) const {
  if (pending_head_ == nullptr) return Reason::kNone;
  if (dead_.load(std::memory_order_acquire)) return Reason::kCpu;
  if (stopping_) return Reason::kFlush;
  if (pending_bytes_ >= options_.max_batch_bytes) return Reason::kFullBytes;
  if (pending_jobs_ >= options_.max_batch_jobs) return Reason::kFullJobs;
  if (options_.launch_when_idle && in_flight_ == 0) return Reason::kIdle;
  if (now - pending_head_->submitted_ >= options_.deadline) return Reason::kDeadline;
  return Reason::kNone;
}

void Batcher::count_launch(Reason reason) {
  switch (reason) {
    case Reason::kFullBytes:
      ++stats_.launches_full_bytes;
      break;
    case Reason::kFullJobs:
      ++stats_.launches_full_jobs;
      break;
    case Reason::kDeadline:
      ++stats_.launches_deadline;
      break;
    case Reason::kIdle:
      ++stats_.launches_idle;
      break;
    case Reason::kFlush:
      ++stats_.launches_flush;
      break;
    case Reason::kNone:
    case Reason::kCpu:
      break;
  }
}

void Batcher::launcher_loop() {
  std::vector<BatchedJob*> batch;
  std::vector<StripeJob> jobs;  // contiguous copies: ParityBackend takes a span of StripeJob
  UniqueLock lock(mu_);
  for (;;) {
    Reason reason = Reason::kNone;
    for (;;) {
      reason = launch_reason(std::chrono::steady_clock::now());
      if (reason != Reason::kNone) break;
      if (pending_head_ == nullptr) {
        if (stopping_) return;
        lock.wait(cv_);
      } else {
        lock.wait_until(cv_, pending_head_->submitted_ + options_.deadline);
      }
    }

    // Take a batch: FIFO, capped by bytes and count; the first job always fits.
    batch.clear();
    std::size_t bytes = 0;
    while (pending_head_ != nullptr && batch.size() < options_.max_batch_jobs) {
      const std::size_t b = job_bytes(pending_head_->job);
      if (!batch.empty() && bytes + b > options_.max_batch_bytes) break;
      BatchedJob* job = pending_head_;
      pending_head_ = job->next_;
      job->next_ = nullptr;
      batch.push_back(job);
      bytes += b;
    }
    if (pending_head_ == nullptr) pending_tail_ = nullptr;
    pending_jobs_ -= batch.size();
    pending_bytes_ -= bytes;
    const bool on_device = reason != Reason::kCpu;
    if (on_device) {
      count_launch(reason);
      ++in_flight_;
    }
    lock.unlock();
    // More may be pending than one batch takes: let another launcher look at it.
    cv_.notify_one();

    jobs.clear();
    for (BatchedJob* job : batch)
      jobs.push_back(job->job);
    ExecutedOn where = on_device ? ExecutedOn::kDevice : ExecutedOn::kCpuDeadDevice;
    Status status;
    bool failed_over = false;
    if (on_device) status = device_.run(jobs);
    if (on_device && !status.is_ok()) {
      failed_over = true;
      if (!dead_.exchange(true, std::memory_order_acq_rel)) {
        spdlog::error("graid: parity device '{}' failed ({}); parity continues on the cpu backend",
                      device_.name(), status.to_string());
      }
      where = ExecutedOn::kCpuFailover;
    }
    if (!on_device || failed_over) status = cpu_.execute(jobs);

    // Count before completing, so an owner that has drained every job sees final stats.
    lock.lock();
    if (on_device) --in_flight_;
    if (failed_over) ++stats_.device_failures;
    switch (where) {
      case ExecutedOn::kDevice:
        stats_.device_jobs += batch.size();
        break;
      case ExecutedOn::kCpuFailover:
        stats_.cpu_failover_jobs += batch.size();
        break;
      default:
        stats_.cpu_dead_device_jobs += batch.size();
        break;
    }
    // The device may now be idle, which is itself a reason to launch what is pending.
    if (pending_head_ != nullptr) cv_.notify_one();
    lock.unlock();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      batch[i]->job.parity_ok = jobs[i].parity_ok;
      complete(*batch[i], status, where);
    }
    lock.lock();
  }
}

BatcherStats Batcher::stats() const {
  BatcherStats s;
  {
    MutexLock lock(mu_);
    s = stats_;
  }
  s.cpu_small_jobs = cpu_small_jobs_.load(std::memory_order_relaxed);
  s.cpu_dead_device_jobs += cpu_dead_jobs_.load(std::memory_order_relaxed);
  s.rejected_jobs = rejected_jobs_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace graid::kernels
