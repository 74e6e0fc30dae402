// One profile measured the way every graid-bench figure is: the members' raw capacity at the
// profile's member-level mix (a queue-depth sweep unless one is given), then the array on the same
// members, alternating in rounds; the round with the median ratio is reported with every round's
// ratio. Shared by the single run (main.cpp) and the suite (suite.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "array_session.h"
#include "graid/geometry.h"
#include "graid/status.h"
#include "report.h"
#include "timed_run.h"

namespace graid::bench {

struct MeasureConfig {
  std::vector<std::string> paths;     // the members
  std::uint64_t raw_offset = 0;       // first member byte the raw baseline uses (the data area)
  std::uint64_t raw_bytes = 0;        // member bytes it uses from there
  ArraySession* session = nullptr;    // the array, or none (raw only)
  std::uint64_t span = 0;             // array bytes the workload covers
  std::uint32_t queue_depth = 32;     // array requests in flight per thread
  std::uint32_t raw_queue_depth = 0;  // member I/Os per raw thread; 0: swept
  TimedRunConfig timing;              // threads, warm-up, seconds (split among the rounds)
  std::uint32_t rounds = 1;
  std::uint64_t seed = 1;
  // Measure the members too. Off for arrays whose cost per request the model does not cover
  // (degraded, rebuilding): the report then has the array's figures and no limit.
  bool raw = true;
  double target_iops = 0;  // the array run open loop at this rate (ArrayRunConfig)
};

// Measures `profile`. `cost` is the member I/Os the array issues per request (cost_model.h): the
// raw baseline runs at that mix. An error names the profile.
Result<ProfileReport> measure_profile(const MeasureConfig& config, const Profile& profile,
                                      const MemberCost& cost);

}  // namespace graid::bench
