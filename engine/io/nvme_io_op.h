// One member request on an NVMe passthrough member, in flight as NVMe commands on the thread's
// ring. Internal to engine/io.
//
// A request becomes pieces (nvme::chunk_bytes: MDTS, 65536 blocks, pages); up to kWindow of them
// are in flight at once, each a RingCommand (IORING_OP_URING_CMD, NVME_URING_CMD_IO, the command
// in the SQE128 command area, IORING_URING_CMD_FIXED when the buffer lies in a registered
// region). State machine of the op:
//
//   start ──► running: pieces issued while the window has room and bytes remain
//                │ a piece completes
//                ├─ retryable failure (nvme::retry_delay_ns says how long to wait) ─►
//                │     no wait: same piece again at once
//                │     a wait: the piece's timer (IORING_OP_TIMEOUT on the same ring, so the
//                │             thread never sleeps for it) ─► expires ─► same piece again
//                │             (or, if another piece failed meanwhile, the piece ends)
//                ├─ failure ─► first error kept; no new pieces; wait for those in flight
//                └─ success ─► next piece into the freed window slot
//   last piece in flight (or waiting) done ──► done: req.on_done(len, 0 or the first error),
//                                              op recycled
//
// Completions run where the ring delivers them (inside IoContext::poll, on the submitting
// thread), so the op needs no locking. Ops come from a per-thread free list: no allocation per
// I/O once a thread has warmed up.
#pragma once

#include <linux/time_types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "graid/member.h"
#include "io/nvme_command.h"

namespace graid::nvme {

// Where an op's commands go: an IoContext in the member, a fake in tests.
class CommandSink {
 public:
  // Starts `cmd` (its prep runs now or later; on_complete runs later, never inline).
  virtual void submit(RingCommand& cmd) = 0;
  // The same for an operation on no file (a piece's retry timer).
  virtual void submit_timer(RingCommand& cmd) = 0;
  // The clock that bounds retries, in nanoseconds (IoContext::clock_ns: the thread's pass clock).
  virtual std::int64_t now_ns() const = 0;
  // The registered-buffer index holding [p, +len), if any (IoContext::registered_buffer).
  virtual std::optional<std::uint16_t> registered_buffer(const std::byte* p,
                                                         std::size_t len) const = 0;

 protected:
  ~CommandSink() = default;
};

class IoOp;

// The sink of a real member: the thread's IoContext, commands on the member's file.
class ContextSink final : public CommandSink {
 public:
  void submit(RingCommand& cmd) override { ctx_->submit_command(*file_, cmd); }
  void submit_timer(RingCommand& cmd) override { ctx_->submit_command(cmd); }
  std::int64_t now_ns() const override { return ctx_->clock_ns(); }
  std::optional<std::uint16_t> registered_buffer(const std::byte* p,
                                                 std::size_t len) const override {
    return ctx_->registered_buffer(p, len);
  }

 private:
  friend class IoOp;
  IoContext* ctx_ = nullptr;
  const std::shared_ptr<MemberFile>* file_ = nullptr;
};

class Piece;

// The wait before a piece is sent again: a pure timeout (IORING_OP_TIMEOUT, no count) on the
// piece's ring, completing with -ETIME when it expires.
class RetryTimer final : public RingCommand {
 public:
  std::int32_t prep(io_uring_sqe& sqe, std::span<std::byte> cmd) override;
  void on_complete(std::int32_t res, std::span<const std::uint64_t> big_cqe) override;

 private:
  friend class IoOp;
  friend class Piece;
  Piece* piece_ = nullptr;
  __kernel_timespec wait_{};  // read by the kernel when the SQE is submitted
};

// One piece of a request: one NVMe command.
class Piece final : public RingCommand {
 public:
  Piece() { timer_.piece_ = this; }
  Piece(const Piece&) = delete;
  Piece& operator=(const Piece&) = delete;

  std::int32_t prep(io_uring_sqe& sqe, std::span<std::byte> cmd) override;
  void on_complete(std::int32_t res, std::span<const std::uint64_t> big_cqe) override;

 private:
  friend class IoOp;
  friend class RetryTimer;

  IoOp* op_ = nullptr;
  std::uint64_t offset_ = 0;  // bytes from the request's start
  std::uint32_t len_ = 0;
  RetryState retries_;
  DsmRange range_;  // a deallocate's data: read by the controller while the command runs
  RetryTimer timer_;
};

class IoOp {
 public:
  static constexpr unsigned kWindow = 8;

  IoOp();
  IoOp(const IoOp&) = delete;
  IoOp& operator=(const IoOp&) = delete;

  // Runs `req` (already checked by nvme::check_request) as commands through `sink`; `sink`,
  // `limits` and `path` (named in error messages) outlive the op. `recycle`, when set, gets the
  // op back just before req.on_done runs. REQUIRES: the op is idle (new, or recycled), and the
  // sink never completes a command inline from submit.
  void start(CommandSink& sink, const Limits& limits, const std::string& path, MemberRequest& req,
             void (*recycle)(IoOp&) = nullptr);
  // start() through `ctx` on `file`, giving the op back to this thread's free list when done.
  void start_on(IoContext& ctx, const std::shared_ptr<MemberFile>& file, const Limits& limits,
                const std::string& path, MemberRequest& req);

  bool idle() const noexcept { return req_ == nullptr; }

  // An op from this thread's free list (allocated when the list is empty), and the recycle
  // function that puts it back.
  static IoOp& acquire();
  static void release(IoOp& op);
  // Commands this thread sent with IORING_URING_CMD_FIXED (a registered buffer); for tests.
  static std::uint64_t fixed_buffer_commands() noexcept;

 private:
  friend class Piece;
  friend class RetryTimer;
  std::int32_t prep(Piece& p, io_uring_sqe& sqe, std::span<std::byte> cmd);
  void piece_done(Piece& p, std::int32_t res);
  void timer_done(Piece& p);
  // Whether `p`, failed with `outcome`, is sent again (now, or when its timer expires).
  bool retry(Piece& p, const Outcome& outcome);
  bool take_next(Piece& p);  // assigns the next piece; false when none remains
  void finish();

  ContextSink own_sink_;  // start_on's
  CommandSink* sink_ = nullptr;
  const Limits* limits_ = nullptr;
  const std::string* path_ = nullptr;
  MemberRequest* req_ = nullptr;
  void (*recycle_)(IoOp&) = nullptr;
  std::uint64_t issued_ = 0;  // bytes handed to pieces so far
  bool flush_issued_ = false;
  unsigned active_ = 0;  // pieces in flight
  std::int32_t error_ = 0;
  std::array<Piece, kWindow> pieces_;
};

}  // namespace graid::nvme
