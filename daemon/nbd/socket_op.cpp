#include "nbd/socket_op.h"

#include <liburing.h>

#include <cassert>
#include <climits>

namespace graid::nbd {

void SocketOp::start(IoContext& ctx, Kind kind, int fd) {
  assert(!busy_);
  kind_ = kind;
  fd_ = fd;
  busy_ = true;
  ctx.submit_command(*this);
}

void SocketOp::recv(IoContext& ctx, int fd, std::span<std::byte> buf) {
  buf_ = buf;
  start(ctx, Kind::kRecv, fd);
}

void SocketOp::recv_some(IoContext& ctx, int fd, std::span<std::byte> buf) {
  buf_ = buf;
  start(ctx, Kind::kRecvSome, fd);
}

void SocketOp::sendmsg(IoContext& ctx, int fd, const msghdr* msg) {
  msg_ = msg;
  start(ctx, Kind::kSendMsg, fd);
}

void SocketOp::accept(IoContext& ctx, int fd) {
  start(ctx, Kind::kAccept, fd);
}

void SocketOp::cancel_fd(IoContext& ctx, int fd) {
  start(ctx, Kind::kCancelFd, fd);
}

void SocketOp::wait(IoContext& ctx, std::chrono::nanoseconds delay) {
  const auto ns = delay.count() > 0 ? delay.count() : 0;
  delay_.tv_sec = ns / 1'000'000'000;
  delay_.tv_nsec = ns % 1'000'000'000;
  start(ctx, Kind::kTimeout, -1);
}

std::int32_t SocketOp::prep(io_uring_sqe& sqe, std::span<std::byte> /*cmd*/) {
  switch (kind_) {
    case Kind::kRecv:
    case Kind::kRecvSome: {
      // At most INT_MAX per call (a CQE result is an int); the owner resubmits for the rest.
      const std::size_t len = buf_.size() < INT_MAX ? buf_.size() : INT_MAX;
      io_uring_prep_recv(&sqe, fd_, buf_.data(), len, kind_ == Kind::kRecv ? MSG_WAITALL : 0);
      return 0;
    }
    case Kind::kSendMsg:
      // MSG_NOSIGNAL: a peer that went away is an -EPIPE result, not a SIGPIPE for the daemon.
      io_uring_prep_sendmsg(&sqe, fd_, msg_, MSG_NOSIGNAL);
      return 0;
    case Kind::kAccept:
      io_uring_prep_accept(&sqe, fd_, nullptr, nullptr, SOCK_CLOEXEC);
      return 0;
    case Kind::kCancelFd:
      io_uring_prep_cancel_fd(&sqe, fd_, IORING_ASYNC_CANCEL_ALL);
      return 0;
    case Kind::kTimeout:
      io_uring_prep_timeout(&sqe, &delay_, 0, 0);
      return 0;
  }
  return -EINVAL;
}

void SocketOp::on_complete(std::int32_t res, std::span<const std::uint64_t> /*big_cqe*/) {
  busy_ = false;
  owner_.on_socket_op(*this, res);
}

}  // namespace graid::nbd
