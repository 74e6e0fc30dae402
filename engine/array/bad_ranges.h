// Lost array data ranges (meta::BadRange) as lists: merging new ones in and taking out what a
// write covered. Pure functions, so their edge cases are tested on their own. Internal to
// engine/array.
#pragma once

#include <cstdint>
#include <vector>

#include "meta/superblock.h"

namespace graid {

// `list` with `add` merged in: ascending, overlapping or touching ranges joined.
std::vector<meta::BadRange> merged_lost_ranges(std::vector<meta::BadRange> list,
                                               const std::vector<meta::BadRange>& add);

// What a write of array bytes [offset, +len) leaves of `list` (ascending, disjoint).
struct LostRangesAfterWrite {
  std::vector<meta::BadRange> list;     // what stays lost
  std::vector<meta::BadRange> cleared;  // the parts the write covered, which read again
  // Ranges the write cut in the middle, kept whole because splitting them would have taken the
  // list past `capacity` (their written part stays refused to reads until a write covers the
  // whole range: no read ever returns wrong data, some return an error they need not).
  std::vector<meta::BadRange> kept_whole;
};

// Takes out of `list` every byte the write covered: a range it covers goes, one it overlaps at an
// end shrinks, one it cuts in the middle splits in two (unless the list would then hold more
// than `capacity` ranges: kept whole, and named). Writes are split at stripe boundaries, so a
// range that spans a boundary is cleared piece by piece.
LostRangesAfterWrite lost_ranges_after_write(const std::vector<meta::BadRange>& list,
                                             std::uint64_t offset, std::uint64_t len,
                                             std::size_t capacity);

}  // namespace graid
