// Array::State: what every thread of an array shares. Internal to engine/array and
// engine/stripe; not a public header.
//
// Hot-path fields (geometry, members, member health, lock table, bitmap) are read by I/O threads
// without a lock: geometry and the member vector never change after assembly, health is atomic,
// the lock table and bitmap synchronise themselves. Control-path changes (member failure,
// superblock updates, stop) take `control_mutex`.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graid/array.h"
#include "graid/thread_annotations.h"
#include "journal/journal.h"
#include "meta/superblock.h"
#include "meta/write_intent_bitmap.h"
#include "state/event_notifier.h"
#include "state/member_errors.h"
#include "state/member_table.h"
#include "state/queue_registry.h"
#include "stripe/stripe_lock_table.h"

namespace graid {

struct Array::State {
  Geometry geometry;
  ParityBackend* parity = nullptr;
  AsyncParity* async_parity = nullptr;         // optional: batches complete later (GPU)
  AsyncParity* job_parity = nullptr;           // the jobs' (ArrayOptions::job_parity), or null
  HostMemoryRegistry* host_memory = nullptr;   // optional: told about staging slabs
  std::uint64_t data_offset = 0;               // member byte where the data area starts
  std::uint64_t data_size = 0;                 // member data bytes in use (whole stripes)
  std::uint64_t capacity = 0;                  // array data bytes
  InitMethod init_method = InitMethod::kNone;  // what create() did to initialise
  // The largest logical block size of the members: requests must be multiples of it.
  std::uint32_t logical_block = 512;
  // Cleared the first time a member refuses a discard (error class kUnsupported); from then on
  // the array writes zeroes instead and no longer advertises discard.
  std::atomic<bool> discard_supported{true};
  std::atomic<bool> write_zeroes_supported{true};  // the same for kWriteZeroes (no unmap)

  // The capability flag of a zeroing member op (kDiscard or kWriteZeroes).
  std::atomic<bool>& zeroing_supported(MemberOp op) noexcept {
    return op == MemberOp::kWriteZeroes ? write_zeroes_supported : discard_supported;
  }
  // Clears it after a member refused `op` (logged once per array and kind).
  void zeroing_refused(MemberOp op, std::uint32_t member, std::int32_t result);
  std::optional<ReadErrorCounts> read_errors;  // corrected read errors per member

  // Indexed by member slot; null where assembly found no device for the slot. Shared so that a
  // metadata write stuck in a hung member keeps its device alive after the array is gone (see
  // meta/metadata_io.h). A failed role may get a new device (a spare, a replacement) while I/O
  // runs: see member_table.h.
  MemberTable members;
  // Hot spares by spare slot (member slot - members.size()); null where assembly found none.
  // Not used for I/O; written only by superblock updates.
  std::vector<std::shared_ptr<MemberDevice>> spares GUARDED_BY(control_mutex);
  // 1 = failed. Read on every I/O; written under control_mutex.
  std::unique_ptr<std::atomic<std::uint8_t>[]> failed;
  std::atomic<std::uint32_t> failed_count{0};
  // A rebuild (engine/array/rebuild.h): a failed role with a new device that holds valid data
  // in stripes below rebuilt[m]. Such a member stays failed (health, failed_count, failed_mask)
  // until the rebuild ends, but every plan for a stripe below rebuilt[m] reads and writes it
  // (dead_at). rebuilt[m] only grows while rebuilding[m] is set, and only while the rebuild
  // holds the stripe locks of the stripes it moves past; both are written under control_mutex
  // or by the rebuild, read on every I/O.
  std::unique_ptr<std::atomic<std::uint8_t>[]> rebuilding;
  std::unique_ptr<std::atomic<std::uint64_t>[]> rebuilt;
  // A re-added member (readd_failed) lacks only what the write-intent bitmap marks in the
  // stripes below readd_bitmap_below[m] (0: none; it is rebuilt in full above rebuilt[m]).
  // Sound because no bit is cleared while a member is failed or rebuilding (begin_bitmap_clear,
  // stop), and readd_failed() takes a device only up to where its own superblock says it was in
  // sync, and only when no bit was cleared since it last was (events_at_bitmap_clear): every
  // write it missed since then, and every later write planned around it, has its bit set before
  // its member writes go out.
  std::unique_ptr<std::atomic<std::uint64_t>[]> readd_bitmap_below;
  // sb.events as last written (mirrored for threads that must not take control_mutex), and the
  // re-add baseline: its value when write-intent bits were last cleared, as the bitmap header
  // records it (meta::BitmapHeader::events_cleared, raised on disk before any bit it allows to
  // clear); where no header records it (an older build's), sb.events at assembly. A device whose
  // own superblock is older may have missed a write whose bit is gone.
  std::atomic<std::uint64_t> sb_events{0};
  std::atomic<std::uint64_t> events_at_bitmap_clear{0};
  // After a clear: the baseline the bitmap now records.
  void note_bitmap_cleared() noexcept {
    const std::uint64_t recorded = bitmap ? bitmap->events_cleared() : 0;
    if (recorded != 0) events_at_bitmap_clear.store(recorded, std::memory_order_release);
  }
  // A hot replace (array/hot_replace.cpp): `replacement` is becoming a copy of active role
  // replace_member (kNoReplace: none). Every member write that a stripe lock covers goes to it
  // too (hold_replacement): journal-area writes always, data writes in stripes below
  // replace_copied, which only grows, and only while the copy holds the locks of the stripes it
  // moves past; flushes of the role flush it too. Published (device, then member) and withdrawn
  // (member first, then waiting until replace_users is 0) under control_mutex.
  static constexpr std::uint32_t kNoReplace = ~0u;
  std::atomic<std::uint32_t> replace_member{kNoReplace};
  std::atomic<std::uint64_t> replace_copied{0};
  std::atomic<bool> replace_broken{false};  // a write or flush to the replacement failed
  std::atomic<MemberDevice*> replacement{nullptr};
  std::atomic<std::uint32_t> replace_users{0};  // I/Os holding `replacement` (hold_replacement)
  // Serialises starting, swapping in and giving up a replace (taken before control_mutex; never
  // by I/O threads, so it may be held while waiting for replace_users to drain).
  Mutex replace_mutex;
  // The replacement's device and member UUID. It holds spare slot sb.replace->slot (null in
  // `spares`; superblock_targets() writes it there), and sb.replace->copied is the copy's last
  // checkpoint: the replacement was flushed holding every stripe below it.
  std::shared_ptr<MemberDevice> replacement_owner GUARDED_BY(control_mutex);
  meta::Uuid replacement_uuid GUARDED_BY(control_mutex){};
  // Requests the array's attached queues have taken so far, and how many are in flight now.
  std::pair<std::uint64_t, std::uint64_t> foreground_activity() const;

  // Flushes the replacement and records replace_copied in sb.replace (a superblock update), so
  // a later assembly resumes the copy there. Ok when no replace is pending.
  Status record_replace_checkpoint() EXCLUDES(control_mutex);

  // The replacement a write to `member` at device byte `device_offset` (in `stripe`) must also
  // go to, held until release_replacement(); null (nothing held) when none applies. Call it
  // *before* loading members[member], and drop it (release) when it is that device: the swap
  // puts the replacement into the role before withdrawing it, so one of the two loads sees it.
  MemberDevice* hold_replacement(std::uint32_t member, std::uint64_t stripe,
                                 std::uint64_t device_offset) noexcept {
    if (replace_member.load(std::memory_order_relaxed) != member) return nullptr;
    replace_users.fetch_add(1, std::memory_order_seq_cst);
    if (replace_member.load(std::memory_order_seq_cst) == member &&
        !replace_broken.load(std::memory_order_acquire) &&
        (device_offset < data_offset || stripe < replace_copied.load(std::memory_order_acquire))) {
      if (MemberDevice* dev = replacement.load(std::memory_order_acquire)) return dev;
    }
    release_replacement();
    return nullptr;
  }
  void release_replacement() noexcept { replace_users.fetch_sub(1, std::memory_order_release); }
  // A write or flush to the replacement failed: the replace is given up (the copy notices).
  void replacement_failed(std::string_view what, std::int32_t result) noexcept;

  // A consistency check running now: the stripe it has got to, or kNoCheck.
  static constexpr std::uint64_t kNoCheck = ~std::uint64_t{0};
  std::atomic<std::uint64_t> check_at{kNoCheck};
  std::atomic<bool> check_running{false};  // one check at a time
  // Background initialisation: stripes below init_done are initialised (kAllInitialised: every
  // stripe, nothing pending). Moves only while Array::initialise() holds the locks of the
  // stripes it moves past, so a plan holding a stripe's lock sees it stable. A stripe not yet
  // initialised is never written by read-modify-write (its old parity means nothing).
  static constexpr std::uint64_t kAllInitialised = ~std::uint64_t{0};
  std::atomic<std::uint64_t> init_done{kAllInitialised};
  std::atomic<bool> init_running{false};  // one initialisation at a time
  // Background re-sync after an unclean stop (Array::resync, background_resync.cpp): the stripes
  // the write-intent bitmap marked at assembly, as [first, last) ranges ascending (set before the
  // state is shared, never changed after), and the stripe the re-sync has got to: stripes below
  // resync_done are done (kAllInitialised: none pending). resync_done moves only while
  // Array::resync() holds the locks of the stripes it moves past, as init_done. A stripe pending
  // counts as not initialised: no read-modify-write trusts its parity, and mirror reads take the
  // copy the re-sync copies from, so a read never sees a copy the re-sync then overwrites.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> resync_ranges;
  std::atomic<std::uint64_t> resync_done{kAllInitialised};
  std::atomic<bool> resync_running{false};  // one re-sync at a time
  bool resync_pending(std::uint64_t stripe) const noexcept {
    const std::uint64_t done = resync_done.load(std::memory_order_acquire);
    if (done == kAllInitialised || stripe < done) return false;
    auto after = std::upper_bound(
        resync_ranges.begin(), resync_ranges.end(), stripe,
        [](std::uint64_t value, const auto& range) { return value < range.first; });
    return after != resync_ranges.begin() && stripe < std::prev(after)->second;
  }

  bool initialised(std::uint64_t stripe) const noexcept {
    return stripe < init_done.load(std::memory_order_acquire) && !resync_pending(stripe);
  }

  StripeLockTable locks;
  std::optional<meta::WriteIntentBitmap> bitmap;  // none for RAID0
  // The write-hole journal (journal/journal.h): RAID5/6 arrays with a journal area; null otherwise.
  std::unique_ptr<Journal> journal;
  // The journal policy recorded now (a copy of sb.settings' for the I/O and failure paths).
  std::atomic<JournalPolicy> journal_policy{JournalPolicy::kDegradedOnly};
  // Turns the journal on when the policy asks for it with the array as it is now (always; or
  // degraded-only with a member failed or about to be, `degrading`). Never turns it off: that is
  // turn_journal_off_if_unwanted(). Turned on from off, it covers every update only once the
  // updates that went out without a record before it turned on have finished: sb.journal_covered
  // is set at once when none is in flight, else when the last of them finishes
  // (try_record_journal_coverage()); the caller's next superblock update records it.
  void activate_journal(bool degrading = false) REQUIRES(control_mutex);

  // Journal coverage (sb.journal_covered): assembly trusts the journal to make a dirty degraded
  // array whole only when the superblocks say it covered every partial-stripe update. A queue
  // counts its updates between deciding on no record (the journal off) and finishing
  // (ArrayQueue::Impl::bare_updates); coverage waits for them after the journal turns on.
  std::atomic<bool> journal_coverage_pending{false};
  // Whether the journal covers every update now: what the next superblock update records
  // (sb.journal_covered_at, stamped with its events).
  bool journal_covered GUARDED_BY(control_mutex) = false;
  // No queue has an update in flight that went out without a record.
  bool bare_updates_drained() const;
  // Records coverage (a superblock update) once it is pending and no such update is in flight.
  // Safe from any thread; cheap when nothing is pending.
  void try_record_journal_coverage() EXCLUDES(control_mutex);

  // Turns the journal off when the policy no longer asks for it (off; or degraded-only with no
  // member failed or rebuilding): parks new journalled updates, waits (up to metadata_timeout)
  // for those in flight, moves the epoch in the superblocks, then lets the parked ones go on
  // without records (Journal, "Turning off"). Blocking; control paths only, control_mutex not
  // held. kBusy (the journal stays on) when updates in flight did not finish in time.
  Status turn_journal_off_if_unwanted() EXCLUDES(control_mutex);

  mutable Mutex control_mutex;                    // mutable: const readers of sb take it too
  meta::Superblock sb GUARDED_BY(control_mutex);  // the array-wide state last written
  // sb.name, which never changes: set before the state is shared, then read without a lock
  // (log lines and errors on any thread, I/O threads included, which must not wait for the
  // control mutex while a superblock update holds it).
  std::string name;

  // Failure ordering (md's MD_SB_CHANGE_PENDING): a write planned around a failed member may be
  // acknowledged only once the superblocks recording that failure are durable, or a member that
  // was only briefly gone comes back after a power cut at the same event count, with stale
  // strips that nothing marks as stale. `failures_marked` counts failures marked in memory (it
  // moves before the member's failed flag is set), `failures_recorded` those whose superblock
  // update has finished. Writes that finish in between park here until it has.
  std::atomic<std::uint64_t> failures_marked{0};
  std::atomic<std::uint64_t> failures_recorded{0};
  Mutex parked_mutex;
  std::vector<std::pair<IoContext*, Task*>> parked GUARDED_BY(parked_mutex);

  // True when the caller may acknowledge its write now. False when every failure marked so far
  // is not yet recorded: `resume` is then posted to `ctx` once it is.
  bool failures_durable_or_park(IoContext& ctx, Task& resume) EXCLUDES(parked_mutex);
  // Publishes that failures up to `marked` are recorded and releases the writes that waited.
  // control_mutex held, so no failure is marked meanwhile.
  void publish_failures_recorded(std::uint64_t marked) REQUIRES(control_mutex)
      EXCLUDES(parked_mutex);
  // Marks `member` failed in memory. Returns false if it already was.
  bool mark_failed_locked(std::uint32_t member) REQUIRES(control_mutex);

  explicit State(Geometry g) : geometry(g) {}

  bool is_failed(std::uint32_t member) const noexcept {
    return failed[member].load(std::memory_order_acquire) != 0;
  }
  bool is_rebuilding(std::uint32_t member) const noexcept {
    return rebuilding[member].load(std::memory_order_acquire) != 0;
  }
  // Whether `member` holds nothing valid in `stripe`: failed, and not a rebuilding member that
  // has been rebuilt past it or (re-added) did not miss a write there. What every plan for one
  // stripe asks (a stripe lock held, or a read that may race only with the rebuild moving forward,
  // which makes no valid strip dead).
  bool dead_at(std::uint32_t member, std::uint64_t stripe) const noexcept {
    if (!is_failed(member)) return false;
    if (!is_rebuilding(member)) return true;
    if (stripe < rebuilt[member].load(std::memory_order_acquire)) return false;
    if (stripe >= readd_bitmap_below[member].load(std::memory_order_acquire)) return true;
    return bitmap->is_dirty(bitmap->region_of(stripe * geometry.strip_bytes()));
  }
  // Whether `member` takes writes (and so flushes): in sync, or being rebuilt.
  bool takes_writes(std::uint32_t member) const noexcept {
    return !is_failed(member) || is_rebuilding(member);
  }
  // Allocates the per-member flags for `n` roles, all clear.
  void init_member_flags(std::uint32_t n) {
    failed = std::make_unique<std::atomic<std::uint8_t>[]>(n);
    rebuilding = std::make_unique<std::atomic<std::uint8_t>[]>(n);
    rebuilt = std::make_unique<std::atomic<std::uint64_t>[]>(n);
    readd_bitmap_below = std::make_unique<std::atomic<std::uint64_t>[]>(n);
  }
  // Members failed now, bit m for member m.
  std::uint64_t failed_mask() const noexcept;
  // True when the level cannot serve every byte with the members failed now (its module's
  // survives(): RAID10 outlives failures_tolerated() when they hit different pairs).
  bool array_failed() const noexcept {
    return failed_count.load(std::memory_order_acquire) > geometry.failures_tolerated() &&
           !geometry.survives(failed_mask());
  }

  // Marks `member` failed, records it in the superblocks of the survivors (events + 1), and
  // stops writing its bitmap. Idempotent. Safe from any thread.
  // With `device`: only if the role still has that device (an I/O's error from a device a spare
  // has replaced since says nothing about the spare).
  Status fail_member(std::uint32_t member, std::string_view reason,
                     const MemberDevice* device = nullptr) EXCLUDES(control_mutex);

  // Lost array data ranges (sb.bad_ranges; array/bad_ranges.cpp) as the I/O path sees them: a
  // copy under bad_mutex, and their count, which reads test without a lock (almost always 0).
  // Changed only under control_mutex, after the superblocks record the change.
  mutable Mutex bad_mutex;
  std::vector<meta::BadRange> bad_list GUARDED_BY(bad_mutex);
  std::atomic<std::uint32_t> bad_count{0};
  // Whether array bytes [offset, +len) touch a lost range.
  bool reads_lost(std::uint64_t offset, std::uint64_t len) const EXCLUDES(bad_mutex);
  // Records `ranges` lost (merged with those recorded, a superblock update) and announces them
  // (kDataLost, naming `member` and `why`). kNoSpace, changing nothing, when the list would
  // outgrow meta::kMaxBadRanges.
  Status add_lost_ranges(std::vector<meta::BadRange> ranges, std::uint32_t member,
                         std::string_view why) EXCLUDES(control_mutex);
  // A write of array bytes [offset, +len) completed: the lost bytes it covered read again
  // (lost_ranges_after_write: ranges shrink or split; one the list has no room to split stays
  // whole, logged).
  void lost_ranges_rewritten(std::uint64_t offset, std::uint64_t len) EXCLUDES(control_mutex);
  // Makes the I/O path's copy what sb.bad_ranges says.
  void publish_bad_ranges_locked() REQUIRES(control_mutex) EXCLUDES(bad_mutex);

  // Declares a write to member data bytes [member_offset, +len) to the write-intent bitmap,
  // persisting its bit first if needed; a member that fails the bitmap update is failed and the
  // update retried on the rest. No-op without a bitmap. Pair with bitmap->end_write().
  Status bitmap_begin(std::uint64_t member_offset, std::uint64_t len);

  // Clearing write-intent bits while running (md clears them the same way): a flush that may
  // start a cycle calls begin_bitmap_clear(), which marks the regions with no write in flight
  // (at most one cycle at a time, at most one per bitmap_clear_interval); once every live
  // member has flushed, end_bitmap_clear(true) clears those not written since, on every member.
  bool begin_bitmap_clear();
  void end_bitmap_clear(bool flushed);
  std::chrono::milliseconds bitmap_clear_interval{500};
  // How long a member may take over a superblock or bitmap write + flush before it is failed.
  std::chrono::milliseconds metadata_timeout{30000};
  std::atomic<bool> bitmap_clearing{false};
  std::atomic<std::int64_t> bitmap_cleared_at_ns{0};  // steady clock

  // Writes the superblock (bumped events, per-member identity) to every live member and flushes.
  Status write_superblocks_locked() REQUIRES(control_mutex);
  // The update itself, without publishing.
  Status write_superblock_rounds_locked() REQUIRES(control_mutex);

  // Member byte offset of a data-area offset.
  std::uint64_t device_offset(std::uint64_t member_offset) const noexcept {
    return data_offset + member_offset;
  }

  ArrayHealth health() const noexcept;
  // Raises a kHealthChanged event if health() differs from what was last reported.
  void note_health_locked() REQUIRES(control_mutex);
  ArrayHealth reported_health GUARDED_BY(control_mutex) = ArrayHealth::kOptimal;
  // Raises an event with the array's current health (engine/state/event_notifier.h).
  void emit(ArrayEventKind kind, std::optional<std::uint32_t> member, std::string message,
            ArrayEventCounts counts = {});

  // Members a superblock update goes to, by slot (null: none): attached roles recorded active
  // or rebuilding (written no data yet, but still in the array), then the spares.
  std::vector<std::shared_ptr<MemberDevice>> superblock_targets() const REQUIRES(control_mutex);
  // Takes spare slot `slot` out of the table (later spares move down one slot) and closes its
  // device.
  void drop_spare_locked(std::uint32_t slot) REQUIRES(control_mutex);

  // Open VdHandles per VD id.
  std::map<std::uint32_t, std::uint32_t> vd_users GUARDED_BY(control_mutex);

  // Attached queues and the counts of destroyed ones (engine/state/array_stats.h). Shared with
  // the queues, so that one destroyed after the array (against the contract, but tests do it)
  // still finds it.
  std::shared_ptr<QueueRegistry> registry = std::make_shared<QueueRegistry>();
  ArrayStats stats() const;

  // Declared last: destroyed first, delivering what is queued while the rest still exists.
  EventNotifier events;
};

// What a device joining the array (a spare, a role's new device, a hot replacement) must pass:
// big enough, not the storage of a member, spare or replacement under another name, no graid
// superblock unless `force` (array_spares.cpp).
Status check_new_device(const Array::State& s, MemberDevice& device, bool force)
    REQUIRES(s.control_mutex);

// Counts for an event about `member_bytes` bytes of every member (stripes rounded up).
ArrayEventCounts byte_counts(const Geometry& geometry, std::uint64_t member_bytes);

// The public description of a VD table entry.
VdInfo vd_info(const meta::VdEntry& entry);

}  // namespace graid
