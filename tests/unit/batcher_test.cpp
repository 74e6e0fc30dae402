// The batcher's policy and failover with a fake device queue (kernels/batcher.h): launches on a
// full batch (bytes, count), on the deadline, at once when the device is idle; small jobs on the
// cpu; a device failure redoes the batch on the cpu with no job lost or completed twice; results
// byte-identical to ref; completions run on the submitting thread (also through an IoContext).

#include "kernels/batcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "graid/member.h"
#include "graid/parity.h"
#include "kernels/host_emulator.h"
#include "parity/stripe_buffers.h"

namespace graid::kernels {
namespace {

using namespace std::chrono_literals;
using parity_testing::fill_pseudo_random;
using parity_testing::StripeBuffers;

// A device that runs batches with the host-run kernel bodies, records what it saw, can hold a
// batch until released, and can fail the n-th batch (after scribbling over its outputs, as a
// device dying mid-copy might).
class FakeDevice final : public DeviceQueue {
 public:
  explicit FakeDevice(unsigned in_flight = 1) : in_flight_(in_flight) {}

  std::string_view name() const noexcept override { return "fake"; }
  unsigned max_in_flight() const noexcept override { return in_flight_; }

  Status run(std::span<StripeJob> jobs) override {
    std::unique_lock lock(mu_);
    const std::size_t index = batch_sizes_.size();
    batch_sizes_.push_back(jobs.size());
    launch_times_.push_back(std::chrono::steady_clock::now());
    cv_.notify_all();
    cv_.wait(lock, [&] { return !held_; });
    const bool fail = fail_batch_ >= 0 && index == static_cast<std::size_t>(fail_batch_);
    lock.unlock();
    if (fail) {
      // Garbage in the outputs (never the inputs: a device only writes what the job writes);
      // the cpu redo must replace it.
      for (StripeJob& j : jobs) {
        if (j.op == ParityOp::kEncode) {
          for (std::uint32_t c = j.k; c < j.chunk_count(); ++c)
            std::memset(j.chunk[c].data(), 0xa5, j.len);
        } else if (j.op == ParityOp::kReconstruct) {
          for (std::uint8_t m = 0; m < j.missing_count; ++m)
            std::memset(j.chunk[j.missing[m]].data(), 0xa5, j.len);
        } else {
          j.parity_ok = !j.parity_ok;
        }
      }
      return Status(Errc::kIoError, "injected device failure");
    }
    return kernels_->execute(jobs);
  }

  void hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      held_ = false;
    }
    cv_.notify_all();
  }
  void fail_batch(int index) {
    std::lock_guard lock(mu_);
    fail_batch_ = index;
  }
  // Waits until `n` batches have started.
  bool wait_batches(std::size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return batch_sizes_.size() >= n; });
  }
  std::vector<std::size_t> batch_sizes() {
    std::lock_guard lock(mu_);
    return batch_sizes_;
  }
  std::vector<std::chrono::steady_clock::time_point> launch_times() {
    std::lock_guard lock(mu_);
    return launch_times_;
  }

 private:
  unsigned in_flight_;
  std::unique_ptr<ParityBackend> kernels_ = make_kernel_host_backend();
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  int fail_batch_ = -1;
  std::vector<std::size_t> batch_sizes_;
  std::vector<std::chrono::steady_clock::time_point> launch_times_;
};

// A job with its own stripe and a ref twin; counts its completions.
class TestJob final : public BatchedJob {
 public:
  TestJob(ParityOp op, ParityScheme scheme, std::uint32_t k, std::size_t len, std::uint64_t seed)
      : stripe_(make(k + (scheme == ParityScheme::kPQ ? 2 : 1), len, seed)),
        twin_(make(k + (scheme == ParityScheme::kPQ ? 2 : 1), len, seed)) {
    if (op != ParityOp::kEncode) {  // start from a consistent stripe
      StripeJob enc = stripe_.job(ParityOp::kEncode, scheme, k, len);
      EXPECT_TRUE(make_ref_backend()->execute(std::span(&enc, 1)).is_ok());
      for (std::uint32_t c = 0; c < stripe_.chunks(); ++c)
        std::memcpy(twin_.bytes(c).data(), stripe_.bytes(c).data(), len);
    }
    job = stripe_.job(op, scheme, k, len);
    twin_job_ = twin_.job(op, scheme, k, len);
    if (op == ParityOp::kReconstruct) {
      job.missing_count = twin_job_.missing_count = 1;
      job.missing[0] = twin_job_.missing[0] = static_cast<std::uint8_t>(seed % k);
      std::memset(stripe_.bytes(job.missing[0]).data(), 0x5a, len);
    }
  }

  void on_done(Status status) override {
    status_ = std::move(status);
    thread_ = std::this_thread::get_id();
    done_.fetch_add(1);
  }

  int done() const { return done_.load(); }
  const Status& status() const { return status_; }
  std::thread::id thread() const { return thread_; }

  // Runs the twin on ref and compares every byte and parity_ok.
  ::testing::AssertionResult matches_ref() {
    if (!make_ref_backend()->execute(std::span(&twin_job_, 1)).is_ok())
      return ::testing::AssertionFailure() << "ref failed";
    for (std::uint32_t c = 0; c < stripe_.chunks(); ++c) {
      if (std::memcmp(stripe_.bytes(c).data(), twin_.bytes(c).data(), stripe_.chunk_size()) != 0)
        return ::testing::AssertionFailure() << "chunk " << c << " differs from ref";
    }
    if (job.parity_ok != twin_job_.parity_ok)
      return ::testing::AssertionFailure() << "parity_ok differs from ref";
    return ::testing::AssertionSuccess();
  }

 private:
  static StripeBuffers make(std::uint32_t chunks, std::size_t len, std::uint64_t seed) {
    Result<StripeBuffers> s = StripeBuffers::make(chunks, len);
    EXPECT_TRUE(s.is_ok());
    StripeBuffers b = std::move(s).value();
    for (std::uint32_t c = 0; c < chunks; ++c)
      fill_pseudo_random(b.bytes(c), seed * 31 + c);
    return b;
  }

  StripeBuffers stripe_;
  StripeBuffers twin_;
  StripeJob twin_job_;
  std::atomic<int> done_{0};
  Status status_;
  std::thread::id thread_;
};

std::unique_ptr<TestJob> encode_job(std::size_t len, std::uint64_t seed) {
  return std::make_unique<TestJob>(ParityOp::kEncode, ParityScheme::kPQ, 4, len, seed);
}

// Drains `cq` until `jobs` have all completed (or 20 s pass).
bool drain_until_done(CompletionQueue& cq, const std::vector<std::unique_ptr<TestJob>>& jobs) {
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    cq.drain();
    bool all = true;
    for (const auto& j : jobs)
      all = all && j->done() > 0;
    if (all) return true;
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(100us);
  }
}

BatcherOptions no_small_jobs() {
  BatcherOptions o;
  o.cpu_below_bytes = 0;
  return o;
}

TEST(Batcher, IdleDeviceLaunchesAtOnce) {
  FakeDevice device;
  auto cpu = make_cpu_backend();
  BatcherOptions o = no_small_jobs();
  o.deadline = 60s;  // only the idle rule can launch in time
  CompletionQueue cq;
  std::vector<std::unique_ptr<TestJob>> jobs;
  jobs.push_back(encode_job(4096, 1));
  Batcher batcher(device, *cpu, o);
  const auto start = std::chrono::steady_clock::now();
  batcher.submit(*jobs[0], cq);
  ASSERT_TRUE(drain_until_done(cq, jobs));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(batcher.stats().launches_idle, 1u);
  EXPECT_EQ(jobs[0]->executed_on(), ExecutedOn::kDevice);
  EXPECT_TRUE(jobs[0]->status().is_ok());
  EXPECT_TRUE(jobs[0]->matches_ref());
}

TEST(Batcher, DeadlineFlushesAPartialBatch) {
  FakeDevice device;
  auto cpu = make_cpu_backend();
  BatcherOptions o = no_small_jobs();
  o.launch_when_idle = false;
  o.deadline = 200ms;
  CompletionQueue cq;
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 3; ++i)
    jobs.push_back(encode_job(4096, 10 + i));
  Batcher batcher(device, *cpu, o);
  const auto start = std::chrono::steady_clock::now();
  for (auto& j : jobs)
    batcher.submit(*j, cq);
  ASSERT_TRUE(drain_until_done(cq, jobs));
  const auto launches = device.launch_times();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_GE(launches[0] - start, o.deadline);  // not before the deadline
  EXPECT_EQ(device.batch_sizes(), std::vector<std::size_t>{3});
  EXPECT_EQ(batcher.stats().launches_deadline, 1u);
  for (auto& j : jobs)
    EXPECT_TRUE(j->matches_ref());
}

TEST(Batcher, FullBatchByJobCount) {
  FakeDevice device;
  auto cpu = make_cpu_backend();
  BatcherOptions o = no_small_jobs();
  o.launch_when_idle = false;
  o.deadline = 60s;
  o.max_batch_jobs = 4;
  CompletionQueue cq;
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 8; ++i)
    jobs.push_back(encode_job(1000 + i, 20 + i));
  Batcher batcher(device, *cpu, o);
  for (auto& j : jobs)
    batcher.submit(*j, cq);
  ASSERT_TRUE(drain_until_done(cq, jobs));
  EXPECT_EQ(device.batch_sizes(), (std::vector<std::size_t>{4, 4}));
  EXPECT_EQ(batcher.stats().launches_full_jobs, 2u);
  EXPECT_EQ(batcher.stats().launches(), 2u);
  for (auto& j : jobs)
    EXPECT_TRUE(j->matches_ref());
}

TEST(Batcher, FullBatchByBytes) {
  FakeDevice device;
  auto cpu = make_cpu_backend();
  BatcherOptions o = no_small_jobs();
  o.launch_when_idle = false;
  o.deadline = 60s;
  o.max_batch_bytes = 3 * 6 * 4096;  // three k=4 PQ jobs of 4 KiB chunks
  CompletionQueue cq;
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 6; ++i)
    jobs.push_back(encode_job(4096, 30 + i));
  Batcher batcher(device, *cpu, o);
  for (auto& j : jobs)
    batcher.submit(*j, cq);
  ASSERT_TRUE(drain_until_done(cq, jobs));
  EXPECT_EQ(device.batch_sizes(), (std::vector<std::size_t>{3, 3}));
  EXPECT_EQ(batcher.stats().launches_full_bytes, 2u);
}

TEST(Batcher, BatchFormsWhileTheDeviceIsBusy) {
  FakeDevice device(1);
  auto cpu = make_cpu_backend();
  BatcherOptions o = no_small_jobs();
  o.deadline = 60s;
  CompletionQueue cq;
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 6; ++i)
    jobs.push_back(encode_job(2048, 40 + i));
  Batcher batcher(device, *cpu, o);
  device.hold();
  batcher.submit(*jobs[0], cq);  // idle: launches alone, then blocks in the device
  ASSERT_TRUE(device.wait_batches(1));
  for (int i = 1; i < 6; ++i)
    batcher.submit(*jobs[i], cq);
  EXPECT_EQ(cq.drain(), 0u);  // nothing completes while the device holds the first batch
  device.release();
  ASSERT_TRUE(drain_until_done(cq, jobs));
  EXPECT_EQ(device.batch_sizes(), (std::vector<std::size_t>{1, 5}));
  EXPECT_EQ(batcher.stats().launches_idle, 2u);
}

TEST(Batcher, SmallJobsRunOnTheCpuAndCompleteThroughTheQueue) {
  FakeDevice device;
  auto cpu = make_cpu_backend();
  BatcherOptions o;
  o.cpu_below_bytes = 6 * 4096;  // a k=4 PQ job of 4 KiB chunks is exactly the threshold
  o.deadline = 60s;
  CompletionQueue cq;
  std::vector<std::unique_ptr<TestJob>> jobs;
  jobs.push_back(encode_job(4095, 50));  // below: cpu
  jobs.push_back(encode_job(4096, 51));  // at the threshold: device
  Batcher batcher(device, *cpu, o);
  batcher.submit(*jobs[0], cq);
  EXPECT_EQ(jobs[0]->done(), 0);  // computed, but on_done waits for the owner's drain()
  batcher.submit(*jobs[1], cq);
  ASSERT_TRUE(drain_until_done(cq, jobs));
  EXPECT_EQ(jobs[0]->executed_on(), ExecutedOn::kCpuSmall);
  EXPECT_EQ(jobs[1]->executed_on(), ExecutedOn::kDevice);
  EXPECT_EQ(device.batch_sizes(), std::vector<std::size_t>{1});
  EXPECT_EQ(batcher.stats().cpu_small_jobs, 1u);
  for (auto& j : jobs) {
    EXPECT_EQ(j->thread(), std::this_thread::get_id());
    EXPECT_TRUE(j->matches_ref());
  }
}

TEST(Batcher, InvalidJobIsRejectedNotRun) {
  FakeDevice device;
  auto cpu = make_cpu_backend();
  CompletionQueue cq;
  std::vector<std::unique_ptr<TestJob>> jobs;
  jobs.push_back(encode_job(4096, 60));
  jobs[0]->job.k = 40;
  Batcher batcher(device, *cpu, no_small_jobs());
  batcher.submit(*jobs[0], cq);
  ASSERT_TRUE(drain_until_done(cq, jobs));
  EXPECT_EQ(jobs[0]->status().code(), Errc::kInvalidArgument);
  EXPECT_EQ(jobs[0]->executed_on(), ExecutedOn::kRejected);
  EXPECT_TRUE(device.batch_sizes().empty());
}

TEST(Batcher, ShutdownRunsWhatIsPending) {
  FakeDevice device;
  auto cpu = make_cpu_backend();
  BatcherOptions o = no_small_jobs();
  o.launch_when_idle = false;
  o.deadline = 60s;
  CompletionQueue cq;
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 3; ++i)
    jobs.push_back(encode_job(4096, 70 + i));
  {
    Batcher batcher(device, *cpu, o);
    for (auto& j : jobs)
      batcher.submit(*j, cq);
  }
  EXPECT_EQ(cq.drain(), 3u);
  for (auto& j : jobs) {
    EXPECT_EQ(j->done(), 1);
    EXPECT_TRUE(j->matches_ref());
  }
}

// Several submitting threads, random shapes and operations, the device failing its 3rd batch:
// every job completes exactly once, on its own thread, with ref's bytes.
void run_threads(FakeDevice& device, int fail_batch, BatcherStats& stats_out) {
  auto cpu = make_cpu_backend();
  if (fail_batch >= 0) device.fail_batch(fail_batch);
  BatcherOptions o;
  o.cpu_below_bytes = 3 * 1024;
  o.max_batch_jobs = 16;
  o.deadline = 200us;
  constexpr int kThreads = 4;
  constexpr int kJobsPerThread = 60;
  Batcher batcher(device, *cpu, o);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      CompletionQueue cq;
      std::vector<std::unique_ptr<TestJob>> jobs;
      for (int i = 0; i < kJobsPerThread; ++i) {
        const ParityOp op = static_cast<ParityOp>(rng() % 3);
        const ParityScheme scheme = rng() % 2 ? ParityScheme::kPQ : ParityScheme::kP;
        const auto k = static_cast<std::uint32_t>(2 + rng() % 12);
        const std::size_t len = 64 + (rng() % 3) * 2000 + rng() % 64;
        jobs.push_back(std::make_unique<TestJob>(op, scheme, k, len, t * 1000 + i + 7));
        batcher.submit(*jobs.back(), cq);
        if (i % 8 == 0) cq.drain();
      }
      if (!drain_until_done(cq, jobs)) failures.fetch_add(1);
      for (auto& j : jobs) {
        if (j->done() != 1 || !j->status().is_ok() || j->thread() != std::this_thread::get_id() ||
            !j->matches_ref()) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(failures.load(), 0);
  stats_out = batcher.stats();
  const std::uint64_t accounted = stats_out.device_jobs + stats_out.cpu_small_jobs +
                                  stats_out.cpu_failover_jobs + stats_out.cpu_dead_device_jobs;
  EXPECT_EQ(accounted, std::uint64_t{kThreads * kJobsPerThread});
}

TEST(Batcher, ManyThreadsMatchRef) {
  FakeDevice device(2);
  BatcherStats stats;
  run_threads(device, -1, stats);
  EXPECT_EQ(stats.device_failures, 0u);
  EXPECT_GT(stats.device_jobs, 0u);
  EXPECT_GT(stats.cpu_small_jobs, 0u);
}

TEST(Batcher, DeviceFailureRedoesTheBatchOnTheCpu) {
  FakeDevice device(2);
  BatcherStats stats;
  run_threads(device, 2, stats);
  EXPECT_EQ(stats.device_failures, 1u);
  EXPECT_GT(stats.cpu_failover_jobs, 0u);
  // After the failure nothing more reaches the device (at most the other in-flight batch).
  const std::size_t batches = device.batch_sizes().size();
  EXPECT_LE(batches, 4u);
  EXPECT_GT(stats.cpu_dead_device_jobs, 0u);
}

// A task that drains a completion queue on the IoContext's thread.
class DrainTask final : public Task {
 public:
  explicit DrainTask(CompletionQueue*& cq) : cq_(cq) {}
  void run() override { cq_->drain(); }

 private:
  CompletionQueue*& cq_;
};

TEST(Batcher, CompletionsArriveThroughAnIoContextPost) {
  Result<std::unique_ptr<IoContext>> made = IoContext::create(8);
  if (!made.is_ok()) GTEST_SKIP() << "no io_uring here: " << made.status().to_string();
  IoContext& io = **made;
  CompletionQueue* cq_ptr = nullptr;
  DrainTask drain_task(cq_ptr);
  // The launcher thread posts the drain task when the queue becomes non-empty. (One Task object
  // may be posted again once its run() has started, which is exactly this pattern.)
  CompletionQueue cq([&io, &drain_task] { io.post(drain_task); });
  cq_ptr = &cq;
  FakeDevice device;
  auto cpu = make_cpu_backend();
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 5; ++i)
    jobs.push_back(encode_job(4096 * (i + 1), 80 + i));
  Batcher batcher(device, *cpu, no_small_jobs());
  for (auto& j : jobs)
    batcher.submit(*j, cq);
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  auto all_done = [&] {
    for (auto& j : jobs) {
      if (j->done() == 0) return false;
    }
    return true;
  };
  while (!all_done() && std::chrono::steady_clock::now() < give_up)
    io.poll(/*wait=*/false);
  ASSERT_TRUE(all_done());
  for (auto& j : jobs) {
    EXPECT_EQ(j->done(), 1);
    EXPECT_EQ(j->thread(), std::this_thread::get_id());
    EXPECT_TRUE(j->matches_ref());
  }
}

}  // namespace
}  // namespace graid::kernels
