// JobPace on a fake clock: the maximum while idle, the minimum while applications' I/O runs (for
// a job that yields), the rate counted from each change of mode or speed (nothing owed forgiven), a
// resumed job paced from where it resumed, sleeps that end with the stop flag, and each setting's
// limits.
#include "jobs/job_pace.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "graid/array.h"

namespace graid {
namespace {

using namespace std::chrono_literals;
using Clock = JobPace::Clock;

// A clock that moves only when the job "works" (work()) or the pace sleeps; sleeps are recorded.
struct FakeClock {
  Clock::time_point now{};
  std::vector<Clock::duration> slept;
  JobPace::Timer timer() {
    JobPace::Timer t;
    t.now = [this] { return now; };
    t.sleep_until = [this](Clock::time_point until) {
      slept.push_back(until - now);
      now = until;
    };
    return t;
  }
  void work(Clock::duration d) { now += d; }
  Clock::duration total() const {
    Clock::duration sum{};
    for (const auto d : slept)
      sum += d;
    return sum;
  }
};

TEST(JobPaceTest, TheMaximumHoldsTheJobUntilItsBytesCouldNotHaveTakenLess) {
  FakeClock clock;
  JobPace::Limits limits;
  limits.fixed_max = 100'000'000;  // 100 MB/s
  JobPace pace(std::move(limits), 0, clock.timer());
  clock.work(2ms);
  pace.after(1'000'000);  // 1 MB due at 10 ms
  ASSERT_EQ(clock.slept.size(), 1u);
  EXPECT_EQ(clock.slept[0], 8ms);
  clock.work(20ms);
  pace.after(2'000'000);  // due at 20 ms, now 30 ms: no sleep
  EXPECT_EQ(clock.slept.size(), 1u);
}

// Issue 47 item 10: the time `done` bytes take was (done - from) * 1'000'000 / rate in 64 bits,
// which wraps once 18.4 TB have been done at one setting: a rebuild of a large drive then ran
// unpaced. Paced across 20 TB at 1 GB/s, the job is still held to 20,000 s of work.
TEST(JobPaceTest, AJobPacedAcrossTwentyTerabytesStaysPaced) {
  FakeClock clock;
  JobPace::Limits limits;
  limits.fixed_max = 1'000'000'000;  // 1 GB/s
  JobPace pace(std::move(limits), 0, clock.timer());
  constexpr std::uint64_t kTerabyte = 1'000'000'000'000;
  for (std::uint64_t tb = 1; tb <= 20; ++tb) {
    const JobPace::Step step = pace.next(tb * kTerabyte);
    EXPECT_TRUE(step.wait) << tb << " TB";
    EXPECT_EQ(step.not_before - Clock::time_point{}, std::chrono::seconds(tb * 1000))
        << tb << " TB";
    clock.now = step.not_before;  // the job keeps exactly to its rate
  }
  // Far past what any drive holds (an absurdly slow rate, the whole of 64 bits done): the wait
  // saturates rather than wraps.
  JobPace::Limits slow;
  slow.fixed_max = 1;
  JobPace crawl(std::move(slow), 0, clock.timer());
  const JobPace::Step far = crawl.next(~std::uint64_t{0});
  EXPECT_TRUE(far.wait);
  EXPECT_GT(far.not_before, clock.now + std::chrono::hours(24 * 365 * 50));
}

TEST(JobPaceTest, AnIdleArrayLetsAYieldingJobRunAtItsMaximum) {
  FakeClock clock;
  bool busy = false;
  JobPace::Limits limits;
  limits.speed = [] { return JobSpeed{10'000'000, 0, true}; };  // min 10 MB/s, no maximum
  limits.busy = [&] { return busy; };
  JobPace pace(std::move(limits), 0, clock.timer());
  clock.work(1ms);
  const JobPace::Step idle = pace.next(100'000'000);  // 100 MB in 1 ms: no maximum, no wait
  EXPECT_FALSE(idle.busy);
  EXPECT_FALSE(idle.wait);
  EXPECT_EQ(pace.rate(), 0u);
}

TEST(JobPaceTest, WhileBusyAYieldingJobKeepsToItsMinimumCountedFromTheChange) {
  FakeClock clock;
  bool busy = false;
  JobPace::Limits limits;
  limits.speed = [] { return JobSpeed{10'000'000, 200'000'000, true}; };
  limits.busy = [&] { return busy; };
  JobPace pace(std::move(limits), 0, clock.timer());
  clock.work(10ms);
  pace.after(2'000'000);  // idle: 2 MB at 200 MB/s is due at 10 ms
  EXPECT_TRUE(clock.slept.empty());
  busy = true;
  JobPace::Step step = pace.next(2'000'000);  // the busy rate counts from here
  EXPECT_TRUE(step.busy);
  EXPECT_FALSE(step.wait);
  EXPECT_EQ(pace.rate(), 10'000'000u);
  clock.work(1ms);
  step = pace.next(3'000'000);  // 1 MB more at 10 MB/s is due 100 ms after the change
  EXPECT_TRUE(step.wait);
  EXPECT_EQ(step.not_before - clock.now, 99ms);
  pace.sleep_until(step.not_before);
  EXPECT_EQ(clock.total(), 99ms);
  // Idle again: the maximum applies at once, from here.
  busy = false;
  step = pace.next(3'000'000);
  EXPECT_FALSE(step.busy);
  EXPECT_FALSE(step.wait);
  EXPECT_EQ(pace.rate(), 200'000'000u);
}

// Applications' I/O that comes and goes between a job's windows flips its mode at every step: each
// window is still paid for at the rate it was issued under (the change used to restart the count
// from the change, forgiving the window before it, so such a job ran unpaced).
TEST(JobPaceTest, AModeFlippingAtEveryStepForgivesNothing) {
  FakeClock clock;
  bool busy = false;
  JobPace::Limits limits;
  limits.speed = [] { return JobSpeed{10'000'000, 100'000'000, true}; };
  limits.busy = [&] { return busy; };
  JobPace pace(std::move(limits), 0, clock.timer());
  std::uint64_t done = 0;
  for (int i = 0; i < 100; ++i) {
    busy = (i % 2) == 1;
    pace.after(done);   // may this window go?
    done += 1'000'000;  // then it does 1 MB
  }
  // 50 windows at 100 MB/s and 50 at 10 MB/s: 5.5 s, less the last one, not yet paid for.
  EXPECT_GE(clock.now - Clock::time_point{}, 5'400ms);
  EXPECT_LE(clock.now - Clock::time_point{}, 5'500ms);
}

// The window pipeline asks again at the same position while it waits (for the pace or for a
// window in flight), and the array's activity may come and go meanwhile: a mode that flips and
// flips back at one position keeps what is owed. (It was forgiven: graidd re-synced 32 MiB per
// member in 0.1 s under --speed-limit-max 10.)
TEST(JobPaceTest, AModeThatFlipsBackAtOnePositionForgivesNothing) {
  FakeClock clock;
  bool busy = false;
  JobPace::Limits limits;
  limits.speed = [] { return JobSpeed{10'000'000, 10'000'000, true}; };
  limits.busy = [&] { return busy; };
  JobPace pace(std::move(limits), 0, clock.timer());
  EXPECT_FALSE(pace.next(0).wait);
  const auto due = Clock::time_point{} + 400ms;  // 4 MB at 10 MB/s
  EXPECT_EQ(pace.next(4'000'000).not_before, due);
  for (int i = 0; i < 6; ++i) {
    busy = !busy;
    clock.work(1ms);
    const JobPace::Step step = pace.next(4'000'000);
    EXPECT_TRUE(step.wait) << "flip " << i;
    EXPECT_EQ(step.not_before, due) << "flip " << i;
  }
}

TEST(JobPaceTest, AJobThatDoesNotYieldIgnoresTheApplications) {
  FakeClock clock;
  JobPace::Limits limits;
  limits.speed = [] { return background_speed(BackgroundSpeed::kExtreme); };
  limits.busy = [] { return true; };
  JobPace pace(std::move(limits), 0, clock.timer());
  clock.work(1ms);
  const JobPace::Step step = pace.next(1'000'000'000);
  EXPECT_FALSE(step.busy);
  EXPECT_FALSE(step.wait);
}

TEST(JobPaceTest, TheSpeedIsAskedAgainAtEveryStep) {
  FakeClock clock;
  std::uint64_t max = 100'000'000;
  JobPace::Limits limits;
  limits.speed = [&] { return JobSpeed{0, max, false}; };
  JobPace pace(std::move(limits), 0, clock.timer());
  pace.after(1'000'000);  // 10 ms at 100 MB/s
  EXPECT_EQ(clock.total(), 10ms);
  max = 10'000'000;       // slower from here: counted from the change
  pace.after(1'000'000);  // no bytes since the change
  EXPECT_EQ(clock.total(), 10ms);
  pace.after(2'000'000);  // 1 MB at 10 MB/s
  EXPECT_EQ(clock.total(), 110ms);
}

// A job resumed from a checkpoint passes that position as `done`: the rate counts from there.
TEST(JobPaceTest, AResumedJobIsPacedFromWhereItResumed) {
  FakeClock clock;
  JobPace::Limits limits;
  limits.fixed_max = 32'000'000;  // 32 MB/s
  constexpr std::uint64_t kResumedAt = 64u << 20;
  JobPace pace(std::move(limits), kResumedAt, clock.timer());
  clock.work(1ms);
  pace.after(kResumedAt + 3'200'000);  // 3.2 MB past the resume point: due at 100 ms
  EXPECT_EQ(clock.total(), 99ms);
}

// A long sleep is cut into slices and ends once the stop flag is set: the job's thread is then
// joined within a slice, whatever the limit asked.
TEST(JobPaceTest, ASleepEndsWithinASliceOfTheStopFlag) {
  FakeClock clock;
  std::atomic<bool> stop{false};
  JobPace::Limits limits;
  limits.fixed_max = 1'000'000;  // 1 MB/s
  limits.stop = &stop;
  JobPace::Timer timer = clock.timer();
  timer.sleep_until = [&](Clock::time_point until) {
    clock.slept.push_back(until - clock.now);
    clock.now = until;
    if (clock.slept.size() == 3) stop = true;  // set during the third slice
  };
  JobPace pace(std::move(limits), 0, timer);
  pace.after(10'000'000);  // 10 s due
  ASSERT_EQ(clock.slept.size(), 3u) << "no slice after the stop";
  for (const auto d : clock.slept)
    EXPECT_LE(d, JobPace::kStopCheck);
  // Without a stop flag the whole sleep runs, in slices.
  FakeClock plain;
  JobPace::Limits capped;
  capped.fixed_max = 1'000'000;
  JobPace full(std::move(capped), 0, plain.timer());
  full.after(1'000'000);  // 1 s due
  EXPECT_EQ(plain.total(), 1s);
}

TEST(JobPaceTest, SpeedSettingsAreMdStyleMinimaAndMaxima) {
  EXPECT_EQ(background_speed(BackgroundSpeed::kLow), (JobSpeed{10'000'000, 200'000'000, true}));
  EXPECT_EQ(background_speed(BackgroundSpeed::kNormal), (JobSpeed{50'000'000, 0, true}));
  EXPECT_EQ(background_speed(BackgroundSpeed::kHigh), (JobSpeed{200'000'000, 0, true}));
  EXPECT_EQ(background_speed(BackgroundSpeed::kExtreme), (JobSpeed{0, 0, false}));
}

}  // namespace
}  // namespace graid
