// Lost array data ranges (md's bad-block log, kept per drive group; meta::BadRange): recorded by
// background jobs where a member could not be read and redundancy could not make it up, refused
// to reads, and cleared by a write that covers them.
#include "array/bad_ranges.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "array/superblock_io.h"
#include "state/array_state.h"

namespace graid {

std::vector<meta::BadRange> merged_lost_ranges(std::vector<meta::BadRange> list,
                                               const std::vector<meta::BadRange>& add) {
  list.insert(list.end(), add.begin(), add.end());
  std::sort(list.begin(), list.end());
  std::vector<meta::BadRange> out;
  for (const meta::BadRange& r : list) {
    if (!out.empty() && out.back().offset + out.back().len >= r.offset) {
      const std::uint64_t end = std::max(out.back().offset + out.back().len, r.offset + r.len);
      out.back().len = static_cast<std::uint32_t>(end - out.back().offset);
      continue;
    }
    out.push_back(r);
  }
  return out;
}

LostRangesAfterWrite lost_ranges_after_write(const std::vector<meta::BadRange>& list,
                                             std::uint64_t offset, std::uint64_t len,
                                             std::size_t capacity) {
  LostRangesAfterWrite out;
  const std::uint64_t end = offset + len;
  std::size_t count = list.size();
  for (const meta::BadRange& r : list) {
    const std::uint64_t r_end = r.offset + r.len;
    if (end <= r.offset || r_end <= offset) {  // untouched
      out.list.push_back(r);
      continue;
    }
    const bool before = r.offset < offset;  // a part before the write stays
    const bool after = end < r_end;         // a part after it stays
    if (before && after && count + 1 > capacity) {
      out.kept_whole.push_back(r);
      out.list.push_back(r);
      continue;
    }
    const std::uint64_t cut_from = std::max(r.offset, offset);
    const std::uint64_t cut_to = std::min(r_end, end);
    out.cleared.push_back({cut_from, static_cast<std::uint32_t>(cut_to - cut_from)});
    if (before) out.list.push_back({r.offset, static_cast<std::uint32_t>(offset - r.offset)});
    if (after) out.list.push_back({end, static_cast<std::uint32_t>(r_end - end)});
    if (before && after) ++count;
  }
  return out;
}

namespace {

std::string describe(const std::vector<meta::BadRange>& ranges) {
  std::string out;
  for (const meta::BadRange& r : ranges)
    out += fmt::format("{}[{}, +{})", out.empty() ? "" : ", ", r.offset, r.len);
  return out;
}

}  // namespace

bool Array::State::reads_lost(std::uint64_t offset, std::uint64_t len) const {
  if (bad_count.load(std::memory_order_acquire) == 0) return false;
  MutexLock guard(bad_mutex);
  return std::any_of(bad_list.begin(), bad_list.end(), [&](const meta::BadRange& r) {
    return r.offset < offset + len && offset < r.offset + r.len;
  });
}

void Array::State::publish_bad_ranges_locked() {
  MutexLock guard(bad_mutex);
  bad_list = sb.bad_ranges;
  bad_count.store(static_cast<std::uint32_t>(bad_list.size()), std::memory_order_release);
}

Status Array::State::add_lost_ranges(std::vector<meta::BadRange> ranges, std::uint32_t member,
                                     std::string_view why) {
  if (ranges.empty()) return Status::ok();
  std::string lost;
  {
    MutexLock guard(control_mutex);
    std::vector<meta::BadRange> list = merged_lost_ranges(sb.bad_ranges, ranges);
    if (list.size() > meta::kMaxBadRanges) {
      return make_error(Errc::kNoSpace,
                        "array '{}' would have {} lost ranges, more than its list holds ({})", name,
                        list.size(), meta::kMaxBadRanges);
    }
    sb.bad_ranges = std::move(list);
    // Refused to reads at once (the job holds the stripes, so nothing reads them meanwhile),
    // recorded before the job zeroes what it could not read.
    publish_bad_ranges_locked();
    if (Status st = write_superblocks_locked(); !st) {
      if (array_failed()) return st;
      // The members that failed the update are failed; the rest hold the list.
    }
    lost = describe(ranges);
  }
  spdlog::error(
      "graid: array '{}': data lost in array bytes {}: member {} could not be read ({}) "
      "and redundancy could not make it up; reads there fail until they are rewritten",
      name, lost, member, why);
  emit(ArrayEventKind::kDataLost, member,
       fmt::format("array bytes {} lost: member {} could not be read there ({}), and redundancy "
                   "could not make them up; reads fail until a write covers them",
                   lost, member, why));
  return Status::ok();
}

void Array::State::lost_ranges_rewritten(std::uint64_t offset, std::uint64_t len) {
  if (bad_count.load(std::memory_order_acquire) == 0) return;
  LostRangesAfterWrite after;
  {
    MutexLock guard(control_mutex);
    after = lost_ranges_after_write(sb.bad_ranges, offset, len, meta::kMaxBadRanges);
    if (after.cleared.empty()) {
      if (!after.kept_whole.empty()) {
        spdlog::warn(
            "graid: array '{}': a write into lost array bytes {} did not make its part readable: "
            "the list of lost ranges is full ({}), so the range stays whole until a write covers "
            "all of it",
            name, describe(after.kept_whole), meta::kMaxBadRanges);
      }
      return;
    }
    sb.bad_ranges = after.list;
    // The write has completed on every member that takes it: flushed first, so the range is
    // recorded readable only once its data is on stable storage. A member that fails the flush
    // is failed (what it missed is then the rebuild's).
    const std::vector<Status> flushed = flush_members(writing_members(*this), metadata_timeout);
    for (std::uint32_t m = 0; m < flushed.size(); ++m) {
      if (flushed[m] || !mark_failed_locked(m)) continue;
      emit(ArrayEventKind::kMemberFailed, m,
           fmt::format("flush before recording a rewritten lost range: {}", flushed[m].message()));
    }
    if (Status st = write_superblocks_locked(); !st) {
      spdlog::warn("graid: array '{}': recording rewritten lost ranges: {}", name, st.message());
    }
    publish_bad_ranges_locked();
  }
  const std::string what = describe(after.cleared);
  spdlog::info("graid: array '{}': lost array bytes {} rewritten; they read again", name, what);
  emit(ArrayEventKind::kLostRangeRewritten, std::nullopt,
       fmt::format("array bytes {} rewritten: they read again", what));
  if (!after.kept_whole.empty()) {
    spdlog::warn("graid: array '{}': lost ranges {} kept whole: the list is full ({})", name,
                 describe(after.kept_whole), meta::kMaxBadRanges);
  }
}

std::vector<LostRange> Array::lost_ranges() const {
  MutexLock guard(state_->control_mutex);
  std::vector<LostRange> out;
  for (const meta::BadRange& r : state_->sb.bad_ranges)
    out.push_back(LostRange{r.offset, r.len});
  return out;
}

}  // namespace graid
