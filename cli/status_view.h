// graidctl status: one screen for every DG and an exit code a Nagios or cron check can use, as
// `mdadm --detail --test` (docs/cli.md, "status"). Pure functions over `describe dg` and
// `list pd` results.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace graid::cli {

// mdadm --detail --test's exit codes; the worst DG wins.
inline constexpr int kStatusOptimal = 0;   // every DG optimal (initialising, re-syncing and
                                           // checking count as optimal), or no DG at all
inline constexpr int kStatusDegraded = 1;  // a DG degraded or rebuilding, a member not in sync,
                                           // or lost ranges
inline constexpr int kStatusFailed = 2;    // a DG failed or not assembled (offline)
inline constexpr int kStatusUnknown = 4;   // graidd could not be asked

struct DgStatus {
  nlohmann::json dg;  // `describe dg`, as graidd sent it
  int code = kStatusOptimal;
  std::vector<std::string> problems;  // failed, missing, stale or rebuilding members, lost ranges
  std::vector<std::string> jobs;      // jobs running, with percent, speed and time left
};

struct StatusReport {
  int exit_code = kStatusOptimal;
  std::vector<DgStatus> dgs;
};

// The code of one DG (a `describe dg` result).
int dg_status_code(const nlohmann::json& dg);
// "optimal", "degraded", "failed" or "unknown" for a code.
const char* status_name(int code);

// The report for `dgs` (an array of `describe dg` results) with the reasons PDs give (`pds`: a
// `list pd` result, for the message of each failed or missing member).
StatusReport build_status(const nlohmann::json& dgs, const nlohmann::json& pds);

// The screen: a line per DG ("dg 0 (data) raid5, 4 members: degraded"), its problems and jobs
// indented under it, and a last line with the overall status and exit code.
std::string render_status(const StatusReport& report);
// --format json: {"status","exit_code","dgs":[{"dg_id","name","level","state","status",
// "problems":[..],"jobs":[..]}]}.
nlohmann::json status_to_json(const StatusReport& report);

}  // namespace graid::cli
