// Pacing of a background job (rebuild, check, initialisation, re-sync, hot replace copy) by the
// DG's speed setting, as md's speed_limit_min / speed_limit_max: each setting gives a job a
// minimum and a maximum rate in member bytes per second per member (JobSpeed).
// - While the array is idle (no application request in flight, none arrived since the pace last
//   looked) the job runs at up to its maximum (0: as fast as the drives go).
// - While applications' requests run, a job that yields keeps to its minimum: the pace holds it
//   to that rate, and the window pipeline (window_pipeline.h) cuts its depth to one small window,
//   so it never sleeps holding stripes an application waits for. `extreme` never yields.
// The rate counts from the last change of mode (idle/busy) or speed, which is read again at
// every step, so `graidctl edit dg` applies to a job already running. A sleep is cut into slices
// of at most kStopCheck and ends early once the job's stop flag is set: a job asked to stop never
// sleeps on, and its caller joins its thread within that.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "graid/array.h"
#include "state/array_state.h"

namespace graid {

// What limits a background job's pace.
struct PaceLimits {
  std::uint64_t fixed_max = 0;              // bytes/s per member; 0 = none; when `speed` is empty
  std::function<JobSpeed()> speed;          // asked at every step; empty: {0, fixed_max, no yield}
  std::function<bool()> busy;               // applications' I/O now; empty = never
  const std::atomic<bool>* stop = nullptr;  // the job's stop flag: ends a sleep early; optional
};

// The clock a pace reads and sleeps on, replaceable by tests.
struct PaceTimer {
  std::function<std::chrono::steady_clock::time_point()> now = [] {
    return std::chrono::steady_clock::now();
  };
  std::function<void(std::chrono::steady_clock::time_point)> sleep_until =
      [](std::chrono::steady_clock::time_point t) { std::this_thread::sleep_until(t); };
};

class JobPace {
 public:
  using Clock = std::chrono::steady_clock;
  using Limits = PaceLimits;
  using Timer = PaceTimer;

  // The longest one sleep runs before it looks at the stop flag again.
  static constexpr std::chrono::milliseconds kStopCheck{100};
  // The rate a yielding job keeps while busy when its setting names no minimum.
  static constexpr std::uint64_t kMinimumFloor = 1'000'000;

  // What the job may do next.
  struct Step {
    Clock::time_point not_before;  // start no more work before this
    bool busy = false;             // applications' I/O runs and the job yields to it
    bool wait = false;             // not_before is later than now
  };

  // `done` = member bytes done before the job starts pacing (where a resumed job resumes: the
  // rate counts from there).
  JobPace(Limits limits, std::uint64_t done, Timer timer = {})
      : limits_(std::move(limits)), timer_(std::move(timer)), from_(done), start_(timer_.now()) {
    rate_ = rate_for(current_speed(), false);
  }

  // With `done` member bytes done so far: when the job may go on, and whether it yields now.
  Step next(std::uint64_t done) {
    const Clock::time_point now = timer_.now();
    const JobSpeed speed = current_speed();
    const bool busy = speed.yields && limits_.busy && limits_.busy();
    const std::uint64_t rate = rate_for(speed, busy);
    if (rate != rate_ || busy != busy_) {
      // The new rate counts from when the work done so far is due at the old one (now, if that
      // is past): a job whose mode flips at every step still keeps to its rates, never
      // forgiven what it owes.
      // (start_ itself may lie ahead: a flip back at the same position keeps it.)
      Clock::time_point origin = now;
      if (rate_ != 0 && done >= from_)
        origin = std::max(now, start_ + due_after(done - from_, rate_));
      rate_ = rate;
      busy_ = busy;
      from_ = done;
      start_ = origin;
    }
    Step step{now, busy, false};
    if (rate != 0 && done >= from_) {
      step.not_before = std::max(now, start_ + due_after(done - from_, rate));
      step.wait = step.not_before > now;
    }
    return step;
  }

  // For a job that does one window at a time, holding nothing: sleeps as the limits ask.
  void after(std::uint64_t done) { sleep_until(next(done).not_before); }

  // Sleeps until `until`, in slices of at most kStopCheck, or until the stop flag is set.
  void sleep_until(Clock::time_point until) {
    for (Clock::time_point now = timer_.now(); now < until && !stopped(); now = timer_.now())
      timer_.sleep_until(std::min(until, now + kStopCheck));
  }

  // The rate the job is held to now (0 = none).
  std::uint64_t rate() const noexcept { return rate_; }

 private:
  bool stopped() const {
    return limits_.stop != nullptr && limits_.stop->load(std::memory_order_acquire);
  }
  JobSpeed current_speed() const {
    return limits_.speed ? limits_.speed() : JobSpeed{0, limits_.fixed_max, false};
  }
  // How long `bytes` take at `rate` bytes per second. In whole seconds plus the rest, so that no
  // product wraps (bytes * 1e6 does past 18.4 TB: a large drive's rebuild would run unpaced), and
  // capped at a century, which no job waits for and a time point can still add.
  static Clock::duration due_after(std::uint64_t bytes, std::uint64_t rate) {
    constexpr std::uint64_t kCapSeconds = 100ull * 365 * 24 * 3600;
    const std::uint64_t seconds = bytes / rate;
    if (seconds >= kCapSeconds) return std::chrono::seconds(kCapSeconds);
    const std::uint64_t rest = bytes % rate;  // < rate
    const std::uint64_t us =
        rest <= ~std::uint64_t{0} / 1'000'000
            ? rest * 1'000'000 / rate
            : static_cast<std::uint64_t>(static_cast<long double>(rest) * 1'000'000 /
                                         static_cast<long double>(rate));
    return std::chrono::seconds(seconds) + std::chrono::microseconds(us);
  }
  static std::uint64_t rate_for(const JobSpeed& speed, bool busy) {
    if (!busy) return speed.max;
    const std::uint64_t min = std::max(speed.min, kMinimumFloor);
    return speed.max == 0 ? min : std::min(min, speed.max);
  }

  Limits limits_;
  Timer timer_;
  std::uint64_t rate_ = 0;
  bool busy_ = false;
  std::uint64_t from_;
  Clock::time_point start_;
};

// A job's limits on array `s`: its control's fixed cap or speed, and busy while applications'
// requests are in flight on the array or arrived since the pace last asked. `stop`: the job's
// stop flag, which ends the pace's sleeps early (optional). (job_pace.cpp)
PaceLimits pace_limits(const Array::State& s, std::uint64_t fixed_max,
                       std::function<JobSpeed()> speed, const std::atomic<bool>* stop);

}  // namespace graid
