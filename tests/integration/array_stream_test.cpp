// Writes that meet a locked stripe: the join into this queue's operation waiting for the lock,
// case by case (LockedStripeTest), and a model-based randomized test of the array engine under
// streaming submission (ArrayStreamTest). There, requests are submitted while earlier ones are
// in flight (as ublk and NBD frontends do), not in batches that complete together
// (array_model_test), so writes keep arriving at stripes whose lock another operation holds, and
// join this queue's operation waiting for the lock (coalesced_waiting).
//
// Two threads, each with its own IoContext and ArrayQueue, keep up to kDepth requests in flight
// over a small region (a few stripes, so nearly every write meets a locked stripe). The region is
// cut into runs of two blocks owned alternately by the threads: neighbouring runs of one stripe
// belong to different threads, so stripes are shared, bytes are not. A thread's writes to one
// run may overlap while in flight; the engine applies a queue's writes to a stripe in submission
// order, so the byte model is updated at submission. A read is only issued on a run with no
// write in flight, and no write is issued on a run while a read of it is in flight, so every
// read has one right answer. Some shapes lose a member halfway. At the end the region is read
// back and parity is checked.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include "array_harness.h"
#include "array_shape.h"

namespace graid::testing {
namespace {

constexpr std::uint32_t kSector = 512;
constexpr std::uint32_t kBlock = 4096;
constexpr std::uint32_t kRunBytes = 2 * kBlock;
constexpr int kThreads = 2;
constexpr int kDepth = 16;
constexpr int kRequestsPerThread = 2500;
constexpr std::uint64_t kRegionStripes = 6;

// A request that calls back into its thread's loop when it completes.
struct StreamIo final : ArrayIo {
  std::function<void(StreamIo&, Status)> done;
  std::uint64_t run = 0;
  void on_complete(Status s) override { done(*this, std::move(s)); }
};

class ArrayStreamTest : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    const Shape s = GetParam();
    seed_ = shape_seed(0xbb67ae85u, s);
    parity_ = std::move(*make_parity_backend("cpu"));
    auto devs = files_.open(s.members, (1u << 20) + 16ull * s.strip, /*create=*/true);
    ASSERT_TRUE(devs.is_ok()) << devs.status().to_string();
    CreateOptions create;
    create.level = s.level;
    create.strip_bytes = s.strip;
    create.name = "stream";
    create.bitmap_region_bytes = 1u << 20;
    ArrayOptions options;
    options.parity = parity_.get();
    auto array = Array::create(std::move(*devs), create, options);
    ASSERT_TRUE(array.is_ok()) << array.status().to_string();
    array_ = std::move(*array);
    const Geometry& g = array_->geometry();
    const std::uint64_t stripe =
        g.redundancy() == Redundancy::kParity ? g.stripe_data_bytes() : g.strip_bytes();
    region_ = std::min<std::uint64_t>(kRegionStripes * std::max<std::uint64_t>(stripe, kRunBytes),
                                      array_->capacity()) /
              kRunBytes * kRunBytes;
    model_.assign(region_, std::byte{0});
    runs_ = region_ / kRunBytes;
    writes_in_flight_.assign(runs_, 0);
    reads_in_flight_.assign(runs_, 0);
  }

  void worker(int t, std::uint64_t seed, bool fail_halfway) {
    std::mt19937_64 rng(seed);
    auto ctx = IoContext::create(256);
    ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
    auto queue = array_->attach(**ctx);
    ASSERT_TRUE(queue.is_ok());
    std::vector<StreamIo> ios(kDepth);
    std::vector<AlignedBuffer> bufs;
    std::vector<StreamIo*> idle;
    for (int i = 0; i < kDepth; ++i) {
      bufs.push_back(std::move(*AlignedBuffer::allocate(kRunBytes, 4096)));
      ios[i].buf = bufs.back().data();
      idle.push_back(&ios[i]);
    }
    std::vector<std::uint64_t> mine;
    for (std::uint64_t r = t; r < runs_; r += kThreads)
      mine.push_back(r);

    int submitted = 0;
    int errors = 0;
    auto on_done = [&](StreamIo& io, Status s) {
      idle.push_back(&io);
      if (!s.is_ok()) {
        ADD_FAILURE() << "thread " << t << ": " << static_cast<int>(io.kind) << " [" << io.offset
                      << ", +" << io.len << "): " << s.to_string() << " (seed " << seed_ << ")";
        ++errors;
        return;
      }
      if (io.kind == IoKind::kRead) {
        --reads_in_flight_[io.run];
        const auto mismatch = std::mismatch(io.buf, io.buf + io.len, model_.data() + io.offset);
        if (mismatch.first != io.buf + io.len) {
          ADD_FAILURE() << "thread " << t << ": read [" << io.offset << ", +" << io.len
                        << ") differs from the model at byte "
                        << io.offset + (mismatch.first - io.buf) << " (seed " << seed_ << ")";
          ++errors;
        }
      } else if (io.kind != IoKind::kFlush) {
        --writes_in_flight_[io.run];
      }
    };

    while ((submitted < kRequestsPerThread || idle.size() < ios.size()) && errors == 0) {
      if (fail_halfway && submitted >= kRequestsPerThread / 2) {
        files_.faulty[rng() % files_.faulty.size()]->vanish();
        fail_halfway = false;
      }
      // A burst of 1..4 submissions between polls: requests arrive while others are in flight.
      const int burst = 1 + static_cast<int>(rng() % 4);
      for (int b = 0; b < burst && !idle.empty() && submitted < kRequestsPerThread; ++b) {
        StreamIo& io = *idle.back();
        const std::uint64_t run = mine[rng() % mine.size()];
        const int dice = static_cast<int>(rng() % 100);
        const std::uint64_t first = rng() % (kRunBytes / kSector);
        const std::uint64_t sectors = 1 + rng() % (kRunBytes / kSector - first);
        io.run = run;
        io.offset = run * kRunBytes + first * kSector;
        io.len = static_cast<std::uint32_t>(sectors * kSector);
        io.flags = 0;
        io.done = on_done;
        if (dice < 4) {
          io.kind = IoKind::kFlush;
          io.offset = 0;
          io.len = 0;
        } else if (dice < 30) {
          if (writes_in_flight_[run] != 0) continue;  // no single right answer yet
          io.kind = IoKind::kRead;
          ++reads_in_flight_[run];
        } else {
          if (reads_in_flight_[run] != 0) continue;
          io.kind = dice < 36 ? IoKind::kWriteZeroes : IoKind::kWrite;
          if (io.kind == IoKind::kWrite) {
            if (dice % 8 == 0) io.flags = kIoFua;
            for (std::uint32_t i = 0; i < io.len; i += 8) {
              const std::uint64_t v = rng();
              std::memcpy(io.buf + i, &v, 8);
            }
            std::memcpy(model_.data() + io.offset, io.buf, io.len);
          } else {
            std::memset(model_.data() + io.offset, 0, io.len);
          }
          ++writes_in_flight_[run];
        }
        idle.pop_back();
        ++submitted;
        (*queue)->submit(io);
      }
      (**ctx).poll(idle.empty() || submitted == kRequestsPerThread);
    }
    while (idle.size() < ios.size())
      (**ctx).poll(true);
    EXPECT_EQ((*queue)->in_flight(), 0u);
    coalesced_waiting_ += (*queue)->stats().coalesced_waiting;
  }

  std::uint64_t seed_ = 0;
  ArrayFiles files_;
  std::unique_ptr<ParityBackend> parity_;
  std::unique_ptr<Array> array_;
  std::uint64_t region_ = 0;
  std::uint64_t runs_ = 0;
  std::vector<std::byte> model_;  // each run's bytes are touched by its owner thread only
  std::vector<int> writes_in_flight_, reads_in_flight_;  // per run, by its owner only
  std::atomic<std::uint64_t> coalesced_waiting_{0};
};

TEST_P(ArrayStreamTest, StreamedWritesToLockedStripesMatchTheModel) {
  const Shape s = GetParam();
  SCOPED_TRACE(fmt::format("seed {}", seed_));
  std::mt19937_64 rng(seed_);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t, seed = rng()] { worker(t, seed, t == 0 && s.failures > 0); });
  }
  for (auto& th : threads)
    th.join();
  if (HasFailure()) return;

  EXPECT_EQ(array_->health(), s.failures ? ArrayHealth::kDegraded : ArrayHealth::kOptimal);
  EXPECT_GT(coalesced_waiting_.load(), 0u) << "writes joined operations waiting for a lock";
  auto ctx = std::move(*IoContext::create(64));
  auto queue = std::move(*array_->attach(*ctx));
  auto buf = AlignedBuffer::allocate(region_, 4096);
  ASSERT_TRUE(
      run_one(*queue, IoKind::kRead, 0, static_cast<std::uint32_t>(region_), buf->data()).is_ok());
  const auto mismatch = std::mismatch(buf->data(), buf->data() + region_, model_.data());
  EXPECT_EQ(mismatch.first, buf->data() + region_)
      << "array byte " << mismatch.first - buf->data() << " differs from the model";
  queue.reset();
  auto bad = array_->count_inconsistent_stripes();
  ASSERT_TRUE(bad.is_ok()) << bad.status().to_string();
  EXPECT_EQ(*bad, 0u) << "stripes whose parity does not match their data";
}

INSTANTIATE_TEST_SUITE_P(
    Levels, ArrayStreamTest,
    ::testing::Values(Shape{RaidLevel::kRaid5, 5, 4096, 0}, Shape{RaidLevel::kRaid5, 4, 16384, 1},
                      Shape{RaidLevel::kRaid6, 5, 4096, 0}, Shape{RaidLevel::kRaid6, 6, 8192, 1},
                      Shape{RaidLevel::kRaid1, 2, 4096, 0}, Shape{RaidLevel::kRaid10, 4, 4096, 1}),
    shape_name);

// Arrays of file members with one queue on this thread, for the tests of writes that meet a
// locked stripe.
class LockedStripeTest : public ::testing::Test {
 protected:
  void SetUp() override { parity_ = std::move(*make_parity_backend("cpu")); }
  Result<std::unique_ptr<Array>> make(RaidLevel level, std::uint32_t n, std::uint32_t strip) {
    auto devs = files_.open(n, 4u << 20, true);
    if (!devs) return devs.status();
    CreateOptions c;
    c.level = level;
    c.strip_bytes = strip;
    c.name = "locked";
    ArrayOptions o;
    o.parity = parity_.get();
    return Array::create(std::move(*devs), c, o);
  }
  void attach(Array& array) {
    ctx_ = std::move(*IoContext::create(128));
    queue_ = std::move(*array.attach(*ctx_));
  }
  static std::vector<std::byte> pattern(std::size_t n, std::uint64_t seed) {
    return random_bytes(n, seed);
  }

  ArrayFiles files_;
  std::unique_ptr<ParityBackend> parity_;
  std::unique_ptr<IoContext> ctx_;
  std::unique_ptr<ArrayQueue> queue_;
};

// Writes that reach a stripe while another operation holds its lock join this queue's operation
// waiting for it: one read of the stripe, one parity computation and one set of member writes
// for all of them, with their pieces applied in submission order.
TEST_F(LockedStripeTest, WritesToALockedStripeJoinTheOperationWaitingForIt) {
  auto array = make(RaidLevel::kRaid6, 5, 4096);  // 3 data strips of 4 KiB per stripe
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  attach(**array);
  const std::uint64_t stripe = (*array)->geometry().stripe_data_bytes();
  const std::uint64_t at = 5 * stripe;
  const auto held = pattern(4096, 20);
  StripeHolder holder;
  holder.hold(**array, at, held);
  ASSERT_FALSE(holder.io.done);

  auto buf = AlignedBuffer::allocate(3 * 4096, 4096);
  const auto first = pattern(4096, 21);
  const auto second = pattern(4096, 22);
  const auto third = pattern(4096, 23);  // over `first`, submitted after it
  std::memcpy(buf->data(), first.data(), 4096);
  std::memcpy(buf->data() + 4096, second.data(), 4096);
  std::memcpy(buf->data() + 8192, third.data(), 4096);
  std::vector<TestIo> ios(3);
  const std::uint64_t offsets[3] = {at + 4096, at + 8192, at + 4096};
  for (int i = 0; i < 3; ++i) {
    ios[i].kind = IoKind::kWrite;
    ios[i].offset = offsets[i];
    ios[i].len = 4096;
    ios[i].buf = buf->data() + i * 4096;
  }
  queue_->submit(ios[0]);
  ctx_->poll(false);  // its operation starts and queues behind the holder
  queue_->submit(ios[1]);
  queue_->submit(ios[2]);
  ctx_->poll(false);
  for (const TestIo& io : ios)
    EXPECT_FALSE(io.done);
  EXPECT_EQ(queue_->stats().coalesced_waiting, 2u);

  holder.release();
  ASSERT_TRUE(holder.io.status.is_ok()) << holder.io.status.to_string();
  while (!std::all_of(ios.begin(), ios.end(), [](const TestIo& io) { return io.done; }))
    ctx_->poll(true);
  for (const TestIo& io : ios)
    ASSERT_TRUE(io.status.is_ok()) << io.status.to_string();
  const QueueStats st = queue_->stats();
  EXPECT_EQ(st.stripe_writes, 1u);
  EXPECT_EQ(st.reconstruct_write, 1u) << "strips 1 and 2 whole: only strip 0 is read";

  auto back = AlignedBuffer::allocate(stripe, 4096);
  ASSERT_TRUE(run_one(*queue_, IoKind::kRead, at, stripe, back->data()).is_ok());
  EXPECT_EQ(std::memcmp(back->data(), held.data(), 4096), 0);
  EXPECT_EQ(std::memcmp(back->data() + 4096, third.data(), 4096), 0) << "the later write wins";
  EXPECT_EQ(std::memcmp(back->data() + 8192, second.data(), 4096), 0);
  queue_.reset();
  holder.queue.reset();
  EXPECT_EQ(*(*array)->count_inconsistent_stripes(), 0u);
}

// Only the newest operation waiting on a stripe takes new writes: a write submitted after a
// whole-stripe discard that waits behind an earlier write must not join that earlier write, or
// the discard would zero it.
TEST_F(LockedStripeTest, AWriteNeverJoinsAWaitingOperationOlderThanTheStripesNewest) {
  auto array = make(RaidLevel::kRaid6, 5, 4096);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  attach(**array);
  const std::uint64_t stripe = (*array)->geometry().stripe_data_bytes();
  const std::uint64_t at = 7 * stripe;
  StripeHolder holder;
  holder.hold(**array, at, pattern(4096, 30));

  auto buf = AlignedBuffer::allocate(2 * 4096, 4096);
  const auto early = pattern(4096, 31);
  const auto late = pattern(4096, 32);
  std::memcpy(buf->data(), early.data(), 4096);
  std::memcpy(buf->data() + 4096, late.data(), 4096);
  TestIo write_early, discard, write_late;
  write_early.kind = IoKind::kWrite;
  write_early.offset = at + 4096;
  write_early.len = 4096;
  write_early.buf = buf->data();
  discard.kind = IoKind::kDiscard;
  discard.offset = at;
  discard.len = static_cast<std::uint32_t>(stripe);
  write_late.kind = IoKind::kWrite;
  write_late.offset = at;
  write_late.len = 4096;
  write_late.buf = buf->data() + 4096;
  TestIo* order[3] = {&write_early, &discard, &write_late};
  for (TestIo* io : order) {
    queue_->submit(*io);
    ctx_->poll(false);  // each starts (and waits) before the next is submitted
  }
  for (TestIo* io : order)
    EXPECT_FALSE(io->done);

  holder.release();
  while (!std::all_of(std::begin(order), std::end(order), [](TestIo* io) { return io->done; }))
    ctx_->poll(true);
  for (TestIo* io : order)
    ASSERT_TRUE(io->status.is_ok()) << io->status.to_string();
  auto back = AlignedBuffer::allocate(stripe, 4096);
  ASSERT_TRUE(run_one(*queue_, IoKind::kRead, at, stripe, back->data()).is_ok());
  const std::vector<std::byte> zeros(2 * 4096);
  EXPECT_EQ(std::memcmp(back->data(), late.data(), 4096), 0) << "the write after the discard";
  EXPECT_EQ(std::memcmp(back->data() + 4096, zeros.data(), zeros.size()), 0)
      << "the write before the discard is discarded";
  queue_.reset();
  holder.queue.reset();
  EXPECT_EQ(*(*array)->count_inconsistent_stripes(), 0u);
}

}  // namespace
}  // namespace graid::testing
