// The array workload: --threads threads, each owning an IoContext and an ArrayQueue, keeping
// --qd requests of the profile in flight, closed loop, over one timed window; or, with a target
// rate, issuing them open loop on a schedule (the latency-against-load runs).
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
  // Open loop at this many requests per second (all threads together), at most queue_depth per
  // thread in flight; 0 = closed loop (every completion issues the next at once). Latency is
  // counted from when a request was due, not from when a slot let it go: a run past what the
  // array can do shows the queueing it causes (no coordinated omission).
  double target_iops = 0;
};

// Runs one profile on the array; figures count array requests and array bytes.
Result<RunFigures> run_array_workload(ArraySession& session, const ArrayRunConfig& config);

}  // namespace graid::bench
