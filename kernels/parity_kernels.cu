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

static_assert(sizeof(KernelStripe) % sizeof(std::uint64_t) == 0);
constexpr unsigned kStripeWords = sizeof(KernelStripe) / sizeof(std::uint64_t);
static_assert(kStripeWords <= kThreadsPerBlock);

// The grid-stride loop over tiles, with the tile's descriptor read once per block: thread 0 finds
// the stripe (binary search over tile_begin), the first kStripeWords threads copy its descriptor
// into shared memory with one coalesced read, and every lane then reads its chunk pointers from
// there (not each from global memory behind its own binary search). Two buffers alternate, so a
// tile needs two barriers: a lane still on tile n-1 has passed tile n's first barrier before
// anyone writes the buffer for tile n+1.
template <GfMul M>
__device__ void run_tiles(const KernelBatch& batch, const GfTables& tables) {
  __shared__ KernelStripe stripe[2];
  __shared__ std::uint32_t index[2];
  __shared__ std::uint64_t first_tile[2];
  unsigned buf = 0;
  for (std::uint64_t tile = blockIdx.x; tile < batch.tile_count; tile += gridDim.x, buf ^= 1) {
    if (threadIdx.x == 0) {
      const std::uint32_t s = stripe_of_tile(batch, tile);
      index[buf] = s;
      first_tile[buf] = batch.tile_begin[s];
    }
    __syncthreads();
    const std::uint32_t s = index[buf];
    if (threadIdx.x < kStripeWords) {
      reinterpret_cast<std::uint64_t*>(&stripe[buf])[threadIdx.x] =
          reinterpret_cast<const std::uint64_t*>(&batch.stripes[s])[threadIdx.x];
    }
    __syncthreads();
    run_stripe_lane<M>(stripe[buf], tables, tile - first_tile[buf], threadIdx.x,
                       &batch.mismatch[s]);
  }
}

// At least 5 resident blocks per SM (ptxas: 48 registers, no spills, sm_90).
__global__ void __launch_bounds__(kThreadsPerBlock, 5) parity_batch_kernel(KernelBatch batch) {
  __shared__ GfTables tables;
  static_assert(sizeof(GfTables) % sizeof(std::uint32_t) == 0);
  auto* dst = reinterpret_cast<std::uint32_t*>(&tables);
  const auto* src = reinterpret_cast<const std::uint32_t*>(&c_gf_tables);
  for (unsigned i = threadIdx.x; i < sizeof(GfTables) / sizeof(std::uint32_t); i += blockDim.x)
    dst[i] = src[i];
  __syncthreads();
  run_tiles<GfMul::kLogExp>(batch, tables);
}

// No minimum-blocks bound: ptxas gives 70 registers (3 blocks per SM; it was 90, 2 blocks, with
// one lane load at a time), and a bound of 4 blocks (64 registers) spills 24 bytes (sm_90).
__global__ void __launch_bounds__(kThreadsPerBlock)
    parity_batch_kernel_bitserial(KernelBatch batch) {
  run_tiles<GfMul::kBitSerial>(batch, c_gf_tables);
}

// The constant multiply by the stripe's nibble tables (from its descriptor, in shared memory):
// no log/exp lookups, no table copy.
__global__ void __launch_bounds__(kThreadsPerBlock) parity_batch_kernel_nibble(KernelBatch batch) {
  run_tiles<GfMul::kNibble>(batch, c_gf_tables);
}

}  // namespace

void enqueue_parity_kernel(const KernelBatch& batch, unsigned blocks, cudaStream_t stream,
                           GfMul gf) noexcept {
  if (gf == GfMul::kBitSerial) {
    parity_batch_kernel_bitserial<<<blocks, kThreadsPerBlock, 0, stream>>>(batch);
  } else if (gf == GfMul::kNibble) {
    parity_batch_kernel_nibble<<<blocks, kThreadsPerBlock, 0, stream>>>(batch);
  } else {
    parity_batch_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(batch);
  }
}

cudaError_t parity_kernel_blocks_per_sm(int* blocks, GfMul gf) noexcept {
  if (gf == GfMul::kBitSerial) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, parity_batch_kernel_bitserial,
                                                         kThreadsPerBlock, 0);
  }
  if (gf == GfMul::kNibble) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, parity_batch_kernel_nibble,
                                                         kThreadsPerBlock, 0);
  }
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, parity_batch_kernel,
                                                       kThreadsPerBlock, 0);
}

}  // namespace graid::kernels
