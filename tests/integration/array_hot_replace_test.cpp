// Hot replace of a working member (Array::start_replace, replace) for RAID1, RAID10, RAID5 and
// RAID6, with randomized reads and writes checked byte for byte against a model all the while.
// After the swap the new device holds the role (a new member UUID), the old one carries no
// superblock, the array is optimal and consistent, and it serves every byte with the *other*
// members failed, so the copy, and every write that went to it during the copy, is what answers;
// it also assembles from the new set of devices. A replacement that fails a write, a member that
// fails during the copy and a cancel each give the replace up with the array unharmed; a stop,
// a clean stop of the array and a crash keep it, and it resumes from its checkpoint. Refusals
// change nothing.
#include <algorithm>
#include <cstring>

#include "array_harness.h"
#include "array_traffic.h"
#include "gate_member.h"

namespace graid::testing {
namespace {

using namespace std::chrono_literals;

class ArrayHotReplaceTest : public ArrayJobTest {
 protected:
  // Members plus two files opened separately (extra_).
  std::unique_ptr<Array> make() { return make_array(2, "replace"); }
};

TEST_P(ArrayHotReplaceTest, CopiesUnderVerifiedIoThenTakesTheRole) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 31);
  const std::uint32_t victim = 1;
  const std::string old_uuid = array->member_slot(victim)->uuid;
  EXPECT_FALSE(array->replace_progress());
  ASSERT_TRUE(array->start_replace(victim, std::move(extra_[0])).is_ok());
  auto progress = array->replace_progress();
  ASSERT_TRUE(progress);
  EXPECT_EQ(progress->member, victim);
  EXPECT_EQ(progress->path, extra_path(0));
  EXPECT_EQ(progress->copied_bytes, 0u);
  EXPECT_EQ(array->start_replace(0, std::move(extra_[1])).code(), Errc::kBusy)
      << "one replace at a time";
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal) << "redundancy is not lowered";

  Traffic traffic(*array, model_, 32);
  RebuildControl control;
  control.window_stripes = 8;
  control.bytes_per_second = 12u << 20;  // slow enough for writes to meet both sides of the copy
  auto done = array->replace(control);
  std::this_thread::sleep_for(50ms);  // writes after the swap go to the new device alone
  traffic.finish();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(*done);
  EXPECT_GT(traffic.ios(), 100u);
  EXPECT_EQ(traffic.errors(), 0u);
  EXPECT_EQ(traffic.mismatches(), 0u);
  EXPECT_FALSE(array->replace_progress());
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal);
  auto slot = array->member_slot(victim);
  ASSERT_TRUE(slot.is_ok());
  EXPECT_EQ(slot->state, MemberSlotState::kActive);
  EXPECT_EQ(slot->path, extra_path(0));
  EXPECT_NE(slot->uuid, old_uuid) << "a new identity for the role";
  EXPECT_GT(extra_faulty(0)->counts().writes, 0u) << "foreground writes reached the copy";
  // The old device is out: no superblock left to assemble it from.
  auto old = open_member(files_.paths[victim], {});
  ASSERT_TRUE(old.is_ok());
  EXPECT_EQ(Array::examine(**old).status().code(), Errc::kNotFound);
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
  verify(*array, "after the swap");
  ASSERT_TRUE(array->stop().is_ok());
  array.reset();

  // The new set assembles clean, and the copy answers for what the others lose.
  std::vector<std::unique_ptr<MemberDevice>> devs;
  for (std::uint32_t m = 0; m < GetParam().members; ++m) {
    auto d = open_member(m == victim ? extra_path(0) : files_.paths[m], {});
    ASSERT_TRUE(d.is_ok());
    devs.push_back(std::move(*d));
  }
  AssembleReport report;
  auto again = Array::assemble(std::move(devs), options(), {}, &report);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_TRUE(report.was_clean);
  EXPECT_EQ((*again)->health(), ArrayHealth::kOptimal);
  EXPECT_EQ((*again)->member_slot(victim)->path, extra_path(0));
  fail_others(**again, victim);
  verify(**again, "assembled, the others failed");
}

TEST_P(ArrayHotReplaceTest, ReplacementThatFailsAWriteIsGivenUp) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 33);
  const std::uint32_t victim = 0;
  // Writes to the middle of its data area fail: the copy gets there and gives up.
  extra_faulty(0)->fail_range(kMemberBytes / 2, 4096);
  ASSERT_TRUE(array->start_replace(victim, std::move(extra_[0])).is_ok());
  Traffic traffic(*array, model_, 34);
  RebuildControl control;
  control.window_stripes = 8;
  auto done = array->replace(control);
  traffic.finish();
  ASSERT_FALSE(done.is_ok());
  EXPECT_EQ(done.status().code(), Errc::kIoError);
  EXPECT_EQ(traffic.errors(), 0u) << "the array's I/O never saw the replacement's error";
  EXPECT_EQ(traffic.mismatches(), 0u);
  EXPECT_FALSE(array->replace_progress()) << "given up";
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal);
  EXPECT_EQ(array->member_slot(victim)->path, files_.paths[victim]) << "the old device stays";
  verify(*array, "after the replace was given up");

  // A member failing during the copy gives it up too; a new replace may start after.
  ASSERT_TRUE(array->start_replace(victim, std::move(extra_[1])).is_ok());
  ASSERT_TRUE(array->fail_member(victim, "test").is_ok());
  auto again = array->replace();
  EXPECT_EQ(again.status().code(), Errc::kIoError);
  EXPECT_FALSE(array->replace_progress());
  EXPECT_EQ(array->member_slot(victim)->state, MemberSlotState::kFailed);
  EXPECT_EQ(array->member_slot(victim)->path, files_.paths[victim]);
  verify(*array, "degraded after the victim failed");
}

TEST_P(ArrayHotReplaceTest, StopKeepsItCancelGivesItUpAndRefusalsChangeNothing) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 35);
  EXPECT_EQ(array->start_replace(99, std::move(extra_[1])).code(), Errc::kOutOfRange);
  // The storage of member 1 under another name.
  auto same = open_member(files_.paths[1], {});
  ASSERT_TRUE(same.is_ok());
  EXPECT_EQ(array->start_replace(0, std::move(*same)).code(), Errc::kInvalidArgument);
  // Too small.
  OpenOptions small_file;
  small_file.create = true;
  small_file.create_size = 1u << 20;
  auto small = open_member(files_.dir.path() + "/small.img", small_file);
  ASSERT_TRUE(small.is_ok()) << small.status().to_string();
  EXPECT_EQ(array->start_replace(0, std::move(*small)).code(), Errc::kNoSpace);
  EXPECT_FALSE(array->replace_progress());
  const std::uint32_t n = array->member_count();
  EXPECT_EQ(array->member_slots().size(), n) << "refusals take no slot";

  const std::string path0 = extra_path(0);
  ASSERT_TRUE(array->start_replace(0, std::move(extra_[0])).is_ok());
  // Recorded at once: the device holds the first spare slot, and carries the array's superblock.
  auto slot = array->member_slot(n);
  ASSERT_TRUE(slot.is_ok());
  EXPECT_EQ(slot->state, MemberSlotState::kReplacement);
  EXPECT_EQ(slot->path, path0);
  std::atomic<bool> stop{true};
  RebuildControl control;
  control.stop = &stop;
  auto done = array->replace(control);
  ASSERT_TRUE(done.is_ok());
  EXPECT_FALSE(*done) << "stopped";
  ASSERT_TRUE(array->replace_progress()) << "a stop keeps the replace pending";
  EXPECT_EQ(array->member_slot(0)->path, files_.paths[0]);
  // Cancelled: the record and the slot go, the device's superblock is erased, and the same file
  // can be used again.
  EXPECT_TRUE(array->cancel_replace());
  EXPECT_FALSE(array->cancel_replace());
  EXPECT_FALSE(array->replace_progress());
  EXPECT_EQ(array->member_slots().size(), n);
  auto back = open_member(path0, {});
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(Array::examine(**back).status().code(), Errc::kNotFound);
  ASSERT_TRUE(array->start_replace(0, std::move(*back)).is_ok());
  EXPECT_TRUE(array->cancel_replace());
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
  verify(*array, "after the cancel");
}

// A replace stopped part way is recorded with its checkpoint. A clean stop and assembly resume it
// there; a crash resumes it from below the regions the bitmap marks dirty, so a write that reached
// only the new device (here: junk planted on it) is copied again. Writes go on throughout, and
// the finished copy answers for what the others lose.
TEST_P(ArrayHotReplaceTest, ResumesFromItsCheckpointAfterAStopAndAfterACrash) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 36);
  const std::uint32_t victim = 1;
  const std::uint32_t n = array->member_count();
  const std::string path = extra_path(0);
  ASSERT_TRUE(array->start_replace(victim, std::move(extra_[0])).is_ok());
  std::atomic<bool> stop{false};
  RebuildControl control;
  control.stop = &stop;
  control.window_stripes = 4;
  control.bytes_per_second = 8u << 20;
  std::uint64_t reached = 0;
  {
    Traffic traffic(*array, model_, 37);
    std::thread stopper([&] {
      while (array->replace_progress()->copied_bytes < kMemberBytes * 2 / 3)
        std::this_thread::sleep_for(1ms);
      stop = true;
    });
    auto done = array->replace(control);
    stopper.join();
    ASSERT_TRUE(done.is_ok()) << done.status().to_string();
    EXPECT_FALSE(*done) << "stopped";
    reached = array->replace_progress()->copied_bytes;
    EXPECT_GE(reached, kMemberBytes * 2 / 3);
    EXPECT_EQ(array->member_slot(n)->rebuild_offset, reached);
    std::this_thread::sleep_for(100ms);  // writes below the checkpoint go to both meanwhile
    traffic.finish();
    EXPECT_EQ(traffic.errors(), 0u);
    EXPECT_EQ(traffic.mismatches(), 0u);
  }
  const std::uint64_t data_offset = array->member_data_offset();
  ASSERT_TRUE(array->stop().is_ok());
  array.reset();

  auto assemble = [&](bool clean) {
    std::vector<std::unique_ptr<MemberDevice>> devs;
    for (std::uint32_t m = 0; m < n; ++m)
      devs.push_back(std::move(*open_member(files_.paths[m], {})));
    devs.push_back(std::move(*open_member(path, {})));
    AssembleReport report;
    auto a = Array::assemble(std::move(devs), options(), {}, &report);
    EXPECT_TRUE(a.is_ok()) << a.status().to_string();
    EXPECT_EQ(report.was_clean, clean);
    return a.is_ok() ? std::move(*a) : nullptr;
  };
  array = assemble(true);
  ASSERT_TRUE(array);
  auto progress = array->replace_progress();
  ASSERT_TRUE(progress) << "a clean stop keeps the replace";
  EXPECT_EQ(progress->member, victim);
  EXPECT_EQ(progress->path, path);
  EXPECT_EQ(progress->copied_bytes, reached) << "resumes at the checkpoint recorded at the stop";
  verify(*array, "assembled with the replace pending");

  // Writes to the second bitmap region (1 MiB of member data; below the checkpoint), then a crash.
  // The new device is then made to hold what a torn write could leave there.
  const std::uint64_t strip = array->geometry().strip_bytes();
  const std::uint64_t region = 1u << 20;
  const std::uint64_t first_stripe = region / strip;
  const std::uint64_t at = first_stripe * array->geometry().stripe_data_bytes();
  const auto len = static_cast<std::uint32_t>(16 * array->geometry().stripe_data_bytes());
  {
    const std::vector<std::byte> fresh = random_bytes(len, 38);
    std::copy(fresh.begin(), fresh.end(), model_.begin() + static_cast<std::ptrdiff_t>(at));
    auto ctx = std::move(*IoContext::create(8));
    auto queue = std::move(*array->attach(*ctx));
    auto buf = std::move(*AlignedBuffer::allocate(len, 4096));
    std::memcpy(buf.data(), fresh.data(), len);
    ASSERT_TRUE(run_one(*queue, IoKind::kWrite, at, len, buf.data()).is_ok());
  }
  array.reset();  // a crash: nothing marks it clean, the region's bit stays set
  {
    auto junk_dev = open_member(path, {});
    ASSERT_TRUE(junk_dev.is_ok());
    auto junk = std::move(*AlignedBuffer::allocate(16 * strip, 4096));
    std::memset(junk.data(), 0xA5, junk.size());
    ASSERT_TRUE((*junk_dev)->write_sync(data_offset + region, junk.span()).is_ok());
  }
  array = assemble(false);
  ASSERT_TRUE(array);
  progress = array->replace_progress();
  ASSERT_TRUE(progress) << "a crash keeps the replace";
  EXPECT_LE(progress->copied_bytes, region) << "copied again from below the dirty region";
  verify(*array, "assembled after the crash");

  {
    Traffic traffic(*array, model_, 39);
    RebuildControl rest;
    rest.window_stripes = 8;
    auto done = array->replace(rest);
    traffic.finish();
    ASSERT_TRUE(done.is_ok()) << done.status().to_string();
    EXPECT_TRUE(*done);
    EXPECT_EQ(traffic.errors(), 0u);
    EXPECT_EQ(traffic.mismatches(), 0u);
  }
  EXPECT_FALSE(array->replace_progress());
  EXPECT_EQ(array->member_slot(victim)->path, path);
  EXPECT_EQ(array->member_slots().size(), n) << "the slot it held is gone with the swap";
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
  fail_others(*array, victim);
  verify(*array, "resumed replace, the others failed");
}

// Item 6 of the resilience review: stop() flushed the roles, cleared the write-intent bits, and
// only then flushed the hot replacement, which takes its role's writes too. A power cut between
// the two took writes from the replacement below its copy's checkpoint and left no bit to say so:
// the assembly after it resumed the copy above them, and the swap put a stale copy in the role.
TEST_P(ArrayHotReplaceTest, StopFlushesTheReplacementBeforeAnyBitIsCleared) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 45);
  const std::uint32_t victim = 1;
  const std::uint32_t n = array->member_count();
  const std::string path = extra_path(0);
  FaultyMember* copy_drive = extra_faulty(0);
  auto gate = std::make_shared<MetadataGate>();
  ASSERT_TRUE(array->start_replace(victim, std::make_unique<GateMember>(std::move(extra_[0]), gate))
                  .is_ok());
  std::atomic<bool> stop{false};
  RebuildControl control;
  control.stop = &stop;
  control.window_stripes = 4;
  control.bytes_per_second = 8u << 20;
  std::thread stopper([&] {
    while (array->replace_progress()->copied_bytes < kMemberBytes * 2 / 3)
      std::this_thread::sleep_for(1ms);
    stop = true;
  });
  auto done = array->replace(control);
  stopper.join();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  ASSERT_FALSE(*done) << "stopped";
  // Writes below the checkpoint: they go to the replacement too, and are not flushed there yet.
  const std::uint64_t at = ((1u << 20) / kStrip) * array->geometry().stripe_data_bytes();
  const auto len = static_cast<std::uint32_t>(16 * array->geometry().stripe_data_bytes());
  {
    const std::vector<std::byte> fresh = random_bytes(len, 46);
    std::copy(fresh.begin(), fresh.end(), model_.begin() + static_cast<std::ptrdiff_t>(at));
    auto ctx = std::move(*IoContext::create(8));
    auto queue = std::move(*array->attach(*ctx));
    auto buf = std::move(*AlignedBuffer::allocate(len, 4096));
    std::memcpy(buf.data(), fresh.data(), len);
    ASSERT_TRUE(run_one(*queue, IoKind::kWrite, at, len, buf.data()).is_ok());
  }
  ASSERT_GT(copy_drive->unflushed_writes(), 0u);
  // The power goes while stop() waits for the replacement's flush.
  gate->arm([](std::uint64_t offset) { return offset == kFlushOffset; });
  std::thread stopping([&] { (void)array->stop(); });
  ASSERT_TRUE(gate->wait_for_held(1, 20s)) << "stop() flushes the replacement";
  std::this_thread::sleep_for(50ms);  // the roles' flushes, issued with it, finish
  std::mt19937_64 rng(47);
  for (std::uint32_t m = 0; m < n; ++m)
    ASSERT_TRUE(files_.faulty[m]->power_loss(rng, PowerLossPolicy::kLoseAll).is_ok());
  ASSERT_TRUE(copy_drive->power_loss(rng, PowerLossPolicy::kLoseAll).is_ok());
  gate->open();
  stopping.join();
  array.reset();

  std::vector<std::unique_ptr<MemberDevice>> devs;
  for (std::uint32_t m = 0; m < n; ++m)
    devs.push_back(std::move(*open_member(files_.paths[m], {})));
  devs.push_back(std::move(*open_member(path, {})));
  AssembleReport report;
  auto again = Array::assemble(std::move(devs), options(), {}, &report);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_FALSE(report.was_clean) << "the power went before stop() marked it clean";
  ASSERT_TRUE((*again)->replace_progress()) << "the replace resumes";
  auto finished = (*again)->replace(RebuildControl{});
  ASSERT_TRUE(finished.is_ok()) << finished.status().to_string();
  EXPECT_TRUE(*finished);
  EXPECT_EQ((*again)->member_slot(victim)->path, path);
  fail_others(**again, victim);
  verify(**again, "replace resumed after a power cut in stop(), the others failed");
}

// A recorded replace whose role is gone at assembly does not resume: the record is dropped and
// the device stays a hot spare, which the failed role can take.
TEST_P(ArrayHotReplaceTest, RecordWithoutItsRoleLeavesTheDeviceASpare) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 40);
  const std::uint32_t victim = 0;
  const std::uint32_t n = array->member_count();
  ASSERT_TRUE(array->start_replace(victim, std::move(extra_[0])).is_ok());
  ASSERT_TRUE(array->stop().is_ok());
  array.reset();
  std::vector<std::unique_ptr<MemberDevice>> devs;
  for (std::uint32_t m = 1; m < n; ++m)
    devs.push_back(std::move(*open_member(files_.paths[m], {})));
  devs.push_back(std::move(*open_member(extra_path(0), {})));
  AssembleOptions degraded;
  degraded.allow_degraded = true;
  auto again = Array::assemble(std::move(devs), options(), degraded);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_FALSE((*again)->replace_progress());
  EXPECT_EQ((*again)->member_slot(n)->state, MemberSlotState::kSpare);
  EXPECT_EQ((*again)->member_slot(n)->path, extra_path(0));
  ASSERT_TRUE((*again)->take_spare(victim).is_ok());
  auto rebuilt = (*again)->rebuild();
  ASSERT_TRUE(rebuilt.is_ok()) << rebuilt.status().to_string();
  EXPECT_TRUE(*rebuilt);
  fail_others(**again, victim);
  verify(**again, "the spare rebuilt into the role");
}

INSTANTIATE_TEST_SUITE_P(Levels, ArrayHotReplaceTest,
                         ::testing::Values(LevelShape{RaidLevel::kRaid1, 2},
                                           LevelShape{RaidLevel::kRaid10, 4},
                                           LevelShape{RaidLevel::kRaid5, 4},
                                           LevelShape{RaidLevel::kRaid6, 5}),
                         level_shape_name);

// Item 5 of the resilience review: a resumed copy is paced from where it resumed, and a stop
// ends its sleep at once. The pace counted from 0 while it was fed the resumed position, so a copy
// resumed at 64 MiB under a 4 MB/s cap slept about 17 s after its first window, deaf to the stop
// flag (graidd joins the job's thread: SIGTERM waited that long; at a normal speed, a copy
// resumed far into a large drive slept for hours).
TEST(ArrayHotReplaceResumeTest, ResumedCopyIsPacedFromItsCheckpointAndStopsAtOnce) {
  constexpr std::uint64_t kBytes = 72u << 20;
  constexpr std::uint64_t kResumeAt = 64u << 20;
  ArrayFiles files;
  auto devs = files.open(3, kBytes, true);
  ASSERT_TRUE(devs.is_ok()) << devs.status().to_string();
  std::unique_ptr<MemberDevice> replacement = std::move(devs->back());
  devs->pop_back();
  CreateOptions c;
  c.level = RaidLevel::kRaid1;
  c.strip_bytes = 64u << 10;
  c.name = "resume";
  auto array = Array::create(std::move(*devs), c, ArrayOptions{});
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  ASSERT_TRUE((*array)->start_replace(0, std::move(replacement)).is_ok());
  std::atomic<bool> stop{false};
  RebuildControl control;
  control.stop = &stop;
  // Slow enough (about 0.5 s to kResumeAt) for the stopper to catch the copy before its end.
  control.window_stripes = 16;
  control.bytes_per_second = 128'000'000;
  std::thread stopper([&] {
    while ((*array)->replace_progress()->copied_bytes < kResumeAt)
      std::this_thread::sleep_for(1ms);
    stop = true;
  });
  auto done = (*array)->replace(control);
  stopper.join();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  ASSERT_FALSE(*done) << "stopped";
  const std::uint64_t reached = (*array)->replace_progress()->copied_bytes;
  ASSERT_GE(reached, kResumeAt);

  // Resumed under a 4 MB/s cap with 1 MiB windows: a quarter of a second per window.
  stop = false;
  control.bytes_per_second = 4'000'000;
  control.window_stripes = 16;
  std::chrono::steady_clock::time_point asked;
  std::thread late_stopper([&] {
    std::this_thread::sleep_for(300ms);  // a window or two copied, the pace asleep
    asked = std::chrono::steady_clock::now();
    stop = true;
  });
  done = (*array)->replace(control);
  const auto returned = std::chrono::steady_clock::now();
  late_stopper.join();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_FALSE(*done) << "stopped again";
  EXPECT_GT((*array)->replace_progress()->copied_bytes, reached) << "it copied on from there";
  EXPECT_LT(returned - asked, 5s) << "the stop was not seen during the pace's sleep";
}

TEST(ArrayHotReplaceRaid0Test, IsRefused) {
  ArrayFiles files;
  auto devs = files.open(3, std::uint64_t{6} << 20, true);
  ASSERT_TRUE(devs.is_ok());
  auto spare = std::move(devs->back());
  devs->pop_back();
  CreateOptions c;
  c.level = RaidLevel::kRaid0;
  c.strip_bytes = 4096;
  auto array = Array::create(std::move(*devs), c, {});
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  EXPECT_EQ((*array)->start_replace(0, std::move(spare)).code(), Errc::kUnsupported);
  EXPECT_FALSE((*array)->replace_progress());
}

}  // namespace
}  // namespace graid::testing
