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
  const std::uint64_t flags = ublk_owner_flags(0x1234, owner);
  EXPECT_EQ(ublk_owner_of(flags, 0x1234), owner);
  EXPECT_EQ(ublk_owner_of(flags, 0x1235), std::nullopt) << "another graidd's device";
  EXPECT_EQ(ublk_owner_of(0, 0x1234), std::nullopt) << "a device of a server that sets no flags";
  EXPECT_EQ(ublk_owner_of(flags ^ (std::uint64_t{1} << 60), 0x1234), std::nullopt)
      << "another server's flags that happen to carry our instance";
  // Ids at the edge of the 16-bit fields.
  EXPECT_EQ(ublk_owner_of(ublk_owner_flags(0, {0xfffe, 0}), 0), (UblkOwner{0xfffe, 0}));
  EXPECT_EQ(ublk_owner_of(ublk_owner_flags(0xffff, {0, 0xfffe}), 0xffff), (UblkOwner{0, 0xfffe}));
}

TEST(UblkOwnerTest, IdsThatDoNotFitAreNotAttributed) {
  // Never taken for another DG's or VD's device: an id that does not fit is no id.
  EXPECT_EQ(ublk_owner_of(ublk_owner_flags(1, {0x10000, 2}), 1), std::nullopt);
  EXPECT_EQ(ublk_owner_of(ublk_owner_flags(1, {2, 0x10002}), 1), std::nullopt);
  EXPECT_EQ(ublk_owner_of(ublk_owner_flags(1, {kUnrecordedId, 2}), 1), std::nullopt);
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
