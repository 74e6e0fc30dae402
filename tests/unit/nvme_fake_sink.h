// A fake CommandSink for nvme::IoOp tests: it records the SQEs the op's commands and retry timers
// fill, and the test completes them when and how it likes.
#pragma once

#include <gtest/gtest.h>
#include <liburing.h>
#include <linux/nvme_ioctl.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <deque>
#include <span>
#include <string>

#include "io/nvme_io_op.h"

namespace graid::nvme::testing {

// What one prepared SQE said.
struct Sent {
  RingCommand* cmd = nullptr;
  nvme_uring_cmd nvme{};
  std::uint8_t opcode = 0;
  std::uint32_t cmd_op = 0;
  std::uint32_t uring_cmd_flags = 0;
  std::uint16_t buf_index = 0;
};

// A retry timer as its SQE asked for it.
struct Timer {
  RingCommand* cmd = nullptr;
  std::int64_t wait_ns = 0;
};

// Records commands; the test completes them when and how it likes. prep runs at submit, into a
// zeroed 128-byte SQE, as an SQE128 IoContext does. Its clock moves only when a timer expires
// (by that timer's wait), so waits are measured exactly, not by the wall clock.
class FakeSink final : public CommandSink {
 public:
  void submit_timer(RingCommand& cmd) override {
    alignas(64) std::byte sqe_bytes[128] = {};
    auto& sqe = *reinterpret_cast<io_uring_sqe*>(sqe_bytes);
    constexpr std::size_t kCmdOffset = offsetof(io_uring_sqe, addr3);
    ASSERT_EQ(cmd.prep(sqe, {sqe_bytes + kCmdOffset, sizeof(sqe_bytes) - kCmdOffset}), 0);
    ASSERT_EQ(sqe.opcode, IORING_OP_TIMEOUT);
    EXPECT_EQ(sqe.len, 1U);
    EXPECT_EQ(sqe.off, 0U) << "a pure timer: no completion count";
    EXPECT_EQ(sqe.timeout_flags, 0U) << "relative";
    // The kernel reads the timespec when the SQE is submitted, as this does.
    const auto* ts = reinterpret_cast<const __kernel_timespec*>(sqe.addr);
    timers.push_back({&cmd, ts->tv_sec * 1'000'000'000 + ts->tv_nsec});
  }
  std::int64_t now_ns() const override { return now; }
  // Lets the oldest timer expire; returns its wait.
  std::int64_t expire_timer() {
    const Timer t = timers.at(0);
    timers.pop_front();
    now += t.wait_ns;
    t.cmd->on_complete(-ETIME, {});
    return t.wait_ns;
  }
  void submit(RingCommand& cmd) override {
    alignas(64) std::byte sqe_bytes[128] = {};
    auto& sqe = *reinterpret_cast<io_uring_sqe*>(sqe_bytes);
    constexpr std::size_t kCmdOffset = offsetof(io_uring_sqe, addr3);
    const std::int32_t err =
        cmd.prep(sqe, {sqe_bytes + kCmdOffset, sizeof(sqe_bytes) - kCmdOffset});
    ASSERT_EQ(err, 0);
    Sent s;
    s.cmd = &cmd;
    std::memcpy(&s.nvme, sqe_bytes + kCmdOffset, sizeof(s.nvme));
    s.opcode = sqe.opcode;
    s.cmd_op = sqe.cmd_op;
    s.uring_cmd_flags = sqe.uring_cmd_flags;
    s.buf_index = sqe.buf_index;
    pending.push_back(s);
    ++submitted;
  }
  std::optional<std::uint16_t> registered_buffer(const std::byte* p,
                                                 std::size_t len) const override {
    if (region.data() != nullptr && p >= region.data() && p + len <= region.data() + region.size())
      return std::uint16_t{3};
    return std::nullopt;
  }
  // Completes the pending command at `i` with `res` and returns what it was.
  Sent complete(std::size_t i, std::int32_t res) {
    Sent s = pending.at(i);
    pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    s.cmd->on_complete(res, {});
    return s;
  }

  std::deque<Sent> pending;
  std::deque<Timer> timers;
  std::int64_t now = 1'000'000'000;
  int submitted = 0;
  std::span<std::byte> region;
};

inline Limits small_limits() {
  Limits l;
  l.nsid = 1;
  l.lba_shift = 9;
  l.max_transfer_bytes = 64 << 10;
  l.max_zeroes_blocks = 1024;
  l.discard = DiscardMethod::kWriteZeroesDeallocate;
  return l;
}

inline const std::string kPath = "/dev/ng-test";

}  // namespace graid::nvme::testing
