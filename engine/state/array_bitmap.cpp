// Write-intent bitmap policy of a running array: declaring writes before they reach members, and
// clearing idle regions' bits after flushes (two-phase, as md).
#include <fmt/format.h>

#include <chrono>

#include "state/array_state.h"

namespace graid {

Status Array::State::bitmap_begin(std::uint64_t member_offset, std::uint64_t len) {
  if (!bitmap) return Status::ok();
  for (std::uint32_t attempt = 0; attempt <= geometry.members(); ++attempt) {
    std::vector<std::uint32_t> failed_members;
    Status st = bitmap->begin_write(member_offset, len, &failed_members);
    if (st) return st;
    if (failed_members.empty()) return st;
    for (std::uint32_t m : failed_members) {
      Status fs =
          fail_member(m, fmt::format("write-intent bitmap update failed: {}", st.to_string()));
      (void)fs;
    }
    if (array_failed()) return make_error(Errc::kIoError, "array failed updating its bitmap");
  }
  return make_error(Errc::kIoError, "write-intent bitmap update did not settle");
}

bool Array::State::begin_bitmap_clear() {
  if (!bitmap) return false;
  // While a member is failed or rebuilding the bits are what it missed: a re-add of the same
  // drive rebuilds only those regions (readd_bitmap_below), so none is cleared until it is
  // whole.
  if (failed_count.load(std::memory_order_acquire) != 0) return false;
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  const std::int64_t interval =
      std::chrono::duration_cast<std::chrono::nanoseconds>(bitmap_clear_interval).count();
  if (now - bitmap_cleared_at_ns.load(std::memory_order_relaxed) < interval) return false;
  bool expected = false;
  if (!bitmap_clearing.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
    return false;  // another flush runs a cycle
  }
  if (bitmap->mark_clear_candidates() == 0) {
    bitmap_clearing.store(false, std::memory_order_release);
    bitmap_cleared_at_ns.store(now, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void Array::State::end_bitmap_clear(bool flushed) {
  if (flushed && !array_failed()) {
    std::vector<std::uint32_t> failed_members;
    Status st =
        bitmap->clear_candidates(sb_events.load(std::memory_order_acquire), &failed_members);
    note_bitmap_cleared();
    for (std::uint32_t m : failed_members) {
      Status fs =
          fail_member(m, fmt::format("write-intent bitmap clear failed: {}", st.to_string()));
      (void)fs;
    }
  }
  bitmap_cleared_at_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count(),
                             std::memory_order_relaxed);
  bitmap_clearing.store(false, std::memory_order_release);
}

}  // namespace graid
