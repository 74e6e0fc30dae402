// Array: state queries, member failure from the API, attaching queues, clean stop.
#include "graid/array.h"

#include <spdlog/spdlog.h>

#include "array/consistency.h"
#include "array/superblock_io.h"
#include "queue/array_queue_impl.h"

namespace graid {

std::string_view array_health_name(ArrayHealth health) noexcept {
  switch (health) {
    case ArrayHealth::kOptimal:
      return "optimal";
    case ArrayHealth::kDegraded:
      return "degraded";
    case ArrayHealth::kFailed:
      return "failed";
  }
  return "unknown";
}

std::string_view init_method_name(InitMethod method) noexcept {
  switch (method) {
    case InitMethod::kNone:
      return "not initialised (assumed clean)";
    case InitMethod::kKnownZero:
      return "members read zeroes: nothing to initialise";
    case InitMethod::kZeroed:
      return "initialised by zeroing the members";
    case InitMethod::kResync:
      return "parity computed from the members' data (re-sync)";
    case InitMethod::kNotRecorded:
      return "unknown (created before graid recorded it)";
  }
  return "unknown";
}

std::uint64_t Array::State::failed_mask() const noexcept {
  std::uint64_t mask = 0;
  for (std::uint32_t m = 0; m < geometry.members(); ++m)
    mask |= is_failed(m) ? std::uint64_t{1} << m : 0;
  return mask;
}

Array::Array(std::unique_ptr<State> state) : state_(std::move(state)) {}
// The observer may call back into the array while its last events are delivered.
Array::~Array() {
  if (const std::uint32_t attached = queues_attached(); attached != 0) {
    spdlog::error("graid: array '{}' destroyed with {} queues attached", state_->name, attached);
  }
  state_->events.shutdown();
}

const Geometry& Array::geometry() const noexcept {
  return state_->geometry;
}
std::string Array::uuid() const {
  MutexLock lock(state_->control_mutex);
  return state_->sb.array_uuid.to_string();
}
const std::string& Array::name() const noexcept {
  return state_->name;
}
std::uint64_t Array::member_data_offset() const noexcept {
  return state_->data_offset;
}
Array::JournalState Array::journal_state() const {
  JournalState out;
  out.policy = state_->journal_policy.load(std::memory_order_acquire);
  if (state_->journal) {
    out.area_offset = state_->journal->area_offset();
    out.area_bytes = state_->journal->area_bytes();
    out.active = state_->journal->active();
    MutexLock guard(state_->control_mutex);
    out.covers_all = out.active && state_->journal_covered;
  }
  return out;
}
std::uint64_t Array::member_data_bytes() const noexcept {
  return state_->data_size;
}
std::uint64_t Array::capacity() const noexcept {
  return state_->capacity;
}
std::uint32_t Array::member_count() const noexcept {
  return state_->geometry.members();
}

std::uint32_t Array::logical_block_size() const noexcept {
  return state_->logical_block;
}

bool Array::supports_discard() const noexcept {
  return state_->discard_supported.load(std::memory_order_relaxed);
}

bool Array::supports_write_zeroes() const noexcept {
  return state_->write_zeroes_supported.load(std::memory_order_relaxed);
}

std::uint64_t Array::corrected_read_errors(std::uint32_t member) const noexcept {
  return state_->read_errors ? state_->read_errors->total(member) : 0;
}

InitMethod Array::init_method() const noexcept {
  return state_->init_method;
}

ArrayHealth Array::health() const noexcept {
  return state_->health();
}

MemberHealth Array::member_health(std::uint32_t member) const noexcept {
  return member < state_->members.size() && !state_->is_failed(member) ? MemberHealth::kActive
                                                                       : MemberHealth::kFailed;
}

Status Array::fail_member(std::uint32_t member, std::string_view reason) {
  return state_->fail_member(member, reason);
}

Result<std::unique_ptr<ArrayQueue>> Array::attach(IoContext& ctx) {
  return ArrayQueue::make(*state_, ctx);
}

Status Array::stop() {
  State& s = *state_;
  if (const std::uint32_t attached = queues_attached(); attached != 0) {
    return make_error(Errc::kBusy,
                      "array '{}' still has {} queues attached: stop I/O and destroy them first "
                      "(quiesce() waits for requests in flight); nothing was changed",
                      s.name, attached);
  }
  // Every device that takes writes is flushed before any bit is cleared: the roles in sync,
  // those being rebuilt, and a hot replacement, which takes its role's writes too (its flush is
  // record_replace_checkpoint's, which also records how far its copy got, so the next assembly
  // resumes it there). A bit cleared before a device that missed nothing was flushed would let a
  // power cut take writes from it with nothing left to say so.
  const std::vector<Status> flushed = flush_members(writing_members(s), s.metadata_timeout);
  bool all_flushed = true;
  for (std::uint32_t m = 0; m < flushed.size(); ++m) {
    if (!flushed[m]) {
      all_flushed = false;
      Status fs = s.fail_member(m, flushed[m].to_string());
      (void)fs;
    }
  }
  if (Status st = s.record_replace_checkpoint(); !st) {
    all_flushed = false;  // its flush failed: the replace is given up
    spdlog::warn("graid: array '{}': hot replace checkpoint at stop: {}", s.name, st.message());
  }
  if (s.bitmap && all_flushed && s.failed_count.load(std::memory_order_acquire) == 0) {
    // Degraded: the bits stay, as while running (begin_bitmap_clear).
    std::vector<std::uint32_t> failed_members;
    Status st = s.bitmap->clear_idle(s.sb_events.load(std::memory_order_acquire), &failed_members);
    s.note_bitmap_cleared();
    for (std::uint32_t m : failed_members) {
      Status fs = s.fail_member(m, st.to_string());
      (void)fs;
    }
  }
  MutexLock guard(s.control_mutex);
  if (s.array_failed()) {
    return make_error(Errc::kIoError, "array '{}' has failed; not marked clean", s.name);
  }
  // A background re-sync still pending: not clean (as md's resync_offset), so the next assembly
  // re-syncs what is left (its bits are pinned) and treats the array as dirty if degraded.
  const bool resync_left = s.resync_done.load(std::memory_order_acquire) != State::kAllInitialised;
  // Nor while a stripe a member refused to write is owed a re-sync (its bit pinned): a clean
  // assembly re-syncs nothing, so it must be an unclean one.
  const bool owed = s.bitmap && s.bitmap->has_kept_pins();
  if (!resync_left && !owed) s.sb.array_flags |= meta::kArrayClean;
  // No journal record written before a stop is ever replayed: every write has completed and
  // was flushed, and a build that runs the array next without journalling (an older one)
  // cannot have its writes undone by them.
  if (s.sb.journal_bytes != 0) ++s.sb.journal_epoch;
  GRAID_RETURN_IF_ERROR(s.write_superblocks_locked());
  s.emit(ArrayEventKind::kStopped, std::nullopt,
         resync_left ? "not marked clean: a background re-sync is pending" : "marked clean");
  return Status::ok();
}

Result<std::uint64_t> Array::count_inconsistent_stripes() {
  return graid::count_inconsistent_stripes(*state_);
}

}  // namespace graid
