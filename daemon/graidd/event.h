// One event of graidd's event log (event_log.h), its severity, and the table that gives each
// kind its severity (docs/cli.md lists every kind with it).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace graid::daemon {

// info: what happened as asked or as expected; warning: redundancy or service is at risk, or
// something needs a look; critical: a drive or data is lost, or a DG stopped serving.
enum class Severity : std::uint8_t { kInfo, kWarning, kCritical };

std::string_view severity_name(Severity s) noexcept;
std::optional<Severity> parse_severity(std::string_view name) noexcept;
// The severity of an event kind (docs/cli.md, "Events"); info for a kind the table lacks.
Severity severity_of(std::string_view kind) noexcept;

struct Event {
  std::uint64_t seq = 0;  // from 1, increasing by one per event, across restarts
  std::chrono::system_clock::time_point time;
  Severity severity = Severity::kInfo;
  std::string kind;  // snake_case, listed in docs/cli.md ("pd_added", "member_failed", ...)
  std::optional<std::uint32_t> dg_id, pd_id, vd_id;
  std::optional<std::uint32_t> slot;  // member events: the member's slot in its DG
  std::string message;
};

// A time as graidctl prints times: RFC 3339 in UTC with milliseconds
// ("2026-12-07T19:59:42.877Z").
std::string rfc3339(std::chrono::system_clock::time_point t);

}  // namespace graid::daemon
