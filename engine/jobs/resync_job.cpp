// Background re-sync after an unclean stop (Array::resync) as a job: the stripes the write-intent
// bitmap marked at assembly (array/background_resync.cpp) made consistent again while the array
// is in use, on the job engine's pipeline (jobs/sync_policy.h: windows in flight, only the parity
// strips written), one pipeline run per range of marked stripes, paced. Its regions' bits are
// pinned (WriteIntentBitmap::pin_dirty) until it has passed them, so a stop or a crash leaves them
// set and the next assembly re-syncs what is left: that is the resume. sb.resync_checkpoint records
// where it got to (for progress, and so the next assembly knows a re-sync was pending). Until it
// passes a stripe, writes to the stripe trust none of its parity (State::initialised).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "array/background_resync.h"
#include "array/consistency.h"
#include "array/stripe_access.h"
#include "array/superblock_io.h"
#include "jobs/job_pace.h"
#include "jobs/sync_policy.h"
#include "jobs/window_pipeline.h"

namespace graid {

namespace {

using Clock = std::chrono::steady_clock;

Status record_resync(Array::State& s, std::optional<std::uint64_t> member_offset) {
  MutexLock guard(s.control_mutex);
  if (s.sb.resync_checkpoint == member_offset) return Status::ok();
  s.sb.resync_checkpoint = member_offset;
  return s.write_superblocks_locked();
}

}  // namespace

std::optional<ResyncProgress> Array::resync_progress() const {
  const State& s = *state_;
  const std::uint64_t done = s.resync_done.load(std::memory_order_acquire);
  if (done == State::kAllInitialised) return std::nullopt;
  const std::uint64_t strip = s.geometry.strip_bytes();
  ResyncProgress out;
  out.total = range_stripes(s.resync_ranges, ~std::uint64_t{0}) * strip;
  out.done = range_stripes(s.resync_ranges, done) * strip;
  return out;
}

Result<ResyncReport> Array::resync(const InitControl& control) {
  State& s = *state_;
  const Geometry& g = s.geometry;
  ResyncReport report;
  if (s.resync_done.load(std::memory_order_acquire) == State::kAllInitialised) {
    report.finished = true;
    return report;
  }
  if (s.resync_running.exchange(true)) {
    return make_error(Errc::kBusy, "array '{}' is being re-synced already", s.name);
  }
  struct Running {
    State& s;
    ~Running() { s.resync_running.store(false, std::memory_order_release); }
  } running{s};
  auto access = ArrayStripeAccess::make(s);
  if (!access) return access.status();

  const std::uint64_t strip = g.strip_bytes();
  const std::uint64_t from = s.resync_done.load(std::memory_order_acquire);
  const std::uint64_t total = range_stripes(s.resync_ranges, ~std::uint64_t{0});
  const std::uint64_t before = range_stripes(s.resync_ranges, from);
  spdlog::info("graid: array '{}': re-syncing {} of {} stripes the write-intent bitmap marks",
               s.name, total - before, total);
  s.emit(ArrayEventKind::kResyncStarted, std::nullopt,
         before == 0 ? std::string("background re-sync after an unclean stop")
                     : fmt::format("background re-sync, resumed at stripe {}", from),
         byte_counts(g, (total - before) * strip));
  GRAID_RETURN_IF_ERROR(record_resync(s, from * strip));

  auto paused = [&](std::uint64_t at, std::string why) -> Result<ResyncReport> {
    Status st = record_resync(s, at * strip);
    report.paused = std::move(why);
    spdlog::info("graid: array '{}': re-sync paused at stripe {}: {}", s.name, at, report.paused);
    s.emit(ArrayEventKind::kResyncStopped, std::nullopt,
           fmt::format("paused at stripe {}: {}", at, report.paused),
           byte_counts(g, report.stripes * strip));
    if (!st) return st;
    return report;
  };

  std::size_t range = 0;  // the range being re-synced
  // Where the re-sync stands once stripes below `end` of the current range are done.
  auto next_after = [&](std::uint64_t end) {
    return end < s.resync_ranges[range].second  ? end
           : range + 1 < s.resync_ranges.size() ? s.resync_ranges[range + 1].first
                                                : State::kAllInitialised;
  };
  SyncPolicy policy(s, *access, "re-sync", false, [&](std::uint64_t first, std::uint64_t count) {
    // Still holding the window: no plan for these stripes is in progress.
    s.resync_done.store(next_after(first + count), std::memory_order_release);
    return Status::ok();
  });
  std::uint64_t largest = 0;
  for (const auto& [first, last] : s.resync_ranges)
    largest = std::max(largest, last - first);
  auto pipeline =
      WindowPipeline::create(s, pipeline_shape(g.members(), strip, control.window_stripes,
                                               control.windows_in_flight, largest));
  if (!pipeline) return pipeline.status();
  JobPace pace(pace_limits(s, control.bytes_per_second, control.speed, control.stop), 0);
  Clock::time_point last_checkpoint = Clock::now();
  auto after_retire = [&](std::uint64_t end) -> Status {
    const std::uint64_t next = next_after(end);
    // Written and completed: a clear cycle flushes the members before it clears these bits.
    s.bitmap->unpin_below(next == State::kAllInitialised ? s.data_size : next * strip);
    if (next == State::kAllInitialised ||
        Clock::now() - last_checkpoint < control.checkpoint_interval)
      return Status::ok();
    last_checkpoint = Clock::now();
    return record_resync(s, next * strip);
  };
  for (; range < s.resync_ranges.size(); ++range) {
    const auto [range_first, range_last] = s.resync_ranges[range];
    const std::uint64_t first = std::max(range_first, from);
    if (first >= range_last) continue;
    policy.start_at(first);
    auto run = (*pipeline)->run(policy, first, range_last, pace, policy.passed() * strip,
                                control.stop, after_retire);
    report.stripes = policy.passed() - policy.unsynced();
    report.unsynced_stripes = policy.unsynced();
    if (!run) {
      if (s.array_failed()) {
        return make_error(Errc::kIoError, "array '{}' failed while re-syncing: {}", s.name,
                          run.status().message());
      }
      return paused(policy.next(), std::string(run.status().message()));
    }
    if (!run->finished) return paused(run->next, "stopped");
  }
  // Flushed before the checkpoint goes, as the initialisation.
  const std::vector<Status> flushed = flush_members(writing_members(s), s.metadata_timeout);
  for (std::uint32_t m = 0; m < flushed.size(); ++m) {
    if (flushed[m]) continue;
    (void)s.fail_member(m, fmt::format("flush after re-sync: {}", flushed[m].message()));
    if (s.array_failed()) return flushed[m];
  }
  GRAID_RETURN_IF_ERROR(record_resync(s, std::nullopt));
  report.finished = true;
  if (report.unsynced_stripes > 0) {
    spdlog::warn(
        "graid: array '{}': {} stripes could not be re-synced (a member failed first); their "
        "parity is trusted as written and a missing strip in them may read stale (the write hole)",
        s.name, report.unsynced_stripes);
  }
  spdlog::info("graid: array '{}': re-sync done ({} stripes, {} could not be)", s.name,
               report.stripes, report.unsynced_stripes);
  ArrayEventCounts done = byte_counts(g, report.stripes * strip);
  done.unsynced_stripes = report.unsynced_stripes;
  s.emit(
      ArrayEventKind::kResyncFinished, std::nullopt,
      fmt::format("re-synced {} stripes, {} could not be", report.stripes, report.unsynced_stripes),
      done);
  return report;
}

}  // namespace graid
