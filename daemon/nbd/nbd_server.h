// The NBD server: serves VDs of graid arrays over the NBD protocol (fixed newstyle, structured
// replies) on a unix socket and/or TCP, entirely on one thread's IoContext.
//
// Threading (the daemon's I/O thread model): the thread that owns the IoContext creates the
// server, runs it (run(), or start() and its own poll loop) and destroys it. Accepts, socket
// reads and writes are RingCommands on that context's ring and every request becomes an ArrayIo
// on that thread's ArrayQueue (one per array, attached at create() and shared by all the
// server's connections), so the thread sleeps in one IoContext::poll() for network and member
// I/O alike, and nothing is locked. Only stop() may be called from other threads.
//
//   accept ─► NbdSession: handshake (options) ─► transmission: header ─► [payload] ─► ArrayIo
//                                                     ▲ up to N in flight      │ completion
//                                                     └──── reply (any order) ◄┘
//
// Each connection has at most `max_requests_per_connection` requests in flight and at most
// `max_bytes_per_connection` of data buffers (from a BufferPool shared by the server's
// connections); while either is reached the connection's socket is not read (back-pressure).
// A READ or WRITE carries at most kMaxPayload (32 MiB). See docs/nbd.md.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graid/array.h"
#include "graid/member.h"
#include "graid/status.h"
#include "nbd/socket_op.h"

namespace graid::nbd {

class TlsPskKeys;  // nbd_tls.h

// Counters of one export's requests, kept by the server's thread (single writer, relaxed atomics)
// and readable from any thread (graidd's `stats`). Share one between exports or servers to sum.
struct NbdExportCounters {
  std::atomic<std::uint64_t> reads{0}, writes{0}, flushes{0}, trims{0}, write_zeroes{0};
  std::atomic<std::uint64_t> read_bytes{0}, write_bytes{0};  // of successful requests
  std::atomic<std::uint64_t> errors{0};                      // requests answered with an error
  // Latency of the requests above, from submission to the engine to its completion, in the
  // engine's buckets (graid::latency_bucket: bucket 0 < 1 us, bucket i [2^(i-1), 2^i) us).
  std::array<std::atomic<std::uint64_t>, kLatencyBuckets> latency{};
  std::atomic<std::uint64_t> latency_sum_us{0};  // their sum (a Prometheus histogram's _sum)
};

// One export: a VD of an array under a name.
struct NbdExport {
  std::string name;
  std::string description;
  Array* array = nullptr;  // not owned; must outlive the server
  VdInfo vd;               // the extent served (ignored when `handle` is set)
  VdHandle handle;         // optional: an open VD, kept open while the server lives
  bool read_only = false;
  // Optional: counted into while the server runs (not owned beyond the shared pointer).
  std::shared_ptr<NbdExportCounters> counters;
};

struct NbdServerOptions {
  // A unix socket to listen on (created mode 0600; a stale socket file there is replaced, a
  // live one or any other file is refused). Empty: none.
  std::string unix_path;
  // TCP: listen when set; `tcp_address` is an IPv4 or IPv6 literal, loopback by default. Port 0
  // picks a free port (tcp_port() says which).
  bool tcp = false;
  std::string tcp_address = "127.0.0.1";
  std::uint16_t tcp_port = 10809;
  // Clients: connections past their handshake (NBD_OPT_GO or EXPORT_NAME, after TLS where it is
  // required). A GO beyond this is refused (NBD_REP_ERR_POLICY, saying why) and the connection
  // closed. Connections still in their handshake do not count here (max_handshakes).
  std::uint32_t max_connections = 64;
  // Connections still in their handshake, at most: a newcomer beyond this closes the oldest one
  // (so sockets that connect and say nothing cannot keep a key holder out), and beyond
  // max_handshakes_per_peer from one peer (a TCP address; a unix socket's uid), that peer's oldest.
  std::uint32_t max_handshakes = 16;
  std::uint32_t max_handshakes_per_peer = 8;
  // Per connection: requests in flight, and bytes of data buffers they hold.
  std::uint32_t max_requests_per_connection = 16;
  std::uint64_t max_bytes_per_connection = 64u << 20;
  // Free data buffers the server keeps for reuse (all connections together).
  std::uint64_t buffer_cache_bytes = 128u << 20;
  // After stop(), how long connections get to answer the requests they have. A connection still
  // open then (a client that does not read its replies, so a send waits on a full socket) is
  // closed at once: its socket operations are cancelled and the replies it had left are dropped.
  std::chrono::milliseconds stop_timeout{5000};
  // TLS with pre-shared keys (nbd_tls.h): when set, a client must start TLS (NBD_OPT_STARTTLS)
  // before any other option but ABORT; NBD_OPT_EXPORT_NAME before it closes the connection.
  std::shared_ptr<const TlsPskKeys> tls;
  // A connection still in its handshake (TLS included) after this is closed. 0: never.
  std::chrono::milliseconds handshake_timeout{10000};
  // A connection with no request in flight that has sent none for this long is closed. 0:
  // never (the default: a kernel NBD client under a mounted filesystem is idle for long
  // stretches and does not reconnect).
  std::chrono::milliseconds idle_timeout{0};
  // A connection whose request data stops arriving, or whose replies it does not read (a send
  // that makes no progress), for this long is closed at once: what it held (buffers of the
  // server's budget) goes back. 0: never.
  std::chrono::milliseconds io_timeout{30000};
  // Handshakes that failed (TLS, protocol), timed out or were dropped for newcomers are logged
  // one by one at debug level only, and as one summary line per this interval at info level,
  // naming the last peer: a flood of them cannot flood the log.
  std::chrono::milliseconds log_summary_interval{60000};
  // Data buffers the server's connections hold together, shared fairly: a connection may hold
  // at most its share (this over the clients being served) and its next request waits while it
  // would go past that or past this total; but a connection holding none may always take one
  // request of any size, so no client can starve another. So the total stays below this plus
  // one largest request per client. At least one largest request's buffer.
  std::uint64_t max_bytes_total = 256u << 20;
};

// What the server has done (read on the server's thread, or after run() returned).
struct NbdServerStats {
  std::uint64_t connections = 0;  // accepted and served
  std::uint64_t refused = 0;      // accepted and closed (stopping), or a GO past max_connections
  std::uint64_t dropped = 0;      // handshakes closed for newcomers (max_handshakes[_per_peer])
  std::uint64_t timed_out = 0;    // closed for the handshake, idle or io timeout
  std::uint64_t requests = 0;     // transmission requests received
  std::uint64_t errors = 0;       // requests answered with an error
};

// A client using an export (NbdServer::clients): a connection past its handshake.
struct NbdClientInfo {
  std::string peer;  // "tcp 192.0.2.7:51234", "unix (pid 4242, uid 1000)"
  std::chrono::system_clock::time_point since;  // when it began using the export
};

class NbdSession;
struct ServedExport;

class NbdServer final : private SocketOpOwner {
 public:
  // On the thread that owns `ctx`: checks the exports (a name at most once, an array, a VD
  // inside it), binds the listeners and attaches one ArrayQueue per array. kInvalidArgument
  // for bad exports or options, kBusy for a socket path in use, or the socket error.
  static Result<std::unique_ptr<NbdServer>> create(IoContext& ctx, std::vector<NbdExport> exports,
                                                   const NbdServerOptions& options);
  // REQUIRES: on the owning thread; finished(), or start() never called.
  ~NbdServer();
  NbdServer(const NbdServer&) = delete;
  NbdServer& operator=(const NbdServer&) = delete;

  // Starts accepting (on the owning thread).
  void start();
  // start(), then polls the context until finished() (after stop()).
  void run();
  // Asks the server to stop: no more connections; each connection stops reading, finishes the
  // requests it has (their replies are sent), and closes; one still open after the options'
  // stop_timeout is closed at once (docs/nbd.md). Thread-safe; idempotent.
  void stop();
  // True once stopped with no connection or socket operation left.
  bool finished() const noexcept;

  std::uint16_t tcp_port() const noexcept { return tcp_port_; }
  const std::string& unix_path() const noexcept { return unix_path_; }
  const NbdServerStats& stats() const noexcept { return stats_; }
  std::size_t sessions() const noexcept { return sessions_.size(); }
  // The connections past their handshake, using an export now (on the owning thread).
  std::vector<NbdClientInfo> clients() const;
  // Clients served now (and GOs accepted, their reply on its way): what max_connections counts.
  std::uint32_t serving() const noexcept;

  // Internal: what sessions use.
  struct Shared;
  struct Key {  // lets create() use make_unique while nothing else constructs a server
    explicit Key() = default;
  };
  NbdServer(Key, IoContext& ctx);

 private:
  friend class NbdSession;
  class Listener;
  class StopTask final : public Task {
   public:
    explicit StopTask(NbdServer& s) : server_(s) {}
    void run() override;

   private:
    NbdServer& server_;
  };
  class ReapTask final : public Task {
   public:
    explicit ReapTask(NbdServer& s) : server_(s) {}
    void run() override;

   private:
    NbdServer& server_;
  };

  void begin_stop();
  // The stop clock: while stopping with connections open, a tick every kStopTick; past the
  // deadline, the connections left are closed at once.
  void on_socket_op(SocketOp& op, std::int32_t res) override;
  void on_accept(Listener& listener, int fd);
  // Closes the oldest handshake of `peer` (any peer: empty) to make room for a newcomer.
  void drop_oldest_handshake(std::string_view peer);
  void session_finished(NbdSession& session);
  void reap();
  // The log summary of failed, timed out and dropped handshakes (NbdServerOptions), when due.
  void log_summary(std::chrono::steady_clock::time_point now, bool force);

  IoContext& ctx_;
  std::unique_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::list<std::unique_ptr<NbdSession>> sessions_;
  std::vector<NbdSession*> dead_;
  bool reap_queued_ = false;
  bool started_ = false;
  std::atomic<bool> stop_posted_{false};
  StopTask stop_task_{*this};
  SocketOp stop_clock_{*this};
  std::chrono::steady_clock::time_point stop_deadline_{};
  bool aborted_ = false;  // the connections left at the deadline were closed
  ReapTask reap_task_{*this};
  std::string unix_path_;
  std::uint16_t tcp_port_ = 0;
  NbdServerStats stats_;
};

}  // namespace graid::nbd
