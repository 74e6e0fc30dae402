// RAID level modules (engine/level/): the table, survives() against a brute-force reading of the
// layout, and the background-job hook (resync, check, rebuild) on members held in memory.
#include "level/level_module.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <random>
#include <set>
#include <vector>

namespace graid {
namespace {

TEST(LevelRegistry, EveryLevelValueHasItsModuleAndNothingElseDoes) {
  std::set<std::uint32_t> values;
  for (const LevelModule* m : level_modules()) {
    const auto v = static_cast<std::uint32_t>(m->level());
    EXPECT_TRUE(values.insert(v).second) << "two modules for level " << v;
    EXPECT_EQ(find_level_module(v), m);
    EXPECT_EQ(&level_module(m->level()), m);
    EXPECT_EQ(raid_level_name(m->level()), m->name());
    auto parsed = parse_raid_level(m->name());
    ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
    EXPECT_EQ(*parsed, m->level());
  }
  EXPECT_EQ(values, (std::set<std::uint32_t>{0, 1, 5, 6, 10}));
  for (std::uint32_t v = 0; v < 256; ++v)
    EXPECT_EQ(find_level_module(v) != nullptr, values.count(v) == 1) << v;
}

// Every data strip of every stripe in one layout period is readable with `failed` gone: some
// copy alive (mirrors), at most parity_strips() chunks of the stripe lost (parity), nothing lost
// (no redundancy).
bool all_data_readable(const Geometry& g, std::uint64_t failed) {
  auto dead = [&](std::uint32_t m) { return (failed >> m & 1u) != 0; };
  for (std::uint64_t stripe = 0; stripe < g.members(); ++stripe) {
    if (g.redundancy() == Redundancy::kParity) {
      std::uint32_t lost = dead(g.p_member(stripe)) ? 1 : 0;
      if (g.parity_strips() == 2) lost += dead(g.q_member(stripe)) ? 1 : 0;
      for (std::uint32_t d = 0; d < g.data_strips(); ++d)
        lost += dead(g.data_member(stripe, d)) ? 1 : 0;
      if (lost > g.parity_strips()) return false;
      continue;
    }
    for (std::uint32_t d = 0; d < g.data_strips(); ++d) {
      bool alive = false;
      for (std::uint32_t c = 0; c < g.copies(); ++c)
        alive |= !dead(g.data_member(stripe, d, c));
      if (!alive) return false;
    }
  }
  return true;
}

TEST(LevelModules, SurvivesMatchesTheLayoutForEveryFailureSet) {
  for (const LevelModule* m : level_modules()) {
    for (std::uint32_t n = m->min_members(); n <= 8; ++n) {
      auto g = Geometry::make(m->level(), n, 4096);
      if (!g) continue;  // odd counts for RAID10
      std::uint32_t smallest_fatal = n + 1;
      for (std::uint64_t failed = 0; failed < (std::uint64_t{1} << n); ++failed) {
        const bool readable = all_data_readable(*g, failed);
        ASSERT_EQ(g->survives(failed), readable) << m->name() << " n=" << n << " failed=" << failed;
        if (!readable)
          smallest_fatal = std::min<std::uint32_t>(smallest_fatal, std::popcount(failed));
      }
      EXPECT_EQ(g->failures_tolerated(), smallest_fatal - 1) << m->name() << " n=" << n;
    }
  }
}

// Members as strips in memory; counts writes so a check can be shown to write nothing.
class MemoryStripes final : public StripeAccess {
 public:
  MemoryStripes(const Geometry& g, std::uint64_t stripes, ParityBackend* parity)
      : g_(g), parity_(parity), data_(g.members()) {
    for (auto& member : data_)
      member.assign(stripes * g.strip_bytes(), std::byte{0});
    for (std::uint32_t i = 0; i < g.members(); ++i)
      scratch_.push_back(std::move(*AlignedBuffer::allocate(g.strip_bytes(), 4096)));
  }
  bool is_failed(std::uint32_t member, std::uint64_t /*stripe*/) const noexcept override {
    return (failed >> member & 1u) != 0;
  }
  bool is_stale(std::uint32_t member) const noexcept override {
    return (stale >> member & 1u) != 0;
  }
  Status read_strip(std::uint32_t m, std::uint64_t stripe, std::span<std::byte> buf) override {
    std::memcpy(buf.data(), strip(m, stripe), buf.size());
    return Status::ok();
  }
  Status write_strip(std::uint32_t m, std::uint64_t stripe,
                     std::span<const std::byte> buf) override {
    ++writes;
    std::memcpy(strip(m, stripe), buf.data(), buf.size());
    return Status::ok();
  }
  ParityBackend* parity() noexcept override { return parity_; }
  std::span<AlignedBuffer> scratch() noexcept override { return scratch_; }

  std::byte* strip(std::uint32_t m, std::uint64_t stripe) {
    return data_[m].data() + stripe * g_.strip_bytes();
  }
  std::uint64_t failed = 0;
  std::uint64_t stale = 0;  // members being rebuilt
  std::uint64_t writes = 0;

 private:
  Geometry g_;
  ParityBackend* parity_;
  std::vector<std::vector<std::byte>> data_;
  std::vector<AlignedBuffer> scratch_;
};

StripeOutcome run(const Geometry& g, StripeTask task, MemoryStripes& mem, std::uint64_t stripe) {
  return g.module().process_stripe(task, g, mem, stripe);
}

TEST(LevelModules, ResyncMakesEveryStripeConsistentAndCheckFindsEachCorruption) {
  auto parity = make_parity_backend("ref");
  ASSERT_TRUE(parity.is_ok()) << parity.status().to_string();
  std::mt19937_64 rng(0x1e7e1);
  for (const LevelModule* m : level_modules()) {
    const std::uint32_t n = std::max<std::uint32_t>(m->min_members(), 4);
    auto g = Geometry::make(m->level(), n, 4096);
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    SCOPED_TRACE(std::string(m->name()));
    constexpr std::uint64_t kStripes = 6;
    MemoryStripes mem(*g, kStripes, parity->get());
    for (std::uint32_t member = 0; member < n; ++member) {
      for (std::uint64_t s = 0; s < kStripes; ++s) {
        for (std::uint32_t b = 0; b < g->strip_bytes(); ++b)
          mem.strip(member, s)[b] = static_cast<std::byte>(rng());
      }
    }
    for (std::uint64_t s = 0; s < kStripes; ++s) {
      StripeOutcome before = run(*g, StripeTask::kCheck, mem, s);
      ASSERT_TRUE(before.status.is_ok());
      EXPECT_EQ(before.inconsistent, g->redundancy() != Redundancy::kNone)
          << "random members checked consistent, stripe " << s;
      ASSERT_TRUE(run(*g, StripeTask::kResync, mem, s).status.is_ok());
      const std::uint64_t writes = mem.writes;
      StripeOutcome after = run(*g, StripeTask::kCheck, mem, s);
      ASSERT_TRUE(after.status.is_ok());
      EXPECT_FALSE(after.inconsistent) << "stripe " << s << " after resync";
      EXPECT_EQ(mem.writes, writes) << "check wrote";
      if (g->redundancy() == Redundancy::kNone) continue;
      // One flipped byte on any member is found.
      for (std::uint32_t member = 0; member < n; ++member) {
        std::byte& b = mem.strip(member, s)[rng() % g->strip_bytes()];
        b ^= std::byte{0x20};
        EXPECT_TRUE(run(*g, StripeTask::kCheck, mem, s).inconsistent)
            << "stripe " << s << " member " << member;
        b ^= std::byte{0x20};
      }
    }
  }
}

TEST(LevelModules, ResyncSkipsAStripeWhoseDataIsGoneAndLeavesFailedMembersAlone) {
  auto parity = make_parity_backend("ref");
  ASSERT_TRUE(parity.is_ok());
  for (const LevelModule* m : level_modules()) {
    if (m->redundancy() == Redundancy::kNone) continue;
    const std::uint32_t n = std::max<std::uint32_t>(m->min_members(), 4);
    auto g = Geometry::make(m->level(), n, 4096);
    ASSERT_TRUE(g.is_ok());
    SCOPED_TRACE(std::string(m->name()));
    MemoryStripes mem(*g, 1, parity->get());
    // Every member failed but the first data member's: data is gone for parity levels and for
    // mirrors whose other strips lost every copy; resync writes nothing to a failed member.
    const std::uint32_t keep = g->data_member(0, 0);
    mem.failed = ((std::uint64_t{1} << n) - 1) & ~(std::uint64_t{1} << keep);
    EXPECT_EQ(g->module().can_resync(*g, 0, mem.failed), g->data_strips() == 1);
    StripeOutcome r = run(*g, StripeTask::kResync, mem, 0);
    ASSERT_TRUE(r.status.is_ok());
    EXPECT_EQ(r.skipped, !g->module().can_resync(*g, 0, mem.failed));
    EXPECT_EQ(mem.writes, 0u);
    EXPECT_TRUE(g->module().can_resync(*g, 0, 0));
  }
}

// kRebuild remakes exactly the stale member's strips from the others, whichever other members
// have failed as long as the level can still rebuild from what is left, and touches nothing else.
TEST(LevelModules, RebuildRemakesTheStaleMembersStripsFromTheOthers) {
  auto parity = make_parity_backend("ref");
  ASSERT_TRUE(parity.is_ok());
  std::mt19937_64 rng(0x4eb1d);
  for (const LevelModule* m : level_modules()) {
    if (m->redundancy() == Redundancy::kNone) continue;
    for (const std::uint32_t n : {m->min_members(), std::max<std::uint32_t>(m->min_members(), 6)}) {
      auto g = Geometry::make(m->level(), n, 4096);
      ASSERT_TRUE(g.is_ok());
      SCOPED_TRACE(fmt::format("{} x{}", m->name(), n));
      constexpr std::uint64_t kStripes = 2 * 6;  // every rotation of up to 6 members, twice
      for (std::uint32_t target = 0; target < n; ++target) {
        for (std::uint64_t failed = 0; failed < (std::uint64_t{1} << n); ++failed) {
          if ((failed >> target & 1u) != 0) continue;
          // The stale member counts as lost for what the level survives.
          if (!m->survives(n, failed | std::uint64_t{1} << target)) continue;
          MemoryStripes mem(*g, kStripes, parity->get());
          for (std::uint32_t member = 0; member < n; ++member) {
            for (std::uint64_t s = 0; s < kStripes; ++s) {
              for (std::uint32_t b = 0; b < g->strip_bytes(); b += 8) {
                const std::uint64_t word = rng();
                std::memcpy(mem.strip(member, s) + b, &word, 8);
              }
            }
          }
          std::vector<std::vector<std::byte>> want(kStripes), others(kStripes);
          for (std::uint64_t s = 0; s < kStripes; ++s) {
            ASSERT_TRUE(run(*g, StripeTask::kResync, mem, s).status.is_ok());
            want[s].assign(mem.strip(target, s), mem.strip(target, s) + g->strip_bytes());
            std::memset(mem.strip(target, s), 0xee, g->strip_bytes());  // the new device
            for (std::uint32_t o = 0; o < n; ++o) {
              if (o != target)
                others[s].insert(others[s].end(), mem.strip(o, s),
                                 mem.strip(o, s) + g->strip_bytes());
            }
          }
          mem.failed = failed;
          mem.stale = std::uint64_t{1} << target;
          for (std::uint64_t s = 0; s < kStripes; ++s) {
            StripeOutcome r = run(*g, StripeTask::kRebuild, mem, s);
            ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
            ASSERT_FALSE(r.skipped) << "stripe " << s << " failed " << failed;
            ASSERT_EQ(std::memcmp(mem.strip(target, s), want[s].data(), g->strip_bytes()), 0)
                << "stripe " << s << " target " << target << " failed " << failed;
            std::vector<std::byte> now;
            for (std::uint32_t o = 0; o < n; ++o) {
              if (o != target)
                now.insert(now.end(), mem.strip(o, s), mem.strip(o, s) + g->strip_bytes());
            }
            ASSERT_EQ(now, others[s]) << "rebuild changed another member, stripe " << s;
          }
        }
      }
    }
  }
}

// A stripe the level cannot rebuild (more lost than it tolerates) is skipped, nothing written.
TEST(LevelModules, RebuildSkipsAStripeWithTooMuchLost) {
  auto parity = make_parity_backend("ref");
  ASSERT_TRUE(parity.is_ok());
  for (const LevelModule* m : level_modules()) {
    if (m->redundancy() == Redundancy::kNone) continue;
    const std::uint32_t n = std::max<std::uint32_t>(m->min_members(), 4);
    auto g = Geometry::make(m->level(), n, 4096);
    ASSERT_TRUE(g.is_ok());
    SCOPED_TRACE(std::string(m->name()));
    MemoryStripes mem(*g, 1, parity->get());
    const std::uint32_t target = g->data_member(0, 0);
    mem.stale = std::uint64_t{1} << target;
    mem.failed = ((std::uint64_t{1} << n) - 1) & ~mem.stale;  // everything else lost
    StripeOutcome r = run(*g, StripeTask::kRebuild, mem, 0);
    ASSERT_TRUE(r.status.is_ok());
    EXPECT_TRUE(r.skipped);
    EXPECT_EQ(mem.writes, 0u);
  }
}

}  // namespace
}  // namespace graid
