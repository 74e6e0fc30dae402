// The background re-sync after an unclean stop (Array::resync in jobs/resync_job.cpp): what
// assembly sets up for it.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "state/array_state.h"

namespace graid {

// At assembly, before the state is shared: makes the stripes of the regions the write-intent
// bitmap marks pending (State::resync_ranges, resync_done) and pins their bits, so none clears
// before Array::resync() has passed it. Returns the member bytes per member pending (0: none).
std::uint64_t plan_background_resync(Array::State& state);

// Stripes of `ranges` ([first, last) pairs) below stripe `below`.
std::uint64_t range_stripes(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& ranges,
                            std::uint64_t below);

}  // namespace graid
