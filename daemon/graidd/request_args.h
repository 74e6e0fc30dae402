// Reading a control request's args: each getter returns the value or throws BadArguments naming
// the field and what it should be, which the dispatcher answers with `bad_request` (args that do
// not fit the verb) before the verb has changed anything. Exceptions stay on the control thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace graid::daemon {

struct BadArguments : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A required id (0..2^32-1).
std::uint32_t arg_id(const nlohmann::json& args, const char* key);
// An optional id: nullopt when absent.
std::optional<std::uint32_t> arg_opt_id(const nlohmann::json& args, const char* key);
// A list of ids; empty when absent and not required.
std::vector<std::uint32_t> arg_ids(const nlohmann::json& args, const char* key, bool required);
// An optional non-negative integer (a size, a seq).
std::optional<std::uint64_t> arg_opt_u64(const nlohmann::json& args, const char* key);
// A string; `fallback` when absent.
std::string arg_string(const nlohmann::json& args, const char* key, std::string fallback = {});
// A required string.
std::string arg_required_string(const nlohmann::json& args, const char* key);
// A list of strings (at least one).
std::vector<std::string> arg_strings(const nlohmann::json& args, const char* key);
// A boolean; false when absent.
bool arg_bool(const nlohmann::json& args, const char* key);
// The boolean `key`, or nullopt when absent (a wrong type is bad_request).
std::optional<bool> arg_opt_bool(const nlohmann::json& args, const char* key);

}  // namespace graid::daemon
