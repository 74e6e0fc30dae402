// Pacing of a background job (rebuild, check, initialisation, re-sync, hot replace copy) by the
// DG's speed setting, which sets two limits, as md's speed limits and SPDK's process window do:
// - a rate cap in member bytes per second per member: after each window the job sleeps until the
//   bytes done since the rate last changed could not have taken less at that rate;
// - a share of the time while foreground I/O runs: when applications issued requests since the
//   last window (or have some in flight), the job sleeps after a window so that its windows take
//   at most that share of the time. With no foreground I/O only the cap applies.
// Either may change while the job runs (the setting is asked after every window). A sleep is
// cut into slices of at most kStopCheck and ends early once the job's stop flag is set, so a job
// asked to stop never sleeps on: its caller joins its thread within that.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

namespace graid {

// What limits a background job's pace.
struct PaceLimits {
  std::uint64_t fixed_rate = 0;             // bytes/s; 0 = no cap; used when `rate` is empty
  std::function<std::uint64_t()> rate;      // asked after each window
  std::function<std::uint32_t()> share;     // percent 1..100 while busy; empty = 100
  std::function<bool()> busy;               // foreground I/O since the last call; empty = never
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

class BackgroundPace {
 public:
  using Clock = std::chrono::steady_clock;
  using Limits = PaceLimits;
  using Timer = PaceTimer;

  // The longest one sleep runs before it looks at the stop flag again.
  static constexpr std::chrono::milliseconds kStopCheck{100};

  // `done` = member bytes done before the job starts pacing (where a resumed job resumes: the
  // rate counts from there).
  BackgroundPace(Limits limits, std::uint64_t done, Timer timer = {})
      : limits_(std::move(limits)),
        timer_(std::move(timer)),
        rate_(current_rate()),
        from_(done),
        start_(timer_.now()),
        window_start_(start_) {}

  // Called after each window with the member bytes done so far; sleeps as the limits ask.
  void after(std::uint64_t done) {
    const Clock::time_point now = timer_.now();
    Clock::time_point until = now;
    const std::uint64_t rate = current_rate();
    if (rate != rate_) {
      rate_ = rate;
      from_ = done;
      start_ = now;
    }
    if (rate != 0 && done > from_) {
      until =
          std::max(until, start_ + std::chrono::microseconds((done - from_) * 1'000'000 / rate));
    }
    const std::uint32_t share = current_share();
    if (share < 100 && limits_.busy && limits_.busy()) {
      // The window took `work`; at `share` percent the rest of the time is the applications'.
      const auto work = now - window_start_;
      until = std::max(until, now + work * (100 - share) / share);
    }
    sleep_until(until);
    window_start_ = timer_.now();
  }

 private:
  bool stopped() const {
    return limits_.stop != nullptr && limits_.stop->load(std::memory_order_acquire);
  }
  // Sleeps until `until`, in slices of at most kStopCheck, or until the stop flag is set.
  void sleep_until(Clock::time_point until) {
    for (Clock::time_point now = timer_.now(); now < until && !stopped(); now = timer_.now())
      timer_.sleep_until(std::min(until, now + kStopCheck));
  }

  std::uint64_t current_rate() const { return limits_.rate ? limits_.rate() : limits_.fixed_rate; }
  std::uint32_t current_share() const {
    return limits_.share ? std::clamp<std::uint32_t>(limits_.share(), 1, 100) : 100;
  }

  Limits limits_;
  Timer timer_;
  std::uint64_t rate_;
  std::uint64_t from_;
  Clock::time_point start_;
  Clock::time_point window_start_;
};

}  // namespace graid
