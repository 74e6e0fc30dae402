// Background initialisation (Array::initialise): the parity (or mirror copies) of a new array
// made to agree with its data while the array is in use, on the job engine's pipeline
// (jobs/sync_policy.h: windows in flight, only the parity strips written), with its checkpoint
// in the superblocks (sb.init_checkpoint, recorded once the members are flushed) so a stop or a
// crash resumes it.
// Until the job passes a stripe, writes to it use plans that do not read its parity
// (State::initialised), so what applications write is consistent before the job gets there.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "array/stripe_access.h"
#include "array/superblock_io.h"
#include "jobs/job_pace.h"
#include "jobs/sync_policy.h"
#include "jobs/window_pipeline.h"
#include "state/array_state.h"

namespace graid {

namespace {

using Clock = std::chrono::steady_clock;

// Records the initialisation's position (nullopt: done).
Status record_init(Array::State& s, std::optional<std::uint64_t> member_offset) {
  MutexLock guard(s.control_mutex);
  if (s.sb.init_checkpoint == member_offset) return Status::ok();
  s.sb.init_checkpoint = member_offset;
  return s.write_superblocks_locked();
}

// Every member written flushed. A member that fails its flush is failed: what the survivors hold
// is consistent and on stable storage, and the rebuild makes the new member agree.
Status flush_written(Array::State& s) {
  const std::vector<Status> flushed = flush_members(writing_members(s), s.metadata_timeout);
  for (std::uint32_t m = 0; m < flushed.size(); ++m) {
    if (flushed[m]) continue;
    (void)s.fail_member(m, fmt::format("flush during initialisation: {}", flushed[m].message()));
    if (s.array_failed()) return flushed[m];
  }
  return Status::ok();
}

// The position recorded once the parity written below it is on stable storage: without the
// flush first, a power loss could keep the superblocks and lose parity they say is there.
Status durable_checkpoint(Array::State& s, std::uint64_t member_offset) {
  GRAID_RETURN_IF_ERROR(flush_written(s));
  return record_init(s, member_offset);
}

}  // namespace

std::optional<std::uint64_t> Array::init_progress() const {
  const State& s = *state_;
  const std::uint64_t done = s.init_done.load(std::memory_order_acquire);
  if (done == State::kAllInitialised) return std::nullopt;
  return std::min(s.data_size, done * s.geometry.strip_bytes());
}

Result<InitReport> Array::initialise(const InitControl& control) {
  State& s = *state_;
  const Geometry& g = s.geometry;
  InitReport report;
  const std::uint64_t pending = s.init_done.load(std::memory_order_acquire);
  if (pending == State::kAllInitialised) {
    report.finished = true;
    return report;
  }
  if (s.init_running.exchange(true)) {
    return make_error(Errc::kBusy, "array '{}' is being initialised already", s.name);
  }
  struct Running {
    State& s;
    ~Running() { s.init_running.store(false, std::memory_order_release); }
  } running{s};
  // After init_running is set (check() sets check_running, then looks at init_running): at
  // least one of two racing starts sees the other.
  if (s.check_running.load()) {
    return make_error(Errc::kBusy, "array '{}' is being checked", s.name);
  }
  const std::uint64_t strip = g.strip_bytes();
  const std::uint64_t stripes = g.stripes(s.data_size);
  report.from_stripe = pending;
  auto paused = [&](std::uint64_t at, std::string why) -> Result<InitReport> {
    Status st = durable_checkpoint(s, at * strip);
    report.paused = std::move(why);
    spdlog::info("graid: array '{}': initialisation paused at stripe {} of {}: {}", s.name, at,
                 stripes, report.paused);
    s.emit(ArrayEventKind::kInitStopped, std::nullopt,
           fmt::format("paused at stripe {}: {}", at, report.paused),
           byte_counts(g, report.stripes * strip));
    if (!st) return st;
    return report;
  };
  if (s.failed_count.load(std::memory_order_acquire) > 0) {
    // A stripe with a member missing cannot be made consistent; the rebuild makes the
    // stripes it passes consistent, and the initialisation goes on once it is done.
    report.paused = "a member is failed; it resumes once the array is optimal";
    return report;
  }
  auto access = ArrayStripeAccess::make(s);
  if (!access) return access.status();
  spdlog::info("graid: array '{}': initialising from stripe {} of {}", s.name, pending, stripes);
  s.emit(ArrayEventKind::kInitStarted, std::nullopt,
         pending == 0 ? std::string("background initialisation")
                      : fmt::format("background initialisation, resumed at stripe {}", pending),
         byte_counts(g, (stripes - pending) * strip));

  SyncPolicy policy(s, *access, "initialise", true, [&](std::uint64_t first, std::uint64_t count) {
    // Still holding the window: no plan for these stripes is in progress.
    s.init_done.store(first + count < stripes ? first + count : State::kAllInitialised,
                      std::memory_order_release);
    return Status::ok();
  });
  policy.start_at(pending);
  auto pipeline =
      WindowPipeline::create(s, pipeline_shape(g.members(), strip, control.window_stripes,
                                               control.windows_in_flight, stripes - pending));
  if (!pipeline) return pipeline.status();
  JobPace pace(pace_limits(s, control.bytes_per_second, control.speed, control.stop),
               pending * strip);
  Clock::time_point last_checkpoint = Clock::now();
  auto after_retire = [&](std::uint64_t next) -> Status {
    if (next >= stripes || Clock::now() - last_checkpoint < control.checkpoint_interval)
      return Status::ok();
    last_checkpoint = Clock::now();
    // Later windows stay in flight: only what has been retired is recorded.
    return durable_checkpoint(s, next * strip);
  };
  auto run =
      (*pipeline)->run(policy, pending, stripes, pace, pending * strip, control.stop, after_retire);
  report.stripes = policy.passed();
  if (!run) {
    if (s.array_failed()) {
      return make_error(Errc::kIoError, "array '{}' failed while initialising: {}", s.name,
                        run.status().message());
    }
    // The stripes not retired are done again after the rebuild (consistent by then).
    return paused(policy.next(),
                  policy.member_lost() ? "a member failed" : std::string(run.status().message()));
  }
  if (!run->finished) return paused(run->next, "stopped");
  // Flushed before the checkpoint goes: the superblocks must not say done before the parity
  // written is on stable storage.
  GRAID_RETURN_IF_ERROR(flush_written(s));
  GRAID_RETURN_IF_ERROR(record_init(s, std::nullopt));
  report.finished = true;
  spdlog::info("graid: array '{}': initialisation done ({} stripes in this run)", s.name,
               report.stripes);
  s.emit(ArrayEventKind::kInitFinished, std::nullopt, "background initialisation finished",
         byte_counts(g, report.stripes * strip));
  return report;
}

}  // namespace graid
