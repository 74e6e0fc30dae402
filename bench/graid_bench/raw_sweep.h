// The members' capacity at saturation: a short sweep of the raw baseline's queue depth, best of.
//
// The raw baseline (raw_baseline.h) is the denominator of every ratio. Run only at the member
// I/Os an array run keeps in flight, it can sit below what the members give at a deeper queue,
// and ratios above 1 appear. So, unless --raw-qd fixes the depth, each profile first probes a few
// depths around that one (half, same, twice, four times) for a short time each (a quarter of a
// round, at most 0.5 s, after at most 0.1 s of warm-up), and the rounds' raw runs use the depth
// that gave the most member IOPS.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "graid/status.h"

namespace graid::bench {

struct SweepPoint {
  std::uint32_t queue_depth = 0;
  double iops = 0;  // member I/Os per second at that depth
};

struct RawSweep {
  std::vector<SweepPoint> points;  // in the order probed
  std::uint32_t best_queue_depth = 0;
};

// The depths to probe around `base` (the array run's member I/Os in flight): base/2, base,
// 2 base, 4 base, each at least 1 and at most `max`, without repeats, ascending.
std::vector<std::uint32_t> sweep_queue_depths(std::uint32_t base, std::uint32_t max);

// Measures each depth with `measure` (member IOPS at that depth) and picks the best; the first
// error ends the sweep. kInvalidArgument for an empty list.
Result<RawSweep> sweep_raw(std::span<const std::uint32_t> depths,
                           const std::function<Result<double>(std::uint32_t)>& measure);

}  // namespace graid::bench
