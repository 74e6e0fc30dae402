#include "control/control_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>

#include "control/control_protocol.h"

namespace graid::control {

struct ControlServer::Client {
  int fd = -1;
  PeerCred peer;
  bool allowed = false;
  std::string buffer;
  std::optional<Deferred> deferred;  // a request waiting for its answer
  ~Client() {
    if (fd >= 0) ::close(fd);
  }
};

namespace {

constexpr auto kSendTimeout = std::chrono::seconds(5);

bool socket_is_live(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const bool live = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return live;
}

}  // namespace

ControlServer::ControlServer(Key, ControlServerOptions options, int fd)
    : options_(std::move(options)), fd_(fd) {}

Result<std::unique_ptr<ControlServer>> ControlServer::open(const ControlServerOptions& o) {
  sockaddr_un addr{};
  if (o.path.empty() || o.path.size() >= sizeof(addr.sun_path))
    return make_error(Errc::kInvalidArgument, "control socket path \"{}\": empty or too long",
                      o.path);
  const std::filesystem::path dir = std::filesystem::path(o.path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      std::filesystem::create_directories(dir, ec);
      if (ec) return make_error(Errc::kIoError, "mkdir {}: {}", dir.string(), ec.message());
      ::chmod(dir.c_str(), 0755);
    }
  }
  struct stat st {};
  if (::lstat(o.path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return make_error(Errc::kBusy, "{} exists and is not a socket: not replacing it", o.path);
    if (socket_is_live(o.path))
      return make_error(Errc::kBusy, "{}: another graidd is listening there", o.path);
    ::unlink(o.path.c_str());  // stale: left by a daemon that died
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return make_error(Errc::kIoError, "socket: {}", std::strerror(errno));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, o.path.c_str(), o.path.size() + 1);
  // Bind with a umask that leaves no window in which others could connect.
  const mode_t old_mask = ::umask(0177);
  const int rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int bind_errno = errno;
  ::umask(old_mask);
  if (rc != 0) {
    ::close(fd);
    return make_error(Errc::kIoError, "bind {}: {}", o.path, std::strerror(bind_errno));
  }
  if (o.group) {
    if (::chown(o.path.c_str(), static_cast<uid_t>(-1), *o.group) != 0 ||
        ::chmod(o.path.c_str(), 0660) != 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(o.path.c_str());
      return make_error(Errc::kIoError, "{}: setting the group: {}", o.path, std::strerror(err));
    }
  }
  if (::listen(fd, 64) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(o.path.c_str());
    return make_error(Errc::kIoError, "listen {}: {}", o.path, std::strerror(err));
  }
  return std::make_unique<ControlServer>(Key{}, o, fd);
}

ControlServer::~ControlServer() {
  clients_.clear();
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(options_.path.c_str());
  }
}

bool ControlServer::authorised(const PeerCred& peer) const noexcept {
  if (peer.uid == 0 || peer.uid == ::geteuid()) return true;
  if (!options_.group) return false;
  if (peer.gid == *options_.group) return true;
  return std::find(peer.groups.begin(), peer.groups.end(), *options_.group) != peer.groups.end();
}

void ControlServer::accept_clients() {
  for (;;) {
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN: none left (other errors: try again at the next poll)
    if (clients_.size() >= options_.max_clients) {
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<Client>();
    c->fd = fd;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      c->peer.pid = cred.pid;
      c->peer.uid = cred.uid;
      c->peer.gid = cred.gid;
    } else {
      c->peer.uid = static_cast<uid_t>(-1);  // unknown: never authorised
      c->peer.gid = static_cast<gid_t>(-1);
    }
    std::vector<gid_t> groups(64);
    socklen_t glen = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &glen) == 0) {
      groups.resize(glen / sizeof(gid_t));
      c->peer.groups = std::move(groups);
    }
    c->allowed = authorised(c->peer);
    clients_.push_back(std::move(c));
  }
}

bool ControlServer::send_all(Client& c, std::string_view data) {
  const auto deadline = std::chrono::steady_clock::now() + kSendTimeout;
  while (!data.empty()) {
    const ssize_t n = ::send(c.fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{c.fd, POLLOUT, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
      continue;
    }
    return false;
  }
  return true;
}

bool ControlServer::read_client(Client& c, const Handler& handler) {
  char chunk[65536];
  const ssize_t n = ::recv(c.fd, chunk, sizeof chunk, 0);
  if (n == 0) return false;
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  c.buffer.append(chunk, static_cast<std::size_t>(n));
  return answer_lines(c, handler);
}

bool ControlServer::answer_lines(Client& c, const Handler& handler) {
  std::size_t start = 0;
  while (!c.deferred) {
    const std::size_t nl = c.buffer.find('\n', start);
    if (nl == std::string::npos) break;
    const std::string_view line(c.buffer.data() + start, nl - start + 1);
    std::string response;
    if (c.allowed) {
      Reply reply = handler(line, c.peer);
      if (reply.deferred) {
        c.deferred = std::move(reply.deferred);
        start = nl + 1;
        break;
      }
      response = std::move(reply.line);
    } else {
      RequestId id;
      (void)parse_request(line, &id);
      response = format_response_error(
          id, ErrorCode::kUnauthorised,
          fmt::format("uid {} may not use this graidd (root, uid {}{} only)", c.peer.uid,
                      ::geteuid(), options_.group ? " or its group" : ""));
    }
    if (!send_all(c, response)) return false;
    start = nl + 1;
  }
  c.buffer.erase(0, start);
  // A line this long can never be valid: answer once and drop the connection. (A client whose
  // request is deferred is not read meanwhile, so its buffer stays within one read of this.)
  if (!c.deferred && c.buffer.size() > kMaxRequestLine + 2) {
    send_all(c, format_response_error(
                    std::monostate{}, ErrorCode::kBadRequest,
                    fmt::format("request line is over the {}-byte limit", kMaxRequestLine)));
    return false;
  }
  return true;
}

bool ControlServer::retry_deferred(Client& c, const Handler& handler, bool last) {
  std::optional<std::string> response = c.deferred->retry(last);
  if (!response) return true;
  c.deferred.reset();
  if (!send_all(c, *response)) return false;
  return answer_lines(c, handler);
}

void ControlServer::serve(const Handler& handler, int stop_fd, int wake_fd,
                          const std::function<void()>& on_wake) {
  ServeOptions o;
  o.stop_fd = stop_fd;
  if (wake_fd >= 0) {
    o.watches.push_back({wake_fd, [wake_fd, &on_wake] {
                           std::uint64_t count = 0;
                           (void)!::read(wake_fd, &count, sizeof count);
                           if (on_wake) on_wake();
                         }});
  }
  serve(handler, o);
}

void ControlServer::serve(const Handler& handler, const ServeOptions& o) {
  using Clock = std::chrono::steady_clock;
  std::vector<pollfd> fds;
  std::vector<Clock::time_point> next_tick;
  for (const Tick& t : o.ticks)
    next_tick.push_back(Clock::now() + t.interval);
  const std::size_t first_client = 2 + o.watches.size();
  for (;;) {
    fds.clear();
    fds.push_back({o.stop_fd, POLLIN, 0});
    fds.push_back({fd_, POLLIN, 0});
    for (const Watch& w : o.watches)
      fds.push_back({w.fd, POLLIN, 0});  // poll() ignores a negative fd
    // A client whose request waits is not read (its lines stay in the socket, in order); a hang
    // up still shows.
    for (const auto& c : clients_)
      fds.push_back({c->fd, static_cast<short>(c->deferred ? 0 : POLLIN), 0});
    std::optional<Clock::time_point> wake_at;
    for (const auto& t : next_tick)
      if (!wake_at || t < *wake_at) wake_at = t;
    for (const auto& c : clients_)
      if (c->deferred && (!wake_at || c->deferred->deadline < *wake_at))
        wake_at = c->deferred->deadline;
    int timeout_ms = -1;
    if (wake_at) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(*wake_at - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<std::int64_t>(left, 0, 60'000));
    }
    const int rc = ::poll(fds.data(), fds.size(), timeout_ms);
    if (rc < 0 && errno != EINTR) return;
    if (rc > 0 && fds[0].revents != 0) return;
    if (rc > 0) {
      for (std::size_t i = 0; i < o.watches.size(); ++i)
        if (fds[2 + i].revents != 0 && o.watches[i].on_ready) o.watches[i].on_ready();
    }
    const auto now = Clock::now();
    for (std::size_t i = 0; i < o.ticks.size(); ++i) {
      if (now < next_tick[i]) continue;
      if (o.ticks[i].run) o.ticks[i].run();
      next_tick[i] = now + std::max(o.ticks[i].interval, std::chrono::milliseconds(1));
    }
    // Clients (indexes match clients_ as it was when fds was built): new lines first, then the
    // requests that wait, each retried once per wake.
    std::vector<bool> drop(clients_.size(), false);
    for (std::size_t i = 0; i < clients_.size(); ++i) {
      Client& c = *clients_[i];
      const short ev = rc > 0 ? fds[first_client + i].revents : 0;
      if ((ev & POLLIN) != 0) {
        if (!read_client(c, handler)) drop[i] = true;
      } else if ((ev & (POLLHUP | POLLERR | POLLNVAL)) != 0) {
        drop[i] = true;
      }
      if (!drop[i] && c.deferred && !retry_deferred(c, handler, now >= c.deferred->deadline))
        drop[i] = true;
    }
    for (std::size_t i = clients_.size(); i-- > 0;)
      if (drop[i]) clients_.erase(clients_.begin() + static_cast<std::ptrdiff_t>(i));
    if (rc > 0 && fds[1].revents != 0) accept_clients();
  }
}

}  // namespace graid::control
