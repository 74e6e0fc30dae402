// graidd/device_signatures.h on files made by the real tools (mkfs.ext4, mkswap, sfdisk): what is
// found and said, that a wipe touches exactly the bytes of the magics found (the GPT backup
// header and protective MBR included), and that graid's own metadata is not taken for anything.
#include "graidd/device_signatures.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "graid/array.h"
#include "graid/member.h"
#include "temp_dir.h"

namespace graid::testing {
namespace {

using daemon::describe_signatures;
using daemon::DeviceSignature;
using daemon::probe_signatures;
using daemon::wipe_signatures;

constexpr std::uint64_t kBytes = 64u << 20;

bool have(const char* tool) {
  return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0;
}

int sh(const std::string& command) {
  return std::system(command.c_str());
}

std::string sparse_file(const TempDir& dir, const std::string& name) {
  const std::string path = dir.file(name);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(kBytes)), 0);
  ::close(fd);
  return path;
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The offsets where `a` and `b` differ, as [first, last] runs.
std::vector<std::pair<std::size_t, std::size_t>> differing_runs(const std::string& a,
                                                                const std::string& b) {
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i] == b[i]) continue;
    if (!runs.empty() && runs.back().second + 1 == i)
      runs.back().second = i;
    else
      runs.emplace_back(i, i);
  }
  return runs;
}

TEST(DeviceSignatures, ABlankFileAndGraidsOwnMetadataHoldNone) {
  TempDir dir;
  const std::string blank = sparse_file(dir, "blank");
  auto none = probe_signatures(blank);
  ASSERT_TRUE(none.is_ok()) << none.status().to_string();
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(describe_signatures(blank, *none), "");
  // A RAID1's members: graid's superblock, bitmap and data area are nothing libblkid knows.
  std::vector<std::unique_ptr<MemberDevice>> members;
  for (const char* name : {"m0", "m1"})
    members.push_back(std::move(*open_member(sparse_file(dir, name))));
  CreateOptions c;
  c.level = RaidLevel::kRaid1;
  auto array = Array::create(std::move(members), c, ArrayOptions{});
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  ASSERT_TRUE((*array)->stop().is_ok());
  array->reset();
  for (const char* name : {"m0", "m1"}) {
    auto found = probe_signatures(dir.file(name));
    ASSERT_TRUE(found.is_ok()) << found.status().to_string();
    EXPECT_TRUE(found->empty()) << describe_signatures(dir.file(name), *found);
  }
}

TEST(DeviceSignatures, AnExt4FilesystemIsNamedWithItsLabelUuidAndPlace) {
  if (!have("mkfs.ext4")) GTEST_SKIP() << "mkfs.ext4 not installed (Debian: e2fsprogs)";
  TempDir dir;
  const std::string path = sparse_file(dir, "ext4");
  const std::string uuid = "0b7a2f36-5e31-4f7c-9a55-3a3c3e1d2f10";
  ASSERT_EQ(sh("mkfs.ext4 -q -F -L data -U " + uuid + " '" + path + "'"), 0);
  auto found = probe_signatures(path);
  ASSERT_TRUE(found.is_ok()) << found.status().to_string();
  ASSERT_EQ(found->size(), 1u) << describe_signatures(path, *found);
  EXPECT_EQ((*found)[0], (DeviceSignature{"ext4", "filesystem", "data", uuid, 1080}));
  EXPECT_EQ(describe_signatures(path, *found),
            path + " holds an ext4 filesystem (label \"data\", UUID " + uuid + ", at byte 1080)");
  const std::string before = bytes_of(path);
  auto wiped = wipe_signatures(path);
  ASSERT_TRUE(wiped.is_ok()) << wiped.status().to_string();
  EXPECT_EQ(*wiped, *found);
  EXPECT_TRUE(probe_signatures(path)->empty());
  // Only the magic's two bytes changed.
  const auto runs = differing_runs(before, bytes_of(path));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0], (std::pair<std::size_t, std::size_t>{1080, 1081}));
}

TEST(DeviceSignatures, SwapSpaceIsFound) {
  if (!have("mkswap")) GTEST_SKIP() << "mkswap not installed (Debian: util-linux)";
  TempDir dir;
  const std::string path = sparse_file(dir, "swap");
  ASSERT_EQ(sh("mkswap -q '" + path + "' >/dev/null"), 0);
  auto found = probe_signatures(path);
  ASSERT_TRUE(found.is_ok());
  ASSERT_EQ(found->size(), 1u);
  EXPECT_EQ((*found)[0].type, "swap");
  EXPECT_NE(describe_signatures(path, *found).find("holds swap space (UUID "), std::string::npos)
      << describe_signatures(path, *found);
}

// A GPT disk: the primary header is what libblkid names; the wipe takes the primary, the backup
// header in the last block and the protective MBR's boot signature, and nothing else. A disk
// whose start was overwritten still holds a partition table in its backup header, which is
// found (libblkid alone looks for it only behind a protective MBR) and wiped.
TEST(DeviceSignatures, AGptTableIsFoundAndWipedWithItsBackupHeader) {
  if (!have("sfdisk")) GTEST_SKIP() << "sfdisk not installed (Debian: fdisk)";
  TempDir dir;
  const std::string path = sparse_file(dir, "gpt");
  ASSERT_EQ(sh("printf 'label: gpt\\n,10M\\n,\\n' | sfdisk -q '" + path + "' >/dev/null"), 0);
  auto found = probe_signatures(path);
  ASSERT_TRUE(found.is_ok());
  ASSERT_FALSE(found->empty());
  EXPECT_EQ((*found)[0], (DeviceSignature{"gpt", "partition table", "", "", 512}));
  EXPECT_NE(describe_signatures(path, *found).find("holds a gpt partition table (at byte 512)"),
            std::string::npos)
      << describe_signatures(path, *found);

  const std::string before = bytes_of(path);
  auto wiped = wipe_signatures(path);
  ASSERT_TRUE(wiped.is_ok()) << wiped.status().to_string();
  EXPECT_TRUE(probe_signatures(path)->empty());
  using Run = std::pair<std::size_t, std::size_t>;
  // The boot signature (510..511) and the primary's magic (512..519) touch: one run.
  EXPECT_EQ(differing_runs(before, bytes_of(path)),
            (std::vector<Run>{{510, 519}, {kBytes - 512, kBytes - 512 + 7}}));
  std::vector<std::uint64_t> offsets;
  for (const auto& s : *wiped)
    offsets.push_back(s.offset);
  std::sort(offsets.begin(), offsets.end());
  EXPECT_EQ(offsets, (std::vector<std::uint64_t>{510, 512, kBytes - 512}));

  // The start overwritten (as a graid superblock would), the backup header left.
  const std::string backup_only = dir.file("backup-only");
  {
    std::ofstream out(backup_only, std::ios::binary);
    std::string b = before;
    std::fill(b.begin(), b.begin() + 4096, '\0');
    out << b;
  }
  auto backup = probe_signatures(backup_only);
  ASSERT_TRUE(backup.is_ok());
  ASSERT_EQ(backup->size(), 1u) << describe_signatures(backup_only, *backup);
  EXPECT_EQ((*backup)[0], (DeviceSignature{"gpt", "partition table", "", "", kBytes - 512}));
  auto wiped_backup = wipe_signatures(backup_only);
  ASSERT_TRUE(wiped_backup.is_ok()) << wiped_backup.status().to_string();
  EXPECT_EQ(*wiped_backup, *backup);
  EXPECT_TRUE(probe_signatures(backup_only)->empty());
}

TEST(DeviceSignatures, AMissingDeviceIsAnError) {
  auto found = probe_signatures("/nonexistent-graid-device");
  ASSERT_FALSE(found.is_ok());
  EXPECT_EQ(found.status().code(), Errc::kIoError);
}

}  // namespace
}  // namespace graid::testing
