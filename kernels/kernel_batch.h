// From StripeJobs to the kernels' batch descriptor (plain C++, shared by the host emulator and
// the cuda backend).
//
// Two steps, so the cuda backend can move chunks to device memory in between:
//   plan_stripe()   which chunks a job reads and writes, and the per-row GF coefficients for its
//                   failure pattern (all the algebra happens here, once per stripe, on the host);
//   materialize()   the KernelStripe for that plan with chunk c at address addr[c] (host
//                   pointers for the emulator, device pointers for the GPU).
// KernelBatchBuilder then collects stripes and lays out the tile prefix sum one launch needs.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "graid/parity.h"
#include "graid/status.h"
#include "parity_kernels.h"

namespace graid::kernels {

static_assert(kMaxKernelData == kMaxDataChunks, "descriptor holds every data chunk");

// What one stripe job asks of the kernel body, in chunk indices (0..k-1 data, k P, k+1 Q).
struct StripePlan {
  std::uint64_t len = 0;
  std::uint8_t k = 0;
  std::uint8_t rows = 0;   // 1 or 2
  std::uint8_t flags = 0;  // kNeedQ | kCompare (kAligned16 is decided by materialize)
  std::uint8_t coef[2][2] = {{0, 0}, {0, 0}};
  std::uint64_t read_mask = 0;        // bit c: chunk c is read (inputs and verify comparands)
  std::array<std::uint8_t, 2> out{};  // chunk of each row
  bool p_in = false;                  // chunk k folded into S_P
  bool q_in = false;                  // chunk k+1 folded into S_Q
  std::uint32_t data_in = 0;          // bit i: data chunk i is an input

  bool reads(std::uint32_t chunk) const noexcept { return (read_mask >> chunk) & 1u; }
  // Chunks the kernel writes (none for verify).
  bool writes(std::uint32_t chunk) const noexcept {
    if (flags & kCompare) return false;
    for (std::uint32_t r = 0; r < rows; ++r) {
      if (out[r] == chunk) return true;
    }
    return false;
  }
};

// Plans `job`. REQUIRES: validate_job(job) is ok (the result is unspecified otherwise).
StripePlan plan_stripe(const StripeJob& job) noexcept;

// Chunk addresses of one stripe, indexed like StripeJob::chunk.
using ChunkAddrs = std::array<std::uint8_t*, kMaxStripeChunks>;

// The job's own chunk pointers (what the host emulator runs on).
ChunkAddrs host_addrs(const StripeJob& job) noexcept;

// The descriptor for `plan` with chunk c at addrs[c]. Sets kAligned16 when every used address is
// 16-byte aligned.
KernelStripe materialize(const StripePlan& plan, const ChunkAddrs& addrs) noexcept;

// Collects the stripes of one launch and lays out tile_begin (and a zeroed mismatch array). Reuse
// one builder across batches to keep its vectors' capacity.
class KernelBatchBuilder {
 public:
  void clear() noexcept;
  void add(const KernelStripe& stripe);
  std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(stripes_.size()); }
  std::uint64_t tile_count() const noexcept { return tile_begin_.back(); }

  std::span<const KernelStripe> stripes() const noexcept { return stripes_; }
  std::span<const std::uint64_t> tile_begin() const noexcept { return tile_begin_; }
  std::span<std::uint32_t> mismatch() noexcept { return mismatch_; }

  // The batch over this builder's own (host) arrays; valid until the builder changes.
  KernelBatch view() noexcept;

 private:
  std::vector<KernelStripe> stripes_;
  std::vector<std::uint64_t> tile_begin_{0};
  std::vector<std::uint32_t> mismatch_;
};

// Validates every job of a batch (validate_job), naming the first bad one. The kernels' backends
// call this before touching any data, as the engine's backends do.
Status validate_jobs(std::span<const StripeJob> jobs);

}  // namespace graid::kernels
