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
//                ├─ retryable failure (DNR clear, -EAGAIN/-EINTR), budget left ─► same piece again
//                ├─ failure ─► first error kept; no new pieces; wait for those in flight
//                └─ success ─► next piece into the freed window slot
//   last piece in flight done ──► done: req.on_done(len, 0 or the first error), op recycled
//
// Completions run where the ring delivers them (inside IoContext::poll, on the submitting
// thread), so the op needs no locking. Ops come from a per-thread free list: no allocation per
// I/O once a thread has warmed up.
#pragma once

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
  std::optional<std::uint16_t> registered_buffer(const std::byte* p,
                                                 std::size_t len) const override {
    return ctx_->registered_buffer(p, len);
  }

 private:
  friend class IoOp;
  IoContext* ctx_ = nullptr;
  const std::shared_ptr<MemberFile>* file_ = nullptr;
};

// One piece of a request: one NVMe command.
class Piece final : public RingCommand {
 public:
  std::int32_t prep(io_uring_sqe& sqe, std::span<std::byte> cmd) override;
  void on_complete(std::int32_t res, std::span<const std::uint64_t> big_cqe) override;

 private:
  friend class IoOp;

  IoOp* op_ = nullptr;
  std::uint64_t offset_ = 0;  // bytes from the request's start
  std::uint32_t len_ = 0;
  std::uint16_t retries_ = 0;
  DsmRange range_;  // a deallocate's data: read by the controller while the command runs
};

class IoOp {
 public:
  static constexpr unsigned kWindow = 8;
  // Resubmissions of one piece: DNR-clear statuses (the kernel's nvme_max_retries is 5 tries),
  // and -EAGAIN/-EINTR from the kernel (as IoContext does for member requests).
  static constexpr std::uint16_t kStatusRetries = 4;
  static constexpr std::uint16_t kAgainRetries = 1000;

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
  std::int32_t prep(Piece& p, io_uring_sqe& sqe, std::span<std::byte> cmd);
  void piece_done(Piece& p, std::int32_t res);
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
