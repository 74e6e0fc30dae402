// The control socket's server side: a unix stream socket, one JSON request per line in, one
// response per line out (control_protocol.h), many clients at once, served on the calling thread
// (graidd's control thread) with poll().
//
// Access: the socket file is mode 0600 (owner only), or 0660 with the configured group. Each
// connection's peer credentials (SO_PEERCRED, SO_PEERGROUPS) are checked as well: root, the
// daemon's own uid, or a member of the configured group may send requests; anyone else gets an
// `unauthorised` error response to every line and nothing reaches the handler.
//
// Untrusted input: a line over kMaxRequestLine bytes is answered with one bad_request error
// (id null) and the connection is closed, since the framing cannot be trusted after it; more
// than max_clients connections are closed at once; a client that does not read its responses
// within 5 seconds is dropped. A deferred request (a long poll) holds its client's later lines
// until it is answered; a client gone meanwhile is dropped with it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graid/status.h"

namespace graid::control {

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups, where the kernel reports them
};

struct ControlServerOptions {
  std::string path;
  std::optional<gid_t> group;  // socket group (mode 0660) and peers allowed by it
  std::size_t max_clients = 64;
};

// A reply the handler cannot give yet (a long poll, `list event --wait`): `retry` is called again
// each time the control loop wakes (a watch, another client, the deadline); it returns the
// response line once it has one, and must return one when `last` is true (the deadline passed).
// Until then the client's further requests wait, in order.
struct Deferred {
  std::chrono::steady_clock::time_point deadline;
  std::function<std::optional<std::string>(bool last)> retry;
};

struct Reply {
  Reply(std::string response) : line(std::move(response)) {}  // NOLINT: implicit by design
  Reply(Deferred later) : deferred(std::move(later)) {}       // NOLINT
  std::string line;
  std::optional<Deferred> deferred;
};

// A descriptor the control loop polls besides its clients: `on_ready` runs (on the control
// thread) when it is readable, and must drain it.
struct Watch {
  int fd = -1;
  std::function<void()> on_ready;
};

// Work the control loop does every `interval`, between requests (graidd: the systemd watchdog's
// ping, the metrics server's timeouts).
struct Tick {
  std::chrono::milliseconds interval{1000};
  std::function<void()> run;
};

struct ServeOptions {
  int stop_fd = -1;  // serve() returns once it is readable (graidd: a signalfd)
  std::vector<Watch> watches;
  std::vector<Tick> ticks;
};

class ControlServer {
 public:
  // Returns the response line (newline-terminated), or a Deferred, for one request line from an
  // authorised peer.
  using Handler = std::function<Reply(std::string_view line, const PeerCred& peer)>;

  // Creates the socket's directory if missing (mode 0755), replaces a stale socket file (one no
  // one listens on), refuses a live one (kBusy: another graidd) or any other file there, binds,
  // sets mode and group, listens.
  static Result<std::unique_ptr<ControlServer>> open(const ControlServerOptions& options);
  // Closes every connection and removes the socket file.
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Serves until `options.stop_fd` becomes readable. Requests are handled one at a time, in
  // arrival order per connection; watches and ticks run on this thread between requests.
  void serve(const Handler& handler, const ServeOptions& options);
  // The same with one watch: when `wake_fd` (an eventfd; -1: none) becomes readable it is
  // drained and `on_wake` runs (graidd: work other threads ask of the control thread).
  void serve(const Handler& handler, int stop_fd, int wake_fd = -1,
             const std::function<void()>& on_wake = {});

  bool authorised(const PeerCred& peer) const noexcept;

  struct Key {
    explicit Key() = default;
  };
  ControlServer(Key, ControlServerOptions options, int fd);

 private:
  struct Client;
  void accept_clients();
  // Reads what is there and answers the complete lines; false when the client is gone (closed,
  // error, or dropped).
  bool read_client(Client& client, const Handler& handler);
  // Answers the buffered complete lines until one is deferred; false when the client is gone.
  bool answer_lines(Client& client, const Handler& handler);
  // Retries a client's deferred request; false when the client is gone.
  bool retry_deferred(Client& client, const Handler& handler, bool last);
  bool send_all(Client& client, std::string_view data);

  ControlServerOptions options_;
  int fd_ = -1;
  std::vector<std::unique_ptr<Client>> clients_;
};

}  // namespace graid::control
