// Journal: the runtime side of the write-hole journal (records: meta/journal_record.h; replay:
// array/journal_replay.h). Shared by every queue of one array; internal to engine/array.
//
// While the journal is active, a RAID5/6 stripe update that writes parity first writes one
// record with the new contents of every strip it will write, FUA, to the journal area of each
// live parity member of the stripe (P, and Q for RAID6), and only then writes the strips in
// place. After a crash, assembly replays the records, so a stripe is either as it was or wholly
// updated, and the strips the update did not touch reconstruct correctly even when a member is
// lost too. Records live on the parity members because losing a parity member leaves no parity
// to be inconsistent. Full-stripe writes are journalled as well (while active) although they
// need no record for themselves: an older record of the same stripe could still be in its ring
// and would otherwise be replayed over them; for the same reason whole-stripe discards become
// written (and journalled) zeroes while the journal is active.
//
// Each member's journal area is a ring. A record is reserved in the rings of all its members at
// once (a RAID6 update never holds one ring's space while waiting for another's), written, and
// retired once its home writes completed. Retired space is reused only after a flush of every
// member issued after the retirement has completed, so a record is overwritten only when its home
// writes are durable. An update that finds no space waits (its retry task is posted when space
// may be free); the first one to find retired but unflushed space is told to flush.
//
// Turning off while the array runs (State::turn_journal_off_if_unwanted): new updates that would
// journal are parked (enter() answers kWait) while those that entered finish; once none is left
// between enter() and leave() the epoch moves in the superblocks, so no record now in a ring is
// ever replayed over what is written unjournalled from then on; then the journal is off and the
// parked updates go on without records. A failure meanwhile (activate()) turns it on again right
// after, with the new epoch, before any parked update goes on.
//
// Ordering: the same stripe always goes to the same rings (its parity members), and updates of
// one stripe are serialised by the stripe lock, so within a ring a stripe's records are in seq
// order and a record is overwritten only after every older record of the same stripe in that
// ring. Replay applies records in seq order.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <span>
#include <utility>
#include <vector>

#include "graid/member.h"
#include "graid/thread_annotations.h"

namespace graid {

class Journal {
 public:
  // Journal rings of `members` roles in member bytes [area_offset, +area_bytes).
  Journal(std::uint32_t members, std::uint64_t area_offset, std::uint64_t area_bytes,
          const std::array<std::byte, 16>& array_uuid, std::uint64_t epoch);
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  std::uint64_t area_offset() const noexcept { return area_offset_; }
  std::uint64_t area_bytes() const noexcept { return area_bytes_; }
  const std::array<std::byte, 16>& array_uuid() const noexcept { return uuid_; }
  std::uint64_t epoch() const noexcept { return epoch_.load(std::memory_order_acquire); }

  // Whether updates are journalled now (on, or turning off: updates then wait in enter()).
  // Turned on at assembly, when the policy says so, or when the array degrades under the
  // degraded-only policy.
  // Sequentially consistent: an update's count-in (StripeOp::count_bare) and this read pair with
  // activate()'s store and the count read after it (Array::State::activate_journal).
  bool active() const noexcept { return state_.load(std::memory_order_seq_cst) != kOff; }
  // True when this turned it on from off (updates that decided on no record may still be in
  // flight: Array::State::activate_journal); false when it was on or is turning off (it comes
  // back on once the turn-off ends).
  bool activate() EXCLUDES(mutex_);

  // An update that wants a record asks enter(): kJournal (write one; call leave() once the
  // update is done with it, written or abandoned), kNone (the journal is off: none), or kWait
  // (turning off: `retry` is posted to `home` once the turn-off ends either way; ask again).
  enum class Enter : std::uint8_t { kJournal, kNone, kWait };
  Enter enter(IoContext& home, Task& retry) EXCLUDES(mutex_);
  void leave() EXCLUDES(mutex_);

  // Turning off (see above). begin_turn_off() is false unless the journal was on. drained(): no
  // update between enter() and leave(). finish_turn_off() records the epoch the superblocks now
  // carry; cancel_turn_off() leaves it on.
  bool begin_turn_off() EXCLUDES(mutex_);
  bool drained() EXCLUDES(mutex_);
  void finish_turn_off(std::uint64_t new_epoch) EXCLUDES(mutex_);
  void cancel_turn_off() EXCLUDES(mutex_);

  std::uint64_t next_seq() noexcept { return seq_.fetch_add(1, std::memory_order_relaxed); }

  struct Slot {
    std::uint32_t member = 0;
    std::uint64_t logical = 0;  // position in the ring's endless byte stream
    std::uint64_t bytes = 0;
  };
  struct Reservation {
    std::array<Slot, 2> slots{};
    std::uint32_t count = 0;
  };
  // Member byte offset of a slot.
  std::uint64_t device_offset(const Slot& s) const noexcept {
    return area_offset_ + s.logical % area_bytes_;
  }

  enum class Reserve : std::uint8_t {
    kOk,         // `out` holds a slot in each ring
    kWait,       // queued: `retry` is posted to `home` when space may be free
    kWaitFlush,  // queued, and the caller must flush every member, then end_flush(*ticket)
    kTooLarge,   // the record can never fit in a ring
  };
  Reserve reserve(std::span<const std::uint32_t> members, std::uint64_t bytes, Reservation& out,
                  IoContext& home, Task& retry, std::uint64_t* ticket) EXCLUDES(mutex_);
  // The record's home writes are done (or it was abandoned): its space becomes reusable after
  // the next completed flush.
  void retire(const Reservation& r) EXCLUDES(mutex_);
  // A flush of every member that began after begin_flush() returned `ticket` has completed
  // (failed members are failed, so they no longer matter). Wakes waiting updates.
  void end_flush(std::uint64_t ticket) EXCLUDES(mutex_);

  // For tests: records in a ring not yet reusable.
  std::size_t outstanding(std::uint32_t member) EXCLUDES(mutex_);

 private:
  struct Record {
    std::uint64_t pos = 0, end = 0;
    bool retired = false;
    std::uint64_t retire_ticket = 0;
  };
  struct Ring {
    std::uint64_t head = 0;
    std::deque<Record> records;
  };
  // Drops reusable records from the front of `ring`; returns where its used space begins.
  std::uint64_t reclaim(Ring& ring) REQUIRES(mutex_);
  bool fits(Ring& ring, std::uint64_t bytes) REQUIRES(mutex_);
  bool needs_flush(const Ring& ring) const REQUIRES(mutex_);
  void wake() EXCLUDES(mutex_);

  const std::uint64_t area_offset_;
  const std::uint64_t area_bytes_;
  const std::array<std::byte, 16> uuid_;
  static constexpr std::uint8_t kOff = 0, kOn = 1, kTurningOff = 2;
  std::atomic<std::uint64_t> epoch_;
  std::atomic<std::uint8_t> state_{kOff};       // written under mutex_
  bool reactivate_ GUARDED_BY(mutex_) = false;  // activate() while turning off
  std::uint64_t held_ GUARDED_BY(mutex_) = 0;   // updates between enter() and leave()
  std::atomic<std::uint64_t> seq_{1};

  Mutex mutex_;
  std::vector<Ring> rings_ GUARDED_BY(mutex_);
  std::uint64_t flush_issued_ GUARDED_BY(mutex_) = 0;
  std::uint64_t flush_done_ GUARDED_BY(mutex_) = 0;
  std::vector<std::pair<IoContext*, Task*>> waiters_ GUARDED_BY(mutex_);
};

}  // namespace graid
