// The re-sync after an unclean stop as a background job (AssembleOptions::background_resync,
// Array::resync): a crash is simulated by dropping a running array without stop() and then
// breaking the redundancy of the regions it was writing (parity overwritten, mirror copies made
// to differ), as a write cut short by a power cut leaves them. Reads and writes before the
// re-sync passes a stripe must see the data, writes must leave the stripes they touch
// consistent, and after the re-sync every stripe is consistent and the data survives a member
// failure. A stop, a crash or a power loss part way leaves what is not done for the next
// assembly.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <set>

#include "array_traffic.h"

namespace graid::testing {
namespace {

class ArrayBackgroundResyncTest : public ArrayJobTest {
 protected:
  static constexpr std::uint64_t kRegion = 1u << 20;  // ArrayJobTest's bitmap regions

  std::uint64_t stripe_bytes(const Array& a) const {
    return std::uint64_t{a.geometry().data_strips()} * kStrip;
  }

  // An array filled and stopped cleanly, then run again and written in member regions
  // [first_region, first_region + regions) only, then dropped without stop(): those regions'
  // bits stay set. Their redundancy is then broken on the member files, as a crash between a
  // write's member writes leaves it. The model holds what the data strips hold.
  void crash_with_broken_regions(std::uint64_t first_region, std::uint64_t regions) {
    {
      auto array = make_array(0, "resync");
      ASSERT_NE(array, nullptr);
      fill(*array, 41);
      ASSERT_TRUE(array->stop().is_ok());
    }
    auto devs = files_.open(GetParam().members, kMemberBytes, false);
    ASSERT_TRUE(devs.is_ok());
    auto array = Array::assemble(std::move(*devs), options());
    ASSERT_TRUE(array.is_ok()) << array.status().to_string();
    const Geometry g = (*array)->geometry();
    data_offset_ = (*array)->member_data_offset();
    first_stripe_ = first_region * kRegion / kStrip;
    end_stripe_ = (first_region + regions) * kRegion / kStrip;
    {
      auto ctx = std::move(*IoContext::create(64));
      auto queue = std::move(*(*array)->attach(*ctx));
      std::mt19937_64 rng(7);
      auto buf = std::move(*AlignedBuffer::allocate(kStrip, 4096));
      // One strip in every 16th stripe of the regions: each region gets its bit.
      for (std::uint64_t s = first_stripe_; s < end_stripe_; s += 16) {
        const std::uint64_t at = s * stripe_bytes(**array);
        for (std::uint32_t w = 0; w < kStrip / 8; ++w) {
          const std::uint64_t v = rng();
          std::memcpy(buf.data() + w * 8, &v, 8);
        }
        ASSERT_TRUE(run_one(*queue, IoKind::kWrite, at, kStrip, buf.data()).is_ok());
        std::memcpy(model_.data() + at, buf.data(), kStrip);
      }
    }
    array->reset();  // no stop(): dirty, as after a crash
    // Every stripe of the regions loses its consistency.
    const std::vector<std::byte> junk = random_bytes(kStrip, 99);
    for (std::uint64_t s = first_stripe_; s < end_stripe_; ++s) {
      std::vector<std::uint32_t> victims;
      if (g.redundancy() == Redundancy::kParity) {
        victims.push_back(g.p_member(s));
        if (g.parity_strips() > 1) victims.push_back(g.q_member(s));
      } else {
        for (std::uint32_t d = 0; d < g.data_strips(); ++d)
          for (std::uint32_t c = 1; c < g.copies(); ++c)
            victims.push_back(g.data_member(s, d, c));
      }
      for (std::uint32_t m : victims)
        overwrite(m, data_offset_ + s * kStrip, junk);
    }
  }

  void overwrite(std::uint32_t member, std::uint64_t offset, const std::vector<std::byte>& bytes) {
    const int fd = ::open(files_.paths[member].c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)),
              static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  }

  MemberExamination examine(std::uint32_t member) {
    auto dev = open_member(files_.paths[member], OpenOptions{});
    EXPECT_TRUE(dev.is_ok());
    if (!dev.is_ok()) return {};
    auto exam = Array::examine(**dev);
    EXPECT_TRUE(exam.is_ok()) << exam.status().to_string();
    return exam.is_ok() ? *exam : MemberExamination{};
  }

  std::unique_ptr<Array> assemble_background(AssembleReport* report,
                                             ArrayObserver* observer = nullptr) {
    auto devs = files_.open(GetParam().members, kMemberBytes, false);
    EXPECT_TRUE(devs.is_ok());
    if (!devs.is_ok()) return nullptr;
    AssembleOptions how;
    how.background_resync = true;
    ArrayOptions o = options();
    o.observer = observer;
    auto array = Array::assemble(std::move(*devs), o, how, report);
    EXPECT_TRUE(array.is_ok()) << array.status().to_string();
    return array.is_ok() ? std::move(*array) : nullptr;
  }

  // After the re-sync: nothing pending, every stripe consistent, the data as the model says,
  // also with as many members failed as the level tolerates (reconstructed from the redundancy
  // the re-sync made).
  void expect_whole(Array& array) {
    EXPECT_FALSE(array.resync_progress().has_value());
    auto bad = array.count_inconsistent_stripes();
    ASSERT_TRUE(bad.is_ok()) << bad.status().to_string();
    EXPECT_EQ(*bad, 0u);
    verify(array, "after the re-sync");
    fail_others(array, array.member_count());
    verify(array, "after the re-sync, with members failed");
  }

  // A control that stops the job after `stripes` one-stripe windows.
  InitControl stop_after(std::uint64_t stripes) {
    stop_ = false;
    windows_ = 0;
    InitControl control;
    control.stop = &stop_;
    control.window_stripes = 1;
    control.speed = [this, stripes] {
      if (++windows_ > stripes) stop_ = true;
      return JobSpeed{};
    };
    return control;
  }

  std::uint64_t data_offset_ = 0, first_stripe_ = 0, end_stripe_ = 0;
  std::atomic<bool> stop_{false};
  std::uint64_t windows_ = 0;
};

TEST_P(ArrayBackgroundResyncTest, AssemblyLeavesTheMarkedRegionsPendingAndStopLeavesThemDirty) {
  crash_with_broken_regions(1, 2);
  AssembleReport report;
  auto array = assemble_background(&report);
  ASSERT_NE(array, nullptr);
  EXPECT_FALSE(report.was_clean);
  EXPECT_EQ(report.resynced_bytes, 0u) << "assembly re-synced instead of leaving it to resync()";
  EXPECT_EQ(report.resync_pending_bytes, 2 * kRegion);
  auto progress = array->resync_progress();
  ASSERT_TRUE(progress.has_value());
  EXPECT_EQ(progress->total, 2 * kRegion);
  EXPECT_EQ(progress->done, 0u);
  // A check would count every stripe not yet re-synced: refused until it is done.
  auto check = array->check();
  ASSERT_FALSE(check.is_ok());
  EXPECT_EQ(check.status().code(), Errc::kBusy);
  // Stopped with the re-sync pending: not marked clean, and the next assembly has it all again.
  ASSERT_TRUE(array->stop().is_ok());
  array.reset();
  {
    auto exam = examine(0);
    EXPECT_FALSE(exam.clean);
    EXPECT_EQ(exam.resync_checkpoint, std::optional<std::uint64_t>(kRegion));
  }
  array = assemble_background(&report);
  ASSERT_NE(array, nullptr);
  EXPECT_FALSE(report.was_clean) << "a stop with a re-sync pending marked the array clean";
  EXPECT_EQ(report.resync_pending_bytes, 2 * kRegion);
  auto done = array->resync();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(done->finished);
  EXPECT_EQ(done->stripes, end_stripe_ - first_stripe_);
  EXPECT_EQ(done->unsynced_stripes, 0u);
  ASSERT_TRUE(array->check().is_ok());
  ASSERT_TRUE(array->stop().is_ok());
  array.reset();
  {
    auto exam = examine(0);
    EXPECT_TRUE(exam.clean);
    EXPECT_FALSE(exam.resync_checkpoint.has_value());
  }
  array = assemble_background(&report);
  ASSERT_NE(array, nullptr);
  EXPECT_EQ(report.resync_pending_bytes, 0u);
  expect_whole(*array);
}

TEST_P(ArrayBackgroundResyncTest, ReadsAndWritesBeforeTheResyncSeeTheDataAndLeaveStripesWhole) {
  crash_with_broken_regions(1, 1);
  AssembleReport report;
  auto array = assemble_background(&report);
  ASSERT_NE(array, nullptr);
  ASSERT_TRUE(array->resync_progress().has_value());
  // Mirrors: every read of a stripe pending comes from the copy the re-sync keeps.
  for (int round = 0; round < 3; ++round)
    verify(*array, "before the re-sync");
  // Single-strip writes into the pending stripes: they must not trust the broken parity.
  std::set<std::uint64_t> written, written_at;
  {
    auto ctx = std::move(*IoContext::create(64));
    auto queue = std::move(*array->attach(*ctx));
    std::mt19937_64 rng(11);
    auto buf = std::move(*AlignedBuffer::allocate(kStrip, 4096));
    for (int i = 0; i < 64; ++i) {
      const std::uint64_t stripe = first_stripe_ + rng() % (end_stripe_ - first_stripe_);
      const std::uint64_t at =
          stripe * stripe_bytes(*array) + rng() % array->geometry().data_strips() * kStrip;
      for (std::uint32_t w = 0; w < kStrip / 8; ++w) {
        const std::uint64_t v = rng();
        std::memcpy(buf.data() + w * 8, &v, 8);
      }
      ASSERT_TRUE(run_one(*queue, IoKind::kWrite, at, kStrip, buf.data()).is_ok());
      std::memcpy(model_.data() + at, buf.data(), kStrip);
      written.insert(stripe);
      written_at.insert(at);
    }
  }
  // With members failed, the stripes written read back whole from the redundancy those writes
  // made (a read-modify-write over the broken parity would not have made it).
  fail_others(*array, array->member_count());
  auto ctx = std::move(*IoContext::create(64));
  auto queue = std::move(*array->attach(*ctx));
  const std::uint64_t row = stripe_bytes(*array);
  auto buf = std::move(*AlignedBuffer::allocate(row, 4096));
  if (array->geometry().redundancy() == Redundancy::kMirror) {
    // A mirror strip written whole is whole; the others in its row still differ by copy.
    for (std::uint64_t at : written_at) {
      ASSERT_TRUE(run_one(*queue, IoKind::kRead, at, kStrip, buf.data()).is_ok());
      ASSERT_EQ(std::memcmp(buf.data(), model_.data() + at, kStrip), 0)
          << "array byte " << at << " written before the re-sync reads back wrong";
    }
    return;
  }
  for (std::uint64_t stripe : written) {
    ASSERT_TRUE(
        run_one(*queue, IoKind::kRead, stripe * row, static_cast<std::uint32_t>(row), buf.data())
            .is_ok());
    ASSERT_EQ(std::memcmp(buf.data(), model_.data() + stripe * row, row), 0)
        << "stripe " << stripe << " written before the re-sync is not whole";
  }
}

TEST_P(ArrayBackgroundResyncTest, ResyncUnderVerifiedTrafficLeavesEveryStripeConsistent) {
  crash_with_broken_regions(2, 2);
  ArrayEventLog events;
  AssembleReport report;
  auto array = assemble_background(&report, &events);
  ASSERT_NE(array, nullptr);
  Traffic traffic(*array, model_, 5);
  InitControl control;
  control.window_stripes = 4;
  control.bytes_per_second = 4u << 20;  // about half a second: traffic meets every window
  control.checkpoint_interval = std::chrono::milliseconds(50);
  auto done = array->resync(control);
  traffic.finish();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(done->finished);
  EXPECT_EQ(done->stripes, end_stripe_ - first_stripe_);
  EXPECT_GT(traffic.ios(), 0u);
  EXPECT_EQ(traffic.errors(), 0u);
  EXPECT_EQ(traffic.mismatches(), 0u);
  expect_whole(*array);
  array.reset();  // delivers the events
  ASSERT_EQ(events.of(ArrayEventKind::kResyncStarted).size(), 1u);
  const auto finished = events.of(ArrayEventKind::kResyncFinished);
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].counts.stripes, end_stripe_ - first_stripe_);
}

// A capped re-sync keeps to its cap with the default windows (several regions in flight, each a
// pipeline run): it takes at least the time its bytes need at that rate, less the first window,
// which goes at once. (A lower bound only: a slow machine makes it longer, never shorter.)
TEST_P(ArrayBackgroundResyncTest, ACappedResyncTakesTheTimeItsCapSays) {
  crash_with_broken_regions(2, 2);
  AssembleReport report;
  auto array = assemble_background(&report);
  ASSERT_NE(array, nullptr);
  const std::uint64_t bytes = report.resync_pending_bytes;
  ASSERT_GT(bytes, 0u);
  InitControl control;
  control.bytes_per_second = 8u << 20;
  const auto started = std::chrono::steady_clock::now();
  auto done = array->resync(control);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  ASSERT_TRUE(done->finished);
  // Member bytes per member: the pending bytes are per member already (resync_pending_bytes).
  const double at_least = static_cast<double>(bytes) / control.bytes_per_second - 0.1;
  EXPECT_GE(took, at_least) << bytes << " bytes per member at 8 MiB/s took " << took << " s";
}

TEST_P(ArrayBackgroundResyncTest, AStoppedResyncResumesWithWhatItHadNotPassed) {
  crash_with_broken_regions(1, 2);
  AssembleReport report;
  auto array = assemble_background(&report);
  ASSERT_NE(array, nullptr);
  // Stopped part way into the second region: the first is done and its bit may clear.
  auto part = array->resync(stop_after(kRegion / kStrip + 8));
  ASSERT_TRUE(part.is_ok()) << part.status().to_string();
  EXPECT_FALSE(part->finished);
  EXPECT_EQ(part->paused, "stopped");
  auto progress = array->resync_progress();
  ASSERT_TRUE(progress.has_value());
  EXPECT_GT(progress->done, kRegion);
  EXPECT_LT(progress->done, 2 * kRegion);
  ASSERT_TRUE(array->stop().is_ok());
  array.reset();
  array = assemble_background(&report);
  ASSERT_NE(array, nullptr);
  // Only the region it had not passed is left (its bit was pinned; the first one's cleared).
  EXPECT_EQ(report.resync_pending_bytes, kRegion);
  auto rest = array->resync();
  ASSERT_TRUE(rest.is_ok()) << rest.status().to_string();
  EXPECT_TRUE(rest->finished);
  EXPECT_EQ(rest->stripes, kRegion / kStrip);
  expect_whole(*array);
}

TEST_P(ArrayBackgroundResyncTest, ACrashDuringTheResyncLeavesItsRegionsForTheNextAssembly) {
  crash_with_broken_regions(1, 2);
  {
    AssembleReport report;
    auto array = assemble_background(&report);
    ASSERT_NE(array, nullptr);
    auto part = array->resync(stop_after(20));
    ASSERT_TRUE(part.is_ok());
    ASSERT_FALSE(part->finished);
    // Dropped without stop(): a crash part way through.
  }
  AssembleReport report;
  auto array = assemble_background(&report);
  ASSERT_NE(array, nullptr);
  EXPECT_FALSE(report.was_clean);
  EXPECT_EQ(report.resync_pending_bytes, 2 * kRegion) << "a region not yet re-synced was lost";
  auto done = array->resync();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(done->finished);
  expect_whole(*array);
}

// The power goes at a random moment of a re-sync on the job engine's pipeline (windows in
// flight, parity written strip by strip; every unflushed write on every member kept or undone at
// random): what it had not passed keeps its bits, so the next assembly re-syncs it and every
// stripe ends whole.
TEST_P(ArrayBackgroundResyncTest, PowerLossMidPipelinedResyncLeavesWhatItHadNotPassed) {
  const std::uint64_t seed = 61 + static_cast<std::uint64_t>(GetParam().level);
  crash_with_broken_regions(1, 3);
  std::mt19937_64 rng(seed);
  {
    AssembleReport report;
    auto array = assemble_background(&report);
    ASSERT_NE(array, nullptr);
    ASSERT_EQ(report.resync_pending_bytes, 3 * kRegion);
    InitControl control;
    control.window_stripes = 2;
    control.windows_in_flight = 4;
    control.bytes_per_second = 8u << 20;  // about 0.4 s for the three regions
    control.checkpoint_interval = std::chrono::milliseconds(2);
    std::thread job([&] { (void)array->resync(control); });  // fails once the power goes
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300'000));
    ASSERT_NO_FATAL_FAILURE(cut_power(files_.faulty, seed + 1, PowerLossPolicy::kLoseRandom));
    job.join();
  }  // the crash: no stop()
  AssembleReport report;
  auto array = assemble_background(&report);
  ASSERT_NE(array, nullptr);
  EXPECT_FALSE(report.was_clean);
  auto done = array->resync();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(done->finished);
  expect_whole(*array);
}

// A write into `stripe` that member `refuser` refuses as malformed (EINVAL: the request's fault,
// not the drive's): the request fails, the member stays, and the other members took their parts,
// so the stripe's redundancy no longer matches its data. The refuser holds the stripe's parity
// (or, for a mirror, a copy of the strip written).
void write_refused_by_a_member(Array& array, ArrayFiles& files, std::uint64_t stripe) {
  const Geometry& g = array.geometry();
  const std::uint32_t refuser =
      g.redundancy() == Redundancy::kParity ? g.p_member(stripe) : g.data_member(stripe, 0, 1);
  files.faulty[refuser]->fail_op_with(MemberOp::kWrite, EINVAL);
  auto ctx = std::move(*IoContext::create(64));
  auto queue = std::move(*array.attach(*ctx));
  auto buf = std::move(*AlignedBuffer::allocate(4096, 4096));
  const auto data = random_bytes(4096, 1234);
  std::memcpy(buf.data(), data.data(), data.size());
  const std::uint64_t at = stripe * g.stripe_data_bytes();
  EXPECT_FALSE(run_one(*queue, IoKind::kWrite, at, 4096, buf.data()).is_ok())
      << "the member refused its part";
  files.faulty[refuser]->clear_failures();
  // Flushes run bitmap clears (every flush: bitmap_clear_interval_ 0).
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(run_one(*queue, IoKind::kFlush, 0, 0, nullptr).is_ok());
  EXPECT_EQ(array.member_health(refuser), MemberHealth::kActive);
}

// Issue 47 item 11: the bit of a stripe a member refused to write stays set until a re-sync
// makes the stripe whole. A background re-sync that had already passed the region unpinned it
// when it moved on (unpin_below took every pin below it), the next flush cleared the bit, and
// the stripe stayed inconsistent for good. Such a pin now holds until the next assembly, and the
// DG does not stop clean while one does, so that assembly re-syncs the region.
TEST_P(ArrayBackgroundResyncTest, AStripeAMemberRefusedKeepsItsBitThroughARunningResync) {
  bitmap_clear_interval_ = std::chrono::milliseconds(0);
  crash_with_broken_regions(1, 2);
  AssembleReport report;
  auto array = assemble_background(&report);
  ASSERT_NE(array, nullptr);
  // The re-sync passes region 1 and stops part way into region 2.
  auto part = array->resync(stop_after(kRegion / kStrip + 8));
  ASSERT_TRUE(part.is_ok()) << part.status().to_string();
  ASSERT_FALSE(part->finished);
  // Region 1 (member bytes [1 MiB, 2 MiB)), which the re-sync has passed.
  ASSERT_NO_FATAL_FAILURE(write_refused_by_a_member(*array, files_, kRegion / kStrip + 3));
  auto rest = array->resync();
  ASSERT_TRUE(rest.is_ok()) << rest.status().to_string();
  ASSERT_TRUE(rest->finished);
  {
    auto ctx = std::move(*IoContext::create(64));
    auto queue = std::move(*array->attach(*ctx));
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(run_one(*queue, IoKind::kFlush, 0, 0, nullptr).is_ok());
  }
  ASSERT_TRUE(array->stop().is_ok());
  array.reset();
  array = assemble_background(&report);
  ASSERT_NE(array, nullptr);
  EXPECT_FALSE(report.was_clean) << "a region is owed a re-sync";
  EXPECT_GE(report.resync_pending_bytes, kRegion);
  auto done = array->resync();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
}

// The same without a re-sync running: the pinned bit survives a stop, which does not mark the
// DG clean, and the next assembly re-syncs the stripe (a clean assembly re-syncs nothing).
TEST_P(ArrayBackgroundResyncTest, AStripeAMemberRefusedIsResyncedAfterTheNextStop) {
  bitmap_clear_interval_ = std::chrono::milliseconds(0);
  auto array = make_array(0, "refused");
  ASSERT_NE(array, nullptr);
  fill(*array, 43);
  ASSERT_NO_FATAL_FAILURE(write_refused_by_a_member(*array, files_, 2 * kRegion / kStrip + 5));
  ASSERT_GT(*array->count_inconsistent_stripes(), 0u);
  ASSERT_TRUE(array->stop().is_ok());
  array.reset();
  AssembleReport report;
  array = assemble_background(&report);
  ASSERT_NE(array, nullptr);
  EXPECT_FALSE(report.was_clean);
  auto done = array->resync();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Levels, ArrayBackgroundResyncTest,
                         ::testing::Values(LevelShape{RaidLevel::kRaid1, 2},
                                           LevelShape{RaidLevel::kRaid10, 4},
                                           // Wide enough that a one-strip RAID5 write would be
                                           // planned as a read-modify-write if allowed.
                                           LevelShape{RaidLevel::kRaid5, 6},
                                           LevelShape{RaidLevel::kRaid6, 7}),
                         level_shape_name);

// A member that fails while the re-sync runs: the stripes that lost a data strip cannot be
// re-synced (the write hole), are counted and reported, and the re-sync still finishes.
class ArrayBackgroundResyncRaid5Test : public ArrayBackgroundResyncTest {};

TEST_P(ArrayBackgroundResyncRaid5Test, AMemberFailedBeforeTheResyncLeavesItsStripesCounted) {
  crash_with_broken_regions(1, 1);
  ArrayEventLog events;
  AssembleReport report;
  auto array = assemble_background(&report, &events);
  ASSERT_NE(array, nullptr);
  ASSERT_TRUE(array->fail_member(0, "test").is_ok());
  auto done = array->resync();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(done->finished);
  const std::uint64_t stripes = end_stripe_ - first_stripe_;
  // Member 0 holds parity in a quarter of the stripes, data in the rest.
  EXPECT_EQ(done->unsynced_stripes, stripes * 3 / 4);
  EXPECT_EQ(done->stripes + done->unsynced_stripes, stripes);
  EXPECT_FALSE(array->resync_progress().has_value());
  array.reset();
  const auto finished = events.of(ArrayEventKind::kResyncFinished);
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].counts.unsynced_stripes, stripes * 3 / 4);
}

INSTANTIATE_TEST_SUITE_P(Raid5, ArrayBackgroundResyncRaid5Test,
                         ::testing::Values(LevelShape{RaidLevel::kRaid5, 4}), level_shape_name);

}  // namespace
}  // namespace graid::testing
