// The array's lifecycle around I/O: events for observers, quiescing and the checks stop()
// needs, open VDs, the member slot table, and examining a member's superblock.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "array/array_settings.h"
#include "array/superblock_io.h"
#include "meta/write_intent_bitmap.h"
#include "queue/array_queue_impl.h"

namespace graid {

std::string_view array_event_kind_name(ArrayEventKind kind) noexcept {
  switch (kind) {
    case ArrayEventKind::kStarted:
      return "started";
    case ArrayEventKind::kMemberFailed:
      return "member-failed";
    case ArrayEventKind::kMemberBack:
      return "member-back";
    case ArrayEventKind::kHealthChanged:
      return "health-changed";
    case ArrayEventKind::kInitStarted:
      return "init-started";
    case ArrayEventKind::kInitFinished:
      return "init-finished";
    case ArrayEventKind::kResyncStarted:
      return "resync-started";
    case ArrayEventKind::kResyncFinished:
      return "resync-finished";
    case ArrayEventKind::kAssemblyOverride:
      return "assembly-override";
    case ArrayEventKind::kSpareAdded:
      return "spare-added";
    case ArrayEventKind::kStopped:
      return "stopped";
    case ArrayEventKind::kMemberReplaced:
      return "member-replaced";
    case ArrayEventKind::kRebuildStarted:
      return "rebuild-started";
    case ArrayEventKind::kRebuildProgress:
      return "rebuild-progress";
    case ArrayEventKind::kRebuildFinished:
      return "rebuild-finished";
    case ArrayEventKind::kRebuildStopped:
      return "rebuild-stopped";
    case ArrayEventKind::kCheckStarted:
      return "check-started";
    case ArrayEventKind::kCheckMismatch:
      return "check-mismatch";
    case ArrayEventKind::kCheckFinished:
      return "check-finished";
    case ArrayEventKind::kCheckStopped:
      return "check-stopped";
    case ArrayEventKind::kJournalReplayed:
      return "journal-replayed";
    case ArrayEventKind::kInitStopped:
      return "init-stopped";
    case ArrayEventKind::kReplaceStarted:
      return "replace-started";
    case ArrayEventKind::kReplaceFinished:
      return "replace-finished";
    case ArrayEventKind::kReplaceStopped:
      return "replace-stopped";
    case ArrayEventKind::kResyncStopped:
      return "resync-stopped";
    case ArrayEventKind::kDataLost:
      return "data-lost";
    case ArrayEventKind::kLostRangeRewritten:
      return "lost-range-rewritten";
  }
  return "unknown";
}

std::string_view member_slot_state_name(MemberSlotState state) noexcept {
  switch (state) {
    case MemberSlotState::kActive:
      return "active";
    case MemberSlotState::kFailed:
      return "failed";
    case MemberSlotState::kSpare:
      return "spare";
    case MemberSlotState::kRebuilding:
      return "rebuilding";
    case MemberSlotState::kRemoved:
      return "removed";
    case MemberSlotState::kEmpty:
      return "empty";
    case MemberSlotState::kReplacement:
      return "replacement";
  }
  return "unknown";
}

namespace {

MemberSlotState slot_state(meta::MemberState state) noexcept {
  switch (state) {
    case meta::MemberState::kActive:
      return MemberSlotState::kActive;
    case meta::MemberState::kFailed:
      return MemberSlotState::kFailed;
    case meta::MemberState::kSpare:
      return MemberSlotState::kSpare;
    case meta::MemberState::kRebuilding:
      return MemberSlotState::kRebuilding;
    case meta::MemberState::kRemoved:
      return MemberSlotState::kRemoved;
    case meta::MemberState::kEmpty:
      break;
  }
  return MemberSlotState::kEmpty;
}

MemberSlot slot_of(const meta::Superblock& sb, std::uint32_t slot) {
  const meta::MemberEntry& e = sb.members[slot];
  MemberSlot out;
  out.slot = slot;
  out.state = slot_state(e.state);
  out.rebuild_offset = e.rebuild_offset;
  if (sb.replace && sb.replace->slot == slot && sb.replace->events == sb.events) {
    out.state = MemberSlotState::kReplacement;
    out.rebuild_offset = sb.replace->copied;
  }
  if (!e.uuid.is_nil()) out.uuid = e.uuid.to_string();
  return out;
}

std::uint32_t slot_count(const meta::Superblock& sb) noexcept {
  return sb.member_count + sb.spare_count;
}

}  // namespace

ArrayEventCounts byte_counts(const Geometry& geometry, std::uint64_t member_bytes) {
  ArrayEventCounts counts;
  counts.bytes = member_bytes;
  counts.stripes = (member_bytes + geometry.strip_bytes() - 1) / geometry.strip_bytes();
  return counts;
}

ArrayHealth Array::State::health() const noexcept {
  if (array_failed()) return ArrayHealth::kFailed;
  return failed_count.load() == 0 ? ArrayHealth::kOptimal : ArrayHealth::kDegraded;
}

void Array::State::note_health_locked() {
  const ArrayHealth now = health();
  if (now == reported_health) return;
  ArrayEvent event;
  event.kind = ArrayEventKind::kHealthChanged;
  event.health = now;
  event.previous_health = reported_health;
  event.message =
      fmt::format("{} -> {}: {} of {} members failed", array_health_name(reported_health),
                  array_health_name(now), failed_count.load(), geometry.members());
  reported_health = now;
  events.emit(std::move(event));
}

void Array::State::emit(ArrayEventKind kind, std::optional<std::uint32_t> member,
                        std::string message, ArrayEventCounts counts) {
  ArrayEvent event;
  event.kind = kind;
  event.member = member;
  event.health = health();
  event.previous_health = event.health;
  event.counts = counts;
  event.message = std::move(message);
  events.emit(std::move(event));
}

std::vector<std::shared_ptr<MemberDevice>> Array::State::superblock_targets() const {
  std::vector<std::shared_ptr<MemberDevice>> out(members.size());
  for (std::uint32_t m = 0; m < members.size(); ++m) {
    const meta::MemberState st = sb.members[m].state;
    const bool in_array =
        st == meta::MemberState::kActive ? !is_failed(m) : st == meta::MemberState::kRebuilding;
    if (in_array) out[m] = members[m];
  }
  for (const auto& spare : spares)
    out.push_back(spare);
  // A hot replace's device holds a spare slot (null in `spares`).
  if (sb.replace && sb.replace->slot < out.size()) out[sb.replace->slot] = replacement_owner;
  return out;
}

Status Array::quiesce(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::string busy;
    {
      const QueueRegistry& r = *state_->registry;
      MutexLock guard(r.mutex);
      for (std::size_t i = 0; i < r.queues.size(); ++i) {
        const std::uint32_t n = r.queues[i]->in_flight.load();
        if (n != 0) busy += fmt::format("{}queue {} ({} requests)", busy.empty() ? "" : ", ", i, n);
      }
    }
    if (busy.empty()) return Status::ok();
    if (std::chrono::steady_clock::now() >= deadline) {
      return make_error(Errc::kBusy,
                        "array '{}': requests still in flight after {} ms: {}; are the queues' "
                        "threads still polling?",
                        state_->name, timeout.count(), busy);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Result<MemberSlot> Array::member_slot(std::uint32_t slot) const {
  const State& s = *state_;
  MutexLock guard(s.control_mutex);
  if (slot >= slot_count(s.sb)) {
    return make_error(Errc::kOutOfRange, "no member slot {} (array has {})", slot,
                      slot_count(s.sb));
  }
  MemberSlot out = slot_of(s.sb, slot);
  const auto n = static_cast<std::uint32_t>(s.members.size());
  const MemberDevice* dev = slot < n                     ? s.members[slot].get()
                            : slot - n < s.spares.size() ? s.spares[slot - n].get()
                                                         : nullptr;
  if (s.sb.replace && s.sb.replace->slot == slot) {
    dev = s.replacement_owner.get();
    out.rebuild_offset = std::min(
        s.data_size, s.replace_copied.load(std::memory_order_acquire) * s.geometry.strip_bytes());
  }
  if (dev != nullptr) out.path = dev->path();
  if (slot < n && s.is_rebuilding(slot)) {
    // Live progress: the superblocks record the last checkpoint, memory how far it has got.
    out.rebuild_offset = std::min(
        s.data_size, s.rebuilt[slot].load(std::memory_order_acquire) * s.geometry.strip_bytes());
  }
  return out;
}

std::vector<MemberSlot> Array::member_slots() const {
  std::uint32_t n = 0;
  {
    MutexLock guard(state_->control_mutex);
    n = slot_count(state_->sb);
  }
  std::vector<MemberSlot> out;
  for (std::uint32_t i = 0; i < n; ++i) {
    auto slot = member_slot(i);
    if (slot) out.push_back(std::move(*slot));
  }
  return out;
}

Result<MemberExamination> Array::examine(MemberDevice& member) {
  auto sb = read_superblock(member);
  if (!sb) return sb.status();
  MemberExamination out;
  out.array_uuid = sb->array_uuid.to_string();
  out.name = sb->name;
  out.level = sb->level;
  out.member_count = sb->member_count;
  out.spare_count = sb->spare_count;
  out.strip_bytes = sb->strip_bytes;
  out.slot = sb->member_index;
  out.member_uuid = sb->member_uuid.to_string();
  out.state = slot_state(sb->members[sb->member_index].state);
  out.events = sb->events;
  out.clean = sb->clean();
  out.data_offset = sb->data_offset;
  out.data_size = sb->data_size;
  out.capacity = sb->data_capacity();
  out.ctime_ns = sb->ctime_ns;
  out.utime_ns = sb->utime_ns;
  out.init_checkpoint = sb->init_checkpoint;
  out.resync_checkpoint = sb->resync_checkpoint;
  out.check_checkpoint = sb->check_checkpoint;
  out.settings = array_settings(sb->settings);
  for (std::uint32_t i = 0; i < slot_count(*sb); ++i)
    out.slots.push_back(slot_of(*sb, i));
  for (const meta::VdEntry& e : sb->vds) {
    if (e.in_use()) out.vds.push_back(vd_info(e));
  }
  return out;
}

Result<GraidMetadata> Array::find_metadata(MemberDevice& member) {
  return find_graid_metadata(member);
}

Status Array::erase_superblock(MemberDevice& member, std::string_view array_uuid) {
  const auto sb = read_superblock(member);
  if (!sb) {
    return make_error(Errc::kNotFound, "{} carries no superblock of array {} ({}): left as it is",
                      member.path(), array_uuid, sb.status().message());
  }
  if (sb->array_uuid.to_string() != array_uuid) {
    return make_error(Errc::kInvalidArgument,
                      "{} carries the superblock of array {} ('{}'), not of {}: left as it is",
                      member.path(), sb->array_uuid.to_string(), sb->name, array_uuid);
  }
  return erase_superblock(member);
}

Status Array::erase_superblock(MemberDevice& member) {
  // Everything before the bit pages: the superblock, the block kept for a backup superblock and
  // the bitmap header. The bit pages carry no identity of their own and are meaningless without
  // the header; the data area is not touched.
  constexpr std::uint64_t kMetadataHeaders = meta::kBitmapPagesOffset;
  static_assert(meta::kSuperblockOffset == 0 && meta::kBitmapOffset < kMetadataHeaders);
  const std::uint64_t len = std::min(kMetadataHeaders, member.size() / 4096 * 4096);
  if (len == 0) return Status::ok();  // smaller than one superblock: none can be there
  const auto old = read_superblock(member);
  auto zeroes = AlignedBuffer::allocate(len, 4096);
  if (!zeroes) return zeroes.status();
  GRAID_RETURN_IF_ERROR(member.write_sync(0, zeroes->span()));
  GRAID_RETURN_IF_ERROR(member.flush_sync());
  if (old) {
    spdlog::info("graid: {}: erased the superblock of array {} ('{}'), slot {}", member.path(),
                 old->array_uuid.to_string(), old->name, old->member_index);
  }
  return Status::ok();
}

}  // namespace graid
