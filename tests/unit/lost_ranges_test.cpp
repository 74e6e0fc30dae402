// Lost range lists (engine/array/bad_ranges.h): merging new ranges in, and what a write leaves of
// them (covered ranges go, ends shrink, middles split, a full list keeps a range whole).
#include <gtest/gtest.h>

#include "array/bad_ranges.h"

namespace graid {
namespace {

using meta::BadRange;
using List = std::vector<BadRange>;

TEST(LostRanges, NeighboursMergeIntoOneRange) {
  EXPECT_EQ(merged_lost_ranges({{4096, 4096}}, {{8192, 4096}, {0, 512}}),
            (List{{0, 512}, {4096, 8192}}));
  EXPECT_EQ(merged_lost_ranges({{0, 8192}}, {{4096, 8192}}), (List{{0, 12288}}));
}

TEST(LostRanges, AWriteClearsWhatItCoversAndNothingElse) {
  const List list = {{4096, 8192}, {65536, 4096}};
  // Covers all of the first.
  auto a = lost_ranges_after_write(list, 0, 16384, 64);
  EXPECT_EQ(a.list, (List{{65536, 4096}}));
  EXPECT_EQ(a.cleared, (List{{4096, 8192}}));
  EXPECT_TRUE(a.kept_whole.empty());
  // Its first half (a write piece ending at a stripe boundary), then the second.
  auto b = lost_ranges_after_write(list, 0, 8192, 64);
  EXPECT_EQ(b.list, (List{{8192, 4096}, {65536, 4096}}));
  EXPECT_EQ(b.cleared, (List{{4096, 4096}}));
  auto c = lost_ranges_after_write(b.list, 8192, 8192, 64);
  EXPECT_EQ(c.list, (List{{65536, 4096}}));
  // The middle: split in two.
  auto d = lost_ranges_after_write(list, 6144, 2048, 64);
  EXPECT_EQ(d.list, (List{{4096, 2048}, {8192, 4096}, {65536, 4096}}));
  EXPECT_EQ(d.cleared, (List{{6144, 2048}}));
  // Elsewhere: nothing.
  auto e = lost_ranges_after_write(list, 32768, 4096, 64);
  EXPECT_EQ(e.list, list);
  EXPECT_TRUE(e.cleared.empty());
  // Across two ranges at once.
  auto f = lost_ranges_after_write(list, 8192, 61440, 64);
  EXPECT_EQ(f.list, (List{{4096, 4096}}));
  EXPECT_EQ(f.cleared, (List{{8192, 4096}, {65536, 4096}}));
}

TEST(LostRanges, AFullListKeepsARangeWholeRatherThanSplitIt) {
  List full;
  for (std::uint64_t i = 0; i < 64; ++i)
    full.push_back({i * 65536, 8192});
  // A middle cut would need a 65th slot: kept whole, named.
  auto split = lost_ranges_after_write(full, 65536 + 2048, 2048, 64);
  EXPECT_EQ(split.list, full);
  EXPECT_TRUE(split.cleared.empty());
  EXPECT_EQ(split.kept_whole, (List{{65536, 8192}}));
  // Shrinking needs no slot.
  auto shrink = lost_ranges_after_write(full, 65536, 4096, 64);
  EXPECT_EQ(shrink.list.size(), 64u);
  EXPECT_EQ(shrink.list[1], (BadRange{65536 + 4096, 4096}));
  // With room for one more, the split goes ahead.
  List room(full.begin(), full.end() - 1);
  auto one = lost_ranges_after_write(room, 65536 + 2048, 2048, 64);
  EXPECT_TRUE(one.kept_whole.empty());
  EXPECT_EQ(one.list.size(), 64u);
  EXPECT_EQ(one.cleared, (List{{65536 + 2048, 2048}}));
}

}  // namespace
}  // namespace graid
