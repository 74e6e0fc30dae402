#include "raw_sweep.h"

#include <algorithm>

namespace graid::bench {

std::vector<std::uint32_t> sweep_queue_depths(std::uint32_t base, std::uint32_t max) {
  std::vector<std::uint32_t> depths;
  const std::uint64_t b = std::max<std::uint32_t>(base, 1);
  for (const std::uint64_t d : {b / 2, b, b * 2, b * 4}) {
    const auto clamped = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(d, 1, max));
    if (std::find(depths.begin(), depths.end(), clamped) == depths.end()) depths.push_back(clamped);
  }
  std::sort(depths.begin(), depths.end());
  return depths;
}

Result<RawSweep> sweep_raw(std::span<const std::uint32_t> depths,
                           const std::function<Result<double>(std::uint32_t)>& measure) {
  if (depths.empty()) return make_error(Errc::kInvalidArgument, "no queue depth to sweep");
  RawSweep sweep;
  double best = -1;
  for (const std::uint32_t qd : depths) {
    auto iops = measure(qd);
    if (!iops.is_ok()) return iops.status();
    sweep.points.push_back({qd, *iops});
    if (*iops > best) {
      best = *iops;
      sweep.best_queue_depth = qd;
    }
  }
  return sweep;
}

}  // namespace graid::bench
