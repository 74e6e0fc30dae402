// Background-job work on one stripe of a mirrored level (RAID1, RAID10): resync copies each data
// strip from its first live copy to the others; rebuild copies it to the copies being rebuilt;
// check compares the live copies.
#include <fmt/format.h>

#include <cstring>
#include <string>
#include <vector>

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

namespace {

// kRepair of data strip `d`: every live copy read; when they differ, a value more than half of
// them hold is written over the others (three or more copies outvote a bad one), else the first
// live copy's (as md). False when a member I/O failed (in `out`).
bool repair_mirror_strip(const Geometry& g, StripeAccess& access, std::uint64_t stripe,
                         std::uint32_t d, StripeOutcome& out) {
  std::span<AlignedBuffer> bufs = access.scratch();
  std::vector<std::uint32_t> live;  // members, in copy order
  for (std::uint32_t c = 0; c < g.copies(); ++c) {
    const std::uint32_t m = g.data_member(stripe, d, c);
    if (!access.is_failed(m, stripe) && !access.is_stale(m)) live.push_back(m);
  }
  if (live.size() < 2) {
    out.skipped = true;
    return true;
  }
  for (std::size_t i = 0; i < live.size(); ++i)
    if (!out.member_read(live[i], access.read_strip(live[i], stripe, bufs[i].span()))) return false;
  auto same = [&](std::size_t a, std::size_t b) {
    return std::memcmp(bufs[a].data(), bufs[b].data(), g.strip_bytes()) == 0;
  };
  std::size_t source = 0, best = 0;
  for (std::size_t i = 0; i < live.size(); ++i) {
    std::size_t votes = 0;
    for (std::size_t j = 0; j < live.size(); ++j)
      votes += same(i, j) ? 1 : 0;
    if (votes > best) {
      best = votes;
      source = i;
    }
  }
  if (best == live.size()) return true;  // all agree
  out.inconsistent = true;
  if (best * 2 <= live.size()) source = 0;  // no majority: the first live copy, as md
  std::string rewritten;
  for (std::size_t i = 0; i < live.size(); ++i) {
    if (same(source, i)) continue;
    if (!out.member_io(live[i], access.write_strip(live[i], stripe, bufs[source].span()))) {
      return false;
    }
    rewritten += fmt::format("{}{}", rewritten.empty() ? "" : ", ", live[i]);
  }
  const std::string note =
      best * 2 > live.size()
          ? fmt::format("strip {}: member(s) {} outvoted by {} of {} copies and rewritten", d,
                        rewritten, best, live.size())
          : fmt::format(
                "strip {}: copies differ with no majority; member(s) {} rewritten from "
                "member {}",
                d, rewritten, live[source]);
  out.repaired += (out.repaired.empty() ? "" : "; ") + note;
  return true;
}

}  // namespace

StripeOutcome process_mirror_stripe(StripeTask task, const Geometry& g, StripeAccess& access,
                                    std::uint64_t stripe) {
  std::span<AlignedBuffer> bufs = access.scratch();
  StripeOutcome out;
  if (task == StripeTask::kRepair) {
    for (std::uint32_t d = 0; d < g.data_strips(); ++d)
      if (!repair_mirror_strip(g, access, stripe, d, out)) return out;
    return out;
  }
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
    if (!out.member_read(source, access.read_strip(source, stripe, bufs[0].span()))) return out;
    for (std::uint32_t c = 0; c < g.copies(); ++c) {
      const std::uint32_t m = g.data_member(stripe, d, c);
      if (m == source || access.is_failed(m, stripe)) continue;
      if (task == StripeTask::kRebuild && !access.is_stale(m)) continue;
      if (task != StripeTask::kCheck) {
        if (!out.member_io(m, access.write_strip(m, stripe, bufs[0].span()))) return out;
        continue;
      }
      if (!out.member_read(m, access.read_strip(m, stripe, bufs[1].span()))) return out;
      if (std::memcmp(bufs[0].data(), bufs[1].data(), g.strip_bytes()) != 0) {
        out.inconsistent = true;
      }
    }
  }
  return out;
}

}  // namespace graid
