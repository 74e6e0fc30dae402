// BackgroundPace on a fake clock: the rate cap, the share of the time while the applications' I/O
// runs, and both together, each read again after every window.
#include "array/background_pace.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "graid/array.h"

namespace graid {
namespace {

using namespace std::chrono_literals;
using Clock = BackgroundPace::Clock;

// A clock that moves only when the job "works" (work()) or the pace sleeps; sleeps are recorded.
struct FakeClock {
  Clock::time_point now{};
  std::vector<Clock::duration> slept;
  BackgroundPace::Timer timer() {
    BackgroundPace::Timer t;
    t.now = [this] { return now; };
    t.sleep_until = [this](Clock::time_point until) {
      slept.push_back(until - now);
      now = until;
    };
    return t;
  }
  void work(Clock::duration d) { now += d; }
};

TEST(BackgroundPaceTest, RateCapSleepsUntilTheBytesCouldNotHaveTakenLess) {
  FakeClock clock;
  BackgroundPace::Limits limits;
  limits.fixed_rate = 100'000'000;  // 100 MB/s
  BackgroundPace pace(std::move(limits), 0, clock.timer());
  clock.work(2ms);
  pace.after(1'000'000);  // 1 MB due at 10 ms
  ASSERT_EQ(clock.slept.size(), 1u);
  EXPECT_EQ(clock.slept[0], 8ms);
  clock.work(20ms);
  pace.after(2'000'000);  // due at 20 ms, now 30 ms: no sleep
  EXPECT_EQ(clock.slept.size(), 1u);
}

TEST(BackgroundPaceTest, WhileBusyTheJobTakesItsShareOfTheTime) {
  FakeClock clock;
  bool busy = true;
  std::uint32_t share = 25;
  BackgroundPace::Limits limits;  // no cap
  limits.share = [&] { return share; };
  limits.busy = [&] { return busy; };
  BackgroundPace pace(std::move(limits), 0, clock.timer());
  clock.work(10ms);
  pace.after(1);
  ASSERT_EQ(clock.slept.size(), 1u);
  EXPECT_EQ(clock.slept[0], 30ms) << "10 ms of work is 25 % of 40 ms";
  // The next window is measured from the end of the sleep.
  clock.work(4ms);
  pace.after(2);
  ASSERT_EQ(clock.slept.size(), 2u);
  EXPECT_EQ(clock.slept[1], 12ms);
  // Idle applications: no yielding.
  busy = false;
  clock.work(10ms);
  pace.after(3);
  EXPECT_EQ(clock.slept.size(), 2u);
  // The share changes while the job runs; 100 % never yields.
  busy = true;
  share = 50;
  clock.work(6ms);
  pace.after(4);
  ASSERT_EQ(clock.slept.size(), 3u);
  EXPECT_EQ(clock.slept[2], 6ms);
  share = 100;
  clock.work(6ms);
  pace.after(5);
  EXPECT_EQ(clock.slept.size(), 3u);
}

TEST(BackgroundPaceTest, TheLongerOfTheTwoLimitsApplies) {
  FakeClock clock;
  BackgroundPace::Limits limits;
  limits.fixed_rate = 1'000'000'000;  // 1 GB/s
  limits.share = [] { return 10u; };
  limits.busy = [] { return true; };
  BackgroundPace pace(std::move(limits), 0, clock.timer());
  clock.work(1ms);
  pace.after(10'000'000);  // the cap wants 10 ms in all, the share 9 ms more: the cap wins
  ASSERT_EQ(clock.slept.size(), 1u);
  EXPECT_EQ(clock.slept[0], 9ms);
  clock.work(5ms);
  pace.after(11'000'000);  // the cap is met (11 ms due, 15 ms now); the share asks 45 ms
  ASSERT_EQ(clock.slept.size(), 2u);
  EXPECT_EQ(clock.slept[1], 45ms);
}

// A job resumed from a checkpoint passes that position as `done`: the rate counts from there.
TEST(BackgroundPaceTest, AResumedJobIsPacedFromWhereItResumed) {
  FakeClock clock;
  BackgroundPace::Limits limits;
  limits.fixed_rate = 32'000'000;  // 32 MB/s
  constexpr std::uint64_t kResumedAt = 64u << 20;
  BackgroundPace pace(std::move(limits), kResumedAt, clock.timer());
  clock.work(1ms);
  pace.after(kResumedAt + 3'200'000);  // 3.2 MB past the resume point: due at 100 ms
  Clock::duration slept{};
  for (const auto d : clock.slept)
    slept += d;
  EXPECT_EQ(slept, 99ms);
}

// A long sleep is cut into slices and ends once the stop flag is set: the job's thread is then
// joined within a slice, whatever the cap asked.
TEST(BackgroundPaceTest, ASleepEndsWithinASliceOfTheStopFlag) {
  FakeClock clock;
  std::atomic<bool> stop{false};
  BackgroundPace::Limits limits;
  limits.fixed_rate = 1'000'000;  // 1 MB/s
  limits.stop = &stop;
  BackgroundPace::Timer timer = clock.timer();
  timer.sleep_until = [&](Clock::time_point until) {
    clock.slept.push_back(until - clock.now);
    clock.now = until;
    if (clock.slept.size() == 3) stop = true;  // set during the third slice
  };
  BackgroundPace pace(std::move(limits), 0, timer);
  pace.after(10'000'000);  // 10 s due
  ASSERT_EQ(clock.slept.size(), 3u) << "no slice after the stop";
  for (const auto d : clock.slept)
    EXPECT_LE(d, BackgroundPace::kStopCheck);
  // Without a stop flag the whole sleep runs, in slices.
  FakeClock plain;
  BackgroundPace::Limits capped;
  capped.fixed_rate = 1'000'000;
  BackgroundPace full(std::move(capped), 0, plain.timer());
  full.after(1'000'000);  // 1 s due
  Clock::duration slept{};
  for (const auto d : plain.slept)
    slept += d;
  EXPECT_EQ(slept, 1s);
}

TEST(BackgroundPaceTest, SpeedSettingsMapToACapAndAShare) {
  EXPECT_EQ(background_busy_share(BackgroundSpeed::kLow), 10u);
  EXPECT_EQ(background_busy_share(BackgroundSpeed::kNormal), 25u);
  EXPECT_EQ(background_busy_share(BackgroundSpeed::kHigh), 50u);
  EXPECT_EQ(background_busy_share(BackgroundSpeed::kExtreme), 100u);
  EXPECT_GT(background_speed_bytes(BackgroundSpeed::kNormal),
            background_speed_bytes(BackgroundSpeed::kLow));
  EXPECT_EQ(background_speed_bytes(BackgroundSpeed::kExtreme), 0u) << "uncapped";
}

}  // namespace
}  // namespace graid
