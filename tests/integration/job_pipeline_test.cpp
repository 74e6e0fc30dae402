// The job engine's pipeline (engine/jobs/window_pipeline.h) under stress, for RAID1, RAID10,
// RAID5 and RAID6, every byte checked against a model:
// - a rebuild with four small windows in flight while verified writes and reads run, the target's
//   writes held back again and again so windows wait in every state (reads in flight, writes in
//   flight, done but not retired behind an earlier one) while traffic lands around them;
// - a rebuild stopped at random moments, many times, each stop leaving the checkpoint where the
//   retired windows reached, every window unlocked and the data intact, then finishing;
// - RAID6: two members rebuilt in one pass, under traffic, then answering for two others;
// - the power lost at a random moment of a pipelined rebuild: the checkpoint on disk covers only
//   what the target holds durably, and the rebuild resumes from it;
// - a survivor failing in the middle of a pipelined rebuild (RAID6: the rebuild goes on without
//   it; RAID5: the array fails and the rebuild reports it, nothing acknowledged is lost);
// - a check in windows in flight finds exactly the stripes made inconsistent, under traffic.
// RAID5 and RAID6 run it all again with the parity on a worker thread (the jobs' windows wait for
// it with their I/O going on; every third batch fails and is redone inline).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "array_harness.h"
#include "array_traffic.h"

namespace graid::testing {
namespace {

using namespace std::chrono_literals;

class JobPipelineTest : public ArrayJobTest {
 protected:
  std::unique_ptr<Array> make(std::uint32_t spares = 1) { return make_array(spares, "pipeline"); }
  static RebuildControl pipelined() {
    RebuildControl control;
    control.window_stripes = 2;
    control.windows_in_flight = 4;
    control.checkpoint_interval = 5ms;
    return control;
  }
};

TEST_P(JobPipelineTest, RebuildWithWindowsInFlightUnderVerifiedTrafficAndHeldWrites) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 31);
  const std::uint32_t victim = 1;
  ASSERT_TRUE(array->fail_member(victim, "test").is_ok());
  FaultyMember* target = extra_faulty(0);
  ASSERT_TRUE(array->replace_failed(victim, std::move(extra_[0])).is_ok());
  Traffic traffic(*array, model_, 32);
  // The target's writes are held for a while, then let go, again and again: windows pile up
  // behind a held one (reads done, writes waiting, later windows done but not retired).
  std::atomic<bool> done_flag{false};
  std::atomic<std::uint32_t> holds{0};
  std::thread holder([&] {
    std::mt19937_64 rng(33);
    while (!done_flag.load()) {
      target->hold_writes();
      std::this_thread::sleep_for(std::chrono::microseconds(200 + rng() % 3000));
      if (target->held_writes() > 0) ++holds;
      target->release_writes();
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
    }
  });
  RebuildControl control = pipelined();
  control.bytes_per_second = 16u << 20;  // long enough for traffic to meet many windows
  auto done = array->rebuild(control);
  done_flag = true;
  holder.join();
  target->release_writes();
  traffic.finish();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(*done);
  EXPECT_GT(holds.load(), 5u) << "writes were held with windows in flight";
  EXPECT_GT(traffic.ios(), 200u);
  EXPECT_EQ(traffic.errors(), 0u);
  EXPECT_EQ(traffic.mismatches(), 0u);
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal);
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
  verify(*array, "after the pipelined rebuild");
  fail_others(*array, victim);
  verify(*array, "the rebuilt member answering for the others");
}

TEST_P(JobPipelineTest, RebuildStoppedAtRandomMomentsResumesEachTimeAndFinishes) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 41);
  const std::uint32_t victim = 0;
  ASSERT_TRUE(array->fail_member(victim, "test").is_ok());
  ASSERT_TRUE(array->replace_failed(victim, std::move(extra_[0])).is_ok());
  Traffic traffic(*array, model_, 42);
  std::mt19937_64 rng(43);
  std::uint64_t last = 0;
  std::uint32_t stops = 0;
  for (int round = 0; round < 40; ++round) {
    std::atomic<bool> stop{false};
    RebuildControl control = pipelined();
    control.stop = &stop;
    control.bytes_per_second = 24u << 20;
    std::thread stopper([&, wait = rng() % 4000] {
      std::this_thread::sleep_for(std::chrono::microseconds(wait));
      stop = true;
    });
    auto done = array->rebuild(control);
    stopper.join();
    ASSERT_TRUE(done.is_ok()) << done.status().to_string();
    if (*done) break;
    ++stops;
    // Every window was retired or given up, and unlocked: the checkpoint covers the prefix.
    auto slot = array->member_slot(victim);
    ASSERT_TRUE(slot.is_ok());
    ASSERT_EQ(slot->state, MemberSlotState::kRebuilding);
    EXPECT_GE(slot->rebuild_offset, last) << "a checkpoint never goes back";
    last = slot->rebuild_offset;
  }
  if (array->health() != ArrayHealth::kOptimal) {
    auto done = array->rebuild(pipelined());
    ASSERT_TRUE(done.is_ok() && *done);
  }
  traffic.finish();
  EXPECT_GT(stops, 3u);
  EXPECT_EQ(traffic.errors(), 0u);
  EXPECT_EQ(traffic.mismatches(), 0u);
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal);
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
  verify(*array, "after a rebuild stopped many times");
  fail_others(*array, victim);
  verify(*array, "the rebuilt member answering for the others");
}

// The power goes at a random moment of a pipelined rebuild, windows in flight and checkpoints
// being recorded while later windows go on: every write not covered by a completed flush is
// undone on every member (the target included). The checkpoint the superblocks hold must cover
// only what the target holds durably: after assembly the rebuild resumes there, and the target
// answers for every byte with the others failed.
TEST_P(JobPipelineTest, PowerLossMidRebuildResumesFromADurableCheckpoint) {
  {
    const std::uint64_t seed = 81 + static_cast<std::uint64_t>(GetParam().level);
    auto array = make();
    ASSERT_TRUE(array);
    fill(*array, seed);
    {
      auto ctx = std::move(*IoContext::create(8));
      auto queue = std::move(*array->attach(*ctx));
      ASSERT_TRUE(run_one(*queue, IoKind::kFlush, 0, 0, nullptr).is_ok()) << "the fill is durable";
    }
    const std::uint32_t victim = 0;
    const std::string target_path = extra_path(0);
    FaultyMember* target = extra_faulty(0);
    ASSERT_TRUE(array->fail_member(victim, "test").is_ok());
    ASSERT_TRUE(array->replace_failed(victim, std::move(extra_[0])).is_ok());
    const std::uint32_t n = array->member_count();
    std::mt19937_64 rng(seed);
    const auto cut_after = std::chrono::microseconds(rng() % 40'000);
    std::thread cutter([&] {
      for (auto slot = array->member_slot(victim);
           slot && slot->state == MemberSlotState::kRebuilding && slot->rebuild_offset == 0;
           slot = array->member_slot(victim))
        std::this_thread::sleep_for(100us);  // a checkpoint recorded first
      std::this_thread::sleep_for(cut_after);
      std::vector<FaultyMember*> all{target};
      for (std::uint32_t m = 0; m < n; ++m)
        if (m != victim) all.push_back(files_.faulty[m]);
      cut_power(all, seed + 100);
    });
    RebuildControl control = pipelined();
    control.window_stripes = 8;
    control.checkpoint_interval = 3ms;
    control.bytes_per_second = 24u << 20;
    (void)array->rebuild(control);  // fails or finishes, depending on when the power went
    cutter.join();
    array.reset();  // the crash: no stop()

    std::vector<std::unique_ptr<MemberDevice>> devs;
    for (std::uint32_t m = 0; m < n; ++m) {
      if (m != victim) devs.push_back(std::move(*open_member(files_.paths[m], {})));
    }
    devs.push_back(std::move(*open_member(target_path, {})));
    AssembleReport report;
    auto again = Array::assemble(std::move(devs), options(), AssembleOptions{}, &report);
    ASSERT_TRUE(again.is_ok()) << again.status().to_string();
    if ((*again)->member_slot(victim)->state == MemberSlotState::kRebuilding) {
      auto done = (*again)->rebuild();
      ASSERT_TRUE(done.is_ok()) << done.status().to_string();
      EXPECT_TRUE(*done);
    }
    ASSERT_EQ((*again)->member_slot(victim)->state, MemberSlotState::kActive);
    EXPECT_EQ((*again)->member_slot(victim)->path, target_path);
    verify(**again, "after the power loss and the resumed rebuild");
    fail_others(**again, victim);
    verify(**again, "the rebuilt member answering for the others");
  }
}

TEST_P(JobPipelineTest, SurvivorFailingMidRebuild) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 51);
  const std::uint32_t victim = 0;
  ASSERT_TRUE(array->fail_member(victim, "test").is_ok());
  ASSERT_TRUE(array->replace_failed(victim, std::move(extra_[0])).is_ok());
  // A survivor whose failure the degraded array may or may not survive.
  const std::uint32_t other = 1;
  const bool survives =
      array->geometry().survives((std::uint64_t{1} << victim) | (std::uint64_t{1} << other));
  Traffic traffic(*array, model_, 52);
  std::thread breaker([&] {
    for (auto slot = array->member_slot(victim);
         slot && slot->state == MemberSlotState::kRebuilding &&
         slot->rebuild_offset < kMemberBytes / 4;
         slot = array->member_slot(victim))
      std::this_thread::sleep_for(200us);
    files_.faulty[other]->vanish();
  });
  RebuildControl control = pipelined();
  control.bytes_per_second = 16u << 20;
  auto done = array->rebuild(control);
  breaker.join();
  traffic.finish();
  EXPECT_EQ(traffic.mismatches(), 0u) << "no read returns wrong data";
  if (survives) {
    ASSERT_TRUE(done.is_ok()) << done.status().to_string();
    EXPECT_TRUE(*done);
    EXPECT_EQ(traffic.errors(), 0u);
    EXPECT_EQ(array->member_slot(victim)->state, MemberSlotState::kActive);
    EXPECT_EQ(array->member_slot(other)->state, MemberSlotState::kFailed);
    verify(*array, "rebuilt without the survivor that failed");
  } else {
    EXPECT_FALSE(done.is_ok()) << "the rebuild cannot finish without that survivor";
    EXPECT_EQ(array->health(), ArrayHealth::kFailed);
  }
}

TEST_P(JobPipelineTest, CheckInWindowsFindsExactlyTheCorruptedStripesUnderTraffic) {
  auto array = make(0);
  ASSERT_TRUE(array);
  fill(*array, 61);
  const Geometry& g = array->geometry();
  const std::uint64_t stripes = g.stripes(array->member_data_bytes());
  // Flip bytes of the strip holding redundancy (parity, or a second copy) in a few stripes,
  // behind the array's back: what repair rewrites, so the data reads the same after it.
  std::vector<std::uint64_t> bad = {3, 17, stripes / 2, stripes - 1};
  for (const std::uint64_t stripe : bad) {
    const std::uint32_t member =
        g.redundancy() == Redundancy::kParity ? g.p_member(stripe) : g.data_member(stripe, 0, 1);
    const int fd = ::open(files_.paths[member].c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const auto at =
        static_cast<off_t>(array->member_data_offset() + stripe * g.strip_bytes() + 100);
    std::byte b[16];
    ASSERT_EQ(::pread(fd, b, sizeof b, at), 16);
    for (auto& x : b)
      x ^= std::byte{0x5a};
    ASSERT_EQ(::pwrite(fd, b, sizeof b, at), 16);
    ::close(fd);
  }
  CheckControl control;
  control.window_stripes = 8;
  control.windows_in_flight = 4;
  auto report = array->check(control);
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_TRUE(report->finished);
  EXPECT_EQ(report->stripes, stripes);
  EXPECT_EQ(report->mismatches, bad.size());
  std::sort(report->mismatch_stripes.begin(), report->mismatch_stripes.end());
  EXPECT_EQ(report->mismatch_stripes, bad);
  // Repaired under traffic, which reads and writes right through.
  {
    Traffic traffic(*array, model_, 62);
    control.repair = true;
    report = array->check(control);
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    EXPECT_EQ(report->repaired, report->mismatches);
    traffic.finish();
    EXPECT_EQ(traffic.errors(), 0u);
    // Parity levels read data strips only, which are intact. A mirror's reads take either copy,
    // and a copy rotted behind the array's back reads as it is until the repair rewrites it.
    if (g.redundancy() == Redundancy::kParity) {
      EXPECT_EQ(traffic.mismatches(), 0u);
    }
  }
  verify(*array, "after the repair");
  control.repair = false;
  report = array->check(control);
  ASSERT_TRUE(report.is_ok());
  EXPECT_EQ(report->mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Levels, JobPipelineTest,
                         ::testing::Values(LevelShape{RaidLevel::kRaid1, 2},
                                           LevelShape{RaidLevel::kRaid10, 4},
                                           LevelShape{RaidLevel::kRaid5, 4},
                                           LevelShape{RaidLevel::kRaid6, 5},
                                           LevelShape{RaidLevel::kRaid5, 4, true},
                                           LevelShape{RaidLevel::kRaid6, 5, true}),
                         level_shape_name);

class JobPipelineRaid6Test : public JobPipelineTest {};

TEST_P(JobPipelineRaid6Test, TwoMembersRebuiltInOnePassUnderTraffic) {
  auto array = make(2);
  ASSERT_TRUE(array);
  fill(*array, 71);
  ASSERT_TRUE(array->fail_member(0, "test").is_ok());
  ASSERT_TRUE(array->fail_member(3, "test").is_ok());
  ASSERT_TRUE(array->replace_failed(0, std::move(extra_[0])).is_ok());
  ASSERT_TRUE(array->replace_failed(3, std::move(extra_[1])).is_ok());
  EXPECT_EQ(array->rebuilding_members().size(), 2u);
  Traffic traffic(*array, model_, 72);
  RebuildControl control = pipelined();
  control.bytes_per_second = 16u << 20;
  auto done = array->rebuild(control);
  traffic.finish();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(*done);
  EXPECT_EQ(traffic.errors(), 0u);
  EXPECT_EQ(traffic.mismatches(), 0u);
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal);
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
  // Both answer for two others.
  ASSERT_TRUE(array->fail_member(1, "test").is_ok());
  ASSERT_TRUE(array->fail_member(2, "test").is_ok());
  verify(*array, "the two rebuilt members answering for two others");
}

INSTANTIATE_TEST_SUITE_P(Raid6, JobPipelineRaid6Test,
                         ::testing::Values(LevelShape{RaidLevel::kRaid6, 5}), level_shape_name);

}  // namespace
}  // namespace graid::testing
