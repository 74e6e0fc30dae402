// Rebuild onto a hot spare or a replacement (Array::take_spare, replace_failed, rebuild) for
// RAID1, RAID10, RAID5 and RAID6, with randomized reads and writes checked byte for byte against
// a model running all the while: reads of stripes below and above the checkpoint, writes that
// land on the member being rebuilt or plan around it. After each rebuild the array is optimal,
// consistent, and serves every byte with *other* members failed (so the rebuilt member's data is
// what answers). Also: a rebuild stopped and the array dropped without a clean stop (a crash)
// resumes from the recorded checkpoint after assembly; a second member failing during a RAID6
// rebuild; blocks a survivor cannot read during a RAID5 rebuild are recorded lost and the rebuild
// finishes (on RAID6 they are reconstructed).
#include <algorithm>
#include <cstring>
#include <optional>

#include "array_harness.h"
#include "array_traffic.h"

namespace graid::testing {
namespace {

using namespace std::chrono_literals;

class ArrayRebuildTest : public ArrayJobTest {
 protected:
  // Members and `spares` more files, opened separately (extra_).
  std::unique_ptr<Array> make(std::uint32_t spares = 1) { return make_array(spares, "rebuild"); }
};

TEST_P(ArrayRebuildTest, SpareTakesOverAndRebuildsUnderVerifiedIo) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 11);
  const std::uint32_t victim = 1;
  ASSERT_TRUE(array->add_spare(std::move(extra_[0])).is_ok());
  EXPECT_EQ(array->take_spare(victim).code(), Errc::kInvalidArgument) << "member not failed";
  ASSERT_TRUE(array->fail_member(victim, "test").is_ok());
  ASSERT_EQ(array->health(), ArrayHealth::kDegraded);
  ASSERT_TRUE(array->take_spare(victim).is_ok());
  EXPECT_EQ(array->take_spare(victim).code(), Errc::kInvalidArgument) << "rebuilding already";
  auto slot = array->member_slot(victim);
  ASSERT_TRUE(slot.is_ok());
  EXPECT_EQ(slot->state, MemberSlotState::kRebuilding);
  EXPECT_EQ(slot->path, files_.paths.back());
  EXPECT_EQ(array->member_slots().size(), array->member_count()) << "the spare slot is gone";

  Traffic traffic(*array, model_, 21);
  RebuildControl control;
  control.window_stripes = 8;
  control.checkpoint_interval = 20ms;
  control.bytes_per_second = 12u << 20;  // slow enough for traffic to meet the checkpoint
  auto done = array->rebuild(control);
  traffic.finish();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(*done);
  EXPECT_GT(traffic.ios(), 100u);
  EXPECT_EQ(traffic.errors(), 0u);
  EXPECT_EQ(traffic.mismatches(), 0u);
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal);
  EXPECT_EQ(array->member_slot(victim)->state, MemberSlotState::kActive);
  EXPECT_TRUE(array->rebuilding_members().empty());
  auto bad = array->count_inconsistent_stripes();
  ASSERT_TRUE(bad.is_ok());
  EXPECT_EQ(*bad, 0u);
  verify(*array, "after rebuild");

  // The rebuilt member now answers for what the others lose.
  fail_others(*array, victim);
  verify(*array, "after failing the others");
}

TEST_P(ArrayRebuildTest, StoppedRebuildResumesFromItsCheckpointAfterACrash) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 12);
  const std::uint32_t victim = 0;
  ASSERT_TRUE(array->fail_member(victim, "test").is_ok());
  ASSERT_TRUE(array->replace_failed(victim, std::move(extra_[0])).is_ok());
  std::atomic<bool> stop{false};
  RebuildControl control;
  control.stop = &stop;
  control.window_stripes = 4;
  control.bytes_per_second = 8u << 20;
  std::uint64_t reached = 0;
  {
    Traffic traffic(*array, model_, 22);
    std::thread stopper([&] {
      while (array->member_slot(victim)->rebuild_offset < kMemberBytes / 3)
        std::this_thread::sleep_for(1ms);
      stop = true;
    });
    auto done = array->rebuild(control);
    stopper.join();
    ASSERT_TRUE(done.is_ok()) << done.status().to_string();
    EXPECT_FALSE(*done) << "stopped";
    reached = array->member_slot(victim)->rebuild_offset;
    EXPECT_GE(reached, kMemberBytes / 3);
    // Writes go on above and below the checkpoint before the "crash".
    std::this_thread::sleep_for(100ms);
    traffic.finish();
    EXPECT_EQ(traffic.errors(), 0u);
    EXPECT_EQ(traffic.mismatches(), 0u);
  }
  // A crash: the array object goes without stop() (nothing marks it clean).
  array.reset();
  auto devs = files_.open(GetParam().members + 1, kMemberBytes, false);
  ASSERT_TRUE(devs.is_ok());
  AssembleReport report;
  AssembleOptions assemble;
  // RAID5/6: a crash with a member being rebuilt is a dirty degraded start (a write torn by the
  // crash above the checkpoint leaves parity the rebuild would trust). The write-hole journal
  // (degraded-only, the default) covered every write since the member failed, so assembly
  // replays it and needs no override (without a journal it is refused: array_journal_test).
  auto again = Array::assemble(std::move(*devs), options(), assemble, &report);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_FALSE(report.was_clean);
  auto slot = (*again)->member_slot(victim);
  ASSERT_TRUE(slot.is_ok());
  EXPECT_EQ(slot->state, MemberSlotState::kRebuilding);
  EXPECT_EQ(slot->rebuild_offset, reached) << "the checkpoint recorded when it stopped";
  // Reads below and above the checkpoint are right before the rebuild resumes.
  verify(**again, "after assembly, before resuming");
  auto done = (*again)->rebuild();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(*done);
  EXPECT_EQ((*again)->health(), ArrayHealth::kOptimal);
  EXPECT_EQ(*(*again)->count_inconsistent_stripes(), 0u);
  const std::uint32_t other = other_member(**again, victim, 0);
  ASSERT_TRUE((*again)->fail_member(other, "test").is_ok());
  verify(**again, "resumed rebuild, another member failed");
}

TEST_P(ArrayRebuildTest, TakenBackMemberCatchesUpUnderTraffic) {
  auto array = make(0);
  ASSERT_TRUE(array);
  fill(*array, 15);
  const std::uint32_t victim = array->member_count() - 1;
  ASSERT_TRUE(array->fail_member(victim, "marked offline").is_ok());
  {
    // Writes while it is out: its old contents are stale now.
    Traffic traffic(*array, model_, 25);
    std::this_thread::sleep_for(150ms);
  }
  ASSERT_TRUE(array->readd_failed(victim).is_ok());
  EXPECT_EQ(array->member_slot(victim)->state, MemberSlotState::kRebuilding);
  EXPECT_EQ(array->readd_failed(victim).status().code(), Errc::kInvalidArgument)
      << "rebuilding already";
  Traffic traffic(*array, model_, 26);
  auto done = array->rebuild();
  traffic.finish();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_EQ(traffic.mismatches(), 0u);
  EXPECT_EQ(traffic.errors(), 0u);
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal);
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
  const std::uint32_t other = other_member(*array, victim, 0);
  ASSERT_TRUE(array->fail_member(other, "test").is_ok());
  verify(*array, "taken back, another member failed");
}

// A drive taken back after a short absence is rebuilt only where the write-intent bitmap marks
// writes it missed: the writes while it was out touch one region, flushes meanwhile (which clear
// idle bits while the array is whole) must not clear it, so the rebuild writes about that region
// and no more, and afterwards the drive answers for every byte with the others failed. Fails if
// bits are cleared while a member is failed (the region is then skipped and reads back stale).
TEST_P(ArrayRebuildTest, TakenBackMemberIsRebuiltOnlyWhereItMissedWrites) {
  auto array = make(0);
  ASSERT_TRUE(array);
  fill(*array, 17);
  const std::uint32_t victim = 0;
  FaultyMember* drive = files_.faulty[victim];
  {
    auto ctx = std::move(*IoContext::create(64));
    auto queue = std::move(*array->attach(*ctx));
    // The fill's bits clear with a flush after the clear interval (the array is whole).
    std::this_thread::sleep_for(600ms);
    ASSERT_TRUE(run_one(*queue, IoKind::kFlush, 0, 0, nullptr).is_ok());
    ASSERT_TRUE(array->fail_member(victim, "marked offline").is_ok());
    // 64 KiB written while it is out: bitmap region 0 of every member.
    auto buf = std::move(*AlignedBuffer::allocate(64u << 10, 4096));
    const auto data = random_bytes(buf.size(), 18);
    std::memcpy(buf.data(), data.data(), data.size());
    ASSERT_TRUE(run_one(*queue, IoKind::kWrite, 0, 64u << 10, buf.data()).is_ok());
    std::memcpy(model_.data(), data.data(), data.size());
    // Flushes after the interval: on a whole array they would clear that region's bit now.
    std::this_thread::sleep_for(600ms);
    ASSERT_TRUE(run_one(*queue, IoKind::kFlush, 0, 0, nullptr).is_ok());
    ASSERT_TRUE(run_one(*queue, IoKind::kFlush, 0, 0, nullptr).is_ok());
  }
  const FaultCounts before = drive->counts();
  ASSERT_TRUE(array->readd_failed(victim).is_ok());
  auto done = array->rebuild();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(*done);
  const FaultCounts after = drive->counts();
  const std::uint64_t written =
      (after.write_bytes - before.write_bytes) + (after.sync_writes - before.sync_writes) * kStrip;
  EXPECT_GT(written, 0u);
  EXPECT_LE(written, (1u << 20) + (64u << 10)) << "about one 1 MiB region (and metadata)";
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal);
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
  fail_others(*array, victim);
  verify(*array, "taken back by the bitmap, the others failed");
}

INSTANTIATE_TEST_SUITE_P(Levels, ArrayRebuildTest,
                         ::testing::Values(LevelShape{RaidLevel::kRaid1, 2},
                                           LevelShape{RaidLevel::kRaid10, 4},
                                           LevelShape{RaidLevel::kRaid5, 4},
                                           LevelShape{RaidLevel::kRaid6, 5}),
                         level_shape_name);

class ArrayRebuildFailureTest : public ArrayRebuildTest {};

TEST_P(ArrayRebuildFailureTest, SecondFailureDuringARaid6RebuildIsSurvived) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 13);
  ASSERT_TRUE(array->add_spare(std::move(extra_[0])).is_ok());
  ASSERT_TRUE(array->fail_member(2, "test").is_ok());
  ASSERT_TRUE(array->take_spare(2).is_ok());
  Traffic traffic(*array, model_, 23);
  std::thread failer([&] {
    while (array->member_slot(2)->rebuild_offset < kMemberBytes / 4)
      std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(array->fail_member(4, "second failure").is_ok());
  });
  RebuildControl control;
  control.window_stripes = 4;
  control.bytes_per_second = 16u << 20;
  auto done = array->rebuild(control);
  failer.join();
  traffic.finish();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(*done);
  EXPECT_EQ(traffic.errors(), 0u);
  EXPECT_EQ(traffic.mismatches(), 0u);
  EXPECT_EQ(array->health(), ArrayHealth::kDegraded) << "member 4 is still failed";
  EXPECT_EQ(array->member_slot(2)->state, MemberSlotState::kActive);
  verify(*array, "after the rebuild");
  ASSERT_TRUE(array->fail_member(0, "third").is_ok());
  verify(*array, "rebuilt member + 2 survivors");
}

// On RAID6 the same unreadable survivor blocks are reconstructed (two parity strips make up the
// survivor's and the new member's strips), rewritten in place, and nothing is lost.
TEST_P(ArrayRebuildFailureTest, UnreadableSurvivorBlocksAreReconstructedOnRaid6) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 24);
  ASSERT_TRUE(array->fail_member(4, "test").is_ok());
  ASSERT_TRUE(array->replace_failed(4, std::move(extra_[0])).is_ok());
  for (std::uint64_t stripe : {50u, 400u, 900u})
    files_.faulty[1]->bad_sectors(array->member_data_offset() + stripe * kStrip, kStrip);
  auto done = array->rebuild();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(*done);
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal);
  EXPECT_TRUE(array->lost_ranges().empty());
  EXPECT_FALSE(files_.faulty[1]->has_bad_sectors()) << "rewritten with what they held";
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
  verify(*array, "rebuilt over unreadable survivor blocks");
  fail_others(*array, 4);
  verify(*array, "rebuilt over unreadable survivor blocks, the others failed");
}

INSTANTIATE_TEST_SUITE_P(Raid6, ArrayRebuildFailureTest,
                         ::testing::Values(LevelShape{RaidLevel::kRaid6, 5}), level_shape_name);

class ArrayRebuildRaid5Test : public ArrayRebuildTest {};

// Item 4 of the resilience review: a survivor that cannot read a few blocks during a RAID5
// rebuild. Nothing can reconstruct them (or the new member's strips at the same rows), so they
// are recorded lost: the rebuild finishes, no member fails, reads of the lost ranges fail while
// every other byte reads back, the stripes stay consistent (zeroes, parity over them) and take
// partial writes, a write of a whole lost range makes it read again, and the list survives a
// restart. Before, the one unreadable block failed the survivor, and with it the array.
TEST_P(ArrayRebuildRaid5Test, UnreadableSurvivorBlocksAreRecordedLostAndTheRebuildFinishes) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 14);
  const Geometry& g = array->geometry();
  const std::uint32_t target = 3, survivor = 1;
  ASSERT_TRUE(array->fail_member(target, "test").is_ok());
  ASSERT_TRUE(array->replace_failed(target, std::move(extra_[0])).is_ok());
  // Two unreadable 4 KiB blocks (one strip each) on member 1: reads fail until rewritten.
  const std::uint64_t data = array->member_data_offset();
  const std::vector<std::uint64_t> stripes = {100, 700};
  for (std::uint64_t stripe : stripes)
    files_.faulty[survivor]->bad_sectors(data + stripe * kStrip, kStrip);
  auto done = array->rebuild();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(*done);
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal);
  EXPECT_FALSE(files_.faulty[survivor]->has_bad_sectors()) << "the blocks were rewritten";
  // Lost: the data strips of the survivor and of the new member in those stripes.
  std::vector<LostRange> expect;
  for (std::uint64_t stripe : stripes) {
    for (std::uint32_t m : {survivor, target}) {
      const MemberPlace place = g.place(m, stripe * kStrip);
      if (place.role == StripRole::kData) expect.push_back(LostRange{place.array_offset, kStrip});
    }
  }
  std::sort(expect.begin(), expect.end(),
            [](const LostRange& a, const LostRange& b) { return a.offset < b.offset; });
  ASSERT_FALSE(expect.empty());
  EXPECT_EQ(array->lost_ranges(), expect);
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u) << "zeroes, and parity over them";

  auto ctx = std::move(*IoContext::create(64));
  auto queue = std::move(*array->attach(*ctx));
  auto buf = std::move(*AlignedBuffer::allocate(kStrip, 4096));
  auto lost_at = [&](std::uint64_t at) {
    return std::any_of(expect.begin(), expect.end(),
                       [&](const LostRange& r) { return r.offset <= at && at < r.offset + r.len; });
  };
  for (std::uint64_t at = 0; at < array->capacity(); at += kStrip) {
    const Status st = run_one(*queue, IoKind::kRead, at, kStrip, buf.data());
    if (lost_at(at)) {
      EXPECT_EQ(st.code(), Errc::kIoError) << "lost range at " << at;
      continue;
    }
    ASSERT_TRUE(st.is_ok()) << at << ": " << st.to_string();
    ASSERT_EQ(std::memcmp(buf.data(), model_.data() + at, kStrip), 0) << "at " << at;
  }
  for (std::uint32_t m = 0; m < array->member_count(); ++m)
    EXPECT_EQ(array->member_health(m), MemberHealth::kActive) << "member " << m;
  // A partial write elsewhere in a stripe with a lost range, then each lost range rewritten.
  const std::uint64_t first_stripe_at = stripes[0] * g.stripe_data_bytes();
  for (std::uint32_t d = 0; d < g.data_strips(); ++d) {
    const std::uint64_t at = first_stripe_at + d * kStrip;
    if (lost_at(at)) continue;
    const auto fresh = random_bytes(kStrip, 90 + d);
    std::memcpy(buf.data(), fresh.data(), kStrip);
    ASSERT_TRUE(run_one(*queue, IoKind::kWrite, at, kStrip, buf.data()).is_ok());
    std::memcpy(model_.data() + at, fresh.data(), kStrip);
    break;
  }
  for (const LostRange& r : expect) {
    const auto fresh = random_bytes(r.len, r.offset);
    std::memcpy(buf.data(), fresh.data(), r.len);
    ASSERT_TRUE(run_one(*queue, IoKind::kWrite, r.offset, r.len, buf.data()).is_ok());
    std::memcpy(model_.data() + r.offset, fresh.data(), r.len);
  }
  EXPECT_TRUE(array->lost_ranges().empty());
  queue.reset();
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
  verify(*array, "lost ranges rewritten");
  fail_others(*array, target);
  verify(*array, "lost ranges rewritten, the others failed");
}

// Issue 47 item 9: neighbouring lost blocks merge into one range, and a bad zone on a member's
// strip boundary gives a range that spans two stripes. Writes are split at stripe boundaries, and
// only a piece covering a whole range cleared it: such a range could never be cleared. Now each
// piece takes out what it covers, so one write over the range (two pieces) makes it read again.
TEST_P(ArrayRebuildRaid5Test, ALostRangeAcrossAStripeBoundaryIsClearedByTheWritesThatCoverIt) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 15);
  const Geometry& g = array->geometry();
  // Neighbours in the rotation: the survivor holds the last data strip of a stripe whose next
  // stripe's first data strip is on the target.
  const std::uint32_t target = 3, survivor = 2;
  // Rows where the survivor's data strip of one stripe ends where a lost strip of the next
  // begins, in array bytes: unreadable there, the two merge into a range across the boundary.
  const auto data_strip_at = [&](std::uint32_t m,
                                 std::uint64_t row) -> std::optional<std::uint64_t> {
    const MemberPlace p = g.place(m, row * kStrip);
    if (p.role != StripRole::kData) return std::nullopt;
    return p.array_offset;
  };
  std::uint64_t row = 0;
  for (std::uint64_t r = 10; r < 200 && row == 0; ++r) {
    const auto a = data_strip_at(survivor, r);
    if (!a || *a + kStrip != (r + 1) * g.stripe_data_bytes()) continue;
    for (std::uint32_t m : {survivor, target}) {
      const auto b = data_strip_at(m, r + 1);
      if (b && *b == (r + 1) * g.stripe_data_bytes()) row = r;
    }
  }
  ASSERT_NE(row, 0u) << "no such row in the layout";
  ASSERT_TRUE(array->fail_member(target, "test").is_ok());
  ASSERT_TRUE(array->replace_failed(target, std::move(extra_[0])).is_ok());
  files_.faulty[survivor]->bad_sectors(array->member_data_offset() + row * kStrip, 2 * kStrip);
  auto done = array->rebuild();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  const std::uint64_t boundary = (row + 1) * g.stripe_data_bytes();
  LostRange across{};
  for (const LostRange& r : array->lost_ranges())
    if (r.offset < boundary && boundary < r.offset + r.len) across = r;
  ASSERT_NE(across.len, 0u) << "a lost range across the boundary at " << boundary;

  auto ctx = std::move(*IoContext::create(64));
  auto queue = std::move(*array->attach(*ctx));
  auto buf = std::move(*AlignedBuffer::allocate(across.len, 4096));
  const auto fresh = random_bytes(across.len, 16);
  std::memcpy(buf.data(), fresh.data(), across.len);
  ASSERT_TRUE(run_one(*queue, IoKind::kWrite, across.offset, across.len, buf.data()).is_ok());
  std::memcpy(model_.data() + across.offset, fresh.data(), across.len);
  for (const LostRange& r : array->lost_ranges())
    EXPECT_FALSE(r.offset < across.offset + across.len && across.offset < r.offset + r.len)
        << "still lost: [" << r.offset << ", +" << r.len << ")";
  std::memset(buf.data(), 0, across.len);
  ASSERT_TRUE(run_one(*queue, IoKind::kRead, across.offset, across.len, buf.data()).is_ok());
  EXPECT_EQ(std::memcmp(buf.data(), fresh.data(), across.len), 0);
  // Every other lost range is a whole write away from reading again, as before.
  for (const LostRange& r : array->lost_ranges()) {
    auto rest = std::move(*AlignedBuffer::allocate(r.len, 4096));
    const auto data = random_bytes(r.len, r.offset);
    std::memcpy(rest.data(), data.data(), r.len);
    ASSERT_TRUE(run_one(*queue, IoKind::kWrite, r.offset, r.len, rest.data()).is_ok());
    std::memcpy(model_.data() + r.offset, data.data(), r.len);
  }
  EXPECT_TRUE(array->lost_ranges().empty());
  queue.reset();
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
  fail_others(*array, target);
  verify(*array, "lost ranges rewritten, the others failed");
}

// The list is on disk: a restart keeps refusing the lost range.
TEST_P(ArrayRebuildRaid5Test, LostRangesSurviveARestart) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 19);
  ASSERT_TRUE(array->fail_member(3, "test").is_ok());
  ASSERT_TRUE(array->replace_failed(3, std::move(extra_[0])).is_ok());
  files_.faulty[1]->bad_sectors(array->member_data_offset() + 300 * kStrip, kStrip);
  auto done = array->rebuild();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  const std::vector<LostRange> lost = array->lost_ranges();
  ASSERT_FALSE(lost.empty());
  ASSERT_TRUE(array->stop().is_ok());
  array.reset();
  std::vector<std::unique_ptr<MemberDevice>> devs;
  for (std::uint32_t m = 0; m < 4; ++m)
    devs.push_back(std::move(*open_member(m == 3 ? extra_path(0) : files_.paths[m], {})));
  auto again = Array::assemble(std::move(devs), options());
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ((*again)->lost_ranges(), lost);
  auto ctx = std::move(*IoContext::create(8));
  auto queue = std::move(*(*again)->attach(*ctx));
  auto buf = std::move(*AlignedBuffer::allocate(kStrip, 4096));
  EXPECT_EQ(run_one(*queue, IoKind::kRead, lost[0].offset, kStrip, buf.data()).code(),
            Errc::kIoError);
}

INSTANTIATE_TEST_SUITE_P(Raid5, ArrayRebuildRaid5Test,
                         ::testing::Values(LevelShape{RaidLevel::kRaid5, 4}), level_shape_name);

// A member pulled with I/O in flight: its errors come back after a spare has taken its role
// (graidd's rebuild job is that quick). They must not fail the spare: the VM found it did.
TEST_P(ArrayRebuildRaid5Test, ErrorsFromTheReplacedDeviceDoNotFailTheSpare) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 16);
  ASSERT_TRUE(array->add_spare(std::move(extra_[0])).is_ok());
  auto ctx = std::move(*IoContext::create(64));
  auto queue = std::move(*array->attach(*ctx));
  const std::uint32_t bytes = 4 * array->geometry().stripe_data_bytes();  // member 1 holds data
  auto buf = std::move(*AlignedBuffer::allocate(bytes, 4096));
  files_.faulty[1]->fail_op_with(MemberOp::kRead, ENODEV);  // a vanished drive's answer
  const std::uint64_t reads_before = files_.faulty[1]->counts().reads;
  TestIo io;
  io.kind = IoKind::kRead;
  io.offset = 0;
  io.len = bytes;
  io.buf = buf.data();
  queue->submit(io);
  ASSERT_GT(files_.faulty[1]->counts().reads, reads_before) << "the read went to member 1 first";
  // Before its error is seen: member 1 fails (another I/O saw it) and the spare takes over.
  ASSERT_TRUE(array->fail_member(1, "pulled").is_ok());
  ASSERT_TRUE(array->take_spare(1).is_ok());
  while (!io.done)
    queue->context().poll(true);
  ASSERT_TRUE(io.status.is_ok()) << io.status.to_string();
  EXPECT_EQ(std::memcmp(buf.data(), model_.data(), bytes), 0);
  EXPECT_EQ(array->member_slot(1)->state, MemberSlotState::kRebuilding)
      << "the spare was failed for the old drive's error";
  queue.reset();
  auto done = array->rebuild();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal);
  verify(*array, "after the rebuild");
}

TEST_P(ArrayRebuildRaid5Test, ReplacementIsRefusedWhenItCannotServe) {
  auto array = make(2);
  ASSERT_TRUE(array);
  EXPECT_EQ(array->take_spare(0).code(), Errc::kInvalidArgument);
  ASSERT_TRUE(array->fail_member(0, "test").is_ok());
  EXPECT_EQ(array->take_spare(0).code(), Errc::kNotFound) << "no spare";
  EXPECT_EQ(array->take_spare(9).code(), Errc::kOutOfRange);
  // Its own failed device under another name is refused only for its superblock (force takes it).
  auto same = open_member(files_.paths[1], {});
  ASSERT_TRUE(same.is_ok());
  EXPECT_EQ(array->replace_failed(0, std::move(*same)).code(), Errc::kInvalidArgument)
      << "member 1's storage";
  ASSERT_TRUE(array->fail_member(1, "second").is_ok());
  EXPECT_EQ(array->replace_failed(1, std::move(extra_[0])).code(), Errc::kIoError)
      << "array failed: nothing to rebuild from";
  EXPECT_EQ(array->member_slot(1)->state, MemberSlotState::kFailed);
}

}  // namespace
}  // namespace graid::testing
