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

// Runs every tile of `batch` on `stream` with at most `max_blocks` blocks (grid-stride over tiles
// beyond that), multiplying by constants the `gf` way. Returns the launch's error (cudaSuccess for
// an empty batch).
cudaError_t launch_parity_batch(const KernelBatch& batch, unsigned max_blocks, cudaStream_t stream,
                                GfMul gf = GfMul::kLogExp) noexcept;

// Resident blocks per SM for the kernel (for sizing max_blocks), or an error.
cudaError_t parity_kernel_blocks_per_sm(int* blocks, GfMul gf = GfMul::kLogExp) noexcept;

}  // namespace graid::kernels
