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
// within 5 seconds is dropped.
#pragma once

#include <sys/types.h>

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

class ControlServer {
 public:
  // Returns the response line (newline-terminated) for one request line from an authorised peer.
  using Handler = std::function<std::string(std::string_view line, const PeerCred& peer)>;

  // Creates the socket's directory if missing (mode 0755), replaces a stale socket file (one no
  // one listens on), refuses a live one (kBusy: another graidd) or any other file there, binds,
  // sets mode and group, listens.
  static Result<std::unique_ptr<ControlServer>> open(const ControlServerOptions& options);
  // Closes every connection and removes the socket file.
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Serves until `stop_fd` becomes readable (graidd passes a signalfd for SIGTERM/SIGINT).
  // Requests are handled one at a time, in arrival order per connection. When `wake_fd` (an
  // eventfd; -1: none) becomes readable it is drained and `on_wake` runs, on this thread between
  // requests: work other threads ask of the control thread (graidd: global hot spares).
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
  // Reads what is there; false when the client is gone (closed, error, or dropped).
  bool read_client(Client& client, const Handler& handler);
  bool send_all(Client& client, std::string_view data);

  ControlServerOptions options_;
  int fd_ = -1;
  std::vector<std::unique_ptr<Client>> clients_;
};

}  // namespace graid::control
