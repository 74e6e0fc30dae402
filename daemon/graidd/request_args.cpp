#include "graidd/request_args.h"

#include <fmt/format.h>

namespace graid::daemon {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const char* key, const char* what) {
  throw BadArguments(fmt::format("\"{}\" must be {}", key, what));
}

}  // namespace

std::uint32_t arg_id(const json& args, const char* key) {
  auto v = arg_opt_id(args, key);
  if (!v) throw BadArguments(fmt::format("missing \"{}\"", key));
  return *v;
}

std::optional<std::uint32_t> arg_opt_id(const json& args, const char* key) {
  if (!args.contains(key)) return std::nullopt;
  const json& v = args[key];
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
    bad(key, "an id (a non-negative integer)");
  const auto id = v.get<std::uint64_t>();
  if (id > UINT32_MAX) bad(key, "an id below 2^32");
  return static_cast<std::uint32_t>(id);
}

std::vector<std::uint32_t> arg_ids(const json& args, const char* key, bool required) {
  std::vector<std::uint32_t> ids;
  if (!args.contains(key)) {
    if (required) throw BadArguments(fmt::format("missing \"{}\"", key));
    return ids;
  }
  if (!args[key].is_array()) bad(key, "a list of ids");
  if (args[key].size() > 1024) bad(key, "a list of at most 1024 ids");
  for (const auto& v : args[key]) {
    json one{{"id", v}};
    ids.push_back(arg_id(one, "id"));
  }
  return ids;
}

std::optional<std::uint64_t> arg_opt_u64(const json& args, const char* key) {
  if (!args.contains(key)) return std::nullopt;
  const json& v = args[key];
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
    bad(key, "a non-negative integer");
  return v.get<std::uint64_t>();
}

std::string arg_string(const json& args, const char* key, std::string fallback) {
  if (!args.contains(key)) return fallback;
  if (!args[key].is_string()) bad(key, "a string");
  return args[key].get<std::string>();
}

std::string arg_required_string(const json& args, const char* key) {
  if (!args.contains(key)) throw BadArguments(fmt::format("missing \"{}\"", key));
  return arg_string(args, key);
}

std::vector<std::string> arg_strings(const json& args, const char* key) {
  if (!args.contains(key)) throw BadArguments(fmt::format("missing \"{}\"", key));
  if (!args[key].is_array() || args[key].empty()) bad(key, "a non-empty list of strings");
  std::vector<std::string> out;
  for (const auto& v : args[key]) {
    if (!v.is_string()) bad(key, "a list of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

bool arg_bool(const json& args, const char* key) {
  if (!args.contains(key)) return false;
  if (!args[key].is_boolean()) bad(key, "true or false");
  return args[key].get<bool>();
}

std::optional<bool> arg_opt_bool(const json& args, const char* key) {
  if (!args.contains(key)) return std::nullopt;
  return arg_bool(args, key);
}

}  // namespace graid::daemon
