// Runs of whole stripes (queue/stripe_run.cpp): large writes that one queue submits together
// become one operation over consecutive whole stripes. A randomized model test over parity
// levels and strips from 4 KiB to 1 MiB (ArrayRunTest: long writes, some stripe-aligned, some
// not, overlapping within a batch, members lost while runs are in flight), and the cases one by
// one (RunCaseTest): order against a later write while a run waits for a lock, the split when a
// locked run finds a failed member and the journal on, and a member that refuses one stripe.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "array_harness.h"
#include "array_shape.h"
#include "extent.h"

namespace graid::testing {
namespace {

constexpr std::uint32_t kSector = 512;

class ArrayRunTest : public ::testing::TestWithParam<Shape> {
 protected:
  static constexpr int kThreads = 2;
  static constexpr int kBatch = 8;

  void SetUp() override {
    const Shape s = GetParam();
    seed_ = shape_seed(0x3c6ef372u, s);
    parity_ = std::move(*make_parity_backend("cpu"));
    // Zones of whole stripes, 4 per thread; fewer stripes per zone on large strips.
    zone_stripes_ = s.strip >= (256u << 10) ? 4 : 24;
    const std::uint64_t stripes = 4 * kThreads * zone_stripes_ + 2;
    auto devs = files_.open(s.members, (16u << 20) + stripes * s.strip, /*create=*/true);
    ASSERT_TRUE(devs.is_ok()) << devs.status().to_string();
    CreateOptions create;
    create.level = s.level;
    create.strip_bytes = s.strip;
    create.name = "runs";
    // Regions of 8 strips: runs straddle them, so their begin/end counts must balance per region.
    create.bitmap_region_bytes = std::max<std::uint64_t>(8ull * s.strip, 64 * 1024);
    ArrayOptions options;
    options.parity = parity_.get();
    auto array = Array::create(std::move(*devs), create, options);
    ASSERT_TRUE(array.is_ok()) << array.status().to_string();
    array_ = std::move(*array);
    model_.assign(array_->capacity(), std::byte{0});
  }

  void worker(int t, int rounds, int fail_round) {
    std::mt19937_64 rng(seed_ + static_cast<std::uint64_t>(t));
    auto ctx = IoContext::create(512);
    ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
    auto queue = array_->attach(**ctx);
    ASSERT_TRUE(queue.is_ok());
    const Geometry& g = array_->geometry();
    const std::uint64_t sb = g.stripe_data_bytes();
    const std::uint64_t zone = zone_stripes_ * sb;
    const std::uint64_t zones = array_->capacity() / zone;
    ASSERT_GE(zones, 2u * kThreads);
    const std::uint64_t max_len = std::min<std::uint64_t>(zone, 4u << 20);
    std::vector<TestIo> ios(kBatch);
    std::vector<AlignedBuffer> bufs;
    for (int i = 0; i < kBatch; ++i)
      bufs.push_back(std::move(*AlignedBuffer::allocate(max_len, 4096)));

    for (int round = 0; round < rounds; ++round) {
      std::vector<Extent> written, read;
      std::vector<TestIo*> batch;
      std::uint64_t stream_at = ~0ull;  // the end of the previous stream write, if any
      for (int i = 0; i < kBatch; ++i) {
        TestIo& io = ios[i];
        const std::uint64_t z =
            static_cast<std::uint64_t>(t) + kThreads * (rng() % (zones / kThreads));
        const std::uint64_t base = z * zone;
        Extent e{};
        const int shape = static_cast<int>(rng() % 10);
        if (shape < 3 && stream_at != ~0ull && stream_at % zone != 0) {
          // Continues the previous write: whole stripes that extend its run across requests.
          const std::uint64_t room = zone - stream_at % zone;
          const std::uint64_t n = std::min<std::uint64_t>(1 + rng() % 6, max_len / sb);
          e = {stream_at, static_cast<std::uint32_t>(std::min(room, n * sb))};
        } else if (shape < 7) {
          // Whole stripes from a stripe boundary.
          const std::uint64_t first = rng() % zone_stripes_;
          const std::uint64_t n =
              1 + rng() % std::min<std::uint64_t>(zone_stripes_ - first, max_len / sb);
          e = {base + first * sb, static_cast<std::uint32_t>(n * sb)};
        } else {
          // Anywhere, sector-aligned: partial head and tail stripes around whole ones.
          const std::uint64_t sectors = zone / kSector;
          const std::uint64_t first = rng() % sectors;
          const std::uint64_t n =
              1 + rng() % std::min<std::uint64_t>(sectors - first, max_len / kSector);
          e = {base + first * kSector, static_cast<std::uint32_t>(n * kSector)};
        }
        const bool is_read = rng() % 4 == 0;
        io.offset = e.offset;
        io.len = e.len;
        io.buf = bufs[i].data();
        io.flags = 0;
        if (is_read) {
          // A read has one right answer: nothing of this batch writes there.
          if (std::any_of(written.begin(), written.end(),
                          [&](const Extent& w) { return overlaps(w, e); })) {
            continue;
          }
          io.kind = IoKind::kRead;
          read.push_back(e);
        } else {
          if (std::any_of(read.begin(), read.end(),
                          [&](const Extent& r) { return overlaps(r, e); })) {
            continue;
          }
          // Writes of one queue may overlap: the later one wins (submission order per stripe).
          io.kind = IoKind::kWrite;
          io.flags = rng() % 16 == 0 ? kIoFua : 0;
          for (std::uint32_t b = 0; b < e.len; b += 8) {
            const std::uint64_t v = rng();
            std::memcpy(bufs[i].data() + b, &v, 8);
          }
          written.push_back(e);
          stream_at = e.offset + e.len;
        }
        batch.push_back(&io);
      }
      for (TestIo* io : batch) {
        io->done = false;
        (*queue)->submit(*io);
      }
      if (round == fail_round) {
        // Runs are locked, computing or writing: a member goes away under them.
        (*ctx)->poll(false);
        (*ctx)->poll(false);
        if (t == 0) {
          files_.faulty[failing_.front()]->vanish();
        } else if (failing_.size() > 1) {
          ASSERT_TRUE(array_->fail_member(failing_.back(), "test").is_ok());
        }
      }
      while (!std::all_of(batch.begin(), batch.end(), [](TestIo* io) { return io->done; }))
        (*ctx)->poll(true);
      for (TestIo* io : batch) {
        ASSERT_TRUE(io->status.is_ok())
            << "thread " << t << " round " << round << " [" << io->offset << ", +" << io->len
            << "): " << io->status.to_string() << " (seed " << seed_ << ")";
        if (io->kind == IoKind::kWrite) {
          std::memcpy(model_.data() + io->offset, io->buf, io->len);
        } else {
          const auto mismatch =
              std::mismatch(io->buf, io->buf + io->len, model_.data() + io->offset);
          ASSERT_EQ(mismatch.first, io->buf + io->len)
              << "thread " << t << " round " << round << ": read [" << io->offset << ", +"
              << io->len << ") differs from the model at array byte "
              << io->offset + (mismatch.first - io->buf) << " (seed " << seed_ << ")";
        }
      }
    }
    EXPECT_EQ((*queue)->in_flight(), 0u);
    const QueueStats st = (*queue)->stats();
    runs_ += st.stripe_runs;
    run_stripes_ += st.run_stripes;
  }

  void verify_all() {
    auto ctx = IoContext::create(64);
    ASSERT_TRUE(ctx.is_ok());
    auto queue = array_->attach(**ctx);
    ASSERT_TRUE(queue.is_ok());
    const std::uint32_t chunk = 1u << 20;
    auto buf = AlignedBuffer::allocate(chunk, 4096);
    for (std::uint64_t off = 0; off < array_->capacity(); off += chunk) {
      const auto len =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(chunk, array_->capacity() - off));
      Status st = run_one(**queue, IoKind::kRead, off, len, buf->data());
      ASSERT_TRUE(st.is_ok()) << "read at " << off << ": " << st.to_string();
      const auto mismatch = std::mismatch(buf->data(), buf->data() + len, model_.data() + off);
      ASSERT_EQ(mismatch.first, buf->data() + len)
          << "array byte " << off + (mismatch.first - buf->data()) << " differs from the model"
          << " (seed " << seed_ << ")";
    }
  }

  std::uint64_t seed_ = 0;
  std::uint64_t zone_stripes_ = 0;  // a thread's share of the array, alternating
  ArrayFiles files_;
  std::unique_ptr<ParityBackend> parity_;
  std::unique_ptr<Array> array_;
  std::vector<std::byte> model_;
  std::vector<std::uint32_t> failing_;
  std::atomic<std::uint64_t> runs_{0};
  std::atomic<std::uint64_t> run_stripes_{0};
};

TEST_P(ArrayRunTest, LongWritesInRunsMatchTheModelThroughMemberLosses) {
  const Shape s = GetParam();
  const int rounds = s.strip >= (256u << 10) ? 16 : 80;
  const int fail_round = s.failures > 0 ? rounds / 2 : -1;
  for (std::uint32_t i = 0; i < s.failures; ++i)
    failing_.push_back((i * 2 + 1) % s.members);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] { worker(t, rounds, fail_round); });
  for (auto& th : threads)
    th.join();
  if (::testing::Test::HasFatalFailure()) return;
  verify_all();
  if (s.failures == 0) {
    EXPECT_EQ(*array_->count_inconsistent_stripes(), 0u);
  } else {
    EXPECT_EQ(array_->member_health(failing_.front()), MemberHealth::kFailed);
  }
  // Runs need two stripes' parity in one staging buffer of at most 1 MiB.
  if (2ull * s.strip <= kMaxStripBytes) {
    EXPECT_GT(runs_.load(), 0u) << "long writes formed runs";
  } else {
    EXPECT_EQ(runs_.load(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Levels, ArrayRunTest,
    ::testing::Values(Shape{RaidLevel::kRaid5, 5, 4096, 0}, Shape{RaidLevel::kRaid6, 6, 4096, 0},
                      Shape{RaidLevel::kRaid5, 3, 16384, 1}, Shape{RaidLevel::kRaid6, 6, 16384, 2},
                      Shape{RaidLevel::kRaid6, 4, 65536, 1}, Shape{RaidLevel::kRaid5, 4, 262144, 1},
                      Shape{RaidLevel::kRaid6, 4, 1u << 20, 0}),
    shape_name);

// One queue on this thread over small arrays, for the cases of runs one by one.
class RunCaseTest : public ::testing::Test {
 protected:
  void SetUp() override { parity_ = std::move(*make_parity_backend("cpu")); }
  void make(RaidLevel level, std::uint32_t n) {
    auto devs = files_.open(n, 4u << 20, true);
    ASSERT_TRUE(devs.is_ok()) << devs.status().to_string();
    CreateOptions c;
    c.level = level;
    c.strip_bytes = 4096;
    c.name = "run";
    ArrayOptions o;
    o.parity = parity_.get();
    auto array = Array::create(std::move(*devs), c, o);
    ASSERT_TRUE(array.is_ok()) << array.status().to_string();
    array_ = std::move(*array);
    ctx_ = std::move(*IoContext::create(256));
    queue_ = std::move(*array_->attach(*ctx_));
    sb_ = array_->geometry().stripe_data_bytes();
  }
  TestIo& write(std::uint64_t offset, const std::vector<std::byte>& data) {
    auto buf =
        std::make_unique<AlignedBuffer>(std::move(*AlignedBuffer::allocate(data.size(), 4096)));
    std::memcpy(buf->data(), data.data(), data.size());
    auto io = std::make_unique<TestIo>();
    io->kind = IoKind::kWrite;
    io->offset = offset;
    io->len = static_cast<std::uint32_t>(data.size());
    io->buf = buf->data();
    queue_->submit(*io);
    bufs_.push_back(std::move(buf));
    ios_.push_back(std::move(io));
    return *ios_.back();
  }
  void wait_all() {
    while (!std::all_of(ios_.begin(), ios_.end(), [](const auto& io) { return io->done; }))
      ctx_->poll(true);
  }
  std::vector<std::byte> read(std::uint64_t offset, std::uint32_t len) {
    auto buf = AlignedBuffer::allocate(len, 4096);
    Status st = run_one(*queue_, IoKind::kRead, offset, len, buf->data());
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    return {buf->data(), buf->data() + len};
  }
  void TearDown() override {
    queue_.reset();
    holder_.queue.reset();
  }

  ArrayFiles files_;
  std::unique_ptr<ParityBackend> parity_;
  std::unique_ptr<Array> array_;
  std::unique_ptr<IoContext> ctx_;
  std::unique_ptr<ArrayQueue> queue_;
  std::uint64_t sb_ = 0;
  StripeHolder holder_;
  std::vector<std::unique_ptr<AlignedBuffer>> bufs_;
  std::vector<std::unique_ptr<TestIo>> ios_;
};

// A run takes its stripes one by one: while it waits for one, a later write of its queue to a
// stripe it has not reached yet must wait behind it (else the run would overwrite it), and a
// write elsewhere goes on.
TEST_F(RunCaseTest, ALaterWriteWaitsForARunStillTakingItsLocks) {
  make(RaidLevel::kRaid6, 5);  // 3 data strips of 4 KiB per stripe
  holder_.hold(*array_, 5 * sb_, random_bytes(4096, 1));
  const auto a = random_bytes(6 * sb_, 2);
  const auto b = random_bytes(sb_, 3);
  const auto c = random_bytes(4096, 4);
  const auto d = random_bytes(4096, 5);
  TestIo& run = write(3 * sb_, a);  // stripes 3..8: takes 3 and 4, waits for 5
  ctx_->poll(false);
  TestIo& whole = write(7 * sb_, b);        // a stripe the run has not reached
  TestIo& part = write(8 * sb_ + 4096, c);  // another one, partly
  TestIo& elsewhere = write(20 * sb_, d);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!elsewhere.done && std::chrono::steady_clock::now() < deadline)
    ctx_->poll(false);
  EXPECT_TRUE(elsewhere.done) << "a write to other stripes does not wait for the run";
  EXPECT_FALSE(run.done);
  EXPECT_FALSE(whole.done) << "parked behind the run";
  EXPECT_FALSE(part.done);

  holder_.release();
  wait_all();
  for (const auto& io : ios_)
    ASSERT_TRUE(io->status.is_ok()) << io->status.to_string();
  auto back = read(3 * sb_, static_cast<std::uint32_t>(6 * sb_));
  auto expect = a;
  std::memcpy(expect.data() + 4 * sb_, b.data(), sb_);
  std::memcpy(expect.data() + 5 * sb_ + 4096, c.data(), 4096);
  EXPECT_TRUE(back == expect) << "the later writes win over the run";
  const QueueStats st = queue_->stats();
  EXPECT_EQ(st.stripe_runs, 1u);
  EXPECT_EQ(st.run_stripes, 6u);
  queue_.reset();
  holder_.queue.reset();
  EXPECT_EQ(*array_->count_inconsistent_stripes(), 0u);
}

// A run that finds a member failed (and so the write-hole journal on) once it holds its locks
// splits into one operation per stripe, each of which writes its stripe degraded with a record.
TEST_F(RunCaseTest, ALockedRunThatFindsAFailedMemberSplitsAndJournals) {
  make(RaidLevel::kRaid5, 4);
  ASSERT_GT(array_->journal_state().area_bytes, 0u);
  ASSERT_EQ(array_->journal_state().policy, JournalPolicy::kDegradedOnly);
  holder_.hold(*array_, 5 * sb_, random_bytes(4096, 6));
  const auto a = random_bytes(6 * sb_, 7);
  TestIo& run = write(3 * sb_, a);
  ctx_->poll(false);
  ASSERT_TRUE(array_->fail_member(1, "test").is_ok());
  holder_.release();
  wait_all();
  ASSERT_TRUE(run.status.is_ok()) << run.status.to_string();
  const QueueStats st = queue_->stats();
  EXPECT_EQ(st.run_splits, 1u);
  EXPECT_EQ(st.stripe_runs, 0u);
  EXPECT_EQ(st.stripe_writes, 6u);
  // A record for each stripe whose parity member is alive.
  std::uint64_t recorded = 0;
  for (std::uint64_t s = 3; s < 9; ++s)
    recorded += array_->geometry().p_member(s) != 1 ? 1 : 0;
  EXPECT_EQ(st.journal_records, recorded);
  EXPECT_TRUE(read(3 * sb_, static_cast<std::uint32_t>(6 * sb_)) == a);
}

// A member that calls one stripe's write malformed fails that stripe's request only: the run's
// other stripes are written and acknowledged, and the member stays.
TEST_F(RunCaseTest, AMemberThatRefusesOneStripeFailsOnlyThatStripesRequest) {
  make(RaidLevel::kRaid5, 4);
  const std::uint64_t strip = 4096;
  files_.faulty[2]->fail_range(array_->member_data_offset() + 13 * strip, strip, EINVAL);
  std::vector<std::vector<std::byte>> data;
  for (std::uint64_t s = 10; s < 18; ++s) {
    data.push_back(random_bytes(sb_, 100 + s));
    write(s * sb_, data.back());  // one batch: one run of 8 stripes
  }
  wait_all();
  for (std::uint64_t s = 10; s < 18; ++s) {
    const TestIo& io = *ios_[s - 10];
    if (s == 13) {
      EXPECT_FALSE(io.status.is_ok()) << "the refused stripe's request fails";
    } else {
      ASSERT_TRUE(io.status.is_ok()) << "stripe " << s << ": " << io.status.to_string();
      EXPECT_TRUE(read(s * sb_, static_cast<std::uint32_t>(sb_)) == data[s - 10]) << s;
    }
  }
  EXPECT_EQ(array_->member_health(2), MemberHealth::kActive);
  EXPECT_EQ(queue_->stats().stripe_runs, 1u);
}

}  // namespace
}  // namespace graid::testing
