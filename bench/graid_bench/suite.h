// `graid-bench suite`: the benchmark report's measurements. For RAID5 and RAID6 with each parity
// backend, the review profiles on the optimal array (against the members' limit, as every
// graid-bench figure), then with members failed (one, two for RAID6) and while a rebuild onto
// fresh members runs at a fixed pace; latency against load (open-loop runs at a share of the
// measured maximum, one past it); RAID10 and RAID0 optimal for reference; the ref backend on one
// profile for scale. Each row is printed as it is measured; at the end OUT/suite.json (schema
// graid-bench-report/1) and, through bench/report/graid_report.py, OUT/report.md and the plots.
#pragma once

#include <string>
#include <vector>

#include "graid/geometry.h"
#include "graid/status.h"
#include "profiles.h"
#include "suite_options.h"

namespace graid::bench {

// One array the suite builds and measures.
struct SuiteCase {
  RaidLevel level = RaidLevel::kRaid5;
  std::uint32_t members = 0;
  std::string backend;
  bool states = false;                 // also degraded and rebuilding
  std::vector<Profile> profiles;       // measured in every state
  std::vector<Profile> load_profiles;  // latency against load, optimal (among `profiles`)
  std::vector<double> load_points;     // percent of the measured maximum
};

// The cases `options` make, in the order they run.
Result<std::vector<SuiteCase>> suite_plan(const SuiteOptions& options);

// Runs the suite; the process exit status. `command` is recorded in the report.
int run_suite(const SuiteOptions& options, const std::string& command);

}  // namespace graid::bench
