// graidd's Prometheus endpoint: `GET /metrics` over HTTP on --metrics-listen ADDR:PORT
// (docs/monitoring.md, "Prometheus metrics"), served by GNU libmicrohttpd inside graidd's control
// loop: MHD runs in external mode with epoll, its epoll descriptor is one of the loop's watches,
// and the page is rendered on the control thread (which owns the registry) when a scrape comes.
// The I/O threads are never touched by a scrape beyond the counter reads `stats` makes too.
//
// Bounded: 16 connections at once, 4 per client address, 10 s to send a request, 32 KiB of
// memory per connection; only GET (and HEAD) of /metrics is served (404 elsewhere, 405 for other
// methods). No TLS and no authentication: bind it to loopback or a management network.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "graid/status.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace graid::daemon {

class MetricsServer {
 public:
  using Render = std::function<std::string()>;

  // Listens on `address` ("127.0.0.1:9633", "[::1]:9633", "0.0.0.0:9633"; port 0: any free
  // one). kInvalidArgument for an address that does not parse, kIoError when it cannot listen
  // (the port taken), naming it.
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& address, Render render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The descriptor the control loop polls (MHD's epoll fd), and what to do when it is readable
  // or a second has passed (MHD expires idle connections then).
  int fd() const noexcept;
  void run();
  // Where it listens, with the port the kernel chose ("127.0.0.1:40123").
  const std::string& address() const noexcept { return bound_; }
  std::uint64_t scrapes() const noexcept { return scrapes_; }

  struct Key {
    explicit Key() = default;
  };
  MetricsServer(Key, Render render);
  // One request (MHD's access handler calls it once per request); false: close the connection.
  bool answer(MHD_Connection* connection, const char* url, const char* method);

 private:
  Render render_;
  MHD_Daemon* daemon_ = nullptr;
  int listen_fd_ = -1;
  std::string bound_;
  std::uint64_t scrapes_ = 0;
};

}  // namespace graid::daemon
