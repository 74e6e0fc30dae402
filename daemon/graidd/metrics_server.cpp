#include "graidd/metrics_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace graid::daemon {

namespace {

constexpr unsigned kMaxConnections = 16;
constexpr unsigned kMaxPerAddress = 4;
constexpr unsigned kTimeoutSeconds = 10;
constexpr std::size_t kMemoryPerConnection = 32 * 1024;
constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

// "ADDR:PORT" or "[ADDR6]:PORT", numeric only.
Result<sockaddr_storage> parse_address(const std::string& text, socklen_t* len) {
  std::string host, port;
  if (text.starts_with('[')) {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return make_error(Errc::kInvalidArgument,
                        "--metrics-listen \"{}\": write [ADDR]:PORT for IPv6, e.g. [::1]:9633",
                        text);
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon)
      return make_error(Errc::kInvalidArgument,
                        "--metrics-listen \"{}\": write ADDR:PORT, e.g. 127.0.0.1:9633", text);
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  unsigned p = 0;
  const auto [end, err] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || err != std::errc() || end != port.data() + port.size() || p > 65535)
    return make_error(Errc::kInvalidArgument,
                      "--metrics-listen \"{}\": port \"{}\" is not 0..65535", text, port);
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return make_error(Errc::kInvalidArgument,
                      "--metrics-listen \"{}\": \"{}\" is not an IP address ({}); write e.g. "
                      "127.0.0.1:9633",
                      text, host, ::gai_strerror(rc));
  sockaddr_storage out{};
  std::memcpy(&out, found->ai_addr, found->ai_addrlen);
  *len = found->ai_addrlen;
  ::freeaddrinfo(found);
  return out;
}

std::string address_text(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET6) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof host);
    return fmt::format("[{}]:{}", host, ntohs(s->sin6_port));
  }
  const auto* s = reinterpret_cast<const sockaddr_in*>(&a);
  ::inet_ntop(AF_INET, &s->sin_addr, host, sizeof host);
  return fmt::format("{}:{}", host, ntohs(s->sin_port));
}

MHD_Result respond(MHD_Connection* connection, unsigned status, const std::string& body) {
  MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()),
                                                    MHD_RESPMEM_MUST_COPY);
  if (r == nullptr) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, kContentType);
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, "Allow", "GET, HEAD");
  const MHD_Result rc = MHD_queue_response(connection, status, r);
  MHD_destroy_response(r);
  return rc;
}

MHD_Result access_handler(void* cls, MHD_Connection* connection, const char* url,
                          const char* method, const char* /*version*/, const char* /*upload_data*/,
                          std::size_t* upload_data_size, void** request_state) {
  // MHD calls once with the headers, and again per body chunk: answer on the first call, and
  // take no body (a GET has none; anything sent is discarded).
  static int seen;
  if (*request_state == nullptr) {
    *request_state = &seen;
    if (*upload_data_size == 0)
      return static_cast<MetricsServer*>(cls)->answer(connection, url, method) ? MHD_YES : MHD_NO;
  }
  *upload_data_size = 0;
  return MHD_YES;
}

}  // namespace

MetricsServer::MetricsServer(Key, Render render) : render_(std::move(render)) {}

MetricsServer::~MetricsServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

bool MetricsServer::answer(MHD_Connection* connection, const char* url, const char* method) {
  const std::string_view m(method);
  if (m != MHD_HTTP_METHOD_GET && m != MHD_HTTP_METHOD_HEAD)
    return respond(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics\n") == MHD_YES;
  if (std::string_view(url) != "/metrics")
    return respond(connection, MHD_HTTP_NOT_FOUND, "graidd serves /metrics only\n") == MHD_YES;
  ++scrapes_;
  std::string body;
  try {
    body = render_();
  } catch (const std::exception& e) {
    spdlog::error("metrics: rendering the page failed: {}", e.what());
    return respond(connection, MHD_HTTP_INTERNAL_SERVER_ERROR, "rendering failed\n") == MHD_YES;
  }
  return respond(connection, MHD_HTTP_OK, body) == MHD_YES;
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& address,
                                                            Render render) {
  socklen_t len = 0;
  auto addr = parse_address(address, &len);
  if (!addr.is_ok()) return addr.status();
  auto server = std::make_unique<MetricsServer>(Key{}, std::move(render));
  const int fd = ::socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return make_error(Errc::kIoError, "metrics: socket: {}", std::strerror(errno));
  server->listen_fd_ = fd;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (addr->ss_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&*addr), len) != 0)
    return make_error(Errc::kIoError, "--metrics-listen {}: cannot listen there: {}", address,
                      std::strerror(errno));
  if (::listen(fd, 16) != 0)
    return make_error(Errc::kIoError, "--metrics-listen {}: listen: {}", address,
                      std::strerror(errno));
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  server->bound_ = address_text(bound);
  server->daemon_ = MHD_start_daemon(
      MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, nullptr, nullptr, &access_handler, server.get(),
      MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, kMaxConnections,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, kMaxPerAddress, MHD_OPTION_CONNECTION_TIMEOUT,
      kTimeoutSeconds, MHD_OPTION_CONNECTION_MEMORY_LIMIT, kMemoryPerConnection, MHD_OPTION_END);
  if (server->daemon_ == nullptr)
    return make_error(Errc::kIoError, "--metrics-listen {}: libmicrohttpd did not start", address);
  server->listen_fd_ = -1;  // MHD owns it now (MHD_stop_daemon closes it)
  spdlog::info("metrics: serving http://{}/metrics", server->bound_);
  return server;
}

int MetricsServer::fd() const noexcept {
  const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_EPOLL_FD);
  return info != nullptr ? info->epoll_fd : -1;
}

void MetricsServer::run() {
  MHD_run(daemon_);
}

}  // namespace graid::daemon
