#include "array_run.h"

#include <liburing.h>

#include <algorithm>
#include <bit>
#include <memory>
#include <thread>
#include <vector>

#include "graid/array.h"
#include "graid/buffer.h"
#include "graid/member.h"
#include "workload.h"

namespace graid::bench {

namespace {

constexpr std::size_t kBufferAlign = 4096;

class ArrayWorker;

// One in-flight slot: a preallocated request, reused for the whole run.
class BenchIo final : public ArrayIo {
 public:
  ArrayWorker* owner = nullptr;
  std::uint32_t slot = 0;
  Clock::time_point submitted;
  Clock::time_point completed;
  Status outcome;

  void on_complete(Status status) override;
};

class ArrayWorker final : public TimedWorker {
 public:
  ArrayWorker(Array& array, const ArrayRunConfig& config, std::uint32_t thread)
      : array_(array),
        config_(config),
        offsets_(config.profile.pattern,
                 thread_region(config.profile, config.span, config.timing.threads, thread),
                 config.profile.block_bytes),
        rng_(thread_seed(config.seed, thread)),
        slots_(std::make_unique<BenchIo[]>(config.queue_depth)) {
    done_.reserve(config.queue_depth);
  }

  Status setup() {
    // Room in the ring for every member I/O the in-flight requests can fan out to: a request
    // touches at most ceil(block / strip) + 1 strips, each written to at most every member.
    const Geometry& g = array_.geometry();
    const std::uint64_t strips = config_.profile.block_bytes / g.strip_bytes() + 2;
    const std::uint64_t member_ios = std::uint64_t{config_.queue_depth} * strips * g.members();
    const auto ring_depth =
        static_cast<unsigned>(std::clamp<std::uint64_t>(std::bit_ceil(member_ios), 64, 4096));
    auto ctx = IoContext::create(member_ring_options(ring_depth));
    if (!ctx.is_ok()) return ctx.status();
    ctx_ = std::move(*ctx);
    auto queue = array_.attach(*ctx_);
    if (!queue.is_ok()) return queue.status();
    queue_ = std::move(*queue);

    // Separate read and write areas, so writes always carry the random data they were given
    // rather than whatever a read brought in.
    const std::size_t area = std::size_t{config_.profile.block_bytes} * config_.queue_depth;
    auto buffer = AlignedBuffer::allocate(2 * area, kBufferAlign);
    if (!buffer.is_ok()) return buffer.status();
    buffer_ = std::move(*buffer);
    fill_random(buffer_.span().subspan(area), rng_);  // also pre-faults every page
    for (std::uint32_t i = 0; i < config_.queue_depth; ++i) {
      slots_[i].owner = this;
      slots_[i].slot = i;
    }
    return Status::ok();
  }

  ArrayWorker(const ArrayWorker&) = delete;
  ArrayWorker& operator=(const ArrayWorker&) = delete;
  // The queue must go before its IoContext; members are destroyed in reverse order.
  ~ArrayWorker() override = default;

  void completed(BenchIo& io, Status status) {
    io.completed = Clock::now();
    io.outcome = std::move(status);
    done_.push_back(io.slot);
  }

  Status run(const Window& window, ThreadTally& tally) override {
    if (config_.target_iops > 0) return run_paced(window, tally);
    std::this_thread::sleep_until(window.start);
    Status error;
    const Clock::time_point first = Clock::now();
    for (std::uint32_t i = 0; i < config_.queue_depth; ++i)
      issue(i, first);
    while (queue_->in_flight() > 0) {
      ctx_->poll(true);
      if (done_.empty()) continue;
      // Resubmit after poll() returns, not from inside on_complete: the engine coalesces the
      // writes submitted between two polls, and nothing re-enters it from its completion path.
      const Clock::time_point now = Clock::now();
      const bool more = window.open_at(now);
      for (std::uint32_t slot : done_) {
        if (!settle(window, slots_[slot], tally, error)) continue;
        if (more && error.is_ok()) issue(slot, now);
      }
      done_.clear();
    }
    return error;
  }

 private:
  // Wakes the worker's poll(true) at a due time: an absolute io_uring timeout on the worker's
  // own ring (no timer thread: one that woke every tick cost this 2-core machine half its 4K
  // read IOPS). Armed only while a slot is free and the next request is not yet due, at most one
  // at a time and at least kMinTick ahead, so a worker kept busy by completions rarely arms one.
  class DueTimer final : public RingCommand {
   public:
    static constexpr std::chrono::microseconds kMinTick{20};
    bool armed = false;
    void arm(IoContext& ctx, Clock::time_point at) {
      const auto ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
      ts_.tv_sec = ns / 1'000'000'000;
      ts_.tv_nsec = ns % 1'000'000'000;
      armed = true;
      ctx.submit_command(*this);
    }
    std::int32_t prep(io_uring_sqe& sqe, std::span<std::byte>) override {
      // steady_clock is CLOCK_MONOTONIC, the clock an absolute io_uring timeout uses.
      io_uring_prep_timeout(&sqe, &ts_, 0, IORING_TIMEOUT_ABS);
      return 0;
    }
    void on_complete(std::int32_t, std::span<const std::uint64_t>) override { armed = false; }

   private:
    __kernel_timespec ts_{};
  };

  // A completed request: tallied when inside the window, or, failed, its error kept in `error`
  // unless an earlier one is there. False when it failed.
  bool settle(const Window& window, const BenchIo& io, ThreadTally& tally, Status& error) {
    if (!io.outcome.is_ok()) {
      if (error.is_ok()) {
        error = make_error(io.outcome.code(), "array {} of {} bytes at {}: {}",
                           io.kind == IoKind::kRead ? "read" : "write", io.len, io.offset,
                           io.outcome.message());
      }
      return false;
    }
    if (!window.counts(io.completed)) return true;
    (io.kind == IoKind::kRead ? tally.reads : tally.writes) += 1;
    tally.bytes += io.len;
    tally.latency_ns.record(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(io.completed - io.submitted).count()));
    return true;
  }

  // Open loop: request n of this thread is due at start + n / rate; it goes as soon as it is due
  // and a slot is free, and its latency counts from when it was due.
  Status run_paced(const Window& window, ThreadTally& tally) {
    const double rate = config_.target_iops / config_.timing.threads;
    const auto due_of = [&](std::uint64_t n) {
      return window.start + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(static_cast<double>(n) / rate));
    };
    std::vector<std::uint32_t> free_slots;
    for (std::uint32_t i = config_.queue_depth; i-- > 0;)
      free_slots.push_back(i);
    DueTimer timer;
    std::this_thread::sleep_until(window.start);
    Status error;
    std::uint64_t next = 0;
    for (;;) {
      const Clock::time_point now = Clock::now();
      const bool open = window.open_at(now) && error.is_ok();
      while (open && !free_slots.empty() && due_of(next) <= now) {
        const std::uint32_t slot = free_slots.back();
        free_slots.pop_back();
        issue(slot, due_of(next));
        ++next;
      }
      if (!open && queue_->in_flight() == 0) break;
      if (open && !free_slots.empty() && !timer.armed)
        timer.arm(*ctx_, std::max(due_of(next), now + DueTimer::kMinTick));
      ctx_->poll(true);
      for (std::uint32_t slot : done_) {
        settle(window, slots_[slot], tally, error);
        free_slots.push_back(slot);
      }
      done_.clear();
    }
    while (timer.armed)
      ctx_->poll(true);  // the timer's SQE refers to it until it completes
    return error;
  }

  void issue(std::uint32_t slot, Clock::time_point now) {
    BenchIo& io = slots_[slot];
    const std::size_t block = config_.profile.block_bytes;
    const bool read = next_is_read(rng_, config_.profile.read_percent);
    const std::size_t area = block * config_.queue_depth;
    io.kind = read ? IoKind::kRead : IoKind::kWrite;
    io.offset = offsets_.next(rng_);
    io.len = config_.profile.block_bytes;
    io.buf = buffer_.data() + (read ? 0 : area) + slot * block;
    io.submitted = now;
    queue_->submit(io);
  }

  Array& array_;
  const ArrayRunConfig& config_;
  OffsetStream offsets_;
  Rng rng_;
  std::unique_ptr<BenchIo[]> slots_;
  std::vector<std::uint32_t> done_;
  AlignedBuffer buffer_;
  std::unique_ptr<IoContext> ctx_;
  std::unique_ptr<ArrayQueue> queue_;  // after ctx_: destroyed first
};

void BenchIo::on_complete(Status status) {
  owner->completed(*this, std::move(status));
}

}  // namespace

Result<RunFigures> run_array_workload(ArraySession& session, const ArrayRunConfig& config) {
  const std::uint64_t block = config.profile.block_bytes;
  if (config.span / block < std::uint64_t{config.timing.threads}) {
    return make_error(Errc::kInvalidArgument,
                      "a span of {} bytes cannot give {} threads a {}-byte block each", config.span,
                      config.timing.threads, block);
  }
  Array& array = session.array();
  return run_timed(config.timing,
                   [&](std::uint32_t thread) -> Result<std::unique_ptr<TimedWorker>> {
                     auto worker = std::make_unique<ArrayWorker>(array, config, thread);
                     GRAID_RETURN_IF_ERROR(worker->setup());
                     return std::unique_ptr<TimedWorker>(std::move(worker));
                   });
}

}  // namespace graid::bench
