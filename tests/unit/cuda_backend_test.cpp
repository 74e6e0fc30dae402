// The cuda backend on a real GPU (label `gpu`): device results byte-identical to `ref` over random
// batches of mixed shapes, through staging, registered memory and mapped memory, from several
// threads; failover under injected CUDA faults, also through the batcher. Without a GPU every
// device test skips loudly (GTEST_SKIP with the reason); the no-device test runs everywhere and
// checks the error value a GPU-less machine must get.
//
// Built a second time as cuda_backend_fake_test (GRAID_FAKE_CUDA) against the fake CUDA runtime
// in tests/fake_cuda: every test then runs in CI on the CPU, the fake checking each copy and each
// pointer a launch dereferences; a few tests below exist only there (driver refusals, device
// memory running out, no device at all).

#include "kernels/cuda_backend.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "graid/buffer.h"
#include "graid/parity.h"
#include "kernels/batcher.h"
#include "parity/stripe_buffers.h"
#ifdef GRAID_FAKE_CUDA
#include "fake_cuda.h"
#include "kernels/cuda_bench_support.h"
#endif

namespace graid {
namespace {

using parity_testing::fill_pseudo_random;
using parity_testing::StripeBuffers;

// A random job on its own stripe, with a ref twin; both start from the same bytes.
struct Case {
  StripeBuffers dev;
  StripeBuffers ref;
  StripeJob dev_job;
  StripeJob ref_job;
};

StripeBuffers buffers(std::uint32_t chunks, std::size_t len, std::uint64_t seed) {
  Result<StripeBuffers> made = StripeBuffers::make(chunks, len);
  EXPECT_TRUE(made.is_ok()) << made.status().to_string();
  StripeBuffers s = std::move(made).value();
  for (std::uint32_t c = 0; c < chunks; ++c)
    fill_pseudo_random(s.bytes(c), seed * 53 + c);
  return s;
}

std::unique_ptr<Case> random_case(std::mt19937_64& rng, std::uint64_t seed) {
  const ParityScheme scheme = rng() % 2 ? ParityScheme::kPQ : ParityScheme::kP;
  const auto k = static_cast<std::uint32_t>(2 + rng() % 30);
  static const std::size_t lens[] = {1, 17, 64, 4096, 4097, 8192 + 15, 65536, 65536 + 100};
  const std::size_t len = lens[rng() % std::size(lens)];
  const std::uint32_t chunks = k + (scheme == ParityScheme::kPQ ? 2 : 1);
  auto c =
      std::make_unique<Case>(Case{buffers(chunks, len, seed), buffers(chunks, len, seed), {}, {}});
  const auto op = static_cast<ParityOp>(rng() % 3);
  if (op != ParityOp::kEncode) {
    StripeJob enc = c->dev.job(ParityOp::kEncode, scheme, k, len);
    EXPECT_TRUE(make_ref_backend()->execute(std::span(&enc, 1)).is_ok());
    if (op == ParityOp::kVerify && rng() % 2) c->dev.bytes(0)[len - 1] ^= std::byte{1};
    for (std::uint32_t i = 0; i < chunks; ++i)
      std::memcpy(c->ref.bytes(i).data(), c->dev.bytes(i).data(), len);
  }
  c->dev_job = c->dev.job(op, scheme, k, len);
  c->ref_job = c->ref.job(op, scheme, k, len);
  if (op == ParityOp::kReconstruct) {
    const std::uint8_t count = scheme == ParityScheme::kPQ ? 1 + rng() % 2 : 1;
    std::array<std::uint8_t, 2> m{static_cast<std::uint8_t>(rng() % chunks), 0};
    do {
      m[1] = static_cast<std::uint8_t>(rng() % chunks);
    } while (count == 2 && m[1] == m[0]);
    for (StripeJob* j : {&c->dev_job, &c->ref_job}) {
      j->missing_count = count;
      j->missing = m;
    }
    for (std::uint8_t i = 0; i < count; ++i)
      std::memset(c->dev.bytes(m[i]).data(), 0xee, len);  // the device must not read these
  }
  return c;
}

::testing::AssertionResult matches_ref(Case& c) {
  if (!make_ref_backend()->execute(std::span(&c.ref_job, 1)).is_ok())
    return ::testing::AssertionFailure() << "ref failed";
  for (std::uint32_t i = 0; i < c.dev.chunks(); ++i) {
    if (std::memcmp(c.dev.bytes(i).data(), c.ref.bytes(i).data(), c.dev.chunk_size()) != 0) {
      return ::testing::AssertionFailure()
             << "chunk " << i << " differs (k=" << c.dev_job.k << " len=" << c.dev_job.len << ")";
    }
  }
  if (c.dev_job.parity_ok != c.ref_job.parity_ok)
    return ::testing::AssertionFailure() << "parity_ok differs";
  return ::testing::AssertionSuccess();
}

// Registered host memory for the registered/mapped tests: one page-aligned pool, registered once
// (cudaHostRegister works on whole pages, so small heap buffers sharing a page cannot each be
// registered). Cases placed in it run from the pool and are copied back before comparing.
struct Pool {
  AlignedBuffer buf;
  std::size_t used = 0;

  static constexpr std::size_t kBytes = std::size_t{96} << 20;
  // Points `c`'s device job at a copy of its chunks in the pool; false when the pool is full.
  // `gap`: a cache line between chunks; without it chunks are packed back to back (as buffers
  // of a staging slab are), so their copies can merge.
  bool place(Case& c, bool gap = true) {
    const std::size_t stride =
        (c.dev.chunk_size() + (gap ? 2 : 1) * kChunkAlign - 1) / kChunkAlign * kChunkAlign;
    if (used + stride * c.dev.chunks() > buf.size()) return false;
    for (std::uint32_t i = 0; i < c.dev.chunks(); ++i) {
      std::memcpy(buf.data() + used, c.dev.bytes(i).data(), c.dev.chunk_size());
      c.dev_job.chunk[i] = buf.view(used, c.dev.chunk_size());
      used += stride;
    }
    return true;
  }
  static void copy_back(Case& c) {
    for (std::uint32_t i = 0; i < c.dev.chunks(); ++i)
      std::memcpy(c.dev.bytes(i).data(), c.dev_job.chunk[i].data(), c.dev.chunk_size());
  }
};

std::unique_ptr<Pool> registered_pool(CudaBackend& backend) {
  auto pool = std::make_unique<Pool>();
  Result<AlignedBuffer> buf = AlignedBuffer::allocate(Pool::kBytes, 4096);
  EXPECT_TRUE(buf.is_ok());
  if (!buf.is_ok()) return nullptr;
  pool->buf = std::move(buf).value();
  const Status st = backend.add_region(pool->buf.span());
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return st.is_ok() ? std::move(pool) : nullptr;
}

// Runs `rounds` random batches through `backend` and compares each job with ref. With a pool,
// every other job runs from registered memory, so one batch mixes both transfer paths.
void random_batches(ParityBackend& backend, int rounds, std::uint64_t seed, Pool* pool = nullptr) {
  std::mt19937_64 rng(seed);
  for (int r = 0; r < rounds; ++r) {
    if (pool != nullptr) pool->used = 0;
    std::vector<std::unique_ptr<Case>> cases;
    std::vector<bool> pooled;
    std::vector<StripeJob> jobs;
    const int n = 1 + static_cast<int>(rng() % 64);
    for (int i = 0; i < n; ++i) {
      cases.push_back(random_case(rng, seed * 100000 + r * 100 + i));
      pooled.push_back(pool != nullptr && i % 2 == 0 && pool->place(*cases.back()));
      jobs.push_back(cases.back()->dev_job);
    }
    const Status st = backend.execute(jobs);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    for (int i = 0; i < n; ++i) {
      if (pooled[i]) Pool::copy_back(*cases[i]);
      cases[i]->dev_job.parity_ok = jobs[i].parity_ok;
      EXPECT_TRUE(matches_ref(*cases[i])) << "round " << r << " job " << i;
    }
  }
}

#ifdef GRAID_FAKE_CUDA
// After the whole run: nothing the fake caught, nothing left registered or allocated.
class FakeCudaEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    EXPECT_EQ(fake_cuda::take_violations(), "");
    const fake_cuda::Counters c = fake_cuda::counters();
    EXPECT_EQ(c.registered, 0u) << "host regions left registered";
    EXPECT_EQ(c.device_allocs, 0u) << "device memory not freed";
    EXPECT_EQ(c.pinned_allocs, 0u) << "pinned memory not freed";
  }
};
const auto* const kFakeEnvironment = ::testing::AddGlobalTestEnvironment(new FakeCudaEnvironment);
#endif

TEST(CudaNoDevice, AnswersWithAValueNotACrash) {
#ifdef GRAID_FAKE_CUDA
  fake_cuda::set_knobs({.devices = 0});
  struct Restore {
    ~Restore() { fake_cuda::set_knobs({}); }
  } restore;
#endif
  Result<std::unique_ptr<CudaBackend>> b = make_cuda_backend();
  if (b.is_ok()) {
    EXPECT_EQ((*b)->name(), "cuda");
    return;
  }
  // The error a machine without a GPU or driver gets; the binary must not need libcudart.so or
  // libcuda.so to get this far.
  EXPECT_EQ(b.status().code(), Errc::kUnsupported) << b.status().to_string();
  EXPECT_EQ(b.status().message().rfind("no CUDA device: ", 0), 0u) << b.status().message();
  EXPECT_FALSE(cuda_devices().is_ok());
  std::unique_ptr<ParityBackend> preferred = make_preferred_parity_backend();
  ASSERT_NE(preferred, nullptr);
  EXPECT_EQ(preferred->name(), "cpu");
  std::fprintf(stderr, "[   NOTE   ] no GPU here (%s): the device tests below skip\n",
               b.status().message().c_str());
}

class CudaDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<CudaBackend>> b = make_cuda_backend(options());
    if (!b.is_ok()) GTEST_SKIP() << "GPU test skipped: " << b.status().to_string();
    backend_ = std::move(b).value();
  }
  virtual CudaBackendOptions options() { return {}; }
  // Declared first so it outlives backend_, which unregisters it on destruction.
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<CudaBackend> backend_;
};

TEST_F(CudaDevice, ReportsItsDevice) {
  const CudaDeviceInfo& d = backend_->device_info();
  EXPECT_FALSE(d.name.empty());
  EXPECT_GT(d.sm_count, 0);
  EXPECT_GT(d.total_memory, 0u);
  EXPECT_GT(d.driver_version, 0);
  Result<std::vector<CudaDeviceInfo>> all = cuda_devices();
  ASSERT_TRUE(all.is_ok());
  EXPECT_FALSE(all->empty());
  std::fprintf(stderr, "[   INFO   ] %s, %s, %d SMs, cc %d.%d, %zu MiB, driver %d, ~%.0f GB/s\n",
               d.name.c_str(), d.pci_bus_id.c_str(), d.sm_count, d.compute_major, d.compute_minor,
               d.total_memory >> 20, d.driver_version, d.peak_memory_gbps());
}

TEST_F(CudaDevice, StagedBatchesMatchRef) {
  random_batches(*backend_, 12, 1);
  EXPECT_FALSE(backend_->dead());
  EXPECT_GT(backend_->stats().device_batches, 0u);
  EXPECT_EQ(backend_->stats().cpu_batches, 0u);
}

TEST_F(CudaDevice, RegisteredMemoryBatchesMatchRef) {
  pool_ = registered_pool(*backend_);
  ASSERT_NE(pool_, nullptr);
  Pool* pool = pool_.get();
  random_batches(*backend_, 8, 2, pool);
  EXPECT_EQ(backend_->stats().cpu_batches, 0u);
}

class CudaMapped : public CudaDevice {
  CudaBackendOptions options() override {
    CudaBackendOptions o;
    o.transfer = CudaBackendOptions::Transfer::kMapped;
    return o;
  }
};

TEST_F(CudaMapped, MappedMemoryBatchesMatchRef) {
  pool_ = registered_pool(*backend_);
  ASSERT_NE(pool_, nullptr);
  Pool* pool = pool_.get();
  // Mixed batches (some chunks unregistered) take the copy path; all-pooled ones are zero-copy.
  random_batches(*backend_, 8, 3, pool);
  std::mt19937_64 rng(33);
  for (int r = 0; r < 4; ++r) {
    pool->used = 0;
    std::vector<std::unique_ptr<Case>> cases;
    std::vector<StripeJob> jobs;
    for (int i = 0; i < 16; ++i) {
      cases.push_back(random_case(rng, 3000 + r * 100 + i));
      ASSERT_TRUE(pool->place(*cases.back()));
      jobs.push_back(cases.back()->dev_job);
    }
    const std::uint64_t to_device_before = backend_->stats().bytes_to_device;
    ASSERT_TRUE(backend_->execute(jobs).is_ok());
    // Zero-copy: only the descriptor header crossed by copy.
    EXPECT_LT(backend_->stats().bytes_to_device - to_device_before, 64u * 1024u);
    for (int i = 0; i < 16; ++i) {
      Pool::copy_back(*cases[i]);
      cases[i]->dev_job.parity_ok = jobs[i].parity_ok;
      EXPECT_TRUE(matches_ref(*cases[i])) << "round " << r << " job " << i;
    }
  }
  EXPECT_EQ(backend_->stats().cpu_batches, 0u);
}

// The backend with another constant multiply than the default log/exp tables.
template <kernels::GfMul M>
class CudaGfMul : public CudaDevice {
  CudaBackendOptions options() override {
    CudaBackendOptions o;
    o.gf_mul = M;
    return o;
  }
};
using CudaBitSerial = CudaGfMul<kernels::GfMul::kBitSerial>;
using CudaNibble = CudaGfMul<kernels::GfMul::kNibble>;

TEST_F(CudaBitSerial, TableFreeMultiplyBatchesMatchRef) {
  random_batches(*backend_, 12, 5);
  EXPECT_EQ(backend_->stats().cpu_batches, 0u);
}

TEST_F(CudaNibble, NibbleTableMultiplyBatchesMatchRef) {
  random_batches(*backend_, 12, 6);
  EXPECT_EQ(backend_->stats().cpu_batches, 0u);
}

TEST_F(CudaDevice, RemovedRegionIsStagedAgain) {
  pool_ = registered_pool(*backend_);
  ASSERT_NE(pool_, nullptr);
  Pool* pool = pool_.get();
  std::mt19937_64 rng(44);
  auto run_pooled = [&](std::uint64_t seed) -> std::uint64_t {
    pool->used = 0;
    std::vector<std::unique_ptr<Case>> cases;
    std::vector<StripeJob> jobs;
    for (int i = 0; i < 8; ++i) {
      cases.push_back(random_case(rng, seed + i));
      EXPECT_TRUE(pool->place(*cases.back()));
      jobs.push_back(cases.back()->dev_job);
    }
    const std::uint64_t staged_before = backend_->stats().staged_bytes;
    EXPECT_TRUE(backend_->execute(jobs).is_ok());
    for (int i = 0; i < 8; ++i) {
      Pool::copy_back(*cases[i]);
      cases[i]->dev_job.parity_ok = jobs[i].parity_ok;
      EXPECT_TRUE(matches_ref(*cases[i])) << "job " << i;
    }
    return backend_->stats().staged_bytes - staged_before;
  };
  EXPECT_EQ(run_pooled(5000), 0u) << "registered chunks move by DMA, not through staging";
  backend_->remove_region(pool->buf.span());
  EXPECT_GT(run_pooled(6000), 0u) << "after removal the same memory is staged";
  // Registering it again is accepted (it was really unregistered).
  EXPECT_TRUE(backend_->add_region(pool->buf.span()).is_ok());
}

// All chunks registered: each direction's copies go out in one cudaMemcpyBatchAsync, whether the
// chunks are spread out or packed (then merged first).
TEST_F(CudaDevice, OneBatchedCopyCallPerDirection) {
  pool_ = registered_pool(*backend_);
  ASSERT_NE(pool_, nullptr);
  Pool* pool = pool_.get();
  std::mt19937_64 rng(77);
  for (bool gap : {true, false}) {
    pool->used = 0;
    std::vector<std::unique_ptr<Case>> cases;
    std::vector<StripeJob> jobs;
    for (int i = 0; i < 16; ++i) {
      cases.push_back(random_case(rng, 7000 + i + (gap ? 0 : 100)));
      ASSERT_TRUE(pool->place(*cases.back(), gap));
      jobs.push_back(cases.back()->dev_job);
    }
    const std::uint64_t calls_before = backend_->stats().copy_calls;
    ASSERT_TRUE(backend_->execute(jobs).is_ok());
    EXPECT_EQ(backend_->stats().copy_calls - calls_before, 2u)
        << "one batched copy call each way (gap " << gap << "); more means the driver refused "
        << "cudaMemcpyBatchAsync (see the log) and the backend copied chunk by chunk";
    for (int i = 0; i < 16; ++i) {
      Pool::copy_back(*cases[i]);
      cases[i]->dev_job.parity_ok = jobs[i].parity_ok;
      EXPECT_TRUE(matches_ref(*cases[i])) << "gap " << gap << " job " << i;
    }
  }
  EXPECT_EQ(backend_->stats().cpu_batches, 0u);
}

class CudaPerChunkCopies : public CudaDevice {
  CudaBackendOptions options() override {
    CudaBackendOptions o;
    o.batched_copies = false;
    return o;
  }
};

TEST_F(CudaPerChunkCopies, StagedAndRegisteredBatchesMatchRef) {
  pool_ = registered_pool(*backend_);
  ASSERT_NE(pool_, nullptr);
  Pool* pool = pool_.get();
  random_batches(*backend_, 6, 8, pool);
  EXPECT_EQ(backend_->stats().cpu_batches, 0u);
}

// Pieces of 256 KiB alternating between two streams: every batch of more than one piece is
// pipelined; results must be exactly those of one piece at a time.
class CudaPipelined : public CudaDevice {
  CudaBackendOptions options() override {
    CudaBackendOptions o;
    o.pipeline_piece_bytes = 256 * 1024;
    return o;
  }
};

TEST_F(CudaPipelined, PipelinedPiecesMatchRef) {
  pool_ = registered_pool(*backend_);
  ASSERT_NE(pool_, nullptr);
  random_batches(*backend_, 8, 41, pool_.get());
  const CudaBackendStats st = backend_->stats();
  EXPECT_EQ(st.device_batches, 8u);
  EXPECT_GT(st.launches, 2 * st.device_batches) << "batches went in several pieces";
  EXPECT_EQ(st.cpu_batches, 0u);
}

class CudaSmallArena : public CudaDevice {
  CudaBackendOptions options() override {
    CudaBackendOptions o;
    o.max_arena_bytes = 1 << 20;  // forces batches into pieces
    return o;
  }
};

TEST_F(CudaSmallArena, BatchesLargerThanTheArenaRunInPieces) {
  random_batches(*backend_, 4, 4);
  EXPECT_GT(backend_->stats().launches, 4u);
}

TEST_F(CudaDevice, ConcurrentCallersMatchRef) {
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      random_batches(*backend_, 4, 10 + t);
      if (::testing::Test::HasFailure()) bad.fetch_add(1);
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(bad.load(), 0);
}

// Fails the n-th time `step` is reached once armed (arming after a first clean batch makes sure
// the device did real work before it "died").
struct FaultAt {
  std::string step;
  int at;
  std::shared_ptr<std::atomic<bool>> armed = std::make_shared<std::atomic<bool>>(true);
  std::shared_ptr<std::atomic<int>> seen = std::make_shared<std::atomic<int>>(0);
  bool operator()(std::string_view s) const {
    return armed->load() && s == step && seen->fetch_add(1) + 1 == at;
  }
};

// A sticky fault in the middle of a pipelined batch (one piece done, one in flight): the pieces
// not completed are redone on the cpu, and every job ends right.
TEST(CudaFailover, FaultMidPipelineRedoesTheRestOnTheCpu) {
  for (const char* where : {"launch", "h2d", "sync"}) {
    CudaBackendOptions o;
    o.pipeline_piece_bytes = 64 * 1024;
    FaultAt fault{where, 3};
    o.fault_hook = fault;
    Result<std::unique_ptr<CudaBackend>> b = make_cuda_backend(o);
    if (!b.is_ok()) GTEST_SKIP() << "GPU test skipped: " << b.status().to_string();
    std::mt19937_64 rng(55);
    std::vector<std::unique_ptr<Case>> cases;
    std::vector<StripeJob> jobs;
    for (int i = 0; i < 24; ++i) {
      cases.push_back(std::make_unique<Case>(
          Case{buffers(10, 32768, 2000 + i), buffers(10, 32768, 2000 + i), {}, {}}));
      Case& c = *cases.back();
      c.dev_job = c.dev.job(ParityOp::kEncode, ParityScheme::kPQ, 8, 32768);
      c.ref_job = c.ref.job(ParityOp::kEncode, ParityScheme::kPQ, 8, 32768);
      jobs.push_back(c.dev_job);
    }
    ASSERT_TRUE((*b)->execute(jobs).is_ok()) << where;
    for (auto& c : cases)
      EXPECT_TRUE(matches_ref(*c)) << where;
    EXPECT_TRUE((*b)->dead()) << where;
    EXPECT_EQ((*b)->stats().cpu_batches, 1u) << where;
    EXPECT_GE((*b)->stats().launches, 1u) << where << ": some pieces completed on the device";
  }
}

TEST(CudaFailover, StickyErrorRedoesTheBatchOnTheCpu) {
  for (const char* where : {"h2d", "launch", "d2h", "sync"}) {
    CudaBackendOptions o;
    FaultAt fault{where, 1};
    fault.armed->store(false);
    o.fault_hook = fault;
    Result<std::unique_ptr<CudaBackend>> b = make_cuda_backend(o);
    if (!b.is_ok()) GTEST_SKIP() << "GPU test skipped: " << b.status().to_string();
    random_batches(**b, 1, 20);
    EXPECT_FALSE((*b)->dead()) << where;
    fault.armed->store(true);
    random_batches(**b, 4, 21);  // the first of these dies at `where` and is redone on the cpu
    EXPECT_TRUE((*b)->dead()) << where;
    EXPECT_EQ((*b)->stats().device_batches, 1u) << where;
    EXPECT_EQ((*b)->stats().cpu_batches, 4u) << where;
  }
}

TEST(CudaFailover, WithoutFallbackTheErrorIsReturned) {
  CudaBackendOptions o;
  o.fallback_to_cpu = false;
  o.fault_hook = FaultAt{"launch", 1};
  Result<std::unique_ptr<CudaBackend>> b = make_cuda_backend(o);
  if (!b.is_ok()) GTEST_SKIP() << "GPU test skipped: " << b.status().to_string();
  std::mt19937_64 rng(5);
  auto c = random_case(rng, 5);
  std::vector<StripeJob> jobs{c->dev_job};
  const Status st = (*b)->execute(jobs);
  EXPECT_EQ(st.code(), Errc::kIoError) << st.to_string();
  EXPECT_TRUE((*b)->dead());
}

// The batcher over the cuda backend (fallback off, so the batcher does the failover), with the
// device dying at its 3rd launch while four threads submit.
class BatchedCase final : public kernels::BatchedJob {
 public:
  explicit BatchedCase(std::unique_ptr<Case> c) : c_(std::move(c)) { job = c_->dev_job; }
  void on_done(Status status) override {
    ok_ = status.is_ok();
    done_.fetch_add(1);
  }
  bool check() {
    c_->dev_job.parity_ok = job.parity_ok;
    return ok_ && done_.load() == 1 && matches_ref(*c_);
  }
  int done() const { return done_.load(); }

 private:
  std::unique_ptr<Case> c_;
  bool ok_ = false;
  std::atomic<int> done_{0};
};

TEST(CudaFailover, BatcherLosesNoJobWhenTheDeviceDies) {
  CudaBackendOptions o;
  o.fallback_to_cpu = false;
  o.fault_hook = FaultAt{"launch", 3};
  Result<std::unique_ptr<CudaBackend>> b = make_cuda_backend(o);
  if (!b.is_ok()) GTEST_SKIP() << "GPU test skipped: " << b.status().to_string();
  std::unique_ptr<kernels::DeviceQueue> queue = kernels::make_backend_device_queue(**b, 2);
  std::unique_ptr<ParityBackend> cpu = make_cpu_backend();
  kernels::BatcherOptions bo;
  bo.cpu_below_bytes = 8 * 1024;
  std::atomic<int> bad{0};
  {
    kernels::Batcher batcher(*queue, *cpu, bo);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(100 + t);
        kernels::CompletionQueue cq;
        std::vector<std::unique_ptr<BatchedCase>> jobs;
        for (int i = 0; i < 50; ++i) {
          jobs.push_back(std::make_unique<BatchedCase>(random_case(rng, t * 1000 + i)));
          batcher.submit(*jobs.back(), cq);
        }
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        std::size_t done = 0;
        while (done < jobs.size() && std::chrono::steady_clock::now() < give_up)
          done += cq.drain();
        for (auto& j : jobs) {
          if (!j->check()) bad.fetch_add(1);
        }
      });
    }
    for (auto& th : threads)
      th.join();
    EXPECT_EQ(batcher.stats().device_failures, 1u);
  }
  EXPECT_EQ(bad.load(), 0);
  EXPECT_TRUE((*b)->dead());
}

#ifdef GRAID_FAKE_CUDA
// ---- only against the fake runtime: what a real device cannot be made to do on demand ---------

// Restores the fake's default knobs at scope end.
struct KnobsFor {
  explicit KnobsFor(const fake_cuda::Knobs& k) { fake_cuda::set_knobs(k); }
  ~KnobsFor() { fake_cuda::set_knobs({}); }
  KnobsFor(const KnobsFor&) = delete;
  KnobsFor& operator=(const KnobsFor&) = delete;
};

TEST(CudaFake, RefusedBatchCopyFallsBackToCopiesRunByRun) {
  KnobsFor knobs({.batch_copy_supported = false});
  auto b = make_cuda_backend();
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  std::unique_ptr<Pool> pool = registered_pool(**b);
  ASSERT_NE(pool, nullptr);
  const std::size_t batch_calls_before = fake_cuda::counters().batch_calls;
  random_batches(**b, 6, 31, pool.get());
  const CudaBackendStats st = (*b)->stats();
  EXPECT_FALSE((*b)->dead()) << "a refused batch call is not a device failure";
  EXPECT_EQ(st.cpu_batches, 0u);
  EXPECT_GT(st.copy_calls, 2 * st.launches) << "copies went run by run";
  EXPECT_EQ(fake_cuda::counters().batch_calls, batch_calls_before);
  b->reset();  // before the pool it registered
}

TEST(CudaFake, BatchedCopiesAreOneCallPerDirection) {
  auto b = make_cuda_backend();
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  const fake_cuda::Counters before = fake_cuda::counters();
  random_batches(**b, 6, 32);  // staged chunks only: header + inputs, flags + outputs
  const fake_cuda::Counters after = fake_cuda::counters();
  const CudaBackendStats st = (*b)->stats();
  EXPECT_EQ(after.copy_calls - before.copy_calls, st.copy_calls);
  EXPECT_LE(st.copy_calls, 2 * st.launches);
  EXPECT_GT(after.copies - before.copies, st.copy_calls) << "each call carried several copies";
}

TEST(CudaFake, PackedChunksMergeIntoOneCopy) {
  auto b = make_cuda_backend();
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  std::unique_ptr<Pool> pool = registered_pool(**b);
  ASSERT_NE(pool, nullptr);
  // Encodes of 8 KiB chunks packed back to back: all inputs of all jobs are one host run.
  std::vector<std::unique_ptr<Case>> cases;
  std::vector<StripeJob> jobs;
  for (int i = 0; i < 8; ++i) {
    cases.push_back(
        std::make_unique<Case>(Case{buffers(6, 8192, 900 + i), buffers(6, 8192, 900 + i), {}, {}}));
    Case& c = *cases.back();
    c.dev_job = c.dev.job(ParityOp::kEncode, ParityScheme::kPQ, 4, 8192);
    c.ref_job = c.ref.job(ParityOp::kEncode, ParityScheme::kPQ, 4, 8192);
    ASSERT_TRUE(pool->place(c, /*gap=*/false));
    jobs.push_back(c.dev_job);
  }
  const fake_cuda::Counters before = fake_cuda::counters();
  ASSERT_TRUE((*b)->execute(jobs).is_ok());
  const fake_cuda::Counters after = fake_cuda::counters();
  // H2D: header (staged) + one merged run of 48 packed chunks (inputs and the P/Q slots between
  // them are all read or written, so the runs alternate: inputs merge per stripe). D2H: flags +
  // outputs. Far fewer copies than the 8 x 6 chunks.
  EXPECT_EQ(after.copy_calls - before.copy_calls, 2u);
  EXPECT_LT(after.copies - before.copies, 8u * 6u / 2u);
  for (auto& c : cases) {
    Pool::copy_back(*c);
    EXPECT_TRUE(matches_ref(*c));
  }
  b->reset();
}

// A refused registration is tolerated by design (the chunks are staged instead), but the runtime
// also keeps it as the thread's last error: read after the next launch, it made a healthy device
// look dead for good.
TEST(CudaFake, RefusedRegistrationDoesNotKillTheDevice) {
  auto b = make_cuda_backend();
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  Result<AlignedBuffer> buf = AlignedBuffer::allocate(std::size_t{1} << 20, 4096);
  ASSERT_TRUE(buf.is_ok());
  {
    KnobsFor knobs({.refuse_host_register = true});
    EXPECT_FALSE((*b)->add_region(buf->span()).is_ok());
  }
  random_batches(**b, 3, 41);
  EXPECT_FALSE((*b)->dead()) << "a refused registration is not a device failure";
  const CudaBackendStats st = (*b)->stats();
  EXPECT_EQ(st.cpu_batches, 0u);
  EXPECT_EQ(st.device_batches, 3u);
}

// cuda_bench's set-up must be on the device before its first timed launch: the fake tracks stream
// order and reports a launch that reads memory written on a stream it does not wait for (the
// set-up once went on the legacy default stream, the launches on a non-blocking one).
TEST(CudaFake, BenchBatchIsUploadedBeforeItsFirstLaunch) {
  Result<std::unique_ptr<kernels::CudaBenchDevice>> d = kernels::CudaBenchDevice::open();
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  ASSERT_TRUE((*d)->prepare_batch(ParityOp::kEncode, ParityScheme::kPQ, 4, 65536, 8).is_ok());
  ASSERT_TRUE((*d)->time_kernel(2).is_ok());
  EXPECT_EQ(fake_cuda::take_violations(), "");
}

TEST(CudaFake, OutOfDeviceMemoryRunsThatBatchOnTheCpuOnly) {
  KnobsFor knobs({.device_memory = std::size_t{3} << 20});
  auto b = make_cuda_backend();
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  // 32 stripes x 10 chunks x 64 KiB = 20 MiB: the arena cannot grow that far.
  std::vector<std::unique_ptr<Case>> cases;
  std::vector<StripeJob> jobs;
  for (int i = 0; i < 32; ++i) {
    cases.push_back(std::make_unique<Case>(
        Case{buffers(10, 65536, 1000 + i), buffers(10, 65536, 1000 + i), {}, {}}));
    Case& c = *cases.back();
    c.dev_job = c.dev.job(ParityOp::kEncode, ParityScheme::kPQ, 8, 65536);
    c.ref_job = c.ref.job(ParityOp::kEncode, ParityScheme::kPQ, 8, 65536);
    jobs.push_back(c.dev_job);
  }
  ASSERT_TRUE((*b)->execute(jobs).is_ok());
  for (auto& c : cases)
    EXPECT_TRUE(matches_ref(*c));
  EXPECT_FALSE((*b)->dead()) << "running out of device memory is not a device failure";
  EXPECT_EQ((*b)->stats().cpu_batches, 1u);
  // A batch that fits still runs on the device.
  std::mt19937_64 rng(3);
  auto small = random_case(rng, 77);
  small->dev_job.len = std::min<std::size_t>(small->dev_job.len, 4096);
  small->ref_job.len = small->dev_job.len;
  std::vector<StripeJob> one{small->dev_job};
  ASSERT_TRUE((*b)->execute(one).is_ok());
  small->dev_job.parity_ok = one[0].parity_ok;
  EXPECT_TRUE(matches_ref(*small));
  EXPECT_EQ((*b)->stats().device_batches, 1u);
}
#endif

}  // namespace
}  // namespace graid
