// Background initialisation (Array::initialise): the parity (or mirror copies) of a new array
// made to agree with its data while the array is in use, window by window under stripe locks,
// with its checkpoint in the superblocks (sb.init_checkpoint) so a stop or a crash resumes it.
// Until the job passes a stripe, writes to it use plans that do not read its parity
// (State::initialised), so what applications write is consistent before the job gets there.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "array/array_state.h"
#include "array/stripe_access.h"
#include "array/superblock_io.h"
#include "jobs/job_pace.h"
#include "stripe/stripe_range_lock.h"

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
    Status st = record_init(s, at * strip);
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

  const std::uint64_t window = std::max<std::uint64_t>(control.window_stripes, 1);
  JobPace pace(pace_limits(s, control.bytes_per_second, control.speed, control.stop),
               pending * strip);
  Clock::time_point last_checkpoint = Clock::now();
  StripeRangeLock lock(s.locks);
  for (std::uint64_t first = pending; first < stripes;) {
    if (control.stop != nullptr && control.stop->load(std::memory_order_acquire)) {
      return paused(first, "stopped");
    }
    const std::uint64_t count = std::min(window, stripes - first);
    lock.lock(first, count);
    for (std::uint64_t stripe = first; stripe < first + count; ++stripe) {
      StripeOutcome r =
          process_stripe_failing_members(s, *access, StripeTask::kResync, stripe, "initialise");
      if (!r.status || s.failed_count.load(std::memory_order_acquire) > 0) {
        lock.unlock();
        if (s.array_failed()) {
          return make_error(Errc::kIoError, "array '{}' failed while initialising stripe {}: {}",
                            s.name, stripe, r.status.message());
        }
        // This window is done again after the rebuild (its stripes are consistent by then).
        return paused(first, r.status ? "a member failed"
                                      : fmt::format("stripe {}: {}", stripe, r.status.message()));
      }
      ++report.stripes;
    }
    first += count;
    // Still holding the window: no plan for these stripes is in progress.
    s.init_done.store(first < stripes ? first : State::kAllInitialised, std::memory_order_release);
    lock.unlock();
    if (Clock::now() - last_checkpoint >= control.checkpoint_interval && first < stripes) {
      GRAID_RETURN_IF_ERROR(record_init(s, first * strip));
      last_checkpoint = Clock::now();
    }
    pace.after(first * strip);
  }
  // Flushed before the checkpoint goes: the superblocks must not say done before the parity
  // written is on stable storage. A member that fails its flush is failed: what the survivors
  // hold is consistent and on stable storage, and the rebuild makes the new member agree.
  const std::vector<Status> flushed = flush_members(writing_members(s), s.metadata_timeout);
  for (std::uint32_t m = 0; m < flushed.size(); ++m) {
    if (flushed[m]) continue;
    (void)s.fail_member(m, fmt::format("flush after initialisation: {}", flushed[m].message()));
    if (s.array_failed()) return flushed[m];
  }
  GRAID_RETURN_IF_ERROR(record_init(s, std::nullopt));
  report.finished = true;
  spdlog::info("graid: array '{}': initialisation done ({} stripes in this run)", s.name,
               report.stripes);
  s.emit(ArrayEventKind::kInitFinished, std::nullopt, "background initialisation finished",
         byte_counts(g, report.stripes * strip));
  return report;
}

}  // namespace graid
