// Rebuild: filling the members that took failed roles (hot spares, replacements) from the
// others, on the job engine's pipeline (jobs/window_pipeline.h), while foreground I/O goes on.
//
// Every member being rebuilt is a target of one pass, which starts at the lowest of their
// checkpoints (RAID6 with two members to rebuild does both at once). Per window: lock, read every
// member alive throughout it (mirrors: one source copy, read straight into the buffer the targets
// are written from), reconstruct (parity levels: one parity batch for the window's stripes,
// from and into the window's buffers; mirrors: the level module's copy), write the targets, then,
// in window order, move rebuilt[t] past the window (plans for those stripes now read and write
// the targets) and unlock. Windows a re-added member missed no write in are skipped. Every
// checkpoint_interval each target is flushed and then its rebuild_offset recorded in the
// superblocks, while later windows go on, so what they record is always on stable storage: a
// crash resumes there, and writes that landed above it are redone by the rebuild. At the end a
// target joins the write-intent bitmap (its pages written) and becomes active in one superblock
// update.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include "array/stripe_access.h"
#include "jobs/job_pace.h"
#include "jobs/window_access.h"
#include "jobs/window_pipeline.h"
#include "state/array_state.h"

namespace graid {

JobSpeed background_speed(BackgroundSpeed speed) noexcept {
  constexpr std::uint64_t kMB = 1'000'000;
  switch (speed) {
    case BackgroundSpeed::kLow:
      return {10 * kMB, 200 * kMB, true};
    case BackgroundSpeed::kNormal:
      return {50 * kMB, 0, true};
    case BackgroundSpeed::kHigh:
      return {200 * kMB, 0, true};
    case BackgroundSpeed::kExtreme:
      return {0, 0, false};
  }
  return {0, 0, false};
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

// Whether a re-added member (readd_bitmap_below) may lack something in stripes [first, +count):
// a region there has its bit set.
bool window_dirty(const Array::State& s, std::uint64_t first, std::uint64_t count) {
  const std::uint64_t strip = s.geometry.strip_bytes();
  const std::uint64_t last = s.bitmap->region_of((first + count) * strip - 1);
  for (std::uint64_t r = s.bitmap->region_of(first * strip); r <= last; ++r)
    if (s.bitmap->is_dirty(r)) return true;
  return false;
}

std::uint64_t bit(std::uint32_t m) {
  return std::uint64_t{1} << m;
}

// The rebuild of `targets` (bit m: member m) as a window policy.
class RebuildPolicy final : public WindowPolicy {
 public:
  RebuildPolicy(Array::State& s, std::uint64_t targets, ArrayStripeAccess& access)
      : s_(s), targets_(targets), access_(access) {}

  bool skip(std::uint64_t first, std::uint64_t count) override {
    // A re-added member missed no write here: no bit is set, none is cleared while it
    // rebuilds, and none can be set now (the window is locked: no write is planned or in flight
    // in it), so it holds what the others do. Read under the lock, since a write that sets a
    // bit plans around the member from then on.
    for (std::uint32_t t = 0; t < s_.geometry.members(); ++t) {
      if ((targets_ & bit(t)) == 0) continue;
      if (first + count > s_.readd_bitmap_below[t].load(std::memory_order_acquire)) return false;
    }
    if (window_dirty(s_, first, count)) return false;
    skipped_ += count;
    return true;
  }

  std::uint64_t clip(std::uint64_t first, std::uint64_t count) override {
    // Windows of a re-added member end at bitmap region boundaries, so that clean regions are
    // skipped whole.
    bool readd = false;
    for (std::uint32_t t = 0; t < s_.geometry.members(); ++t) {
      if ((targets_ & bit(t)) != 0 &&
          first < s_.readd_bitmap_below[t].load(std::memory_order_acquire))
        readd = true;
    }
    if (!readd || !s_.bitmap) return count;
    const std::uint64_t region_stripes =
        std::max<std::uint64_t>(s_.bitmap->region_bytes() / s_.geometry.strip_bytes(), 1);
    return std::min(count, region_stripes - first % region_stripes);
  }

  std::uint64_t reads(JobWindow& w) override {
    const Geometry& g = s_.geometry;
    std::uint64_t alive = 0;
    for (std::uint32_t m = 0; m < g.members(); ++m)
      if ((targets_ & bit(m)) == 0 && alive_throughout(m, w)) alive |= bit(m);
    if (g.redundancy() == Redundancy::kParity) return alive;
    // Mirrors: where each target has the same source copy throughout the window, that copy is
    // read straight into the buffer the target is written from (w.note: done so).
    std::uint64_t sources = 0;
    std::vector<std::uint32_t> source_of(g.members(), g.members());
    for (std::uint32_t t = 0; t < g.members(); ++t) {
      if ((targets_ & bit(t)) == 0) continue;
      for (std::uint64_t stripe = w.first(); stripe < w.first() + w.count(); ++stripe) {
        const std::uint32_t src = mirror_source(t, stripe, alive);
        if (src == g.members() || (source_of[t] != g.members() && source_of[t] != src))
          return alive;  // no source, or not the same one throughout: the module's way
        source_of[t] = src;
      }
      sources |= bit(source_of[t]);
    }
    // The first target made from a source owns the buffer that source is read into; every
    // target made from it is written from there.
    std::vector<std::uint32_t> owner(g.members(), g.members());
    for (std::uint32_t t = 0; t < g.members(); ++t) {
      if ((targets_ & bit(t)) == 0) continue;
      const std::uint32_t src = source_of[t];
      if (owner[src] == g.members()) {
        owner[src] = t;
        w.share_buffer(src, t);
      }
      w.share_buffer(t, owner[src]);
    }
    w.note = 1;
    return sources;
  }

  bool prepare(JobWindow& w) override {
    return s_.geometry.redundancy() != Redundancy::kParity || reconstruct(w);
  }

  std::optional<std::uint64_t> compute(JobWindow& w) override {
    const Geometry& g = s_.geometry;
    if (g.redundancy() == Redundancy::kParity) return targets_;  // rebuilt by prepare()'s jobs
    if (w.note == 1) return targets_;  // read straight into the targets' buffer
    // The fallback's scratch strips: the two never run at once.
    WindowStripeAccess access(s_, w, targets_, access_.scratch());
    for (std::uint64_t stripe = w.first(); stripe < w.first() + w.count(); ++stripe) {
      StripeOutcome r = g.module().process_stripe(StripeTask::kRebuild, g, access, stripe);
      if (!r.status || r.skipped) return std::nullopt;
    }
    return targets_;
  }

  Status fallback(std::uint64_t first, std::uint64_t count) override {
    for (std::uint64_t stripe = first; stripe < first + count; ++stripe) {
      StripeOutcome r =
          process_stripe_failing_members(s_, access_, StripeTask::kRebuild, stripe, "rebuild");
      if (!r.status && r.status.code() == Errc::kIoError) {
        r.status = make_error(Errc::kIoError, "rebuild of array '{}' failed at stripe {}: {}",
                              s_.name, stripe, r.status.message());
      }
      if (r.status) r.status = targets_alive();
      if (r.status && r.skipped) {
        r.status = make_error(Errc::kIoError, "stripe {} has too few members left to rebuild from",
                              stripe);
      }
      if (!r.status) return r.status;
    }
    return Status::ok();
  }

  Status retire(std::uint64_t first, std::uint64_t count) override {
    GRAID_RETURN_IF_ERROR(targets_alive());
    // Under the window's lock: no plan for these stripes is in flight while they come alive.
    for (std::uint32_t t = 0; t < s_.geometry.members(); ++t) {
      if ((targets_ & bit(t)) == 0) continue;
      if (s_.rebuilt[t].load(std::memory_order_acquire) < first + count)
        s_.rebuilt[t].store(first + count, std::memory_order_release);
    }
    return Status::ok();
  }

  std::uint64_t skipped() const noexcept { return skipped_; }

 private:
  bool alive_throughout(std::uint32_t m, const JobWindow& w) const {
    return !s_.dead_at(m, w.first()) && !s_.dead_at(m, w.first() + w.count() - 1);
  }
  // The copy a mirror target t is made from in `stripe`: the first copy of what t holds there
  // that is read for the window (as process_mirror_stripe picks it); members() if none.
  std::uint32_t mirror_source(std::uint32_t t, std::uint64_t stripe, std::uint64_t alive) const {
    const Geometry& g = s_.geometry;
    const MemberPlace place = g.place(t, stripe * g.strip_bytes());
    if (place.role != StripRole::kData) return g.members();
    for (std::uint32_t c = 0; c < g.copies(); ++c) {
      const std::uint32_t m = g.data_member(stripe, place.data_index, c);
      if ((targets_ & bit(m)) != 0 || s_.dead_at(m, stripe)) continue;
      return (alive & bit(m)) != 0 ? m : g.members();
    }
    return g.members();
  }
  // The jobs that rebuild every stripe of the window in one parity batch, straight from and
  // into its buffers: one kReconstruct job per stripe, the targets' chunks and those of members
  // dead there missing. False when that cannot be done (a member not read for the window is
  // needed, more missing than parity gives back).
  bool reconstruct(JobWindow& w) {
    const Geometry& g = s_.geometry;
    const std::uint32_t chunks = g.data_strips() + g.parity_strips();
    const std::uint64_t strip = g.strip_bytes();
    for (std::uint64_t stripe = w.first(); stripe < w.first() + w.count(); ++stripe) {
      StripeJob job;
      job.op = ParityOp::kReconstruct;
      job.scheme = g.parity_scheme();
      job.k = g.data_strips();
      job.len = strip;
      for (std::uint32_t c = 0; c < chunks; ++c) {
        const std::uint32_t m = g.chunk_member(stripe, c);
        const bool missing = (targets_ & bit(m)) != 0 || s_.dead_at(m, stripe);
        if (!missing && (w.read_mask() & bit(m)) == 0) return false;
        auto view = ChunkView::adopt(w.at(m, stripe), strip);
        if (!view) return false;
        job.chunk[c] = *view;
        if (!missing) continue;
        if (job.missing_count == g.parity_strips()) return false;
        job.missing[job.missing_count++] = static_cast<std::uint8_t>(c);
      }
      if (job.missing_count == 0) continue;
      w.jobs.push_back(job);
    }
    return true;
  }
  Status targets_alive() const {
    for (std::uint32_t t = 0; t < s_.geometry.members(); ++t) {
      if ((targets_ & bit(t)) != 0 && !s_.is_rebuilding(t))
        return make_error(Errc::kIoError, "member {} failed during its rebuild", t);
    }
    return Status::ok();
  }

  Array::State& s_;
  std::uint64_t targets_;
  ArrayStripeAccess& access_;
  std::uint64_t skipped_ = 0;
};

// Rebuilds `targets` (bit m: member m) in one pass from the lowest of their checkpoints. True:
// done; false: stopped.
Result<bool> rebuild_members(Array::State& s, std::uint64_t targets,
                             const RebuildControl& control) {
  const Geometry& g = s.geometry;
  const std::uint64_t strip = g.strip_bytes();
  const std::uint64_t stripes = g.stripes(s.data_size);
  std::vector<std::uint32_t> members;
  std::uint64_t from = stripes;
  for (std::uint32_t m = 0; m < g.members(); ++m) {
    if ((targets & bit(m)) == 0) continue;
    members.push_back(m);
    from = std::min(from, s.rebuilt[m].load(std::memory_order_acquire));
  }
  auto access = ArrayStripeAccess::make(s);
  if (!access) return access.status();
  access->set_stale_mask(targets);
  auto pipeline =
      WindowPipeline::create(s, pipeline_shape(g.members(), strip, control.window_stripes,
                                               control.windows_in_flight, stripes));
  if (!pipeline) return pipeline.status();
  for (const std::uint32_t m : members) {
    const std::string path = s.members[m]->path();
    spdlog::info("graid: array '{}': rebuilding member {} ({}) from stripe {} of {}", s.name, m,
                 path, from, stripes);
    s.emit(ArrayEventKind::kRebuildStarted, m,
           from == 0
               ? fmt::format("rebuilding {}", path)
               : fmt::format("rebuilding {}, resumed at {:.1f}%", path, 100.0 * from / stripes),
           byte_counts(g, (stripes - from) * strip));
  }
  auto stopped = [&](const std::string& why) {
    for (const std::uint32_t m : members) {
      s.emit(ArrayEventKind::kRebuildStopped, m, why, byte_counts(g, s.rebuilt[m].load() * strip));
    }
  };
  auto checkpoint = [&]() -> Status {
    for (const std::uint32_t m : members)
      GRAID_RETURN_IF_ERROR(record_checkpoint(s, m));
    return Status::ok();
  };

  RebuildPolicy policy(s, targets, *access);
  JobPace pace(pace_limits(s, control.bytes_per_second, control.speed, control.stop), from * strip);
  const Clock::time_point started = Clock::now();
  Clock::time_point last_checkpoint = started;
  std::uint64_t next_tenth = (from * 10 / std::max<std::uint64_t>(stripes, 1) + 1);
  auto after_retire = [&](std::uint64_t next) -> Status {
    if (next * 10 >= next_tenth * stripes && next < stripes) {
      for (const std::uint32_t m : members) {
        s.emit(ArrayEventKind::kRebuildProgress, m,
               fmt::format("{:.0f}% rebuilt", 100.0 * next / stripes),
               byte_counts(g, next * strip));
      }
      next_tenth = next * 10 / stripes + 1;
    }
    if (Clock::now() - last_checkpoint < control.checkpoint_interval || next >= stripes)
      return Status::ok();
    // Later windows stay in flight meanwhile: only what has been retired is recorded.
    Status st = checkpoint();
    last_checkpoint = Clock::now();
    return st;
  };
  auto run =
      (*pipeline)->run(policy, from, stripes, pace, from * strip, control.stop, after_retire);
  if (!run) {
    stopped(fmt::format("failed: {}", run.status().message()));
    return run.status();
  }
  if (!run->finished) {
    Status st = checkpoint();
    stopped(st ? "stopped; it resumes from its checkpoint"
               : fmt::format("stopped; checkpoint not recorded: {}", st.message()));
    if (!st) return st;
    return false;
  }
  for (const std::uint32_t m : members)
    GRAID_RETURN_IF_ERROR(finish_member(s, m));
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const std::uint64_t rebuilt_stripes = stripes - from - policy.skipped();
  const std::string not_needed =
      policy.skipped() == 0
          ? std::string()
          : fmt::format(", {} MiB skipped: the bitmap shows no write it missed there",
                        policy.skipped() * strip >> 20);
  for (const std::uint32_t m : members) {
    const std::string path = s.members[m]->path();
    spdlog::info("graid: array '{}': member {} ({}) rebuilt: {} MiB in {:.1f} s{}", s.name, m, path,
                 rebuilt_stripes * strip >> 20, seconds, not_needed);
    s.emit(ArrayEventKind::kRebuildFinished, m,
           fmt::format("{} rebuilt in {:.1f} s{}", path, seconds, not_needed),
           byte_counts(g, rebuilt_stripes * strip));
  }
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
  std::uint64_t targets = 0;
  for (std::uint32_t m : rebuilding_members())
    targets |= bit(m);
  if (targets != 0) {
    auto done = rebuild_members(s, targets, control);
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
