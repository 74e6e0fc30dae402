// Arrays (drive groups) and their I/O.
//
// An Array is one RAID set of members (a DG). Its data space is carved into virtual drives (VDs),
// each an extent [start, start+size) of the array's data bytes. I/O is asynchronous and per
// thread: every thread that does I/O attaches an ArrayQueue to its own IoContext and submits
// ArrayIo requests through it; completions run on that thread inside IoContext::poll().
//
//   thread ──► ArrayQueue::submit(io) ──► split by stripe ──► reads: straight to members
//                                                         └─► writes: StripeOp per stripe
//   StripeOp:  kPending ─► kLocked (stripe lock held) ─► kReading ─► kComputing ─► kWriting
//              ─► kDone (lock released, waiters granted) ; any member error ─► replan degraded
//
// Ordering: requests that overlap and are in flight together complete in any order, and the data
// of overlapping writes in flight together is that of one of them (as a disk).
//
// Durability (the contract a block device's volatile write cache makes, as ublk and NBD expose
// it): a write is acknowledged once every member write it needs has completed, which puts it in
// the members' caches, not necessarily on stable storage. A flush acknowledges once every write
// acknowledged before the flush was submitted is on stable storage on every live member. A write
// with kIoFua is on stable storage when acknowledged (its member writes, parity included, go out
// with RWF_DSYNC). A request with kIoPreflush starts only after a flush of everything
// acknowledged before it was submitted has completed. A write that skipped a failed member is
// acknowledged only once that failure is recorded in the superblocks. Discard and write-zeroes
// both leave the range reading as zeroes; write-zeroes with kIoNoUnmap keeps it allocated.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graid/geometry.h"
#include "graid/host_memory.h"
#include "graid/member.h"
#include "graid/parity.h"
#include "graid/status.h"

namespace graid {

class Array;
class ArrayQueue;

enum class IoKind : std::uint8_t { kRead, kWrite, kFlush, kDiscard, kWriteZeroes };

// ArrayIo::flags bits (see the durability contract above).
inline constexpr std::uint8_t kIoFua = 1u << 0;       // kWrite: durable when acknowledged
inline constexpr std::uint8_t kIoPreflush = 1u << 1;  // flush what came before, then start
inline constexpr std::uint8_t kIoNoUnmap = 1u << 2;   // kWriteZeroes: keep the range allocated
// kRead, kWrite: `buf` is a window of a kernel buffer slot of the submitting thread's ring
// (IoContext::add_kernel_buffer_slot; ublk zero copy), memory the engine must never touch. The
// request is served only where member I/O moves the data unchanged (fixed-buffer I/O): reads on
// every level, writes on RAID0, RAID1 and RAID10 (every copy, and a hot replacement's, written
// from it). Where it would need the CPU (a degraded or repaired read, any write to a parity
// level) or a member that cannot take such a buffer (NVMe passthrough, also as a hot
// replacement), the request fails with kUnsupported before anything touches `buf` or is
// written, and the caller serves it again with a buffer in memory. (One exception: a hot replace
// onto a passthrough drive that begins while such a write is being issued is given up instead;
// nothing is lost.) Any other kind fails with kUnsupported.
inline constexpr std::uint8_t kIoKernelBuffer = 1u << 3;

// One request on an array or VD. Owned by the caller (e.g. preallocated per ublk tag), alive until
// on_complete runs. `buf` must be 512-byte aligned (4096 is best); offset and len multiples of 512.
class ArrayIo {
 public:
  IoKind kind = IoKind::kRead;
  std::uint64_t offset = 0;  // bytes, relative to the VD (or the array's data space)
  std::uint32_t len = 0;     // bytes; 0 for kFlush
  std::byte* buf = nullptr;  // kRead: filled; kWrite: read, unchanged
  std::uint8_t flags = 0;    // kIoFua, kIoPreflush, kIoNoUnmap

  virtual ~ArrayIo() = default;

  // Runs exactly once, on the submitting thread, with the request's outcome.
  virtual void on_complete(Status status) = 0;

 private:
  friend class ArrayQueue;
  std::uint32_t parts_left_ = 0;  // sub-I/Os not yet complete
  Status first_error_;
};

// State of a member as the array sees it.
enum class MemberHealth : std::uint8_t { kActive, kFailed };

enum class ArrayHealth : std::uint8_t {
  kOptimal,   // every member active
  kDegraded,  // members failed, data still complete
  kFailed,    // more failures than the level tolerates: I/O fails with kIoError
};

std::string_view array_health_name(ArrayHealth health) noexcept;

// How much of the members' bandwidth a background job (initialisation, rebuild, consistency
// check, resync) may take from applications; docs/cli.md gives the rate of each.
enum class BackgroundSpeed : std::uint8_t { kLow, kNormal, kHigh, kExtreme };
// When RAID5/6 writes go through the journal that closes the write hole: never, only while the
// array is degraded, or always.
enum class JournalPolicy : std::uint8_t { kOff, kDegradedOnly, kAlways };

// "low", "normal", "high", "extreme"; "unknown" for a value outside the enum.
std::string_view background_speed_name(BackgroundSpeed speed) noexcept;
// The inverse of background_speed_name (exact, lower case); nullopt for anything else.
std::optional<BackgroundSpeed> parse_background_speed(std::string_view name) noexcept;
// "off", "degraded-only", "always"; "unknown" for a value outside the enum.
std::string_view journal_policy_name(JournalPolicy policy) noexcept;
// The inverse of journal_policy_name (exact, lower case); nullopt for anything else.
std::optional<JournalPolicy> parse_journal_policy(std::string_view name) noexcept;

// A drive group's settings, recorded in every member's superblock (docs/on-disk-format.md) so
// they survive stop and assemble. A superblock that records none (one written before settings
// existed) reads as the defaults below. The background jobs run at their speeds; the journal
// policy decides when RAID5/6 partial-stripe writes go through the write-hole journal (arrays
// with a journal area only: Array::journal_state()).
struct ArraySettings {
  BackgroundSpeed rebuild_speed = BackgroundSpeed::kNormal;
  BackgroundSpeed init_speed = BackgroundSpeed::kNormal;
  BackgroundSpeed check_speed = BackgroundSpeed::kNormal;
  BackgroundSpeed resync_speed = BackgroundSpeed::kNormal;
  JournalPolicy journal_policy = JournalPolicy::kDegradedOnly;

  friend bool operator==(const ArraySettings&, const ArraySettings&) = default;
};

struct CreateOptions {
  RaidLevel level = RaidLevel::kRaid5;
  std::uint32_t strip_bytes = 64 * 1024;
  std::string name;
  // Member data bytes to use; 0 = as much as the smallest member allows.
  std::uint64_t member_data_bytes = 0;
  // Bytes of member space per write-intent bitmap bit; 0 = chosen from the member size.
  std::uint64_t bitmap_region_bytes = 0;
  // Initialisation. By default a new array makes its parity (or mirror copies) agree with what
  // the members hold, blocking create() until done, unless every member is known to read zeroes
  // over the data area (regular files that are holes there, as freshly created or truncated
  // files are), which is consistent already. `zero_members` zeroes the members instead of
  // computing parity (BLKZEROOUT, which drives with write-zeroes or deallocate do without writing
  // every byte; punched holes for files), destroying what they held. `assume_clean` skips
  // initialisation: only right when the members are known to be consistent (all zero, or an
  // image of a consistent array); otherwise the first reconstruction returns wrong data.
  bool assume_clean = false;
  bool zero_members = false;
  // Initialise in the background (kResync only): create() records the initialisation as
  // pending and returns at once; the array is usable meanwhile and Array::initialise() does the
  // work. Until a stripe is initialised, writes to it never trust its old parity
  // (reconstruct-write, not read-modify-write), so every row written is consistent even before
  // the job gets there.
  bool background_init = false;
  // Recorded in the first superblocks (Array::settings()).
  ArraySettings settings;
  // Bytes per member for the RAID5/6 write-hole journal, between the bitmap and the data
  // (docs/on-disk-format.md): kAutoJournal chooses from the member size (1/256 of it, at most
  // 64 MiB, at least four of the largest records); 0 reserves none (the journal policy then has
  // no effect). Ignored (none) for RAID0/1/10.
  static constexpr std::uint64_t kAutoJournal = ~std::uint64_t{0};
  std::uint64_t journal_bytes = kAutoJournal;
};

// How create() made a new array's redundancy consistent.
enum class InitMethod : std::uint8_t {
  kNone,       // RAID0, or assume_clean
  kKnownZero,  // every member read zeroes over the data area: nothing to do
  kZeroed,     // members zeroed (zero_members)
  kResync,     // parity computed from the data (mirrors copied), stripe by stripe
  // An array created by a build that did not record it (superblock minor < 5).
  kNotRecorded,
};
std::string_view init_method_name(InitMethod method) noexcept;

struct AssembleOptions {
  // Start even if members are missing or stale, as long as the level's redundancy covers them.
  bool allow_degraded = true;
  // Start a RAID5/6 that was not stopped cleanly although a member is missing (md's
  // start_dirty_degraded). Stripes written around the crash may have parity that does not match
  // their data; with a data strip missing they cannot be re-synced, and reading that strip later
  // reconstructs it from the wrong parity (the write hole). Refused by default, naming the
  // members and the number of such stripes; AssembleReport::unsynced_stripes counts them.
  bool start_dirty_degraded = false;
  // The administrator's override, for when assembly refuses and the data matters more than the
  // refusal: a split brain is resolved by trusting the half with the most events (the other
  // half's writes since the split are dropped), stale members are taken back (highest events
  // first, only as many as the array needs to start; their data may be out of date), and a
  // dirty degraded array starts. Every override is named in AssembleReport::overrides and the
  // log.
  bool force = false;
  // After an unclean stop, re-sync the regions the write-intent bitmap marks in the background
  // (Array::resync(), paced by the caller) instead of before assemble() returns. Until the
  // re-sync passes a stripe, writes to it do not trust its parity and mirror reads of it take
  // the copy the re-sync copies from; its bitmap bits stay set through a stop or a crash (the
  // next assembly re-syncs what is left); stop() does not mark the array clean.
  bool background_resync = false;
};

// What assemble() found and did, for logs and the CLI.
struct AssembleReport {
  std::uint64_t events = 0;
  std::vector<std::string> stale_members;   // members with an older superblock, not used
  std::vector<std::string> behind_members;  // one event behind (an interrupted update), used
  std::vector<std::string> failed_members;  // members recorded as failed, missing or too small
  std::vector<std::uint32_t> failed_roles;  // the role of each failed_members entry
  bool was_clean = true;                    // false: the array was not stopped cleanly
  std::uint64_t resynced_bytes = 0;         // member bytes per member re-synced after unclean stop
  std::uint64_t unsynced_stripes = 0;       // dirty stripes that could not be re-synced
  std::uint64_t resync_pending_bytes = 0;   // background_resync: member bytes left to re-sync
  std::uint64_t journal_records = 0;        // write-hole journal records replayed
  std::vector<std::string> overrides;       // what `force` (or start_dirty_degraded) overrode
};

// A virtual drive: an extent of the array's data space, exported to applications (ublk later).
struct VdInfo {
  std::uint32_t id = 0;
  std::string name;
  std::uint64_t start = 0;  // array data byte where the VD begins (a multiple of 1 MiB)
  std::uint64_t size = 0;   // bytes (a multiple of 4 KiB)
};

// A range of array data whose contents are lost (Array::lost_ranges): a member could not be read
// there during a background job and redundancy could not make it up. Reads that touch it fail
// with kIoError (no member is failed for it); the bytes a write covers read again (the range
// shrinks or splits; docs/resilience.md, "Lost ranges").
struct LostRange {
  std::uint64_t offset = 0;  // array data byte
  std::uint32_t len = 0;     // bytes

  friend bool operator==(const LostRange&, const LostRange&) = default;
};

// What a queue has done, for tests, benchmarks and `stats`. Callers see snapshots (QueueStats,
// plain integers); a queue counts in single-writer atomics (Counter) so that Array::stats() can
// read them from another thread without slowing the queue's own thread.
template <typename Counter>
struct BasicQueueStats {
  Counter reads{}, writes{}, discards{}, flushes{};  // requests
  Counter degraded_reads{};                          // strip reads served by reconstruction
  Counter stripe_writes{};      // stripe operations that wrote (after coalescing)
  Counter coalesced{};          // request pieces merged into another's stripe operation
  Counter coalesced_waiting{};  // ... of them, merged into one queued behind the stripe's lock
  Counter full_stripe{};        // row extents by plan
  Counter reconstruct_write{};
  Counter read_modify_write{};
  Counter degraded_write{};
  Counter stripe_runs{};     // operations that wrote a run of whole stripes (queue/stripe_op.h)
  Counter run_stripes{};     // ... the stripes they wrote (also in stripe_writes and full_stripe)
  Counter run_splits{};      // runs that fell back to one operation per stripe once locked
  Counter parity_batches{};  // parity batches (execute() or AsyncParity::submit())
  Counter parity_jobs{};     // stripe jobs in them
  Counter parity_batch_failures{};  // batches redone per operation on the cpu path
  Counter journal_records{};        // write-hole journal records written (journal/journal.h)
  Counter journal_bytes{};          // bytes written to journal areas (every copy)

  // Calls fn(this's counter, other's counter) for every counter: the one list of them, for
  // snapshots and sums.
  template <typename Other, typename Fn>
  void zip(Other& other, Fn&& fn) {
    fn(reads, other.reads);
    fn(writes, other.writes);
    fn(discards, other.discards);
    fn(flushes, other.flushes);
    fn(degraded_reads, other.degraded_reads);
    fn(stripe_writes, other.stripe_writes);
    fn(coalesced, other.coalesced);
    fn(coalesced_waiting, other.coalesced_waiting);
    fn(full_stripe, other.full_stripe);
    fn(reconstruct_write, other.reconstruct_write);
    fn(read_modify_write, other.read_modify_write);
    fn(degraded_write, other.degraded_write);
    fn(stripe_runs, other.stripe_runs);
    fn(run_stripes, other.run_stripes);
    fn(run_splits, other.run_splits);
    fn(parity_batches, other.parity_batches);
    fn(parity_jobs, other.parity_jobs);
    fn(parity_batch_failures, other.parity_batch_failures);
    fn(journal_records, other.journal_records);
    fn(journal_bytes, other.journal_bytes);
  }
};
using QueueStats = BasicQueueStats<std::uint64_t>;

// Latency buckets of member I/O: bucket 0 counts I/Os under 1 µs, bucket i (1 <= i < 31) those
// of [2^(i-1), 2^i) µs, bucket 31 everything from 2^30 µs up.
inline constexpr std::size_t kLatencyBuckets = 32;
std::size_t latency_bucket(std::uint64_t micros) noexcept;

// What one member did through the array's queues (asynchronous member I/O; the blocking I/O of
// superblock updates, resync and checks is not counted). Same snapshot/counter split as
// BasicQueueStats.
template <typename Counter>
struct BasicMemberIoStats {
  Counter reads{}, writes{}, flushes{}, discards{};  // completed member I/Os, failed ones included
  Counter read_bytes{}, write_bytes{};               // of the successful ones
  Counter read_errors{}, write_errors{}, flush_errors{}, discard_errors{};
  std::array<Counter, kLatencyBuckets> latency{};  // every I/O above, submit to completion

  template <typename Other, typename Fn>
  void zip(Other& other, Fn&& fn) {
    fn(reads, other.reads);
    fn(writes, other.writes);
    fn(flushes, other.flushes);
    fn(discards, other.discards);
    fn(read_bytes, other.read_bytes);
    fn(write_bytes, other.write_bytes);
    fn(read_errors, other.read_errors);
    fn(write_errors, other.write_errors);
    fn(flush_errors, other.flush_errors);
    fn(discard_errors, other.discard_errors);
    for (std::size_t i = 0; i < kLatencyBuckets; ++i)
      fn(latency[i], other.latency[i]);
  }
};

struct MemberIoStats : BasicMemberIoStats<std::uint64_t> {
  std::uint64_t ios() const noexcept { return reads + writes + flushes + discards; }
  std::uint64_t errors() const noexcept {
    return read_errors + write_errors + flush_errors + discard_errors;
  }
  // Samples in the latency histogram (equals ios()).
  std::uint64_t latency_samples() const noexcept;
  // Upper bound in µs of the bucket holding the `fraction` quantile (0.5, 0.99), 0 without
  // samples: what `graidctl stats` prints as p50/p99.
  std::uint64_t latency_quantile_us(double fraction) const noexcept;
};

// Array-wide counters (Array::stats()).
struct ArrayStats {
  QueueStats totals;                   // every queue ever attached, destroyed ones included
  std::uint32_t queues_attached = 0;   // queues attached now
  std::vector<MemberIoStats> members;  // by member slot (roles only)
  std::uint64_t events_dropped = 0;    // observer events lost to a full event queue
};

// State of a slot of the member table, as the superblocks record it (meta::MemberState).
enum class MemberSlotState : std::uint8_t {
  kActive,       // in sync, serving reads and writes
  kFailed,       // failed: neither read nor written until replaced
  kSpare,        // a hot spare (spare slots only)
  kRebuilding,   // being rebuilt (rebuild_offset: done so far); see Array::member_slots()
  kRemoved,      // the role has no device
  kEmpty,        // unused
  kReplacement,  // a hot replace's new device, copying a role (spare slots only; rebuild_offset:
                 // member data bytes copied); see Array::start_replace()
};
std::string_view member_slot_state_name(MemberSlotState state) noexcept;

// One slot of the member table: roles 0..member_count-1, then spares.
struct MemberSlot {
  std::uint32_t slot = 0;
  MemberSlotState state = MemberSlotState::kEmpty;
  std::uint64_t rebuild_offset = 0;  // kRebuilding: member data bytes rebuilt; else 0
  std::string uuid;                  // the member's UUID; empty when none is recorded
  std::string path;                  // the device the array holds for it; empty when none
};

// A member's superblock, decoded and summarised (Array::examine()).
struct MemberExamination {
  std::string array_uuid;
  std::string name;
  RaidLevel level = RaidLevel::kRaid0;
  std::uint32_t member_count = 0;
  std::uint32_t spare_count = 0;
  std::uint32_t strip_bytes = 0;
  std::uint32_t slot = 0;  // this member's slot
  std::string member_uuid;
  MemberSlotState state = MemberSlotState::kEmpty;  // this member's slot state
  std::uint64_t events = 0;
  bool clean = false;
  std::uint64_t data_offset = 0;
  std::uint64_t data_size = 0;  // per member
  std::uint64_t capacity = 0;   // array data bytes
  std::uint64_t ctime_ns = 0, utime_ns = 0;
  std::optional<std::uint64_t> init_checkpoint, resync_checkpoint, check_checkpoint;
  ArraySettings settings;         // as this copy records them (defaults where it records none)
  std::vector<MemberSlot> slots;  // the member table as this copy records it (no paths)
  std::vector<VdInfo> vds;
};

// The graid metadata a device carries (Array::find_metadata), for refusals.
struct GraidMetadata {
  enum class Kind : std::uint8_t {
    kNone,           // no superblock magic: blank or erased
    kSuperblock,     // a superblock this build reads
    kDamaged,        // the magic, and a block that does not decode (kCorrupt)
    kUnknownFormat,  // a format version this build does not know (a newer graid's)
  };
  Kind kind = Kind::kNone;
  // In words: "the superblock of graid array <uuid> ('<name>', slot <n>)", "graid metadata of
  // format 2.0, newer than this build (1.5)", "a damaged graid superblock (<why>)"; "" for kNone.
  std::string description;
};

// What Array::readd_failed() decided for a device taken back into its role.
struct ReaddPlan {
  // Member data bytes (a multiple of the strip) below which the device lacks only what the
  // write-intent bitmap marks, so only marked regions are rebuilt there; above it the device is
  // rebuilt in full. 0: rebuilt in full.
  std::uint64_t bitmap_limited_below = 0;
  // Which it was and why, for logs and events ("rebuilt where the bitmap marks ...").
  std::string description;
};

// A background job's speed, in member bytes per second per member, as md's speed_limit_min and
// speed_limit_max: up to `max` while the array is idle (0 = as fast as the drives go); while
// applications' requests run, a job that `yields` keeps to `min` (and works in one small window
// at a time); one that does not yield runs as when idle. background_speed() gives each setting's.
struct JobSpeed {
  std::uint64_t min = 0;
  std::uint64_t max = 0;
  bool yields = false;
  friend bool operator==(const JobSpeed&, const JobSpeed&) = default;
};

// How a rebuild runs (Array::rebuild).
struct RebuildControl {
  // Checked between windows: when it becomes true the rebuild records its checkpoint and
  // returns. Optional.
  const std::atomic<bool>* stop = nullptr;
  // Member bytes per second per member the rebuild may take (reads of the others and writes of
  // the rebuilt member alike); 0 = as fast as it goes. Used when `speed` is empty.
  std::uint64_t bytes_per_second = 0;
  // Optional: asked at every window instead of bytes_per_second, so a speed setting changed
  // while the rebuild runs takes effect at once. Runs on the rebuild's thread.
  std::function<JobSpeed()> speed;
  // Stripes per window while the array is idle; 0 = about 4 MiB per member. While applications'
  // requests run (and the job yields) windows are kBusyWindowStripes at most, one at a time.
  std::uint64_t window_stripes = 0;
  // Windows in flight at once while idle: each locked from its first read to its write.
  std::uint32_t windows_in_flight = 4;
  // The checkpoint is recorded in the superblocks at least this often (and at the end).
  std::chrono::milliseconds checkpoint_interval{2000};
};

// Stripes per window of a job that yields to applications' requests.
inline constexpr std::uint64_t kBusyWindowStripes = 4;

// How a consistency check runs (Array::check).
struct CheckControl {
  const std::atomic<bool>* stop = nullptr;  // as RebuildControl::stop
  std::uint64_t bytes_per_second = 0;       // as RebuildControl
  std::function<JobSpeed()> speed;          // as RebuildControl
  // Rewrite what does not match: parity from the data (RAID5/6), every copy from the first
  // live one (RAID1/10), as md's repair does. Without it nothing is written.
  bool repair = false;
  std::uint64_t window_stripes = 0;     // as RebuildControl
  std::uint32_t windows_in_flight = 4;  // as RebuildControl
  std::chrono::milliseconds checkpoint_interval{2000};
};

// What a check found.
struct CheckReport {
  bool finished = false;          // false: stopped (resumes from its checkpoint)
  std::uint64_t from_stripe = 0;  // where this run started (a resumed check: its checkpoint)
  std::uint64_t stripes = 0;      // stripes checked in this run
  std::uint64_t mismatches = 0;   // stripes whose parity or copies did not match
  std::uint64_t repaired = 0;     // of those, rewritten (repair)
  std::uint64_t skipped = 0;      // stripes with a failed member: nothing to compare
  // The first mismatched stripe numbers (at most kMaxReportedMismatches).
  std::vector<std::uint64_t> mismatch_stripes;
  static constexpr std::size_t kMaxReportedMismatches = 64;
};

// How Array::initialise() runs: as CheckControl, without repair (it always rewrites).
struct InitControl {
  const std::atomic<bool>* stop = nullptr;  // as RebuildControl::stop
  std::uint64_t bytes_per_second = 0;       // as RebuildControl
  std::function<JobSpeed()> speed;          // as RebuildControl
  std::uint64_t window_stripes = 0;         // as RebuildControl
  std::uint32_t windows_in_flight = 4;      // as RebuildControl
  std::chrono::milliseconds checkpoint_interval{2000};
};

// What one initialisation run did.
struct InitReport {
  bool finished = false;          // false: stopped or paused (resumes from its checkpoint)
  std::uint64_t from_stripe = 0;  // where this run started
  std::uint64_t stripes = 0;      // stripes initialised in this run
  std::string paused;             // why it stopped early, when it did not finish
};

// What one background re-sync run did (Array::resync).
struct ResyncReport {
  bool finished = false;               // false: stopped or paused (the rest stays pending)
  std::uint64_t stripes = 0;           // stripes re-synced in this run
  std::uint64_t unsynced_stripes = 0;  // stripes it could not re-sync (a data strip lost)
  std::string paused;                  // why it stopped early, when it did not finish
};

// Where a background re-sync stands, in member bytes per member.
struct ResyncProgress {
  std::uint64_t done = 0;
  std::uint64_t total = 0;
};

// The minimum and maximum rates of a BackgroundSpeed (docs/cli.md): low 10 / 200 MB/s, normal
// 50 MB/s / none, high 200 MB/s / none (each yielding to applications' I/O), extreme: no
// maximum, never yields.
JobSpeed background_speed(BackgroundSpeed speed) noexcept;

// Completion of an asynchronous parity batch.
class ParityCompletion {
 public:
  // Runs exactly once per submit(), on the submitting thread, inside its IoContext::poll().
  virtual void parity_done(Status status) = 0;

 protected:
  virtual ~ParityCompletion() = default;
};

// An asynchronous parity engine (the GPU batcher): takes one thread's batch of stripe jobs and
// completes it later on that thread, which goes on serving I/O meanwhile. Optional: without it a
// queue runs its batches through ArrayOptions::parity, synchronously.
class AsyncParity {
 public:
  virtual ~AsyncParity() = default;
  virtual std::string_view name() const noexcept = 0;
  // Starts `jobs`; the caller keeps them alive and unmodified until `done` runs, which happens
  // exactly once on the thread that owns `ctx`, never inside submit(). A failing status means
  // the outputs are unspecified; the queue then redoes the work on ArrayOptions::parity.
  virtual void submit(IoContext& ctx, std::span<StripeJob> jobs, ParityCompletion& done) = 0;
};

// What an ArrayObserver is told.
enum class ArrayEventKind : std::uint8_t {
  kStarted,             // create() or assemble() brought the array up: `health` says how
  kMemberFailed,        // `member` failed (message: why; counts.errors: its I/O errors so far)
  kMemberBack,          // `member` is in use again (assembly forced a stale member back)
  kHealthChanged,       // `previous_health` -> `health` (optimal, degraded, failed)
  kInitStarted,         // initialisation of redundancy: counts.bytes/stripes to do
  kInitFinished,        // counts: done
  kResyncStarted,       // re-sync after an unclean stop: counts.bytes/stripes the bitmap marks
  kResyncFinished,      // counts: re-synced; counts.unsynced_stripes: could not be re-synced
  kAssemblyOverride,    // assembly overrode a refusal (force, start_dirty_degraded): message
  kSpareAdded,          // add_spare() put a hot spare into slot `member`
  kStopped,             // stop() marked the array clean
  kMemberReplaced,      // a spare or a new device took failed role `member` (message: which)
  kRebuildStarted,      // rebuild of `member` started or resumed: counts.bytes/stripes left
  kRebuildProgress,     // every tenth of the way: counts.bytes/stripes rebuilt so far
  kRebuildFinished,     // `member` is in sync again: counts: rebuilt in this run
  kRebuildStopped,      // rebuild of `member` stopped (asked to, or failed: message says which)
  kCheckStarted,        // consistency check started or resumed: counts.stripes to check
  kCheckMismatch,       // a stripe did not match (message: which, repaired or not); the first 64
  kCheckFinished,       // counts.stripes checked, counts.errors mismatches
  kCheckStopped,        // stopped before the end (asked to, or failed: message says which)
  kJournalReplayed,     // assembly replayed write-hole journal records (message: how many)
  kInitStopped,         // background initialisation paused (stopped, or a member failed): why
  kReplaceStarted,      // a hot replace of working `member` began copying (message: onto what)
  kReplaceFinished,     // the copy took `member`'s role; the old device is out (message: which)
  kReplaceStopped,      // a hot replace was given up (message: why); `member` is unchanged
  kResyncStopped,       // a background re-sync paused (stopped, or failed: message says which)
  kDataLost,            // a job could not reconstruct what `member` could not read: the array
                        // ranges in the message are lost (Array::lost_ranges), reads of them fail
  kLostRangeRewritten,  // a write covered a lost range: it reads again (message: which)
};
std::string_view array_event_kind_name(ArrayEventKind kind) noexcept;

struct ArrayEventCounts {
  std::uint64_t stripes = 0;
  std::uint64_t bytes = 0;  // member bytes per member
  std::uint64_t unsynced_stripes = 0;
  std::uint64_t errors = 0;  // kMemberFailed: the member's failed I/Os through the queues
};

struct ArrayEvent {
  ArrayEventKind kind = ArrayEventKind::kStarted;
  std::string array_name;
  std::string array_uuid;
  std::optional<std::uint32_t> member;         // the member slot concerned, if any
  ArrayHealth health = ArrayHealth::kOptimal;  // the array's health when the event was raised
  ArrayHealth previous_health = ArrayHealth::kOptimal;  // kHealthChanged: before
  ArrayEventCounts counts;
  std::string message;
  std::chrono::system_clock::time_point time;
};

// Told what happens to an array (graidd logs it, `graidctl events` lists it, a monitor hook
// runs on it). Each array delivers its events in the order they were raised, one at a time, on
// a notifier thread of its own: never on an I/O thread and never inside an Array call, so an
// observer may block (later events then wait) and may call the array's const queries
// (health(), stats(), member_slots()). Events raised while create()/assemble() runs are
// delivered too, also when it fails; ~Array delivers those still queued before it returns.
class ArrayObserver {
 public:
  virtual void on_event(const ArrayEvent& event) = 0;

 protected:
  virtual ~ArrayObserver() = default;
};

struct ArrayOptions {
  ParityBackend* parity = nullptr;  // required for RAID5/6; not owned; must outlive the array
  // Optional asynchronous parity (not owned; must outlive the array). `parity` stays required:
  // it redoes batches the asynchronous engine fails.
  AsyncParity* async_parity = nullptr;
  // Optional: the asynchronous parity of the background jobs' windows (rebuild, check, init,
  // re-sync), when it should differ from the foreground's (a ParityWorker: a job's thread waits
  // for I/O, so its parity can use other cores, where an I/O thread's is cheapest inline).
  // Null: `async_parity`, or inline on the job's thread when that is null too.
  AsyncParity* job_parity = nullptr;
  // Optional (not owned; must outlive the array): told about every slab of stripe staging memory
  // the array's queues allocate, and when it is freed, so a GPU backend can pin it once.
  HostMemoryRegistry* host_memory = nullptr;
  // Flushes clear write-intent bits of idle regions at most this often (each clear writes and
  // flushes bitmap pages); after a crash only regions written since their last clear re-sync.
  std::chrono::milliseconds bitmap_clear_interval{500};
  // A member whose read errors are corrected (reconstructed from redundancy and rewritten in
  // place) fails once it has had more than this many, counting down by half for every hour
  // without one (md's max_read_errors). A write error fails a member at once.
  std::uint32_t max_read_errors = 20;
  // A member that takes longer than this over one superblock or write-intent bitmap update
  // (write + flush, all members in parallel) is failed, so a hung drive cannot stall the array.
  std::chrono::milliseconds metadata_timeout{30000};
  // Optional (not owned; must outlive the array): told about member failures, health changes,
  // resync and initialisation, assembly overrides (see ArrayObserver).
  ArrayObserver* observer = nullptr;
};

class VdHandle;

// Process-wide: the engine's metadata worker threads (superblock and bitmap updates, which the
// write path waits for) mark themselves PR_SET_IO_FLUSHER before their next operation, as a
// server of a block device the kernel writes back through (ublk) must mark every thread its I/O
// waits on. Needs CAP_SYS_RESOURCE; a worker that is refused logs it once.
void set_metadata_workers_io_flusher();

class Array {
 public:
  // Writes superblocks (and an empty bitmap) to every member, making a new array. Refuses
  // members that are too small, fewer/more members than the level allows, a bad strip, or
  // members that already carry a graid superblock of a live array unless `force`.
  static Result<std::unique_ptr<Array>> create(std::vector<std::unique_ptr<MemberDevice>> members,
                                               const CreateOptions& create,
                                               const ArrayOptions& options, bool force = false);

  // Reads the members' superblocks, picks the newest consistent copy (members one event behind
  // it, as an interrupted update leaves them, count as in sync), orders members by their
  // recorded slot, and after an unclean stop re-syncs the regions the write-intent bitmap marks.
  // Members not supplied, stale, or smaller than the data area count as failed. Refuses, naming
  // the members and the way out: the same storage under two names, copies of several arrays, a
  // split brain, more members lost than the level tolerates, and a dirty degraded RAID5/6 (see
  // AssembleOptions). Takes ownership of `members`: the devices it does not use (stale, foreign
  // to the array, without a superblock) are closed when it returns, as are all of them when it
  // fails.
  static Result<std::unique_ptr<Array>> assemble(std::vector<std::unique_ptr<MemberDevice>> members,
                                                 const ArrayOptions& options,
                                                 const AssembleOptions& assemble = {},
                                                 AssembleReport* report = nullptr);

  ~Array();
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;

  const Geometry& geometry() const noexcept;
  // The array's UUID ("xxxxxxxx-xxxx-..."), and its name, as the superblocks record them.
  std::string uuid() const;
  const std::string& name() const noexcept;
  // Array data bytes (what VDs are carved from).
  std::uint64_t capacity() const noexcept;
  // Member byte where each member's data area starts (metadata lies before it).
  std::uint64_t member_data_offset() const noexcept;
  // The write-hole journal (docs/resilience.md): its area per member (0: none, so the policy has
  // no effect), whether partial-stripe writes go through it now, and the records written.
  struct JournalState {
    std::uint64_t area_offset = 0;
    std::uint64_t area_bytes = 0;
    bool active = false;
    // Active, and every update since it turned on had a record (none that went out without one
    // is still in flight), as the superblocks record it: a crash now leaves nothing the replay
    // cannot make whole, so a dirty degraded assembly needs no override.
    bool covers_all = false;
    JournalPolicy policy = JournalPolicy::kDegradedOnly;
  };
  JournalState journal_state() const;
  // Bytes of each member's data area in use (what a rebuild fills).
  std::uint64_t member_data_bytes() const noexcept;
  ArrayHealth health() const noexcept;
  MemberHealth member_health(std::uint32_t member) const noexcept;
  std::uint32_t member_count() const noexcept;
  // The largest logical block size among the members (512 or 4096): requests must be
  // multiples of it, aligned to it, buffers included.
  std::uint32_t logical_block_size() const noexcept;
  // False once a member has refused a discard: discards are then written as zeroes (reads after
  // a discard still return zeroes), and a frontend should stop advertising discard.
  bool supports_discard() const noexcept;
  // False once a member has refused a write-zeroes that keeps the range allocated (kIoNoUnmap):
  // those are then written as zeroes.
  bool supports_write_zeroes() const noexcept;
  // Read errors corrected on `member` since assembly (each reconstructed and rewritten).
  std::uint64_t corrected_read_errors(std::uint32_t member) const noexcept;
  // How create() initialised the array, as its superblocks record it (kNotRecorded for an array
  // created by a build that did not record it).
  InitMethod init_method() const noexcept;

  // Carves a VD of `size` bytes (rounded up to 4 KiB) from the first free extent (VDs start on
  // 1 MiB boundaries) and records it in the superblocks. kNoSpace when no extent fits,
  // kInvalidArgument for a bad or duplicate name, kBusy when the VD table is full.
  Result<VdInfo> create_vd(std::string_view name, std::uint64_t size);
  // Removes a VD from the table (its data is left as it is). kNotFound for an unknown id, kBusy
  // (changing nothing) while a VdHandle on it is open.
  Status delete_vd(std::uint32_t id);
  // Grows VD `id` to `size` bytes (rounded up to 4 KiB) in place, into the free space after it,
  // and records it in the superblocks; the data it had stays where it was, and the new part
  // reads as whatever the array held there (nothing is zeroed, as with lvextend). Open VdHandles
  // keep the size they were opened with: frontends are told separately. kNotFound for an
  // unknown id; kInvalidArgument for a smaller size (shrinking is refused: it would cut off what
  // a filesystem may still use); kNoSpace, naming how far it could grow, when the next VD or the
  // end of the array is in the way. The same size changes nothing. Every refusal changes
  // nothing.
  Result<VdInfo> resize_vd(std::uint32_t id, std::uint64_t size);
  std::vector<VdInfo> vds() const;
  // The largest VD create_vd() could make now (VDs start on 1 MiB boundaries that are also
  // full-stripe boundaries; sizes are 4 KiB multiples); 0 when there is no room.
  std::uint64_t largest_free_extent() const;
  // Opens VD `id` for a frontend (ublk, NBD): while the handle lives, delete_vd(id) is refused.
  // kNotFound for an unknown id. The handle must be destroyed before the array.
  Result<VdHandle> open_vd(std::uint32_t id);

  // The member table: roles 0..member_count()-1, then spare slots. A kRebuilding member counts
  // as failed for health() and member_health() until its rebuild ends, but is read and written
  // below its rebuild_offset (as far as the rebuild has got, live), and gets superblock
  // updates. kOutOfRange past the table.
  Result<MemberSlot> member_slot(std::uint32_t slot) const;
  std::vector<MemberSlot> member_slots() const;

  // Adds `device` as a hot spare: the next spare slot, recorded in every member's superblock and
  // in its own, so assembly finds it again. take_spare() puts one into a failed role.
  // Refuses (changing nothing) a device smaller than the members' data area (kNoSpace), the
  // storage of a member or spare under any name (kInvalidArgument), one that carries a graid
  // superblock unless `force` (kBusy), and a full member table (kNoSpace). Returns the slot.
  Result<std::uint32_t> add_spare(std::unique_ptr<MemberDevice> device, bool force = false);

  // Takes the hot spare in spare slot `slot` out of the array (md's --remove of a spare): later
  // spares move down, the update is recorded in every member's superblock, and the device's own
  // superblock is erased (a spare holds no data), so it is a blank device again once its owner
  // closes it. kInvalidArgument (changing nothing) for a slot that is not a hot spare, or the
  // spare slot of a hot replace in progress (cancel the replace instead); kIoError when the
  // update fails. Returns the device, which the array no longer writes.
  Result<std::shared_ptr<MemberDevice>> remove_spare(std::uint32_t slot);

  // Puts the first hot spare into failed role `member`, which becomes kRebuilding from 0 (the
  // spare's slot is freed, later spares move down); rebuild() then fills it. Returns the role.
  // kInvalidArgument for a role that is not failed (or is rebuilding already); kIoError when the
  // array has failed (nothing left to rebuild from); kNotFound when there is no spare.
  Status take_spare(std::uint32_t member);
  // The same with a new device instead of a spare (graidctl replace of a failed member). Refuses,
  // changing nothing, what add_spare() refuses.
  Status replace_failed(std::uint32_t member, std::unique_ptr<MemberDevice> device,
                        bool force = false);
  // Takes failed role `member`'s own device back (a drive marked offline, or one whose errors
  // were transient): it becomes kRebuilding from 0, and rebuild() fills it. How much is rebuilt
  // is decided from the device's own superblock (md's recovery_offset rule, ReaddPlan): below
  // the point up to which that record says it was in sync (all of it if it was active, its
  // recorded rebuild offset if it failed while being rebuilt) it is valid at once wherever the
  // write-intent bitmap marks no write, and only the marked regions are rebuilt; above that
  // point, and wherever its record cannot be trusted (unreadable, another array or member, an
  // event count older than the last time bits were cleared, as the bitmap header records it:
  // meta::BitmapHeader::events_cleared), it is rebuilt in full. A crash during that rebuild
  // resumes as a full one from the checkpoint. Refuses what take_spare() refuses; kIoError when
  // the device cannot take its superblock (it stays failed).
  Result<ReaddPlan> readd_failed(std::uint32_t member);
  // The same with the device given: for a member the array does not hold (assembled without it,
  // its superblock stale: graidd's marker online or replace after a restart). When the device's
  // own superblock says it is this member (this array, slot `member`, the member UUID the role
  // still records), it is taken back as readd_failed() takes one, bitmap-limited as far as
  // ReaddPlan allows: the bits a clean stop kept while the array was degraded, and the baseline
  // the bitmap header records (BitmapHeader::events_cleared), survive the restart. Any other
  // device is checked as replace_failed() checks one (`force` for graid metadata, unless it is
  // this array's own: an older member of the role or of another slot) and rebuilt in full.
  // Refuses what take_spare() refuses for the role; every refusal changes nothing.
  Result<ReaddPlan> readd_device(std::uint32_t member, std::unique_ptr<MemberDevice> device,
                                 bool force = false);
  // Hot replace of a working member (md's want_replacement): `device` starts as a copy of
  // active role `member` that every write to the role also goes to once the copy has passed its
  // stripe; replace() then copies window by window and, at the end, swaps it into the role (new
  // member UUID) and erases the old device's superblock. Redundancy never drops meanwhile: the
  // old member serves until the swap. One replace at a time. It is recorded in the superblocks
  // (the device takes a spare slot, meta::ReplaceRecord), with how far the copy has got: a stop,
  // a restart or a crash keeps it, and the assembly that finds every piece (the device, the role
  // still active) resumes it from that checkpoint (after an unclean stop, from below the first
  // region the write-intent bitmap marks dirty: what was in flight may have reached only one of
  // the two). Otherwise the record is dropped there and the device stays a hot spare. Refuses,
  // changing nothing: RAID0 (kUnsupported: it has no locked write path to copy under), a role
  // that is not active (kInvalidArgument: replace a failed member with replace_failed()), a
  // replace already pending (kBusy), no free slot (kNoSpace), and what add_spare() refuses for
  // `device`; kIoError when the device cannot take its superblock.
  Status start_replace(std::uint32_t member, std::unique_ptr<MemberDevice> device,
                       bool force = false);
  struct ReplaceProgress {
    std::uint32_t member = 0;
    std::string path;                // the device being filled
    std::uint64_t copied_bytes = 0;  // member data bytes copied so far
    std::uint64_t total_bytes = 0;   // data_size()
  };
  // The pending hot replace, if any.
  std::optional<ReplaceProgress> replace_progress() const;
  // Copies the pending replacement and swaps it in (see start_replace()), paced and stoppable as
  // a rebuild. True when it was swapped in (or none was pending); false when `control.stop`
  // stopped it (its checkpoint recorded: a later call resumes) or it was cancelled. kIoError when
  // the copy failed: a write to the new device failed, or the old member failed, and the replace is
  // given up (event kReplaceStopped) with the array as it was. Blocking: run it on a thread of its
  // own (graidd's redundancy job).
  Result<bool> replace(const RebuildControl& control = {});
  // Gives the pending replace up; true when there was one. Its record and slot are dropped, its
  // superblock erased and the device closed.
  bool cancel_replace();
  // Roles being rebuilt now (kRebuilding with a device).
  std::vector<std::uint32_t> rebuilding_members() const;
  // Rebuilds every kRebuilding member from its checkpoint, one after the other, window by
  // window under stripe locks (foreground I/O goes on: reads and writes below the checkpoint
  // use the member, above it plan around it), recording the checkpoint in the superblocks as
  // it goes, so a later call (after a stop, a crash and assembly) resumes there. Each member
  // becomes active when done. Blocking: run it on a thread of its own. Returns true when
  // nothing is left to rebuild, false when `control.stop` stopped it; kIoError when the array
  // failed or the member being rebuilt failed (it is then recorded failed; a new device or
  // spare may take its role).
  Result<bool> rebuild(const RebuildControl& control = {});

  // Reads and summarises the graid superblock of `member` without writing anything (mdadm
  // --examine). kNotFound when the device carries no graid superblock (no magic where it
  // belongs: a blank or erased device), kCorrupt/kUnsupported as decoding finds, kIoError when
  // it cannot be read.
  static Result<MemberExamination> examine(MemberDevice& member);

  // What graid metadata `member` carries (GraidMetadata), for a caller that refuses the device
  // unless told to overwrite it. A device whose superblock examine() cannot decode still carries
  // graid metadata: never take it for a blank one. Writes nothing; kIoError when its first block
  // cannot be read.
  static Result<GraidMetadata> find_metadata(MemberDevice& member);

  // Makes `member` carry no graid superblock any more (mdadm --zero-superblock): zeroes the
  // superblock block, the block kept for a backup superblock and the write-intent bitmap header
  // (member bytes [0, 12288), as far as the device reaches), then flushes. Afterwards examine()
  // answers kNotFound and create()/add_spare() take the device without `force`; the data area
  // and the bitmap's bit pages are left as they are. A tool for devices no running array uses:
  // the caller guarantees that (the array that had it is stopped, or it never was in one);
  // nothing here can tell. Succeeds on a device that carried no superblock. kIoError (and what
  // was written so far stays) when a write or the flush fails.
  static Status erase_superblock(MemberDevice& member);
  // The same, only when `member` carries the superblock of array `array_uuid` (its
  // MemberExamination::array_uuid text): kNotFound when it carries none (blank, erased or
  // unreadable) and kInvalidArgument when it carries another array's, writing nothing in either
  // case. What a caller that reopened a device by path uses, where the path may name another
  // device now (graidd's delete dg).
  static Status erase_superblock(MemberDevice& member, std::string_view array_uuid);

  // The drive group's settings (what the superblocks record; defaults where they record none).
  ArraySettings settings() const;
  // Records `settings` in every live member's superblock (one superblock update, events + 1);
  // the members' copies then record every field explicitly. Nothing is written when they equal
  // what is recorded already. kInvalidArgument (changing nothing) for a value outside the
  // enums; kIoError when the update fails (members that failed it are failed, as in any
  // superblock update). A journal policy that no longer wants the write-hole journal turns it
  // off before this returns (journalled writes in flight finish first, new ones wait, the epoch
  // moves: docs/resilience.md); kBusy, the settings recorded but the journal still on, when
  // writes in flight did not finish within the metadata timeout.
  Status set_settings(const ArraySettings& settings);

  // Array-wide counters: the sum of every attached queue's stats (destroyed queues included),
  // per-member I/O counts, errors by kind and latency histograms. Safe from any thread; the
  // counters of queues busy meanwhile are read as they stand (relaxed), each one whole.
  ArrayStats stats() const;

  // Returns once the observer has been given every event raised before the call (graidd: the
  // events a command raised are logged before it answers). Returns at once without an observer;
  // a no-op when called from the observer itself.
  void wait_for_events() const;

  // Marks a member failed (as an I/O error does) and records it on the survivors.
  Status fail_member(std::uint32_t member, std::string_view reason);

  // The array data ranges whose contents are lost (LostRange), ascending; recorded in the
  // superblocks, at most 64 (a job that would need another fails the member it read from).
  std::vector<LostRange> lost_ranges() const;

  // Attaches the calling thread: I/O on this array from this thread goes through the queue.
  Result<std::unique_ptr<ArrayQueue>> attach(IoContext& ctx);

  // Waits until no attached queue has a request in flight, or `timeout` passes (kBusy, naming
  // the queues still busy). Completions run on the queues' own threads inside
  // IoContext::poll(), so those threads must keep polling meanwhile, and nothing stops them
  // submitting more: a daemon stops its frontends first (no new requests), then quiesces, then
  // has each thread destroy its queue, then calls stop().
  Status quiesce(std::chrono::milliseconds timeout);
  // Queues attached now.
  std::uint32_t queues_attached() const;

  // Flushes members, clears the write-intent bitmap and marks the array clean on every live
  // member. Refused with kBusy, changing nothing, while queues are attached (destroy them first,
  // with no I/O in flight: see quiesce()).
  Status stop();

  // Checks that every stripe's parity (or every mirror copy) matches its data, reading through
  // blocking I/O. Returns the number of inconsistent stripes. For tests.
  Result<std::uint64_t> count_inconsistent_stripes();
  // The consistency check as a background job: window by window under stripe locks (I/O goes
  // on), from the checkpoint of a check that was stopped (recorded in the superblocks, so it
  // survives a restart) or from the start, to the end; mismatches reported (and repaired with
  // control.repair). Stripes with a failed member are skipped. Blocking: run it on a thread of
  // its own. kIoError when the array fails meanwhile.
  Result<CheckReport> check(const CheckControl& control = {});
  // Member data bytes a check has got to (live), or nullopt when none is running or pending.
  std::optional<std::uint64_t> check_progress() const;

  // Background initialisation (CreateOptions::background_init, or one cut short by a crash or
  // a stop): makes parity (or mirror copies) agree with the data, window by window under stripe
  // locks while I/O goes on, from the recorded checkpoint (sb.init_checkpoint) to the end,
  // recording it as it goes; clears it when done. Runs only while no member is failed: it
  // returns (not finished, `paused` says why) when the array is degraded or a member fails
  // meanwhile, and the next call resumes. Returns finished at once when nothing is pending.
  // kBusy while a check or another initialisation runs. Blocking: run it on a thread of its own.
  Result<InitReport> initialise(const InitControl& control = {});
  // Member data bytes initialised (live), or nullopt when no initialisation is pending.
  std::optional<std::uint64_t> init_progress() const;

  // The background re-sync after an unclean stop (AssembleOptions::background_resync): makes
  // parity (or mirror copies) agree with the data in the regions the bitmap marked, window by
  // window under stripe locks while I/O goes on, paced as `control` says, its position recorded
  // in the superblocks (sb.resync_checkpoint). A member that fails meanwhile is failed and the
  // re-sync goes on without it; stripes it cannot re-sync are counted (the write hole) and
  // reported. Stopped (control.stop) it returns with finished = false and the rest pending.
  // kBusy while another re-sync or a check runs. Nothing pending: finished at once.
  Result<ResyncReport> resync(const InitControl& control = {});
  // Where the background re-sync stands, or nullopt when none is pending.
  std::optional<ResyncProgress> resync_progress() const;

  struct State;  // internal (engine/state/array_state.h)

 private:
  explicit Array(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// An open VD (Array::open_vd): keeps the VD from being deleted while a frontend serves it.
// Movable; must not outlive its array.
class VdHandle {
 public:
  VdHandle() = default;
  VdHandle(VdHandle&& other) noexcept;
  VdHandle& operator=(VdHandle&& other) noexcept;
  ~VdHandle();

  const VdInfo& info() const noexcept { return info_; }
  explicit operator bool() const noexcept { return state_ != nullptr; }
  // info() as the VD table has it now (after Array::resize_vd, the new size). kNotFound on an
  // empty handle.
  Status refresh();

 private:
  friend class Array;
  VdHandle(Array::State& state, VdInfo info) : state_(&state), info_(std::move(info)) {}
  void close() noexcept;
  Array::State* state_ = nullptr;
  VdInfo info_;
};

// A thread's handle on an array. Not thread-safe: use it only on the thread that owns its
// IoContext. Destroy it before the array, with no I/O in flight.
class ArrayQueue {
 public:
  ~ArrayQueue();
  ArrayQueue(const ArrayQueue&) = delete;
  ArrayQueue& operator=(const ArrayQueue&) = delete;

  // Starts `io` on the array's data space. Writes submitted before the thread next polls its
  // IoContext are coalesced per stripe. Invalid requests (misaligned, out of range) complete
  // with an error at the next poll.
  void submit(ArrayIo& io);
  // Starts `io` on a VD: offsets are relative to the VD and must stay inside it.
  void submit(ArrayIo& io, const VdInfo& vd);

  IoContext& context() noexcept;
  // A snapshot of this queue's counters.
  QueueStats stats() const noexcept;
  // Requests submitted and not yet completed.
  std::uint32_t in_flight() const noexcept;

  struct Impl;  // internal (engine/queue/array_queue_impl.h)

 private:
  friend class Array;
  static std::unique_ptr<ArrayQueue> make(Array::State& state, IoContext& ctx);
  explicit ArrayQueue(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace graid
