// Choosing how to write one row extent of one stripe.
//
// A stripe write touches some data strips over a row extent [a, b) (the same byte range inside
// every strip). Chunk indices follow parity.h: data strips 0..k-1, then P (k) and Q (k+1). Masks
// below have bit i set for chunk i.
//
//   kFullStripe       every data strip fully covered: no reads, parity from new data.
//   kReconstructWrite read the data strips not fully covered, encode parity from the full image.
//                     Also the plan when members are dead but none of the dead data strips has
//                     to be read (they are fully rewritten, or only parity is dead).
//   kReadModifyWrite  (RAID5) read old data of the touched strips and old P:
//                     P' = P ^ old ^ new. Chosen when it reads fewer chunks than reconstruct.
//   kDegraded         a dead data strip must be known to compute parity: read every live chunk,
//                     reconstruct the dead ones, overlay new data, encode parity afresh.
//   kFailed           more dead chunks than parity can cover: the data cannot be kept.
//
// Writes go to every live touched data strip and every live parity chunk.
#pragma once

#include <cstdint>

namespace graid {

enum class WritePlanKind : std::uint8_t {
  kFullStripe,
  kReconstructWrite,
  kReadModifyWrite,
  kDegraded,
  kFailed,
};

struct ExtentCoverage {
  std::uint32_t k = 0;        // data strips
  std::uint32_t parity = 0;   // 1 (RAID5) or 2 (RAID6)
  std::uint64_t touched = 0;  // data strips with new data in the extent
  std::uint64_t full = 0;     // data strips whose extent is all new data (subset of touched)
  std::uint64_t dead = 0;     // chunks (data or parity) on failed members
  bool allow_read_modify_write = true;
};

struct WritePlan {
  WritePlanKind kind = WritePlanKind::kFailed;
  std::uint64_t reads = 0;   // chunks to read before computing
  std::uint64_t writes = 0;  // chunks to write after computing
};

// Pure: the cheapest correct plan for `c` (fewest member reads; ties go to reconstruct-write,
// which never reads parity).
WritePlan plan_write(const ExtentCoverage& c);

inline std::uint64_t chunk_bit(std::uint32_t chunk) {
  return std::uint64_t{1} << chunk;
}
inline std::uint64_t low_bits(std::uint32_t n) {
  return n >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
}

}  // namespace graid
