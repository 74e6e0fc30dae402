// libFuzzer target for the control socket's request parser (daemon/control/control_protocol.h).
// Properties:
//   - parse_request() never throws, crashes, reads out of bounds or hits UB (the sanitizers
//     watch), and never takes long on a line within the limits;
//   - a refusal has a message, and the error response built from it is one line of valid JSON;
//   - an accepted request has a verb of 1..64 characters from [a-z0-9_], an object for args and
//     an id that is a number or a string of at most kMaxIdString bytes, and its response is one
//     line of valid JSON carrying that id.
// Run: control_protocol_fuzz -max_len=4096 [-max_total_time=60]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "control/control_protocol.h"

namespace graid::control {
namespace {

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "control_protocol_fuzz: property violated: %s\n", what);
    std::abort();
  }
}

bool one_json_line(const std::string& line) {
  return !line.empty() && line.back() == '\n' && line.find('\n') == line.size() - 1 &&
         nlohmann::json::accept(line);
}

}  // namespace
}  // namespace graid::control

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace graid::control;
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  RequestId seen;
  auto r = parse_request(line, &seen);
  if (!r.is_ok()) {
    require(!r.status().message().empty(), "refusal without a message");
    require(
        one_json_line(format_response_error(seen, ErrorCode::kBadRequest, r.status().message())),
        "error response is not one JSON line");
    return 0;
  }
  const Request& request = r.value();
  require(!request.verb.empty() && request.verb.size() <= kMaxNameLength, "verb length");
  for (const char c : request.verb) {
    require((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_', "verb character");
  }
  require(request.args.is_object(), "args is not an object");
  require(!std::holds_alternative<std::monostate>(request.id), "accepted request without an id");
  if (const auto* s = std::get_if<std::string>(&request.id)) {
    require(!s->empty() && s->size() <= kMaxIdString, "id string length");
  }
  require(seen == request.id, "id_out differs from the request's id");
  const std::string response = format_response_ok(request.id, request.args);
  require(one_json_line(response), "ok response is not one JSON line");
  require(nlohmann::json::parse(response)["id"] == id_to_json(request.id), "id not echoed");
  return 0;
}
