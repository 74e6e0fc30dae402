// Request flags (issue 8): FUA writes survive a power cut without a flush, a preflush makes what
// came before durable before the request starts, and write-zeroes is distinct from discard
// (kIoNoUnmap keeps the range allocated; members that cannot get written zeroes).
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "array_harness.h"

namespace graid::testing {
namespace {

constexpr std::uint64_t kMemberBytes = 4u << 20;

class ArrayRequestFlagsTest : public ::testing::TestWithParam<RaidLevel> {
 protected:
  void SetUp() override { parity_ = std::move(*make_parity_backend("cpu")); }

  std::uint32_t members() const { return GetParam() == RaidLevel::kRaid1 ? 2 : 4; }

  ArrayOptions options() {
    ArrayOptions o;
    o.parity = parity_.get();
    return o;
  }

  std::unique_ptr<Array> make(ArrayFiles& files) {
    auto devs = files.open(members(), kMemberBytes, true);
    EXPECT_TRUE(devs.is_ok());
    CreateOptions c;
    c.level = GetParam();
    c.strip_bytes = 4096;
    auto array = Array::create(std::move(*devs), c, options());
    EXPECT_TRUE(array.is_ok()) << array.status().to_string();
    return array.is_ok() ? std::move(*array) : nullptr;
  }

  static Status submit(ArrayQueue& queue, IoKind kind, std::uint64_t offset, std::uint32_t len,
                       std::byte* buf, std::uint8_t flags) {
    TestIo io;
    io.kind = kind;
    io.offset = offset;
    io.len = len;
    io.buf = buf;
    io.flags = flags;
    TestIo* p = &io;
    run_all(queue, std::span(&p, 1));
    return io.status;
  }

  // Cuts the power on every member (every write not covered by a flush or FUA is undone), then
  // assembles the array again from its files.
  std::unique_ptr<Array> power_cut(ArrayFiles& files, std::unique_ptr<Array> array) {
    std::mt19937_64 rng(1);
    for (auto* f : files.faulty) {
      auto lost = f->power_loss(rng, PowerLossPolicy::kLoseAll);
      EXPECT_TRUE(lost.is_ok()) << lost.status().to_string();
    }
    array.reset();
    auto devs = files.open(members(), kMemberBytes, false);
    auto again = Array::assemble(std::move(*devs), options());
    EXPECT_TRUE(again.is_ok()) << again.status().to_string();
    return again.is_ok() ? std::move(*again) : nullptr;
  }

  std::vector<std::byte> read(Array& array, std::uint64_t offset, std::uint32_t len) {
    auto ctx = IoContext::create(64);
    auto queue = array.attach(**ctx);
    auto buf = AlignedBuffer::allocate(len, 4096);
    EXPECT_TRUE(run_one(**queue, IoKind::kRead, offset, len, buf->data()).is_ok());
    return std::vector<std::byte>(buf->data(), buf->data() + len);
  }

  static AlignedBuffer pattern(std::uint32_t len, std::uint64_t seed) {
    auto buf = AlignedBuffer::allocate(len, 4096);
    std::mt19937_64 rng(seed);
    for (std::uint32_t i = 0; i < len; ++i)
      buf->data()[i] = static_cast<std::byte>(rng() | 1);  // never all zero
    return std::move(*buf);
  }

  std::unique_ptr<ParityBackend> parity_;
};

// A FUA write is on stable storage when acknowledged; the same write without FUA is lost to a
// power cut before any flush (which shows the test can tell).
TEST_P(ArrayRequestFlagsTest, FuaWritesSurviveAPowerCut) {
  for (const bool fua : {true, false}) {
    SCOPED_TRACE(fua ? "FUA" : "no FUA");
    ArrayFiles files;
    auto array = make(files);
    ASSERT_NE(array, nullptr);
    const std::uint32_t len = 24 * 1024;
    AlignedBuffer data = pattern(len, fua ? 7 : 8);
    {
      auto ctx = IoContext::create(64);
      auto queue = array->attach(**ctx);
      ASSERT_TRUE(
          submit(**queue, IoKind::kWrite, 8192, len, data.data(), fua ? kIoFua : 0).is_ok());
    }
    auto again = power_cut(files, std::move(array));
    ASSERT_NE(again, nullptr);
    const auto back = read(*again, 8192, len);
    const bool kept = std::memcmp(back.data(), data.data(), len) == 0;
    EXPECT_EQ(kept, fua);
    EXPECT_EQ(*again->count_inconsistent_stripes(), 0u);
  }
}

// A preflush makes the writes acknowledged before it durable before the request starts. (The
// second write lands in the first one's write-intent region, so no bitmap flush makes the first
// durable by the way.)
TEST_P(ArrayRequestFlagsTest, APreflushMakesEarlierWritesDurable) {
  for (const bool preflush : {true, false}) {
    SCOPED_TRACE(preflush ? "preflush" : "no preflush");
    ArrayFiles files;
    auto array = make(files);
    ASSERT_NE(array, nullptr);
    AlignedBuffer first = pattern(16384, 3);
    AlignedBuffer second = pattern(4096, 4);
    {
      auto ctx = IoContext::create(64);
      auto queue = array->attach(**ctx);
      ASSERT_TRUE(submit(**queue, IoKind::kWrite, 0, 16384, first.data(), 0).is_ok());
      ASSERT_TRUE(
          submit(**queue, IoKind::kWrite, 32768, 4096, second.data(), preflush ? kIoPreflush : 0)
              .is_ok());
    }
    auto again = power_cut(files, std::move(array));
    ASSERT_NE(again, nullptr);
    const auto back = read(*again, 0, 16384);
    EXPECT_EQ(std::memcmp(back.data(), first.data(), 16384) == 0, preflush);
  }
}

// Write-zeroes with kIoNoUnmap asks members to zero without deallocating (tmpfs cannot: the
// array writes the zeroes, says it no longer supports it, fails no member); without it, and for
// discards, members deallocate. Every way reads back zeroes with consistent redundancy.
TEST_P(ArrayRequestFlagsTest, WriteZeroesIsNotADiscard) {
  struct Case {
    IoKind kind;
    std::uint8_t flags;
  };
  for (const Case c : {Case{IoKind::kWriteZeroes, kIoNoUnmap}, Case{IoKind::kWriteZeroes, 0},
                       Case{IoKind::kDiscard, 0}}) {
    SCOPED_TRACE(fmt::format("kind {} flags {}", static_cast<int>(c.kind), c.flags));
    ArrayFiles files;
    auto array = make(files);
    ASSERT_NE(array, nullptr);
    const std::uint32_t span = 192 * 1024;
    AlignedBuffer data = pattern(span, 5);
    auto ctx = IoContext::create(64);
    auto queue = array->attach(**ctx);
    ASSERT_TRUE(submit(**queue, IoKind::kWrite, 0, span, data.data(), 0).is_ok());
    std::vector<FaultCounts> before;
    for (auto* f : files.faulty)
      before.push_back(f->counts());
    ASSERT_TRUE(submit(**queue, c.kind, 0, span, nullptr, c.flags).is_ok());
    std::uint64_t discards = 0, zeroes = 0;
    for (std::size_t m = 0; m < files.faulty.size(); ++m) {
      discards += files.faulty[m]->counts().discards - before[m].discards;
      zeroes += files.faulty[m]->counts().write_zeroes - before[m].write_zeroes;
      EXPECT_EQ(array->member_health(static_cast<std::uint32_t>(m)), MemberHealth::kActive);
    }
    const bool keep = c.flags == kIoNoUnmap;
    EXPECT_EQ(zeroes > 0, keep);
    EXPECT_EQ(discards > 0, !keep);
    EXPECT_EQ(array->supports_write_zeroes(), !keep);  // tmpfs has no FALLOC_FL_ZERO_RANGE
    EXPECT_TRUE(array->supports_discard());
    auto back = AlignedBuffer::allocate(span, 4096);
    ASSERT_TRUE(run_one(**queue, IoKind::kRead, 0, span, back->data()).is_ok());
    EXPECT_TRUE(std::all_of(back->data(), back->data() + span,
                            [](std::byte b) { return b == std::byte{0}; }));
    queue->reset();
    EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
  }
}

// kIoKernelBuffer (ublk zero copy): a read into a kernel buffer slot's window lands in the
// slot's pages (installed here as the driver would) through fixed-buffer member reads, and on
// RAID0/1/10 a write from the window puts the pages' bytes on every copy through fixed-buffer
// member writes; the window itself is PROT_NONE, so any touch by the engine would crash the
// test. Anything the engine would serve with the CPU is refused with kUnsupported before it
// starts, writing nothing: a write to a parity level, a discard, and a read of a failed member's
// data on a parity level (reconstruction); a mirror reads the other copy instead, and writes the
// live ones. A buffer that is no window of the queue's ring is refused as invalid.
TEST_P(ArrayRequestFlagsTest, KernelBufferIoMovesDataUnchangedAndNothingElse) {
  ArrayFiles files;
  auto array = make(files);
  ASSERT_NE(array, nullptr);
  const std::uint32_t len = 64 * 1024;
  AlignedBuffer data = pattern(len, 21);
  auto ctx = IoContext::create(64);
  auto queue = array->attach(**ctx);
  ASSERT_TRUE(submit(**queue, IoKind::kWrite, 0, len, data.data(), 0).is_ok());

  void* reserved = ::mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(reserved, MAP_FAILED);
  std::byte* window = static_cast<std::byte*>(reserved);
  auto slot = (*ctx)->add_kernel_buffer_slot({window, len});
  ASSERT_TRUE(slot.is_ok()) << slot.status().to_string();
  AlignedBuffer pages = *AlignedBuffer::allocate(len, 4096);
  std::memset(pages.data(), 0xee, len);
  ASSERT_TRUE((*ctx)->install_buffer_for_testing(*slot, {pages.data(), len}).is_ok());

  const std::uint64_t fixed = (*ctx)->stats().fixed_buffer_ios;
  ASSERT_TRUE(submit(**queue, IoKind::kRead, 0, len, window, kIoKernelBuffer).is_ok());
  EXPECT_EQ(std::memcmp(pages.data(), data.data(), len), 0);
  EXPECT_GT((*ctx)->stats().fixed_buffer_ios, fixed);

  const bool parity = GetParam() == RaidLevel::kRaid5 || GetParam() == RaidLevel::kRaid6;
  AlignedBuffer second = pattern(len, 22);
  std::memcpy(pages.data(), second.data(), len);  // what the driver registered for a WRITE
  const Status wrote = submit(**queue, IoKind::kWrite, 0, len, window, kIoKernelBuffer);
  EXPECT_EQ(submit(**queue, IoKind::kDiscard, 0, len, window, kIoKernelBuffer).code(),
            Errc::kUnsupported);
  EXPECT_EQ(submit(**queue, IoKind::kWrite, 0, len, data.data(), kIoKernelBuffer).code(),
            parity ? Errc::kUnsupported : Errc::kInvalidArgument)
      << "not a window";
  if (parity) {
    EXPECT_EQ(wrote.code(), Errc::kUnsupported) << wrote.to_string();
    EXPECT_EQ(read(*array, 0, len), std::vector<std::byte>(data.data(), data.data() + len))
        << "the refused write wrote nothing";
  } else {
    ASSERT_TRUE(wrote.is_ok()) << wrote.to_string();
    EXPECT_EQ(read(*array, 0, len), std::vector<std::byte>(second.data(), second.data() + len));
    if (GetParam() != RaidLevel::kRaid0) {
      EXPECT_EQ(*array->count_inconsistent_stripes(), 0u) << "every copy has it";
    }
    ASSERT_TRUE(submit(**queue, IoKind::kWrite, 0, len, data.data(), 0).is_ok());  // as before
  }
  EXPECT_EQ(submit(**queue, IoKind::kRead, 0, len, data.data(), kIoKernelBuffer).code(),
            Errc::kInvalidArgument)
      << "not a window";

  if (GetParam() != RaidLevel::kRaid0) {
    ASSERT_TRUE(array->fail_member(0, "test").is_ok());
    std::memset(pages.data(), 0xee, len);
    const Status st = submit(**queue, IoKind::kRead, 0, len, window, kIoKernelBuffer);
    const bool mirror = GetParam() == RaidLevel::kRaid1 || GetParam() == RaidLevel::kRaid10;
    if (mirror) {
      EXPECT_TRUE(st.is_ok()) << st.to_string();
      EXPECT_EQ(std::memcmp(pages.data(), data.data(), len), 0);
      // A degraded write, to the live copies, from the pages.
      std::memcpy(pages.data(), second.data(), len);
      const Status w = submit(**queue, IoKind::kWrite, 0, len, window, kIoKernelBuffer);
      EXPECT_TRUE(w.is_ok()) << w.to_string();
      EXPECT_EQ(read(*array, 0, len), std::vector<std::byte>(second.data(), second.data() + len));
    } else {
      EXPECT_EQ(st.code(), Errc::kUnsupported) << st.to_string();
    }
    EXPECT_EQ(array->health(), ArrayHealth::kDegraded) << "no member failed for the refusal";
  }
  ASSERT_TRUE((*ctx)->install_buffer_for_testing(*slot, {}).is_ok());
  queue->reset();
  ::munmap(reserved, len);
}

INSTANTIATE_TEST_SUITE_P(Levels, ArrayRequestFlagsTest,
                         ::testing::Values(RaidLevel::kRaid0, RaidLevel::kRaid1, RaidLevel::kRaid10,
                                           RaidLevel::kRaid5, RaidLevel::kRaid6),
                         [](const auto& level) {
                           return std::string(raid_level_name(level.param));
                         });

}  // namespace
}  // namespace graid::testing
