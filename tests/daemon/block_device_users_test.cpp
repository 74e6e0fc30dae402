// Who holds a device graidd is asked to take away (graidd/block_device_users.h): mounts, stacked
// devices, swap and open file descriptors, read from a fake /proc and /sys tree, and the real
// /proc for a file this test process holds open.
#include "graidd/block_device_users.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace graid::daemon {
namespace {

namespace fs = std::filesystem;

// A block device's numbers without the device: what stat(2) says of /dev/ublkb3 (259:7).
struct stat block_device(unsigned maj, unsigned min) {
  struct stat st {};
  st.st_mode = S_IFBLK | 0660;
  st.st_rdev = makedev(maj, min);
  return st;
}

class FakeTree {
 public:
  FakeTree() {
    fs::create_directories(proc() + "/self");
    fs::create_directories(sys());
  }
  std::string proc() const { return dir_.file("proc"); }
  std::string sys() const { return dir_.file("sys"); }
  DeviceUsersRoots roots() const { return {proc(), sys(), /*exclusive_probe=*/false}; }
  void write(const std::string& path, const std::string& text) const {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }

 private:
  testing::TempDir dir_;
};

TEST(BlockDeviceUsersTest, NamesTheMountPointsOfTheDeviceAndNoOther) {
  FakeTree t;
  t.write(t.proc() + "/self/mountinfo",
          "22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw\n"
          "36 22 259:7 / /mnt/my\\040data rw,relatime shared:9 - xfs /dev/ublkb3 rw\n"
          "37 22 259:7 /sub /srv/bind rw shared:9 - xfs /dev/ublkb3 rw\n"
          "38 22 259:70 / /mnt/other rw - ext4 /dev/ublkb30 rw\n");
  const auto users = device_users(block_device(259, 7), "/dev/ublkb3", t.roots());
  EXPECT_EQ(users, (std::vector<std::string>{"mounted at /mnt/my data (xfs)",
                                             "mounted at /srv/bind (xfs)"}));
  EXPECT_TRUE(device_users(block_device(259, 8), "/dev/ublkb4", t.roots()).empty());
}

TEST(BlockDeviceUsersTest, NamesTheDevicesStackedOnIt) {
  FakeTree t;
  fs::create_directories(t.sys() + "/dev/block/259:7/holders/dm-0");
  fs::create_directories(t.sys() + "/dev/block/259:8/holders");
  EXPECT_EQ(device_users(block_device(259, 7), "/dev/ublkb3", t.roots()),
            std::vector<std::string>{"held by dm-0"});
  EXPECT_TRUE(device_users(block_device(259, 8), "/dev/ublkb4", t.roots()).empty());
}

TEST(BlockDeviceUsersTest, NamesSwapOnTheDevice) {
  FakeTree t;
  testing::TempDir d;
  const std::string area = d.file("swap area");
  std::ofstream(area) << "x";
  const std::string escaped = d.file("swap\\040area");
  t.write(t.proc() + "/swaps", "Filename Type Size Used Priority\n" + escaped +
                                   " file 1024 0 -2\n/nonexistent partition 4 0 -3\n");
  struct stat st {};
  ASSERT_EQ(::stat(area.c_str(), &st), 0);
  EXPECT_EQ(device_users(st, area, t.roots()), std::vector<std::string>{"used as swap"});
}

TEST(BlockDeviceUsersTest, NamesEachProcessThatHasItOpenOnce) {
  FakeTree t;
  testing::TempDir d;
  const std::string device = d.file("device");
  const std::string other = d.file("other");
  std::ofstream(device) << "x";
  std::ofstream(other) << "y";
  // pid 4242 has it open twice, 77 has another file, 5 has it once without a comm; "self" and
  // non-numeric entries are not processes.
  fs::create_directories(t.proc() + "/4242/fd");
  fs::create_symlink(device, t.proc() + "/4242/fd/3");
  fs::create_symlink(device, t.proc() + "/4242/fd/9");
  t.write(t.proc() + "/4242/comm", "fio\n");
  fs::create_directories(t.proc() + "/77/fd");
  fs::create_symlink(other, t.proc() + "/77/fd/3");
  fs::create_directories(t.proc() + "/5/fd");
  fs::create_symlink(device, t.proc() + "/5/fd/0");
  fs::create_directories(t.proc() + "/self/fd");
  fs::create_symlink(device, t.proc() + "/self/fd/3");
  auto users = block_device_users(device, t.roots());
  ASSERT_TRUE(users.is_ok()) << users.status().to_string();
  std::sort(users->begin(), users->end());
  EXPECT_EQ(*users, (std::vector<std::string>{"open in pid 4242 (fio)", "open in pid 5"}));
}

TEST(BlockDeviceUsersTest, SeesThisProcessHoldingAFileOpenInTheRealProc) {
  testing::TempDir d;
  const std::string device = d.file("device");
  std::ofstream(device) << "x";
  const std::string me = fmt::format("open in pid {}", ::getpid());
  DeviceUsersRoots real;
  real.exclusive_probe = false;
  auto before = block_device_users(device, real);
  ASSERT_TRUE(before.is_ok());
  EXPECT_FALSE(std::any_of(before->begin(), before->end(),
                           [&](const std::string& u) { return u.starts_with(me); }));
  const int fd = ::open(device.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto during = block_device_users(device, real);
  ::close(fd);
  ASSERT_TRUE(during.is_ok());
  EXPECT_TRUE(std::any_of(during->begin(), during->end(), [&](const std::string& u) {
    return u.starts_with(me);
  })) << fmt::format("{}", fmt::join(*during, "; "));
}

TEST(BlockDeviceUsersTest, APathThatIsNotThereIsAnErrorNotAnAnswer) {
  auto users = block_device_users("/nonexistent/ublkb9");
  ASSERT_FALSE(users.is_ok());
  EXPECT_EQ(users.status().code(), Errc::kNotFound);
  EXPECT_NE(users.status().message().find("/nonexistent/ublkb9"), std::string::npos);
}

TEST(BlockDeviceUsersTest, SyncSaysWhichStepFailed) {
  testing::TempDir d;
  const std::string file = d.file("device");
  std::ofstream(file) << "x";
  EXPECT_TRUE(sync_block_device(file, /*mounts=*/true).is_ok());
  const Status gone = sync_block_device(d.file("gone"), /*mounts=*/true);
  ASSERT_FALSE(gone.is_ok());
  EXPECT_EQ(gone.code(), Errc::kIoError);
  EXPECT_NE(gone.message().find("fsync " + d.file("gone")), std::string::npos) << gone.message();
}

}  // namespace
}  // namespace graid::daemon
