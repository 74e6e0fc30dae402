// One socket operation on an IoContext's ring (accept, recv, sendmsg, cancel by fd, or a timer):
// how the NBD server does all its socket I/O on the thread that also runs the array's member I/O,
// sleeping in the one IoContext::poll(). Single-shot, as RingCommand requires; the owner is told
// the CQE's result on the ring's thread and may start the op again from there.
#pragma once

#include <linux/time_types.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <span>

#include "graid/member.h"

namespace graid::nbd {

class SocketOp;

class SocketOpOwner {
 public:
  // `res`: bytes moved, a new fd (accept), 0 (recv: the peer closed), or -errno.
  virtual void on_socket_op(SocketOp& op, std::int32_t res) = 0;

 protected:
  ~SocketOpOwner() = default;
};

class SocketOp final : public RingCommand {
 public:
  explicit SocketOp(SocketOpOwner& owner) : owner_(owner) {}

  // REQUIRES for each: !busy(). The buffer / message must stay valid until completion.
  // recv() waits until `buf` is full (MSG_WAITALL: the exact pieces of the NBD stream);
  // recv_some() completes with whatever arrived (TLS records: their sizes are not known ahead).
  void recv(IoContext& ctx, int fd, std::span<std::byte> buf);
  void recv_some(IoContext& ctx, int fd, std::span<std::byte> buf);
  void sendmsg(IoContext& ctx, int fd, const msghdr* msg);
  void accept(IoContext& ctx, int fd);
  // Cancels every operation in flight on `fd` (IORING_ASYNC_CANCEL_FD | ALL); completes with the
  // number cancelled or -ENOENT.
  void cancel_fd(IoContext& ctx, int fd);
  // Completes after `delay` (IORING_OP_TIMEOUT; -ETIME when it expired).
  void wait(IoContext& ctx, std::chrono::nanoseconds delay);

  bool busy() const noexcept { return busy_; }

  std::int32_t prep(io_uring_sqe& sqe, std::span<std::byte> cmd) override;
  void on_complete(std::int32_t res, std::span<const std::uint64_t> big_cqe) override;

 private:
  enum class Kind : std::uint8_t { kRecv, kRecvSome, kSendMsg, kAccept, kCancelFd, kTimeout };
  void start(IoContext& ctx, Kind kind, int fd);

  SocketOpOwner& owner_;
  Kind kind_ = Kind::kRecv;
  int fd_ = -1;
  std::span<std::byte> buf_;
  const msghdr* msg_ = nullptr;
  __kernel_timespec delay_{};
  bool busy_ = false;
};

}  // namespace graid::nbd
