// Hot replace of a working member (md's want_replacement): a new device is filled as a copy of an
// active role while that role keeps serving, then swapped into it, so redundancy never drops.
//
// Copy: window by window under stripe locks, the old member's strips are read and written to the
// new device (a strip the old member cannot read is reconstructed from the others instead), then
// replace_copied moves past the window. Two windows overlap: N's write to the new device is in
// flight, its locks held, while N+1 is locked and read. Every write that a stripe lock covers goes
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
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include "array/array_state.h"
#include "array/background_pace.h"
#include "array/journal_replay.h"
#include "level/level_module.h"
#include "stripe/stripe_range_lock.h"

namespace graid {

void Array::State::replacement_failed(std::string_view what, std::int32_t result) noexcept {
  if (replace_broken.exchange(true, std::memory_order_acq_rel)) return;
  MemberDevice* dev = replacement.load(std::memory_order_acquire);
  spdlog::error("graid: array '{}': hot replacement {} failed a {}: {}; the replace is given up",
                name, dev != nullptr ? dev->path() : std::string("?"), what,
                std::strerror(-result));
}

namespace {

using Clock = std::chrono::steady_clock;

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

}  // namespace

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
  return give_up(s, s.replace_member.load(std::memory_order_acquire), "cancelled");
}

namespace {

// One window's read or write in the copy: through the copy's own io_uring, or (no ring could be
// had) with blocking I/O at once.
struct CopyIo final : MemberRequest {
  bool done = true;
  std::int32_t result = 0;
  void on_done(std::int32_t res) override {
    result = res;
    done = true;
  }
};

struct Copier {
  IoContext* ctx = nullptr;

  void start(MemberDevice& dev, CopyIo& io, MemberOp op, std::uint64_t at,
             std::span<std::byte> bytes) {
    io.op = op;
    io.offset = at;
    io.buf = bytes.data();
    io.len = static_cast<std::uint32_t>(bytes.size());
    io.fua = false;
    io.result = 0;
    io.done = false;
    if (ctx != nullptr) {
      dev.submit(*ctx, io);
      return;
    }
    const Status st = op == MemberOp::kRead ? dev.read_sync(at, bytes) : dev.write_sync(at, bytes);
    io.result = st ? static_cast<std::int32_t>(bytes.size()) : -EIO;
    io.done = true;
  }
  // Waits for `io`; true when it succeeded.
  bool finish(CopyIo& io) {
    while (!io.done)
      ctx->poll(true);
    return io.result >= 0;
  }
};

}  // namespace

Result<bool> Array::replace(const RebuildControl& control) {
  State& s = *state_;
  std::uint32_t m = State::kNoReplace;
  std::shared_ptr<MemberDevice> keep;  // alive while the copy uses it, even if cancelled
  {
    MutexLock guard(s.control_mutex);
    if (!s.replacement_owner) return true;
    m = s.replace_member.load(std::memory_order_acquire);
    keep = s.replacement_owner;
  }
  MemberDevice* target = keep.get();
  const Geometry& g = s.geometry;
  const std::uint64_t strip = g.strip_bytes();
  const std::uint64_t stripes = g.stripes(s.data_size);
  const std::uint64_t window = std::max<std::uint64_t>(control.window_stripes, 1);
  // Two windows in turn: window N's write to the new device is in flight (its locks held) while
  // window N+1 is locked and read from the old member.
  std::array<AlignedBuffer, 2> bufs;
  for (auto& buf : bufs) {
    auto b = AlignedBuffer::allocate(window * strip, 4096);
    if (!b) {
      give_up(s, m, "no memory for the copy");
      return b.status();
    }
    buf = std::move(*b);
  }
  auto ctx = IoContext::create(member_ring_options(4));
  Copier copier;
  if (ctx) copier.ctx = ctx->get();
  std::array<CopyIo, 2> reads, writes;
  std::array<StripeRangeLock, 2> locks{{StripeRangeLock(s.locks), StripeRangeLock(s.locks)}};
  std::array<std::uint64_t, 2> window_first{}, window_count{};
  std::optional<std::size_t> held;  // the window whose write is in flight
  // Waits for the held window's write; done, the copy has passed it (still under its locks:
  // no write to these stripes is in flight while they start to go to the replacement too).
  auto finish_held = [&]() -> Status {
    if (!held) return Status::ok();
    const std::size_t h = *held;
    held.reset();
    const bool ok = copier.finish(writes[h]);
    if (ok) s.replace_copied.store(window_first[h] + window_count[h], std::memory_order_release);
    locks[h].unlock();
    if (ok) return Status::ok();
    return make_error(Errc::kIoError, "copy of stripes {}..{}: write to {}: {}", window_first[h],
                      window_first[h] + window_count[h] - 1, target->path(),
                      std::strerror(-writes[h].result));
  };
  auto failed = [&](const std::string& why) -> Status {
    give_up(s, m, why);
    return make_error(Errc::kIoError, "hot replace of member {} of array '{}': {}", m, s.name, why);
  };

  const std::string path = target->path();
  const Clock::time_point started = Clock::now();
  spdlog::info("graid: array '{}': copying member {} to {}", s.name, m, path);
  std::size_t turn = 0;
  Clock::time_point last_checkpoint = started;
  const std::uint64_t resumed_at = s.replace_copied.load(std::memory_order_acquire);
  // The rate counts from where the copy resumes (pace.after() is fed the position).
  BackgroundPace pace(
      s.pace_limits(control.bytes_per_second, control.rate, control.share, control.stop),
      resumed_at * strip);
  if (resumed_at > 0) {
    spdlog::info("graid: array '{}': the copy of member {} resumes at its checkpoint ({} MiB)",
                 s.name, m, (resumed_at * strip) >> 20);
  }
  for (std::uint64_t first = resumed_at; first < stripes;) {
    if (s.replacement.load(std::memory_order_acquire) != target) {
      (void)finish_held();
      return false;  // cancelled
    }
    if (control.stop != nullptr && control.stop->load(std::memory_order_acquire)) {
      const Status done = finish_held();
      const Status st = done ? s.record_replace_checkpoint() : done;
      if (!st) return failed(st.message());
      spdlog::info("graid: array '{}': copy of member {} stopped at {} MiB; it resumes there",
                   s.name, m, (s.replace_copied.load() * strip) >> 20);
      return false;
    }
    if (Clock::now() - last_checkpoint >= control.checkpoint_interval) {
      // Only what is written counts: the held window's write completes first.
      if (Status st = finish_held(); !st) return failed(st.message());
      if (Status st = s.record_replace_checkpoint(); !st) return failed(st.message());
      last_checkpoint = Clock::now();
    }
    std::string why;
    if (s.is_failed(m)) why = fmt::format("member {} failed: it is rebuilt instead", m);
    if (s.replace_broken.load(std::memory_order_acquire))
      why = fmt::format("{} failed a write", path);
    if (s.array_failed()) why = "the array failed";
    if (!why.empty()) {
      (void)finish_held();
      return failed(why);
    }
    const std::uint64_t count = std::min(window, stripes - first);
    // Ascending, as every range lock: the held window lies below this one.
    locks[turn].lock(first, count);
    window_first[turn] = first;
    window_count[turn] = count;
    const std::uint64_t at = s.device_offset(first * strip);
    const std::span<std::byte> bytes = bufs[turn].span().first(count * strip);
    copier.start(*s.members[m], reads[turn], MemberOp::kRead, at, bytes);
    const Status before = finish_held();
    const bool read = copier.finish(reads[turn]);  // waited for even after an error
    if (!before) {
      locks[turn].unlock();
      return failed(before.message());
    }
    if (read) {
      copier.start(*target, writes[turn], MemberOp::kWrite, at, bytes);
      held = turn;
      turn ^= 1;
    } else {
      // Strip by strip, reconstructing what the old member cannot read.
      if (Status st = copy_strips(s, m, *target, first, count, bytes.first(strip)); !st) {
        locks[turn].unlock();
        return failed(
            fmt::format("copy of stripes {}..{}: {}", first, first + count - 1, st.message()));
      }
      s.replace_copied.store(first + count, std::memory_order_release);
      locks[turn].unlock();
    }
    first += count;
    pace.after(first * strip);
  }
  if (Status st = finish_held(); !st) return failed(st.message());
  std::string old_path;
  if (Status st = swap_in(s, m, old_path); !st) {
    if (st.code() == Errc::kNotFound) return false;
    give_up(s, m, st.message());
    return make_error(Errc::kIoError, "hot replace of member {} of array '{}': {}", m, s.name,
                      st.message());
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  spdlog::info("graid: array '{}': member {} is now {} (was {}): {} MiB copied in {:.1f} s", s.name,
               m, path, old_path, s.data_size >> 20, seconds);
  s.emit(ArrayEventKind::kReplaceFinished, m,
         fmt::format("{} took the role of {} ({:.1f} s)", path, old_path, seconds),
         byte_counts(g, s.data_size));
  return true;
}

}  // namespace graid
