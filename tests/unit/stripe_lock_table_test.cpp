// StripeRangeLock: a background job's blocking window lock over the StripeLockTable that stripe
// operations use. Mutual exclusion with per-stripe holders (both ways), FIFO hand-off between
// I/O waiters and jobs, and no deadlock between jobs with overlapping windows and single-stripe
// I/O holders (a deadlock hangs the test until ctest's timeout).
#include "stripe/stripe_lock_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "stripe/stripe_range_lock.h"

namespace graid {
namespace {

using namespace std::chrono_literals;

// A grant that records that it ran (and optionally appends a name to a shared log).
struct Grant final : Task {
  std::atomic<bool> ran{false};
  std::mutex* log_mutex = nullptr;
  std::vector<std::string>* log = nullptr;
  std::string name;
  void run() override {
    if (log != nullptr) {
      std::lock_guard lock(*log_mutex);
      log->push_back(name);
    }
    ran = true;
  }
};

// An I/O-side waiter for `stripe` whose grant runs on `ctx`.
StripeLockTable::Waiter io_waiter(std::uint64_t stripe, IoContext& ctx, Grant& grant) {
  StripeLockTable::Waiter w;
  w.stripe = stripe;
  w.home = &ctx;
  w.grant = &grant;
  return w;
}

// Polls `ctx` until `done` (or 5 s pass).
template <typename Pred>
bool poll_until(IoContext& ctx, Pred done) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!done() && std::chrono::steady_clock::now() < deadline)
    ctx.poll(false);
  return done();
}

template <typename Pred>
bool wait_until(Pred done) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!done() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  return done();
}

TEST(StripeRangeLock, WaitsForAStripeHolderAndThenExcludesStripeWaiters) {
  StripeLockTable table;
  auto ctx = std::move(*IoContext::create(8));
  Grant io_grant;
  StripeLockTable::Waiter io = io_waiter(5, *ctx, io_grant);
  ASSERT_TRUE(table.acquire(io));

  std::atomic<bool> locked{false};
  std::binary_semaphore let_go{0};
  std::thread job([&] {
    StripeRangeLock range(table);
    range.lock(0, 10);
    locked = true;
    let_go.acquire();
    // unlocked by the destructor
  });
  // The job takes 0..4 and waits for 5, held by the I/O side.
  ASSERT_TRUE(wait_until([&] { return table.held_count() == 6; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(locked.load());
  table.release(io, *ctx);  // handed to the job, whose grant wakes it
  ASSERT_TRUE(wait_until([&] { return locked.load(); }));
  EXPECT_EQ(table.held_count(), 10u);

  // Now an I/O waiter on a stripe of the window queues behind the job...
  Grant io2_grant;
  StripeLockTable::Waiter io2 = io_waiter(3, *ctx, io2_grant);
  EXPECT_FALSE(table.acquire(io2));
  ctx->poll(false);
  EXPECT_FALSE(io2_grant.ran.load());
  // ... and is granted, on its own thread, when the job lets go.
  let_go.release();
  job.join();
  ASSERT_TRUE(poll_until(*ctx, [&] { return io2_grant.ran.load(); }));
  EXPECT_EQ(table.held_count(), 1u);
  table.release(io2, *ctx);
  EXPECT_EQ(table.held_count(), 0u);
}

// transfer() moves a held stripe, with its waiters, to another waiter: the waiters are granted
// by the new holder's release, in their order, and nobody gets the stripe in between.
TEST(StripeLockTable, TransferKeepsTheStripeAndItsWaiters) {
  StripeLockTable table;
  auto ctx = std::move(*IoContext::create(8));
  Grant g_run, g_one, g_w1, g_w2;
  StripeLockTable::Waiter run = io_waiter(7, *ctx, g_run);
  StripeLockTable::Waiter other = io_waiter(8, *ctx, g_run);  // another stripe held
  ASSERT_TRUE(table.acquire(run));
  ASSERT_TRUE(table.acquire(other));
  StripeLockTable::Waiter w1 = io_waiter(7, *ctx, g_w1);
  StripeLockTable::Waiter w2 = io_waiter(7, *ctx, g_w2);
  EXPECT_FALSE(table.acquire(w1));
  EXPECT_FALSE(table.acquire(w2));

  StripeLockTable::Waiter one = io_waiter(0, *ctx, g_one);  // stripe set by transfer()
  table.transfer(run, one);
  EXPECT_EQ(one.stripe, 7u);
  EXPECT_EQ(table.held_count(), 2u);
  StripeLockTable::Waiter late = io_waiter(7, *ctx, g_one);
  EXPECT_FALSE(table.acquire(late)) << "still held, by the new holder";

  table.release(one, *ctx);
  ASSERT_TRUE(poll_until(*ctx, [&] { return g_w1.ran.load(); }));
  EXPECT_FALSE(g_w2.ran.load());
  table.release(w1, *ctx);
  ASSERT_TRUE(poll_until(*ctx, [&] { return g_w2.ran.load(); }));
  table.release(w2, *ctx);
  ASSERT_TRUE(poll_until(*ctx, [&] { return g_one.ran.load(); }));
  table.release(late, *ctx);
  table.release(other, *ctx);
  EXPECT_EQ(table.held_count(), 0u);
}

TEST(StripeRangeLock, HandsOverInArrivalOrder) {
  StripeLockTable table;
  auto ctx = std::move(*IoContext::create(8));
  std::mutex log_mutex;
  std::vector<std::string> log;
  StripeRangeLock a(table);
  a.lock(0, 4);

  Grant g1, g2;
  for (auto [g, name] : {std::pair{&g1, "io1"}, std::pair{&g2, "io2"}}) {
    g->log_mutex = &log_mutex;
    g->log = &log;
    g->name = name;
  }
  StripeLockTable::Waiter w1 = io_waiter(2, *ctx, g1);
  StripeLockTable::Waiter w2 = io_waiter(2, *ctx, g2);
  EXPECT_FALSE(table.acquire(w1));  // first in line
  std::atomic<bool> b_locked{false};
  std::thread job_b([&] {
    StripeRangeLock b(table);
    b.lock(2, 1);  // second in line
    {
      std::lock_guard lock(log_mutex);
      log.push_back("job");
    }
    b_locked = true;
  });
  std::this_thread::sleep_for(100ms);  // let job B queue before io2
  EXPECT_FALSE(table.acquire(w2));     // third in line

  a.unlock();  // stripe 2 goes to io1, not to the job that could grab it first
  ASSERT_TRUE(poll_until(*ctx, [&] { return g1.ran.load(); }));
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(b_locked.load());
  table.release(w1, *ctx);  // to job B (inline wake-up), which takes it and lets go: to io2
  job_b.join();
  ASSERT_TRUE(poll_until(*ctx, [&] { return g2.ran.load(); }));
  table.release(w2, *ctx);
  EXPECT_EQ(log, (std::vector<std::string>{"io1", "job", "io2"}));
  EXPECT_EQ(table.held_count(), 0u);
}

TEST(StripeRangeLock, OverlappingJobsAndStripeHoldersNeverDeadlockOrShare) {
  constexpr std::uint64_t kStripes = 40;
  StripeLockTable table;
  std::vector<std::atomic<int>> owner(kStripes);
  std::atomic<std::uint64_t> violations{0};
  auto claim = [&](std::uint64_t s, int who) {
    int expected = 0;
    if (!owner[s].compare_exchange_strong(expected, who)) ++violations;
  };
  auto unclaim = [&](std::uint64_t s) { owner[s].store(0); };

  auto job = [&](int who, std::uint64_t seed) {
    StripeRangeLock range(table);
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 300; ++i) {
      const std::uint64_t first = rng() % 24;
      const std::uint64_t count = 1 + rng() % 16;
      range.lock(first, count);
      for (std::uint64_t s = first; s < first + count; ++s)
        claim(s, who);
      std::this_thread::yield();
      for (std::uint64_t s = first; s < first + count; ++s)
        unclaim(s);
      range.unlock();
    }
  };
  auto io_thread = [&](int who, std::uint64_t seed) {
    auto ctx = std::move(*IoContext::create(8));
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 2000; ++i) {
      Grant g;
      StripeLockTable::Waiter w = io_waiter(rng() % kStripes, *ctx, g);
      if (!table.acquire(w)) {
        while (!g.ran.load())
          ctx->poll(true);
      }
      claim(w.stripe, who);
      unclaim(w.stripe);
      table.release(w, *ctx);
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(job, 1, 11);
  threads.emplace_back(job, 2, 22);
  threads.emplace_back(job, 3, 33);
  threads.emplace_back(io_thread, 4, 44);
  threads.emplace_back(io_thread, 5, 55);
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(violations.load(), 0u);
  EXPECT_EQ(table.held_count(), 0u);
}

}  // namespace
}  // namespace graid
