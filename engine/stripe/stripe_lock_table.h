// Stripe locks: at most one write (or degraded read) works on a stripe at a time.
//
// md RAID5 serialises stripe handling behind one device_lock and one raid5d thread, which is why
// it does not scale on NVMe. Here the table is split into partitions by a hash of the stripe
// number; each partition has its own small mutex, held only to link or unlink a waiter (never
// across I/O). Nothing allocates: the waiter object is embedded in the stripe operation.
//
// Acquiring never blocks the thread. A caller that finds the stripe held is queued (FIFO) behind
// the holder; release() hands the lock straight to the first waiter, then runs the waiter's grant
// task on the waiter's own thread (IoContext::defer when that is the releasing thread,
// IoContext::post otherwise). Ownership moves with the hand-off, so no one can barge in between.
// A waiter with no home (a background job's thread, which has no IoContext) has its grant run by
// the releasing thread itself, inline: such grants only wake a blocked thread (StripeRangeLock).
#pragma once

#include <array>
#include <cstdint>

#include "graid/member.h"
#include "graid/thread_annotations.h"

namespace graid {

class StripeLockTable {
 public:
  // Embedded in whatever wants a stripe lock. While held, it is linked in its partition's chain
  // of holders; while waiting, it is linked in its holder's FIFO.
  class Waiter {
   public:
    std::uint64_t stripe = 0;
    // The thread the grant must run on; nullptr: run it inline on the releasing thread (it must
    // be short and never block: set a flag and notify, as StripeRangeLock does).
    IoContext* home = nullptr;
    Task* grant = nullptr;  // run on `home` when the lock is handed over after waiting

   private:
    friend class StripeLockTable;
    Waiter* next_holder_ = nullptr;   // chain of holders in a partition
    Waiter* first_waiter_ = nullptr;  // FIFO of waiters (valid while holding)
    Waiter* last_waiter_ = nullptr;
    Waiter* next_waiter_ = nullptr;
  };

  StripeLockTable() = default;
  StripeLockTable(const StripeLockTable&) = delete;
  StripeLockTable& operator=(const StripeLockTable&) = delete;

  // Takes the lock for `w.stripe` and returns true, or queues `w` and returns false; `w.grant`
  // then runs on `w.home` once the lock is `w`'s.
  bool acquire(Waiter& w);

  // Releases the lock `w` holds, handing it to the first waiter if any. `current` is the calling
  // thread's context (to tell a local grant from a cross-thread one).
  // REQUIRES: `w` holds its stripe's lock.
  void release(Waiter& w, IoContext& current);
  // The same from a thread with no IoContext (a background job): grants are posted.
  void release(Waiter& w);

  // Hands the lock `from` holds, with its FIFO of waiters, to `to` (which holds and waits for
  // nothing), without letting anyone in between: a run of stripes that falls back to one
  // operation per stripe gives each its stripe (queue/stripe_op.h). `to.home` and `to.grant`
  // stay as the caller set them. REQUIRES: `from` holds its stripe's lock.
  void transfer(Waiter& from, Waiter& to);

  // Number of stripes held right now (for tests and stats; takes every partition's mutex).
  std::size_t held_count();

 private:
  // Enough that a partition's chain of holders stays about one long even with thousands of
  // stripes held (a queue depth of large sequential writes on small strips: 32 requests of 1 MiB
  // over 4 KiB strips hold 2048 stripes per thread), so acquire and release touch one or two
  // holders, not a chain of cold operations. 256 KiB per array.
  static constexpr unsigned kPartitionBits = 12;
  static constexpr std::size_t kPartitions = std::size_t{1} << kPartitionBits;
  struct alignas(64) Partition {
    Mutex mutex;
    Waiter* holders GUARDED_BY(mutex) = nullptr;
  };
  Partition& partition_of(std::uint64_t stripe) noexcept;
  void release(Waiter& w, IoContext* current);

  std::array<Partition, kPartitions> partitions_;
};

}  // namespace graid
