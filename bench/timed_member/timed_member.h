// A timed member model for benchmarks (`--member-model timed:read=3GB/s,write=2GB/s,lat=80us`):
// a member that serves I/O at a given bandwidth and latency and stores nothing, so that a
// benchmark shows whether the engine keeps drives busy rather than how fast this machine copies
// memory (which is all a member on tmpfs measures).
//
// Each member has a read channel and a write channel, each a FIFO with its own bandwidth: a
// request of `len` bytes starts when its channel is free (or now), holds it for len / bandwidth,
// and completes `latency` after that, so a lone 4 KiB read takes latency + 4 KiB / bandwidth and
// a deep queue moves exactly `bandwidth` bytes per second. Channels are shared by every thread
// (an atomic "free at" time each); the wait is an io_uring timeout on the submitting thread's
// ring (IORING_OP_TIMEOUT, absolute), so no CPU is spent waiting and completions arrive in
// IoContext::poll() like any member I/O. The blocking calls (read_sync, write_sync: metadata,
// and the jobs that copy with them) take the same channels and sleep until their time
// (clock_nanosleep, absolute). Flushes complete after `latency`; discards and write-zeroes at
// once.
//
// Data: the first `stored_head` bytes (the metadata area: superblocks, bitmap, journal) are kept
// in memory and read back as written, through both the asynchronous and the blocking paths;
// beyond them writes are discarded and reads leave the buffer as it is. Never for correctness
// tests: a benchmark on timed members cannot verify data.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "graid/member.h"
#include "graid/status.h"

namespace graid::bench {

struct TimedModel {
  double read_bytes_per_s = 0;
  double write_bytes_per_s = 0;
  std::uint64_t latency_ns = 0;
};

// Parses "timed:read=3GB/s,write=2GB/s,lat=80us" (bandwidths with an optional k/M/G prefix,
// decimal, B/s; latency in ns, us, ms or s). Every key is required once; anything else is
// refused with a message that says what is wrong.
Result<TimedModel> parse_timed_model(std::string_view text);

// "timed: read 3.00 GB/s, write 2.00 GB/s, latency 80 us".
std::string describe(const TimedModel& model);

class TimedMember final : public MemberDevice {
 public:
  static constexpr std::uint64_t kDefaultStoredHead = 16u << 20;

  TimedMember(std::string name, std::uint64_t size, const TimedModel& model,
              std::uint64_t stored_head = kDefaultStoredHead);
  ~TimedMember() override;

  const std::string& path() const noexcept override { return name_; }
  std::uint64_t size() const noexcept override { return size_; }
  std::uint32_t logical_block_size() const noexcept override { return 4096; }
  Status zero_range(std::uint64_t offset, std::uint64_t len) override;
  void submit(IoContext& ctx, MemberRequest& req) override;
  Status read_sync(std::uint64_t offset, std::span<std::byte> buf) override;
  Status write_sync(std::uint64_t offset, std::span<const std::byte> buf) override;
  Status flush_sync() override;

  // Bytes served so far, per direction (for the benchmarks' own checks).
  std::uint64_t bytes_read() const noexcept { return bytes_read_.load(); }
  std::uint64_t bytes_written() const noexcept { return bytes_written_.load(); }

 private:
  class Timer;
  struct TimerPool;
  static TimerPool& timer_pool();
  // When a request of `len` bytes on `channel` (bytes per second `bw`) submitted at `now`
  // completes, on CLOCK_MONOTONIC in ns; moves the channel's free time.
  std::uint64_t schedule(std::atomic<std::uint64_t>& channel, double bw, std::uint32_t len,
                         std::uint64_t now) noexcept;
  void copy_head(MemberOp op, std::uint64_t offset, std::byte* buf, std::uint64_t len);

  std::string name_;
  std::uint64_t size_;
  TimedModel model_;
  std::mutex head_mutex_;
  std::vector<std::byte> head_;  // guarded by head_mutex_ (metadata I/O only)
  std::atomic<std::uint64_t> read_free_{0};
  std::atomic<std::uint64_t> write_free_{0};
  std::atomic<std::uint64_t> bytes_read_{0};
  std::atomic<std::uint64_t> bytes_written_{0};
};

}  // namespace graid::bench
