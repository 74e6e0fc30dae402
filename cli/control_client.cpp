#include "control_client.h"

#include <errno.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "control/control_protocol.h"

namespace graid::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

class UniqueFd {
 public:
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

CallError internal(std::string message) {
  return CallError{"internal", std::move(message), control::kExitInternal};
}

std::string not_running(const std::string& socket, std::string_view what, int err) {
  return fmt::format(
      "graidd is not running on {} ({}: {}): start it with `graidd` or pass --socket", socket, what,
      std::strerror(err));
}

// Milliseconds left until `deadline`, for poll(); 0 once it has passed.
int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return 0;
  return static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30));
}

}  // namespace

std::string format_request(std::uint64_t id, std::string_view verb, std::string_view object,
                           const json& args) {
  json request = json::object();
  request["id"] = id;
  request["verb"] = verb;
  if (!object.empty()) request["object"] = object;
  request["args"] = args;
  return request.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

CallResult interpret_response(std::string_view line, std::uint64_t expected_id) {
  json response = json::parse(line, nullptr, false);
  if (response.is_discarded()) {
    return internal(fmt::format("graidd sent a response that is not JSON: {:.80}", line));
  }
  if (!response.is_object()) return internal("graidd sent a response that is not a JSON object");
  const auto id = response.find("id");
  const auto result = response.find("result");
  const auto error = response.find("error");
  if (id == response.end()) return internal("graidd sent a response without an id");
  const bool has_result = result != response.end();
  const bool has_error = error != response.end();
  if (has_result == has_error) {
    return internal("graidd sent a response with neither or both of result and error");
  }
  const bool null_id_error = id->is_null() && has_error;
  if (!null_id_error && !(id->is_number_unsigned() && id->get<std::uint64_t>() == expected_id)) {
    return internal(fmt::format("graidd answered request {} with id {}", expected_id,
                                id->dump(-1, ' ', false, json::error_handler_t::replace)));
  }
  if (has_result) return std::move(*result);

  if (!error->is_object()) return internal("graidd sent an error that is not an object");
  const auto code = error->find("code");
  const auto message = error->find("message");
  if (code == error->end() || !code->is_string()) {
    return internal("graidd sent an error without a code");
  }
  std::string text = message != error->end() && message->is_string() ? message->get<std::string>()
                                                                     : std::string("(no message)");
  const std::string name = code->get<std::string>();
  auto known = control::error_code_from_name(name);
  if (!known) {
    return CallError{name, fmt::format("graidd sent unknown error code \"{}\": {}", name, text),
                     control::kExitInternal};
  }
  return CallError{name, std::move(text), control::exit_code_for(*known)};
}

ControlClient::ControlClient(std::string socket_path, std::chrono::milliseconds timeout,
                             const volatile std::sig_atomic_t* interrupted)
    : socket_path_(std::move(socket_path)), timeout_(timeout), interrupted_(interrupted) {}

CallResult ControlClient::call(std::string_view verb, std::string_view object, const json& args) {
  const std::uint64_t id = next_id_++;
  const Clock::time_point deadline = Clock::now() + timeout_;
  const CallError unreachable_timeout{
      "unreachable",
      fmt::format("graidd on {} did not answer within {} ms; check that it is alive (its log, "
                  "systemctl status graidd)",
                  socket_path_, timeout_.count()),
      control::kExitUnreachable};
  const CallError interrupted{"interrupted", "interrupted", control::kExitOk};

  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path_.size() >= sizeof(addr.sun_path)) {
    return CallError{"unreachable",
                     fmt::format("graidd is not running on {} (the path is {} bytes, over the "
                                 "{}-byte limit of a unix socket): pass a shorter --socket",
                                 socket_path_, socket_path_.size(), sizeof(addr.sun_path) - 1),
                     control::kExitUnreachable};
  }
  std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());

  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return internal(fmt::format("socket: {}", std::strerror(errno)));
  // A unix stream connect does not wait on a live listener (it fails with EAGAIN when the
  // backlog is full), so a blocking connect is bounded.
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } while (rc < 0 && errno == EINTR && (interrupted_ == nullptr || *interrupted_ == 0));
  if (rc < 0) {
    if (errno == EINTR) return interrupted;
    return CallError{"unreachable", not_running(socket_path_, "connect", errno),
                     control::kExitUnreachable};
  }

  const std::string line = format_request(id, verb, object, args);
  std::size_t sent = 0;
  while (sent < line.size()) {
    pollfd p{fd.get(), POLLOUT, 0};
    int ready = ::poll(&p, 1, ms_left(deadline));
    if (ready < 0 && errno == EINTR) {
      if (interrupted_ != nullptr && *interrupted_ != 0) return interrupted;
      continue;
    }
    if (ready == 0) return unreachable_timeout;
    ssize_t n = ::send(fd.get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return CallError{"unreachable",
                       fmt::format("graidd on {} hung up before taking the request (send: {}); "
                                   "check its log",
                                   socket_path_, std::strerror(errno)),
                       control::kExitUnreachable};
    }
    sent += static_cast<std::size_t>(n);
  }

  std::string response;
  char buffer[65536];
  for (;;) {
    pollfd p{fd.get(), POLLIN, 0};
    int ready = ::poll(&p, 1, ms_left(deadline));
    if (ready < 0 && errno == EINTR) {
      if (interrupted_ != nullptr && *interrupted_ != 0) return interrupted;
      continue;
    }
    if (ready == 0) return unreachable_timeout;
    ssize_t n = ::recv(fd.get(), buffer, sizeof(buffer), 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return CallError{"unreachable",
                       fmt::format("graidd on {} hung up mid-request (recv: {}); check its log",
                                   socket_path_, std::strerror(errno)),
                       control::kExitUnreachable};
    }
    if (n == 0) {
      return CallError{"unreachable",
                       fmt::format("graidd on {} closed the connection without answering; check "
                                   "its log",
                                   socket_path_),
                       control::kExitUnreachable};
    }
    const std::size_t old = response.size();
    response.append(buffer, static_cast<std::size_t>(n));
    const std::size_t newline = response.find('\n', old);
    if (newline != std::string::npos) {
      response.resize(newline);
      if (!response.empty() && response.back() == '\r') response.pop_back();
      return interpret_response(response, id);
    }
    if (response.size() > kMaxResponseLine) {
      return internal(fmt::format("graidd sent a response line over {} bytes", kMaxResponseLine));
    }
  }
}

}  // namespace graid::cli
