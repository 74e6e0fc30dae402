// StripeOp: the work on one stripe that must happen under its lock (a coalesced write, a
// degraded read, a mirrored write, a whole-stripe discard, a read redone from another copy), or
// on a run of whole stripes written together (a large write on small strips).
// Part of the foreground path: it plans with stripe/write_plan.h, locks with stripe/'s lock table
// and works on Array::State through its queue. stripe_op.cpp holds its life cycle and error
// handling, stripe_op_parity.cpp the parity path, stripe_op_mirror.cpp mirrors and discards,
// stripe_run.cpp runs.
#pragma once

#include <algorithm>
#include <array>
#include <cassert>
#include <memory>
#include <vector>

#include "state/array_state.h"
#include "state/array_stats.h"
#include "stripe/buffer_pool.h"
#include "stripe/stripe_lock_table.h"
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

// A piece's bytes inside one data strip: [lo, hi) of strip `d`, starting `src_offset` bytes into
// the piece.
struct Segment {
  std::uint32_t d, lo, hi, src_offset;
};

// Calls fn(Segment) for each data strip piece `p` touches, in order.
template <typename Fn>
void for_each_segment(const Piece& p, std::uint32_t strip, Fn&& fn) {
  std::uint32_t pos = p.stripe_offset;
  const std::uint32_t end = p.stripe_offset + p.len;
  while (pos < end) {
    const std::uint32_t d = pos / strip;
    const std::uint32_t lo = pos % strip;
    const std::uint32_t n = std::min(end - pos, strip - lo);
    fn(Segment{d, lo, lo + n, pos - p.stripe_offset});
    pos += n;
  }
}

// A chunk for a parity job. The pointer is a staging buffer or a caller buffer whose alignment
// was checked (borrow_caller_data(), whole_stripe()), so adopt() cannot fail here.
inline ChunkView chunk_view(std::byte* data, std::uint32_t len) {
  auto view = ChunkView::adopt(data, len);
  assert(view.is_ok());
  return *view;
}

class StripeOp;

// One member I/O issued by a StripeOp.
class StripeMemberIo final : public TimedMemberRequest {
 public:
  StripeOp* owner = nullptr;
  std::uint32_t member = 0;
  // The device the I/O went to: a failed role may get a new one (a spare) while it is in
  // flight, and an error from the old device says nothing about the new one.
  const MemberDevice* device = nullptr;
  std::int32_t result = 0;
  std::uint64_t stripe = 0;  // the stripe it belongs to (a run's I/O: one of the run's)
  // A copy of another write of this operation to the member's hot replacement (see
  // Array::State::hold_replacement): its error gives the replace up, never fails the member.
  bool to_replacement = false;
  void on_done(std::int32_t res) override;
};

// Locked work on one stripe: a coalesced write, a degraded read, a mirrored write or a discard.
// Lifecycle (all on the owning queue's thread):
//   kIdle ─start()─► waiting for lock ─grant─► run_locked(): plan ─► kReading ─► compute
//        ─► [kJournaling: the write-hole record, journal/journal.h] ─► kWriting ─► finish():
//        retire the record, release lock, complete pieces, back to the free list.
// A member error during kReading marks the member failed and re-plans (still holding the lock).
//
// A run (stripe_run.cpp): the whole-stripe writes to consecutive stripes of one submission batch
// (ArrayQueue::Impl::add_to_run) become one operation over [stripe(), stripe() + stripe_count()):
// it takes their locks in ascending order, queues one parity job per stripe in one batch entry,
// writes one member I/O per stripe and member (IoContext merges them) and completes once. Once
// locked, a run that meets a failed member, or the write-hole journal on, splits into one
// operation per stripe (each given its locked stripe) and goes the usual way.
class StripeOp final : public Task {
 public:
  // kMirrorRead: a mirror read that failed on one copy, redone from another copy under the lock
  // and written back to the copies that could not be read (read-error correction).
  enum class Mode : std::uint8_t { kWrite, kDegradedRead, kMirrorWrite, kPunch, kMirrorRead };
  enum class Phase : std::uint8_t { kIdle, kLocking, kReading, kJournaling, kWriting };

  explicit StripeOp(ArrayQueue::Impl& queue) : q_(queue) {
    resume_.op = this;
    journal_retry_.op = this;
    journal_decide_.op = this;
  }

  void reset(Mode mode, std::uint64_t stripe);
  // Members that failed a read in this operation with a media error (classify_member_error):
  // planned around as if failed, then rewritten with the reconstructed contents.
  void set_unreadable(std::uint64_t members) noexcept { unreadable_ = members; }
  void add_piece(const Piece& piece) { pieces_.push_back(piece); }
  // Its pieces' data is in kernel buffer windows (kIoKernelBuffer writes, mirrors only): every
  // member write goes out as fixed-buffer I/O, and the operation takes no other piece.
  void set_kernel_buffer(bool kernel) noexcept { kernel_buffer_ = kernel; }
  bool kernel_buffer() const noexcept { return kernel_buffer_; }
  Mode mode() const noexcept { return mode_; }
  std::uint64_t stripe() const noexcept { return stripe_; }
  // The stripes it covers: [stripe(), stripe() + stripe_count()); more than one for a run.
  std::uint32_t stripe_count() const noexcept { return count_; }
  bool is_run() const noexcept { return count_ > 1; }
  // Runs: the most stripes one covers, and whether this operation, not started, may take the
  // next stripe, `stripe`, with `piece` (a whole-stripe write) as its one piece.
  static constexpr std::uint32_t kMaxRunStripes = 64;
  bool can_extend_run(std::uint64_t stripe, const Piece& piece) const noexcept;
  void extend_run(const Piece& piece);
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

  // Task: runs when the stripe lock is granted after waiting (a run: each of its locks).
  void run() override;
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
  // The write-hole journal (journal/journal.h): whether this update needs a record, building it,
  // reserving its ring space (retried from journal_retry_ when it has to wait) and writing it.
  bool journal_wanted();  // also chooses the record's members
  // After the parity: a record first when the journal wants one, then the writes; waits (from
  // journal_decide_) while the journal is turning off.
  void journal_or_write();
  void build_journal_record();
  void reserve_journal();
  void drop_journal();
  // Counts this update in (true) or out (false) of the queue's updates in flight without a
  // journal record (ArrayQueue::Impl::bare_updates; Array::State::activate_journal). In before it
  // asks whether the journal is on; out once done. True when counting out may have completed the
  // journal's coverage: the caller then calls Array::State::try_record_journal_coverage().
  bool count_bare(bool on);
  void issue_mirror_writes();
  void issue_punches();
  // Completes the operation. A successful write first waits until every member failure marked so
  // far is recorded in the superblocks (see Array::State::failures_marked).
  void finish(Status status);
  void release_buffers();
  StripeMemberIo& new_io(std::uint32_t member);
  void submit_io(StripeMemberIo& io);
  // Sorts the member errors of the phase just completed by class (state/member_errors.h): fails
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

  // Runs (stripe_run.cpp). The lock of the run's stripe stripe_ + i.
  StripeLockTable::Waiter& run_waiter(std::uint32_t i) noexcept {
    return i == 0 ? lock_ : run_locks_[i - 1];
  }
  bool whole_stripe(const Piece& piece) const noexcept;
  void start_run();
  void take_run_locks();  // ascending; waits (run()) for the next one only
  void plan_run();        // locked: split, or one encode job per stripe
  bool run_must_split() const noexcept;
  void split_run();  // one operation per stripe, each with its stripe's lock
  void issue_run_writes();
  void release_locks();
  // The stripe piece `i` belongs to.
  std::uint64_t piece_stripe(std::size_t i) const noexcept {
    return count_ > 1 ? stripe_ + i : stripe_;
  }

  ArrayQueue::Impl& q_;
  Mode mode_ = Mode::kWrite;
  Phase phase_ = Phase::kIdle;
  std::uint64_t stripe_ = 0;
  std::uint32_t count_ = 1;       // stripes covered (a run: more than one; piece i is stripe i's)
  std::uint32_t locks_held_ = 0;  // a run taking its locks: how many it holds
  std::vector<StripeLockTable::Waiter> run_locks_;  // a run's locks of stripes 1..count_-1
  std::array<PoolBuffer, 2> run_parity_;            // a run's P and Q, count_ strips each
  // A run's stripes whose member refused a write as malformed (bit i: stripe_ + i) and the
  // first such error: their pieces fail, the others' do not.
  std::uint64_t stripe_errors_ = 0;
  Status stripe_error_;
  std::uint32_t bitmap_stripes_ = 0;  // stripes from stripe_ declared to the bitmap (hold_bitmap)
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
  bool kernel_buffer_ = false;    // see set_kernel_buffer()
  bool fua_ = false;    // a piece asked for FUA: every member write of the operation goes out FUA
  PoolBuffer scratch_;  // kMirrorRead: what the good copy held; zero_writes_: zeroes
  enum class ComputeStage : std::uint8_t { kReconstruct, kEncode };
  ComputeStage compute_stage_ = ComputeStage::kReconstruct;
  std::vector<StripeJob> jobs_;
  // build_extents()'s scratch, kept between operations so that planning allocates nothing once
  // the operation has been used: row intervals, the same merged, and per data strip the parts
  // of the current extent the pieces cover.
  using Interval = std::pair<std::uint32_t, std::uint32_t>;
  std::vector<Interval> rows_scratch_;
  std::vector<Interval> merged_scratch_;
  std::array<std::vector<Interval>, kMaxDataChunks> cover_scratch_;
  StripeLockTable::Waiter lock_;
  // The journal record of this update: its bytes, where it goes, and its ring space once held.
  PoolBuffer journal_buf_;
  AlignedBuffer journal_big_;  // a record larger than the pool's largest buffer
  std::byte* journal_data_ = nullptr;
  std::uint64_t journal_bytes_ = 0;
  std::array<std::uint32_t, 2> journal_members_{};
  std::uint32_t journal_targets_ = 0;
  Journal::Reservation journal_res_;
  bool journal_held_ = false;     // ring space reserved
  bool journal_entered_ = false;  // Journal::enter() said kJournal; leave() owed
  bool bare_ = false;             // counted in the queue's bare_updates
  struct JournalRetry final : Task {
    StripeOp* op = nullptr;
    void run() override { op->reserve_journal(); }
  } journal_retry_;
  struct JournalDecide final : Task {
    StripeOp* op = nullptr;
    void run() override { op->journal_or_write(); }
  } journal_decide_;
  // Posted back once a member failure this write may have planned around is on disk.
  struct ResumeAfterRecord final : Task {
    StripeOp* op = nullptr;
    void run() override;
  } resume_;
};

}  // namespace graid
