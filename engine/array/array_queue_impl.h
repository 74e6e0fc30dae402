// ArrayQueue internals shared by engine/array/array_queue.cpp (splitting requests, direct member
// I/O, flushes) and engine/stripe/stripe_op.cpp (locked stripe work). Not a public header.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "array/array_state.h"
#include "array/array_stats.h"
#include "array/object_pool.h"
#include "stripe/buffer_pool.h"
#include "stripe/write_plan.h"

namespace graid {

// A part of one request inside one stripe, in stripe-data coordinates: bytes
// [stripe_offset, stripe_offset + len) of the stripe's k * strip data bytes.
struct Piece {
  ArrayIo* io = nullptr;
  std::uint32_t stripe_offset = 0;
  std::uint32_t len = 0;
  std::byte* buf = nullptr;  // write: source; read: destination; null with `zero`
  bool zero = false;         // write zeros (discard of a partial stripe)
  bool keep = false;         // zero: keep the range allocated (write-zeroes with kIoNoUnmap)
};

class StripeOp;
class DirectIo;
class FlushOp;

// One member I/O issued by a StripeOp.
class StripeMemberIo final : public TimedMemberRequest {
 public:
  StripeOp* owner = nullptr;
  std::uint32_t member = 0;
  std::int32_t result = 0;
  void on_done(std::int32_t res) override;
};

// Locked work on one stripe: a coalesced write, a degraded read, a mirrored write or a discard.
// Lifecycle (all on the owning queue's thread):
//   kIdle ─start()─► waiting for lock ─grant─► run_locked(): plan ─► kReading ─► compute
//        ─► kWriting ─► finish(): release lock, complete pieces, back to the free list.
// A member error during kReading marks the member failed and re-plans (still holding the lock).
class StripeOp final : public Task {
 public:
  // kMirrorRead: a mirror read that failed on one copy, redone from another copy under the lock
  // and written back to the copies that could not be read (read-error correction).
  enum class Mode : std::uint8_t { kWrite, kDegradedRead, kMirrorWrite, kPunch, kMirrorRead };
  enum class Phase : std::uint8_t { kIdle, kLocking, kReading, kWriting };

  explicit StripeOp(ArrayQueue::Impl& queue) : q_(queue) { resume_.op = this; }

  void reset(Mode mode, std::uint64_t stripe);
  // Members that failed a read in this operation with a media error (classify_member_error):
  // planned around as if failed, then rewritten with the reconstructed contents.
  void set_unreadable(std::uint64_t members) noexcept { unreadable_ = members; }
  void add_piece(const Piece& piece) { pieces_.push_back(piece); }
  Mode mode() const noexcept { return mode_; }
  ArrayQueue::Impl& queue() noexcept { return q_; }
  // True when a piece already added overlaps stripe bytes [stripe_offset, +len).
  bool overlaps(std::uint32_t stripe_offset, std::uint32_t len) const noexcept {
    for (const Piece& p : pieces_) {
      if (p.stripe_offset < stripe_offset + len && stripe_offset < p.stripe_offset + p.len) {
        return true;
      }
    }
    return false;
  }
  void start();

  // Task: runs when the stripe lock is granted after waiting.
  void run() override { run_locked(); }
  void member_io_done(StripeMemberIo& io);

  // The parity jobs this operation waits for, and their outcome.
  std::vector<StripeJob>& parity_jobs() noexcept { return jobs_; }
  void parity_done(Status status);

 private:
  struct Extent {
    std::uint32_t a = 0, b = 0;  // row range inside each strip
    WritePlan plan;
    std::uint64_t touched = 0, full = 0;
    std::array<PoolBuffer, kMaxStripeChunks> image;  // data images, then P/Q outputs
    std::array<PoolBuffer, kMaxStripeChunks> old;    // RMW: old data/parity
    // Where chunk c's new contents are: image[c], or for a strip that one write piece covers
    // alone over the whole extent, the caller's own buffer (no copy).
    std::array<std::byte*, kMaxStripeChunks> data{};
    std::uint64_t borrowed = 0;  // strips whose `data` is the caller's buffer
    std::uint64_t rebuilt = 0;   // chunks reconstructed by this operation's parity job
  };

  void run_locked();
  bool build_extents();
  void issue_reads();
  // Compute stages. Parity work is not run here but queued on the thread's parity batch
  // (ArrayQueue::Impl::queue_parity), which runs the jobs of every stripe operation that got
  // there in the same poll in one ParityBackend::execute() and calls parity_done().
  void start_compute();      // degraded plans: reconstruct the dead chunks
  void after_reconstruct();  // degraded reads: copy out; writes: images, then encode
  void after_encode();       // bitmap, then member writes
  // Declares this stripe's write to the write-intent bitmap (once per operation).
  Status hold_bitmap();
  Status ensure(PoolBuffer& b, std::uint32_t len);
  void issue_writes();
  void issue_mirror_writes();
  void issue_punches();
  // Completes the operation. A successful write first waits until every member failure marked so
  // far is recorded in the superblocks (see Array::State::failures_marked).
  void finish(Status status);
  void release_buffers();
  StripeMemberIo& new_io(std::uint32_t member);
  void submit_io(StripeMemberIo& io);
  // Sorts the member errors of the phase just completed by class (array/member_errors.h): fails
  // members with device errors, marks media read errors unreadable, and falls back from discards
  // a member refused. Sets `replan` when the operation must be planned again. A failing status
  // ends the operation.
  Status absorb_member_errors(bool& replan);
  // Member of chunk `c` of this stripe, and whether it is in unreadable_.
  bool chunk_unreadable(std::uint32_t c) const noexcept;
  void issue_mirror_read();
  void after_mirror_read();
  // Points e.data at the caller's buffer for strips one piece covers alone (zero copy).
  void borrow_caller_data(Extent& e);
  void overlay_new_data(Extent& e);

  ArrayQueue::Impl& q_;
  Mode mode_ = Mode::kWrite;
  Phase phase_ = Phase::kIdle;
  std::uint64_t stripe_ = 0;
  std::vector<Piece> pieces_;
  std::vector<Extent> extents_;
  std::size_t extents_used_ = 0;
  std::vector<std::unique_ptr<StripeMemberIo>> ios_;
  std::size_t ios_used_ = 0;
  std::uint32_t ios_left_ = 0;
  bool bitmap_held_ = false;
  int replans_ = 0;
  std::uint64_t unreadable_ = 0;  // member mask: media read errors met in this operation
  bool zero_writes_ = false;      // mirror zero pieces go out as written zeroes, not discards
  bool fua_ = false;    // a piece asked for FUA: every member write of the operation goes out FUA
  PoolBuffer scratch_;  // kMirrorRead: what the good copy held; zero_writes_: zeroes
  enum class ComputeStage : std::uint8_t { kReconstruct, kEncode };
  ComputeStage compute_stage_ = ComputeStage::kReconstruct;
  std::vector<StripeJob> jobs_;
  StripeLockTable::Waiter lock_;
  // Posted back once a member failure this write may have planned around is on disk.
  struct ResumeAfterRecord final : Task {
    StripeOp* op = nullptr;
    void run() override;
  } resume_;
};

struct ArrayQueue::Impl {
  Impl(Array::State& state, IoContext& context);

  Array::State& array;
  IoContext& ctx;
  BufferPool buffers;
  QueueCounters stats;                           // read by Array::stats() from other threads
  SingleWriterCounter<std::uint32_t> in_flight;  // read by Array::quiesce()
  std::uint32_t read_rotor = 0;                  // spreads mirror reads over copies
  std::unique_ptr<MemberIoCounters[]> member_io =
      std::make_unique<MemberIoCounters[]>(array.geometry.members());
  QueueRegistration registration{array.registry, *this};  // after the counters it folds in

  // Writes of the current batch, by stripe, not started yet (coalescing).
  std::unordered_map<std::uint64_t, StripeOp*> pending;
  std::vector<StripeOp*> pending_order;
  std::vector<std::pair<ArrayIo*, Status>> rejected;
  bool kick_scheduled = false;
  struct KickTask final : Task {
    Impl* q = nullptr;
    void run() override { q->kick(); }
  } kick_task;

  ObjectPool<StripeOp> ops;
  ObjectPool<DirectIo> directs;
  ObjectPool<FlushOp> flushes;

  // Starts `io` on array bytes [base + io.offset, +io.len), which must end by `limit` bytes past
  // `base`; [base, base + limit) must lie inside the array.
  void submit(ArrayIo& io, std::uint64_t base, std::uint64_t limit);
  void kick();

  // Parity batching: stripe operations whose jobs are ready in one poll share one execute()
  // (one GPU launch, later). The batch runs as a deferred task on this thread.
  // With an AsyncParity one batch per thread is in flight at a time; operations that get ready
  // meanwhile form the next batch (under load, batches grow while the device works).
  void queue_parity(StripeOp& op);
  void run_parity_batch();
  void finish_parity_batch(Status batch);
  std::vector<StripeOp*> parity_waiting;
  std::vector<StripeOp*> parity_running;  // the operations of the batch in flight
  std::vector<StripeJob> parity_batch;
  bool parity_scheduled = false;
  bool parity_busy = false;
  struct ParityDone final : ParityCompletion {
    Impl* q = nullptr;
    void parity_done(Status status) override { q->finish_parity_batch(std::move(status)); }
  } parity_done_cb;
  struct ParityTask final : Task {
    Impl* q = nullptr;
    void run() override { q->run_parity_batch(); }
  } parity_task;
  void schedule_kick();

  StripeOp& new_op(StripeOp::Mode mode, std::uint64_t stripe);
  void recycle(StripeOp& op);
  // The batch's not yet started operation on `stripe` that a piece at [stripe_offset, +len)
  // joins, or a new one.
  StripeOp& pending_write_op(std::uint64_t stripe, StripeOp::Mode mode, std::uint32_t stripe_offset,
                             std::uint32_t len);

  // Request accounting: every piece of a request completes through part_done exactly once.
  void begin_io(ArrayIo& io);
  void add_parts(ArrayIo& io, std::uint32_t n);
  void part_done(ArrayIo& io, const Status& status);

  void submit_read(ArrayIo& io, std::uint64_t offset);
  void submit_write(ArrayIo& io, std::uint64_t offset);
  void submit_discard(ArrayIo& io, std::uint64_t offset);
  // A flush; with `then_dispatch` (a kIoPreflush request) the request itself starts at
  // `offset` once every live member has flushed.
  void submit_flush(ArrayIo& io, bool then_dispatch, std::uint64_t offset);
  // Starts `io` at array byte `offset` (validated).
  void dispatch(ArrayIo& io, std::uint64_t offset);
  // A read of [array_offset, +len) inside one strip.
  void read_segment(ArrayIo& io, std::uint64_t array_offset, std::uint32_t len, std::byte* dst);
  // A read of one strip segment done under the stripe lock by a StripeOp in `mode`
  // (kDegradedRead, kMirrorRead), with members `unreadable` planned around.
  void locked_read(ArrayIo& io, std::uint64_t array_offset, std::uint32_t len, std::byte* dst,
                   StripeOp::Mode mode, std::uint64_t unreadable);
  // Reconstructing read of one strip segment under the stripe lock.
  void degraded_read(ArrayIo& io, std::uint64_t array_offset, std::uint32_t len, std::byte* dst);
  // Writes `len` zeroes to `member` at device byte `device_at` (a discard the member refused).
  void write_zeroes(ArrayIo& io, std::uint32_t member, std::uint64_t device_at, std::uint32_t len,
                    std::uint64_t array_offset);
  // Read-error correction for a read of [array_offset, +len) that `member` could not serve:
  // under the stripe lock, rebuilt from the others (or read from another copy) into `dst` and
  // written back to `member`.
  void repair_read(ArrayIo& io, std::uint64_t array_offset, std::uint32_t len, std::byte* dst,
                   std::uint32_t member);
  void direct_io(ArrayIo& io, MemberOp op, std::uint32_t member, std::uint64_t member_offset,
                 std::uint32_t len, std::byte* buf, std::uint64_t array_offset);
  void recycle(DirectIo& d);
  void recycle(FlushOp& f);
};

}  // namespace graid
