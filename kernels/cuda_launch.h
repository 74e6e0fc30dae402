// Launching the parity kernel (kernels/ only; includes the CUDA runtime API).
//
// Like CUB's DeviceMemcpy::Batched: one call for the whole batch, an explicit stream, a
// cudaError_t back. The descriptor arrays (stripes, tile_begin, mismatch) and every chunk pointer
// must be device-accessible; the launch does not copy them.
#pragma once

#include <cuda_runtime_api.h>

#include "parity_kernels.h"

namespace graid::kernels {

// Threads per block: one tile of kTileLanes lanes.
inline constexpr unsigned kThreadsPerBlock = kTileLanes;

// Queues the kernel (`<<<blocks, kThreadsPerBlock, 0, stream>>>`) and nothing else: like every
// kernel launch it reports a refused launch only through cudaGetLastError(). Defined in
// parity_kernels.cu (and by the fake runtime in tests/fake_cuda). REQUIRES: blocks >= 1.
void enqueue_parity_kernel(const KernelBatch& batch, unsigned blocks, cudaStream_t stream,
                           GfMul gf) noexcept;

// Runs every tile of `batch` on `stream` with at most `max_blocks` blocks (grid-stride over tiles
// beyond that), multiplying by constants the `gf` way. Returns this launch's error (cudaSuccess for
// an empty batch).
//
// cudaGetLastError() returns the thread's *last* error of any runtime call, not the launch's: a
// refused cudaHostRegister, an out-of-memory cudaMalloc or a failed attribute query earlier on
// this thread (all tolerated by their callers) would read as a launch failure, and the backend
// would take a healthy device for dead. So pending errors are cleared before the launch. A sticky
// error (the context is lost) is not cleared by this: the launch then fails with it again.
inline cudaError_t launch_parity_batch(const KernelBatch& batch, unsigned max_blocks,
                                       cudaStream_t stream, GfMul gf = GfMul::kLogExp) noexcept {
  if (batch.tile_count == 0) return cudaSuccess;
  const std::uint64_t want = batch.tile_count;
  const unsigned cap = max_blocks == 0 ? 1 : max_blocks;
  const unsigned blocks = static_cast<unsigned>(want < cap ? want : cap);
  (void)cudaGetLastError();
  enqueue_parity_kernel(batch, blocks, stream, gf);
  return cudaGetLastError();
}

// Resident blocks per SM for the kernel (for sizing max_blocks), or an error.
cudaError_t parity_kernel_blocks_per_sm(int* blocks, GfMul gf = GfMul::kLogExp) noexcept;

}  // namespace graid::kernels
