// One NBD connection, on the server's thread (internal to graid_nbd).
//
// Life of a session:
//   kHandshake  greeting ─► client flags ─► options (one at a time: each reply is sent before
//               the next option is read) ─► EXPORT_NAME or GO picks an export
//   kTransmission  read a request header ─► [its WRITE payload] ─► start an ArrayIo ─► read the
//               next header at once (pipelining); a completion queues its reply, replies go out
//               in completion order, one sendmsg in flight at a time
//   closing     no more reads (DISC, the client closed, stop(), a protocol violation); requests
//               in flight complete and (unless the socket failed) their replies are sent; then the
//               fd is closed and the server is told, which destroys the session at its next poll.
//               abort() (the server's stop timeout) cancels the socket operations and drops the
//               replies not yet sent instead.
//
// Every ArrayIo a session starts completes exactly once (the engine's contract) and the session
// is destroyed only after all have: a client that disconnects mid-request leaves its requests to
// finish, their replies dropped.
//
// TLS (docs/nbd.md): an export with keys (NbdServerOptions::tls) requires NBD_OPT_STARTTLS
// before any other option but ABORT. After its reply the session runs a TLS handshake (its own
// recv and sendmsg carry the records; nbd_tls.h) and from then on reads decrypt what the socket
// delivered (a read target may be filled from records already received, without a socket read)
// and every message is encrypted in chunks of at most kTlsChunk into a ciphertext buffer that is
// then sent.
//
// Timeouts: the server's tick calls tick(): a connection still in its handshake after
// `handshake_timeout` is closed at once; one with no request in flight and none received for
// `idle_timeout` is stopped.
//
// Request slots: `max_requests_per_connection` slots, each an ArrayIo with its reply header and
// a data buffer from the server's BufferPool while in use. A parsed header that finds no free
// slot, or whose buffer would take the connection past `max_bytes_per_connection`, waits (the
// socket is not read meanwhile) until a reply has been sent.
#pragma once

#include <sys/uio.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graid/array.h"
#include "nbd/buffer_pool.h"
#include "nbd/nbd_protocol.h"
#include "nbd/nbd_server.h"
#include "nbd/nbd_tls.h"
#include "nbd/socket_op.h"

namespace graid::nbd {

// An export as the server serves it.
struct ServedExport {
  NbdExport spec;
  VdInfo vd;
  ArrayQueue* queue = nullptr;
  ExportLimits limits;
  std::uint32_t preferred_block = 4096;
  std::uint16_t flags = 0;  // transmission flags (SEND_DF is added per session)
};

struct NbdServer::Shared {
  Shared(IoContext& c, const NbdServerOptions& o)
      : ctx(c), options(o), pool(o.buffer_cache_bytes) {}
  // The export `name` selects: that name, or for "" the only export. nullptr if none.
  const ServedExport* find(std::string_view name) const;

  // A connection that ended its handshake badly (nbd_server.cpp): one debug line, counted into
  // the summary the server logs once per options.log_summary_interval.
  enum class HandshakeEnd : std::uint8_t { kTlsFailed, kProtocol, kTimedOut, kDropped };
  void handshake_ended(HandshakeEnd how, const std::string& peer, std::string_view why);

  IoContext& ctx;
  NbdServerOptions options;
  std::vector<ServedExport> exports;
  std::vector<std::unique_ptr<ArrayQueue>> queues;  // destroyed first, before the VD handles
  BufferPool pool;
  bool stopping = false;
  // Data buffers held by all the server's connections (NbdServerOptions::max_bytes_total), and
  // the connections waiting for some to be released.
  std::uint64_t bytes_in_use = 0;
  std::vector<NbdSession*> budget_waiters;
  NbdServerStats* stats = nullptr;
  NbdServer* server = nullptr;
  // The summary's counts since it was last logged, and the last peer named in it.
  struct HandshakeSummary {
    std::uint64_t tls_failed = 0, protocol = 0, timed_out = 0, dropped = 0;
    std::string last_peer;
    std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
    std::uint64_t total() const noexcept { return tls_failed + protocol + timed_out + dropped; }
  } summary;
  // Clients served and GOs accepted (NbdServer::serving()).
  std::uint32_t serving = 0;
};

class NbdSession final : private SocketOpOwner {
 public:
  NbdSession(NbdServer::Shared& shared, int fd);
  ~NbdSession();
  NbdSession(const NbdSession&) = delete;
  NbdSession& operator=(const NbdSession&) = delete;

  void start();
  // Graceful stop: no more requests are read; those in flight complete and are answered.
  void stop();
  // Closes the connection at once: socket operations in flight are cancelled, replies not yet
  // sent are dropped; requests in the engine still complete before the session finishes.
  void abort();
  bool finished() const noexcept { return finished_; }
  // The server's clock (see above).
  void tick(std::chrono::steady_clock::time_point now);
  // The server's data buffer budget has room again: a connection waiting for it retries.
  void budget_released();
  // Who is connected, once the session is past its handshake (NBD_OPT_GO or EXPORT_NAME, after
  // TLS where it is required): a client using the export. nullopt before.
  std::optional<NbdClientInfo> client() const;
  // Still in its handshake, and not closing: what max_handshakes counts.
  bool handshaking() const noexcept {
    return phase_ == Phase::kHandshake && !admitted_ && !broken_;
  }
  // Who the peer is, for max_handshakes_per_peer: a TCP address without its port, or a unix
  // socket's uid.
  const std::string& peer_key() const noexcept { return peer_key_; }
  const std::string& peer() const noexcept { return peer_; }
  // Closes a connection still in its handshake to make room for a newcomer (counted as dropped).
  void drop_for_newcomer();

 private:
  struct Slot;
  // A reply or handshake message waiting to be sent: up to two pieces (header, data).
  struct OutMessage {
    std::array<iovec, 2> iov{};
    std::size_t iovcnt = 0;
    std::size_t iov_index = 0;  // pieces fully sent
    OutMessage* next = nullptr;
    Slot* slot = nullptr;  // nullptr: the handshake message (or TLS records, `control`)
    bool control = false;  // only carries TLS records GnuTLS queued on its own
  };
  struct Slot final : ArrayIo {
    NbdSession* session = nullptr;
    std::uint32_t index = 0;
    RequestHeader request;
    std::uint32_t error = 0;
    std::string message;  // for a structured error chunk
    AlignedBuffer data;
    std::array<std::byte, kErrorChunkMaxSize> head{};
    OutMessage out;
    std::chrono::steady_clock::time_point started;  // submission to the engine
    void on_complete(Status status) override;
  };
  enum class Phase : std::uint8_t { kHandshake, kTransmission };
  enum class Recv : std::uint8_t {
    kClientFlags,
    kOptionHeader,
    kOptionData,
    kRequestHeader,
    kPayload,
    kDrain,
    kTlsHandshake
  };
  enum class AfterSend : std::uint8_t {
    kReadClientFlags,
    kReadOption,
    kTransmission,
    kClose,
    kStartTls
  };

  void on_socket_op(SocketOp& op, std::int32_t res) override;

  // Socket plumbing (nbd_session.cpp).
  void read_into(std::span<std::byte> dst, Recv purpose);
  void on_recv(std::int32_t res);
  void on_recv_full();
  void queue_send(OutMessage& m);
  void start_send();
  void on_send(std::int32_t res);
  void message_sent(OutMessage& m);
  // The message at the head of the queue is done (sent, or never will be): the next one starts.
  void head_sent();
  void hard_close();
  void stop_reading();
  void maybe_finish();

  // TLS (nbd_session_tls.cpp).
  void tls_start();
  void tls_handshake_step();
  // Fills the read target from decrypted records, reading the socket when they run out.
  void tls_pump_read();
  void tls_on_recv(std::size_t n);
  // Sends the records GnuTLS queued on its own (handshake flights, alerts) when nothing else
  // is being sent.
  void tls_flush_control();
  void tls_start_send(OutMessage& m);
  // After a sendmsg of `n` ciphertext bytes: true while `m` has more to send.
  bool tls_sent(OutMessage& m, std::size_t n);
  // Handshake (nbd_handshake.cpp).
  void send_handshake(std::vector<std::byte> bytes, AfterSend then);
  void handshake_sent();
  void on_client_flags();
  void on_option_header();
  void on_option_data();
  void handle_info_or_go();
  std::uint16_t flags_for(const ServedExport& e) const;

  // Transmission (nbd_requests.cpp).
  void read_next_header();
  void on_request_header();
  void admit();
  void on_payload();
  void on_drained();
  void submit(Slot& slot);
  void on_array_done(Slot& slot, Status status);
  // Adds a finished request to the export's counters (NbdExport::counters), if it has any.
  void count(const Slot& slot, bool ok);
  void reply(Slot& slot);
  void release(Slot& slot);

  NbdServer::Shared& shared_;
  int fd_;
  SocketOp recv_op_{*this};
  SocketOp send_op_{*this};
  SocketOp cancel_op_{*this};  // abort(): cancels recv_op_ and send_op_
  Phase phase_ = Phase::kHandshake;
  std::string peer_;                               // the other end, in words (describe_peer)
  std::string peer_key_;                           // the same without a TCP port (peer_key())
  std::chrono::system_clock::time_point serving_;  // when the transmission phase began
  // A GO (or EXPORT_NAME) was accepted and counted in Shared::serving: its reply is on its way,
  // then the transmission phase. Uncounted when the session finishes.
  bool admitted_ = false;
  // The last time a payload being read got bytes, and a send in flight sent some (io_timeout).
  std::chrono::steady_clock::time_point recv_progress_{};
  std::chrono::steady_clock::time_point send_progress_{};
  // Counts this session as a client (GO, EXPORT_NAME) unless max_connections are served: false
  // then, and the caller refuses.
  bool admit_client();
  // Ends the handshake of a connection that failed it: logged and counted (HandshakeEnd), closed.
  void fail_handshake(NbdServer::Shared::HandshakeEnd how, std::string_view why);

  // Receiving.
  std::span<std::byte> recv_dst_;
  std::size_t recv_got_ = 0;
  Recv recv_purpose_ = Recv::kClientFlags;
  bool done_reading_ = false;  // no read will be started again
  bool broken_ = false;        // the socket failed or we hard-closed: nothing more is sent
  bool finished_ = false;

  // Handshake state.
  std::array<std::byte, kOptionHeaderSize> hs_in_{};
  OptionHeader option_;
  std::vector<std::byte> option_data_;
  std::vector<std::byte> hs_bytes_;
  OutMessage hs_out_;
  AfterSend after_send_ = AfterSend::kReadOption;
  bool fixed_newstyle_ = false;
  bool no_zeroes_ = false;
  bool structured_ = false;
  const ServedExport* export_ = nullptr;

  // Transmission state.
  std::array<std::byte, kRequestHeaderSize> req_in_{};
  RequestHeader pending_;      // parsed, waiting for admission
  bool waiting_ = false;       // pending_ waits for a slot or buffer budget
  Slot* receiving_ = nullptr;  // the slot whose payload is being read or drained
  std::uint32_t drain_left_ = 0;
  std::vector<std::byte> drain_buf_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::uint32_t slots_in_use_ = 0;
  std::uint64_t bytes_in_use_ = 0;

  // TLS: the session, the ciphertext being sent, the message for records of its own.
  std::unique_ptr<TlsServerSession> tls_;
  std::vector<std::byte> tls_inflight_;
  std::size_t tls_sent_ = 0;
  iovec tls_iov_{};
  OutMessage tls_control_;
  bool tls_control_queued_ = false;

  // Timeouts (tick()).
  std::chrono::steady_clock::time_point accepted_at_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_request_ = accepted_at_;
  bool waiting_budget_ = false;  // in Shared::budget_waiters

  // Sending.
  OutMessage* send_head_ = nullptr;
  OutMessage* send_tail_ = nullptr;
  msghdr send_msg_{};
};

}  // namespace graid::nbd
