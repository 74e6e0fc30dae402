// StripeOp, its life: locking, planning, member I/O and its errors, and finishing (see
// queue/stripe_op.h for the state machine). The parity path is in stripe_op_parity.cpp, mirrors
// and whole-stripe discards in stripe_op_mirror.cpp.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>

#include "queue/array_queue_impl.h"

namespace graid {

void StripeMemberIo::on_done(std::int32_t res) {
  if (to_replacement) {
    if (res < 0) owner->queue().array.replacement_failed("write", res);
    owner->queue().array.release_replacement();
    res = 0;  // the operation's outcome is the member's
  } else {
    record_member_io(owner->queue(), member, *this, res);
  }
  result = res;
  owner->member_io_done(*this);
}

void StripeOp::reset(Mode mode, std::uint64_t stripe) {
  mode_ = mode;
  phase_ = Phase::kIdle;
  stripe_ = stripe;
  count_ = 1;
  locks_held_ = 0;
  stripe_errors_ = 0;
  stripe_error_ = Status::ok();
  bitmap_stripes_ = 0;
  pieces_.clear();
  extents_used_ = 0;
  ios_used_ = 0;
  ios_left_ = 0;
  bitmap_held_ = false;
  replans_ = 0;
  unreadable_ = 0;
  zero_writes_ = false;
  kernel_buffer_ = false;
  lock_.stripe = stripe;
  lock_.home = &q_.ctx;
  lock_.grant = this;
}

void StripeOp::start() {
  if (q_.must_park(*this)) {
    // A run of this queue is still taking its locks and has not queued on every stripe yet:
    // start after it (and after what parked before), so that this queue's operations meet on
    // each stripe in the order they were started.
    q_.parked.push_back(this);
    return;
  }
  phase_ = Phase::kLocking;
  if (count_ > 1) return start_run();
  if (q_.array.locks.acquire(lock_)) {
    run_locked();
    return;
  }
  // run() is called on this thread once the holder hands the lock over; until then, writes of
  // this queue to the stripe may join this operation (ArrayQueue::Impl::pending_write_op).
  q_.note_waiting(*this);
}

void StripeOp::run() {
  if (count_ > 1 && locks_held_ < count_) {
    ++locks_held_;  // the one it waited for
    take_run_locks();
    return;
  }
  q_.forget_waiting(*this);
  run_locked();
}

void StripeOp::run_locked() {
  Array::State& a = q_.array;
  if (a.array_failed()) {
    finish(make_error(Errc::kIoError, "array has failed: {} members lost", a.failed_count.load()));
    return;
  }
  ios_used_ = 0;
  fua_ = std::any_of(pieces_.begin(), pieces_.end(),
                     [](const Piece& p) { return (p.io->flags & kIoFua) != 0; });
  if (mode_ == Mode::kMirrorRead) {
    issue_mirror_read();
    return;
  }
  if (count_ > 1) return plan_run();
  if (mode_ == Mode::kPunch && a.journal) {
    // A discard cannot be replayed, and a journal record of this stripe older than it would be
    // replayed over it after a crash: while the journal is on, the stripe's zeroes are written
    // (and journalled) instead. Off, it goes out without a record: counted in first, as writes
    // are (journal_or_write).
    count_bare(true);
    if (a.journal->active()) mode_ = Mode::kWrite;
  }
  if (mode_ == Mode::kMirrorWrite || mode_ == Mode::kPunch) {
    if (Status st = hold_bitmap(); !st) {
      finish(st);
      return;
    }
    if (mode_ == Mode::kMirrorWrite) {
      issue_mirror_writes();
    } else {
      issue_punches();
    }
    return;
  }
  release_buffers();
  if (!build_extents()) {
    finish(make_error(Errc::kIoError, "stripe {}: more members failed than the level tolerates",
                      stripe_));
    return;
  }
  issue_reads();
}

bool StripeOp::chunk_unreadable(std::uint32_t c) const noexcept {
  if (unreadable_ == 0) return false;
  return (unreadable_ >> q_.array.geometry.chunk_member(stripe_, c)) & 1;
}

StripeMemberIo& StripeOp::new_io(std::uint32_t member) {
  if (ios_used_ == ios_.size()) ios_.push_back(std::make_unique<StripeMemberIo>());
  StripeMemberIo& io = *ios_[ios_used_++];
  io.owner = this;
  io.member = member;
  io.stripe = stripe_;
  io.result = 0;
  io.fua = false;
  io.to_replacement = false;
  return io;
}

void StripeOp::submit_io(StripeMemberIo& io) {
  Array::State& a = q_.array;
  // A hot replace in progress: the write goes to the new device as well (held before the role's
  // device is loaded: see hold_replacement).
  MemberDevice* copy = nullptr;
  if (io.op != MemberOp::kRead && io.op != MemberOp::kFlush)
    copy = a.hold_replacement(io.member, io.stripe, io.offset);
  ++ios_left_;
  MemberDevice& device = *a.members[io.member];
  io.device = &device;
  if (copy == &device) {
    a.release_replacement();  // swapped in already: it is the role's device
    copy = nullptr;
  }
  if (copy != nullptr && kernel_buffer_ && copy->io_mode() == MemberIoMode::kPassthrough) {
    // A hot replace onto an NVMe passthrough drive began after issue_mirror_writes() looked: its
    // commands cannot take a kernel buffer, so the replacement cannot have this write. Give the
    // replace up (the role's device keeps it, with every write); nothing is lost.
    a.release_replacement();
    a.replacement_failed("a zero-copy write", -EOPNOTSUPP);
    copy = nullptr;
  }
  if (copy != nullptr) {
    const StripeMemberIo& primary = io;
    StripeMemberIo& dup = new_io(primary.member);
    dup.op = primary.op;
    dup.offset = primary.offset;
    dup.buf = primary.buf;
    dup.len = primary.len;
    dup.fua = primary.fua;
    dup.to_replacement = true;
    dup.device = copy;
    ++ios_left_;
    submit_timed(*copy, q_.ctx, dup);
  }
  submit_timed(device, q_.ctx, io);
}
void StripeOp::member_io_done(StripeMemberIo& /*io*/) {
  if (--ios_left_ != 0) return;
  bool replan = false;
  if (Status st = absorb_member_errors(replan); !st) return finish(st);
  const bool had_errors = std::any_of(ios_.begin(), ios_.begin() + static_cast<long>(ios_used_),
                                      [](const auto& io) { return io->result < 0; });
  if (phase_ == Phase::kReading) {
    if (had_errors || replan) {
      // Plan again with the member now failed or unreadable (bounded: each round fails or
      // marks at least one more member).
      if (++replans_ > 2 * static_cast<int>(q_.array.geometry.members())) {
        finish(make_error(Errc::kInternal, "stripe {}: re-planning did not converge", stripe_));
        return;
      }
      run_locked();
      return;
    }
    if (mode_ == Mode::kMirrorRead) return after_mirror_read();
    start_compute();
    return;
  }
  if (phase_ == Phase::kJournaling) {
    if (had_errors || replan) {
      // A parity member could not take the record: it is failed now (or has a new device), so
      // plan again; the record is abandoned (replaying it would only redo this same update).
      drop_journal();
      if (++replans_ > 2 * static_cast<int>(q_.array.geometry.members())) {
        finish(make_error(Errc::kInternal, "stripe {}: re-planning did not converge", stripe_));
        return;
      }
      run_locked();
      return;
    }
    issue_writes();
    return;
  }
  if (replan) {
    // A member refused a discard: write the stripe's zeroes instead, on every member, so parity
    // (or the other copies) and "reads after a discard return zeroes" both hold.
    if (mode_ == Mode::kPunch) mode_ = Mode::kWrite;
    zero_writes_ = true;
    if (++replans_ > 2 * static_cast<int>(q_.array.geometry.members())) {
      finish(make_error(Errc::kInternal, "stripe {}: re-planning did not converge", stripe_));
      return;
    }
    run_locked();
    return;
  }
  // kWriting: the data is on every live member it belongs to (failed members were recorded).
  finish(Status::ok());
}

Status StripeOp::absorb_member_errors(bool& replan) {
  Array::State& a = q_.array;
  replan = false;
  Status request_error;
  for (std::size_t i = 0; i < ios_used_; ++i) {
    const StripeMemberIo& io = *ios_[i];
    if (io.result >= 0 || io.to_replacement) continue;
    if (a.members[io.member].get() != io.device) {
      // The role has another device now (a spare took the failed one's place while this I/O
      // was in flight): plan the stripe again with it; the old device's error is no news.
      replan = true;
      continue;
    }
    const char* what = io.op == MemberOp::kRead    ? "read"
                       : io.op == MemberOp::kWrite ? "write"
                       : io.op == MemberOp::kFlush ? "flush"
                                                   : "zeroing";
    switch (classify_member_error(io.op, io.result)) {
      case MemberErrorClass::kUnsupported:
        if (io.op == MemberOp::kDiscard || io.op == MemberOp::kWriteZeroes) {
          a.zeroing_refused(io.op, io.member, io.result);
          replan = true;
          continue;
        }
        break;  // an unsupported read or write: the device is unusable
      case MemberErrorClass::kRequest:
        spdlog::error(
            "graid: array '{}': member {} refused a {} at byte {} ({} bytes) as "
            "malformed: {}; the request fails, the member stays",
            a.name, io.member, what, io.offset, io.len, std::strerror(-io.result));
        if (io.op != MemberOp::kRead && a.bitmap && bitmap_held_) {
          // The other members took their parts of this update: the stripe may be inconsistent
          // now, so its region's bit stays set until a re-sync passes it.
          a.bitmap->pin(io.stripe * a.geometry.strip_bytes());
        }
        if (count_ > 1) {
          // A run: the request error is its stripe's alone (finish() fails that piece).
          stripe_errors_ |= std::uint64_t{1} << (io.stripe - stripe_);
          if (stripe_error_.is_ok()) {
            stripe_error_ = make_error(Errc::kInternal, "member {} refused a {} at byte {}: {}",
                                       io.member, what, io.offset, std::strerror(-io.result));
          }
          continue;
        }
        if (request_error.is_ok()) {
          request_error = make_error(Errc::kInternal, "member {} refused a {} at byte {}: {}",
                                     io.member, what, io.offset, std::strerror(-io.result));
        }
        continue;
      case MemberErrorClass::kMedia:
        if (((unreadable_ >> io.member) & 1) == 0 && a.read_errors &&
            !a.read_errors->record(io.member)) {
          spdlog::warn(
              "graid: array '{}': member {} ({}): read error at byte {}: {}; "
              "reconstructing and rewriting it ({} corrected on this member)",
              a.name, io.member, a.members[io.member]->path(), io.offset, std::strerror(-io.result),
              a.read_errors->total(io.member));
          unreadable_ |= std::uint64_t{1} << io.member;
          replan = true;
          continue;
        }
        break;  // past the read-error limit, or unreadable again: fail it
      case MemberErrorClass::kDevice:
        break;
    }
    Status st = a.fail_member(
        io.member,
        fmt::format("{} error at byte {}: {}", what, io.offset, std::strerror(-io.result)),
        io.device);
    (void)st;  // a failure to record it on the survivors is logged by fail_member
  }
  if (a.array_failed()) {
    return make_error(Errc::kIoError, "stripe {}: member I/O failed beyond redundancy", stripe_);
  }
  return request_error;
}

Status StripeOp::ensure(PoolBuffer& b, std::uint32_t len) {
  if (b.size() >= len) return Status::ok();
  q_.buffers.put(std::move(b));
  auto buf = q_.buffers.get(len);
  if (!buf) return buf.status();
  b = std::move(*buf);
  return Status::ok();
}

void StripeOp::parity_done(Status status) {
  if (!status) return finish(status);
  if (compute_stage_ == ComputeStage::kReconstruct) return after_reconstruct();
  after_encode();
}

Status StripeOp::hold_bitmap() {
  Array::State& a = q_.array;
  if (!a.bitmap || bitmap_held_) return Status::ok();
  const std::uint64_t strip = a.geometry.strip_bytes();
  // A run's stripes are consecutive member rows: one range, which may straddle regions (each
  // region counts it once in flight, and end_write() counts the same range out).
  GRAID_RETURN_IF_ERROR(a.bitmap_begin(stripe_ * strip, count_ * strip));
  bitmap_held_ = true;
  bitmap_stripes_ = count_;
  return Status::ok();
}

void StripeOp::release_buffers() {
  // Most of an extent's slots are empty (a 4K write holds three buffers of 2 x kMaxStripeChunks):
  // skip them here rather than in an out-of-line put() per slot.
  for (std::size_t i = 0; i < extents_used_; ++i) {
    for (auto& b : extents_[i].image)
      if (b.data() != nullptr) q_.buffers.put(std::move(b));
    for (auto& b : extents_[i].old)
      if (b.data() != nullptr) q_.buffers.put(std::move(b));
  }
  extents_used_ = 0;
  q_.buffers.put(std::move(scratch_));
  for (auto& b : run_parity_)
    q_.buffers.put(std::move(b));
}

void StripeOp::ResumeAfterRecord::run() {
  Array::State& a = op->q_.array;
  op->finish(a.array_failed()
                 ? make_error(Errc::kIoError, "array failed before the write could be acknowledged")
                 : Status::ok());
}

void StripeOp::finish(Status status) {
  Array::State& a = q_.array;
  if (status.is_ok() && mode_ != Mode::kDegradedRead && mode_ != Mode::kMirrorRead &&
      !a.failures_durable_or_park(q_.ctx, resume_)) {
    return;  // resume_ finishes it once the failure is recorded
  }
  if (bitmap_held_) {
    const std::uint64_t strip = a.geometry.strip_bytes();
    a.bitmap->end_write(stripe_ * strip, bitmap_stripes_ * strip);
    bitmap_held_ = false;
  }
  // A run's pieces whose stripe a member refused fail alone (absorb_member_errors).
  auto piece_status = [&](std::size_t i) -> const Status& {
    return status.is_ok() && ((stripe_errors_ >> (piece_stripe(i) - stripe_)) & 1) != 0
               ? stripe_error_
               : status;
  };
  if (status.is_ok() && a.bad_count.load(std::memory_order_acquire) != 0 &&
      mode_ != Mode::kDegradedRead && mode_ != Mode::kMirrorRead) {
    // Written: the lost ranges it covers read again (array/bad_ranges.cpp).
    const std::uint64_t stripe_bytes = a.geometry.stripe_data_bytes();
    for (std::size_t i = 0; i < pieces_.size(); ++i) {
      const Piece& p = pieces_[i];
      if (piece_status(i).is_ok())
        a.lost_ranges_rewritten(piece_stripe(i) * stripe_bytes + p.stripe_offset, p.len);
    }
  }
  release_buffers();
  drop_journal();  // its home writes are done (or the update gave up)
  const bool coverage = count_bare(false);
  release_locks();
  phase_ = Phase::kIdle;
  for (std::size_t i = 0; i < pieces_.size(); ++i)
    q_.part_done(*pieces_[i].io, piece_status(i));
  q_.recycle(*this);
  if (coverage) a.try_record_journal_coverage();
}

}  // namespace graid
