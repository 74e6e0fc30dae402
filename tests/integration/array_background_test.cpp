// An array's metadata and background work while I/O runs: a member that hangs inside a metadata
// write is failed after ArrayOptions::metadata_timeout while other threads go on writing, and
// the consistency check, which locks the stripes it reads, never reports a write in flight as a
// mismatch (RAID5, RAID10, RAID1).
#include <algorithm>
#include <cstring>

#include "array_harness.h"
#include "gate_member.h"

namespace graid::testing {
namespace {

using namespace std::chrono_literals;

// A page-aligned copy of `bytes` for I/O.
AlignedBuffer aligned(std::span<const std::byte> bytes) {
  AlignedBuffer buf = std::move(*AlignedBuffer::allocate(bytes.size(), 4096));
  std::memcpy(buf.data(), bytes.data(), bytes.size());
  return buf;
}

class ArrayBackgroundTest : public ::testing::Test {
 protected:
  void SetUp() override { parity_ = std::move(*make_parity_backend("cpu")); }

  // Members on files; member `gated` (if < n) behind a GateMember on `gate_`.
  Result<std::unique_ptr<Array>> make(RaidLevel level, std::uint32_t n, std::uint32_t gated,
                                      const ArrayOptions& options) {
    auto devs = files_.open(n, 4u << 20, true);
    if (!devs) return devs.status();
    if (gated < n) {
      (*devs)[gated] = std::make_unique<GateMember>(std::move((*devs)[gated]), gate_);
    }
    CreateOptions c;
    c.level = level;
    c.strip_bytes = 4096;
    c.bitmap_region_bytes = 1u << 20;
    c.name = "background";
    return Array::create(std::move(*devs), c, options);
  }
  ArrayOptions options() {
    ArrayOptions o;
    o.parity = parity_.get();
    return o;
  }

  ArrayFiles files_;
  std::shared_ptr<MetadataGate> gate_ = std::make_shared<MetadataGate>();
  std::unique_ptr<ParityBackend> parity_;
};

TEST_F(ArrayBackgroundTest, AMemberHungInAMetadataWriteIsFailedAfterTheTimeout) {
  ArrayOptions o = options();
  o.metadata_timeout = 300ms;
  auto array = make(RaidLevel::kRaid5, 4, /*gated=*/2, o);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  auto ctx = std::move(*IoContext::create(64));
  auto queue = std::move(*(*array)->attach(*ctx));
  const std::uint32_t stripe_bytes = 3 * 4096;
  // Region 0's bit is set now; writes there need no metadata I/O.
  auto first = aligned(random_bytes(stripe_bytes, 1));
  ASSERT_TRUE(run_one(*queue, IoKind::kWrite, 0, stripe_bytes, first.data()).is_ok());

  // Member 2 hangs in every metadata write and flush from now on (5 s at most, so the test
  // ends on a build without the timeout too).
  gate_->arm([](std::uint64_t) { return true; }, SIZE_MAX, 5s);
  std::atomic<bool> stalled_write_done{false};
  std::atomic<std::uint64_t> served_meanwhile{0};
  std::thread other([&] {
    // Another thread keeps writing region 0 while this thread's write waits on member 2.
    auto other_ctx = std::move(*IoContext::create(64));
    auto other_queue = std::move(*(*array)->attach(*other_ctx));
    auto data = aligned(random_bytes(stripe_bytes, 2));
    ASSERT_TRUE(gate_->wait_for_held(1, 5s));
    while (!stalled_write_done.load()) {
      ASSERT_TRUE(run_one(*other_queue, IoKind::kWrite, 0, stripe_bytes, data.data()).is_ok());
      if (gate_->held() > 0) ++served_meanwhile;
    }
  });
  // Region 2 (member bytes from 2 MiB) is clear: its first write updates the bitmap.
  const std::uint64_t at = 2 * 3 * (1u << 20);
  auto data = aligned(random_bytes(stripe_bytes, 3));
  const auto start = std::chrono::steady_clock::now();
  Status st = run_one(*queue, IoKind::kWrite, at, stripe_bytes, data.data());
  const auto took = std::chrono::steady_clock::now() - start;
  stalled_write_done = true;
  other.join();
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 3s) << "the write waited for the hung member, not for the timeout";
  EXPECT_GT(served_meanwhile.load(), 0u) << "other threads stopped while a member hung";
  EXPECT_EQ((*array)->member_health(2), MemberHealth::kFailed);
  EXPECT_EQ((*array)->health(), ArrayHealth::kDegraded);
  // The array serves on without member 2 (reads of its strips are reconstructed).
  auto back = aligned(std::vector<std::byte>(stripe_bytes));
  ASSERT_TRUE(run_one(*queue, IoKind::kRead, at, stripe_bytes, back.data()).is_ok());
  EXPECT_EQ(std::memcmp(back.data(), data.data(), stripe_bytes), 0);
  EXPECT_EQ(gate_->held(), 1u);  // the bitmap page write, still inside member 2

  queue.reset();
  EXPECT_TRUE((*array)->stop().is_ok());
  array->reset();
  // The hung write returns after the array is gone: its device and buffer must still be alive
  // (ASan reports it otherwise), and it must not wedge anything.
  gate_->open();
  EXPECT_TRUE(gate_->wait_for_returned(1, 5s));
}

// Writers on two threads hammer the first stripes while the check runs again and again: every
// check must see each stripe either before or after a write, never half done.
void check_while_writing(ArrayBackgroundTest& t, Array& array) {
  constexpr std::uint64_t kHotStripes = 48;
  const Geometry& g = array.geometry();
  const std::uint64_t stripe_bytes = g.stripe_data_bytes();
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> writes{0};
  auto writer = [&](std::uint64_t seed) {
    auto ctx = std::move(*IoContext::create(64));
    auto queue = std::move(*array.attach(*ctx));
    std::mt19937_64 rng(seed);
    std::vector<TestIo> ios(8);
    auto buf = aligned(std::vector<std::byte>(ios.size() * 4 * 4096));
    while (!stop.load()) {
      // New data every time: rewriting the same bytes would leave parity unchanged.
      for (std::size_t w = 0; w < buf.size() / 8; ++w) {
        const std::uint64_t v = rng();
        std::memcpy(buf.data() + w * 8, &v, 8);
      }
      std::vector<TestIo*> batch;
      for (std::size_t i = 0; i < ios.size(); ++i) {
        TestIo& io = ios[i];
        io.kind = IoKind::kWrite;
        io.len = static_cast<std::uint32_t>(4096 * (1 + rng() % 4));
        io.offset = (rng() % (kHotStripes * stripe_bytes / 4096 - 4)) * 4096;
        io.buf = buf.data() + i * 4 * 4096;
        batch.push_back(&io);
      }
      run_all(*queue, batch);
      for (TestIo* io : batch)
        ASSERT_TRUE(io->status.is_ok()) << io->status.to_string();
      writes += batch.size();
    }
  };
  std::thread w1(writer, 1), w2(writer, 2);
  std::uint64_t checks = 0, mismatched = 0;
  for (; checks < 100; ++checks) {
    auto bad = array.count_inconsistent_stripes();
    ASSERT_TRUE(bad.is_ok()) << bad.status().to_string();
    mismatched += *bad;
  }
  stop = true;
  w1.join();
  w2.join();
  (void)t;
  EXPECT_EQ(mismatched, 0u) << "over " << checks << " checks with " << writes.load()
                            << " writes in flight around them";
  EXPECT_GT(writes.load(), 0u);
  auto after = array.count_inconsistent_stripes();
  ASSERT_TRUE(after.is_ok());
  EXPECT_EQ(*after, 0u);
}

TEST_F(ArrayBackgroundTest, CheckWhileWritingRaid5ReportsNoFalseMismatch) {
  auto array = make(RaidLevel::kRaid5, 4, 4, options());
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  check_while_writing(*this, **array);
}

TEST_F(ArrayBackgroundTest, CheckWhileWritingRaid10ReportsNoFalseMismatch) {
  auto array = make(RaidLevel::kRaid10, 4, 4, options());
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  check_while_writing(*this, **array);
}

TEST_F(ArrayBackgroundTest, CheckWhileWritingRaid1ReportsNoFalseMismatch) {
  auto array = make(RaidLevel::kRaid1, 2, 2, options());
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  check_while_writing(*this, **array);
}

}  // namespace
}  // namespace graid::testing
