// Merged member I/O under the array (IoContextOptions::merge), randomized and checked byte for
// byte against a model: batches of large reads and writes, mostly running on from one another and
// starting and ending inside stripes, on strips from 4 KiB to 1 MiB, so that a request's strips
// on one member, and neighbouring requests' strips, go out as one vectored member I/O (reads on
// parity levels through the parity strips between them). Bad sectors appear under merged reads,
// and members fail while a batch is in flight.
#include <algorithm>
#include <cstring>

#include "array_harness.h"
#include "array_shape.h"

namespace graid::testing {
namespace {

constexpr std::uint32_t kSector = 512;

class ArrayMergeTest : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    const Shape s = GetParam();
    seed_ = shape_seed(0x3c6ef372u, s);
    parity_ = std::move(*make_parity_backend("cpu"));
    const std::uint64_t rows = std::max<std::uint64_t>(12, (4u << 20) / s.strip);
    member_bytes_ = (1u << 20) + rows * s.strip;
    auto devs = files_.open(s.members, member_bytes_, /*create=*/true);
    ASSERT_TRUE(devs.is_ok()) << devs.status().to_string();
    CreateOptions create;
    create.level = s.level;
    create.strip_bytes = s.strip;
    create.name = "merge";
    create.bitmap_region_bytes = 1u << 20;
    ArrayOptions options;
    options.parity = parity_.get();
    auto array = Array::create(std::move(*devs), create, options);
    ASSERT_TRUE(array.is_ok()) << array.status().to_string();
    array_ = std::move(*array);
    model_.assign(array_->capacity(), std::byte{0});
  }

  std::uint64_t seed_ = 0;
  ArrayFiles files_;
  std::unique_ptr<ParityBackend> parity_;
  std::uint64_t member_bytes_ = 0;
  std::unique_ptr<Array> array_;
  std::vector<std::byte> model_;
};

struct Extent {
  std::uint64_t offset;
  std::uint32_t len;
  bool overlaps(const Extent& o) const {
    return offset < o.offset + o.len && o.offset < offset + len;
  }
};

TEST_P(ArrayMergeTest, LargeRequestsMatchTheModelThroughFailures) {
  const Shape s = GetParam();
  SCOPED_TRACE(fmt::format("seed {}", seed_));
  std::mt19937_64 rng(seed_);
  auto ctx = IoContext::create(256);
  ASSERT_TRUE(ctx.is_ok());
  auto queue = array_->attach(**ctx);
  ASSERT_TRUE(queue.is_ok());
  const Geometry& g = array_->geometry();
  const std::uint64_t stripe = g.stripe_data_bytes();
  const std::uint64_t capacity = array_->capacity();
  const std::uint64_t max_len = std::min<std::uint64_t>(3 * stripe, 2u << 20);

  std::vector<std::uint32_t> to_fail;
  while (to_fail.size() < s.failures) {
    const auto m = static_cast<std::uint32_t>(rng() % s.members);
    const bool clash = std::any_of(to_fail.begin(), to_fail.end(), [&](std::uint32_t f) {
      return f == m || (s.level == RaidLevel::kRaid10 && f / 2 == m / 2);
    });
    if (!clash) to_fail.push_back(m);
  }
  constexpr int kRounds = 40;
  constexpr int kBatch = 10;
  const int fail_round = s.failures ? 20 + static_cast<int>(rng() % 10) : -1;
  // Bad sectors under merged reads, on levels that can repair them.
  const bool bad_sectors = g.redundancy() != Redundancy::kNone;
  auto span_buf = AlignedBuffer::allocate(2 * stripe, 4096);
  ASSERT_TRUE(span_buf.is_ok());

  std::vector<TestIo> ios(kBatch);
  std::vector<AlignedBuffer> bufs;
  for (int i = 0; i < kBatch; ++i)
    bufs.push_back(std::move(*AlignedBuffer::allocate(max_len, 4096)));
  std::uint64_t cursor = 0;
  for (int round = 0; round < kRounds; ++round) {
    if (bad_sectors && round == 5) {
      // A bad block on one member under a two-stripe read (for mirrors
      // read once per copy: requests take the copies in turn): each read merges them into a
      // larger member read, which meets the error; the array repairs it and the data is right.
      const std::uint64_t at = rng() % (capacity / stripe - 2) * stripe;
      const DataLocation loc = g.locate(at + g.strip_bytes() / 2);
      files_.faulty[loc.member]->bad_sectors(
          array_->member_data_offset() + loc.member_offset / 4096 * 4096, 4096);
      const std::uint32_t copies = g.redundancy() == Redundancy::kMirror ? g.copies() : 1;
      for (std::uint32_t c = 0; c < copies; ++c) {
        const auto len = static_cast<std::uint32_t>(2 * stripe);
        Status st = run_one(**queue, IoKind::kRead, at, len, span_buf->data());
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        ASSERT_EQ(std::memcmp(span_buf->data(), model_.data() + at, len), 0);
      }
      EXPECT_FALSE(files_.faulty[loc.member]->has_bad_sectors()) << "repaired";
      EXPECT_GT(array_->corrected_read_errors(loc.member), 0u);
    }
    std::vector<Extent> written, read;
    std::vector<TestIo*> batch;
    for (int i = 0; i < kBatch; ++i) {
      TestIo& io = ios[i];
      const std::uint64_t len = (1 + rng() % (max_len / kSector)) * kSector;
      std::uint64_t offset = rng() % 4 != 0 ? cursor : rng() % (capacity / kSector) * kSector;
      if (offset + len > capacity) offset = 0;
      const Extent e{offset, static_cast<std::uint32_t>(len)};
      const bool write = rng() % 2 == 0;
      const auto clash = [&](const std::vector<Extent>& v) {
        return std::any_of(v.begin(), v.end(), [&](const Extent& x) { return x.overlaps(e); });
      };
      if (clash(written) || (write && clash(read))) continue;
      io.kind = write ? IoKind::kWrite : IoKind::kRead;
      io.offset = e.offset;
      io.len = e.len;
      io.buf = bufs[i].data();
      io.flags = write && rng() % 8 == 0 ? kIoFua : 0;
      if (write) {
        for (std::uint32_t b = 0; b < e.len; b += 8) {
          const std::uint64_t v = rng();
          std::memcpy(io.buf + b, &v, 8);
        }
        written.push_back(e);
      } else {
        read.push_back(e);
      }
      cursor = e.offset + e.len;
      batch.push_back(&io);
    }
    if (round == fail_round) {
      // Members fail with the batch's first half in flight (a pulled drive, then an explicit
      // fail), and the second half comes after.
      const std::size_t half = batch.size() / 2;
      for (std::size_t i = 0; i < half; ++i) {
        batch[i]->done = false;
        (*queue)->submit(*batch[i]);
      }
      (*ctx)->poll(false);
      for (std::size_t i = 0; i < to_fail.size(); ++i) {
        if (i % 2 == 0) {
          files_.faulty[to_fail[i]]->vanish();
        } else {
          ASSERT_TRUE(array_->fail_member(to_fail[i], "test").is_ok());
        }
      }
      for (std::size_t i = half; i < batch.size(); ++i) {
        batch[i]->done = false;
        (*queue)->submit(*batch[i]);
      }
      while (std::any_of(batch.begin(), batch.end(), [](TestIo* io) { return !io->done; }))
        (*ctx)->poll(true);
    } else {
      run_all(**queue, batch);
    }
    for (TestIo* io : batch) {
      ASSERT_TRUE(io->status.is_ok())
          << "round " << round << " " << static_cast<int>(io->kind) << " [" << io->offset << ", +"
          << io->len << "): " << io->status.to_string();
      if (io->kind == IoKind::kWrite) {
        std::memcpy(model_.data() + io->offset, io->buf, io->len);
      } else {
        const auto bad = std::mismatch(io->buf, io->buf + io->len, model_.data() + io->offset);
        ASSERT_EQ(bad.first, io->buf + io->len)
            << "round " << round << ": read [" << io->offset << ", +" << io->len
            << ") differs from the model at array byte " << io->offset + (bad.first - io->buf);
      }
    }
  }
  EXPECT_EQ(array_->health(), s.failures ? ArrayHealth::kDegraded : ArrayHealth::kOptimal);

  // Read everything back in 1 MiB requests.
  constexpr std::uint32_t kChunk = 1u << 20;
  auto buf = AlignedBuffer::allocate(kChunk, 4096);
  for (std::uint64_t off = 0; off < capacity; off += kChunk) {
    const auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(kChunk, capacity - off));
    Status st = run_one(**queue, IoKind::kRead, off, len, buf->data());
    ASSERT_TRUE(st.is_ok()) << "read at " << off << ": " << st.to_string();
    const auto bad = std::mismatch(buf->data(), buf->data() + len, model_.data() + off);
    ASSERT_EQ(bad.first, buf->data() + len)
        << "array byte " << off + (bad.first - buf->data()) << " differs from the model";
  }
  const IoStats& io = (*ctx)->stats();
  EXPECT_GT(io.merged_ios, 0u) << "large requests went out as merged member I/O";
  // Faults are injected above the ring (FaultyMember): no merged I/O fails in the kernel.
  EXPECT_EQ(io.merge_splits, 0u);
  if (g.redundancy() == Redundancy::kParity && s.strip <= 8192) {
    EXPECT_GT(io.gap_bytes, 0u) << "reads went through parity strips";
  }
  auto inconsistent = array_->count_inconsistent_stripes();
  ASSERT_TRUE(inconsistent.is_ok()) << inconsistent.status().to_string();
  EXPECT_EQ(*inconsistent, 0u);
  queue->reset();
  ASSERT_TRUE(array_->stop().is_ok());
}

INSTANTIATE_TEST_SUITE_P(
    Strips, ArrayMergeTest,
    ::testing::Values(Shape{RaidLevel::kRaid0, 3, 4096, 0}, Shape{RaidLevel::kRaid1, 2, 16384, 1},
                      Shape{RaidLevel::kRaid10, 4, 4096, 1}, Shape{RaidLevel::kRaid5, 5, 4096, 0},
                      Shape{RaidLevel::kRaid5, 5, 4096, 1}, Shape{RaidLevel::kRaid5, 4, 65536, 1},
                      Shape{RaidLevel::kRaid5, 3, 1u << 20, 0},
                      Shape{RaidLevel::kRaid6, 6, 4096, 0}, Shape{RaidLevel::kRaid6, 6, 8192, 2},
                      Shape{RaidLevel::kRaid6, 5, 262144, 1}),
    shape_name);

}  // namespace
}  // namespace graid::testing
