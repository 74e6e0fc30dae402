// Geometry: shape validation, exhaustive mapping properties on small shapes, and spot checks
// against md's documented layouts.
#include "graid/geometry.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "graid/parity.h"

namespace graid {
namespace {

constexpr std::uint32_t k4K = 4096;

Geometry must_make(RaidLevel level, std::uint32_t members, std::uint32_t strip = k4K) {
  auto g = Geometry::make(level, members, strip);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
  return *g;
}

TEST(GeometryShape, AcceptsValidMemberCounts) {
  EXPECT_TRUE(Geometry::make(RaidLevel::kRaid0, 1, k4K).is_ok());
  EXPECT_TRUE(Geometry::make(RaidLevel::kRaid1, 2, k4K).is_ok());
  EXPECT_TRUE(Geometry::make(RaidLevel::kRaid10, 4, k4K).is_ok());
  EXPECT_TRUE(Geometry::make(RaidLevel::kRaid5, 3, k4K).is_ok());
  EXPECT_TRUE(Geometry::make(RaidLevel::kRaid6, 4, k4K).is_ok());
  for (RaidLevel level : {RaidLevel::kRaid0, RaidLevel::kRaid1, RaidLevel::kRaid10,
                          RaidLevel::kRaid5, RaidLevel::kRaid6}) {
    EXPECT_TRUE(Geometry::make(level, 32, k4K).is_ok()) << raid_level_name(level);
  }
}

// The parity code of a level's stripe jobs comes from one place (Geometry::parity_scheme).
TEST(GeometryShape, ParitySchemeFollowsTheParityStrips) {
  EXPECT_EQ(Geometry::make(RaidLevel::kRaid5, 3, k4K)->parity_scheme(), ParityScheme::kP);
  EXPECT_EQ(Geometry::make(RaidLevel::kRaid5, 8, k4K)->parity_scheme(), ParityScheme::kP);
  EXPECT_EQ(Geometry::make(RaidLevel::kRaid6, 4, k4K)->parity_scheme(), ParityScheme::kPQ);
  EXPECT_EQ(Geometry::make(RaidLevel::kRaid6, 9, k4K)->parity_scheme(), ParityScheme::kPQ);
}

TEST(GeometryShape, RefusesBadMemberCountsWithClearErrors) {
  struct Case {
    RaidLevel level;
    std::uint32_t members;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {RaidLevel::kRaid0, 0, "at least 1"},  {RaidLevel::kRaid1, 1, "at least 2"},
      {RaidLevel::kRaid10, 2, "at least 4"}, {RaidLevel::kRaid10, 5, "even"},
      {RaidLevel::kRaid5, 2, "at least 3"},  {RaidLevel::kRaid6, 3, "at least 4"},
      {RaidLevel::kRaid5, 33, "maximum"},    {RaidLevel::kRaid0, 64, "maximum"},
  };
  for (const auto& c : cases) {
    auto g = Geometry::make(c.level, c.members, k4K);
    ASSERT_FALSE(g.is_ok()) << raid_level_name(c.level) << " " << c.members;
    EXPECT_EQ(g.status().code(), Errc::kInvalidArgument);
    EXPECT_NE(g.status().message().find(c.fragment), std::string::npos) << g.status().message();
  }
}

TEST(GeometryShape, StripMustBePowerOfTwoIn4KTo1M) {
  for (std::uint32_t strip = 4096; strip <= (1u << 20); strip *= 2) {
    EXPECT_TRUE(Geometry::make(RaidLevel::kRaid5, 4, strip).is_ok()) << strip;
  }
  for (std::uint32_t strip : {0u, 512u, 2048u, 4095u, 6144u, 65536u + 4096u, 2u << 20}) {
    auto g = Geometry::make(RaidLevel::kRaid5, 4, strip);
    ASSERT_FALSE(g.is_ok()) << strip;
    EXPECT_NE(g.status().message().find("strip size"), std::string::npos);
  }
}

TEST(GeometryShape, RefusesUnknownLevelValue) {
  auto g = Geometry::make(static_cast<RaidLevel>(4), 4, k4K);
  ASSERT_FALSE(g.is_ok());
  EXPECT_EQ(g.status().code(), Errc::kInvalidArgument);
}

TEST(GeometryShape, ParsesLevelNames) {
  EXPECT_EQ(*parse_raid_level("raid5"), RaidLevel::kRaid5);
  EXPECT_EQ(*parse_raid_level("RAID6"), RaidLevel::kRaid6);
  EXPECT_EQ(*parse_raid_level("10"), RaidLevel::kRaid10);
  EXPECT_EQ(*parse_raid_level("raid0"), RaidLevel::kRaid0);
  EXPECT_EQ(*parse_raid_level("1"), RaidLevel::kRaid1);
  for (const char* bad : {"", "raid", "raid4", "raid50", "five", "raid 5"}) {
    EXPECT_FALSE(parse_raid_level(bad).is_ok()) << bad;
  }
  for (RaidLevel level : {RaidLevel::kRaid0, RaidLevel::kRaid1, RaidLevel::kRaid10,
                          RaidLevel::kRaid5, RaidLevel::kRaid6}) {
    EXPECT_EQ(*parse_raid_level(raid_level_name(level)), level);
  }
}

TEST(GeometryCapacity, CountsWholeStripesOfData) {
  const std::uint64_t member = 10 * 65536 + 1234;  // a partial strip at the end is unused
  EXPECT_EQ(must_make(RaidLevel::kRaid0, 3, 65536).data_capacity(member), 3ull * 10 * 65536);
  EXPECT_EQ(must_make(RaidLevel::kRaid1, 3, 65536).data_capacity(member), 10ull * 65536);
  EXPECT_EQ(must_make(RaidLevel::kRaid10, 6, 65536).data_capacity(member), 3ull * 10 * 65536);
  EXPECT_EQ(must_make(RaidLevel::kRaid5, 5, 65536).data_capacity(member), 4ull * 10 * 65536);
  EXPECT_EQ(must_make(RaidLevel::kRaid6, 5, 65536).data_capacity(member), 3ull * 10 * 65536);
  EXPECT_EQ(must_make(RaidLevel::kRaid6, 5, 65536).data_capacity(65535), 0u);
}

TEST(GeometryCapacity, RedundancyFigures) {
  auto r5 = must_make(RaidLevel::kRaid5, 5);
  EXPECT_EQ(r5.data_strips(), 4u);
  EXPECT_EQ(r5.parity_strips(), 1u);
  EXPECT_EQ(r5.failures_tolerated(), 1u);
  auto r6 = must_make(RaidLevel::kRaid6, 6);
  EXPECT_EQ(r6.data_strips(), 4u);
  EXPECT_EQ(r6.parity_strips(), 2u);
  EXPECT_EQ(r6.failures_tolerated(), 2u);
  auto r1 = must_make(RaidLevel::kRaid1, 3);
  EXPECT_EQ(r1.copies(), 3u);
  EXPECT_EQ(r1.failures_tolerated(), 2u);
  auto r10 = must_make(RaidLevel::kRaid10, 4);
  EXPECT_EQ(r10.copies(), 2u);
  EXPECT_EQ(r10.data_strips(), 2u);
}

// Exhaustive properties on every small shape: each data block maps to exactly one place per copy,
// no two things share a member block, parity never lands on data, every member block of a stripe
// is used exactly once, and place() inverts locate()/data_member().
struct Shape {
  RaidLevel level;
  std::uint32_t members;
};

std::vector<Shape> small_shapes() {
  std::vector<Shape> shapes;
  for (std::uint32_t n = 1; n <= 9; ++n)
    shapes.push_back({RaidLevel::kRaid0, n});
  for (std::uint32_t n = 2; n <= 5; ++n)
    shapes.push_back({RaidLevel::kRaid1, n});
  for (std::uint32_t n = 4; n <= 10; n += 2)
    shapes.push_back({RaidLevel::kRaid10, n});
  for (std::uint32_t n = 3; n <= 10; ++n)
    shapes.push_back({RaidLevel::kRaid5, n});
  for (std::uint32_t n = 4; n <= 10; ++n)
    shapes.push_back({RaidLevel::kRaid6, n});
  shapes.push_back({RaidLevel::kRaid5, 32});
  shapes.push_back({RaidLevel::kRaid6, 32});
  return shapes;
}

TEST(GeometryMapping, ExhaustiveOnSmallShapes) {
  constexpr std::uint32_t kBlock = 512;
  for (const Shape& shape : small_shapes()) {
    for (std::uint32_t strip : {4096u, 8192u}) {
      const Geometry g = must_make(shape.level, shape.members, strip);
      SCOPED_TRACE(
          fmt::format("{} n={} strip={}", raid_level_name(shape.level), shape.members, strip));
      // Enough stripes to cover two full parity rotations.
      const std::uint64_t member_bytes = std::uint64_t{2 * shape.members + 1} * strip;
      const std::uint64_t capacity = g.data_capacity(member_bytes);
      ASSERT_EQ(capacity, g.stripes(member_bytes) * g.data_strips() * strip);

      // (member, member block) -> what lives there.
      std::map<std::pair<std::uint32_t, std::uint64_t>, std::string> owner;
      for (std::uint64_t off = 0; off < capacity; off += kBlock) {
        const DataLocation loc = g.locate(off);
        ASSERT_LT(loc.member, g.members());
        ASSERT_LT(loc.data_index, g.data_strips());
        ASSERT_LT(loc.member_offset, member_bytes);
        ASSERT_EQ(loc.member_offset, loc.stripe * strip + loc.strip_offset);
        ASSERT_EQ(loc.member, g.data_member(loc.stripe, loc.data_index, 0));
        for (std::uint32_t copy = 0; copy < g.copies(); ++copy) {
          const std::uint32_t m = g.data_member(loc.stripe, loc.data_index, copy);
          ASSERT_LT(m, g.members());
          auto [it, inserted] =
              owner.emplace(std::pair{m, loc.member_offset}, fmt::format("data {}#{}", off, copy));
          ASSERT_TRUE(inserted) << "member " << m << " offset " << loc.member_offset
                                << " holds both " << it->second << " and data " << off;
          const MemberPlace place = g.place(m, loc.member_offset);
          ASSERT_EQ(place.role, StripRole::kData);
          ASSERT_EQ(place.array_offset, off);
          ASSERT_EQ(place.copy, copy);
          ASSERT_EQ(place.stripe, loc.stripe);
          ASSERT_EQ(place.data_index, loc.data_index);
        }
      }
      // Parity strips: one P (and Q) per stripe, on members holding no data of that stripe.
      const std::uint64_t stripes = g.stripes(member_bytes);
      for (std::uint64_t s = 0; s < stripes; ++s) {
        std::set<std::uint32_t> used;
        for (std::uint32_t d = 0; d < g.data_strips(); ++d) {
          for (std::uint32_t c = 0; c < g.copies(); ++c)
            used.insert(g.data_member(s, d, c));
        }
        if (g.parity_strips() >= 1) {
          const std::uint32_t p = g.p_member(s);
          ASSERT_TRUE(used.insert(p).second) << "P of stripe " << s << " on a data member";
          for (std::uint64_t b = 0; b < strip; b += kBlock) {
            ASSERT_TRUE(owner.emplace(std::pair{p, s * strip + b}, "P").second);
            ASSERT_EQ(g.place(p, s * strip + b).role, StripRole::kP);
          }
        }
        if (g.parity_strips() == 2) {
          const std::uint32_t q = g.q_member(s);
          ASSERT_TRUE(used.insert(q).second) << "Q of stripe " << s << " collides";
          ASSERT_EQ(q, (g.p_member(s) + 1) % g.members()) << "Q must follow P";
          for (std::uint64_t b = 0; b < strip; b += kBlock) {
            ASSERT_TRUE(owner.emplace(std::pair{q, s * strip + b}, "Q").second);
            ASSERT_EQ(g.place(q, s * strip + b).role, StripRole::kQ);
          }
        }
        // Every member is used by each stripe exactly once: no hole, nothing doubled.
        ASSERT_EQ(used.size(), g.members()) << "stripe " << s;
      }
      // Everything addressable on the members (whole stripes) is accounted for.
      ASSERT_EQ(owner.size(), stripes * g.members() * (strip / kBlock));
    }
  }
}

// Draws the member roles of one stripe as md's documentation does ("D0 D1 P Q" by member).
std::string stripe_picture(const Geometry& g, std::uint64_t stripe) {
  std::vector<std::string> cells(g.members());
  for (std::uint32_t m = 0; m < g.members(); ++m) {
    const MemberPlace place = g.place(m, stripe * g.strip_bytes());
    switch (place.role) {
      case StripRole::kP:
        cells[m] = "P";
        break;
      case StripRole::kQ:
        cells[m] = "Q";
        break;
      case StripRole::kData:
        cells[m] = fmt::format("D{}", place.stripe * g.data_strips() + place.data_index);
        break;
    }
  }
  std::string out;
  for (const auto& c : cells)
    out += (out.empty() ? "" : " ") + c;
  return out;
}

TEST(GeometryMapping, Raid5MatchesMdLeftSymmetric) {
  // mdadm's man page / md raid5.c ALGORITHM_LEFT_SYMMETRIC, 4 disks, data numbered array-wide.
  const Geometry g = must_make(RaidLevel::kRaid5, 4);
  EXPECT_EQ(stripe_picture(g, 0), "D0 D1 D2 P");
  EXPECT_EQ(stripe_picture(g, 1), "D4 D5 P D3");
  EXPECT_EQ(stripe_picture(g, 2), "D8 P D6 D7");
  EXPECT_EQ(stripe_picture(g, 3), "P D9 D10 D11");
  EXPECT_EQ(stripe_picture(g, 4), "D12 D13 D14 P");
}

TEST(GeometryMapping, Raid6MatchesMdLeftSymmetric) {
  // md raid5.c, level 6 ALGORITHM_LEFT_SYMMETRIC: pd = n-1-(s%n), qd = pd+1 mod n,
  // data d on (pd+2+d) mod n. 5 disks:
  const Geometry g = must_make(RaidLevel::kRaid6, 5);
  EXPECT_EQ(stripe_picture(g, 0), "Q D0 D1 D2 P");
  EXPECT_EQ(stripe_picture(g, 1), "D3 D4 D5 P Q");
  EXPECT_EQ(stripe_picture(g, 2), "D7 D8 P Q D6");    // pd=2, qd=3, data on 4,0,1
  EXPECT_EQ(stripe_picture(g, 3), "D11 P Q D9 D10");  // pd=1, qd=2, data on 3,4,0
  EXPECT_EQ(stripe_picture(g, 4), "P Q D12 D13 D14");
}

TEST(GeometryMapping, Raid10IsMdNear2) {
  // md raid10 "n2" on 4 disks: each chunk on two adjacent disks.
  const Geometry g = must_make(RaidLevel::kRaid10, 4, 65536);
  EXPECT_EQ(g.locate(0).member, 0u);
  EXPECT_EQ(g.data_member(0, 0, 1), 1u);
  EXPECT_EQ(g.locate(65536).member, 2u);
  EXPECT_EQ(g.data_member(0, 1, 1), 3u);
  const DataLocation third = g.locate(2 * 65536 + 100);
  EXPECT_EQ(third.member, 0u);
  EXPECT_EQ(third.member_offset, 65536u + 100);
}

TEST(GeometryMapping, Raid1MirrorsAtSameOffset) {
  const Geometry g = must_make(RaidLevel::kRaid1, 3, 65536);
  const DataLocation loc = g.locate(1'000'000);
  EXPECT_EQ(loc.member, 0u);
  EXPECT_EQ(loc.member_offset, 1'000'000u);
  for (std::uint32_t c = 0; c < 3; ++c)
    EXPECT_EQ(g.data_member(loc.stripe, 0, c), c);
}

TEST(GeometryMapping, LargeOffsetsDoNotOverflow) {
  // 32 members of 64 TiB with 1 MiB strips: offsets beyond 2^32 strips' worth of bytes.
  const Geometry g = must_make(RaidLevel::kRaid6, 32, 1u << 20);
  const std::uint64_t member_bytes = 64ull << 40;
  const std::uint64_t capacity = g.data_capacity(member_bytes);
  EXPECT_EQ(capacity, 30ull * member_bytes);
  const std::uint64_t last = capacity - 512;
  const DataLocation loc = g.locate(last);
  EXPECT_EQ(loc.stripe, g.stripes(member_bytes) - 1);
  EXPECT_EQ(loc.member_offset, member_bytes - 512);
  const MemberPlace place = g.place(loc.member, loc.member_offset);
  EXPECT_EQ(place.array_offset, last);
}

}  // namespace
}  // namespace graid
