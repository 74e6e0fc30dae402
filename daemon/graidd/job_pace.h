// A DG's background job paced by one of its speed settings (rebuild_speed, init_speed, ...):
// the minimum and maximum rates that setting gives, read again at every window, so `graidctl
// edit dg` applies to a job already running.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "graid/array.h"

namespace graid::daemon {

// graidd --speed-limit-max: a ceiling on every job's speed in bytes per second per member (0:
// none), daemon-wide, as md's /proc/sys/dev/raid/speed_limit_max.
inline std::atomic<std::uint64_t>& speed_limit_max() {
  static std::atomic<std::uint64_t> limit{0};
  return limit;
}
inline void set_speed_limit_max(std::uint64_t bytes_per_second) {
  speed_limit_max().store(bytes_per_second, std::memory_order_relaxed);
}

// `speed`'s limits under the daemon-wide ceiling.
inline JobSpeed capped_speed(BackgroundSpeed speed) {
  JobSpeed s = background_speed(speed);
  const std::uint64_t cap = speed_limit_max().load(std::memory_order_relaxed);
  if (cap != 0) {
    s.max = s.max == 0 ? cap : std::min(s.max, cap);
    s.min = std::min(s.min, cap);
  }
  return s;
}

// Sets `control.speed` (RebuildControl, CheckControl, InitControl) from
// `array`'s setting `speed`; `array` must outlive the job.
template <typename Control>
void pace_by_setting(Control& control, const Array& array, BackgroundSpeed ArraySettings::*speed) {
  control.speed = [&array, speed] { return capped_speed(array.settings().*speed); };
}

}  // namespace graid::daemon
