// Hot replace of a working member (md's want_replacement): a new device is filled as a copy of an
// active role while that role keeps serving, then swapped into it, so redundancy never drops.
//
// Copy (jobs/replace_job.cpp, on the job engine's pipeline): window by window under stripe locks,
// the old member's strips are read and written to the new device (a strip the old member cannot
// read is reconstructed from the others instead), then replace_copied moves past the window, in
// window order. Every write that a stripe lock covers goes
// to the new device as well once the copy has passed its stripe (StripeOp::submit_io,
// ArrayStripeAccess), and journal-area writes and flushes of the role go to it throughout
// (array_state.h, hold_replacement), so at the end it holds what the old member holds.
//
// Swap: the new device is flushed, joins the write-intent bitmap in the role, and takes the role
// with a new member UUID in one superblock update; only then is the replacement withdrawn (an I/O
// holding it, or loading the role after the swap, writes the new device either way), and the old
// device's superblock erased so it never assembles again.
//
// On disk: start_replace puts the new device in a spare slot and records the replace
// (meta::ReplaceRecord) in one superblock update; the copy records how far it has got
// (record_replace_checkpoint: the new device flushed first) every checkpoint_interval, when
// stopped, and Array::stop() does too. Assembly resumes a recorded replace from there
// (array_assemble.cpp). Giving up drops the record and the slot, and erases the new device's
// superblock; the swap drops them in the update that gives it the role.
#include "array/hot_replace.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include "array/journal_replay.h"
#include "level/level_module.h"
#include "state/array_state.h"

namespace graid {

void Array::State::replacement_failed(std::string_view what, std::int32_t result) noexcept {
  if (replace_broken.exchange(true, std::memory_order_acq_rel)) return;
  MemberDevice* dev = replacement.load(std::memory_order_acquire);
  spdlog::error("graid: array '{}': hot replacement {} failed a {}: {}; the replace is given up",
                name, dev != nullptr ? dev->path() : std::string("?"), what,
                std::strerror(-result));
}

namespace hot_replace {

// Withdraws the replacement: no new I/O takes it, and none holds it any more on return. Without
// control_mutex: an I/O thread waiting for it could not complete the copies it holds.
void withdraw(Array::State& s) REQUIRES(s.replace_mutex) EXCLUDES(s.control_mutex) {
  s.replace_member.store(Array::State::kNoReplace, std::memory_order_seq_cst);
  while (s.replace_users.load(std::memory_order_acquire) != 0)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  s.replacement.store(nullptr, std::memory_order_release);
}

// Drops the replace's record and the slot its device held (one superblock update; a failure is
// logged: the members that failed it are failed by it).
void drop_record_locked(Array::State& s) REQUIRES(s.control_mutex) {
  if (!s.sb.replace) return;
  const std::uint32_t slot = s.sb.replace->slot;
  s.sb.replace.reset();
  s.drop_spare_locked(slot);
  if (Status st = s.write_superblocks_locked(); !st) {
    spdlog::warn("graid: array '{}': recording the end of the hot replace: {}", s.name,
                 st.message());
  }
}

// Gives the pending replace up, closing its device (once the copy, if one runs, lets go of it);
// the array is as it was. False when none was pending.
bool give_up(Array::State& s, std::uint32_t member, const std::string& why) {
  MutexLock replace_guard(s.replace_mutex);
  {
    MutexLock guard(s.control_mutex);
    if (!s.replacement_owner) return false;
  }
  withdraw(s);
  std::shared_ptr<MemberDevice> dev;
  {
    MutexLock guard(s.control_mutex);
    dev = std::move(s.replacement_owner);
    drop_record_locked(s);
  }
  const std::string path = dev->path();
  // Out of the table now: its superblock would only name it as a spare of this array.
  if (Status e = Array::erase_superblock(*dev); !e) {
    spdlog::warn("graid: array '{}': {}: erasing its superblock: {}", s.name, path, e.message());
  }
  dev.reset();  // never in the bitmap or a role before the swap succeeds
  spdlog::warn("graid: array '{}': hot replace of member {} by {} given up: {}", s.name, member,
               path, why);
  s.emit(ArrayEventKind::kReplaceStopped, member, fmt::format("{} given up: {}", path, why));
  return true;
}

// The stripes of a copy window for the level module (reconstruction of strips the old member
// cannot read): the old member counts as stale, and what would be written to it goes to the
// replacement.
class ReplaceAccess final : public StripeAccess {
 public:
  ReplaceAccess(Array::State& s, std::uint32_t member, MemberDevice& target)
      : s_(s), member_(member), target_(target) {}
  // Its scratch strips; an allocation error, or ok.
  Status allocate() {
    for (std::uint32_t i = 0; i < s_.geometry.members(); ++i) {
      auto buf = AlignedBuffer::allocate(s_.geometry.strip_bytes(), 4096);
      if (!buf) return buf.status();
      scratch_.push_back(std::move(*buf));
    }
    return Status::ok();
  }
  bool is_failed(std::uint32_t member, std::uint64_t stripe) const noexcept override {
    return member != member_ && s_.dead_at(member, stripe);
  }
  bool is_stale(std::uint32_t member) const noexcept override { return member == member_; }
  Status read_strip(std::uint32_t member, std::uint64_t stripe, std::span<std::byte> buf) override {
    if (member == member_) return make_error(Errc::kInternal, "the old member is not read here");
    return s_.members[member]->read_sync(at(stripe), buf);
  }
  Status write_strip(std::uint32_t member, std::uint64_t stripe,
                     std::span<const std::byte> buf) override {
    if (member != member_) return make_error(Errc::kInternal, "a replace writes only its copy");
    return target_.write_sync(at(stripe), buf);
  }
  ParityBackend* parity() noexcept override { return s_.parity; }
  std::span<AlignedBuffer> scratch() noexcept override { return scratch_; }

 private:
  std::uint64_t at(std::uint64_t stripe) const noexcept {
    return s_.device_offset(stripe * s_.geometry.strip_bytes());
  }
  Array::State& s_;
  std::uint32_t member_;
  MemberDevice& target_;
  std::vector<AlignedBuffer> scratch_;
};

// Copies stripes [first, first + count) of `member` to `target` (their locks held), strip by
// strip: read, or reconstruct what cannot be read.
Status copy_strips(Array::State& s, std::uint32_t member, MemberDevice& target, std::uint64_t first,
                   std::uint64_t count, std::span<std::byte> strip_buf) {
  const std::uint64_t strip = s.geometry.strip_bytes();
  ReplaceAccess access(s, member, target);
  GRAID_RETURN_IF_ERROR(access.allocate());
  for (std::uint64_t stripe = first; stripe < first + count; ++stripe) {
    const std::uint64_t at = s.device_offset(stripe * strip);
    if (s.members[member]->read_sync(at, strip_buf).is_ok()) {
      GRAID_RETURN_IF_ERROR(target.write_sync(at, strip_buf));
      continue;
    }
    StripeOutcome r =
        s.geometry.module().process_stripe(StripeTask::kRebuild, s.geometry, access, stripe);
    if (!r.status) return r.status;
    if (r.skipped) {
      return make_error(Errc::kIoError,
                        "stripe {}: member {} cannot be read there and too few others are left "
                        "to rebuild it from",
                        stripe, member);
    }
  }
  return Status::ok();
}

// The swap's locked part: the replacement joins the bitmap in role `member` and takes the role
// in memory and in the superblocks (`recorded`: how that update went). An error leaves the old
// device in the role.
Status put_in_role(Array::State& s, std::uint32_t member, const std::shared_ptr<MemberDevice>& dev,
                   std::shared_ptr<MemberDevice>& old, Status& recorded) REQUIRES(s.control_mutex) {
  if (s.is_failed(member)) return make_error(Errc::kIoError, "member {} failed", member);
  if (s.replace_broken.load(std::memory_order_acquire))
    return make_error(Errc::kIoError, "{} failed a write", dev->path());
  if (!s.sb.replace || s.sb.replace->role != member) {
    return make_error(Errc::kInternal, "the replace's record is gone");
  }
  old = s.members[member];
  if (s.bitmap) {
    // Every bit set now is written to it, and from now on the role's bitmap writes go to it.
    if (Status st = s.bitmap->add_member(member, dev); !st) {
      (void)s.bitmap->add_member(member, old);  // best effort: the old device keeps its pages
      return make_error(st.code(), "write-intent bitmap on {}: {}", dev->path(), st.message());
    }
  }
  s.members.set(member, dev);  // before the withdrawal: see hold_replacement
  s.sb.members[member] = meta::MemberEntry{s.replacement_uuid, meta::MemberState::kActive, 0, 0};
  const std::uint32_t slot = s.sb.replace->slot;
  s.sb.replace.reset();
  s.drop_spare_locked(slot);  // in the same update: the device holds the role instead
  recorded = s.write_superblocks_locked();
  return Status::ok();
}

// Puts the copied replacement into role `member`. On failure the replace is given up by the
// caller, the array as it was (the old device keeps the role).
Status swap_in(Array::State& s, std::uint32_t member, std::string& old_path) {
  MutexLock replace_guard(s.replace_mutex);
  std::shared_ptr<MemberDevice> dev;
  {
    MutexLock guard(s.control_mutex);
    dev = s.replacement_owner;
  }
  if (!dev) return make_error(Errc::kNotFound, "cancelled");
  if (Status st = dev->flush_sync(); !st) {
    return make_error(st.code(), "{}: flush before the swap: {}", dev->path(), st.message());
  }
  std::shared_ptr<MemberDevice> old;
  Status recorded;
  {
    MutexLock guard(s.control_mutex);
    GRAID_RETURN_IF_ERROR(put_in_role(s, member, dev, old, recorded));
  }
  withdraw(s);  // after the role has the new device: see hold_replacement
  {
    MutexLock guard(s.control_mutex);
    s.replacement_owner.reset();
  }
  if (s.replace_broken.load(std::memory_order_acquire)) {
    // A copy of a write in flight across the swap failed on it: the role's device missed a
    // write, so it is failed as any member that fails a write.
    (void)s.fail_member(member, "a write to it failed during its swap into the role", dev.get());
  }
  old_path = old ? old->path() : std::string();
  if (!recorded) {
    // The swap stands in memory; the members that failed the update are failed by it.
    spdlog::warn("graid: array '{}': recording the swap of member {}: {}", s.name, member,
                 recorded.message());
  }
  if (old) {
    // The old device is out of the array: its superblock would only confuse a later assembly.
    if (Status e = Array::erase_superblock(*old); !e) {
      spdlog::warn("graid: array '{}': {}: erasing its superblock after the swap: {}", s.name,
                   old->path(), e.message());
    }
  }
  return Status::ok();
}

}  // namespace hot_replace

Status Array::start_replace(std::uint32_t member, std::unique_ptr<MemberDevice> device,
                            bool force) {
  if (!device) return make_error(Errc::kInvalidArgument, "no device given");
  State& s = *state_;
  if (s.geometry.redundancy() == Redundancy::kNone) {
    return make_error(Errc::kUnsupported,
                      "array '{}' is RAID0: a hot replace needs a redundant level; nothing was "
                      "changed",
                      s.name);
  }
  MutexLock replace_guard(s.replace_mutex);
  MutexLock guard(s.control_mutex);
  const auto n = static_cast<std::uint32_t>(s.members.size());
  if (member >= s.members.size()) {
    return make_error(Errc::kOutOfRange, "array '{}' has no member {} (it has {})", s.name, member,
                      s.members.size());
  }
  if (s.is_failed(member) || !s.members[member]) {
    return make_error(Errc::kInvalidArgument,
                      "member {} of array '{}' is not active: a failed member is replaced by a "
                      "rebuild, not a copy",
                      member, s.name);
  }
  if (s.replacement_owner) {
    return make_error(Errc::kBusy, "array '{}' is already replacing member {} by {}", s.name,
                      s.replace_member.load(), s.replacement_owner->path());
  }
  if (n + s.sb.spare_count >= kMaxMembers) {
    return make_error(Errc::kNoSpace,
                      "array '{}' has {} members and spares, the most {}: no slot is free for "
                      "the replacement; nothing was changed",
                      s.name, n + s.sb.spare_count, kMaxMembers);
  }
  GRAID_RETURN_IF_ERROR(check_new_device(s, *device, force));
  auto uuid = meta::Uuid::generate();
  if (!uuid) return uuid.status();
  if (Status st = clear_journal_area(*device, s.sb.journal_offset, s.sb.journal_bytes); !st) {
    return make_error(st.code(), "{}: clearing its journal area: {}; nothing was changed",
                      device->path(), st.message());
  }
  const std::string path = device->path();
  // Recorded first: the device takes a spare slot and the record names it, in one update.
  const std::uint32_t slot = n + s.sb.spare_count;
  s.sb.members[slot] = meta::MemberEntry{*uuid, meta::MemberState::kSpare, 0, 0};
  ++s.sb.spare_count;
  s.spares.push_back(nullptr);
  s.sb.replace = meta::ReplaceRecord{member, slot, 0, 0};
  s.replacement_owner = std::shared_ptr<MemberDevice>(std::move(device));
  s.replacement_uuid = *uuid;
  s.replace_copied.store(0, std::memory_order_release);
  s.replace_broken.store(false, std::memory_order_release);
  Status recorded = s.write_superblocks_locked();
  if (!recorded || !s.sb.replace) {
    // The device could not take its superblock (its slot is gone), or the update failed.
    if (s.sb.replace) {
      s.sb.replace.reset();
      s.drop_spare_locked(slot);
      (void)s.write_superblocks_locked();
    }
    s.replacement_owner.reset();
    s.replace_broken.store(false, std::memory_order_release);
    return make_error(Errc::kIoError, "{}: recording the hot replace: {}; not started", path,
                      recorded ? "the device could not take its superblock" : recorded.message());
  }
  s.replacement.store(s.replacement_owner.get(), std::memory_order_release);
  s.replace_member.store(member, std::memory_order_seq_cst);
  spdlog::info("graid: array '{}': hot replace of member {} ({}) by {}: copy pending", s.name,
               member, s.members[member]->path(), path);
  s.emit(ArrayEventKind::kReplaceStarted, member,
         fmt::format("{} replaces {} (copy, then swap)", path, s.members[member]->path()));
  return Status::ok();
}

Status Array::State::record_replace_checkpoint() {
  std::shared_ptr<MemberDevice> dev;
  {
    MutexLock guard(control_mutex);
    if (!replacement_owner || !sb.replace) return Status::ok();
    dev = replacement_owner;
  }
  // Read before the flush: every window below it was written (completed) by then.
  const std::uint64_t copied =
      std::min(data_size, replace_copied.load(std::memory_order_acquire) * geometry.strip_bytes());
  if (Status st = dev->flush_sync(); !st) {
    replacement_failed("flush", -EIO);
    return make_error(st.code(), "{}: flush for the copy's checkpoint: {}", dev->path(),
                      st.message());
  }
  MutexLock guard(control_mutex);
  if (replacement_owner != dev || !sb.replace || sb.replace->copied >= copied) {
    return Status::ok();
  }
  sb.replace->copied = copied;
  return write_superblocks_locked();
}

std::optional<Array::ReplaceProgress> Array::replace_progress() const {
  const State& s = *state_;
  MutexLock guard(s.control_mutex);
  if (!s.replacement_owner) return std::nullopt;
  ReplaceProgress p;
  p.member = s.replace_member.load(std::memory_order_acquire);
  p.path = s.replacement_owner->path();
  p.total_bytes = s.data_size;
  p.copied_bytes = std::min(
      s.data_size, s.replace_copied.load(std::memory_order_acquire) * s.geometry.strip_bytes());
  return p;
}

bool Array::cancel_replace() {
  State& s = *state_;
  return hot_replace::give_up(s, s.replace_member.load(std::memory_order_acquire), "cancelled");
}

}  // namespace graid
