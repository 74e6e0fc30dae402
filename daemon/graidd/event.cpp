#include "graidd/event.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <ctime>

namespace graid::daemon {

namespace {

struct KindSeverity {
  std::string_view kind;
  Severity severity;
};

// Every kind that is not info; docs/cli.md ("Events") lists them all, with these severities.
constexpr std::array kNotInfo{
    // A drive or data lost, or a DG that serves nothing.
    KindSeverity{"member_failed", Severity::kCritical},
    KindSeverity{"dg_failed", Severity::kCritical},
    KindSeverity{"dg_offline", Severity::kCritical},
    KindSeverity{"data_lost", Severity::kCritical},
    KindSeverity{"pd_health_critical", Severity::kCritical},
    // Redundancy or service at risk, or something for the administrator to look at.
    KindSeverity{"dg_degraded", Severity::kWarning},
    KindSeverity{"pd_missing", Severity::kWarning},
    KindSeverity{"pd_unreadable_metadata", Severity::kWarning},
    KindSeverity{"export_failed", Severity::kWarning},
    KindSeverity{"ublk_held", Severity::kWarning},
    KindSeverity{"check_mismatch", Severity::kWarning},
    KindSeverity{"pd_hotspare_refused", Severity::kWarning},
    KindSeverity{"assembly_override", Severity::kWarning},
    KindSeverity{"dg_forced_online", Severity::kWarning},
    KindSeverity{"events_lost", Severity::kWarning},
    KindSeverity{"test", Severity::kWarning},
};

}  // namespace

std::string_view severity_name(Severity s) noexcept {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kCritical:
      return "critical";
  }
  return "unknown";
}

std::optional<Severity> parse_severity(std::string_view name) noexcept {
  for (const Severity s : {Severity::kInfo, Severity::kWarning, Severity::kCritical})
    if (severity_name(s) == name) return s;
  return std::nullopt;
}

Severity severity_of(std::string_view kind) noexcept {
  const auto it = std::find_if(kNotInfo.begin(), kNotInfo.end(),
                               [&](const KindSeverity& k) { return k.kind == kind; });
  return it == kNotInfo.end() ? Severity::kInfo : it->severity;
}

std::string rfc3339(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch());
  const std::time_t secs = static_cast<std::time_t>(ms.count() / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03}Z", buf, ms.count() % 1000);
}

}  // namespace graid::daemon
