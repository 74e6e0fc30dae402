// Writes on real drives (issue 8): a write that skips a failed member is acknowledged only once
// the failure is on disk, new arrays get consistent parity, mirror copies never diverge, and a
// request's own fault never fails a member.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "array_harness.h"
#include "forwarding_member.h"
#include "gate_member.h"
#include "meta/superblock.h"

namespace graid::testing {
namespace {

constexpr std::uint64_t kMemberBytes = 4u << 20;
constexpr std::uint64_t kDataOffset = 1u << 20;

// A drive that applies the writes it is handed together in the opposite order (as an NVMe
// drive with several queues, or io-wq workers, may): writes are held and passed on, newest
// first, when the submitting thread next polls.
class ReorderingMember final : public ForwardingMember {
 public:
  explicit ReorderingMember(std::unique_ptr<MemberDevice> inner)
      : ForwardingMember(std::move(inner)) {
    flush_task_.owner = this;
  }
  void submit(IoContext& ctx, MemberRequest& req) override {
    if (req.op != MemberOp::kWrite) return inner().submit(ctx, req);
    held_.push_back(&req);
    if (held_.size() == 1) {
      ctx_ = &ctx;
      ctx.defer(flush_task_);
    }
  }

 private:
  struct FlushTask final : Task {
    ReorderingMember* owner = nullptr;
    void run() override {
      std::vector<MemberRequest*> held;
      held.swap(owner->held_);
      for (auto it = held.rbegin(); it != held.rend(); ++it)
        owner->inner().submit(*owner->ctx_, **it);
    }
  } flush_task_;
  IoContext* ctx_ = nullptr;
  std::vector<MemberRequest*> held_;
};

void fill_random(std::span<std::byte> out, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (auto& b : out)
    b = static_cast<std::byte>(rng());
}

// Writes random bytes over each member's data area, as drives that held other data do.
void scribble(const std::vector<std::string>& paths, std::uint64_t seed) {
  std::vector<std::byte> junk(kMemberBytes - kDataOffset);
  for (std::size_t i = 0; i < paths.size(); ++i) {
    fill_random(junk, seed + i);
    const int fd = ::open(paths[i].c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, junk.data(), junk.size(), kDataOffset),
              static_cast<ssize_t>(junk.size()));
    ::close(fd);
  }
}

class ArrayWriteSafetyTest : public ::testing::Test {
 protected:
  void SetUp() override { parity_ = std::move(*make_parity_backend("cpu")); }

  ArrayOptions options() {
    ArrayOptions o;
    o.parity = parity_.get();
    return o;
  }

  static CreateOptions shape(RaidLevel level) {
    CreateOptions c;
    c.level = level;
    c.strip_bytes = 4096;
    c.name = "safety";
    return c;
  }

  std::unique_ptr<ParityBackend> parity_;
};

// Item 1: member 0 fails while a superblock update recording it is held on member 2. A write to
// a stripe that member 0 belongs to skips it; it must not be acknowledged until the record is
// durable (before, it completed at once: a power cut then brought member 0 back at the same
// event count with a stale strip).
TEST_F(ArrayWriteSafetyTest, AWriteThatSkipsAFailedMemberWaitsForTheRecord) {
  ArrayFiles files;
  auto devs = files.open(3, kMemberBytes, true);
  ASSERT_TRUE(devs.is_ok());
  auto gate = std::make_shared<MetadataGate>();
  (*devs)[2] = std::make_unique<GateMember>(std::move((*devs)[2]), gate);
  auto array = Array::create(std::move(*devs), shape(RaidLevel::kRaid5), options());
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  auto ctx = IoContext::create(64);
  auto queue = (*array)->attach(**ctx);
  auto buf = AlignedBuffer::allocate(8192, 4096);
  fill_random(buf->span(), 1);

  gate->arm([](std::uint64_t offset) { return offset == 0; });  // superblock writes only
  Status failed;
  std::thread failer([&] { failed = (*array)->fail_member(0, "pulled by the test"); });
  ASSERT_TRUE(gate->wait_for_held(1, std::chrono::seconds(10)));
  ASSERT_EQ((*array)->member_health(0), MemberHealth::kFailed);  // marked, not yet recorded

  TestIo write;  // stripe 0: data on members 0 and 1, parity on 2
  write.kind = IoKind::kWrite;
  write.offset = 0;
  write.len = 8192;
  write.buf = buf->data();
  (*queue)->submit(write);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until)
    (*ctx)->poll(false);
  EXPECT_FALSE(write.done) << "acknowledged before the failure was on disk";

  gate->open();
  failer.join();
  ASSERT_TRUE(failed.is_ok()) << failed.to_string();
  while (!write.done)
    (*ctx)->poll(true);
  EXPECT_TRUE(write.status.is_ok()) << write.status.to_string();
  std::vector<std::byte> back(8192);
  auto rbuf = AlignedBuffer::allocate(8192, 4096);
  ASSERT_TRUE(run_one(**queue, IoKind::kRead, 0, 8192, rbuf->data()).is_ok());
  EXPECT_EQ(std::memcmp(rbuf->data(), buf->data(), 8192), 0);
}

// Item 3: members that held other data get consistent parity by default; known-zero members
// need no work; zero_members zeroes; assume_clean keeps the old, inconsistent parity (which is
// what the default used to do).
TEST_F(ArrayWriteSafetyTest, NewArraysGetConsistentRedundancy) {
  const RaidLevel levels[] = {RaidLevel::kRaid1, RaidLevel::kRaid10, RaidLevel::kRaid5,
                              RaidLevel::kRaid6};
  // Issue 47 item 7: how the array was initialised is recorded in its superblocks, so an
  // assembly (a restart) says the same as create did.
  const auto after_restart = [&](std::unique_ptr<Array>& array, ArrayFiles& files) {
    EXPECT_TRUE(array->stop().is_ok());
    const auto n = array->member_count();
    array.reset();
    auto devs = files.open(n, kMemberBytes, false);
    EXPECT_TRUE(devs.is_ok());
    auto again = Array::assemble(std::move(*devs), options());
    EXPECT_TRUE(again.is_ok()) << again.status().to_string();
    return again.is_ok() ? (*again)->init_method() : InitMethod::kNotRecorded;
  };
  for (const RaidLevel level : levels) {
    SCOPED_TRACE(raid_level_name(level));
    const std::uint32_t n = level == RaidLevel::kRaid1 ? 2 : 4;
    {
      ArrayFiles fresh;
      auto devs = fresh.open(n, kMemberBytes, true);
      auto array = Array::create(std::move(*devs), shape(level), options());
      ASSERT_TRUE(array.is_ok()) << array.status().to_string();
      EXPECT_EQ((*array)->init_method(), InitMethod::kKnownZero);
      EXPECT_EQ(*(*array)->count_inconsistent_stripes(), 0u);
      EXPECT_EQ(after_restart(*array, fresh), InitMethod::kKnownZero);
    }
    for (const int mode : {0, 1, 2}) {  // default, zero_members, assume_clean
      SCOPED_TRACE(mode);
      ArrayFiles used;
      auto devs = used.open(n, kMemberBytes, true);
      ASSERT_NO_FATAL_FAILURE(scribble(used.paths, 40 + mode));
      CreateOptions c = shape(level);
      c.zero_members = mode == 1;
      c.assume_clean = mode == 2;
      auto array = Array::create(std::move(*devs), c, options());
      ASSERT_TRUE(array.is_ok()) << array.status().to_string();
      const InitMethod expected = mode == 0   ? InitMethod::kResync
                                  : mode == 1 ? InitMethod::kZeroed
                                              : InitMethod::kNone;
      EXPECT_EQ((*array)->init_method(), expected);
      if (mode == 2) {
        EXPECT_GT(*(*array)->count_inconsistent_stripes(), 0u);
        EXPECT_EQ(after_restart(*array, used), expected);
        continue;
      }
      EXPECT_EQ(*(*array)->count_inconsistent_stripes(), 0u);
      // A small write (read-modify-write where the level has parity), then a member lost: the
      // data still reads back, including its neighbours that were never written.
      auto ctx = IoContext::create(64);
      auto queue = (*array)->attach(**ctx);
      const std::uint64_t span = 64 * 1024;
      auto before = AlignedBuffer::allocate(span, 4096);
      ASSERT_TRUE(run_one(**queue, IoKind::kRead, 0, span, before->data()).is_ok());
      auto small = AlignedBuffer::allocate(4096, 4096);
      fill_random(small->span(), 77);
      ASSERT_TRUE(run_one(**queue, IoKind::kWrite, 8192, 4096, small->data()).is_ok());
      std::memcpy(before->data() + 8192, small->data(), 4096);
      ASSERT_TRUE((*array)->fail_member(0, "test").is_ok());
      auto after = AlignedBuffer::allocate(span, 4096);
      ASSERT_TRUE(run_one(**queue, IoKind::kRead, 0, span, after->data()).is_ok());
      EXPECT_EQ(std::memcmp(before->data(), after->data(), span), 0);
      queue->reset();
      EXPECT_EQ(after_restart(*array, used), expected);
    }
  }
}

// Item 3: an initialisation cut short (init_checkpoint left in the superblocks) is pending after
// assembly, and Array::initialise() finishes it instead of trusting the parity.
TEST_F(ArrayWriteSafetyTest, AnInterruptedInitialisationIsPendingAfterAssembly) {
  ArrayFiles files;
  auto devs = files.open(4, kMemberBytes, true);
  ASSERT_NO_FATAL_FAILURE(scribble(files.paths, 9));
  CreateOptions c = shape(RaidLevel::kRaid5);
  c.assume_clean = true;  // as if create died before initialising
  auto array = Array::create(std::move(*devs), c, options());
  ASSERT_TRUE(array.is_ok());
  ASSERT_GT(*(*array)->count_inconsistent_stripes(), 0u);
  ASSERT_TRUE((*array)->stop().is_ok());
  array->reset();
  for (const auto& path : files.paths) {  // what create() records before initialising
    auto dev = open_member(path);
    auto buf = AlignedBuffer::allocate(meta::kSuperblockSize, 4096);
    ASSERT_TRUE((*dev)->read_sync(0, buf->span()).is_ok());
    auto sb = meta::decode(buf->span());
    ASSERT_TRUE(sb.is_ok());
    sb->init_checkpoint = 0;
    ASSERT_TRUE(meta::encode(*sb, buf->span()).is_ok());
    ASSERT_TRUE((*dev)->write_sync(0, buf->span()).is_ok());
  }
  auto again = files.open(4, kMemberBytes, false);
  auto assembled = Array::assemble(std::move(*again), options());
  ASSERT_TRUE(assembled.is_ok()) << assembled.status().to_string();
  EXPECT_EQ((*assembled)->init_progress(), std::optional<std::uint64_t>(0));
  EXPECT_EQ((*assembled)->check().status().code(), Errc::kBusy);  // would see false mismatches
  auto done = (*assembled)->initialise();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(done->finished);
  EXPECT_EQ((*assembled)->init_progress(), std::nullopt);
  EXPECT_EQ(*(*assembled)->count_inconsistent_stripes(), 0u);
}

// Item 6: overlapping writes in one poll reach every copy in one order, even where a drive
// reorders what it is handed together. Each round submits several overlapping writes together;
// then every copy is compared byte for byte, and the array must read as the last of them (they
// apply in submission order).
TEST_F(ArrayWriteSafetyTest, MirrorCopiesNeverDiverge) {
  for (const RaidLevel level : {RaidLevel::kRaid1, RaidLevel::kRaid10}) {
    SCOPED_TRACE(raid_level_name(level));
    ArrayFiles files;
    const std::uint32_t n = level == RaidLevel::kRaid1 ? 2 : 4;
    auto devs = files.open(n, kMemberBytes, true);
    for (std::uint32_t m = 1; m < n; m += 2)  // one copy of each pair reorders
      (*devs)[m] = std::make_unique<ReorderingMember>(std::move((*devs)[m]));
    auto array = Array::create(std::move(*devs), shape(level), options());
    ASSERT_TRUE(array.is_ok());
    auto ctx = IoContext::create(128);
    auto queue = (*array)->attach(**ctx);
    constexpr int kWrites = 6;
    std::vector<AlignedBuffer> bufs;
    for (int i = 0; i < kWrites; ++i)
      bufs.push_back(std::move(*AlignedBuffer::allocate(16384, 4096)));
    std::mt19937_64 rng(5);
    std::vector<std::byte> model(64 * 1024);
    for (int round = 0; round < 150; ++round) {
      TestIo ios[kWrites];
      TestIo* ptrs[kWrites];
      for (int i = 0; i < kWrites; ++i) {
        const std::uint32_t len = 4096 * static_cast<std::uint32_t>(1 + rng() % 4);
        const std::uint64_t off = 4096 * (rng() % 4);
        fill_random(std::span(bufs[i].data(), len), rng());
        ios[i].kind = IoKind::kWrite;
        ios[i].offset = off;
        ios[i].len = len;
        ios[i].buf = bufs[i].data();
        ptrs[i] = &ios[i];
        std::memcpy(model.data() + off, bufs[i].data(), len);
      }
      run_all(**queue, std::span(ptrs, kWrites));
      for (auto& io : ios)
        ASSERT_TRUE(io.status.is_ok()) << io.status.to_string();
    }
    auto back = AlignedBuffer::allocate(model.size(), 4096);
    ASSERT_TRUE(run_one(**queue, IoKind::kRead, 0, model.size(), back->data()).is_ok());
    EXPECT_EQ(std::memcmp(back->data(), model.data(), model.size()), 0);
    queue->reset();
    ctx->reset();
    EXPECT_EQ(*(*array)->count_inconsistent_stripes(), 0u) << "copies differ";
  }
}

// Items 10 and 12: a VdInfo reaching past the array fails the request alone; a VD size near
// 2^64 is refused as too big.
TEST_F(ArrayWriteSafetyTest, ARequestsOwnFaultNeverFailsAMember) {
  ArrayFiles files;
  auto devs = files.open(4, kMemberBytes, true);
  auto array = Array::create(std::move(*devs), shape(RaidLevel::kRaid5), options());
  ASSERT_TRUE(array.is_ok());
  auto ctx = IoContext::create(64);
  auto queue = (*array)->attach(**ctx);
  auto buf = AlignedBuffer::allocate(65536, 4096);
  VdInfo bogus;
  bogus.start = (*array)->capacity() - 4096;
  bogus.size = 1u << 20;
  for (const IoKind kind : {IoKind::kWrite, IoKind::kRead, IoKind::kDiscard}) {
    TestIo io;
    io.kind = kind;
    io.offset = 65536;
    io.len = 65536;
    io.buf = kind == IoKind::kDiscard ? nullptr : buf->data();
    (*queue)->submit(io, bogus);
    while (!io.done)
      (*ctx)->poll(true);
    EXPECT_EQ(io.status.code(), Errc::kOutOfRange) << io.status.to_string();
  }
  EXPECT_EQ((*array)->health(), ArrayHealth::kOptimal);
  for (auto* f : files.faulty)
    EXPECT_EQ(f->counts().failed, 0u);

  auto huge = (*array)->create_vd("huge", ~std::uint64_t{0} - 100);
  ASSERT_FALSE(huge.is_ok());
  EXPECT_EQ(huge.status().code(), Errc::kNoSpace);
  EXPECT_NE(huge.status().message().find("does not fit"), std::string::npos);
}

}  // namespace
}  // namespace graid::testing
