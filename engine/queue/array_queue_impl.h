// ArrayQueue internals: the per-thread queue state shared by the array_queue*.cpp files
// (splitting requests, member I/O without locks, flushes, parity batching) and the stripe
// operations (queue/stripe_op.h). Not a public header.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "queue/object_pool.h"
#include "queue/stripe_op.h"
#include "state/array_state.h"
#include "state/array_stats.h"
#include "stripe/buffer_pool.h"
#include "stripe/write_plan.h"

namespace graid {

// The failure of a kIoKernelBuffer read that `path` would serve with the CPU (see array.h).
Status kernel_buffer_refusal(std::string_view path);

class DirectIo;
class FlushOp;

// The queue's ring as a HostMemoryRegistry: staging slabs registered for fixed-buffer member I/O.
// Called on the queue's own thread only (the pool grows and dies there).
class RingRegions final : public HostMemoryRegistry {
 public:
  explicit RingRegions(IoContext& ctx) noexcept : ctx_(ctx) {}
  Status add_region(std::span<std::byte> region) override { return ctx_.add_buffer_region(region); }
  void remove_region(std::span<std::byte> region) noexcept override {
    ctx_.remove_buffer_region(region);
  }

 private:
  IoContext& ctx_;
};

struct ArrayQueue::Impl {
  Impl(Array::State& state, IoContext& context);
  ~Impl();  // queue_member_io.cpp, where DirectIo and FlushOp are complete

  Array::State& array;
  IoContext& ctx;
  RingRegions ring_regions{ctx};
  BufferPool buffers;
  QueueCounters stats;                           // read by Array::stats() from other threads
  SingleWriterCounter<std::uint32_t> in_flight;  // read by Array::quiesce()
  // Stripe updates in flight that went out without a write-hole journal record (the journal
  // off): read by Array::State::bare_updates_drained() from other threads.
  std::atomic<std::uint32_t> bare_updates{0};
  std::uint32_t read_rotor = 0;  // spreads mirror reads over copies
  std::unique_ptr<MemberIoCounters[]> member_io =
      std::make_unique<MemberIoCounters[]>(array.geometry.members());
  QueueRegistration registration{array.registry, *this};  // after the counters it folds in

  // Writes of the current batch, by stripe, not started yet (coalescing).
  std::unordered_map<std::uint64_t, StripeOp*> pending;
  std::vector<StripeOp*> pending_order;
  // This queue's newest operation on a stripe while it waits for the stripe's lock (started,
  // not yet granted). A write of a later batch joins it rather than queueing a second operation
  // behind it: under a stream of writes to one stripe (sequential writes, while the stripe's
  // previous update is in flight), the stripe is read and its parity computed once for all of
  // them, not once per write. Only the newest waiter is joinable, so a write never passes an
  // operation this queue started after the one it joins.
  std::unordered_map<std::uint64_t, StripeOp*> waiting;
  void note_waiting(StripeOp& op);
  void forget_waiting(StripeOp& op);

  // Runs of whole stripes (queue/stripe_run.cpp). add_to_run: `piece`, a whole-stripe write to
  // `stripe`, joins the batch's last operation as the next stripe of its run, if it can.
  bool add_to_run(std::uint64_t stripe, const Piece& piece);
  // A run takes its locks one by one, so a later operation of this queue could reach one of its
  // stripes first. While a run waits for a lock it is the queue's `claimer` over
  // [claim_first, claim_end); an operation that starts meanwhile parks if it is a run or touches
  // those stripes or a parked operation's, and end_claim() starts the parked ones in order once
  // the claimer holds every lock.
  StripeOp* claimer = nullptr;
  std::uint64_t claim_first = 0;
  std::uint64_t claim_end = 0;
  std::vector<StripeOp*> parked;
  void claim(StripeOp& run);
  bool must_park(const StripeOp& op) const noexcept;
  void end_claim();
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

  // Journal ring space (journal/journal.h): flushes every member that takes writes, then
  // Journal::end_flush(ticket). One flush at a time per queue; a ticket that comes while one runs
  // is flushed next. Counted in `in_flight` while it runs.
  struct JournalFlush {
    struct Slot final : TimedMemberRequest {
      Impl* q = nullptr;
      std::uint32_t member = 0;
      const MemberDevice* device = nullptr;
      bool to_replacement = false;  // the member's hot replacement (hold_replacement)
      void on_done(std::int32_t res) override;
    };
    std::vector<Slot> slots;
    std::uint32_t left = 0;
    std::uint64_t running = 0;  // ticket of the flush in flight, 0 = none
    std::uint64_t next = 0;     // a ticket to flush once it ends, 0 = none
  } journal_flush_state;
  void journal_flush(std::uint64_t ticket);
  void start_journal_flush();
  void journal_flush_slot_done(JournalFlush::Slot& slot, std::int32_t res);

  StripeOp& new_op(StripeOp::Mode mode, std::uint64_t stripe);
  void recycle(StripeOp& op);
  // The operation on `stripe` not yet running that a piece at [stripe_offset, +len) joins (the
  // batch's, else the newest one waiting for the lock), or a new one.
  // Whether a member's device is an NVMe passthrough one (now).
  bool passthrough_member() const;
  // `kernel`: the piece's data is in a kernel buffer window (StripeOp::set_kernel_buffer).
  StripeOp& pending_write_op(std::uint64_t stripe, StripeOp::Mode mode, std::uint32_t stripe_offset,
                             std::uint32_t len, bool kernel = false);

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
  // A read of [array_offset, +len) inside one strip. Mirrors: from copy `copy` % copies where
  // it is readable (kNextCopy: the next in turn).
  static constexpr std::uint32_t kNextCopy = ~std::uint32_t{0};
  void read_segment(ArrayIo& io, std::uint64_t array_offset, std::uint32_t len, std::byte* dst,
                    std::uint32_t copy = kNextCopy);
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
