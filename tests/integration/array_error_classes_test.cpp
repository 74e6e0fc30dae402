// Error classes (issue 8 item 4): what a member's error means decides what happens. An
// unsupported discard never fails a member (the stripe is written as zeroes instead), a read
// error is reconstructed and rewritten in place, RAID0 fails the request and keeps the member,
// requests smaller than a member's logical block are refused at the API, and a write error
// still fails the member at once.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "array_harness.h"

namespace graid::testing {
namespace {

constexpr std::uint64_t kMemberBytes = 4u << 20;

class ArrayErrorClassesTest : public ::testing::Test {
 protected:
  void SetUp() override { parity_ = std::move(*make_parity_backend("cpu")); }

  Result<std::unique_ptr<Array>> make(RaidLevel level, std::uint32_t n,
                                      std::uint32_t max_read_errors = 20) {
    auto devs = files_->open(n, kMemberBytes, true);
    if (!devs) return devs.status();
    CreateOptions c;
    c.level = level;
    c.strip_bytes = 4096;
    c.name = "errors";
    ArrayOptions o;
    o.parity = parity_.get();
    o.max_read_errors = max_read_errors;
    auto array = Array::create(std::move(*devs), c, o);
    if (array) {
      ctx_ = std::move(*IoContext::create(64));
      queue_ = std::move(*(*array)->attach(*ctx_));
    }
    return array;
  }

  std::vector<std::byte> write_pattern(std::uint64_t offset, std::uint32_t len,
                                       std::uint64_t seed) {
    auto buf = AlignedBuffer::allocate(len, 4096);
    std::mt19937_64 rng(seed);
    for (std::uint32_t i = 0; i < len; ++i)
      buf->data()[i] = static_cast<std::byte>(rng());
    EXPECT_TRUE(run_one(*queue_, IoKind::kWrite, offset, len, buf->data()).is_ok());
    return std::vector<std::byte>(buf->data(), buf->data() + len);
  }

  std::vector<std::byte> read(std::uint64_t offset, std::uint32_t len, Status* status = nullptr) {
    auto buf = AlignedBuffer::allocate(len, 4096);
    Status st = run_one(*queue_, IoKind::kRead, offset, len, buf->data());
    if (status != nullptr) {
      *status = st;
    } else {
      EXPECT_TRUE(st.is_ok()) << st.to_string();
    }
    return std::vector<std::byte>(buf->data(), buf->data() + len);
  }

  void TearDown() override {
    queue_.reset();
    ctx_.reset();
  }

  std::unique_ptr<ArrayFiles> files_ = std::make_unique<ArrayFiles>();
  std::unique_ptr<ParityBackend> parity_;
  std::unique_ptr<IoContext> ctx_;
  std::unique_ptr<ArrayQueue> queue_;
};

// Before: -EOPNOTSUPP from a member's discard failed the member (every member, on a block
// device without write-zeroes: one mkfs killed the array).
TEST_F(ArrayErrorClassesTest, ARefusedDiscardIsWrittenAsZeroesAndFailsNoMember) {
  const RaidLevel levels[] = {RaidLevel::kRaid0, RaidLevel::kRaid1, RaidLevel::kRaid10,
                              RaidLevel::kRaid5, RaidLevel::kRaid6};
  for (const RaidLevel level : levels) {
    SCOPED_TRACE(raid_level_name(level));
    files_ = std::make_unique<ArrayFiles>();
    const std::uint32_t n = level == RaidLevel::kRaid1 ? 2 : 4;
    auto array = make(level, n);
    ASSERT_TRUE(array.is_ok()) << array.status().to_string();
    const std::uint32_t span = 256 * 1024;
    write_pattern(0, span, 3);
    files_->faulty[n - 1]->fail_op_with(MemberOp::kDiscard, EOPNOTSUPP);
    EXPECT_TRUE((*array)->supports_discard());
    ASSERT_TRUE(run_one(*queue_, IoKind::kDiscard, 0, span, nullptr).is_ok());
    for (std::uint32_t m = 0; m < n; ++m)
      EXPECT_EQ((*array)->member_health(m), MemberHealth::kActive) << m;
    EXPECT_FALSE((*array)->supports_discard());
    const auto back = read(0, span);
    EXPECT_TRUE(
        std::all_of(back.begin(), back.end(), [](std::byte b) { return b == std::byte{0}; }));
    queue_.reset();
    EXPECT_EQ(*(*array)->count_inconsistent_stripes(), 0u);
    queue_ = std::move(*(*array)->attach(*ctx_));
    // Later discards go straight to zeroes.
    write_pattern(0, span, 4);
    ASSERT_TRUE(run_one(*queue_, IoKind::kDiscard, 0, span, nullptr).is_ok());
    const auto again = read(0, span);
    EXPECT_TRUE(
        std::all_of(again.begin(), again.end(), [](std::byte b) { return b == std::byte{0}; }));
    queue_.reset();
    ctx_.reset();
  }
}

// A bad sector is reconstructed, returned, and rewritten (the drive remaps it); the member
// stays. Parity levels rebuild it from the stripe, mirrors read another copy.
TEST_F(ArrayErrorClassesTest, ABadSectorIsRebuiltAndRewrittenInPlace) {
  const RaidLevel levels[] = {RaidLevel::kRaid1, RaidLevel::kRaid10, RaidLevel::kRaid5,
                              RaidLevel::kRaid6};
  for (const RaidLevel level : levels) {
    SCOPED_TRACE(raid_level_name(level));
    files_ = std::make_unique<ArrayFiles>();
    const std::uint32_t n = level == RaidLevel::kRaid1 ? 2 : 4;
    auto array = make(level, n);
    ASSERT_TRUE(array.is_ok());
    const std::uint32_t span = 128 * 1024;
    const auto data = write_pattern(0, span, 9);
    // Bad sectors on member 0 inside its data area, where some of `span` lives.
    files_->faulty[0]->bad_sectors((*array)->member_data_offset() + 4096, 8192);
    // Each strip twice in a row: mirror reads alternate between copies, so every strip is read
    // from member 0 once.
    for (std::uint32_t off = 0; off < span; off += 4096) {
      for (int twice = 0; twice < 2; ++twice) {
        const auto got = read(off, 4096);
        ASSERT_TRUE(std::equal(got.begin(), got.end(), data.begin() + off)) << off;
      }
    }
    EXPECT_FALSE(files_->faulty[0]->has_bad_sectors()) << "not rewritten";
    EXPECT_EQ((*array)->member_health(0), MemberHealth::kActive);
    EXPECT_GT((*array)->corrected_read_errors(0), 0u);
    EXPECT_EQ(read(0, span), data);
    queue_.reset();
    auto inconsistent = (*array)->count_inconsistent_stripes();
    ASSERT_TRUE(inconsistent.is_ok()) << inconsistent.status().to_string();
    EXPECT_EQ(*inconsistent, 0u);
    ctx_.reset();
  }
}

// A write that must read old data (reconstruct-write) meets a bad sector: the write goes on
// around it and rewrites it; nothing fails and the stripe stays consistent.
TEST_F(ArrayErrorClassesTest, AWriteThatMeetsABadSectorRepairsIt) {
  auto array = make(RaidLevel::kRaid5, 4);
  ASSERT_TRUE(array.is_ok());
  const std::uint32_t span = 96 * 1024;
  auto data = write_pattern(0, span, 21);
  // Stripe 0 of a 4-member RAID5 (4 KiB strips): data on members 0, 1, 2, parity on 3.
  // Writing strip 0 alone reads strips 1 and 2 (reconstruct-write): make strip 2 unreadable.
  files_->faulty[2]->bad_sectors((*array)->member_data_offset(), 4096);
  const auto fresh = write_pattern(0, 4096, 22);
  std::copy(fresh.begin(), fresh.end(), data.begin());
  EXPECT_FALSE(files_->faulty[2]->has_bad_sectors());
  for (std::uint32_t m = 0; m < 4; ++m)
    EXPECT_EQ((*array)->member_health(m), MemberHealth::kActive);
  EXPECT_EQ(read(0, span), data);
  queue_.reset();
  EXPECT_EQ(*(*array)->count_inconsistent_stripes(), 0u);
}

// RAID0 has nothing to rebuild from: the read fails, the member stays (before, one bad sector
// failed the member and with it the whole array).
TEST_F(ArrayErrorClassesTest, Raid0ReadErrorFailsTheRequestNotTheMember) {
  auto array = make(RaidLevel::kRaid0, 3);
  ASSERT_TRUE(array.is_ok());
  write_pattern(0, 64 * 1024, 1);
  files_->faulty[1]->bad_sectors((*array)->member_data_offset(), 4096);
  Status st;
  read(0, 64 * 1024, &st);
  EXPECT_EQ(st.code(), Errc::kIoError);
  EXPECT_EQ((*array)->health(), ArrayHealth::kOptimal);
  read(8192, 4096);  // another member: fine
}

// A write error fails the member at once, whatever the read-error limit.
TEST_F(ArrayErrorClassesTest, AWriteErrorFailsTheMember) {
  auto array = make(RaidLevel::kRaid5, 4);
  ASSERT_TRUE(array.is_ok());
  files_->faulty[1]->fail_op(MemberOp::kWrite);
  const auto data = write_pattern(0, 48 * 1024, 2);
  EXPECT_EQ((*array)->member_health(1), MemberHealth::kFailed);
  EXPECT_EQ(read(0, 48 * 1024), data);
}

// A 4Kn member makes the array's logical block 4096: a 512-byte request is refused at the API
// and no member sees it (before, every member answered -EINVAL and all were failed).
// Issue 29 item 1: a member that refuses its part of a stripe's write as malformed (EINVAL, as a
// 4Kn drive does to a 512-byte write, or NVMe Invalid Field / LBA Out of Range) keeps its place
// and the request fails; but the other members took their parts, so the stripe's parity no longer
// matches. Its region's write-intent bit stays set (no clear takes it), so the next assembly
// re-syncs it; before, the next flush cleared it and the stripe stayed inconsistent for good.
TEST_F(ArrayErrorClassesTest, AWriteAMemberRefusesLeavesItsRegionToTheResync) {
  auto array = make(RaidLevel::kRaid5, 4);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  const std::uint32_t victim = (*array)->geometry().data_member(3, 0);
  auto buf = AlignedBuffer::allocate(4096, 4096);
  std::memset(buf->data(), 0x3c, 4096);
  const std::uint64_t at = 3 * (*array)->geometry().stripe_data_bytes();
  // A first write sets the region's bit (a bitmap page write, which must not be refused).
  ASSERT_TRUE(run_one(*queue_, IoKind::kWrite, at, 4096, buf->data()).is_ok());
  files_->faulty[victim]->fail_op_with(MemberOp::kWrite, EINVAL);
  std::memset(buf->data(), 0x3d, 4096);
  const Status st = run_one(*queue_, IoKind::kWrite, at, 4096, buf->data());
  EXPECT_FALSE(st.is_ok()) << "the request fails";
  files_->faulty[victim]->fail_op_with(MemberOp::kWrite, 0);
  EXPECT_EQ((*array)->member_health(victim), MemberHealth::kActive) << "the member stays";
  EXPECT_EQ((*array)->health(), ArrayHealth::kOptimal);
  queue_.reset();
  EXPECT_EQ(*(*array)->count_inconsistent_stripes(), 1u) << "parity written, the data not";
  // Flushes after the clear interval: idle bits go, this one must stay.
  {
    auto ctx = std::move(*IoContext::create(8));
    auto queue = std::move(*(*array)->attach(*ctx));
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      ASSERT_TRUE(run_one(*queue, IoKind::kFlush, 0, 0, nullptr).is_ok());
    }
  }
  ASSERT_TRUE((*array)->stop().is_ok());
  array->reset();
  auto devs = files_->open(4, kMemberBytes, false);
  ASSERT_TRUE(devs.is_ok());
  ArrayOptions o;
  o.parity = parity_.get();
  AssembleReport report;
  auto again = Array::assemble(std::move(*devs), o, {}, &report);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_GT(report.resynced_bytes, 0u) << "the region was re-synced";
  EXPECT_EQ(*(*again)->count_inconsistent_stripes(), 0u);
}

// A device whose logical block is larger than the array's is refused wherever a device joins a
// running array (spare, replacement, hot replace, re-add), naming both sizes, changing nothing.
// Before, a 4Kn device was taken as a spare of a 512-byte array, and its first 512-byte write
// came back EINVAL.
TEST_F(ArrayErrorClassesTest, ADeviceWithALargerLogicalBlockIsRefused) {
  auto array = make(RaidLevel::kRaid5, 4);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  ASSERT_EQ((*array)->logical_block_size(), 512u);
  ArrayFiles more;
  auto extra = more.open(2, kMemberBytes, true);
  ASSERT_TRUE(extra.is_ok());
  more.faulty[0]->set_logical_block_size(4096);
  more.faulty[1]->set_logical_block_size(4096);
  auto refused = [](const Status& st) {
    return st.code() == Errc::kInvalidArgument && st.message().find("4096") != std::string::npos &&
           st.message().find("512") != std::string::npos;
  };
  const auto spare = (*array)->add_spare(std::move((*extra)[0]));
  EXPECT_TRUE(refused(spare.status())) << spare.status().to_string();
  EXPECT_EQ((*array)->member_slots().size(), 4u) << "nothing changed";
  EXPECT_TRUE(refused((*array)->start_replace(1, std::move((*extra)[1]))));
  EXPECT_FALSE((*array)->replace_progress());
  ASSERT_TRUE((*array)->fail_member(2, "test").is_ok());
  auto again = more.open(2, kMemberBytes, false);
  ASSERT_TRUE(again.is_ok());
  more.faulty[0]->set_logical_block_size(4096);
  EXPECT_TRUE(refused((*array)->replace_failed(2, std::move((*again)[0]))));
  EXPECT_EQ((*array)->member_slot(2)->state, MemberSlotState::kFailed);
  // Its own device, reformatted with 4 KiB blocks meanwhile.
  files_->faulty[2]->set_logical_block_size(4096);
  EXPECT_TRUE(refused((*array)->readd_failed(2).status()));
  EXPECT_EQ((*array)->member_slot(2)->state, MemberSlotState::kFailed);
}

TEST_F(ArrayErrorClassesTest, RequestsBelowTheLogicalBlockAreRefused) {
  auto devs = files_->open(3, kMemberBytes, true);
  ASSERT_TRUE(devs.is_ok());
  files_->faulty[2]->set_logical_block_size(4096);
  CreateOptions c;
  c.level = RaidLevel::kRaid5;
  c.strip_bytes = 4096;
  ArrayOptions o;
  o.parity = parity_.get();
  auto array = Array::create(std::move(*devs), c, o);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  EXPECT_EQ((*array)->logical_block_size(), 4096u);
  ctx_ = std::move(*IoContext::create(64));
  queue_ = std::move(*(*array)->attach(*ctx_));
  std::vector<FaultCounts> before;
  for (auto* f : files_->faulty)
    before.push_back(f->counts());
  auto buf = AlignedBuffer::allocate(8192, 4096);
  for (const auto& [offset, len] :
       {std::pair<std::uint64_t, std::uint32_t>{512, 4096}, {0, 512}, {4096, 1536}}) {
    Status st = run_one(*queue_, IoKind::kWrite, offset, len, buf->data());
    EXPECT_EQ(st.code(), Errc::kInvalidArgument) << offset << "+" << len;
    EXPECT_NE(st.message().find("4096-byte logical block"), std::string::npos) << st.message();
  }
  for (std::size_t m = 0; m < files_->faulty.size(); ++m) {
    EXPECT_EQ(files_->faulty[m]->counts().writes, before[m].writes);
    EXPECT_EQ(files_->faulty[m]->counts().reads, before[m].reads);
  }
  EXPECT_EQ((*array)->health(), ArrayHealth::kOptimal);
  EXPECT_TRUE(run_one(*queue_, IoKind::kWrite, 4096, 4096, buf->data()).is_ok());

  // A logical block that does not divide the strip cannot make an array.
  ArrayFiles odd;
  auto odd_devs = odd.open(3, kMemberBytes, true);
  odd.faulty[0]->set_logical_block_size(8192);
  auto refused = Array::create(std::move(*odd_devs), c, o);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), Errc::kInvalidArgument);
}

}  // namespace
}  // namespace graid::testing
