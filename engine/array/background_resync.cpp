// Background re-sync after an unclean stop: what assembly plans for it (the job itself,
// Array::resync, is jobs/resync_job.cpp): the stripes the write-intent bitmap marked at assembly
// made consistent again while the array is in use, window by window under stripe locks, paced. Its
// regions' bits are pinned (WriteIntentBitmap::pin_dirty) until it has passed them, so a stop or a
// crash leaves them set and the next assembly re-syncs what is left: that is the resume.
// sb.resync_checkpoint records where it got to (for progress, and so the next assembly knows a
// re-sync was pending). Until it passes a stripe, writes to the stripe trust none of its parity
// (State::initialised).
#include "array/background_resync.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace graid {

std::uint64_t range_stripes(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& ranges,
                            std::uint64_t below) {
  std::uint64_t count = 0;
  for (const auto& [first, last] : ranges)
    count += first < below ? std::min(last, below) - first : 0;
  return count;
}

std::uint64_t plan_background_resync(Array::State& s) {
  const Geometry& g = s.geometry;
  if (!s.bitmap || g.redundancy() == Redundancy::kNone) return 0;
  const std::uint64_t strip = g.strip_bytes();
  const std::uint64_t stripes = g.stripes(s.data_size);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& [offset, length] : s.bitmap->dirty_ranges()) {
    const std::uint64_t first = offset / strip;
    const std::uint64_t last = std::min(stripes, (offset + length + strip - 1) / strip);
    if (first >= last) continue;
    if (!ranges.empty() && ranges.back().second >= first) {
      ranges.back().second = std::max(ranges.back().second, last);
    } else {
      ranges.emplace_back(first, last);
    }
  }
  if (ranges.empty()) return 0;
  s.bitmap->pin_dirty();
  s.resync_done.store(ranges.front().first, std::memory_order_release);
  s.resync_ranges = std::move(ranges);
  return range_stripes(s.resync_ranges, stripes) * strip;
}

}  // namespace graid
