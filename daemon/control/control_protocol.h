// The control socket's wire format, shared by graidd and graidctl: one JSON request per line in,
// one JSON response per line out. Pure functions over strings: no sockets, no state, so it can be
// unit-tested and fuzzed on its own. docs/daemon.md ("Control protocol") is the user-facing
// description; this header is the contract.
//
//   request:  {"id":7,"verb":"create","object":"dg","args":{"level":"raid5","pds":[0,1,2,3]}}
//   ok:       {"id":7,"result":{...}}
//   error:    {"id":7,"error":{"code":"not_found","message":"pd 3 does not exist"}}
//   error for a request whose id could not be read: {"id":null,"error":{...}}
//
// Untrusted input: parse_request() bounds the line length and the nesting depth, refuses
// duplicate keys and unknown top-level fields, and never throws (nlohmann::json's exceptions are
// caught inside and become a Status).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "graid/status.h"

namespace graid::control {

// The longest request line, without its newline: 1 MiB.
inline constexpr std::size_t kMaxRequestLine = std::size_t{1} << 20;
// The deepest nesting of objects and arrays in a request; the request object itself is depth 1,
// so `args` may nest 14 more levels below its own.
inline constexpr int kMaxRequestDepth = 16;
// The longest string id, and the longest verb or object name.
inline constexpr std::size_t kMaxIdString = 64;
inline constexpr std::size_t kMaxNameLength = 64;

// A request id as the client sent it: a non-negative integer or a string of at most kMaxIdString
// bytes. std::monostate is "no id" (the request's id could not be read): it is sent as null.
using RequestId = std::variant<std::monostate, std::uint64_t, std::string>;

// One parsed request.
struct Request {
  RequestId id;
  std::string verb;    // required: "create", "list", "describe", "delete", "edit", ...
  std::string object;  // optional ("" when absent): "pd", "dg", "vd", "controller", "event", ...
  nlohmann::json args = nlohmann::json::object();  // always an object ({} when absent)
};

// Parses one request line. A single trailing "\n" (or "\r\n") is allowed and ignored; any other
// newline in the line is refused, since the framing is one request per line.
//
// Accepted: a JSON object with exactly these top-level fields:
//   id     required; a non-negative integer (up to 2^64-1) or a string of at most 64 bytes
//   verb   required; a string of 1..64 characters from [a-z0-9_]
//   object optional; a string of 1..64 characters from [a-z0-9_]
//   args   optional; an object (any content within the depth limit)
// Refused, with a Status of Errc::kInvalidArgument whose message names the problem: an empty
// line, a line over kMaxRequestLine bytes, anything that is not JSON (the message carries the
// parser's position), a value that is not an object, nesting deeper than kMaxRequestDepth, a key
// that appears twice in the same object (at any depth), an unknown top-level field, a missing or
// mistyped field. A parse failure is always answered with ErrorCode::kBadRequest.
//
// When `id_out` is not null it receives the request's id whenever the line was a JSON object
// (within the limits, no duplicate keys) whose id was valid, even if the rest of the request was
// refused, so that the error can be answered with that id; otherwise it is set to
// std::monostate (answer with "id":null). Errc::kInternal is returned only if memory runs out.
Result<Request> parse_request(std::string_view line, RequestId* id_out = nullptr);

// Error codes on the wire. Fixed: graidctl and scripts depend on the names.
enum class ErrorCode : int {
  kBadRequest,    // "bad_request": the request is malformed (parse_request refused it, or its
                  // args do not fit the verb)
  kNotFound,      // "not_found": the named pd/dg/vd/... does not exist
  kRefused,       // "refused": well-formed, but the daemon will not do it (bad level, no space,
                  // unsupported, would lose data without --confirm-to-delete, ...)
  kBusy,          // "busy": the object is in use or another operation on it is running; retry
  kUnauthorised,  // "unauthorised": the peer may not do this (e.g. not root for a change)
  kInternal,      // "internal": the daemon failed for a reason that is not the request's fault
                  // (an I/O error, a broken invariant)
};

// The wire name: "bad_request", "not_found", "refused", "busy", "unauthorised", "internal".
std::string_view error_code_name(ErrorCode code) noexcept;

// The inverse of error_code_name(), for graidctl reading a response; nullopt for unknown names.
std::optional<ErrorCode> error_code_from_name(std::string_view name) noexcept;

// The error code the daemon answers with for an engine failure: kNotFound -> not_found, kBusy ->
// busy, kIoError/kCorrupt/kInternal -> internal, everything else (invalid argument, out of range,
// no space, unsupported) -> refused. Not used for parse_request() failures (always bad_request).
ErrorCode error_code_for(Errc errc) noexcept;

// graidctl's process exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRefused = 1;      // the daemon refused the input
inline constexpr int kExitUsage = 2;        // bad command line, or a request the daemon called bad
inline constexpr int kExitNotFound = 3;     // the named object does not exist
inline constexpr int kExitUnreachable = 4;  // no daemon on the socket, or it hung up mid-request
inline constexpr int kExitInternal = 5;     // the daemon (or graidctl) failed internally

// The exit code graidctl ends with for an error response: bad_request -> 2, not_found -> 3,
// refused/busy/unauthorised -> 1, internal -> 5. (0 and 4 are not error responses: success, and
// no response at all.)
int exit_code_for(ErrorCode code) noexcept;

// The id as a JSON value: a number, a string, or null for std::monostate.
nlohmann::json id_to_json(const RequestId& id);

// One success response line, newline-terminated: {"id":...,"result":...}. `result` is any JSON
// value (an object for most verbs, an array for list). Strings that are not valid UTF-8 are
// written with U+FFFD in place of the bad bytes, so this never throws on content.
std::string format_response_ok(const RequestId& id, const nlohmann::json& result);

// One error response line, newline-terminated: {"id":...,"error":{"code":...,"message":...}}.
// Pass std::monostate as the id when the request's id could not be read ("id":null).
std::string format_response_error(const RequestId& id, ErrorCode code, std::string_view message);

}  // namespace graid::control
