// The array workload: --threads threads, each owning an IoContext and an ArrayQueue, keeping
// --qd requests of the profile in flight, closed loop, over one timed window.
#pragma once

#include <cstdint>

#include "array_session.h"
#include "profiles.h"
#include "stats.h"
#include "timed_run.h"

namespace graid::bench {

struct ArrayRunConfig {
  Profile profile{};
  std::uint64_t span = 0;          // array bytes the offsets are drawn from, from offset 0
  std::uint32_t queue_depth = 32;  // array requests in flight per thread
  TimedRunConfig timing;
  std::uint64_t seed = 1;
};

// Runs one profile on the array; figures count array requests and array bytes.
Result<RunFigures> run_array_workload(ArraySession& session, const ArrayRunConfig& config);

}  // namespace graid::bench
