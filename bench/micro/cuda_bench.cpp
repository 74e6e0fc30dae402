// GPU parity benchmarks: the cuda backend beside the cpu backend, every figure as a ratio to a
// baseline measured on the same machine in the same run.
//
//   cuda_bench                                   # everything (estimated ~40 s on an H200)
//   cuda_bench --benchmark_filter='kernel/'      # kernel-only part
//   cuda_bench --benchmark_out=x.json --benchmark_out_format=json
//
// Exits 77 (skip) with the reason on stderr when there is no CUDA device or the binary was built
// without CUDA.
//
// What is measured:
//   baseline/d2d     cudaMemcpy device->device of 256 MiB; GB/s counts bytes read + written.
//   baseline/h2d     cudaMemcpy from pinned host memory to the device, 256 MiB.
//   baseline/h2d_pieces:64K  the same 256 MiB as separate 64 KiB cudaMemcpyAsync calls: the
//                    summary's "h2d cost per 64 KiB copy" is its extra device time per copy over
//                    the single copy (what chunks that do not merge cost the copy engine).
//   kernel/...       the parity kernel alone on device-resident stripes (~256 MiB of chunks per
//                    launch), CUDA-event timed. GBps = bytes the kernel reads + writes per second;
//                    ratio_d2d = GBps / baseline d2d GB/s (target >= 0.8, DESIGN.md §4);
//                    ratio_peak = GBps / the peak DRAM bandwidth from the device attributes
//                    (2 x memory clock x bus width), beside it.
//                    kernel/rec2_pq_bitserial/...: the same reconstruct with the table-free
//                    constant multiply (GfMul::kBitSerial) instead of log/exp in shared memory;
//                    kernel/rec2_pq_nibble/...: per-constant nibble tables with byte permutes.
//   e2e/cuda/...     ParityBackend::execute() on stripes in registered (pinned) host memory:
//                    copies in, kernel, copies out, wait. Wall time. in_GBps = input bytes moved
//                    to the device per second; ratio_h2d = in_GBps / baseline h2d GB/s (target
//                    >= 0.8). cpu_s_per_GB = host CPU seconds (whole process) per GB of stripe
//                    bytes (read + written), the figure to compare with the cpu backend's.
//                    copy_calls_per_batch = copy API calls per execute().
//   e2e/cuda_perchunk/...  the same with one cudaMemcpyAsync per chunk (batched_copies off)
//   e2e/cuda_mapped/...    the same with Transfer::kMapped: no copies, the kernel reads and
//                    writes the pinned host memory over the bus
//   e2e/cpu/...      the same jobs on the cpu (ISA-L) backend, one thread.
//   single/...       one execute() of one k=8 RAID6 encode of 4 KiB..1 MiB chunks, cuda,
//                    cuda_mapped and cpu: the summary names the smallest job whose cuda latency
//                    is no worse than the cpu's (the basis for the batcher's small-job cut-off).
//   latency/...      one execute() of a batch of N 64 KiB k=8 RAID6 encodes, N = 1..256: the
//                    time per iteration is the batch latency.
// At exit a summary table prints the ratios and the cpu/cuda host-CPU ratio (target >= 10).

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <time.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graid/buffer.h"
#include "graid/parity.h"
#include "kernels/cuda_backend.h"
#include "kernels/cuda_bench_support.h"

namespace graid {
namespace {

// Sizes: 256 MiB copies and kernel batches, 320 MiB host pools. GRAID_CUDA_BENCH_MIB=N scales
// them (N MiB, pools 1.25 N), for dry runs of the device check on the fake CUDA runtime, where
// the "device" is the host emulator.
std::size_t bench_mib() {
  static const std::size_t mib = [] {
    const char* v = std::getenv("GRAID_CUDA_BENCH_MIB");
    const unsigned long long n = v == nullptr ? 0 : std::strtoull(v, nullptr, 10);
    return n == 0 ? std::size_t{256} : static_cast<std::size_t>(n);
  }();
  return mib;
}
const std::size_t kBaselineBytes = bench_mib() << 20;
const std::size_t kKernelBatchBytes = bench_mib() << 20;
const std::size_t kHostPoolBytes = (bench_mib() << 20) / 4 * 5;

struct Baselines {
  double d2d_gbps = 0;
  double h2d_gbps = 0;
  double peak_gbps = 0;  // CudaDeviceInfo::peak_memory_gbps(); 0 when not reported
};

// The end-to-end contenders: the cpu backend, and the cuda backend three ways.
enum class E2e { kCpu, kCuda, kCudaPerChunk, kCudaMapped };
constexpr E2e kCudaVariants[] = {E2e::kCuda, E2e::kCudaPerChunk, E2e::kCudaMapped};

const char* e2e_name(E2e v) {
  switch (v) {
    case E2e::kCpu:
      return "cpu";
    case E2e::kCuda:
      return "cuda";  // copies, one cudaMemcpyBatchAsync per direction
    case E2e::kCudaPerChunk:
      return "cuda_perchunk";  // copies, one cudaMemcpyAsync per chunk
    case E2e::kCudaMapped:
      return "cuda_mapped";  // no copies: the kernel reads and writes pinned host memory
  }
  return "?";
}

// A cuda backend and the host pool registered with it (a region can be registered only once,
// so each backend has its own).
struct CudaVariant {
  AlignedBuffer pool;  // declared first: outlives the backend, which unregisters it
  std::unique_ptr<CudaBackend> backend;
};

struct Shared {
  std::unique_ptr<kernels::CudaBenchDevice> device;
  std::array<CudaVariant, 3> cuda;  // by kCudaVariants order
  std::unique_ptr<ParityBackend> cpu;
  Baselines base;
  std::map<std::string, double> summary;  // name -> value, printed at exit
};

Shared& shared() {
  static Shared s;
  return s;
}

CudaVariant& variant(E2e v) {
  return shared().cuda[v == E2e::kCudaMapped ? 2 : v == E2e::kCudaPerChunk ? 1 : 0];
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

enum class Op { kEncP, kEncPQ, kRec2, kRec1, kVerifyPQ };

const char* op_name(Op op) {
  switch (op) {
    case Op::kEncP:
      return "enc_p";
    case Op::kEncPQ:
      return "enc_pq";
    case Op::kRec2:
      return "rec2_pq";
    case Op::kRec1:
      return "rec1_p";
    case Op::kVerifyPQ:
      return "verify_pq";
  }
  return "?";
}

struct Shape {
  ParityOp op;
  ParityScheme scheme;
  std::uint8_t missing_count;
  std::array<std::uint8_t, 2> missing;
};

Shape shape_of(Op op) {
  switch (op) {
    case Op::kEncP:
      return {ParityOp::kEncode, ParityScheme::kP, 0, {0, 0}};
    case Op::kEncPQ:
      return {ParityOp::kEncode, ParityScheme::kPQ, 0, {0, 0}};
    case Op::kRec2:
      return {ParityOp::kReconstruct, ParityScheme::kPQ, 2, {0, 1}};  // two data chunks
    case Op::kRec1:
      return {ParityOp::kReconstruct, ParityScheme::kP, 1, {0, 0}};
    case Op::kVerifyPQ:
      return {ParityOp::kVerify, ParityScheme::kPQ, 0, {0, 0}};
  }
  return {};
}

void baseline_d2d(benchmark::State& state) {
  Shared& s = shared();
  for (auto _ : state) {
    Result<double> t = s.device->time_d2d_copy(kBaselineBytes, 10);
    if (!t.is_ok()) {
      state.SkipWithError(t.status().to_string().c_str());
      return;
    }
    state.SetIterationTime(*t);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * kBaselineBytes));
}

void baseline_h2d(benchmark::State& state) {
  Shared& s = shared();
  for (auto _ : state) {
    Result<double> t = s.device->time_h2d_copy(kBaselineBytes, 5);
    if (!t.is_ok()) {
      state.SkipWithError(t.status().to_string().c_str());
      return;
    }
    state.SetIterationTime(*t);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kBaselineBytes));
}

// 64 KiB pieces: the engine's chunk size, the pieces a batch's copies come in when they do not
// merge.
void baseline_h2d_pieces(benchmark::State& state) {
  Shared& s = shared();
  constexpr std::size_t kPiece = 65536;
  for (auto _ : state) {
    Result<double> t = s.device->time_h2d_pieces(kBaselineBytes, kPiece, 3);
    if (!t.is_ok()) {
      state.SkipWithError(t.status().to_string().c_str());
      return;
    }
    state.SetIterationTime(*t);
    const double pieces = static_cast<double>((kBaselineBytes + kPiece - 1) / kPiece);
    const double one = static_cast<double>(kBaselineBytes) / (s.base.h2d_gbps * 1e9);
    state.counters["us_per_copy_over_one"] = (*t - one) / pieces * 1e6;
    s.summary["h2d cost per 64 KiB copy over one 256 MiB copy, us"] = (*t - one) / pieces * 1e6;
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kBaselineBytes));
}

// `gf`: how the kernel multiplies by reconstruct's constants (names end in _bitserial for
// GfMul::kBitSerial, _nibble for kNibble; encode and verify do not multiply by constants, so only
// rec2 differs).
std::string kernel_name(Op op, std::uint32_t k, std::size_t len, kernels::GfMul gf) {
  return fmt::format("kernel/{}{}/k:{}/chunk:{}K", op_name(op),
                     gf == kernels::GfMul::kBitSerial ? "_bitserial"
                     : gf == kernels::GfMul::kNibble  ? "_nibble"
                                                      : "",
                     k, len / 1024);
}

void kernel_only(benchmark::State& state, Op op, std::uint32_t k, std::size_t len,
                 kernels::GfMul gf) {
  Shared& s = shared();
  const Shape sh = shape_of(op);
  const std::uint32_t chunks = k + (sh.scheme == ParityScheme::kPQ ? 2 : 1);
  const auto stripes =
      static_cast<std::uint32_t>(std::max<std::size_t>(1, kKernelBatchBytes / (chunks * len)));
  Status st =
      s.device->prepare_batch(sh.op, sh.scheme, k, len, stripes, sh.missing, sh.missing_count);
  if (!st.is_ok()) {
    state.SkipWithError(st.to_string().c_str());
    return;
  }
  double seconds = 0;
  for (auto _ : state) {
    Result<double> t = s.device->time_kernel(5, gf);
    if (!t.is_ok()) {
      state.SkipWithError(t.status().to_string().c_str());
      return;
    }
    state.SetIterationTime(*t);
    seconds += *t;
  }
  const double gbps =
      static_cast<double>(s.device->batch_bytes()) * state.iterations() / seconds / 1e9;
  state.counters["GBps"] = gbps;
  state.counters["ratio_d2d"] = gbps / s.base.d2d_gbps;
  state.counters["stripes"] = stripes;
  s.summary[kernel_name(op, k, len, gf) + " ratio_d2d"] = gbps / s.base.d2d_gbps;
  if (s.base.peak_gbps > 0) {
    state.counters["ratio_peak"] = gbps / s.base.peak_gbps;
    s.summary[kernel_name(op, k, len, gf) + " ratio_peak"] = gbps / s.base.peak_gbps;
  }
}

// `batch` stripes of the op's shape, laid out in the registered pool (coloured like the engine's
// buffer pool will be). Contents: whatever the pool holds (encode first for verify/reconstruct).
std::vector<StripeJob> host_jobs(AlignedBuffer& pool, Op op, std::uint32_t k, std::size_t len,
                                 std::uint32_t batch) {
  Shared& s = shared();
  const Shape sh = shape_of(op);
  const std::uint32_t chunks = k + (sh.scheme == ParityScheme::kPQ ? 2 : 1);
  const std::size_t stride = (len + kChunkAlign - 1) / kChunkAlign * kChunkAlign + kChunkAlign;
  std::vector<StripeJob> jobs;
  std::size_t offset = 0;
  for (std::uint32_t b = 0; b < batch; ++b) {
    StripeJob job;
    job.op = ParityOp::kEncode;
    job.scheme = sh.scheme;
    job.k = k;
    job.len = len;
    for (std::uint32_t c = 0; c < chunks; ++c) {
      if (offset + stride > pool.size()) return {};
      job.chunk[c] = pool.view(offset, len);
      offset += stride;
    }
    jobs.push_back(job);
  }
  if (!s.cpu->execute(jobs).is_ok()) return {};  // consistent parity to verify / rebuild from
  for (StripeJob& job : jobs) {
    job.op = sh.op;
    job.missing = sh.missing;
    job.missing_count = sh.missing_count;
  }
  return jobs;
}

std::uint64_t stripe_bytes(const std::vector<StripeJob>& jobs) {
  std::uint64_t n = 0;
  for (const StripeJob& j : jobs)
    n += static_cast<std::uint64_t>(j.chunk_count()) * j.len;
  return n;
}

void end_to_end(benchmark::State& state, E2e who, Op op, std::uint32_t k, std::size_t len,
                std::uint32_t batch, const std::string& summary_key) {
  Shared& s = shared();
  CudaVariant& cv = variant(who);
  const bool on_cuda = who != E2e::kCpu;
  ParityBackend& backend = on_cuda ? static_cast<ParityBackend&>(*cv.backend) : *s.cpu;
  std::vector<StripeJob> jobs = host_jobs(cv.pool, op, k, len, batch);
  if (jobs.empty()) {
    state.SkipWithError("host pool too small or encode failed");
    return;
  }
  const std::uint64_t bytes = stripe_bytes(jobs);
  const std::uint32_t parity = jobs[0].parity_count();
  // Input bytes crossing the link per batch: what the device reads.
  const std::uint64_t in_bytes =
      shape_of(op).op == ParityOp::kEncode ? std::uint64_t{k} * len * batch
      : shape_of(op).op == ParityOp::kVerify
          ? std::uint64_t{k + parity} * len * batch
          : std::uint64_t{k + parity - shape_of(op).missing_count} * len * batch;
  const CudaBackendStats before = on_cuda ? cv.backend->stats() : CudaBackendStats{};
  const double cpu0 = process_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    Status st = backend.execute(jobs);
    if (!st.is_ok()) {
      state.SkipWithError(st.to_string().c_str());
      return;
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu_s = process_cpu_seconds() - cpu0;
  const double gb = static_cast<double>(bytes) * state.iterations() / 1e9;
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes * state.iterations()));
  state.counters["cpu_s_per_GB"] = cpu_s / gb;
  if (on_cuda) {
    const double in_gbps = static_cast<double>(in_bytes) * state.iterations() / wall / 1e9;
    state.counters["in_GBps"] = in_gbps;
    state.counters["ratio_h2d"] = in_gbps / s.base.h2d_gbps;
    const CudaBackendStats after = cv.backend->stats();
    state.counters["copy_calls_per_batch"] =
        static_cast<double>(after.copy_calls - before.copy_calls) /
        static_cast<double>(state.iterations());
    if (!summary_key.empty()) s.summary[summary_key + " ratio_h2d"] = in_gbps / s.base.h2d_gbps;
    if (cv.backend->dead()) state.SkipWithError("cuda backend died during the run");
  }
  if (!summary_key.empty()) {
    s.summary[summary_key + " cpu_s_per_GB"] = cpu_s / gb;
    s.summary[summary_key + " us_per_batch"] = wall * 1e6 / static_cast<double>(state.iterations());
  }
}

// One job of `chunk` bytes per chunk, alone: the latency a job sees when it does not wait for
// company. Where the cuda round trip beats the cpu doing the job itself is the measured basis
// for the batcher's small-job cut-off (BatcherOptions::cpu_below_bytes).
std::string single_job_key(E2e who, std::size_t chunk) {
  return fmt::format("single/{}/enc_pq/k:8/chunk:{}K/batch:1", e2e_name(who), chunk / 1024);
}
constexpr std::size_t kSingleJobChunks[] = {4096, 16384, 65536, 262144, 1048576};

void register_all() {
  Shared& s = shared();
  benchmark::RegisterBenchmark("baseline/d2d", baseline_d2d)->UseManualTime()->Iterations(3);
  benchmark::RegisterBenchmark("baseline/h2d", baseline_h2d)->UseManualTime()->Iterations(3);
  benchmark::RegisterBenchmark("baseline/h2d_pieces:64K", baseline_h2d_pieces)
      ->UseManualTime()
      ->Iterations(2);
  using kernels::GfMul;
  const std::pair<Op, GfMul> kernel_cases[] = {
      {Op::kEncP, GfMul::kLogExp}, {Op::kEncPQ, GfMul::kLogExp},
      {Op::kRec2, GfMul::kLogExp}, {Op::kRec2, GfMul::kBitSerial},
      {Op::kRec2, GfMul::kNibble}, {Op::kVerifyPQ, GfMul::kLogExp}};
  for (const auto& [op, gf] : kernel_cases) {
    for (std::uint32_t k : {4u, 8u, 16u}) {
      for (std::size_t len : {std::size_t{4096}, std::size_t{65536}, std::size_t{1} << 20}) {
        benchmark::RegisterBenchmark(
            kernel_name(op, k, len, gf).c_str(),
            [op = op, gf = gf, k, len](benchmark::State& st) { kernel_only(st, op, k, len, gf); })
            ->UseManualTime()
            ->Iterations(4)
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  for (E2e who : {E2e::kCuda, E2e::kCudaPerChunk, E2e::kCudaMapped, E2e::kCpu}) {
    for (Op op : {Op::kEncP, Op::kEncPQ, Op::kRec2}) {
      const std::string name =
          fmt::format("e2e/{}/{}/k:8/chunk:64K/batch:256", e2e_name(who), op_name(op));
      benchmark::RegisterBenchmark(
          name.c_str(),
          [who, op, name](benchmark::State& st) { end_to_end(st, who, op, 8, 65536, 256, name); })
          ->UseRealTime()
          ->MeasureProcessCPUTime()
          ->MinTime(0.5)
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (std::size_t chunk : kSingleJobChunks) {
    for (E2e who : {E2e::kCuda, E2e::kCudaMapped, E2e::kCpu}) {
      const std::string name = single_job_key(who, chunk);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [who, chunk, name](benchmark::State& st) {
                                     end_to_end(st, who, Op::kEncPQ, 8, chunk, 1, name);
                                   })
          ->UseRealTime()
          ->MinTime(0.2)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (std::uint32_t batch : {1u, 4u, 16u, 64u, 256u}) {
    for (E2e who : {E2e::kCuda, E2e::kCudaMapped, E2e::kCpu}) {
      benchmark::RegisterBenchmark(
          fmt::format("latency/{}/enc_pq/k:8/chunk:64K/batch:{}", e2e_name(who), batch).c_str(),
          [who, batch](benchmark::State& st) {
            end_to_end(st, who, Op::kEncPQ, 8, 65536, batch, "");
          })
          ->UseRealTime()
          ->MinTime(0.2)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  (void)s;
}

// The smallest single job (bytes it touches: 10 chunks of k=8 P+Q) whose cuda latency is no worse
// than the cpu doing it, for each cuda variant.
void print_cutoff(Shared& s) {
  for (E2e who : {E2e::kCuda, E2e::kCudaMapped}) {
    std::size_t cutoff = 0;
    for (std::size_t chunk : kSingleJobChunks) {
      const std::string cu = single_job_key(who, chunk) + " us_per_batch";
      const std::string cp = single_job_key(E2e::kCpu, chunk) + " us_per_batch";
      if (!s.summary.count(cu) || !s.summary.count(cp)) continue;
      if (s.summary[cu] <= s.summary[cp]) {
        cutoff = chunk;
        break;
      }
    }
    if (cutoff == 0) {
      std::printf("%-60s  cpu faster up to %zu KiB chunks\n",
                  fmt::format("single-job latency crossover, {}", e2e_name(who)).c_str(),
                  kSingleJobChunks[std::size(kSingleJobChunks) - 1] / 1024);
    } else {
      std::printf("%-60s  %zu KiB chunks (%zu KiB per job)\n",
                  fmt::format("single-job latency crossover, {}", e2e_name(who)).c_str(),
                  cutoff / 1024, cutoff * 10 / 1024);
    }
  }
}

void print_summary() {
  Shared& s = shared();
  std::printf("\n== cuda_bench summary (%s, %s) ==\n", s.device->info().name.c_str(),
              s.device->info().pci_bus_id.c_str());
  std::printf("baseline d2d %.1f GB/s (read+write; %.3f of peak %.1f GB/s), h2d %.1f GB/s\n",
              s.base.d2d_gbps, s.base.peak_gbps > 0 ? s.base.d2d_gbps / s.base.peak_gbps : 0.0,
              s.base.peak_gbps, s.base.h2d_gbps);
  for (const auto& [name, value] : s.summary)
    std::printf("%-60s %8.3f\n", name.c_str(), value);
  for (const char* op : {"enc_p", "enc_pq", "rec2_pq"}) {
    const std::string cp = fmt::format("e2e/cpu/{}/k:8/chunk:64K/batch:256 cpu_s_per_GB", op);
    for (E2e who : kCudaVariants) {
      const std::string cu =
          fmt::format("e2e/{}/{}/k:8/chunk:64K/batch:256 cpu_s_per_GB", e2e_name(who), op);
      if (s.summary.count(cu) && s.summary.count(cp) && s.summary[cu] > 0) {
        std::printf("%-60s %8.1f  (target >= 10)\n",
                    fmt::format("host CPU per GB, cpu / {}, {}", e2e_name(who), op).c_str(),
                    s.summary[cp] / s.summary[cu]);
      }
    }
  }
  print_cutoff(s);
}

}  // namespace
}  // namespace graid

namespace graid {
namespace {

int run(int argc, char** argv) {
  Shared& s = shared();
  Result<std::unique_ptr<kernels::CudaBenchDevice>> dev = kernels::CudaBenchDevice::open(0);
  if (!dev.is_ok()) {
    std::fprintf(stderr, "cuda_bench: skipped: %s\n", dev.status().to_string().c_str());
    return 77;
  }
  s.device = std::move(dev).value();
  for (E2e who : kCudaVariants) {
    CudaBackendOptions options;
    options.batched_copies = who != E2e::kCudaPerChunk;
    if (who == E2e::kCudaMapped) options.transfer = CudaBackendOptions::Transfer::kMapped;
    Result<std::unique_ptr<CudaBackend>> cuda = make_cuda_backend(options);
    if (!cuda.is_ok()) {
      std::fprintf(stderr, "cuda_bench: cuda backend (%s) did not start: %s\n", e2e_name(who),
                   cuda.status().to_string().c_str());
      return 1;
    }
    CudaVariant& cv = variant(who);
    cv.backend = std::move(cuda).value();
    Result<AlignedBuffer> pool = AlignedBuffer::allocate(kHostPoolBytes, 4096);
    if (!pool.is_ok()) {
      std::fprintf(stderr, "cuda_bench: %s\n", pool.status().to_string().c_str());
      return 1;
    }
    cv.pool = std::move(pool).value();
    for (std::size_t i = 0; i < cv.pool.size(); i += 8)
      cv.pool.data()[i] = static_cast<std::byte>(i * 2654435761u >> 13);
    if (Status st = cv.backend->add_region(cv.pool.span()); !st.is_ok()) {
      std::fprintf(stderr, "cuda_bench: %s\n", st.to_string().c_str());
      return 1;
    }
  }
  s.cpu = make_cpu_backend();
  // The baselines every ratio divides by, measured before the benchmarks in this same process
  // (and again as benchmarks, so they land in the JSON).
  Result<double> d2d = s.device->time_d2d_copy(kBaselineBytes, 20);
  Result<double> h2d = s.device->time_h2d_copy(kBaselineBytes, 10);
  if (!d2d.is_ok() || !h2d.is_ok()) {
    std::fprintf(stderr, "cuda_bench: baseline copy failed: %s %s\n",
                 d2d.status().to_string().c_str(), h2d.status().to_string().c_str());
    return 1;
  }
  s.base.d2d_gbps = 2.0 * kBaselineBytes / *d2d / 1e9;
  s.base.h2d_gbps = static_cast<double>(kBaselineBytes) / *h2d / 1e9;
  s.base.peak_gbps = s.device->info().peak_memory_gbps();

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("gpu", s.device->info().name);
  benchmark::AddCustomContext("baseline_d2d_GBps", fmt::format("{:.1f}", s.base.d2d_gbps));
  benchmark::AddCustomContext("baseline_h2d_GBps", fmt::format("{:.1f}", s.base.h2d_gbps));
  benchmark::AddCustomContext("peak_memory_GBps", fmt::format("{:.1f}", s.base.peak_gbps));
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary();
  bool dead = false;
  for (const CudaVariant& cv : s.cuda)
    dead = dead || cv.backend->dead();
  return dead ? 1 : 0;
}

}  // namespace
}  // namespace graid

int main(int argc, char** argv) {
  const int rc = graid::run(argc, argv);
  // Release every CUDA resource before static destruction: the CUDA runtime (or the fake one in
  // tests) may already be torn down when `shared()` is destroyed.
  graid::Shared& s = graid::shared();
  for (graid::CudaVariant& cv : s.cuda)
    cv.backend.reset();
  s.device.reset();
  return rc;
}
