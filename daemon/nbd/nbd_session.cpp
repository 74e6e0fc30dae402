// NbdSession's socket plumbing and life cycle: reads into a target until it is full, a FIFO of
// outgoing messages with one sendmsg in flight, closing. The protocol is in nbd_handshake.cpp and
// nbd_requests.cpp.
#include "nbd/nbd_session.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cassert>

namespace graid::nbd {

namespace {

// The other end of `fd`: in words (the address and port of a TCP peer, the process and user of a
// unix socket peer, from SO_PEERCRED), and as a key that groups one peer's connections (the
// address without the port; the uid).
struct Peer {
  std::string text = "unknown peer";
  std::string key = "unknown";
};

Peer describe_peer(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return {};
  char host[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return {fmt::format("tcp {}:{}", host, ntohs(in->sin_port)), host};
  }
  if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    return {fmt::format("tcp [{}]:{}", host, ntohs(in6->sin6_port)), host};
  }
  if (addr.ss_family == AF_UNIX) {
    ucred cred{};
    socklen_t clen = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0)
      return {fmt::format("unix (pid {}, uid {})", cred.pid, cred.uid),
              fmt::format("uid {}", cred.uid)};
    return {"unix", "unix"};
  }
  return {};
}

}  // namespace

NbdSession::NbdSession(NbdServer::Shared& shared, int fd) : shared_(shared), fd_(fd) {
  Peer peer = describe_peer(fd);
  peer_ = std::move(peer.text);
  peer_key_ = std::move(peer.key);
  const std::uint32_t n = shared.options.max_requests_per_connection;
  slots_.reserve(n);
  free_slots_.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    auto s = std::make_unique<Slot>();
    s->session = this;
    s->index = i;
    s->out.slot = s.get();
    slots_.push_back(std::move(s));
    free_slots_.push_back(n - 1 - i);
  }
  tls_control_.control = true;
}

std::optional<NbdClientInfo> NbdSession::client() const {
  if (phase_ != Phase::kTransmission || finished_) return std::nullopt;
  return NbdClientInfo{peer_, serving_};
}

NbdSession::~NbdSession() {
  // Destroyed by the server only once finished (nothing in flight); a server torn down early
  // still must not leak the descriptor.
  assert(finished_ || (!recv_op_.busy() && !send_op_.busy() && !cancel_op_.busy()));
  if (fd_ >= 0) ::close(fd_);
  std::erase(shared_.budget_waiters, this);
}

void NbdSession::start() {
  const auto greeting = encode_greeting();
  send_handshake(std::vector<std::byte>(greeting.begin(), greeting.end()),
                 AfterSend::kReadClientFlags);
}

void NbdSession::tick(std::chrono::steady_clock::time_point now) {
  if (finished_ || broken_) return;
  const NbdServerOptions& o = shared_.options;
  if (phase_ == Phase::kHandshake && !admitted_) {
    if (o.handshake_timeout.count() > 0 && now - accepted_at_ > o.handshake_timeout) {
      ++shared_.stats->timed_out;
      shared_.handshake_ended(
          NbdServer::Shared::HandshakeEnd::kTimedOut, peer_,
          fmt::format("still in its handshake after {} ms", o.handshake_timeout.count()));
      abort();
    }
    return;
  }
  // A request whose data stops arriving, or replies the client does not read, hold buffers of
  // the server's budget: past io_timeout the connection goes, and they come back.
  if (o.io_timeout.count() > 0) {
    const char* stalled = nullptr;
    if (receiving_ != nullptr && now - recv_progress_ > o.io_timeout) {
      stalled = "a request's data stopped arriving";
    } else if (send_op_.busy() && now - send_progress_ > o.io_timeout) {
      stalled = "it does not read its replies";
    }
    if (stalled != nullptr) {
      ++shared_.stats->timed_out;
      spdlog::info("nbd: {}: closing a connection: {} for {} ms", peer_, stalled,
                   o.io_timeout.count());
      abort();
      return;
    }
  }
  if (o.idle_timeout.count() > 0 && slots_in_use_ == 0 && receiving_ == nullptr && !waiting_ &&
      now - last_request_ > o.idle_timeout) {
    ++shared_.stats->timed_out;
    spdlog::info("nbd: {}: closing a connection idle for {} s", peer_,
                 std::chrono::duration_cast<std::chrono::seconds>(o.idle_timeout).count());
    stop();
  }
}

void NbdSession::drop_for_newcomer() {
  ++shared_.stats->dropped;
  shared_.handshake_ended(NbdServer::Shared::HandshakeEnd::kDropped, peer_,
                          "dropped for a newer connection (max_handshakes)");
  abort();
}

void NbdSession::fail_handshake(NbdServer::Shared::HandshakeEnd how, std::string_view why) {
  shared_.handshake_ended(how, peer_, why);
  hard_close();
}

bool NbdSession::admit_client() {
  if (admitted_) return true;
  if (shared_.serving >= shared_.options.max_connections) {
    ++shared_.stats->refused;
    spdlog::info("nbd: {}: refused: the server serves its maximum of {} clients", peer_,
                 shared_.options.max_connections);
    return false;
  }
  admitted_ = true;
  ++shared_.serving;
  return true;
}

void NbdSession::budget_released() {
  waiting_budget_ = false;
  if (waiting_ && !done_reading_) admit();
  maybe_finish();
}

void NbdSession::stop() {
  if (phase_ == Phase::kHandshake) {
    hard_close();
  } else {
    stop_reading();
  }
  maybe_finish();
}

void NbdSession::abort() {
  hard_close();
  // shutdown() does not wake every kind of socket operation parked in the ring (a sendmsg waiting
  // for room on a unix socket): cancel them.
  if ((recv_op_.busy() || send_op_.busy()) && !cancel_op_.busy() && fd_ >= 0)
    cancel_op_.cancel_fd(shared_.ctx, fd_);
  maybe_finish();
}

void NbdSession::on_socket_op(SocketOp& op, std::int32_t res) {
  if (&op == &cancel_op_) {
    // The cancelled operations complete on their own (-ECANCELED), or already had.
  } else if (&op == &recv_op_) {
    on_recv(res);
  } else {
    on_send(res);
  }
  maybe_finish();
}

void NbdSession::read_into(std::span<std::byte> dst, Recv purpose) {
  assert(!recv_op_.busy());
  recv_dst_ = dst;
  recv_got_ = 0;
  recv_purpose_ = purpose;
  if (done_reading_) return;
  if (tls_) return tls_pump_read();
  recv_op_.recv(shared_.ctx, fd_, dst);
}

void NbdSession::on_recv(std::int32_t res) {
  if (res < 0 && res != -EINTR && res != -EAGAIN) {
    hard_close();  // the connection failed: drop what is left
    return;
  }
  if (res == 0 || done_reading_) {
    // The client closed (or stop() shut our reading side): no more requests. A partly read
    // request (a WRITE whose payload stopped short) is dropped unanswered and unwritten.
    if (receiving_ != nullptr) {
      Slot* s = receiving_;
      receiving_ = nullptr;
      release(*s);
    }
    waiting_ = false;
    done_reading_ = true;
    if (phase_ == Phase::kHandshake) hard_close();
    return;
  }
  if (res > 0) recv_progress_ = std::chrono::steady_clock::now();
  if (tls_) return tls_on_recv(res > 0 ? static_cast<std::size_t>(res) : 0);
  if (res > 0) recv_got_ += static_cast<std::size_t>(res);
  if (recv_got_ < recv_dst_.size()) {
    recv_op_.recv(shared_.ctx, fd_, recv_dst_.subspan(recv_got_));
    return;
  }
  on_recv_full();
}

void NbdSession::on_recv_full() {
  switch (recv_purpose_) {
    case Recv::kClientFlags:
      return on_client_flags();
    case Recv::kOptionHeader:
      return on_option_header();
    case Recv::kOptionData:
      return on_option_data();
    case Recv::kRequestHeader:
      return on_request_header();
    case Recv::kPayload:
      return on_payload();
    case Recv::kDrain:
      return on_drained();
    case Recv::kTlsHandshake:
      return tls_handshake_step();
  }
}

void NbdSession::queue_send(OutMessage& m) {
  if (broken_) {
    message_sent(m);
    return;
  }
  m.next = nullptr;
  m.iov_index = 0;
  if (send_tail_ != nullptr) {
    send_tail_->next = &m;
  } else {
    send_head_ = &m;
  }
  send_tail_ = &m;
  if (!send_op_.busy()) {
    send_progress_ = std::chrono::steady_clock::now();  // io_timeout counts from here
    start_send();
  }
}

void NbdSession::start_send() {
  OutMessage& m = *send_head_;
  if (tls_) return tls_start_send(m);
  send_msg_ = msghdr{};
  send_msg_.msg_iov = m.iov.data() + m.iov_index;
  send_msg_.msg_iovlen = m.iovcnt - m.iov_index;
  send_op_.sendmsg(shared_.ctx, fd_, &send_msg_);
}

void NbdSession::on_send(std::int32_t res) {
  OutMessage* m = send_head_;
  assert(m != nullptr);
  if (res <= 0 && res != -EINTR && res != -EAGAIN) {
    send_head_ = m->next;
    if (send_head_ == nullptr) send_tail_ = nullptr;
    hard_close();  // releases the rest of the queue
    message_sent(*m);
    return;
  }
  std::size_t left = res > 0 ? static_cast<std::size_t>(res) : 0;
  if (left > 0) send_progress_ = std::chrono::steady_clock::now();
  if (tls_) {
    if (tls_sent(*m, left) && !broken_) return start_send();
    left = 0;
  }
  while (left > 0 && m->iov_index < m->iovcnt) {
    iovec& v = m->iov[m->iov_index];
    if (left >= v.iov_len) {
      left -= v.iov_len;
      ++m->iov_index;
    } else {
      v.iov_base = static_cast<std::byte*>(v.iov_base) + left;
      v.iov_len -= left;
      left = 0;
    }
  }
  // Empty pieces at the end count as sent.
  while (m->iov_index < m->iovcnt && m->iov[m->iov_index].iov_len == 0)
    ++m->iov_index;
  if (m->iov_index < m->iovcnt && !broken_) {
    start_send();  // the rest of it
    return;
  }
  head_sent();
}

void NbdSession::head_sent() {
  // Sent, or the connection is gone and the rest never will be.
  OutMessage* m = send_head_;
  send_head_ = m->next;
  if (send_head_ == nullptr) send_tail_ = nullptr;
  message_sent(*m);
  if (send_head_ != nullptr && !broken_ && !send_op_.busy()) start_send();
}

void NbdSession::message_sent(OutMessage& m) {
  if (m.control) {
    tls_control_queued_ = false;
  } else if (m.slot != nullptr) {
    release(*m.slot);
  } else if (!broken_) {
    handshake_sent();
  }
}

void NbdSession::hard_close() {
  if (broken_) return;
  broken_ = true;
  done_reading_ = true;
  waiting_ = false;
  ::shutdown(fd_, SHUT_RDWR);  // wakes a recv or send in flight
  if (receiving_ != nullptr) {
    Slot* s = receiving_;
    receiving_ = nullptr;
    release(*s);
  }
  // Drop every queued message except one a sendmsg in flight is using.
  OutMessage* m = send_head_;
  if (send_op_.busy() && m != nullptr) {
    OutMessage* rest = m->next;
    m->next = nullptr;
    send_tail_ = m;
    m = rest;
  } else {
    send_head_ = send_tail_ = nullptr;
  }
  while (m != nullptr) {
    OutMessage* next = m->next;
    message_sent(*m);
    m = next;
  }
}

void NbdSession::stop_reading() {
  if (done_reading_) return;
  done_reading_ = true;
  // A recv in flight returns 0 once our reading side is shut; the writing side stays open for
  // the replies still to come.
  if (recv_op_.busy()) ::shutdown(fd_, SHUT_RD);
  if (receiving_ == nullptr && !waiting_) return;
  // A request half received (or waiting for a slot) when reading stops is not served.
  if (receiving_ != nullptr && !recv_op_.busy()) {
    Slot* s = receiving_;
    receiving_ = nullptr;
    release(*s);
  }
  waiting_ = false;
}

void NbdSession::maybe_finish() {
  if (finished_ || !done_reading_ || waiting_ || receiving_ != nullptr) return;
  if (recv_op_.busy() || send_op_.busy() || cancel_op_.busy() || send_head_ != nullptr ||
      slots_in_use_ != 0)
    return;
  finished_ = true;
  if (admitted_) --shared_.serving;
  std::erase(shared_.budget_waiters, this);
  ::close(fd_);
  fd_ = -1;
  shared_.server->session_finished(*this);
}

}  // namespace graid::nbd
