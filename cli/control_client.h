// graidctl's side of the control socket (docs/daemon.md, "Control protocol"): one connection per
// request, one request line out, one response line back, with a deadline. The line formats are
// pure functions (format_request, interpret_response) so they are unit-tested without a socket.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

namespace graid::cli {

// Why a call has no result: the daemon's error, or graidctl's own failure. `code` is the wire
// name ("not_found", "refused", ...) or one of graidctl's: "usage", "unreachable", "internal".
// `exit_code` is what graidctl ends with (control::exit_code_for for the daemon's codes).
struct CallError {
  std::string code;
  std::string message;
  int exit_code = 0;
};

// A call's outcome: the response's `result` as sent, or why there is none.
using CallResult = std::variant<nlohmann::json, CallError>;

// How long graidctl waits for a response before calling the daemon unreachable.
inline constexpr std::chrono::milliseconds kDefaultCallTimeout{60'000};

// The longest response line graidctl reads; a longer one is a daemon failure (exit 5).
inline constexpr std::size_t kMaxResponseLine = std::size_t{64} << 20;

// One request line, newline-terminated: {"id":ID,"verb":..,"object":..,"args":..}; `object` is
// left out when empty (the protocol refuses an empty one).
std::string format_request(std::uint64_t id, std::string_view verb, std::string_view object,
                           const nlohmann::json& args);

// Reads one response line (without its newline) to request `expected_id`. Success: the `result`
// value. The daemon's error: its code and message, exit code by control::exit_code_for. An id
// of null is accepted only with an error (the daemon could not read ours). Anything else (not
// JSON, a wrong id, neither or both of result and error, an unknown error code) is a CallError
// with exit code 5 (internal); an unknown code keeps its name.
CallResult interpret_response(std::string_view line, std::uint64_t expected_id);

// A client of one daemon socket. Not thread-safe; ids increase from 1 across its calls.
class ControlClient {
 public:
  // `interrupted`, when not null, is polled whenever a wait is interrupted by a signal: when it
  // is set the call gives up with code "interrupted" (graidctl's --watch stopping on SIGINT).
  explicit ControlClient(std::string socket_path,
                         std::chrono::milliseconds timeout = kDefaultCallTimeout,
                         const volatile std::sig_atomic_t* interrupted = nullptr);

  // Connects, sends one request, reads its response line and closes. Failures to connect, a
  // daemon that closes without a full line and one that does not answer in time are
  // "unreachable" (exit 4), with a message saying how to start graidd or pick another socket.
  CallResult call(std::string_view verb, std::string_view object, const nlohmann::json& args);

  // The id the next call will use.
  std::uint64_t next_id() const noexcept { return next_id_; }

 private:
  std::string socket_path_;
  std::chrono::milliseconds timeout_;
  const volatile std::sig_atomic_t* interrupted_;
  std::uint64_t next_id_ = 1;
};

}  // namespace graid::cli
