// Assembly on real drives (issue 8): interrupted superblock updates never strand an array, a
// split brain is refused, a dirty degraded RAID5/6 is refused, the same storage under two names
// is refused, and short members fail alone instead of blocking assembly.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "array_harness.h"

namespace graid::testing {
namespace {

constexpr std::uint64_t kMemberBytes = 4u << 20;

struct LevelShape {
  RaidLevel level;
  std::uint32_t members;
};

std::vector<std::byte> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(raw.size());
  std::memcpy(out.data(), raw.data(), raw.size());
  return out;
}

void put_bytes(const std::string& path, std::uint64_t offset, std::span<const std::byte> bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)),
            static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

class ArrayAssemblyTest : public ::testing::Test {
 protected:
  void SetUp() override { parity_ = std::move(*make_parity_backend("cpu")); }

  ArrayOptions options() {
    ArrayOptions o;
    o.parity = parity_.get();
    o.bitmap_clear_interval = std::chrono::milliseconds(0);  // every flush clears idle bits
    return o;
  }

  Result<std::unique_ptr<Array>> create(ArrayFiles& files, RaidLevel level, std::uint32_t n) {
    auto devs = files.open(n, kMemberBytes, true);
    if (!devs) return devs.status();
    CreateOptions c;
    c.level = level;
    c.strip_bytes = 4096;
    c.name = "asm";
    return Array::create(std::move(*devs), c, options());
  }

  // Opens `paths` (in that order) and assembles them.
  Result<std::unique_ptr<Array>> assemble(const std::vector<std::string>& paths,
                                          const AssembleOptions& a = {},
                                          AssembleReport* report = nullptr) {
    std::vector<std::unique_ptr<MemberDevice>> devs;
    for (const auto& p : paths) {
      auto d = open_member(p);
      if (!d) return d.status();
      devs.push_back(std::move(*d));
    }
    return Array::assemble(std::move(devs), options(), a, report);
  }

  // Writes `bytes` of a pattern at array offset 0 and flushes twice (the second flush clears
  // the bits the first one marked), returning the pattern.
  std::vector<std::byte> write_and_settle(Array& array, std::uint32_t bytes, std::uint64_t seed) {
    auto ctx = IoContext::create(64);
    auto queue = array.attach(**ctx);
    auto buf = AlignedBuffer::allocate(bytes, 4096);
    std::mt19937_64 rng(seed);
    for (std::size_t i = 0; i < bytes; ++i)
      buf->data()[i] = static_cast<std::byte>(rng());
    EXPECT_TRUE(run_one(**queue, IoKind::kWrite, 0, bytes, buf->data()).is_ok());
    for (int i = 0; i < 2; ++i)
      EXPECT_TRUE(run_one(**queue, IoKind::kFlush, 0, 0, nullptr).is_ok());
    return std::vector<std::byte>(buf->data(), buf->data() + bytes);
  }

  std::vector<std::byte> read_back(Array& array, std::uint32_t bytes) {
    auto ctx = IoContext::create(64);
    auto queue = array.attach(**ctx);
    auto buf = AlignedBuffer::allocate(bytes, 4096);
    Status st = run_one(**queue, IoKind::kRead, 0, bytes, buf->data());
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    return std::vector<std::byte>(buf->data(), buf->data() + bytes);
  }

  std::unique_ptr<ParityBackend> parity_;
};

// Power lost in the middle of a superblock update leaves any subset of the members with the new
// superblock (they are written at once). Every such set of images must assemble with nothing
// lost: before, members one event behind were stale, so a RAID5 with two of them (or a RAID1
// whose only updated member was the failed one's mirror) would not assemble.
TEST_F(ArrayAssemblyTest, PowerLossAtEveryPointOfASuperblockUpdateStrandsNothing) {
  const LevelShape shapes[] = {{RaidLevel::kRaid0, 3},
                               {RaidLevel::kRaid1, 3},
                               {RaidLevel::kRaid10, 4},
                               {RaidLevel::kRaid5, 4},
                               {RaidLevel::kRaid6, 4}};
  for (const LevelShape& shape : shapes) {
    for (const bool fail_update : {false, true}) {
      if (fail_update && shape.level == RaidLevel::kRaid0) continue;
      SCOPED_TRACE(fmt::format("{} x{}, update: {}", raid_level_name(shape.level), shape.members,
                               fail_update ? "member failure" : "new VD"));
      ArrayFiles files;
      auto array = create(files, shape.level, shape.members);
      ASSERT_TRUE(array.is_ok()) << array.status().to_string();
      const std::uint32_t bytes = 96 * 1024;
      const auto data = write_and_settle(**array, bytes, 11);
      const std::uint32_t n = shape.members;
      std::vector<std::vector<std::byte>> before;
      for (const auto& p : files.paths)
        before.push_back(file_bytes(p));
      // The update: record a member failure, or a new VD.
      const std::uint32_t victim = n - 1;
      if (fail_update) {
        ASSERT_TRUE((*array)->fail_member(victim, "test").is_ok());
      } else {
        ASSERT_TRUE((*array)->create_vd("late", 1u << 20).is_ok());
      }
      std::vector<std::vector<std::byte>> after;
      for (const auto& p : files.paths)
        after.push_back(file_bytes(p));
      array->reset();  // the crash
      for (std::uint32_t mask = 0; mask < (1u << n); ++mask) {
        SCOPED_TRACE(fmt::format("members with the new superblock: mask {:#x}", mask));
        for (std::uint32_t m = 0; m < n; ++m) {
          const auto& image = (mask >> m) & 1 ? after[m] : before[m];
          ASSERT_NO_FATAL_FAILURE(put_bytes(files.paths[m], 0, image));
        }
        AssembleReport report;
        auto again = assemble(files.paths, {}, &report);
        ASSERT_TRUE(again.is_ok()) << again.status().to_string();
        EXPECT_EQ(read_back(**again, bytes), data);
        EXPECT_EQ(*(*again)->count_inconsistent_stripes(), 0u);
        const bool victim_recorded = fail_update && (mask & ~(1u << victim)) != 0;
        EXPECT_EQ((*again)->member_health(victim) == MemberHealth::kFailed, victim_recorded);
        again->reset();
      }
    }
  }
}

// Item 9 of the resilience review: the superblock update that swaps a hot replacement into its
// role, cut by a power loss at every point. The update goes to the roles (the replacement now in
// one of them) and not to the old device; a replacement left one event behind, still in its spare
// slot, was stale to assembly, and the old device (whose UUID the role no longer names) too: the
// role came up missing, with two good copies of it at hand, and not even force took one back.
TEST_F(ArrayAssemblyTest, PowerLossAtEveryPointOfTheHotReplaceSwapStrandsNothing) {
  const LevelShape shapes[] = {{RaidLevel::kRaid1, 2},
                               {RaidLevel::kRaid10, 4},
                               {RaidLevel::kRaid5, 4},
                               {RaidLevel::kRaid6, 4}};
  for (const LevelShape& shape : shapes) {
    SCOPED_TRACE(fmt::format("{} x{}", raid_level_name(shape.level), shape.members));
    const std::uint32_t n = shape.members;
    const std::uint32_t role = 1;
    ArrayFiles files;
    auto devs = files.open(n + 1, kMemberBytes, true);
    ASSERT_TRUE(devs.is_ok()) << devs.status().to_string();
    std::unique_ptr<MemberDevice> replacement = std::move(devs->back());
    devs->pop_back();
    CreateOptions c;
    c.level = shape.level;
    c.strip_bytes = 4096;
    c.name = "asm";
    auto array = Array::create(std::move(*devs), c, options());
    ASSERT_TRUE(array.is_ok()) << array.status().to_string();
    const std::uint32_t bytes = 96 * 1024;
    const auto data = write_and_settle(**array, bytes, 12);
    ASSERT_TRUE((*array)->start_replace(role, std::move(replacement)).is_ok());
    // Copied to just short of the end; the swap's update is the next one.
    std::atomic<bool> stop{false};
    RebuildControl control;
    control.stop = &stop;
    control.window_stripes = 8;
    control.checkpoint_interval = std::chrono::hours(1);
    // (copied_bytes trails by the window whose write is in flight: four windows from the end.)
    const std::uint64_t near_end = (*array)->member_data_bytes() - 4 * 8 * 4096;
    // Slow near the end, so that the stop lands before the last window.
    control.speed = [&] {
      auto p = (*array)->replace_progress();
      return JobSpeed{0, p && p->copied_bytes + 64 * 4096 >= near_end ? 400'000u : 0u, false};
    };
    std::thread stopper([&] {
      for (auto p = (*array)->replace_progress(); p && p->copied_bytes < near_end;
           p = (*array)->replace_progress())
        std::this_thread::yield();
      stop = true;
    });
    auto done = (*array)->replace(control);
    stopper.join();
    ASSERT_TRUE(done.is_ok()) << done.status().to_string();
    ASSERT_FALSE(*done);
    // Images of every device's superblock block before and after the swap's update.
    const std::vector<std::string>& paths = files.paths;  // roles, then the replacement
    auto blocks = [&] {
      std::vector<std::vector<std::byte>> out;
      for (const auto& p : paths) {
        auto all = file_bytes(p);
        out.emplace_back(all.begin(), all.begin() + 4096);
      }
      return out;
    };
    const auto before = blocks();
    stop = false;
    control.speed = nullptr;
    done = (*array)->replace(control);
    ASSERT_TRUE(done.is_ok()) << done.status().to_string();
    ASSERT_TRUE(*done) << "swapped";
    const auto after = blocks();
    array->reset();
    // Devices the update wrote: every role but `role` (the old device), and the replacement.
    std::vector<std::uint32_t> written;
    for (std::uint32_t i = 0; i <= n; ++i)
      if (i != role) written.push_back(i);
    for (std::uint32_t mask = 0; mask < (1u << written.size()); ++mask) {
      SCOPED_TRACE(fmt::format("devices with the new superblock: mask {:#x}", mask));
      for (std::size_t w = 0; w < written.size(); ++w) {
        const auto& image = (mask >> w) & 1 ? after[written[w]] : before[written[w]];
        ASSERT_NO_FATAL_FAILURE(put_bytes(paths[written[w]], 0, image));
      }
      ASSERT_NO_FATAL_FAILURE(put_bytes(paths[role], 0, before[role]));  // not yet erased
      AssembleReport report;
      auto again = assemble(paths, {}, &report);
      ASSERT_TRUE(again.is_ok()) << again.status().to_string();
      EXPECT_EQ((*again)->health(), ArrayHealth::kOptimal) << "the role has one of its copies";
      EXPECT_EQ(read_back(**again, bytes), data);
      EXPECT_EQ(*(*again)->count_inconsistent_stripes(), 0u);
      if ((*again)->replace_progress()) {
        auto rest = (*again)->replace(RebuildControl{});
        ASSERT_TRUE(rest.is_ok()) << rest.status().to_string();
        EXPECT_TRUE(*rest);
      }
      EXPECT_EQ((*again)->member_slot(role)->path, paths[n]) << "the replacement holds the role";
      again->reset();
    }
  }
}

// A member whose superblock write was torn (crc broken) is failed, not a reason to refuse.
TEST_F(ArrayAssemblyTest, ATornSuperblockFailsOnlyItsMember) {
  ArrayFiles files;
  auto array = create(files, RaidLevel::kRaid5, 4);
  ASSERT_TRUE(array.is_ok());
  const auto data = write_and_settle(**array, 64 * 1024, 3);
  ASSERT_TRUE((*array)->stop().is_ok());
  array->reset();
  std::vector<std::byte> torn(512, std::byte{0x5a});
  put_bytes(files.paths[1], 1024, torn);
  AssembleReport report;
  auto again = assemble(files.paths, {}, &report);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ((*again)->member_health(1), MemberHealth::kFailed);
  EXPECT_EQ(read_back(**again, 64 * 1024), data);
}

// Two halves of a RAID1 that ran apart each record the other as failed: refused by default,
// naming both; force keeps the half with the most events and says so.
TEST_F(ArrayAssemblyTest, SplitBrainIsRefusedUnlessForced) {
  ArrayFiles files;
  auto array = create(files, RaidLevel::kRaid1, 2);
  ASSERT_TRUE(array.is_ok());
  write_and_settle(**array, 16 * 1024, 1);
  ASSERT_TRUE((*array)->stop().is_ok());
  array->reset();
  // Half A runs alone (recording member 1 as missing), writes, and stops; then half B.
  std::vector<std::byte> a_data, b_data;
  {
    auto a = assemble({files.paths[0]});
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    a_data = write_and_settle(**a, 16 * 1024, 2);
    ASSERT_TRUE((*a)->create_vd("a-only", 1u << 20).is_ok());  // A ends with more events
    ASSERT_TRUE((*a)->stop().is_ok());
  }
  {
    auto b = assemble({files.paths[1]});
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    b_data = write_and_settle(**b, 16 * 1024, 3);
    ASSERT_TRUE((*b)->stop().is_ok());
  }
  auto both = assemble(files.paths);
  ASSERT_FALSE(both.is_ok());
  EXPECT_EQ(both.status().code(), Errc::kCorrupt);
  EXPECT_NE(both.status().message().find("split brain"), std::string::npos);
  EXPECT_NE(both.status().message().find(files.paths[0]), std::string::npos);
  EXPECT_NE(both.status().message().find(files.paths[1]), std::string::npos);
  EXPECT_NE(both.status().message().find("Nothing was changed"), std::string::npos);

  AssembleOptions force;
  force.force = true;
  AssembleReport report;
  auto forced = assemble(files.paths, force, &report);
  ASSERT_TRUE(forced.is_ok()) << forced.status().to_string();
  ASSERT_FALSE(report.overrides.empty());
  EXPECT_NE(report.overrides[0].find("split brain"), std::string::npos);
  EXPECT_EQ((*forced)->member_health(0), MemberHealth::kActive);
  EXPECT_EQ((*forced)->member_health(1), MemberHealth::kFailed);
  EXPECT_EQ(read_back(**forced, 16 * 1024), a_data);
}

// A RAID5 that crashed with writes in flight and comes back without a member has stripes whose
// parity may not match their data (the write hole): refused by default, started on request with
// the number of such stripes reported. Before, it started silently.
TEST_F(ArrayAssemblyTest, DirtyDegradedRaid5IsRefusedByDefault) {
  ArrayFiles files;
  auto array = create(files, RaidLevel::kRaid5, 4);
  ASSERT_TRUE(array.is_ok());
  {
    auto ctx = IoContext::create(64);
    auto queue = (*array)->attach(**ctx);
    auto buf = AlignedBuffer::allocate(64 * 1024, 4096);
    std::memset(buf->data(), 0x3c, buf->size());
    ASSERT_TRUE(run_one(**queue, IoKind::kWrite, 0, 64 * 1024, buf->data()).is_ok());
  }
  array->reset();  // crash: no stop, the written regions stay dirty
  const std::vector<std::string> three(files.paths.begin(), files.paths.begin() + 3);
  auto refused = assemble(three);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), Errc::kBusy);
  EXPECT_NE(refused.status().message().find("write hole"), std::string::npos);
  EXPECT_NE(refused.status().message().find("slot 3 (missing)"), std::string::npos);
  EXPECT_NE(refused.status().message().find("Nothing was changed"), std::string::npos);
  // Nothing changed: with every member back it assembles and re-syncs.
  {
    AssembleReport report;
    auto all = assemble(files.paths, {}, &report);
    ASSERT_TRUE(all.is_ok()) << all.status().to_string();
    EXPECT_FALSE(report.was_clean);
    EXPECT_EQ(report.unsynced_stripes, 0u);
    EXPECT_EQ((*all)->health(), ArrayHealth::kOptimal);
  }
  // Crash again, then start it dirty and degraded on purpose.
  {
    auto again = assemble(files.paths);
    ASSERT_TRUE(again.is_ok());
    auto ctx = IoContext::create(64);
    auto queue = (*again)->attach(**ctx);
    auto buf = AlignedBuffer::allocate(64 * 1024, 4096);
    std::memset(buf->data(), 0x7e, buf->size());
    ASSERT_TRUE(run_one(**queue, IoKind::kWrite, 0, 64 * 1024, buf->data()).is_ok());
  }
  AssembleOptions dirty;
  dirty.start_dirty_degraded = true;
  AssembleReport report;
  auto started = assemble(three, dirty, &report);
  ASSERT_TRUE(started.is_ok()) << started.status().to_string();
  EXPECT_GT(report.unsynced_stripes, 0u);
  EXPECT_FALSE(report.overrides.empty());
  EXPECT_EQ((*started)->health(), ArrayHealth::kDegraded);
}

// A read error while re-syncing fails that member (the array survives it) instead of aborting
// assembly.
TEST_F(ArrayAssemblyTest, AReadErrorDuringResyncFailsTheMember) {
  ArrayFiles files;
  auto array = create(files, RaidLevel::kRaid6, 5);
  ASSERT_TRUE(array.is_ok());
  {
    auto ctx = IoContext::create(64);
    auto queue = (*array)->attach(**ctx);
    auto buf = AlignedBuffer::allocate(48 * 1024, 4096);
    std::memset(buf->data(), 0x11, buf->size());
    ASSERT_TRUE(run_one(**queue, IoKind::kWrite, 0, 48 * 1024, buf->data()).is_ok());
  }
  array->reset();  // crash
  auto devs = files.open(5, kMemberBytes, false);
  ASSERT_TRUE(devs.is_ok());
  files.faulty[2]->fail_range(1u << 20, kMemberBytes);  // member 2's data area
  auto again = Array::assemble(std::move(*devs), options());
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ((*again)->member_health(2), MemberHealth::kFailed);
  EXPECT_EQ((*again)->health(), ArrayHealth::kDegraded);
  EXPECT_EQ(read_back(**again, 48 * 1024), std::vector<std::byte>(48 * 1024, std::byte{0x11}));
}

// One file under two names is one member, whatever the path says.
TEST_F(ArrayAssemblyTest, TheSameStorageUnderTwoNamesIsRefused) {
  ArrayFiles files;
  auto devs = files.open(2, kMemberBytes, true);
  ASSERT_TRUE(devs.is_ok());
  const std::string dir = files.dir.path();
  const std::string link = dir + "/symlink-to-0";
  const std::string hard = dir + "/hardlink-to-0";
  std::filesystem::create_symlink(files.paths[0], link);
  std::filesystem::create_hard_link(files.paths[0], hard);
  const std::string dotted =
      dir + "/./" + std::filesystem::path(files.paths[0]).filename().string();
  for (const std::string& alias : {link, hard, dotted}) {
    SCOPED_TRACE(alias);
    auto set = files.open(2, kMemberBytes, false);
    ASSERT_TRUE(set.is_ok());
    auto again = open_member(alias);
    ASSERT_TRUE(again.is_ok());
    set->push_back(std::move(*again));
    CreateOptions c;
    c.level = RaidLevel::kRaid5;
    c.strip_bytes = 4096;
    auto made = Array::create(std::move(*set), c, options());
    ASSERT_FALSE(made.is_ok());
    EXPECT_EQ(made.status().code(), Errc::kInvalidArgument);
    EXPECT_NE(made.status().message().find("under two names"), std::string::npos)
        << made.status().message();
    // Nothing was written: the files hold no superblock.
    auto probe = open_member(files.paths[0]);
    auto buf = AlignedBuffer::allocate(4096, 4096);
    ASSERT_TRUE((*probe)->read_sync(0, buf->span()).is_ok());
    EXPECT_TRUE(std::all_of(buf->data(), buf->data() + 4096,
                            [](std::byte b) { return b == std::byte{0}; }));
  }
  // And at assembly.
  devs->clear();
  auto array = create(files, RaidLevel::kRaid1, 2);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  ASSERT_TRUE((*array)->stop().is_ok());
  array->reset();
  auto twice = assemble({files.paths[0], link});
  ASSERT_FALSE(twice.is_ok());
  EXPECT_NE(twice.status().message().find("under two names"), std::string::npos);
}

// A member cut short (down to its superblock, or to half) is failed at assembly; the array
// assembles degraded. Before, the bitmap write past its end refused the whole array.
TEST_F(ArrayAssemblyTest, ATruncatedMemberIsFailedNotABlocker) {
  for (const std::uint64_t cut : {std::uint64_t{8192}, kMemberBytes / 2}) {
    SCOPED_TRACE(cut);
    ArrayFiles files;
    auto array = create(files, RaidLevel::kRaid5, 4);
    ASSERT_TRUE(array.is_ok());
    const auto data = write_and_settle(**array, 64 * 1024, 5);
    ASSERT_TRUE((*array)->stop().is_ok());
    array->reset();
    std::filesystem::resize_file(files.paths[2], cut);
    AssembleReport report;
    auto again = assemble(files.paths, {}, &report);
    ASSERT_TRUE(again.is_ok()) << again.status().to_string();
    EXPECT_EQ((*again)->member_health(2), MemberHealth::kFailed);
    ASSERT_EQ(report.failed_members.size(), 1u);
    EXPECT_NE(report.failed_members[0].find("too small"), std::string::npos);
    EXPECT_EQ(read_back(**again, 64 * 1024), data);
  }
}

}  // namespace
}  // namespace graid::testing
