// Member failure: marking a member failed, recording it in the superblocks of the survivors,
// and holding back the acknowledgement of writes that skipped it until that record is durable.
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

#include "array/superblock_io.h"
#include "state/array_state.h"

namespace graid {

bool Array::State::mark_failed_locked(std::uint32_t member) {
  if (is_failed(member)) {
    if (sb.members[member].state != meta::MemberState::kRebuilding) return false;
    // A member being rebuilt fails: plans skip it from now on in every stripe, so writes that
    // do wait for the record, as for any failure (a crash before it would leave the superblocks
    // trusting its checkpoint while it missed those writes).
    failures_marked.fetch_add(1, std::memory_order_acq_rel);
    rebuilding[member].store(0, std::memory_order_release);
    rebuilt[member].store(0, std::memory_order_release);
    readd_bitmap_below[member].store(0, std::memory_order_release);
    sb.members[member].state = meta::MemberState::kFailed;
    sb.members[member].rebuild_offset = 0;
    return true;
  }
  // The degraded-only journal goes on before any write can plan around this member.
  activate_journal(/*degrading=*/true);
  // Counted before the flag is set: a writer that sees the flag (acquire) then sees the count
  // and knows a superblock update is owed before it may acknowledge.
  failures_marked.fetch_add(1, std::memory_order_acq_rel);
  failed[member].store(1, std::memory_order_release);
  failed_count.fetch_add(1);
  sb.members[member].state = meta::MemberState::kFailed;
  if (bitmap) bitmap->drop_member(member);
  return true;
}

Status Array::State::write_superblocks_locked() {
  Status st = write_superblock_rounds_locked();
  // Failures are marked only under control_mutex, which this thread holds: every one marked so
  // far (by fail_member, or just now for a member that failed its superblock write) is in the
  // update just written. Released even when the update failed: the writes that waited then see
  // a failed array and report an error.
  publish_failures_recorded(failures_marked.load(std::memory_order_acquire));
  return st;
}

Status Array::State::write_superblock_rounds_locked() {
  // A member that cannot take its superblock has failed too; record that on the others.
  for (std::uint32_t round = 0; round <= geometry.members(); ++round) {
    ++sb.events;
    sb.utime_ns = wall_clock_ns();
    sb.set_journal_covered(journal_covered);         // stamped with every update (meta::Superblock)
    if (sb.replace) sb.replace->events = sb.events;  // written by a build that knows it
    const std::vector<std::shared_ptr<MemberDevice>> targets = superblock_targets();
    const std::vector<Status> written = write_superblock_copies(targets, sb, metadata_timeout);
    sb_events.store(sb.events, std::memory_order_release);
    bool any_failed = false;
    // Spares last and from the top, so that dropping one does not move those still to handle.
    for (std::uint32_t m = static_cast<std::uint32_t>(written.size()); m-- > 0;) {
      if (written[m]) continue;
      if (written[m].code() != Errc::kIoError && written[m].code() != Errc::kOutOfRange) {
        return written[m];  // not the member's fault (no memory, a bad superblock)
      }
      spdlog::error("graid: member {} ({}) failed writing its superblock: {}", m,
                    targets[m]->path(), written[m].to_string());
      if (sb.replace && sb.replace->slot == m) {
        // The hot replace's device: the replace is given up (the copy notices), its slot goes.
        sb.replace.reset();
        replacement_failed("superblock write", -EIO);
        drop_spare_locked(m);
        any_failed = true;
        continue;
      }
      if (m >= members.size()) {
        emit(ArrayEventKind::kMemberFailed, m,
             fmt::format("spare {} failed writing its superblock and was dropped: {}",
                         targets[m]->path(), written[m].message()));
        drop_spare_locked(m);
        any_failed = true;
        continue;
      }
      if (mark_failed_locked(m)) {
        emit(ArrayEventKind::kMemberFailed, m,
             fmt::format("superblock write failed: {}", written[m].message()));
      }
      any_failed = true;
    }
    if (!any_failed) return Status::ok();
    note_health_locked();
    if (array_failed()) {
      return make_error(Errc::kIoError, "array failed while writing superblocks");
    }
  }
  return make_error(Errc::kIoError, "superblock update did not settle");
}

Status Array::State::fail_member(std::uint32_t member, std::string_view reason,
                                 const MemberDevice* device) {
  MutexLock guard(control_mutex);
  if (member >= members.size()) {
    return make_error(Errc::kOutOfRange, "no member {} (array has {})", member, members.size());
  }
  if (device != nullptr && members[member].get() != device) return Status::ok();
  if (!mark_failed_locked(member)) return Status::ok();
  ArrayEventCounts counts;
  counts.errors = stats().members[member].errors();
  emit(ArrayEventKind::kMemberFailed, member, std::string(reason), counts);
  spdlog::warn("graid: array '{}': member {} ({}) failed: {}; {} of {} members failed", name,
               member, members[member] ? members[member]->path() : "missing", reason,
               failed_count.load(), members.size());
  if (array_failed()) {
    spdlog::error("graid: array '{}' has failed: more members lost than {} tolerates", name,
                  raid_level_name(geometry.level()));
  }
  Status st = write_superblocks_locked();  // publishes the record to the writes parked on it
  note_health_locked();
  return st;
}

void Array::State::zeroing_refused(MemberOp op, std::uint32_t member, std::int32_t result) {
  if (!zeroing_supported(op).exchange(false)) return;
  spdlog::warn("graid: array '{}': {} cannot {} ({}); they are written as zeroes from now on", name,
               members[member] ? members[member]->path() : "a member",
               op == MemberOp::kWriteZeroes ? "write zeroes" : "discard", std::strerror(-result));
}

void Array::State::drop_spare_locked(std::uint32_t slot) {
  const auto n = static_cast<std::uint32_t>(members.size());
  const std::uint32_t last = n + sb.spare_count - 1;
  for (std::uint32_t s = slot; s < last; ++s)
    sb.members[s] = sb.members[s + 1];
  sb.members[last] = meta::MemberEntry{};
  --sb.spare_count;
  if (sb.replace && sb.replace->slot > slot) --sb.replace->slot;
  spares.erase(spares.begin() + (slot - n));
}

bool Array::State::failures_durable_or_park(IoContext& ctx, Task& resume) {
  const std::uint64_t marked = failures_marked.load(std::memory_order_acquire);
  if (failures_recorded.load(std::memory_order_acquire) >= marked) return true;
  MutexLock guard(parked_mutex);
  // Checked again under the lock publish_failures_recorded() takes, so no release is missed.
  if (failures_recorded.load(std::memory_order_acquire) >= marked) return true;
  parked.emplace_back(&ctx, &resume);
  return false;
}

void Array::State::publish_failures_recorded(std::uint64_t marked) {
  std::vector<std::pair<IoContext*, Task*>> release;
  {
    MutexLock guard(parked_mutex);
    failures_recorded.store(marked, std::memory_order_release);
    release.swap(parked);
  }
  for (auto& [ctx, task] : release)
    ctx->post(*task);
}

}  // namespace graid
