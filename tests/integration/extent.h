// A byte range of an array, for the randomized tests that keep requests in flight apart (or
// reads away from the writes of their batch).
#pragma once

#include <cstdint>

namespace graid::testing {

struct Extent {
  std::uint64_t offset = 0;
  std::uint32_t len = 0;
};

inline bool overlaps(const Extent& a, const Extent& b) {
  return a.offset < b.offset + b.len && b.offset < a.offset + a.len;
}

}  // namespace graid::testing
