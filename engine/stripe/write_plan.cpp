#include "stripe/write_plan.h"

#include <bit>

#include "graid/parity.h"

namespace graid {

WritePlan plan_write(const ExtentCoverage& c) {
  WritePlan plan;
  const std::uint64_t data = low_bits(c.k);
  const std::uint64_t parity = low_bits(c.k + c.parity) & ~data;
  const std::uint64_t live = ~c.dead;
  if (std::popcount(c.dead & (data | parity)) > static_cast<int>(c.parity)) {
    plan.kind = WritePlanKind::kFailed;
    return plan;
  }
  plan.writes = (c.touched & live) | (parity & live);
  const std::uint64_t dead_data = c.dead & data;
  const std::uint64_t live_parity = parity & live;

  // Only what the new data image needs: strips not fully rewritten.
  std::uint64_t rcw_reads = data & ~c.full;
  if (live_parity == 0) {
    // No parity left to compute: only partially written strips need their old bytes.
    rcw_reads = c.touched & ~c.full;
  }
  if ((rcw_reads & dead_data) != 0) {
    // A dead strip would have to be read: rebuild it from everything that is left.
    plan.kind = WritePlanKind::kDegraded;
    plan.reads = (data | parity) & live;
    return plan;
  }
  if (rcw_reads == 0) {
    plan.kind = live_parity == 0 ? WritePlanKind::kReconstructWrite : WritePlanKind::kFullStripe;
    plan.reads = 0;
    return plan;
  }
  plan.kind = WritePlanKind::kReconstructWrite;
  plan.reads = rcw_reads;

  // Read-modify-write: RAID5 only (P' = P ^ old ^ new as one XOR of 1 + 2|T| sources), nothing
  // dead, and only when it reads strictly fewer chunks.
  if (c.parity == 1 && c.allow_read_modify_write && c.dead == 0) {
    const std::uint64_t rmw_reads = c.touched | parity;
    const int sources = 1 + 2 * std::popcount(c.touched);
    if (std::popcount(rmw_reads) < std::popcount(rcw_reads) &&
        sources <= static_cast<int>(kMaxDataChunks)) {
      plan.kind = WritePlanKind::kReadModifyWrite;
      plan.reads = rmw_reads;
    }
  }
  return plan;
}

}  // namespace graid
