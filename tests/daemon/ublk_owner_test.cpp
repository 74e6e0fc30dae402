// The owner tag graidd writes into every ublk device it adds (graidd/ublk_owner.h), and the list
// of ublk devices read from sysfs, against a fake /sys tree.
#include "graidd/ublk_owner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "temp_dir.h"

namespace graid::daemon {
namespace {

namespace fs = std::filesystem;

TEST(UblkOwnerTest, TagRoundTripsForItsOwnInstanceOnly) {
  const UblkOwner owner{3, 7};
  const std::uint64_t flags = ublk_owner_flags(0x12345678, owner);
  EXPECT_EQ(ublk_owner_of(flags, 0x12345678, 0), owner);
  EXPECT_EQ(ublk_owner_of(flags, 0x12345679, 0), std::nullopt) << "another graidd's device";
  EXPECT_EQ(ublk_owner_of(flags, 0x92345678, 0), std::nullopt) << "all 32 bits of the instance";
  EXPECT_EQ(ublk_owner_of(0, 0x12345678, 0), std::nullopt) << "a server that sets no flags";
  EXPECT_EQ(ublk_owner_of(flags ^ (std::uint64_t{1} << 60), 0x12345678, 0), std::nullopt)
      << "another server's flags that happen to carry our instance";
  // Ids at the edge of their fields.
  EXPECT_EQ(ublk_owner_of(ublk_owner_flags(0, {kMaxTaggedDg, 0}), 0, 0),
            (UblkOwner{kMaxTaggedDg, 0}));
  EXPECT_EQ(ublk_owner_of(ublk_owner_flags(0xffffffff, {0, kMaxTaggedVd}), 0xffffffff, 0),
            (UblkOwner{0, kMaxTaggedVd}));
}

TEST(UblkOwnerTest, IdsThatDoNotFitAreNotAttributed) {
  // Never taken for another DG's or VD's device: an id that does not fit is no id.
  EXPECT_EQ(ublk_owner_of(ublk_owner_flags(1, {kMaxTaggedDg + 1, 2}), 1, 0), std::nullopt);
  EXPECT_EQ(ublk_owner_of(ublk_owner_flags(1, {2, kMaxTaggedVd + 1}), 1, 0), std::nullopt);
  EXPECT_EQ(ublk_owner_of(ublk_owner_flags(1, {0x10002, 2}), 1, 0), std::nullopt);
}

// Issue 48 item 5: the previous build's tag (magic "GR", a 16-bit hash of the state dir's path,
// DG and VD 16 bits each) is still read with that hash, so its devices are taken back after an
// upgrade; and only with it.
TEST(UblkOwnerTest, ThePreviousBuildsTagIsReadWithItsStateDirHash) {
  const std::uint64_t legacy =
      std::uint64_t{0x4752} << 48 | std::uint64_t{0xbeef} << 32 | std::uint64_t{5} << 16 | 2;
  EXPECT_EQ(ublk_owner_of(legacy, 0x12345678, 0xbeef), (UblkOwner{5, 2}));
  EXPECT_EQ(ublk_owner_of(legacy, 0x12345678, 0xbeee), std::nullopt);
  EXPECT_EQ(ublk_owner_of(legacy | 0xffff, 0x12345678, 0xbeef), std::nullopt) << "unrecorded";
  // The new tag is never read as the old one, nor the old as the new.
  EXPECT_EQ(ublk_owner_of(ublk_owner_flags(0xbeef, {5, 2}), 0, 0xbeef), std::nullopt);
}

// The instance id: made at first start, 32 random bits in the state dir, the same at every later
// start; two state dirs at the same path (two containers) get different ones.
TEST(UblkOwnerTest, TheInstanceIdIsMadeOnceAndKeptInTheStateDir) {
  testing::TempDir dir;
  const std::string state = dir.path() + "/state";
  fs::create_directories(state);
  auto first = load_or_make_instance_id(state);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_EQ(fs::status(state + "/instance-id").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(*load_or_make_instance_id(state), *first) << "kept";
  // Another state dir at the same path.
  fs::rename(state, dir.path() + "/old-state");
  fs::create_directories(state);
  auto second = load_or_make_instance_id(state);
  ASSERT_TRUE(second.is_ok());
  EXPECT_NE(*second, *first) << "32 random bits: equal once in four billion";
  // A damaged file is refused, not replaced (the devices carry the id it held).
  std::ofstream(state + "/instance-id") << "not hex\n";
  EXPECT_EQ(load_or_make_instance_id(state).status().code(), Errc::kCorrupt);
}

// Whatever its tag says, a device is taken for ours only when graidd's user made it and it is
// not an unprivileged device.
TEST(UblkOwnerTest, OnlyDevicesOfGraiddsUserMayBeOurs) {
  ublk::DevInfo info{};
  info.owner_uid = 0;
  EXPECT_TRUE(ublk_device_may_be_ours(info, 0).is_ok());
  info.owner_uid = 1000;
  EXPECT_EQ(ublk_device_may_be_ours(info, 0).code(), Errc::kBusy);
  info.owner_uid = 0;
  info.flags = ublk::kFlagUnprivileged;
  EXPECT_EQ(ublk_device_may_be_ours(info, 0).code(), Errc::kBusy);
}

TEST(UblkOwnerTest, StateDirTagIsTheCanonicalPaths) {
  testing::TempDir dir;
  fs::create_directories(dir.path() + "/a/state");
  fs::create_directories(dir.path() + "/b");
  const std::uint16_t tag = state_dir_tag(dir.path() + "/a/state");
  EXPECT_EQ(state_dir_tag(dir.path() + "/a/state"), tag) << "stable";
  EXPECT_EQ(state_dir_tag(dir.path() + "/a/./state/"), tag) << "one dir, however it is spelt";
  EXPECT_EQ(state_dir_tag(dir.path() + "/b/../a/state"), tag);
  fs::create_directory_symlink(dir.path() + "/a/state", dir.path() + "/link");
  EXPECT_EQ(state_dir_tag(dir.path() + "/link"), tag) << "through a symlink";
  // Different dirs get different tags (for these two; 16 bits cannot promise it for all).
  EXPECT_NE(state_dir_tag(dir.path() + "/b"), tag);
  // A dir that does not exist yet (graidd creates it) is hashed as given.
  EXPECT_EQ(state_dir_tag(dir.path() + "/new"), state_dir_tag(dir.path() + "/new"));
}

TEST(UblkOwnerTest, ListsTheUblkCharDevicesInSysfs) {
  testing::TempDir sys;
  EXPECT_TRUE(list_ublk_devices(sys.path()).empty()) << "no ublk_drv: no class dir";
  const std::string cls = sys.path() + "/class/ublk-char";
  fs::create_directories(cls);
  EXPECT_TRUE(list_ublk_devices(sys.path()).empty());
  for (const char* name : {"ublkc12", "ublkc0", "ublkc3", "ublkcx", "ublkc", "ublkb4", "ublkc5a"})
    fs::create_directory(cls + "/" + name);
  EXPECT_EQ(list_ublk_devices(sys.path()), (std::vector<std::uint32_t>{0, 3, 12}));
}

}  // namespace
}  // namespace graid::daemon
