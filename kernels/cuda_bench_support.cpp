#include "cuda_bench_support.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernel_batch.h"

namespace graid::kernels {
namespace {

constexpr std::size_t kAlign = 256;

std::size_t align_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

#define GRAID_CUDA_TRY(call, what)                                   \
  do {                                                               \
    const cudaError_t graid_e_ = (call);                             \
    if (graid_e_ != cudaSuccess) return cuda_status(graid_e_, what); \
  } while (0)

class BenchDevice final : public CudaBenchDevice {
 public:
  explicit BenchDevice(CudaDeviceInfo info) : info_(std::move(info)) {}

  Status init() {
    GRAID_CUDA_TRY(stream_.create(), "cudaStreamCreate");
    GRAID_CUDA_TRY(start_.create(), "cudaEventCreate");
    GRAID_CUDA_TRY(stop_.create(), "cudaEventCreate");
    for (GfMul gf : {GfMul::kLogExp, GfMul::kBitSerial, GfMul::kNibble}) {
      int per_sm = 0;
      GRAID_CUDA_TRY(parity_kernel_blocks_per_sm(&per_sm, gf), "occupancy query");
      max_blocks_[static_cast<int>(gf)] = static_cast<unsigned>(per_sm * info_.sm_count);
    }
    return Status::ok();
  }

  const CudaDeviceInfo& info() const noexcept override { return info_; }

  Result<double> time_d2d_copy(std::size_t bytes, int iters) override {
    CudaDeviceMemory a;
    CudaDeviceMemory b;
    GRAID_CUDA_TRY(a.allocate(bytes), "cudaMalloc");
    GRAID_CUDA_TRY(b.allocate(bytes), "cudaMalloc");
    GRAID_CUDA_TRY(cudaMemsetAsync(a.get(), 1, bytes, stream_.get()), "cudaMemset");
    return time_loop(iters, [&] {
      return cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream_.get());
    });
  }

  Result<double> time_h2d_copy(std::size_t bytes, int iters) override {
    CudaPinnedMemory h;
    CudaDeviceMemory d;
    GRAID_CUDA_TRY(h.allocate(bytes), "cudaMallocHost");
    GRAID_CUDA_TRY(d.allocate(bytes), "cudaMalloc");
    return time_loop(iters, [&] {
      return cudaMemcpyAsync(d.get(), h.get(), bytes, cudaMemcpyHostToDevice, stream_.get());
    });
  }

  Result<double> time_h2d_pieces(std::size_t bytes, std::size_t piece, int iters) override {
    if (piece == 0) return Status(Errc::kInvalidArgument, "piece of 0 bytes");
    CudaPinnedMemory h;
    CudaDeviceMemory d;
    GRAID_CUDA_TRY(h.allocate(bytes), "cudaMallocHost");
    GRAID_CUDA_TRY(d.allocate(bytes), "cudaMalloc");
    return time_loop(iters, [&] {
      for (std::size_t off = 0; off < bytes; off += piece) {
        const cudaError_t e =
            cudaMemcpyAsync(d.get() + off, h.get() + off, std::min(piece, bytes - off),
                            cudaMemcpyHostToDevice, stream_.get());
        if (e != cudaSuccess) return e;
      }
      return cudaSuccess;
    });
  }

  Status prepare_batch(ParityOp op, ParityScheme scheme, std::uint32_t k, std::size_t len,
                       std::uint32_t stripes, std::array<std::uint8_t, 2> missing,
                       std::uint8_t missing_count) override {
    const std::uint32_t chunks = k + (scheme == ParityScheme::kPQ ? 2 : 1);
    const std::size_t chunk_stride = align_up(len);
    const std::size_t data_bytes = std::size_t{stripes} * chunks * chunk_stride;
    const std::size_t stripes_off = data_bytes;
    const std::size_t tiles_off = align_up(stripes_off + stripes * sizeof(KernelStripe));
    const std::size_t flags_off = align_up(tiles_off + (stripes + 1) * sizeof(std::uint64_t));
    const std::size_t total = align_up(flags_off + stripes * sizeof(std::uint32_t));
    GRAID_CUDA_TRY(arena_.allocate(total), "cudaMalloc");

    // Pseudo-random data: zero bytes would let the GF multiply skip its table lookups.
    std::vector<std::uint8_t> pattern(chunk_stride * chunks);
    std::uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (auto& byte : pattern) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      byte = static_cast<std::uint8_t>(x);
    }
    // Every upload goes on stream_, the stream the timed launches use, and is waited for before
    // returning: a plain cudaMemcpy from pageable memory (or cudaMemset) runs on the legacy
    // default stream, which the non-blocking stream_ does not wait for, so the warm-up launch
    // could read half-written descriptors (the fake runtime's stream-order check catches that).
    cudaStream_t stream = stream_.get();
    for (std::uint32_t s = 0; s < stripes; ++s) {
      GRAID_CUDA_TRY(
          cudaMemcpyAsync(arena_.get() + std::size_t{s} * chunks * chunk_stride, pattern.data(),
                          pattern.size(), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync");
    }

    // Device pointers are aligned, so ChunkView::adopt takes them: the ordinary planner builds
    // the descriptors, exactly as for the backend.
    KernelBatchBuilder builder;
    bytes_ = 0;
    for (std::uint32_t s = 0; s < stripes; ++s) {
      StripeJob job;
      job.op = op;
      job.scheme = scheme;
      job.k = k;
      job.len = len;
      job.missing = missing;
      job.missing_count = missing_count;
      for (std::uint32_t c = 0; c < chunks; ++c) {
        Result<ChunkView> v =
            ChunkView::adopt(arena_.get() + (std::size_t{s} * chunks + c) * chunk_stride, len);
        if (!v.is_ok()) return v.status();
        job.chunk[c] = *v;
      }
      GRAID_RETURN_IF_ERROR(validate_job(job));
      const StripePlan plan = plan_stripe(job);
      for (std::uint32_t c = 0; c < chunks; ++c) {
        if (plan.reads(c) || plan.writes(c)) bytes_ += len;
      }
      builder.add(materialize(plan, host_addrs(job)));
    }
    GRAID_CUDA_TRY(cudaMemcpyAsync(arena_.get() + stripes_off, builder.stripes().data(),
                                   stripes * sizeof(KernelStripe), cudaMemcpyHostToDevice, stream),
                   "cudaMemcpyAsync");
    GRAID_CUDA_TRY(
        cudaMemcpyAsync(arena_.get() + tiles_off, builder.tile_begin().data(),
                        (stripes + 1) * sizeof(std::uint64_t), cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync");
    GRAID_CUDA_TRY(
        cudaMemsetAsync(arena_.get() + flags_off, 0, stripes * sizeof(std::uint32_t), stream),
        "cudaMemsetAsync");
    // The host vectors above die on return; and the batch is complete before any timing starts.
    GRAID_CUDA_TRY(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    batch_.stripes = reinterpret_cast<const KernelStripe*>(arena_.get() + stripes_off);
    batch_.tile_begin = reinterpret_cast<const std::uint64_t*>(arena_.get() + tiles_off);
    batch_.mismatch = reinterpret_cast<std::uint32_t*>(arena_.get() + flags_off);
    batch_.stripe_count = stripes;
    batch_.tile_count = builder.tile_count();
    return Status::ok();
  }

  std::uint64_t batch_bytes() const noexcept override { return bytes_; }

  Result<double> time_kernel(int iters, GfMul gf) override {
    if (batch_.stripe_count == 0) return Status(Errc::kInvalidArgument, "no batch prepared");
    const unsigned blocks = max_blocks_[static_cast<int>(gf)];
    return time_loop(iters, [&] { return launch_parity_batch(batch_, blocks, stream_.get(), gf); });
  }

 private:
  template <typename Op>
  Result<double> time_loop(int iters, Op&& op) {
    GRAID_CUDA_TRY(op(), "warm-up");
    GRAID_CUDA_TRY(cudaEventRecord(start_.get(), stream_.get()), "cudaEventRecord");
    for (int i = 0; i < iters; ++i)
      GRAID_CUDA_TRY(op(), "timed call");
    GRAID_CUDA_TRY(cudaEventRecord(stop_.get(), stream_.get()), "cudaEventRecord");
    GRAID_CUDA_TRY(cudaEventSynchronize(stop_.get()), "cudaEventSynchronize");
    float ms = 0;
    GRAID_CUDA_TRY(cudaEventElapsedTime(&ms, start_.get(), stop_.get()), "cudaEventElapsedTime");
    return static_cast<double>(ms) / 1e3 / iters;
  }

  CudaDeviceInfo info_;
  CudaStream stream_;
  CudaEvent start_;
  CudaEvent stop_;
  CudaDeviceMemory arena_;
  KernelBatch batch_{};
  std::uint64_t bytes_ = 0;
  std::array<unsigned, 3> max_blocks_{1, 1, 1};  // by GfMul: its resident blocks x SMs
};

}  // namespace

Result<std::unique_ptr<CudaBenchDevice>> CudaBenchDevice::open(int device) {
  Result<int> count = cuda_device_count();
  if (!count.is_ok()) return count.status();
  if (device < 0 || device >= *count) {
    return make_error(Errc::kNotFound, "no CUDA device {} ({} visible)", device, *count);
  }
  GRAID_CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");
  Result<CudaDeviceInfo> info = query_device_info(device);
  if (!info.is_ok()) return info.status();
  auto d = std::make_unique<BenchDevice>(std::move(info).value());
  GRAID_RETURN_IF_ERROR(d->init());
  return std::unique_ptr<CudaBenchDevice>(std::move(d));
}

}  // namespace graid::kernels
