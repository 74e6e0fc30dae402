// The raw capacity of the members: io_uring straight on the member files or devices with
// O_DIRECT, at the member-level mix an array profile implies (cost_model.h). It is the
// denominator of every ratio graid-bench reports, so it is given every advantage the engine may
// use: one ring per thread set up for a single issuer, registered files and buffers.
//
// It writes zeros, never random data: the members are created all zero and the array is then
// created assume-clean on them, so the baseline must leave them consistent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cost_model.h"
#include "graid/status.h"
#include "profiles.h"
#include "stats.h"
#include "timed_run.h"

namespace graid::bench {

struct RawConfig {
  std::vector<std::string> paths;   // the members
  std::uint64_t member_offset = 0;  // first member byte used (an array's data area starts here)
  std::uint64_t member_bytes = 0;   // bytes used from member_offset on
  MemberCost cost;                  // member I/O size and read share
  AccessPattern pattern = AccessPattern::kRandom;
  std::uint32_t queue_depth = 32;  // member I/Os in flight per thread
  TimedRunConfig timing;           // threads, warm-up, seconds
  std::uint64_t seed = 1;
};

// Runs the baseline; figures count member I/Os and member bytes.
Result<RunFigures> run_raw_baseline(const RawConfig& config);

}  // namespace graid::bench
