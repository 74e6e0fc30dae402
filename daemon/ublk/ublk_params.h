// What a ublk device for a VD looks like to the kernel: queue count and depth, the largest
// request, and the block-layer limits (SET_PARAMS), planned from the array's geometry within a
// memory budget. Pure functions: no kernel involved, so they are unit-tested on any machine.
//
// The rules (docs/ublk.md, "Parameters"):
// - logical block = the array's (512 or 4096), physical block 4 KiB.
// - io_min = the strip, io_opt = a full stripe's data, each only where it is a power of two
//   (the kernel takes shifts): a 4+1 RAID5 with 64 KiB strips advertises io_min 64 KiB and
//   io_opt 256 KiB, a 3+1 one io_min 64 KiB and io_opt 64 KiB.
// - chunk_sectors = the strip for RAID0/10 (the block layer then splits at strip boundaries);
//   0 for RAID1/5/6, where a split would cut a full-stripe write into partial ones.
// - max request (max_sectors, and the kernel's per-tag buffer) at least a full stripe.
// - volatile write cache + FUA: flushes arrive and reach the members; FUA writes are durable.
// - discard and write-zeroes only where every member supports them.
// - per-tag buffers (copy mode): queues x depth x max request fits the budget, shrinking depth
//   first (not below 16), then the max request (not below a full stripe or 128 KiB), then
//   depth again (not below 1); a device that cannot fit even then is refused.
#pragma once

#include <cstdint>

#include "graid/status.h"
#include "ublk/ublk_uapi.h"

namespace graid::ublk {

struct UblkShape {
  std::uint64_t size_bytes = 0;       // the VD
  std::uint32_t logical_block = 512;  // the array's logical block size
  std::uint32_t strip_bytes = 65536;
  std::uint32_t data_strips = 1;  // data strips per stripe
  bool striped = false;           // RAID0/10: advertise chunk_sectors = strip
  bool discard = false;           // the array's discard works (reads zeroes after)
  bool write_zeroes = false;      // ... and write-zeroes
  bool read_only = false;
};

struct UblkLimits {
  std::uint32_t queues = 1;                    // one per I/O thread
  std::uint32_t max_depth = 128;               // per queue
  std::uint64_t memory_budget = 256ull << 20;  // per-tag buffers, all queues together
  bool user_copy = false;                      // USER_COPY: no per-tag buffers at all
};

struct UblkLayout {
  std::uint16_t queues = 0;
  std::uint16_t depth = 0;
  std::uint32_t max_io_bytes = 0;  // per request; the per-tag buffer in copy mode
  std::uint64_t buffer_bytes = 0;  // per-tag buffers, all queues (0 with USER_COPY)
  Params params{};                 // types BASIC (+ DISCARD), len set
};

// The smallest and largest request size the planner will pick.
inline constexpr std::uint32_t kMinMaxIoBytes = 128u << 10;
inline constexpr std::uint32_t kMaxMaxIoBytes = 32u << 20;  // the kernel's limit per request

// kInvalidArgument for a shape the kernel cannot take (size not a multiple of the logical
// block, block size outside 512..4096), kNoSpace when the budget cannot hold one request per
// queue at the smallest allowed size.
Result<UblkLayout> plan_ublk(const UblkShape& shape, const UblkLimits& limits);

// Who copies a request's data between the kernel and graid (graidd --ublk-copy, docs/ublk.md).
enum class CopyMode : std::uint8_t {
  kKernel,  // the driver, into per-tag buffers
  kUser,    // graid, with USER_COPY
  kZero,    // none where AUTO_BUF_REG serves it (reads; RAID0/1/10 writes), else as kUser
  kAuto,    // kZero for levels without parity where the driver has it, else kKernel
};

struct CopyChoice {
  bool user_copy = false;  // UblkLimits::user_copy
  bool zero_copy = false;  // UblkDeviceOptions::zero_copy
  bool operator==(const CopyChoice&) const = default;
};

// What one device asks the driver for, from the mode, the driver's GET_FEATURES answer and the
// VD's level. Zero copy needs ZERO_COPY and AUTO_BUF_REG (with USER_COPY beside them, for what
// it cannot serve); kZero falls back to USER_COPY without them. kAuto takes zero copy only where
// the level has no parity: a parity WRITE must be in graid's memory anyway, and the driver's copy
// into a tag buffer costs less than graid's USER_COPY read of it (docs/performance.md, "md at one
// and two jobs"); without AUTO_BUF_REG, or on RAID5/6, kAuto is kKernel.
CopyChoice choose_copy(CopyMode mode, std::uint64_t driver_features, bool parity) noexcept;

// The largest power of two that is <= v (v > 0), and log2 of a power of two.
std::uint64_t floor_pow2(std::uint64_t v) noexcept;
unsigned log2_exact(std::uint64_t pow2) noexcept;

}  // namespace graid::ublk
