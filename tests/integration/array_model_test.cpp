// Model-based randomized test of the array engine, for every level and several shapes.
//
// Several threads, each with its own IoContext and ArrayQueue, submit batches of random reads,
// writes, discards and flushes of random (512-byte aligned, stripe-misaligned) extents. Each
// thread owns interleaved units of the address space that are a stripe and a half long, so
// neighbouring threads write different parts of the same stripes concurrently (stripe locks,
// read-modify-write under contention). A byte model of the array is updated as writes complete;
// every read is checked against it. At a random moment members fail (a pulled drive, or an
// explicit fail), I/O goes on degraded; at the end the whole array is read back, parity is
// checked, and the array is stopped, reassembled from its files and read back again.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "array_harness.h"
#include "array_shape.h"
#include "extent.h"
#include "recording_registry.h"
#ifdef GRAID_MODEL_TEST_CUDA
#include "kernels/cuda_backend.h"
#endif
#ifdef GRAID_FAKE_CUDA
#include "fake_cuda.h"
#endif
#ifdef GRAID_MODEL_TEST_BATCHER
#include "kernels/batcher_parity.h"
#endif

namespace graid::testing {
namespace {

constexpr std::uint32_t kSector = 512;

class ArrayModelTest : public ::testing::TestWithParam<Shape> {
 protected:
  static constexpr int kThreads = 3;
  static constexpr int kRounds = 120;
  static constexpr int kBatch = 12;

  void SetUp() override {
    const Shape s = GetParam();
    seed_ = shape_seed(0x6a09e667u, s);
#ifdef GRAID_MODEL_TEST_CUDA
    // The same test through the cuda backend (label gpu): skipped loudly without a device.
    auto cuda = make_cuda_backend();
    if (!cuda.is_ok()) GTEST_SKIP() << "cuda backend unavailable: " << cuda.status().to_string();
    host_memory_ = cuda->get();  // the engine's staging slabs are pinned for DMA
    cuda_ = cuda->get();
    parity_ = std::move(*cuda);
#else
    parity_ = std::move(*make_parity_backend("cpu"));
#endif
    // ~48 stripes per member, plus the 1 MiB metadata area.
    member_bytes_ = (1u << 20) + 48ull * s.strip;
    auto devs = files_.open(s.members, member_bytes_, /*create=*/true);
    ASSERT_TRUE(devs.is_ok()) << devs.status().to_string();
    CreateOptions create;
    create.level = s.level;
    create.strip_bytes = s.strip;
    create.name = "model";
    create.bitmap_region_bytes = 1u << 20;
    ArrayOptions options;
    options.parity = parity_.get();
    options.host_memory = host_memory_;
#ifdef GRAID_MODEL_TEST_ASYNC
    // Parity through an asynchronous engine on another thread (as the GPU batcher works), with
    // every 5th batch failing so the queue's redo path is exercised too.
    async_ = std::make_unique<ThreadedAsyncParity>(*parity_, 5);
    options.async_parity = async_.get();
#endif
#ifdef GRAID_MODEL_TEST_BATCHER
    // Parity through the kernels/ Batcher (jobs of all threads batched together, completions
    // posted back), over a device queue that is the ref backend on launcher threads; no job is
    // small enough for the CPU shortcut, so every job crosses threads.
    device_ = kernels::make_backend_device_queue(*ref_, 2);
    kernels::BatcherOptions bopts;
    bopts.cpu_below_bytes = 0;
    batcher_ = std::make_unique<kernels::Batcher>(*device_, *parity_, bopts);
    batcher_parity_ = std::make_unique<kernels::BatcherParity>(*batcher_);
    options.async_parity = batcher_parity_.get();
#endif
    auto array = Array::create(std::move(*devs), create, options);
    ASSERT_TRUE(array.is_ok()) << array.status().to_string();
    array_ = std::move(*array);
    model_.assign(array_->capacity(), std::byte{0});
  }

  // One worker thread: rounds of batches on this thread's units.
  void worker(int t, std::uint64_t seed, int fail_round, std::vector<std::uint32_t> to_fail) {
    std::mt19937_64 rng(seed);
    auto ctx = IoContext::create(256);
    ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
    auto queue = array_->attach(**ctx);
    ASSERT_TRUE(queue.is_ok());
    const Geometry& g = array_->geometry();
    const std::uint64_t unit = g.stripe_data_bytes() + g.stripe_data_bytes() / 2;
    const std::uint64_t units = array_->capacity() / unit;
    std::vector<TestIo> ios(kBatch);
    std::vector<AlignedBuffer> bufs;
    for (int i = 0; i < kBatch; ++i)
      bufs.push_back(std::move(*AlignedBuffer::allocate(unit, 4096)));

    for (int round = 0; round < kRounds; ++round) {
      if (round == fail_round) {
        for (std::size_t i = 0; i < to_fail.size(); ++i) {
          // Alternate a pulled drive (found by the engine's own I/O errors) and an explicit fail.
          if (i % 2 == 0) {
            files_.faulty[to_fail[i]]->vanish();
          } else {
            ASSERT_TRUE(array_->fail_member(to_fail[i], "test").is_ok());
          }
        }
      }
      // Extents written (or discarded) and read in this batch: a read never overlaps a write of
      // its batch, so every read has exactly one right answer.
      std::vector<Extent> written, read;
      std::vector<TestIo*> batch;
      for (int i = 0; i < kBatch; ++i) {
        TestIo& io = ios[i];
        const std::uint64_t u = t + kThreads * (rng() % (units / kThreads));
        const std::uint64_t unit_sectors = unit / kSector;
        const std::uint64_t first = rng() % unit_sectors;
        const std::uint64_t max_len =
            std::min<std::uint64_t>(unit_sectors - first, 3 * g.strip_bytes() / kSector);
        const std::uint64_t sectors = 1 + rng() % max_len;
        Extent e{u * unit + first * kSector, static_cast<std::uint32_t>(sectors * kSector)};
        const int dice = static_cast<int>(rng() % 100);
        io.offset = e.offset;
        io.len = e.len;
        io.buf = bufs[i].data();
        io.flags = 0;
        if (dice < 5) {
          io.kind = IoKind::kFlush;
          io.offset = 0;
          io.len = 0;
          io.buf = nullptr;
        } else if (std::any_of(written.begin(), written.end(),
                               [&](const Extent& w) { return overlaps(w, e); })) {
          continue;  // keep the batch's outcome deterministic
        } else if (dice < 45) {
          io.kind = IoKind::kRead;
          read.push_back(e);
        } else if (std::any_of(read.begin(), read.end(),
                               [&](const Extent& r) { return overlaps(r, e); })) {
          continue;
        } else {
          // Zeroing: a discard, or write-zeroes with or without kIoNoUnmap (tmpfs refuses
          // ZERO_RANGE, so the array falls back to written zeroes mid-run). Writes: some FUA,
          // some with a preflush.
          const int zeroing = static_cast<int>(rng() % 3);
          io.kind = dice >= 50     ? IoKind::kWrite
                    : zeroing == 0 ? IoKind::kDiscard
                                   : IoKind::kWriteZeroes;
          if (io.kind == IoKind::kWriteZeroes && zeroing == 2) io.flags = kIoNoUnmap;
          if (io.kind == IoKind::kWrite) {
            const int flag = static_cast<int>(rng() % 16);
            io.flags = flag < 2 ? kIoFua : flag < 3 ? kIoPreflush : 0;
            for (std::uint32_t b = 0; b < e.len; b += 8) {
              const std::uint64_t v = rng();
              std::memcpy(bufs[i].data() + b, &v, 8);
            }
          }
          written.push_back(e);
        }
        batch.push_back(&io);
      }
      run_all(**queue, batch);
      for (TestIo* io : batch) {
        ASSERT_TRUE(io->status.is_ok())
            << "thread " << t << " round " << round << " " << static_cast<int>(io->kind) << " ["
            << io->offset << ", +" << io->len << "): " << io->status.to_string();
        if (io->kind == IoKind::kWrite) {
          std::memcpy(model_.data() + io->offset, io->buf, io->len);
        } else if (io->kind == IoKind::kDiscard || io->kind == IoKind::kWriteZeroes) {
          std::memset(model_.data() + io->offset, 0, io->len);
        } else if (io->kind == IoKind::kRead) {
          const auto mismatch =
              std::mismatch(io->buf, io->buf + io->len, model_.data() + io->offset);
          ASSERT_EQ(mismatch.first, io->buf + io->len)
              << "thread " << t << " round " << round << ": read [" << io->offset << ", +"
              << io->len << ") differs from the model at array byte "
              << io->offset + (mismatch.first - io->buf) << " (seed " << seed << ")";
        }
      }
    }
    EXPECT_EQ((*queue)->in_flight(), 0u);
    fixed_buffer_ios_ += (*ctx)->stats().fixed_buffer_ios;
  }

  // Reads the whole array back through a fresh queue and compares with the model.
  void verify_all(const char* when) {
    auto ctx = IoContext::create(64);
    ASSERT_TRUE(ctx.is_ok());
    auto queue = array_->attach(**ctx);
    ASSERT_TRUE(queue.is_ok());
    const std::uint32_t chunk = 256 * 1024;
    auto buf = AlignedBuffer::allocate(chunk, 4096);
    for (std::uint64_t off = 0; off < array_->capacity(); off += chunk) {
      const auto len =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(chunk, array_->capacity() - off));
      Status st = run_one(**queue, IoKind::kRead, off, len, buf->data());
      ASSERT_TRUE(st.is_ok()) << when << ": read at " << off << ": " << st.to_string();
      const auto mismatch = std::mismatch(buf->data(), buf->data() + len, model_.data() + off);
      ASSERT_EQ(mismatch.first, buf->data() + len)
          << when << ": array byte " << off + (mismatch.first - buf->data())
          << " differs from the model (seed " << seed_ << ")";
    }
  }

  std::uint64_t seed_ = 0;
  ArrayFiles files_;
  RecordingRegistry registry_;                      // outlives the array and its queues
  std::atomic<std::uint64_t> fixed_buffer_ios_{0};  // the workers' rings, summed
  HostMemoryRegistry* host_memory_ = &registry_;
#ifdef GRAID_MODEL_TEST_CUDA
  CudaBackend* cuda_ = nullptr;  // parity_, when it is the cuda backend
#endif
  std::unique_ptr<ParityBackend> parity_;
  std::unique_ptr<ThreadedAsyncParity> async_;  // destroyed after the array
#ifdef GRAID_MODEL_TEST_BATCHER
  std::unique_ptr<ParityBackend> ref_ = std::move(*make_parity_backend("ref"));
  std::unique_ptr<kernels::DeviceQueue> device_;
  std::unique_ptr<kernels::Batcher> batcher_;
  std::unique_ptr<kernels::BatcherParity> batcher_parity_;
#endif
  std::uint64_t member_bytes_ = 0;
  std::unique_ptr<Array> array_;
  std::vector<std::byte> model_;
};

TEST_P(ArrayModelTest, RandomConcurrentIoWithFailuresAndReassembly) {
  const Shape s = GetParam();
  SCOPED_TRACE(fmt::format("seed {}", seed_));
  std::mt19937_64 rng(seed_);
  std::vector<std::uint32_t> to_fail;
  while (to_fail.size() < s.failures) {
    std::uint32_t m = static_cast<std::uint32_t>(rng() % s.members);
    // RAID10: fail members of different mirror pairs.
    const bool clash = std::any_of(to_fail.begin(), to_fail.end(), [&](std::uint32_t f) {
      return f == m || (s.level == RaidLevel::kRaid10 && f / 2 == m / 2);
    });
    if (!clash) to_fail.push_back(m);
  }
  const int fail_round = s.failures ? static_cast<int>(kRounds / 4 + rng() % (kRounds / 2)) : -1;

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t, seed = rng()] {
      worker(t, seed, t == 0 ? fail_round : -1, t == 0 ? to_fail : std::vector<std::uint32_t>{});
    });
  }
  for (auto& th : threads)
    th.join();
  if (HasFatalFailure()) return;

  EXPECT_EQ(array_->health(), s.failures ? ArrayHealth::kDegraded : ArrayHealth::kOptimal);
  if (async_ && s.level != RaidLevel::kRaid0 && s.level != RaidLevel::kRaid1 &&
      s.level != RaidLevel::kRaid10) {
    EXPECT_GT(async_->batches(), 0u) << "parity went through the asynchronous engine";
    EXPECT_GT(async_->failed(), 0u) << "and some batches failed and were redone";
  }
#ifdef GRAID_MODEL_TEST_BATCHER
  if (s.level == RaidLevel::kRaid5 || s.level == RaidLevel::kRaid6) {
    EXPECT_GT(batcher_->stats().device_jobs, 0u) << "parity went through the batcher's device";
  }
#endif
  verify_all("after the run");
  auto bad = array_->count_inconsistent_stripes();
  ASSERT_TRUE(bad.is_ok()) << bad.status().to_string();
  EXPECT_EQ(*bad, 0u) << "stripes whose parity does not match their data";

  ASSERT_TRUE(array_->stop().is_ok());
  array_.reset();
  // Every queue is gone: each staging slab it announced has been withdrawn, once.
  EXPECT_EQ(registry_.errors(), "");
  EXPECT_EQ(registry_.live(), 0u);
  EXPECT_EQ(registry_.removed(), registry_.added());
  if (host_memory_ == &registry_ &&
      (s.level == RaidLevel::kRaid5 || s.level == RaidLevel::kRaid6)) {
    EXPECT_GT(registry_.added(), 0u) << "parity levels stage through the pool's slabs";
  }
  if (s.level == RaidLevel::kRaid5 || s.level == RaidLevel::kRaid6) {
    EXPECT_GT(fixed_buffer_ios_.load(), 0u)
        << "staging slabs are registered in the rings: their member I/O uses fixed buffers";
  }
#ifdef GRAID_FAKE_CUDA
  // The cuda backend on the fake runtime: every slab was registered and is unregistered again,
  // no copy or launch touched memory it should not, and parity ran on the "device" with inputs
  // taken straight from the registered slabs (not all through the backend's staging).
  EXPECT_EQ(fake_cuda::counters().registered, 0u);
  EXPECT_EQ(fake_cuda::take_violations(), "");
  if (s.level == RaidLevel::kRaid5 || s.level == RaidLevel::kRaid6) {
    const CudaBackendStats cs = cuda_->stats();
    EXPECT_GT(cs.device_batches, 0u);
    EXPECT_EQ(cs.cpu_batches, 0u);
    // Unregistered, every chunk byte is staged (ratio ~1); measured with the slabs registered:
    // 0.04-0.3 (what is left is the application's own buffers, written without a copy).
    EXPECT_LT(cs.staged_bytes * 2, cs.bytes_to_device + cs.bytes_from_device)
        << "chunks in registered slabs move without staging";
  }
#endif
  auto devs = files_.open(s.members, member_bytes_, /*create=*/false);
  ASSERT_TRUE(devs.is_ok()) << devs.status().to_string();
  ArrayOptions options;
  options.parity = parity_.get();
  options.host_memory = host_memory_;
  options.async_parity = async_.get();
#ifdef GRAID_MODEL_TEST_BATCHER
  options.async_parity = batcher_parity_.get();
#endif
  AssembleReport report;
  auto array = Array::assemble(std::move(*devs), options, {}, &report);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  array_ = std::move(*array);
  EXPECT_TRUE(report.was_clean);
  EXPECT_EQ(report.failed_members.size(), s.failures);
  for (std::uint32_t m : to_fail)
    EXPECT_EQ(array_->member_health(m), MemberHealth::kFailed);
  verify_all("after reassembly");
}

INSTANTIATE_TEST_SUITE_P(
    Levels, ArrayModelTest,
    ::testing::Values(Shape{RaidLevel::kRaid0, 3, 16384, 0}, Shape{RaidLevel::kRaid1, 2, 4096, 0},
                      Shape{RaidLevel::kRaid1, 3, 16384, 2}, Shape{RaidLevel::kRaid10, 4, 4096, 0},
                      Shape{RaidLevel::kRaid10, 6, 16384, 2}, Shape{RaidLevel::kRaid5, 3, 4096, 0},
                      Shape{RaidLevel::kRaid5, 5, 16384, 0}, Shape{RaidLevel::kRaid5, 4, 4096, 1},
                      Shape{RaidLevel::kRaid5, 6, 65536, 1}, Shape{RaidLevel::kRaid6, 4, 4096, 0},
                      Shape{RaidLevel::kRaid6, 6, 16384, 0}, Shape{RaidLevel::kRaid6, 5, 4096, 2},
                      Shape{RaidLevel::kRaid6, 7, 65536, 1}, Shape{RaidLevel::kRaid6, 6, 16384, 2}),
    shape_name);

}  // namespace
}  // namespace graid::testing
