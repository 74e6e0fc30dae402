// Background-job work on one stripe of a mirrored level (RAID1, RAID10): resync copies each data
// strip from its first live copy to the others; rebuild copies it to the copies being rebuilt;
// check compares the live copies.
#include <cstring>

#include "level/level_module.h"

namespace graid {

bool can_resync_mirror_stripe(const Geometry& g, std::uint64_t stripe, std::uint64_t failed) {
  for (std::uint32_t d = 0; d < g.data_strips(); ++d) {
    bool any_copy = false;
    for (std::uint32_t c = 0; c < g.copies(); ++c)
      any_copy |= (failed >> g.data_member(stripe, d, c) & 1u) == 0;
    if (!any_copy) return false;
  }
  return true;
}

StripeOutcome process_mirror_stripe(StripeTask task, const Geometry& g, StripeAccess& access,
                                    std::uint64_t stripe) {
  std::span<AlignedBuffer> bufs = access.scratch();
  StripeOutcome out;
  for (std::uint32_t d = 0; d < g.data_strips(); ++d) {
    // The source: the first copy that is neither failed nor being rebuilt.
    std::uint32_t source = g.members();
    bool any_stale = false;
    for (std::uint32_t c = 0; c < g.copies(); ++c) {
      const std::uint32_t m = g.data_member(stripe, d, c);
      any_stale |= access.is_stale(m);
      if (source == g.members() && !access.is_failed(m, stripe) && !access.is_stale(m)) {
        source = m;
      }
    }
    if (task == StripeTask::kRebuild && !any_stale) continue;
    if (task == StripeTask::kCheck) {
      std::uint32_t live = 0;
      for (std::uint32_t c = 0; c < g.copies(); ++c)
        live += access.is_failed(g.data_member(stripe, d, c), stripe) ? 0 : 1;
      if (live < 2) {
        out.skipped = true;  // one copy left: nothing to compare it with
        continue;
      }
    }
    if (source == g.members()) {
      out.skipped = true;
      continue;
    }
    if (!out.member_io(source, access.read_strip(source, stripe, bufs[0].span()))) return out;
    for (std::uint32_t c = 0; c < g.copies(); ++c) {
      const std::uint32_t m = g.data_member(stripe, d, c);
      if (m == source || access.is_failed(m, stripe)) continue;
      if (task == StripeTask::kRebuild && !access.is_stale(m)) continue;
      if (task != StripeTask::kCheck) {
        if (!out.member_io(m, access.write_strip(m, stripe, bufs[0].span()))) return out;
        continue;
      }
      if (!out.member_io(m, access.read_strip(m, stripe, bufs[1].span()))) return out;
      if (std::memcmp(bufs[0].data(), bufs[1].data(), g.strip_bytes()) != 0) {
        out.inconsistent = true;
      }
    }
  }
  return out;
}

}  // namespace graid
