// Hot replace of a working member (Array::start_replace, replace) for RAID1, RAID10, RAID5 and
// RAID6, with randomized reads and writes checked byte for byte against a model all the while.
// After the swap the new device holds the role (a new member UUID), the old one carries no
// superblock, the array is optimal and consistent, and it serves every byte with the *other*
// members failed, so the copy, and every write that went to it during the copy, is what answers;
// it also assembles from the new set of devices. A replacement that fails a write, a member that
// fails during the copy and a stop each give the replace up with the array unharmed. Refusals
// change nothing.
#include <algorithm>
#include <cstring>

#include "array_harness.h"
#include "array_traffic.h"

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

TEST_P(ArrayHotReplaceTest, StopGivesItUpAndRefusalsChangeNothing) {
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

  const std::string path0 = extra_path(0);
  ASSERT_TRUE(array->start_replace(0, std::move(extra_[0])).is_ok());
  std::atomic<bool> stop{true};
  RebuildControl control;
  control.stop = &stop;
  auto done = array->replace(control);
  ASSERT_TRUE(done.is_ok());
  EXPECT_FALSE(*done) << "stopped";
  EXPECT_FALSE(array->replace_progress());
  EXPECT_EQ(array->member_slot(0)->path, files_.paths[0]);
  // Given up: the same file can be used again, and a pending replace can be cancelled.
  auto back = open_member(path0, {});
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  ASSERT_TRUE(array->start_replace(0, std::move(*back)).is_ok());
  EXPECT_TRUE(array->cancel_replace());
  EXPECT_FALSE(array->cancel_replace());
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
  verify(*array, "after the stop");
}

INSTANTIATE_TEST_SUITE_P(Levels, ArrayHotReplaceTest,
                         ::testing::Values(LevelShape{RaidLevel::kRaid1, 2},
                                           LevelShape{RaidLevel::kRaid10, 4},
                                           LevelShape{RaidLevel::kRaid5, 4},
                                           LevelShape{RaidLevel::kRaid6, 5}),
                         level_shape_name);

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
