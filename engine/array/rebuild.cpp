// Rebuild: filling a member that took a failed role (a hot spare, a replacement) from the
// others, window by window under stripe locks, while foreground I/O goes on.
//
// Order per window: lock the stripes, rebuild each (read the others, reconstruct, write the new
// member), move rebuilt[m] past them (plans for those stripes now read and write the member),
// unlock. With bulk I/O two windows overlap: window N's write is in flight, its lock held, while
// window N+1 is locked and read; N comes alive and is unlocked once its write is done. Parity
// levels rebuild a window's stripes in one parity batch, from and into the window's buffers. Every
// checkpoint_interval the new member is flushed and then rebuild_offset recorded in the
// superblocks, so what they record is always on stable storage: a crash resumes there, and writes
// that landed above it are redone by the rebuild. At the end the member joins the write-intent
// bitmap (its pages written) and becomes active in one superblock update.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <optional>

#include "array/array_state.h"
#include "array/background_pace.h"
#include "array/stripe_access.h"
#include "stripe/stripe_range_lock.h"

namespace graid {

std::uint64_t background_speed_bytes(BackgroundSpeed speed) noexcept {
  switch (speed) {
    case BackgroundSpeed::kLow:
      return 10'000'000;
    case BackgroundSpeed::kNormal:
      return 100'000'000;
    case BackgroundSpeed::kHigh:
      return 500'000'000;
    case BackgroundSpeed::kExtreme:
      return 0;
  }
  return 0;
}

std::uint32_t background_busy_share(BackgroundSpeed speed) noexcept {
  switch (speed) {
    case BackgroundSpeed::kLow:
      return 10;
    case BackgroundSpeed::kNormal:
      return 25;
    case BackgroundSpeed::kHigh:
      return 50;
    case BackgroundSpeed::kExtreme:
      return 100;
  }
  return 100;
}

namespace {

using Clock = std::chrono::steady_clock;

// Flushes the member being rebuilt, then records how far it is valid. False (logged) when the
// member failed meanwhile.
Status record_checkpoint(Array::State& s, std::uint32_t m) {
  const std::uint64_t stripes = s.rebuilt[m].load(std::memory_order_acquire);
  std::shared_ptr<MemberDevice> dev = s.members[m];
  if (Status st = dev->flush_sync(); !st) {
    (void)s.fail_member(m, fmt::format("flush during rebuild: {}", st.message()));
    return st;
  }
  MutexLock guard(s.control_mutex);
  if (!s.is_rebuilding(m)) return make_error(Errc::kIoError, "member {} failed", m);
  s.sb.members[m].rebuild_offset = std::min(s.data_size, stripes * s.geometry.strip_bytes());
  return s.write_superblocks_locked();
}

// Every bit set anywhere is written to member m's bitmap before it counts as live there (no bit
// can be set meanwhile: add_member holds every page).
Status join_bitmap(Array::State& s, std::uint32_t m, const std::shared_ptr<MemberDevice>& dev) {
  MutexLock guard(s.control_mutex);
  if (!s.is_rebuilding(m)) return make_error(Errc::kIoError, "member {} failed", m);
  return s.bitmap ? s.bitmap->add_member(m, dev) : Status::ok();
}

// Member m is rebuilt to the end: it joins the bitmap and becomes active.
Status finish_member(Array::State& s, std::uint32_t m) {
  std::shared_ptr<MemberDevice> dev = s.members[m];
  if (Status st = dev->flush_sync(); !st) {
    (void)s.fail_member(m, fmt::format("flush at the end of its rebuild: {}", st.message()));
    return st;
  }
  Status joined = join_bitmap(s, m, dev);
  if (!joined) {
    (void)s.fail_member(m, fmt::format("write-intent bitmap: {}", joined.message()));
    return joined;
  }
  MutexLock guard(s.control_mutex);
  if (!s.is_rebuilding(m)) return make_error(Errc::kIoError, "member {} failed", m);
  // Clearing `failed` first: dead_at() is false for every stripe throughout.
  s.failed[m].store(0, std::memory_order_release);
  s.failed_count.fetch_sub(1);
  s.rebuilding[m].store(0, std::memory_order_release);
  s.rebuilt[m].store(0, std::memory_order_release);
  s.readd_bitmap_below[m].store(0, std::memory_order_release);
  s.sb.members[m].state = meta::MemberState::kActive;
  s.sb.members[m].rebuild_offset = 0;
  Status st = s.write_superblocks_locked();
  s.note_health_locked();
  return st;
}

// A window's member I/O in bulk: every member the rebuild reads is read over the whole window
// (the same member bytes on each: stripes are rows) at once, in parallel, through an io_uring of
// the rebuild's own; the level module then works from those buffers (StripeAccess), and the
// rebuilt member's window is written in one I/O at the end. Any error in the bulk I/O makes the
// caller redo the window strip by strip with blocking I/O, which finds the member at fault.
class WindowAccess final : public StripeAccess {
 public:
  WindowAccess(Array::State& s, std::uint32_t target, std::uint64_t window_stripes, IoContext& ctx)
      : s_(s), target_(target), ctx_(ctx), strip_(s.geometry.strip_bytes()) {
    for (std::uint32_t m = 0; m < s.geometry.members(); ++m) {
      auto buf = AlignedBuffer::allocate(window_stripes * strip_, 4096);
      bufs_.push_back(buf ? std::move(*buf) : AlignedBuffer());
      auto scratch = AlignedBuffer::allocate(strip_, 4096);
      scratch_.push_back(scratch ? std::move(*scratch) : AlignedBuffer());
    }
    reqs_ = std::vector<Req>(s.geometry.members());
  }
  bool usable() const {
    return std::all_of(bufs_.begin(), bufs_.end(), [](const auto& b) { return b.size() > 0; }) &&
           std::all_of(scratch_.begin(), scratch_.end(),
                       [](const auto& b) { return b.size() > 0; });
  }

  // Reads [first, first + count) of every member that is alive in all of it (the others are
  // dead in the whole window, or partly: those are read too, as far as alive, strip by strip
  // by the caller's fallback). False on any error.
  // start_load() submits, finish() waits (false on any error): a window's reads may be in
  // flight while another WindowAccess on the same ring writes its window.
  void start_load(std::uint64_t first, std::uint64_t count) {
    first_ = first;
    count_ = count;
    for (std::uint32_t m = 0; m < s_.geometry.members(); ++m) {
      if (m != target_ && alive_throughout(m)) submit(m, MemberOp::kRead);
    }
  }
  bool finish() { return wait(); }
  std::uint64_t first() const noexcept { return first_; }
  std::uint64_t count() const noexcept { return count_; }
  // Parity levels: every stripe of the loaded window rebuilt in one parity batch, straight from
  // and into the window's buffers (no copies): one kReconstruct job per stripe, the target's
  // chunk and those of members dead there missing. False when that cannot be done (a member
  // alive in part of the window only, more missing than parity gives back, the batch failed):
  // the caller then does the window stripe by stripe.
  bool reconstruct_window() {
    const Geometry& g = s_.geometry;
    const std::uint32_t chunks = g.data_strips() + g.parity_strips();
    jobs_.clear();
    for (std::uint64_t stripe = first_; stripe < first_ + count_; ++stripe) {
      StripeJob job;
      job.op = ParityOp::kReconstruct;
      job.scheme = g.parity_strips() == 2 ? ParityScheme::kPQ : ParityScheme::kP;
      job.k = g.data_strips();
      job.len = strip_;
      for (std::uint32_t c = 0; c < chunks; ++c) {
        const std::uint32_t m = g.chunk_member(stripe, c);
        const bool missing = m == target_ || s_.dead_at(m, stripe);
        if (!missing && !alive_throughout(m)) return false;  // not read for this window
        auto view = ChunkView::adopt(at(m, stripe), strip_);
        if (!view) return false;
        job.chunk[c] = *view;
        if (!missing) continue;
        if (job.missing_count == g.parity_strips()) return false;
        job.missing[job.missing_count++] = static_cast<std::uint8_t>(c);
      }
      jobs_.push_back(job);
    }
    return s_.parity != nullptr && s_.parity->execute(jobs_).is_ok();
  }

  // Submits the write of the target's window; finish() waits for it.
  void start_store() { submit(target_, MemberOp::kWrite); }

  bool is_failed(std::uint32_t member, std::uint64_t stripe) const noexcept override {
    return member != target_ && s_.dead_at(member, stripe);
  }
  bool is_stale(std::uint32_t member) const noexcept override { return member == target_; }
  Status read_strip(std::uint32_t member, std::uint64_t stripe, std::span<std::byte> buf) override {
    if (member == target_ || !alive_throughout(member))
      return make_error(Errc::kInternal, "member {} was not read for this window", member);
    std::memcpy(buf.data(), at(member, stripe), buf.size());
    return Status::ok();
  }
  Status write_strip(std::uint32_t member, std::uint64_t stripe,
                     std::span<const std::byte> buf) override {
    if (member != target_) return make_error(Errc::kInternal, "rebuild writes only its member");
    std::memcpy(at(member, stripe), buf.data(), buf.size());
    return Status::ok();
  }
  ParityBackend* parity() noexcept override { return s_.parity; }
  std::span<AlignedBuffer> scratch() noexcept override { return scratch_; }

 private:
  struct Req final : MemberRequest {
    std::int32_t result = 0;
    bool done = false;
    bool submitted = false;
    void on_done(std::int32_t res) override {
      result = res;
      done = true;
    }
  };
  bool alive_throughout(std::uint32_t m) const {
    return !s_.dead_at(m, first_) && !s_.dead_at(m, first_ + count_ - 1);
  }
  std::byte* at(std::uint32_t m, std::uint64_t stripe) {
    return bufs_[m].data() + (stripe - first_) * strip_;
  }
  void submit(std::uint32_t m, MemberOp op) {
    Req& r = reqs_[m];
    r.op = op;
    r.offset = s_.device_offset(first_ * strip_);
    r.buf = bufs_[m].data();
    r.len = static_cast<std::uint32_t>(count_ * strip_);
    r.fua = false;
    r.done = false;
    r.result = 0;
    r.submitted = true;
    s_.members[m]->submit(ctx_, r);
  }
  // Waits for every request submitted since the last wait; false if any failed.
  bool wait() {
    auto pending = [&] {
      return std::any_of(reqs_.begin(), reqs_.end(),
                         [](const Req& r) { return r.submitted && !r.done; });
    };
    while (pending())
      ctx_.poll(true);
    bool ok = true;
    for (Req& r : reqs_) {
      if (r.submitted && r.result < 0) ok = false;
      r.submitted = false;
    }
    return ok;
  }

  Array::State& s_;
  std::uint32_t target_;
  IoContext& ctx_;
  std::uint64_t strip_;
  std::uint64_t first_ = 0, count_ = 0;
  std::vector<AlignedBuffer> bufs_, scratch_;
  std::vector<Req> reqs_;
  std::vector<StripeJob> jobs_;
};

// The loaded window rebuilt in w's buffers (the target's write not yet submitted); false when
// that did not work out and the window must be done strip by strip.
bool rebuild_loaded_window(Array::State& s, WindowAccess& w) {
  const Geometry& g = s.geometry;
  if (g.redundancy() == Redundancy::kParity) return w.reconstruct_window();
  for (std::uint64_t stripe = w.first(); stripe < w.first() + w.count(); ++stripe) {
    StripeOutcome r = g.module().process_stripe(StripeTask::kRebuild, g, w, stripe);
    if (!r.status || r.skipped) return false;
  }
  return true;
}

// Whether a re-added member (readd_bitmap_below) may lack something in stripes [first, +count):
// a region there has its bit set.
bool window_dirty(const Array::State& s, std::uint64_t first, std::uint64_t count) {
  const std::uint64_t strip = s.geometry.strip_bytes();
  const std::uint64_t last = s.bitmap->region_of((first + count) * strip - 1);
  for (std::uint64_t r = s.bitmap->region_of(first * strip); r <= last; ++r)
    if (s.bitmap->is_dirty(r)) return true;
  return false;
}

// Rebuilds member m from its checkpoint. True: done; false: stopped.
Result<bool> rebuild_member(Array::State& s, std::uint32_t m, const RebuildControl& control) {
  const Geometry& g = s.geometry;
  const std::uint64_t strip = g.strip_bytes();
  const std::uint64_t stripes = g.stripes(s.data_size);
  const std::uint64_t window = std::max<std::uint64_t>(control.window_stripes, 1);
  auto access = ArrayStripeAccess::make(s, m);
  if (!access) return access.status();
  // Bulk I/O per window where an io_uring can be had; strip by strip otherwise. Two windows in
  // turn, so one window's write is in flight while the next one's reads are (both locked).
  auto ctx = IoContext::create(member_ring_options(4 * g.members()));
  std::array<std::optional<WindowAccess>, 2> windows;
  if (ctx) {
    for (auto& w : windows)
      w.emplace(s, m, window, **ctx);
    if (!windows[0]->usable() || !windows[1]->usable()) {
      for (auto& w : windows)
        w.reset();
    }
  }
  const bool bulk = windows[0].has_value();
  const std::uint64_t from = s.rebuilt[m].load(std::memory_order_acquire);
  const std::string path = s.members[m]->path();
  spdlog::info("graid: array '{}': rebuilding member {} ({}) from stripe {} of {}", s.name, m, path,
               from, stripes);
  s.emit(ArrayEventKind::kRebuildStarted, m,
         from == 0 ? fmt::format("rebuilding {}", path)
                   : fmt::format("rebuilding {}, resumed at {:.1f}%", path, 100.0 * from / stripes),
         byte_counts(g, (stripes - from) * strip));

  auto stopped = [&](std::string why) {
    s.emit(ArrayEventKind::kRebuildStopped, m, std::move(why),
           byte_counts(g, s.rebuilt[m].load() * strip));
  };
  // Stripe by stripe with blocking I/O (the window locked by the caller): the fallback, and what
  // finds the member at fault when bulk I/O failed.
  auto rebuild_stripes = [&](std::uint64_t first, std::uint64_t count) -> Status {
    for (std::uint64_t stripe = first; stripe < first + count; ++stripe) {
      StripeOutcome r = process_stripe_failing_members(s, *access, StripeTask::kRebuild, stripe,
                                                       fmt::format("rebuild of member {}", m));
      if (!r.status && r.status.code() == Errc::kIoError) {
        r.status = make_error(Errc::kIoError, "rebuild of member {} of array '{}' failed: {}", m,
                              s.name, r.status.message());
      }
      if (r.status && !s.is_rebuilding(m)) {
        r.status = make_error(Errc::kIoError, "member {} failed during its rebuild", m);
      }
      if (r.status && r.skipped) {
        r.status = make_error(Errc::kIoError, "stripe {} has too few members left to rebuild from",
                              stripe);
      }
      if (!r.status) {
        stopped(fmt::format("failed at stripe {}: {}", stripe, r.status.message()));
        return r.status;
      }
    }
    return Status::ok();
  };
  std::array<StripeRangeLock, 2> locks{{StripeRangeLock(s.locks), StripeRangeLock(s.locks)}};
  // The window whose write is in flight (bulk), its lock still held: the write finished (or,
  // failed, the window redone strip by strip), the member comes alive there and it is unlocked.
  std::optional<std::size_t> held;
  auto finish_held = [&]() -> Status {
    if (!held) return Status::ok();
    WindowAccess& w = *windows[*held];
    const std::size_t h = *held;
    held.reset();
    Status st = w.finish() ? Status::ok() : rebuild_stripes(w.first(), w.count());
    // Under the window's locks: no plan for these stripes is in flight while they come alive.
    if (st) s.rebuilt[m].store(w.first() + w.count(), std::memory_order_release);
    locks[h].unlock();
    return st;
  };

  const Clock::time_point started = Clock::now();
  Clock::time_point last_checkpoint = started;
  BackgroundPace pace(
      s.pace_limits(control.bytes_per_second, control.rate, control.share, control.stop),
      from * strip);
  std::uint64_t moved = from * strip;  // member bytes rebuilt (windows skipped not counted)
  std::uint64_t skipped = 0;           // stripes a re-added member did not need
  std::uint64_t next_tenth = (from * 10 / std::max<std::uint64_t>(stripes, 1) + 1);
  std::size_t turn = 0;
  for (std::uint64_t first = from; first < stripes;) {
    if (control.stop != nullptr && control.stop->load(std::memory_order_acquire)) {
      GRAID_RETURN_IF_ERROR(finish_held());
      Status st = record_checkpoint(s, m);
      stopped(st ? "stopped; it resumes from its checkpoint"
                 : fmt::format("stopped; checkpoint not recorded: {}", st.message()));
      if (!st) return st;
      return false;
    }
    const std::uint64_t count = std::min(window, stripes - first);
    // Ascending, as every range lock: the held window lies below this one.
    locks[turn].lock(first, count);
    if (first + count <= s.readd_bitmap_below[m].load(std::memory_order_acquire) &&
        !window_dirty(s, first, count)) {
      // A re-added member missed no write here: no bit is set, none is cleared while it
      // rebuilds, and none can be set now (the window is locked: no write is planned or in
      // flight in it), so it holds what the others do. Read under the lock, since a write that
      // sets a bit plans around the member from then on; and the window stays locked until
      // rebuilt[m] has moved past it (after the window before it has come alive).
      Status done_before = finish_held();
      if (done_before) s.rebuilt[m].store(first + count, std::memory_order_release);
      locks[turn].unlock();
      if (!done_before) return done_before;
      first += count;
      skipped += count;
      continue;
    }
    if (bulk) windows[turn]->start_load(first, count);
    Status done_before = finish_held();
    const bool loaded = bulk && windows[turn]->finish();  // waited for even after an error
    if (!done_before) return done_before;
    if (loaded && rebuild_loaded_window(s, *windows[turn])) {
      windows[turn]->start_store();
      held = turn;
      turn ^= 1;
    } else {
      GRAID_RETURN_IF_ERROR(rebuild_stripes(first, count));
      s.rebuilt[m].store(first + count, std::memory_order_release);
      locks[turn].unlock();
    }
    first += count;

    if (first * 10 >= next_tenth * stripes && first < stripes) {
      s.emit(ArrayEventKind::kRebuildProgress, m,
             fmt::format("{:.0f}% rebuilt", 100.0 * first / stripes),
             byte_counts(g, first * strip));
      next_tenth = first * 10 / stripes + 1;
    }
    const Clock::time_point now = Clock::now();
    if (now - last_checkpoint >= control.checkpoint_interval && first < stripes) {
      // The window in flight first: nothing may be in flight when this returns early, and the
      // checkpoint then covers it too.
      GRAID_RETURN_IF_ERROR(finish_held());
      GRAID_RETURN_IF_ERROR(record_checkpoint(s, m));
      last_checkpoint = Clock::now();
    }
    moved += count * strip;
    pace.after(moved);
  }
  GRAID_RETURN_IF_ERROR(finish_held());
  GRAID_RETURN_IF_ERROR(finish_member(s, m));
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const std::uint64_t rebuilt_stripes = stripes - from - skipped;
  const std::string not_needed =
      skipped == 0 ? std::string()
                   : fmt::format(", {} MiB skipped: the bitmap shows no write it missed there",
                                 skipped * strip >> 20);
  spdlog::info("graid: array '{}': member {} ({}) rebuilt: {} MiB in {:.1f} s{}", s.name, m, path,
               rebuilt_stripes * strip >> 20, seconds, not_needed);
  s.emit(ArrayEventKind::kRebuildFinished, m,
         fmt::format("{} rebuilt in {:.1f} s{}", path, seconds, not_needed),
         byte_counts(g, rebuilt_stripes * strip));
  return true;
}

}  // namespace

std::vector<std::uint32_t> Array::rebuilding_members() const {
  std::vector<std::uint32_t> out;
  for (std::uint32_t m = 0; m < state_->members.size(); ++m)
    if (state_->is_rebuilding(m)) out.push_back(m);
  return out;
}

Result<bool> Array::rebuild(const RebuildControl& control) {
  State& s = *state_;
  if (s.geometry.redundancy() == Redundancy::kNone) return true;
  for (std::uint32_t m : rebuilding_members()) {
    auto done = rebuild_member(s, m, control);
    if (!done) return done.status();
    if (!*done) return false;
  }
  // In sync again: under degraded-only the write-hole journal is not wanted any more.
  if (Status st = s.turn_journal_off_if_unwanted(); !st) {
    spdlog::warn("graid: array '{}': {}", s.name, st.message());
  }
  return true;
}

}  // namespace graid
