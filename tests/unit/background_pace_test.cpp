// BackgroundPace on a fake clock: the rate cap, the share of the time while the applications' I/O
// runs, and both together, each read again after every window.
#include "array/background_pace.h"

#include <gtest/gtest.h>

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
