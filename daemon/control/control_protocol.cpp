#include "control/control_protocol.h"

#include <fmt/format.h>

#include <array>
#include <exception>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace graid::control {

namespace {

using nlohmann::json;

// Quotes a piece of untrusted text for an error message, cut to a readable length. The message
// is later written with invalid UTF-8 replaced (format_response_error), so bytes pass through.
std::string shown(std::string_view text) {
  constexpr std::size_t kMaxShown = 64;
  if (text.size() <= kMaxShown) return fmt::format("\"{}\"", text);
  return fmt::format("\"{}...\"", text.substr(0, kMaxShown));
}

// First pass over the line: a SAX handler that builds nothing and stops at the first syntax
// error, at nesting deeper than kMaxRequestDepth, or at a key repeated within one object (the DOM
// parser would silently keep the last one). nlohmann's parser is iterative, so a hostile line
// cannot exhaust the stack even before the depth check stops it.
class Validator {
 public:
  bool null() { return true; }
  bool boolean(bool /*value*/) { return true; }
  bool number_integer(json::number_integer_t /*value*/) { return true; }
  bool number_unsigned(json::number_unsigned_t /*value*/) { return true; }
  bool number_float(json::number_float_t /*value*/, const json::string_t& /*text*/) { return true; }
  bool string(json::string_t& /*value*/) { return true; }
  bool binary(json::binary_t& /*value*/) { return true; }
  bool start_object(std::size_t /*elements*/) {
    keys_.emplace_back();
    return enter();
  }
  bool key(json::string_t& key) {
    if (!keys_.back().insert(key).second) {
      error_ = fmt::format("duplicate key {}", shown(key));
      return false;
    }
    return true;
  }
  bool end_object() {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t /*elements*/) { return enter(); }
  bool end_array() {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& ex) {
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 2: ...".
    std::string_view what = ex.what();
    if (const auto end = what.find("] "); end != std::string_view::npos) {
      what.remove_prefix(end + 2);
    }
    error_ = fmt::format("not JSON: {}", what);
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  bool enter() {
    if (++depth_ > kMaxRequestDepth) {
      error_ = fmt::format("nesting deeper than {} levels", kMaxRequestDepth);
      return false;
    }
    return true;
  }

  int depth_ = 0;
  std::vector<std::unordered_set<std::string>> keys_;  // one set per open object
  std::string error_;
};

Status bad(std::string message) {
  return Status(Errc::kInvalidArgument, std::move(message));
}

Status check_name(std::string_view field, const json& value) {
  if (!value.is_string()) return bad(fmt::format("{} must be a string", field));
  const auto& name = value.get_ref<const std::string&>();
  if (name.empty()) return bad(fmt::format("{} must not be empty", field));
  if (name.size() > kMaxNameLength) {
    return bad(
        fmt::format("{} is {} bytes, over the {}-byte limit", field, name.size(), kMaxNameLength));
  }
  for (const char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return bad(fmt::format("{} {} has a character outside [a-z0-9_]", field, shown(name)));
    }
  }
  return Status::ok();
}

Result<RequestId> read_id(const json& value) {
  if (value.is_number_unsigned()) return RequestId(value.get<std::uint64_t>());
  if (value.is_number_integer()) return bad("id must not be negative");
  if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    if (s.empty()) return bad("id must not be an empty string");
    if (s.size() > kMaxIdString) {
      return bad(
          fmt::format("id string is {} bytes, over the {}-byte limit", s.size(), kMaxIdString));
    }
    return RequestId(s);
  }
  return bad(fmt::format("id must be a non-negative integer or a string of at most {} bytes",
                         kMaxIdString));
}

Result<Request> parse_object(const json& doc, RequestId* id_out) {
  if (!doc.is_object()) {
    return bad(fmt::format("a request must be a JSON object, not {}", doc.type_name()));
  }
  for (const auto& [key, value] : doc.items()) {
    (void)value;
    if (key != "id" && key != "verb" && key != "object" && key != "args") {
      return bad(fmt::format("unknown field {} (expected id, verb, object, args)", shown(key)));
    }
  }
  Request request;
  const auto id = doc.find("id");
  if (id == doc.end()) return bad("missing field \"id\"");
  auto parsed_id = read_id(*id);
  if (!parsed_id) return parsed_id.status();
  request.id = std::move(*parsed_id);
  if (id_out != nullptr) *id_out = request.id;

  const auto verb = doc.find("verb");
  if (verb == doc.end()) return bad("missing field \"verb\"");
  GRAID_RETURN_IF_ERROR(check_name("verb", *verb));
  request.verb = verb->get<std::string>();

  if (const auto object = doc.find("object"); object != doc.end()) {
    GRAID_RETURN_IF_ERROR(check_name("object", *object));
    request.object = object->get<std::string>();
  }
  if (const auto args = doc.find("args"); args != doc.end()) {
    if (!args->is_object()) {
      return bad(fmt::format("args must be an object, not {}", args->type_name()));
    }
    request.args = *args;
  }
  return request;
}

std::string dump(const json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

}  // namespace

Result<Request> parse_request(std::string_view line, RequestId* id_out) {
  if (id_out != nullptr) *id_out = std::monostate{};
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.size() > kMaxRequestLine) {
    return bad(fmt::format("request line is {} bytes, over the {}-byte limit", line.size(),
                           kMaxRequestLine));
  }
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return bad("empty request line");
  if (line.find('\n') != std::string_view::npos) {
    return bad("newline inside a request line (one request per line)");
  }
  try {
    Validator validator;
    if (!json::sax_parse(line, &validator)) return bad(validator.error());
    const json doc = json::parse(line, /*cb=*/nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return bad("not JSON");  // unreachable: the validator accepted it
    return parse_object(doc, id_out);
  } catch (const std::exception& e) {
    // Only allocation failure can get here; json's own errors are handled without throwing.
    return make_error(Errc::kInternal, "parsing the request failed: {}", e.what());
  }
}

std::string_view error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kBadRequest:
      return "bad_request";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kRefused:
      return "refused";
    case ErrorCode::kBusy:
      return "busy";
    case ErrorCode::kUnauthorised:
      return "unauthorised";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "internal";
}

std::optional<ErrorCode> error_code_from_name(std::string_view name) noexcept {
  static constexpr std::array kAll = {ErrorCode::kBadRequest,   ErrorCode::kNotFound,
                                      ErrorCode::kRefused,      ErrorCode::kBusy,
                                      ErrorCode::kUnauthorised, ErrorCode::kInternal};
  for (const ErrorCode code : kAll) {
    if (error_code_name(code) == name) return code;
  }
  return std::nullopt;
}

ErrorCode error_code_for(Errc errc) noexcept {
  switch (errc) {
    case Errc::kNotFound:
      return ErrorCode::kNotFound;
    case Errc::kBusy:
      return ErrorCode::kBusy;
    case Errc::kIoError:
    case Errc::kCorrupt:
    case Errc::kInternal:
    case Errc::kOk:  // an error response for a success is itself a bug
      return ErrorCode::kInternal;
    case Errc::kInvalidArgument:
    case Errc::kOutOfRange:
    case Errc::kNoSpace:
    case Errc::kUnsupported:
      return ErrorCode::kRefused;
  }
  return ErrorCode::kInternal;
}

int exit_code_for(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kBadRequest:
      return kExitUsage;
    case ErrorCode::kNotFound:
      return kExitNotFound;
    case ErrorCode::kRefused:
    case ErrorCode::kBusy:
    case ErrorCode::kUnauthorised:
      return kExitRefused;
    case ErrorCode::kInternal:
      return kExitInternal;
  }
  return kExitInternal;
}

json id_to_json(const RequestId& id) {
  if (const auto* n = std::get_if<std::uint64_t>(&id)) return *n;
  if (const auto* s = std::get_if<std::string>(&id)) return *s;
  return nullptr;
}

std::string format_response_ok(const RequestId& id, const json& result) {
  // Built by hand so that "id" comes first (json objects sort their keys).
  return fmt::format("{{\"id\":{},\"result\":{}}}\n", dump(id_to_json(id)), dump(result));
}

std::string format_response_error(const RequestId& id, ErrorCode code, std::string_view message) {
  json error = json::object();
  error["code"] = std::string(error_code_name(code));
  error["message"] = std::string(message);
  return fmt::format("{{\"id\":{},\"error\":{}}}\n", dump(id_to_json(id)), dump(error));
}

}  // namespace graid::control
