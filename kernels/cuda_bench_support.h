// Device-side timing for bench/micro/cuda_bench.cpp, behind a plain C++ header (the benchmark
// may not include CUDA headers; only kernels/ does).
//
// Everything is timed with CUDA events on one stream, so the figures are device time: the
// baselines (device-to-device copy, pinned host-to-device copy) and the parity kernel on
// device-resident stripes come from the same device in the same run, and the benchmark reports
// the kernel as a ratio to them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "graid/parity.h"
#include "graid/status.h"
#include "kernels/cuda_backend.h"
#include "kernels/parity_kernels.h"

namespace graid::kernels {

class CudaBenchDevice {
 public:
  // kUnsupported "built without CUDA" / "no CUDA device: ..." when there is nothing to time.
  static Result<std::unique_ptr<CudaBenchDevice>> open(int device = 0);
  virtual ~CudaBenchDevice() = default;

  virtual const CudaDeviceInfo& info() const noexcept = 0;

  // Seconds per cudaMemcpyAsync of `bytes` device to device (mean over `iters`, after a warm-up).
  // Bandwidth as bytes read + written is 2 * bytes / seconds.
  virtual Result<double> time_d2d_copy(std::size_t bytes, int iters) = 0;
  // Seconds per copy of `bytes` from pinned host memory to the device.
  virtual Result<double> time_h2d_copy(std::size_t bytes, int iters) = 0;
  // Seconds to move `bytes` from pinned host memory to the device as separate cudaMemcpyAsync
  // calls of `piece` bytes each (mean over `iters`): beside time_h2d_copy(bytes), what a copy
  // costs the copy engine per piece (the chunks of a batch that do not merge).
  virtual Result<double> time_h2d_pieces(std::size_t bytes, std::size_t piece, int iters) = 0;

  // Lays out `stripes` stripes of one shape in device memory (pseudo-random contents) with their
  // descriptor, ready for time_kernel(). `missing` as in StripeJob, for kReconstruct.
  virtual Status prepare_batch(ParityOp op, ParityScheme scheme, std::uint32_t k, std::size_t len,
                               std::uint32_t stripes, std::array<std::uint8_t, 2> missing = {0, 1},
                               std::uint8_t missing_count = 0) = 0;
  // Bytes one launch of the prepared batch reads plus writes.
  virtual std::uint64_t batch_bytes() const noexcept = 0;
  // Seconds per launch of the prepared batch, kernel only (mean over `iters`, after a warm-up),
  // multiplying by constants the `gf` way.
  virtual Result<double> time_kernel(int iters, GfMul gf = GfMul::kLogExp) = 0;
};

}  // namespace graid::kernels
