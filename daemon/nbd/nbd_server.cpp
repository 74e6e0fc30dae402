// NbdServer: exports, listeners (unix socket, TCP), accepting, stopping, reaping sessions.
#include "nbd/nbd_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "nbd/nbd_session.h"

namespace graid::nbd {

// A listening socket with its accept in flight.
class NbdServer::Listener final : private SocketOpOwner {
 public:
  Listener(NbdServer& server, int fd, bool tcp) : server_(server), fd_(fd), tcp_(tcp) {}
  ~Listener() {
    if (fd_ >= 0) ::close(fd_);
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  void start() { accept_.accept(server_.ctx_, fd_); }
  void stop() {
    stopping_ = true;
    if (accept_.busy() && !cancel_.busy()) cancel_.cancel_fd(server_.ctx_, fd_);
  }
  bool busy() const { return accept_.busy() || cancel_.busy(); }
  bool tcp() const { return tcp_; }

 private:
  void on_socket_op(SocketOp& op, std::int32_t res) override {
    if (&op == &cancel_) return;
    if (res >= 0) {
      server_.on_accept(*this, res);
    } else if (res != -ECANCELED && !stopping_) {
      spdlog::warn("nbd: accept: {}", std::strerror(-res));
    }
    if (!stopping_) accept_.accept(server_.ctx_, fd_);
  }

  NbdServer& server_;
  int fd_;
  bool tcp_;
  bool stopping_ = false;
  SocketOp accept_{*this};
  SocketOp cancel_{*this};
};

namespace {

// How often a stopping server with connections open looks at its stop deadline, and how often a
// running one with connections looks at their handshake and idle timeouts.
constexpr std::chrono::milliseconds kStopTick{50};
constexpr std::chrono::milliseconds kTick{200};

// Closes the descriptor unless released.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

Status errno_status(Errc code, std::string_view what) {
  return make_error(code, "{}: {}", what, std::strerror(errno));
}

Result<int> listen_unix(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path))
    return make_error(Errc::kInvalidArgument, "unix socket path '{}' is too long", path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  FdGuard fd{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (fd.fd < 0) return errno_status(Errc::kIoError, "socket(AF_UNIX)");
  const auto* sa = reinterpret_cast<const sockaddr*>(&addr);
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return make_error(Errc::kBusy, "'{}' exists and is not a socket", path);
    // A socket file: live if something accepts on it, stale otherwise.
    FdGuard probe{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    if (probe.fd >= 0 && ::connect(probe.fd, sa, sizeof(addr)) == 0)
      return make_error(Errc::kBusy, "'{}' is in use by a running server", path);
    ::unlink(path.c_str());
  }
  // The socket file takes its mode from the socket's inode at bind: 0600 from the start, so
  // there is no window in which others may connect.
  if (::fchmod(fd.fd, 0600) != 0) return errno_status(Errc::kIoError, "fchmod");
  if (::bind(fd.fd, sa, sizeof(addr)) != 0)
    return errno_status(Errc::kIoError, fmt::format("bind {}", path));
  if (::chmod(path.c_str(), 0600) != 0 || ::listen(fd.fd, 128) != 0) {
    const Status s = errno_status(Errc::kIoError, fmt::format("listen {}", path));
    ::unlink(path.c_str());
    return s;
  }
  return fd.release();
}

Result<int> listen_tcp(const std::string& address, std::uint16_t port, std::uint16_t& bound) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof(*v4);
  } else if (::inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof(*v6);
  } else {
    return make_error(Errc::kInvalidArgument, "'{}' is not an IPv4 or IPv6 address", address);
  }
  FdGuard fd{::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (fd.fd < 0) return errno_status(Errc::kIoError, "socket(tcp)");
  const int one = 1;
  ::setsockopt(fd.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  auto* sa = reinterpret_cast<sockaddr*>(&ss);
  if (::bind(fd.fd, sa, len) != 0)
    return errno_status(Errc::kBusy, fmt::format("bind {} port {}", address, port));
  if (::listen(fd.fd, 128) != 0) return errno_status(Errc::kIoError, "listen");
  if (::getsockname(fd.fd, sa, &len) != 0) return errno_status(Errc::kIoError, "getsockname");
  bound = ntohs(ss.ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
  return fd.release();
}

}  // namespace

void NbdServer::Shared::handshake_ended(HandshakeEnd how, const std::string& peer,
                                        std::string_view why) {
  spdlog::debug("nbd: {}: closing a connection in its handshake: {}", peer, why);
  switch (how) {
    case HandshakeEnd::kTlsFailed:
      ++summary.tls_failed;
      break;
    case HandshakeEnd::kProtocol:
      ++summary.protocol;
      break;
    case HandshakeEnd::kTimedOut:
      ++summary.timed_out;
      break;
    case HandshakeEnd::kDropped:
      ++summary.dropped;
      break;
  }
  summary.last_peer = peer;
}

const ServedExport* NbdServer::Shared::find(std::string_view name) const {
  if (name.empty() && exports.size() == 1) return &exports.front();
  for (const ServedExport& e : exports) {
    if (e.spec.name == name) return &e;
  }
  return nullptr;
}

NbdServer::NbdServer(Key, IoContext& ctx) : ctx_(ctx) {}

Result<std::unique_ptr<NbdServer>> NbdServer::create(IoContext& ctx, std::vector<NbdExport> exports,
                                                     const NbdServerOptions& options) {
  if (exports.empty()) return make_error(Errc::kInvalidArgument, "nbd: no exports");
  if (options.unix_path.empty() && !options.tcp)
    return make_error(Errc::kInvalidArgument, "nbd: neither a unix socket nor TCP to listen on");
  if (options.max_requests_per_connection == 0 || options.max_connections == 0 ||
      options.max_handshakes == 0 || options.max_handshakes_per_peer == 0 ||
      options.max_bytes_per_connection < kMaxPayload ||
      options.max_bytes_total < BufferPool::class_bytes(kMaxPayload))
    return make_error(Errc::kInvalidArgument,
                      "nbd: limits must allow a request ({} bytes per connection and per server "
                      "at least) and a connection and a handshake at least",
                      BufferPool::class_bytes(kMaxPayload));
  auto server = std::make_unique<NbdServer>(Key(), ctx);
  auto shared = std::make_unique<Shared>(ctx, options);
  shared->stats = &server->stats_;
  shared->server = server.get();
  std::set<std::string> names;
  for (NbdExport& e : exports) {
    if (e.array == nullptr)
      return make_error(Errc::kInvalidArgument, "nbd: export '{}' has no array", e.name);
    if (e.name.size() > kMaxStringLength || !names.insert(e.name).second)
      return make_error(Errc::kInvalidArgument, "nbd: export name '{}' is too long or repeated",
                        e.name);
    ServedExport s;
    s.vd = e.handle ? e.handle.info() : e.vd;
    if (s.vd.size == 0 || s.vd.start > e.array->capacity() ||
        e.array->capacity() - s.vd.start < s.vd.size)
      return make_error(Errc::kInvalidArgument, "nbd: export '{}' is not inside its array", e.name);
    s.limits.size = s.vd.size;
    s.limits.block = std::max<std::uint32_t>(512, e.array->logical_block_size());
    s.limits.max_payload = kMaxPayload;
    s.limits.read_only = e.read_only;
    s.preferred_block = std::max<std::uint32_t>(4096, s.limits.block);
    // CAN_MULTI_CONN: see docs/nbd.md. Flush and FUA reach the members, which every connection
    // shares, and a flush is started only after the writes it must cover were answered.
    s.flags = kFlagHasFlags | kFlagSendFlush | kFlagSendFua | kFlagCanMultiConn;
    s.flags |= e.read_only ? kFlagReadOnly : (kFlagSendTrim | kFlagSendWriteZeroes);
    s.spec = std::move(e);
    shared->exports.push_back(std::move(s));
  }
  // One queue per array, shared by every export of it and every connection.
  std::vector<Array*> arrays;
  for (ServedExport& s : shared->exports) {
    auto at = std::find(arrays.begin(), arrays.end(), s.spec.array);
    if (at == arrays.end()) {
      auto q = s.spec.array->attach(ctx);
      if (!q) return q.status();
      arrays.push_back(s.spec.array);
      shared->queues.push_back(std::move(*q));
      at = arrays.end() - 1;
    }
    s.queue = shared->queues[static_cast<std::size_t>(at - arrays.begin())].get();
  }
  server->shared_ = std::move(shared);
  if (!options.unix_path.empty()) {
    auto fd = listen_unix(options.unix_path);
    if (!fd) return fd.status();
    server->unix_path_ = options.unix_path;
    server->listeners_.push_back(std::make_unique<Listener>(*server, *fd, false));
  }
  if (options.tcp) {
    auto fd = listen_tcp(options.tcp_address, options.tcp_port, server->tcp_port_);
    if (!fd) return fd.status();
    server->listeners_.push_back(std::make_unique<Listener>(*server, *fd, true));
  }
  return server;
}

NbdServer::~NbdServer() {
  if (started_ && !finished())
    spdlog::error("nbd: server destroyed with {} connections open", sessions_.size());
  sessions_.clear();
  listeners_.clear();
  if (!unix_path_.empty()) ::unlink(unix_path_.c_str());
}

std::uint32_t NbdServer::serving() const noexcept {
  return shared_ ? shared_->serving : 0;
}

std::vector<NbdClientInfo> NbdServer::clients() const {
  std::vector<NbdClientInfo> out;
  for (const auto& session : sessions_)
    if (auto c = session->client()) out.push_back(std::move(*c));
  return out;
}

void NbdServer::start() {
  if (started_) return;
  started_ = true;
  for (auto& l : listeners_)
    l->start();
}

void NbdServer::run() {
  start();
  while (!finished())
    ctx_.poll(true);
}

void NbdServer::stop() {
  if (!stop_posted_.exchange(true)) ctx_.post(stop_task_);
}

void NbdServer::StopTask::run() {
  server_.begin_stop();
}
void NbdServer::ReapTask::run() {
  server_.reap();
}

bool NbdServer::finished() const noexcept {
  if (shared_ == nullptr || !shared_->stopping || !sessions_.empty() || reap_queued_ ||
      stop_clock_.busy())
    return false;
  return std::none_of(listeners_.begin(), listeners_.end(),
                      [](const auto& l) { return l->busy(); });
}

void NbdServer::begin_stop() {
  if (shared_->stopping) return;
  shared_->stopping = true;
  log_summary(std::chrono::steady_clock::now(), /*force=*/true);
  // New connections are refused from now on: remove the socket file at once.
  if (!unix_path_.empty()) ::unlink(unix_path_.c_str());
  for (auto& l : listeners_)
    l->stop();
  for (auto& s : sessions_)
    s->stop();
  stop_deadline_ = std::chrono::steady_clock::now() + shared_->options.stop_timeout;
  if (!sessions_.empty() && !stop_clock_.busy()) stop_clock_.wait(ctx_, kStopTick);
}

void NbdServer::on_socket_op(SocketOp& /*stop_clock*/, std::int32_t /*res*/) {
  const auto now = std::chrono::steady_clock::now();
  if (!shared_->stopping) {
    log_summary(now, /*force=*/false);
    // No connection and nothing left to summarise: no more ticks until the next accept.
    if (sessions_.empty() && shared_->summary.total() == 0) return;
    // Handshake, io and idle timeouts.
    for (auto& s : sessions_)
      s->tick(now);
    stop_clock_.wait(ctx_, kTick);
    return;
  }
  if (sessions_.empty()) return;  // finished in time (or being reaped): no more ticks
  if (!aborted_ && std::chrono::steady_clock::now() >= stop_deadline_) {
    aborted_ = true;
    spdlog::warn(
        "nbd: {} connection(s) still open {} ms after stop: closing them (the replies they had "
        "not sent are dropped)",
        sessions_.size(), shared_->options.stop_timeout.count());
    for (auto& s : sessions_)
      s->abort();
  }
  stop_clock_.wait(ctx_, kStopTick);
}

void NbdServer::on_accept(Listener& listener, int fd) {
  if (shared_->stopping) {
    ++stats_.refused;
    ::close(fd);
    return;
  }
  if (listener.tcp()) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  auto session = std::make_unique<NbdSession>(*shared_, fd);
  // Connections still in their handshake have a pool of their own, where the oldest makes room
  // for a newcomer: whoever can reach the socket cannot keep a key holder out by connecting and
  // saying nothing. One peer's oldest first, once it has its share.
  std::uint32_t handshaking = 0, of_peer = 0;
  for (const auto& s : sessions_) {
    if (!s->handshaking()) continue;
    ++handshaking;
    if (s->peer_key() == session->peer_key()) ++of_peer;
  }
  if (of_peer >= shared_->options.max_handshakes_per_peer) {
    drop_oldest_handshake(session->peer_key());
    --handshaking;
  }
  if (handshaking >= shared_->options.max_handshakes) drop_oldest_handshake({});
  sessions_.push_back(std::move(session));
  sessions_.back()->start();
  if (!stop_clock_.busy()) stop_clock_.wait(ctx_, kTick);
}

void NbdServer::drop_oldest_handshake(std::string_view peer) {
  for (auto& s : sessions_) {  // in the order they were accepted
    if (s->handshaking() && (peer.empty() || s->peer_key() == peer)) {
      s->drop_for_newcomer();
      return;
    }
  }
}

void NbdServer::log_summary(std::chrono::steady_clock::time_point now, bool force) {
  auto& sum = shared_->summary;
  if (sum.total() == 0) {
    sum.since = now;
    return;
  }
  if (!force && now - sum.since < shared_->options.log_summary_interval) return;
  const std::string where =
      !unix_path_.empty() ? unix_path_ : fmt::format("tcp port {}", tcp_port_);
  std::vector<std::string> what;
  if (sum.tls_failed > 0) what.push_back(fmt::format("{} TLS handshakes failed", sum.tls_failed));
  if (sum.protocol > 0)
    what.push_back(fmt::format("{} broke the protocol in their handshake", sum.protocol));
  if (sum.timed_out > 0)
    what.push_back(fmt::format("{} did not finish their handshake in time", sum.timed_out));
  if (sum.dropped > 0)
    what.push_back(
        fmt::format("{} still in their handshake were closed for newer ones", sum.dropped));
  spdlog::info(
      "nbd {}: in the last {:.1f} s, {} connections ended in their handshake: {} (last from "
      "{}; each at debug level)",
      where, std::chrono::duration<double>(now - sum.since).count(), sum.total(),
      fmt::join(what, ", "), sum.last_peer);
  sum = NbdServer::Shared::HandshakeSummary{};
  sum.since = now;
}

void NbdServer::session_finished(NbdSession& session) {
  dead_.push_back(&session);
  if (!reap_queued_) {
    reap_queued_ = true;
    ctx_.defer(reap_task_);
  }
}

void NbdServer::reap() {
  reap_queued_ = false;
  for (NbdSession* dead : dead_) {
    sessions_.remove_if([dead](const auto& s) { return s.get() == dead; });
  }
  dead_.clear();
}

}  // namespace graid::nbd
