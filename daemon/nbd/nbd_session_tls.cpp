// NbdSession's TLS: the handshake after NBD_OPT_STARTTLS, reads that decrypt, sends that encrypt
// (nbd_session.h, "TLS"; the GnuTLS side is nbd_tls.h).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "nbd/nbd_session.h"

namespace graid::nbd {
namespace {

// Plaintext encrypted per sendmsg: bounds the ciphertext a connection holds at once.
constexpr std::size_t kTlsChunk = 256 * 1024;

}  // namespace

void NbdSession::tls_start() {
  auto tls = TlsServerSession::create(shared_.options.tls);
  if (!tls.is_ok()) {
    spdlog::warn("nbd: {}: closing a connection: {}", peer_, tls.status().to_string());
    return hard_close();
  }
  tls_ = std::move(*tls);
  tls_handshake_step();
}

void NbdSession::tls_handshake_step() {
  const TlsServerSession::Progress p = tls_->handshake();
  tls_flush_control();
  switch (p) {
    case TlsServerSession::Progress::kDone:
      spdlog::debug("nbd: TLS with PSK identity '{}'", tls_->identity());
      return read_into(hs_in_, Recv::kOptionHeader);
    case TlsServerSession::Progress::kWantInput:
      recv_dst_ = {};
      recv_got_ = 0;
      recv_purpose_ = Recv::kTlsHandshake;
      if (done_reading_) return;
      recv_op_.recv_some(shared_.ctx, fd_, tls_->input_space());
      return;
    case TlsServerSession::Progress::kFailed:
      return fail_handshake(NbdServer::Shared::HandshakeEnd::kTlsFailed,
                            "TLS handshake failed: " + tls_->error());
  }
}

void NbdSession::tls_on_recv(std::size_t n) {
  tls_->received(n);
  if (!tls_->established()) return tls_handshake_step();
  tls_pump_read();
}

void NbdSession::tls_pump_read() {
  for (;;) {
    if (recv_got_ == recv_dst_.size()) {
      tls_flush_control();
      return on_recv_full();
    }
    const auto r = tls_->read(recv_dst_.subspan(recv_got_));
    switch (r.state) {
      case TlsServerSession::ReadResult::State::kData:
        recv_got_ += r.bytes;
        continue;
      case TlsServerSession::ReadResult::State::kWantInput:
        tls_flush_control();
        if (done_reading_) return;
        recv_op_.recv_some(shared_.ctx, fd_, tls_->input_space());
        return;
      case TlsServerSession::ReadResult::State::kClosed:
        return on_recv(0);  // as a socket the client closed
      case TlsServerSession::ReadResult::State::kFailed:
        if (phase_ == Phase::kHandshake)
          return fail_handshake(NbdServer::Shared::HandshakeEnd::kTlsFailed,
                                "TLS: " + tls_->error());
        spdlog::info("nbd: {}: closing a connection: TLS: {}", peer_, tls_->error());
        return hard_close();
    }
  }
}

void NbdSession::tls_flush_control() {
  if (!tls_ || tls_->pending().empty() || tls_control_queued_ || broken_) return;
  if (send_op_.busy() || send_head_ != nullptr) return;  // the send under way takes them along
  tls_control_.iovcnt = 0;
  tls_control_queued_ = true;
  queue_send(tls_control_);
}

void NbdSession::tls_start_send(OutMessage& m) {
  if (tls_sent_ >= tls_inflight_.size()) {
    tls_inflight_.clear();
    tls_sent_ = 0;
    // Records GnuTLS queued on its own go first; then the next chunk of this message.
    if (tls_->pending().empty() && tls_->established()) {
      std::size_t budget = kTlsChunk;
      while (budget > 0 && m.iov_index < m.iovcnt) {
        iovec& v = m.iov[m.iov_index];
        const std::size_t take = std::min(v.iov_len, budget);
        if (take > 0) {
          if (Status st = tls_->write({static_cast<const std::byte*>(v.iov_base), take}); !st) {
            spdlog::info("nbd: {}: closing a connection: {}", peer_, st.to_string());
            return hard_close();
          }
        }
        v.iov_base = static_cast<std::byte*>(v.iov_base) + take;
        v.iov_len -= take;
        budget -= take;
        if (v.iov_len == 0) ++m.iov_index;
      }
    }
    tls_inflight_.swap(tls_->pending());
    if (tls_inflight_.empty()) return head_sent();  // nothing (left) to send
  }
  tls_iov_ = iovec{tls_inflight_.data() + tls_sent_, tls_inflight_.size() - tls_sent_};
  send_msg_ = msghdr{};
  send_msg_.msg_iov = &tls_iov_;
  send_msg_.msg_iovlen = 1;
  send_op_.sendmsg(shared_.ctx, fd_, &send_msg_);
}

bool NbdSession::tls_sent(OutMessage& m, std::size_t n) {
  tls_sent_ += n;
  if (tls_sent_ < tls_inflight_.size()) return true;
  while (m.iov_index < m.iovcnt && m.iov[m.iov_index].iov_len == 0)
    ++m.iov_index;
  return m.iov_index < m.iovcnt || !tls_->pending().empty();
}

}  // namespace graid::nbd
