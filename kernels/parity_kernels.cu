// The parity kernel: the bodies of parity_kernels.h on the GPU.
//
// Grid-stride over tiles; a block takes a tile (kTileLanes lanes of 16 bytes of one stripe), each
// thread one lane. The GF(2^8) log/exp tables (768 B) are copied from constant memory into shared
// memory once per block: the only table lookups are the <= 2 arbitrary-constant multiplies per
// output byte of reconstruct, and their indices diverge across a warp, which constant memory
// serialises and shared memory does not. Encode and verify never touch the tables (the Q Horner
// step is a SWAR multiply by g). The GfMul::kBitSerial instance multiplies by the constant
// without any table (8 SWAR doublings + masked XORs per word) and skips the shared-memory copy;
// cuda_bench times both on reconstruct. (Not built: a 64 KiB 256x256 product table in global
// memory, one L1-cached lookup instead of two.)
#include <cuda_runtime.h>

#include "cuda_launch.h"
#include "parity_kernels.h"

namespace graid::kernels {
namespace {

__constant__ GfTables c_gf_tables = make_gf_tables();

__global__ void __launch_bounds__(kThreadsPerBlock) parity_batch_kernel(KernelBatch batch) {
  __shared__ GfTables tables;
  static_assert(sizeof(GfTables) % sizeof(std::uint32_t) == 0);
  auto* dst = reinterpret_cast<std::uint32_t*>(&tables);
  const auto* src = reinterpret_cast<const std::uint32_t*>(&c_gf_tables);
  for (unsigned i = threadIdx.x; i < sizeof(GfTables) / sizeof(std::uint32_t); i += blockDim.x)
    dst[i] = src[i];
  __syncthreads();
  for (std::uint64_t tile = blockIdx.x; tile < batch.tile_count; tile += gridDim.x)
    run_tile_lane<GfMul::kLogExp>(batch, tables, tile, threadIdx.x);
}

__global__ void __launch_bounds__(kThreadsPerBlock)
    parity_batch_kernel_bitserial(KernelBatch batch) {
  for (std::uint64_t tile = blockIdx.x; tile < batch.tile_count; tile += gridDim.x)
    run_tile_lane<GfMul::kBitSerial>(batch, c_gf_tables, tile, threadIdx.x);
}

}  // namespace

void enqueue_parity_kernel(const KernelBatch& batch, unsigned blocks, cudaStream_t stream,
                           GfMul gf) noexcept {
  if (gf == GfMul::kBitSerial) {
    parity_batch_kernel_bitserial<<<blocks, kThreadsPerBlock, 0, stream>>>(batch);
  } else {
    parity_batch_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(batch);
  }
}

cudaError_t parity_kernel_blocks_per_sm(int* blocks, GfMul gf) noexcept {
  if (gf == GfMul::kBitSerial) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, parity_batch_kernel_bitserial,
                                                         kThreadsPerBlock, 0);
  }
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, parity_batch_kernel,
                                                       kThreadsPerBlock, 0);
}

}  // namespace graid::kernels
