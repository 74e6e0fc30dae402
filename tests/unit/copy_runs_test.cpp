// Copy planning for the cuda backend: placement keeps host neighbours neighbours on the device,
// and coalescing merges exactly the runs that are contiguous on both sides.
#include "kernels/copy_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace graid::kernels {
namespace {

TEST(CopyRuns, NeighboursInHostMemoryBecomeOneCopy) {
  // Three adjacent 64 KiB buffers (out of order), then one elsewhere.
  const std::uintptr_t base = 0x7f0000000000;
  std::vector<CopyRun> runs{{base + 65536, 0, 65536, 1},
                            {base + 10 * 65536, 0, 65536, 3},
                            {base, 0, 65536, 0},
                            {base + 2 * 65536, 0, 65536, 2}};
  const std::size_t end = place_runs(runs, 1000, 256);
  EXPECT_EQ(runs[0].tag, 0u);  // sorted by host address
  EXPECT_EQ(runs[0].device_offset, 1024u);
  EXPECT_EQ(runs[1].device_offset, 1024u + 65536);
  EXPECT_EQ(runs[2].device_offset, 1024u + 2 * 65536);
  EXPECT_EQ(runs[3].device_offset, 1024u + 3 * 65536);  // already aligned
  EXPECT_EQ(end, 1024u + 4 * 65536);
  coalesce_runs(runs);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].host, base);
  EXPECT_EQ(runs[0].len, 3u * 65536);
  EXPECT_EQ(runs[0].tag, 0u);
  EXPECT_EQ(runs[1].host, base + 10 * 65536);
  EXPECT_EQ(runs[1].len, 65536u);
}

TEST(CopyRuns, UnalignedNeighboursStayContiguousOthersAreAligned) {
  std::vector<CopyRun> runs{{4096, 0, 100, 0}, {4196, 0, 28, 1}, {8192, 0, 64, 2}};
  const std::size_t end = place_runs(runs, 0, 256);
  EXPECT_EQ(runs[0].device_offset, 0u);
  EXPECT_EQ(runs[1].device_offset, 100u);  // continues its host neighbour
  EXPECT_EQ(runs[2].device_offset, 256u);  // a new run starts aligned
  EXPECT_EQ(end, 320u);
}

TEST(CopyRuns, OnlyRunsContiguousOnBothSidesMerge) {
  // Host-contiguous but not device-contiguous: two copies.
  std::vector<CopyRun> runs{{1000, 0, 100, 0}, {1100, 512, 100, 1}};
  coalesce_runs(runs);
  EXPECT_EQ(runs.size(), 2u);
  // Device-contiguous but not host-contiguous: two copies.
  runs = {{1000, 0, 100, 0}, {2000, 100, 100, 1}};
  coalesce_runs(runs);
  EXPECT_EQ(runs.size(), 2u);
  runs.clear();
  coalesce_runs(runs);
  EXPECT_TRUE(runs.empty());
}

// Random layouts: after placement and coalescing, every byte of every original run is covered by
// exactly one merged run, at the device offset placement gave it.
TEST(CopyRuns, RandomLayoutsCopyEveryByteToItsPlace) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 500; ++round) {
    std::vector<CopyRun> runs;
    std::uintptr_t host = 1 << 20;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const std::size_t len = 64 * (1 + rng() % 32);
      runs.push_back({host, 0, len, static_cast<std::uint32_t>(i)});
      host += len + (rng() % 3 == 0 ? 64 * (1 + rng() % 4) : 0);  // sometimes a gap
    }
    std::shuffle(runs.begin(), runs.end(), rng);
    const std::size_t start = rng() % 5000;
    const std::size_t end = place_runs(runs, start, 256);
    std::vector<CopyRun> placed = runs;
    for (std::size_t i = 0; i < placed.size(); ++i) {
      EXPECT_GE(placed[i].device_offset, start);
      EXPECT_LE(placed[i].device_offset + placed[i].len, end);
      if (i > 0) {
        EXPECT_GE(placed[i].device_offset, placed[i - 1].device_offset + placed[i - 1].len)
            << "device ranges overlap";
      }
    }
    coalesce_runs(runs);
    EXPECT_LE(runs.size(), placed.size());
    for (const CopyRun& p : placed) {
      int covering = 0;
      for (const CopyRun& m : runs) {
        if (p.host >= m.host && p.host + p.len <= m.host + m.len) {
          ++covering;
          EXPECT_EQ(m.device_offset + (p.host - m.host), p.device_offset);
        }
      }
      EXPECT_EQ(covering, 1) << "round " << round;
    }
    for (std::size_t i = 1; i < runs.size(); ++i) {
      const bool both = runs[i - 1].host + runs[i - 1].len == runs[i].host &&
                        runs[i - 1].device_offset + runs[i - 1].len == runs[i].device_offset;
      EXPECT_FALSE(both) << "mergeable runs left apart";
    }
  }
}

}  // namespace
}  // namespace graid::kernels
