// The batcher: stripe jobs from many threads become few, large device launches (plain C++).
//
//   queue thread 1 ─┐ submit(job, cq)                        ┌─> DeviceQueue::run(batch)  (GPU)
//   queue thread 2 ─┼──> pending list ──> launcher thread(s) ┤
//   queue thread N ─┘      │ (small jobs, dead device: run   └─> cpu backend (failover)
//                          │  inline on the submitter's CPU)
//                          └──────── completions ──> each submitter's CompletionQueue ──> drain()
//
// Launch policy (LevelDB's group commit with a latency cap; SPDK's "small XOR on the CPU"):
//   * a launcher takes pending jobs when the pending bytes or job count reach a full batch, when
//     the oldest pending job has waited `deadline`, or at once when no batch is on the device
//     (an idle device gains nothing from waiting; under load, batches form while it is busy);
//   * one batch holds at most max_batch_bytes / max_batch_jobs (a single bigger job goes alone);
//   * jobs touching fewer than cpu_below_bytes bytes run on the cpu backend on the submitting
//     thread, as the PCIe round trip costs more than the math.
// Every threshold is a guess until measured on a GPU (bench/micro/cuda_bench, bench/gpu/
// device-check.sh); docs/gpu.md says so.
//
// Failover: DeviceQueue::run() failing means the device is gone. That batch is redone on the cpu
// backend (inputs were never written, so redoing is safe), the device is marked dead (logged
// once), every pending and later job runs on the cpu. No job is lost or completed twice.
//
// Completion: a job's on_done() never runs inside submit() nor on a launcher thread. Finished jobs
// are pushed onto the CompletionQueue the submitter named; the submitter runs them by calling
// drain() on its own thread (from its event loop: CompletionQueue's notify callback can post a
// Task to the thread's IoContext, or write an eventfd).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "graid/parity.h"
#include "graid/status.h"
#include "graid/thread_annotations.h"

namespace graid::kernels {

// Where the batcher sends full batches: the GPU, or a fake in tests.
class DeviceQueue {
 public:
  virtual ~DeviceQueue() = default;
  virtual std::string_view name() const noexcept = 0;
  // Batches the device may run at once; the batcher runs this many launcher threads.
  virtual unsigned max_in_flight() const noexcept = 0;
  // Runs every job of `jobs` and returns when all are done (sets parity_ok for verify jobs).
  // Called from launcher threads, up to max_in_flight() at once. A failing Status means the
  // device is unusable: outputs are then unspecified and the batcher redoes the batch elsewhere.
  // Jobs are already validated.
  virtual Status run(std::span<StripeJob> jobs) = 0;
};

// A ParityBackend as a device queue (e.g. the cuda backend built with fallback_to_cpu = false, so
// a device failure reaches the batcher instead of being absorbed inside the backend).
std::unique_ptr<DeviceQueue> make_backend_device_queue(ParityBackend& backend,
                                                       unsigned max_in_flight);

enum class ExecutedOn : std::uint8_t {
  kNotYet,
  kDevice,         // in a device batch
  kCpuSmall,       // below cpu_below_bytes: cpu backend on the submitting thread
  kCpuFailover,    // its device batch failed and was redone on the cpu
  kCpuDeadDevice,  // the device had already failed: cpu backend on the submitting thread
  kRejected,       // invalid job: not run, on_done got the validation error
};

class CompletionQueue;

// One stripe job handed to the batcher. The caller owns it (embedded in its stripe object) and
// keeps it alive and unmodified from submit() until on_done() has started.
class BatchedJob {
 public:
  StripeJob job;

  // Called exactly once, by CompletionQueue::drain() on the thread that drains the queue.
  // `status` is ok, or why the job was not run (validation) or failed.
  virtual void on_done(Status status) = 0;

  ExecutedOn executed_on() const noexcept { return executed_on_; }

 protected:
  virtual ~BatchedJob() = default;  // virtual: -Wnon-virtual-dtor with the friends below

 private:
  friend class Batcher;
  friend class CompletionQueue;
  BatchedJob* next_ = nullptr;  // intrusive link: pending list, then the completion stack
  CompletionQueue* cq_ = nullptr;
  Status status_;
  ExecutedOn executed_on_ = ExecutedOn::kNotYet;
  std::chrono::steady_clock::time_point submitted_{};
};

// Completed jobs waiting for their owner thread. push() is lock-free and callable from any
// thread; drain() only from the owner. `notify` runs on the pushing thread whenever the queue
// goes from empty to non-empty, so the owner can be woken (post a Task to its IoContext, write an
// eventfd, signal a condition variable); it must be cheap and must not call drain().
class CompletionQueue {
 public:
  explicit CompletionQueue(std::function<void()> notify = {}) : notify_(std::move(notify)) {}
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // Runs on_done() of every completed job, in completion order. Returns how many ran. A callback
  // may submit new jobs (even the same object again).
  std::size_t drain();
  bool empty() const noexcept { return head_.load(std::memory_order_acquire) == nullptr; }

 private:
  friend class Batcher;
  void push(BatchedJob& job);

  std::atomic<BatchedJob*> head_{nullptr};  // a Treiber stack; drain() reverses it
  std::function<void()> notify_;
};

struct BatcherOptions {
  std::size_t max_batch_bytes = std::size_t{64} << 20;  // bytes touched: chunk_count * len
  std::size_t max_batch_jobs = 4096;
  std::chrono::microseconds deadline{50};
  bool launch_when_idle = true;
  std::size_t cpu_below_bytes = std::size_t{64} << 10;  // 0: every job goes to the device
};

struct BatcherStats {
  std::uint64_t launches_full_bytes = 0;
  std::uint64_t launches_full_jobs = 0;
  std::uint64_t launches_deadline = 0;
  std::uint64_t launches_idle = 0;
  std::uint64_t launches_flush = 0;  // on shutdown
  std::uint64_t device_jobs = 0;
  std::uint64_t cpu_small_jobs = 0;
  std::uint64_t cpu_failover_jobs = 0;
  std::uint64_t cpu_dead_device_jobs = 0;
  std::uint64_t rejected_jobs = 0;
  std::uint64_t device_failures = 0;

  std::uint64_t launches() const noexcept {
    return launches_full_bytes + launches_full_jobs + launches_deadline + launches_idle +
           launches_flush;
  }
};

class Batcher {
 public:
  // `device` and `cpu` must outlive the batcher. Starts device.max_in_flight() launcher threads.
  Batcher(DeviceQueue& device, ParityBackend& cpu, BatcherOptions options = {});
  // Runs every job still pending (device or cpu), delivers its completion, joins the launchers.
  // The completion queues must outlive this (their owners drain them afterwards).
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues `job`; its completion goes to `cq`. Thread-safe. Never waits for the device: the only
  // work on the caller's thread is validation, a short critical section, and, for jobs the cpu
  // serves (small jobs, dead device), the cpu backend's own compute.
  void submit(BatchedJob& job, CompletionQueue& cq);

  bool device_dead() const noexcept { return dead_.load(std::memory_order_acquire); }
  BatcherStats stats() const;
  const BatcherOptions& options() const noexcept { return options_; }

 private:
  enum class Reason { kNone, kFullBytes, kFullJobs, kDeadline, kIdle, kFlush, kCpu };

  void launcher_loop() EXCLUDES(mu_);
  Reason launch_reason(std::chrono::steady_clock::time_point now) const REQUIRES(mu_);
  // Completes `job` with its result so far: pushes it to its queue. The batcher does not touch
  // the job afterwards.
  static void complete(BatchedJob& job, Status status, ExecutedOn where);
  void run_on_cpu_inline(BatchedJob& job, ExecutedOn where);
  void count_launch(Reason reason) REQUIRES(mu_);

  DeviceQueue& device_;
  ParityBackend& cpu_;
  const BatcherOptions options_;

  mutable Mutex mu_;
  std::condition_variable cv_;
  BatchedJob* pending_head_ GUARDED_BY(mu_) = nullptr;  // FIFO
  BatchedJob* pending_tail_ GUARDED_BY(mu_) = nullptr;
  std::size_t pending_jobs_ GUARDED_BY(mu_) = 0;
  std::size_t pending_bytes_ GUARDED_BY(mu_) = 0;
  unsigned in_flight_ GUARDED_BY(mu_) = 0;  // batches on the device now
  bool stopping_ GUARDED_BY(mu_) = false;
  BatcherStats stats_ GUARDED_BY(mu_);

  std::atomic<bool> dead_{false};
  std::atomic<std::uint64_t> cpu_small_jobs_{0};
  std::atomic<std::uint64_t> cpu_dead_jobs_{0};
  std::atomic<std::uint64_t> rejected_jobs_{0};
  std::vector<std::thread> launchers_;
};

// Bytes a job touches (every chunk of the stripe, len each): the batch-size and small-job measure.
std::size_t job_bytes(const StripeJob& job) noexcept;

}  // namespace graid::kernels
