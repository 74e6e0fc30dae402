// StripeOp over a run of whole stripes (queue/stripe_op.h): how a run grows in a submission
// batch, takes its locks, computes one parity job per stripe and writes one member I/O per
// stripe and member; and the queue's rule that keeps its operations in order while a run is
// still taking its locks. docs/stripe-engine.md ("Runs of whole stripes") states the rules.
#include <spdlog/spdlog.h>

#include "queue/array_queue_impl.h"

namespace graid {

bool StripeOp::whole_stripe(const Piece& piece) const noexcept {
  const Geometry& g = q_.array.geometry;
  return !piece.zero && piece.buf != nullptr && piece.stripe_offset == 0 &&
         piece.len == g.stripe_data_bytes() && is_chunk_aligned(piece.buf);
}

bool StripeOp::can_extend_run(std::uint64_t stripe, const Piece& piece) const noexcept {
  const Array::State& a = q_.array;
  const std::uint64_t strip = a.geometry.strip_bytes();
  if (mode_ != Mode::kWrite || kernel_buffer_ || phase_ != Phase::kIdle) return false;
  if (stripe != stripe_ + count_ || count_ >= kMaxRunStripes) return false;
  // P and Q of the whole run are one staging buffer each.
  if ((count_ + 1) * strip > kMaxStripBytes) return false;
  // One whole-stripe piece per stripe (a second piece on a stripe keeps it a single operation).
  if (pieces_.size() != count_ || !whole_stripe(piece)) return false;
  if (count_ == 1 && !whole_stripe(pieces_[0])) return false;
  // Not while the journal is on or a member is failed: the run would split once locked.
  if (a.journal && a.journal->active()) return false;
  return a.failed_count.load(std::memory_order_relaxed) == 0;
}

void StripeOp::extend_run(const Piece& piece) {
  pieces_.push_back(piece);
  ++count_;
}

void StripeOp::start_run() {
  // The newest operation of this queue on these stripes is this run now, which takes no piece:
  // a later write must not join an older one waiting for one of its stripes.
  if (!q_.waiting.empty()) {
    for (std::uint32_t i = 0; i < count_; ++i)
      q_.waiting.erase(stripe_ + i);
  }
  run_locks_.resize(count_ - 1);
  for (std::uint32_t i = 1; i < count_; ++i) {
    StripeLockTable::Waiter& w = run_locks_[i - 1];
    w.stripe = stripe_ + i;
    w.home = &q_.ctx;
    w.grant = this;
  }
  locks_held_ = 0;
  take_run_locks();
}

void StripeOp::take_run_locks() {
  // Ascending, one at a time: while it waits, it waits for the stripe above all it holds, as a
  // job's StripeRangeLock does, so no cycle of waits can form (docs/stripe-engine.md).
  while (locks_held_ < count_) {
    if (!q_.array.locks.acquire(run_waiter(locks_held_))) {
      if (q_.claimer == nullptr) q_.claim(*this);
      return;  // run() goes on once the holder hands this stripe over
    }
    ++locks_held_;
  }
  if (q_.claimer == this) q_.end_claim();
  run_locked();
}

bool StripeOp::run_must_split() const noexcept {
  const Array::State& a = q_.array;
  if (unreadable_ != 0) return true;
  if (a.journal && a.journal->active()) return true;
  for (std::uint32_t m = 0; m < a.geometry.members(); ++m)
    if (a.is_failed(m)) return true;
  return false;
}

void StripeOp::plan_run() {
  Array::State& a = q_.array;
  // Counted in before asking, as journal_or_write() does: a journal that turns on after this
  // look waits for the run to end before it claims coverage.
  if (a.journal) count_bare(true);
  stripe_errors_ = 0;
  stripe_error_ = Status::ok();
  if (run_must_split()) {
    split_run();
    return run_locked();  // this operation, now its first stripe's alone
  }
  release_buffers();
  const Geometry& g = a.geometry;
  const std::uint32_t strip = g.strip_bytes();
  const std::uint32_t k = g.data_strips();
  const std::uint32_t npar = g.parity_strips();
  for (std::uint32_t p = 0; p < npar; ++p) {
    auto buf = q_.buffers.get(std::size_t{count_} * strip);
    if (!buf) return finish(buf.status());
    run_parity_[p] = std::move(*buf);
  }
  jobs_.clear();
  for (std::uint32_t i = 0; i < count_; ++i) {
    StripeJob job;
    job.op = ParityOp::kEncode;
    job.scheme = g.parity_scheme();
    job.k = k;
    job.len = strip;
    for (std::uint32_t d = 0; d < k; ++d)
      job.chunk[d] = chunk_view(pieces_[i].buf + std::size_t{d} * strip, strip);
    for (std::uint32_t p = 0; p < npar; ++p)
      job.chunk[k + p] = run_parity_[p].view(std::size_t{i} * strip, strip);
    jobs_.push_back(job);
  }
  compute_stage_ = ComputeStage::kEncode;
  q_.queue_parity(*this);  // parity_done() -> after_encode() -> issue_writes()
}

void StripeOp::split_run() {
  ++q_.stats.run_splits;
  std::array<StripeOp*, kMaxRunStripes> split{};
  const std::uint32_t n = count_;
  for (std::uint32_t i = 1; i < n; ++i) {
    StripeOp& op = q_.new_op(Mode::kWrite, stripe_ + i);
    op.add_piece(pieces_[i]);
    q_.array.locks.transfer(run_waiter(i), op.lock_);
    op.phase_ = Phase::kLocking;
    split[i] = &op;
  }
  pieces_.resize(1);
  count_ = 1;
  locks_held_ = 1;
  // What this operation holds stays held until it finishes: its bare count and, after a
  // re-plan, the bitmap range of the whole run (bitmap_stripes_).
  for (std::uint32_t i = 1; i < n; ++i)
    split[i]->run_locked();
}

void StripeOp::issue_run_writes() {
  const Geometry& g = q_.array.geometry;
  const std::uint32_t strip = g.strip_bytes();
  const std::uint32_t k = g.data_strips();
  const std::uint32_t chunks = k + g.parity_strips();
  phase_ = Phase::kWriting;
  ios_used_ = 0;
  for (std::uint32_t i = 0; i < count_; ++i) {
    const std::uint64_t s = stripe_ + i;
    const std::uint64_t at = q_.array.device_offset(s * strip);
    for (std::uint32_t c = 0; c < chunks; ++c) {
      StripeMemberIo& io = new_io(g.chunk_member(s, c));
      io.stripe = s;
      io.op = MemberOp::kWrite;
      io.offset = at;
      io.buf = c < k ? pieces_[i].buf + std::size_t{c} * strip
                     : run_parity_[c - k].data() + std::size_t{i} * strip;
      io.len = strip;
      io.fua = fua_;
    }
  }
  const std::size_t n = ios_used_;
  for (std::size_t i = 0; i < n; ++i)
    submit_io(*ios_[i]);
}

void StripeOp::release_locks() {
  if (phase_ == Phase::kIdle) return;
  if (count_ == 1) {
    q_.array.locks.release(lock_, q_.ctx);
    return;
  }
  for (std::uint32_t i = 0; i < locks_held_; ++i)
    q_.array.locks.release(run_waiter(i), q_.ctx);
}

bool ArrayQueue::Impl::add_to_run(std::uint64_t stripe, const Piece& piece) {
  if (pending_order.empty()) return false;
  StripeOp& last = *pending_order.back();
  if (!last.can_extend_run(stripe, piece)) return false;
  last.extend_run(piece);
  pending[stripe] = &last;  // a later piece of the batch there starts an operation after it
  return true;
}

void ArrayQueue::Impl::claim(StripeOp& run) {
  claimer = &run;
  claim_first = run.stripe();
  claim_end = run.stripe() + run.stripe_count();
}

bool ArrayQueue::Impl::must_park(const StripeOp& op) const noexcept {
  if (claimer == nullptr) return false;  // nothing parked either (end_claim)
  if (op.is_run()) return true;          // one run takes its locks at a time
  const auto touches = [&](std::uint64_t first, std::uint64_t end) {
    return op.stripe() < end && first < op.stripe() + op.stripe_count();
  };
  if (touches(claim_first, claim_end)) return true;
  for (const StripeOp* p : parked)
    if (touches(p->stripe(), p->stripe() + p->stripe_count())) return true;
  return false;
}

void ArrayQueue::Impl::end_claim() {
  claimer = nullptr;
  // Start what parked, in order; each parks again behind a run among them that has to wait.
  std::vector<StripeOp*> restart;
  restart.swap(parked);
  for (StripeOp* op : restart)
    op->start();
}

}  // namespace graid
