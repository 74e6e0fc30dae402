// graid-bench's pure parts: the latency histogram, size parsing, profiles, the member-I/O cost
// model and the workload generators.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../../bench/graid_bench/cost_model.h"
#include "../../bench/graid_bench/profiles.h"
#include "../../bench/graid_bench/raw_sweep.h"
#include "../../bench/graid_bench/stats.h"
#include "../../bench/graid_bench/units.h"
#include "../../bench/graid_bench/workload.h"

namespace graid::bench {
namespace {

// --- LatencyHistogram ----------------------------------------------------------------------

TEST(LatencyHistogram, BucketsAreContiguousAndMonotonic) {
  std::uint64_t expected_low = 0;
  for (std::size_t i = 0; i < LatencyHistogram::kBucketCount; ++i) {
    ASSERT_EQ(LatencyHistogram::bucket_lowest(i), expected_low) << "bucket " << i;
    const std::uint64_t high = LatencyHistogram::bucket_highest(i);
    ASSERT_GE(high, expected_low);
    ASSERT_EQ(LatencyHistogram::bucket_index(expected_low), i);
    ASSERT_EQ(LatencyHistogram::bucket_index(high), i);
    if (i + 1 < LatencyHistogram::kBucketCount) expected_low = high + 1;
  }
  EXPECT_EQ(LatencyHistogram::bucket_highest(LatencyHistogram::kBucketCount - 1),
            ~std::uint64_t{0});
}

TEST(LatencyHistogram, RelativeErrorWithinOneSixtyFourth) {
  for (std::uint64_t v = 1; v < (std::uint64_t{1} << 62); v = v * 3 + 7) {
    const std::size_t i = LatencyHistogram::bucket_index(v);
    const auto width = static_cast<double>(LatencyHistogram::bucket_highest(i) -
                                           LatencyHistogram::bucket_lowest(i));
    EXPECT_LE(width / static_cast<double>(v), 1.0 / 64) << v;
  }
}

TEST(LatencyHistogram, EmptyReportsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.percentile(50), 0u);
  EXPECT_EQ(h.mean(), 0.0);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
}

TEST(LatencyHistogram, PercentilesOfUniformValues) {
  LatencyHistogram h;
  for (std::uint64_t v = 1; v <= 100000; ++v)
    h.record(v * 100);  // 100 ns .. 10 ms
  EXPECT_EQ(h.count(), 100000u);
  EXPECT_DOUBLE_EQ(h.mean(), 100.0 * 100001 / 2);
  const auto near = [](std::uint64_t got, double want) {
    return std::abs(static_cast<double>(got) - want) <= want / 64;
  };
  EXPECT_TRUE(near(h.percentile(50), 5e6)) << h.percentile(50);
  EXPECT_TRUE(near(h.percentile(99), 9.9e6)) << h.percentile(99);
  EXPECT_TRUE(near(h.percentile(99.9), 9.99e6)) << h.percentile(99.9);
  EXPECT_EQ(h.percentile(100), 10000000u);  // clamped to the exact max
  EXPECT_EQ(h.percentile(0), 100u);         // and the exact min
}

TEST(LatencyHistogram, TailIsSeenAtP999) {
  LatencyHistogram h;
  for (int i = 0; i < 9990; ++i)
    h.record(1000);
  for (int i = 0; i < 10; ++i)
    h.record(1000000);
  EXPECT_LE(h.percentile(99.9), 1100u);  // the 9990th value is still fast
  for (int i = 0; i < 10; ++i)
    h.record(1000000);
  EXPECT_GT(h.percentile(99.9), 900000u);  // now the slowest 0.2 % reach into p99.9
}

TEST(LatencyHistogram, MergeEqualsRecordingEverything) {
  LatencyHistogram a, b, all;
  for (std::uint64_t v = 1; v < 5000; ++v) {
    (v % 3 ? a : b).record(v * 37);
    all.record(v * 37);
  }
  a.merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  EXPECT_DOUBLE_EQ(a.mean(), all.mean());
  for (double p : {1.0, 50.0, 90.0, 99.0, 99.9})
    EXPECT_EQ(a.percentile(p), all.percentile(p));
}

TEST(Summarize, AddsThreadsAndDerivesRates) {
  std::vector<ThreadTally> tallies(2);
  tallies[0].reads = 300;
  tallies[0].bytes = 300 * 4096;
  tallies[1].writes = 700;
  tallies[1].bytes = 700 * 4096;
  for (int i = 0; i < 10; ++i)
    tallies[0].latency_ns.record(2000);
  for (int i = 0; i < 10; ++i)
    tallies[1].latency_ns.record(4000);
  const RunFigures f = summarize(tallies, 2.0, 0.5);
  EXPECT_EQ(f.ops, 1000u);
  EXPECT_DOUBLE_EQ(f.iops(), 500.0);
  EXPECT_DOUBLE_EQ(f.bytes_per_s(), 1000.0 * 4096 / 2);
  EXPECT_DOUBLE_EQ(f.cpu_s_per_gb(), 0.5 / (1000.0 * 4096 / 1e9));
  EXPECT_DOUBLE_EQ(f.latency_us.mean, 3.0);
  EXPECT_NEAR(f.latency_us.p50, 2.0, 2.0 / 64);
  EXPECT_NEAR(f.latency_us.p99, 4.0, 4.0 / 64);
  EXPECT_DOUBLE_EQ(f.latency_us.max, 4.0);
}

// --- sizes and profiles ----------------------------------------------------------------------

TEST(ParseSize, AcceptsSuffixes) {
  EXPECT_EQ(*parse_size("4096", "x"), 4096u);
  EXPECT_EQ(*parse_size("64K", "x"), 65536u);
  EXPECT_EQ(*parse_size("64k", "x"), 65536u);
  EXPECT_EQ(*parse_size("64KiB", "x"), 65536u);
  EXPECT_EQ(*parse_size("1M", "x"), 1u << 20);
  EXPECT_EQ(*parse_size("1G", "x"), 1ull << 30);
  EXPECT_EQ(*parse_size("2T", "x"), 2ull << 40);
}

TEST(ParseSize, RejectsNonsenseNamingTheArgument) {
  for (const char* bad :
       {"", "K", "-1", "1.5G", "0", "12Q", "1GG", "99999999999999999999", "16777216T"}) {
    auto r = parse_size(bad, "--strip");
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("--strip"), std::string::npos) << r.status().message();
  }
}

TEST(FormatSize, ShortestExactForm) {
  EXPECT_EQ(format_size(65536), "64K");
  EXPECT_EQ(format_size(1ull << 30), "1G");
  EXPECT_EQ(format_size(1536ull << 20), "1536M");
  EXPECT_EQ(format_size(1000), "1000");
}

TEST(Profiles, ResolveListsAllAndDuplicates) {
  const std::vector<std::string> specs{"4k-randwrite,4k-randread", "4k-randwrite"};
  auto list = resolve_profiles(specs);
  ASSERT_TRUE(list.is_ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "4k-randwrite");
  EXPECT_EQ((*list)[1].name, "4k-randread");

  auto all = resolve_profiles(std::vector<std::string>{"all"});
  ASSERT_TRUE(all.is_ok());
  EXPECT_EQ(all->size(), all_profiles().size());
  for (const char* name : {"4k-randread", "4k-randwrite", "64k-randwrite", "64k-seqread",
                           "64k-seqwrite", "1m-seqread", "1m-seqwrite", "8k-randrw70"}) {
    EXPECT_TRUE(std::any_of(all->begin(), all->end(), [&](const Profile& p) {
      return p.name == name;
    })) << name;
  }
  auto rw = resolve_profiles(std::vector<std::string>{"8k-randrw70"});
  EXPECT_EQ((*rw)[0].read_percent, 70u);
  EXPECT_EQ((*rw)[0].block_bytes, 8192u);

  auto bad = resolve_profiles(std::vector<std::string>{"4k-randwrit"});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("4k-randwrite"), std::string::npos);  // lists known ones
}

// --- cost model ------------------------------------------------------------------------------

Profile named(std::string_view name) {
  for (const Profile& p : all_profiles()) {
    if (p.name == name) return p;
  }
  ADD_FAILURE() << "no profile " << name;
  return all_profiles()[0];
}

MemberCost cost(RaidLevel level, std::uint32_t n, std::uint32_t strip, std::string_view profile) {
  auto g = Geometry::make(level, n, strip);
  EXPECT_TRUE(g.is_ok());
  return member_ios_per_array_io(*g, named(profile));
}

TEST(CostModel, ReadsCostOneMemberReadPerStrip) {
  for (RaidLevel level : {RaidLevel::kRaid0, RaidLevel::kRaid1, RaidLevel::kRaid5,
                          RaidLevel::kRaid6, RaidLevel::kRaid10}) {
    const MemberCost c = cost(level, 4, 64 * 1024, "4k-randread");
    EXPECT_DOUBLE_EQ(c.reads, 1.0);
    EXPECT_DOUBLE_EQ(c.writes, 0.0);
    EXPECT_EQ(c.io_bytes, 4096u);
  }
  // Merged per member as the engine's IoContext does. RAID5 n=5, 64 KiB strips: 1 MiB is rows
  // 0-3, parity on members 4, 3, 2, 1. Member 0 reads rows 0-3 in one I/O, member 1 rows 0-2,
  // member 4 rows 1-3; members 2 and 3 have a 64 KiB parity strip (more than the 16 KiB read
  // through) between their rows: two I/Os each. 7 I/Os of 1 MiB / 7 on average.
  const MemberCost big = cost(RaidLevel::kRaid5, 5, 64 * 1024, "1m-seqread");
  EXPECT_DOUBLE_EQ(big.reads, 7.0);
  EXPECT_EQ(big.io_bytes, (1u << 20) / 7 / 4096 * 4096);
  // 4 KiB strips: the parity strips are read through, one I/O per member, at most a quarter more
  // bytes than the data.
  const MemberCost small = cost(RaidLevel::kRaid5, 5, 4 * 1024, "1m-seqread");
  EXPECT_DOUBLE_EQ(small.reads, 5.0);
  EXPECT_GE(small.io_bytes * 5, (1u << 20) - 5 * 4096);
  EXPECT_LE(small.io_bytes * 5, (1u << 20) * 5 / 4);
  // Mirrors read a whole request from one copy: RAID1 one I/O, RAID10 n=4 one per data member.
  EXPECT_DOUBLE_EQ(cost(RaidLevel::kRaid1, 2, 64 * 1024, "1m-seqread").reads, 1.0);
  const MemberCost r10 = cost(RaidLevel::kRaid10, 4, 64 * 1024, "1m-seqread");
  EXPECT_DOUBLE_EQ(r10.reads, 2.0);
  EXPECT_EQ(r10.io_bytes, 512u * 1024);
}

TEST(CostModel, Raid5SmallWriteIsReadModifyWrite) {
  const MemberCost c = cost(RaidLevel::kRaid5, 5, 64 * 1024, "4k-randwrite");
  EXPECT_DOUBLE_EQ(c.reads, 2.0);
  EXPECT_DOUBLE_EQ(c.writes, 2.0);
  EXPECT_DOUBLE_EQ(c.read_fraction(), 0.5);
  const MemberCost strip = cost(RaidLevel::kRaid5, 5, 64 * 1024, "64k-randwrite");
  EXPECT_DOUBLE_EQ(strip.reads, 2.0);
  EXPECT_DOUBLE_EQ(strip.writes, 2.0);
  EXPECT_EQ(strip.io_bytes, 65536u);
}

TEST(CostModel, ReconstructWriteWhenCheaper) {
  // RAID5 on 3 members: reading the one other data strip beats reading old data and parity.
  const MemberCost r5 = cost(RaidLevel::kRaid5, 3, 64 * 1024, "4k-randwrite");
  EXPECT_DOUBLE_EQ(r5.reads, 1.0);
  EXPECT_DOUBLE_EQ(r5.writes, 2.0);
  // RAID6 on 5 members (k = 3): k-1 = 2 reads + data, P, Q = 3 writes.
  const MemberCost r6 = cost(RaidLevel::kRaid6, 5, 64 * 1024, "4k-randwrite");
  EXPECT_DOUBLE_EQ(r6.reads, 2.0);
  EXPECT_DOUBLE_EQ(r6.writes, 3.0);
  // RAID6 on 8 members (k = 6): read-modify-write, 3 reads + 3 writes.
  const MemberCost wide = cost(RaidLevel::kRaid6, 8, 64 * 1024, "4k-randwrite");
  EXPECT_DOUBLE_EQ(wide.reads, 3.0);
  EXPECT_DOUBLE_EQ(wide.writes, 3.0);
}

TEST(CostModel, MirrorsAndStripesWriteWithoutReading) {
  const MemberCost r1 = cost(RaidLevel::kRaid1, 3, 64 * 1024, "4k-randwrite");
  EXPECT_DOUBLE_EQ(r1.reads, 0.0);
  EXPECT_DOUBLE_EQ(r1.writes, 3.0);
  const MemberCost r10 = cost(RaidLevel::kRaid10, 4, 64 * 1024, "4k-randwrite");
  EXPECT_DOUBLE_EQ(r10.writes, 2.0);
  const MemberCost r0 = cost(RaidLevel::kRaid0, 4, 64 * 1024, "4k-randwrite");
  EXPECT_DOUBLE_EQ(r0.writes, 1.0);
}

TEST(CostModel, SequentialWritesAreFullStripe) {
  // RAID5 n=5: 1 MiB = 4 whole stripes, 1.25 MiB of data and parity, 256 KiB contiguous on each
  // member (consecutive rows): one merged write per member.
  const MemberCost c = cost(RaidLevel::kRaid5, 5, 64 * 1024, "1m-seqwrite");
  EXPECT_DOUBLE_EQ(c.reads, 0.0);
  EXPECT_DOUBLE_EQ(c.writes, 5.0);
  EXPECT_EQ(c.io_bytes, 256u * 1024);
  // Smaller than a stripe: its pieces' share of whole stripes, strip-sized at most.
  const MemberCost s = cost(RaidLevel::kRaid6, 6, 64 * 1024, "64k-seqwrite");
  EXPECT_DOUBLE_EQ(s.writes, 6.0 / 4.0);
  EXPECT_EQ(s.io_bytes, 64u * 1024);
}

TEST(CostModel, LargeRandomWritesAverageOverAlignments) {
  // RAID5 n=4, 16 KiB strips (stripe 48 KiB), 64 KiB writes: every request covers one full
  // stripe plus one partial one, whose plan depends on where the request starts.
  Profile p{"64k-randwrite", 64 * 1024, AccessPattern::kRandom, 0};
  auto g = Geometry::make(RaidLevel::kRaid5, 4, 16 * 1024);
  ASSERT_TRUE(g.is_ok());
  const MemberCost c = member_ios_per_array_io(*g, p);
  // Alignments 0, 16K, 32K in the stripe. At 0: full stripe (4 w) + 1 strip (min(2, 2) r, 2 w).
  // At 16K: 2 strips (min(3,1)=1 r, 3 w) + 2 strips (1 r, 3 w). At 32K: 1 strip (2 r, 2 w) +
  // full stripe (4 w). Mean: reads (2 + 2 + 2) / 3 = 2, writes (6 + 6 + 6) / 3 = 6.
  EXPECT_DOUBLE_EQ(c.reads, 2.0);
  EXPECT_DOUBLE_EQ(c.writes, 6.0);
  EXPECT_EQ(c.io_bytes, 16u * 1024);
}

TEST(CostModel, MixedProfileWeightsReadsAndWrites) {
  const MemberCost c = cost(RaidLevel::kRaid5, 5, 64 * 1024, "8k-randrw70");
  EXPECT_DOUBLE_EQ(c.reads, 0.7 * 1 + 0.3 * 2);
  EXPECT_DOUBLE_EQ(c.writes, 0.3 * 2);
  EXPECT_EQ(c.io_bytes, 8192u);
}

// --- workload --------------------------------------------------------------------------------

TEST(Workload, RandomOffsetsAreAlignedAndCoverTheSpan) {
  const Profile p = named("4k-randwrite");
  const std::uint64_t span = 64 * 4096 + 100;  // a partial block at the end is never used
  const Region r = thread_region(p, span, 4, 2);
  EXPECT_EQ(r.start, 0u);
  EXPECT_EQ(r.bytes, 64u * 4096);
  OffsetStream s(p.pattern, r, p.block_bytes);
  Rng rng(7);
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 5000; ++i) {
    const std::uint64_t off = s.next(rng);
    ASSERT_EQ(off % 4096, 0u);
    ASSERT_LT(off, 64u * 4096);
    seen.insert(off);
  }
  EXPECT_EQ(seen.size(), 64u);
}

TEST(Workload, SequentialThreadsGetDisjointRegionsAndWrap) {
  const Profile p = named("64k-seqwrite");
  const std::uint64_t span = 10 * 65536;
  std::vector<Region> regions;
  for (std::uint32_t t = 0; t < 3; ++t)
    regions.push_back(thread_region(p, span, 3, t));
  for (std::uint32_t t = 0; t < 3; ++t) {
    EXPECT_EQ(regions[t].bytes, 3u * 65536);
    EXPECT_EQ(regions[t].start, t * 3u * 65536);
  }
  OffsetStream s(p.pattern, regions[1], p.block_bytes);
  Rng rng(1);
  const std::array<std::uint64_t, 5> want{3, 4, 5, 3, 4};
  for (std::uint64_t block : want)
    EXPECT_EQ(s.next(rng), block * 65536);
}

TEST(Workload, ReadShareFollowsThePercentage) {
  Rng rng(42);
  int reads = 0;
  for (int i = 0; i < 100000; ++i)
    reads += next_is_read(rng, 70) ? 1 : 0;
  EXPECT_NEAR(reads / 100000.0, 0.70, 0.01);
  EXPECT_TRUE(next_is_read(rng, 100));
  EXPECT_FALSE(next_is_read(rng, 0));
}

TEST(Workload, RngBelowIsInRangeAndSeedsDiffer) {
  Rng a(thread_seed(1, 0));
  Rng b(thread_seed(1, 1));
  EXPECT_NE(a.next(), b.next());
  for (int i = 0; i < 10000; ++i)
    ASSERT_LT(a.below(3), 3u);
}

TEST(Workload, PatternDetectsWrongPlaceAndWrongSeed) {
  std::vector<std::byte> buf(4096);
  fill_pattern(buf, 8192, 5);
  EXPECT_TRUE(matches_pattern(buf, 8192, 5));
  EXPECT_FALSE(matches_pattern(buf, 4096, 5));  // read from the wrong place
  EXPECT_FALSE(matches_pattern(buf, 8192, 6));  // stale data from another run
  buf[4000] ^= std::byte{1};
  EXPECT_FALSE(matches_pattern(buf, 8192, 5));  // one flipped bit
}

TEST(RawSweep, DepthsAroundTheArrayRunsDepthWithinTheLimit) {
  EXPECT_EQ(sweep_queue_depths(64, 1024), (std::vector<std::uint32_t>{32, 64, 128, 256}));
  EXPECT_EQ(sweep_queue_depths(1, 1024), (std::vector<std::uint32_t>{1, 2, 4}));
  EXPECT_EQ(sweep_queue_depths(0, 1024), (std::vector<std::uint32_t>{1, 2, 4}));
  EXPECT_EQ(sweep_queue_depths(512, 1024), (std::vector<std::uint32_t>{256, 512, 1024}));
  EXPECT_EQ(sweep_queue_depths(1024, 1024), (std::vector<std::uint32_t>{512, 1024}));
}

TEST(RawSweep, KeepsTheDepthThatGaveTheMostAndEveryPoint) {
  // Saturation at 128, a little lost beyond it.
  const std::map<std::uint32_t, double> iops{{32, 50e3}, {64, 90e3}, {128, 120e3}, {256, 118e3}};
  std::vector<std::uint32_t> asked;
  const auto depths = sweep_queue_depths(64, 1024);
  auto sweep = sweep_raw(depths, [&](std::uint32_t qd) -> Result<double> {
    asked.push_back(qd);
    return iops.at(qd);
  });
  ASSERT_TRUE(sweep.is_ok());
  EXPECT_EQ(sweep->best_queue_depth, 128u);
  EXPECT_EQ(asked, depths);
  ASSERT_EQ(sweep->points.size(), 4u);
  EXPECT_EQ(sweep->points[3].queue_depth, 256u);
  EXPECT_EQ(sweep->points[3].iops, 118e3);
}

TEST(RawSweep, AFailedProbeEndsTheSweepWithItsError) {
  int probes = 0;
  const std::vector<std::uint32_t> depths{8, 16, 32};
  auto sweep = sweep_raw(depths, [&](std::uint32_t qd) -> Result<double> {
    ++probes;
    if (qd == 16) return make_error(Errc::kIoError, "member gone");
    return 1.0;
  });
  EXPECT_EQ(sweep.status().code(), Errc::kIoError);
  EXPECT_EQ(probes, 2);
  EXPECT_EQ(sweep_raw({}, [](std::uint32_t) -> Result<double> { return 1.0; }).status().code(),
            Errc::kInvalidArgument);
}

}  // namespace
}  // namespace graid::bench
