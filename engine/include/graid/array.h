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

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
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
};

// How create() made a new array's redundancy consistent.
enum class InitMethod : std::uint8_t {
  kNone,       // RAID0, or assume_clean
  kKnownZero,  // every member read zeroes over the data area: nothing to do
  kZeroed,     // members zeroed (zero_members)
  kResync,     // parity computed from the data (mirrors copied), stripe by stripe
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
};

// What assemble() found and did, for logs and the CLI.
struct AssembleReport {
  std::uint64_t events = 0;
  std::vector<std::string> stale_members;   // members with an older superblock, not used
  std::vector<std::string> behind_members;  // one event behind (an interrupted update), used
  std::vector<std::string> failed_members;  // members recorded as failed, missing or too small
  bool was_clean = true;                    // false: the array was not stopped cleanly
  std::uint64_t resynced_bytes = 0;         // member bytes per member re-synced after unclean stop
  std::uint64_t unsynced_stripes = 0;       // dirty stripes that could not be re-synced
  std::vector<std::string> overrides;       // what `force` (or start_dirty_degraded) overrode
};

// A virtual drive: an extent of the array's data space, exported to applications (ublk later).
struct VdInfo {
  std::uint32_t id = 0;
  std::string name;
  std::uint64_t start = 0;  // array data byte where the VD begins (a multiple of 1 MiB)
  std::uint64_t size = 0;   // bytes (a multiple of 4 KiB)
};

// What a queue has done, for tests, benchmarks and `stats`.
struct QueueStats {
  std::uint64_t reads = 0, writes = 0, discards = 0, flushes = 0;  // requests
  std::uint64_t degraded_reads = 0;  // strip reads served by reconstruction
  std::uint64_t stripe_writes = 0;   // stripe operations that wrote (after coalescing)
  std::uint64_t coalesced = 0;       // request pieces merged into another's stripe operation
  std::uint64_t full_stripe = 0;     // row extents by plan
  std::uint64_t reconstruct_write = 0;
  std::uint64_t read_modify_write = 0;
  std::uint64_t degraded_write = 0;
  std::uint64_t parity_batches = 0;         // parity batches (execute() or AsyncParity::submit())
  std::uint64_t parity_jobs = 0;            // stripe jobs in them
  std::uint64_t parity_batch_failures = 0;  // batches redone per operation on the cpu path
};

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

struct ArrayOptions {
  ParityBackend* parity = nullptr;  // required for RAID5/6; not owned; must outlive the array
  // Optional asynchronous parity (not owned; must outlive the array). `parity` stays required:
  // it redoes batches the asynchronous engine fails.
  AsyncParity* async_parity = nullptr;
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
};

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
  // Array data bytes (what VDs are carved from).
  std::uint64_t capacity() const noexcept;
  // Member byte where each member's data area starts (metadata lies before it).
  std::uint64_t member_data_offset() const noexcept;
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
  // How create() initialised the array (kNone for an assembled one).
  InitMethod init_method() const noexcept;

  // Carves a VD of `size` bytes (rounded up to 4 KiB) from the first free extent (VDs start on
  // 1 MiB boundaries) and records it in the superblocks. kNoSpace when no extent fits,
  // kInvalidArgument for a bad or duplicate name, kBusy when the VD table is full.
  Result<VdInfo> create_vd(std::string_view name, std::uint64_t size);
  // Removes a VD from the table (its data is left as it is). kNotFound for an unknown id.
  Status delete_vd(std::uint32_t id);
  std::vector<VdInfo> vds() const;

  // Marks a member failed (as an I/O error does) and records it on the survivors.
  Status fail_member(std::uint32_t member, std::string_view reason);

  // Attaches the calling thread: I/O on this array from this thread goes through the queue.
  Result<std::unique_ptr<ArrayQueue>> attach(IoContext& ctx);

  // Flushes members, clears the write-intent bitmap and marks the array clean on every live
  // member. The caller must have completed all I/O and destroyed all queues first.
  Status stop();

  // Checks that every stripe's parity (or every mirror copy) matches its data, reading through
  // blocking I/O. Returns the number of inconsistent stripes. For tests and `check`.
  Result<std::uint64_t> count_inconsistent_stripes();

  struct State;  // internal (engine/array/array_state.h)

 private:
  explicit Array(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
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
  const QueueStats& stats() const noexcept;
  // Requests submitted and not yet completed.
  std::uint32_t in_flight() const noexcept;

  struct Impl;  // internal (engine/array/array_queue_impl.h)

 private:
  friend class Array;
  static std::unique_ptr<ArrayQueue> make(Array::State& state, IoContext& ctx);
  explicit ArrayQueue(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace graid
