// A blocking lock on a window of stripes, for background jobs (consistency check, and later
// rebuild and resync) that run on a thread of their own, with no IoContext to receive grants.
//
// It takes the stripes of the window one by one, in ascending order, through the same
// StripeLockTable the I/O path uses, so it excludes stripe operations exactly as they exclude
// each other, and queues FIFO with them (no barging either way). While it waits for a stripe the
// job thread sleeps on a condition variable; the releasing thread (an I/O thread or another job)
// hands the stripe over and wakes it (Waiter::home == nullptr).
//
// No deadlock: a stripe operation holds one stripe and waits for nothing held by anyone else
// while holding it, and every range lock takes its stripes in ascending order, so the waits-for
// graph has no cycle; two jobs with overlapping windows queue behind each other on the lowest
// stripe they share. Holding a window stalls the I/O that needs those stripes (queued, their
// threads go on serving other requests), so windows should be small and held briefly.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <vector>

#include "graid/thread_annotations.h"
#include "stripe/stripe_lock_table.h"

namespace graid {

class StripeRangeLock {
 public:
  explicit StripeRangeLock(StripeLockTable& table) : table_(table) {}
  ~StripeRangeLock() { unlock(); }
  StripeRangeLock(const StripeRangeLock&) = delete;
  StripeRangeLock& operator=(const StripeRangeLock&) = delete;

  // Blocks until this lock holds every stripe in [first, first + count), taken in ascending
  // order. Releases the window held before, if any. count 0 holds nothing.
  void lock(std::uint64_t first, std::uint64_t count) EXCLUDES(mutex_);
  // Releases every stripe held (handing each to its first waiter). Nothing held: no-op.
  void unlock();

  // The window held: [first(), first() + count()).
  std::uint64_t first() const noexcept { return first_; }
  std::uint64_t count() const noexcept { return held_; }

 private:
  // One stripe's waiter. Its grant runs on the releasing thread and only wakes ours.
  struct Slot final : Task {
    StripeRangeLock* owner = nullptr;
    StripeLockTable::Waiter waiter;
    bool granted GUARDED_BY(owner->mutex_) = false;
    void run() override EXCLUDES(owner->mutex_);
  };

  StripeLockTable& table_;
  std::vector<std::unique_ptr<Slot>> slots_;  // grown to the largest window; reused
  std::uint64_t first_ = 0;
  std::uint64_t held_ = 0;
  Mutex mutex_;
  std::condition_variable granted_cv_;
};

}  // namespace graid
