// Pacing of a background job (rebuild, check) to a rate in member bytes per second per member,
// which may change while it runs (the DG's speed setting): after each window the job sleeps
// until the bytes done since the rate last changed could not have taken less at that rate.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

namespace graid {

class BackgroundPace {
 public:
  using Clock = std::chrono::steady_clock;

  // `fixed` when `live` is empty; `done` = member bytes done before the job starts pacing.
  BackgroundPace(std::uint64_t fixed, std::function<std::uint64_t()> live, std::uint64_t done)
      : fixed_(fixed),
        live_(std::move(live)),
        rate_(current()),
        from_(done),
        start_(Clock::now()) {}

  // Called after each window with the member bytes done so far; sleeps as the rate asks.
  void after(std::uint64_t done) {
    const std::uint64_t rate = current();
    if (rate != rate_) {
      rate_ = rate;
      from_ = done;
      start_ = Clock::now();
    }
    if (rate == 0 || done <= from_) return;
    const auto due = start_ + std::chrono::microseconds((done - from_) * 1'000'000 / rate);
    if (due > Clock::now()) std::this_thread::sleep_until(due);
  }

 private:
  std::uint64_t current() const { return live_ ? live_() : fixed_; }

  std::uint64_t fixed_;
  std::function<std::uint64_t()> live_;
  std::uint64_t rate_;
  std::uint64_t from_;
  Clock::time_point start_;
};

}  // namespace graid
