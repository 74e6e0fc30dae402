// ArrayQueue: a thread's entry to an array. Splits requests by strip and stripe, sends reads that
// need no lock straight to members, gathers the writes of one submission batch into one
// StripeOp per stripe (coalescing), and completes every request exactly once.
#include <spdlog/spdlog.h>

#include <cstring>

#include "queue/array_queue_impl.h"

namespace graid {

void ArrayQueue::Impl::begin_io(ArrayIo& io) {
  io.parts_left_ = 1;  // the submission itself, released at the end of submit()
  io.first_error_ = Status::ok();
  ++in_flight;
}

void ArrayQueue::Impl::add_parts(ArrayIo& io, std::uint32_t n) {
  io.parts_left_ += n;
}

void ArrayQueue::Impl::part_done(ArrayIo& io, const Status& status) {
  if (!status.is_ok() && io.first_error_.is_ok()) io.first_error_ = status;
  if (--io.parts_left_ != 0) return;
  --in_flight;
  Status result = std::move(io.first_error_);
  io.on_complete(std::move(result));
}

void ArrayQueue::Impl::schedule_kick() {
  if (kick_scheduled) return;
  kick_scheduled = true;
  ctx.defer(kick_task);
}

void ArrayQueue::Impl::kick() {
  kick_scheduled = false;
  // Start the batch's stripe operations in submission order (stripe locks are FIFO, so writes of
  // this thread to one stripe apply in the order they were submitted).
  std::vector<StripeOp*> batch;
  batch.swap(pending_order);
  pending.clear();
  std::vector<std::pair<ArrayIo*, Status>> done;
  done.swap(rejected);
  for (StripeOp* op : batch)
    op->start();
  for (auto& [io, status] : done) {
    --in_flight;
    io->on_complete(std::move(status));
  }
  // Hand the capacity back, so that the next batch allocates nothing, unless what ran queued a
  // new batch meanwhile (that one waits for the kick it scheduled).
  if (pending_order.empty()) {
    batch.clear();
    pending_order.swap(batch);
  }
  if (rejected.empty()) {
    done.clear();
    rejected.swap(done);
  }
}

StripeOp& ArrayQueue::Impl::new_op(StripeOp::Mode mode, std::uint64_t stripe) {
  StripeOp& op = ops.get(*this);
  op.reset(mode, stripe);
  return op;
}

void ArrayQueue::Impl::recycle(StripeOp& op) {
  ops.put(op);
}

namespace {

// Whether a piece at [stripe_offset, +len) in `mode` may join `op`, an operation on its stripe
// that has not started its work. A mirror operation sends every piece to every copy at once, and
// each copy may apply overlapping pieces in a different order: an overlapping piece starts a new
// operation, which the stripe lock (FIFO) runs after this one on every copy. Parity operations
// apply their pieces in order into one image, so they may overlap. A whole-stripe discard takes
// nothing else, nor does a run (one whole-stripe piece per stripe).
// Pieces in kernel buffers and pieces in memory never share an operation (a refusal of the
// former must not fail the latter).
bool joinable(const StripeOp& op, StripeOp::Mode mode, std::uint32_t stripe_offset,
              std::uint32_t len, bool kernel) {
  return op.mode() == mode && mode != StripeOp::Mode::kPunch && !op.is_run() &&
         op.kernel_buffer() == kernel &&
         !(mode == StripeOp::Mode::kMirrorWrite && op.overlaps(stripe_offset, len));
}

}  // namespace

StripeOp& ArrayQueue::Impl::pending_write_op(std::uint64_t stripe, StripeOp::Mode mode,
                                             std::uint32_t stripe_offset, std::uint32_t len,
                                             bool kernel) {
  if (auto it = pending.find(stripe); it != pending.end()) {
    if (joinable(*it->second, mode, stripe_offset, len, kernel)) {
      ++stats.coalesced;
      return *it->second;
    }
  } else if (auto w = waiting.find(stripe); w != waiting.end()) {
    // Nothing of this batch on the stripe yet: the queue's newest operation waiting for the
    // stripe's lock takes the piece, if it can.
    if (joinable(*w->second, mode, stripe_offset, len, kernel)) {
      ++stats.coalesced;
      ++stats.coalesced_waiting;
      return *w->second;
    }
  }
  StripeOp& op = new_op(mode, stripe);
  op.set_kernel_buffer(kernel);
  pending[stripe] = &op;
  pending_order.push_back(&op);
  schedule_kick();
  return op;
}

void ArrayQueue::Impl::note_waiting(StripeOp& op) {
  waiting[op.stripe()] = &op;
}

void ArrayQueue::Impl::forget_waiting(StripeOp& op) {
  if (auto it = waiting.find(op.stripe()); it != waiting.end() && it->second == &op) {
    waiting.erase(it);
  }
}

// Calls fn(array_offset, len, buffer_offset) for each piece of [offset, offset+len) that stays
// inside one unit (a strip or a stripe) of `unit` bytes.
template <typename Fn>
static void split_by(std::uint64_t offset, std::uint32_t len, std::uint64_t unit, Fn&& fn) {
  std::uint64_t pos = offset;
  const std::uint64_t end = offset + len;
  while (pos < end) {
    const std::uint64_t n = std::min(end - pos, unit - pos % unit);
    fn(pos, static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(pos - offset));
    pos += n;
  }
}

void ArrayQueue::Impl::submit_read(ArrayIo& io, std::uint64_t offset) {
  // Mirrors: every strip of one request from the same copy, so that its strips on one member
  // are contiguous and go out as one merged member read (IoContextOptions::merge); requests
  // take the copies in turn.
  const std::uint32_t copy = read_rotor++;
  split_by(offset, io.len, array.geometry.strip_bytes(),
           [&](std::uint64_t at, std::uint32_t n, std::uint32_t boff) {
             read_segment(io, at, n, io.buf + boff, copy);
           });
}

void ArrayQueue::Impl::submit_write(ArrayIo& io, std::uint64_t offset) {
  const Geometry& g = array.geometry;
  // The write path is the level's: direct member writes without redundancy, a stripe
  // operation that writes every copy (mirrors) or data and parity together (parity).
  if (g.redundancy() == Redundancy::kNone) {
    split_by(offset, io.len, g.strip_bytes(),
             [&](std::uint64_t at, std::uint32_t n, std::uint32_t boff) {
               const DataLocation loc = g.locate(at);
               direct_io(io, MemberOp::kWrite, loc.member, loc.member_offset, n, io.buf + boff, at);
             });
    return;
  }
  const auto mode =
      g.redundancy() == Redundancy::kParity ? StripeOp::Mode::kWrite : StripeOp::Mode::kMirrorWrite;
  const std::uint64_t stripe_bytes = g.stripe_data_bytes();
  const bool kernel = (io.flags & kIoKernelBuffer) != 0;  // mirrors only (submit)
  split_by(offset, io.len, stripe_bytes,
           [&](std::uint64_t at, std::uint32_t n, std::uint32_t boff) {
             const auto stripe_offset = static_cast<std::uint32_t>(at % stripe_bytes);
             Piece piece;
             piece.io = &io;
             piece.stripe_offset = stripe_offset;
             piece.len = n;
             piece.buf = io.buf + boff;
             add_parts(io, 1);
             // A whole stripe right after the batch's last one: the next stripe of its run.
             if (n == stripe_bytes && mode == StripeOp::Mode::kWrite && !kernel &&
                 add_to_run(at / stripe_bytes, piece)) {
               return;
             }
             pending_write_op(at / stripe_bytes, mode, stripe_offset, n, kernel).add_piece(piece);
           });
}

void ArrayQueue::Impl::submit_discard(ArrayIo& io, std::uint64_t offset) {
  const Geometry& g = array.geometry;
  // Write-zeroes that must keep the range allocated, or a discard (which may deallocate).
  const bool keep = io.kind == IoKind::kWriteZeroes && (io.flags & kIoNoUnmap) != 0;
  const MemberOp zeroing = keep ? MemberOp::kWriteZeroes : MemberOp::kDiscard;
  if (g.redundancy() == Redundancy::kNone) {
    split_by(offset, io.len, g.strip_bytes(),
             [&](std::uint64_t at, std::uint32_t n, std::uint32_t) {
               const DataLocation loc = g.locate(at);
               direct_io(io, zeroing, loc.member, loc.member_offset, n, nullptr, at);
             });
    return;
  }
  const bool parity = g.redundancy() == Redundancy::kParity;
  const std::uint64_t stripe_bytes = g.stripe_data_bytes();
  const bool members_can = array.zeroing_supported(zeroing).load();
  split_by(offset, io.len, stripe_bytes, [&](std::uint64_t at, std::uint32_t n, std::uint32_t) {
    const std::uint64_t stripe = at / stripe_bytes;
    // A whole stripe of zeros is consistent parity too: zero every member. A part of one is
    // written as zeros, so parity follows (as is a whole one when members cannot zero).
    const bool whole = parity && n == stripe_bytes && members_can;
    const auto mode = whole    ? StripeOp::Mode::kPunch
                      : parity ? StripeOp::Mode::kWrite
                               : StripeOp::Mode::kMirrorWrite;
    const auto stripe_offset = static_cast<std::uint32_t>(at % stripe_bytes);
    StripeOp& op = pending_write_op(stripe, mode, stripe_offset, n);
    Piece piece;
    piece.io = &io;
    piece.stripe_offset = stripe_offset;
    piece.len = n;
    piece.zero = true;
    piece.keep = keep;
    op.add_piece(piece);
    add_parts(io, 1);
  });
}

void ArrayQueue::Impl::dispatch(ArrayIo& io, std::uint64_t offset) {
  switch (io.kind) {
    case IoKind::kRead:
      ++stats.reads;
      submit_read(io, offset);
      break;
    case IoKind::kWrite:
      ++stats.writes;
      submit_write(io, offset);
      break;
    case IoKind::kDiscard:
    case IoKind::kWriteZeroes:
      ++stats.discards;
      submit_discard(io, offset);
      break;
    case IoKind::kFlush:
      ++stats.flushes;
      submit_flush(io, false, 0);
      break;
  }
}

bool ArrayQueue::Impl::passthrough_member() const {
  for (std::uint32_t m = 0; m < array.geometry.members(); ++m)
    if (const auto& d = array.members[m]; d && d->io_mode() == MemberIoMode::kPassthrough)
      return true;
  return false;
}

void ArrayQueue::Impl::submit(ArrayIo& io, std::uint64_t base, std::uint64_t limit) {
  begin_io(io);
  Status invalid;
  const bool data = io.kind == IoKind::kRead || io.kind == IoKind::kWrite;
  if (base > array.capacity || limit > array.capacity - base) {
    // A VdInfo the caller built (or kept after the VD changed) that reaches past the array:
    // member I/O past the data area would fail every member it touched.
    invalid = make_error(Errc::kOutOfRange, "VD [{}, +{}) reaches beyond the array's {} bytes",
                         base, limit, array.capacity);
  } else if (io.kind != IoKind::kFlush) {
    const std::uint32_t block = array.logical_block;
    if (io.len == 0 || io.offset % block != 0 || io.len % block != 0) {
      invalid = make_error(Errc::kInvalidArgument,
                           "request [{}, +{}) is empty or not a multiple of the array's {}-byte "
                           "logical block",
                           io.offset, io.len, block);
    } else if (io.offset > limit || io.len > limit - io.offset) {
      invalid = make_error(Errc::kOutOfRange, "request [{}, +{}) ends beyond the device's {} bytes",
                           io.offset, io.len, limit);
    } else if (data && (io.buf == nullptr || reinterpret_cast<std::uintptr_t>(io.buf) % block)) {
      invalid = make_error(Errc::kInvalidArgument, "request buffer is not {}-byte aligned", block);
    } else if ((io.flags & kIoKernelBuffer) != 0 && io.kind == IoKind::kWrite &&
               array.geometry.redundancy() == Redundancy::kParity) {
      invalid = kernel_buffer_refusal("a write to a parity level (parity is computed from it)");
    } else if ((io.flags & kIoKernelBuffer) != 0 && io.kind == IoKind::kWrite &&
               passthrough_member()) {
      // Refused whole, before any of it is written (a mirror's operation checks again, for a
      // device that took a role or a hot replace since).
      invalid = kernel_buffer_refusal("a write to an array with an NVMe passthrough member");
    } else if ((io.flags & kIoKernelBuffer) != 0 && io.kind != IoKind::kRead &&
               io.kind != IoKind::kWrite) {
      invalid = kernel_buffer_refusal("anything but a read or a write");
    } else if ((io.flags & kIoKernelBuffer) != 0 && !ctx.in_kernel_buffer_window(io.buf, io.len)) {
      invalid = make_error(Errc::kInvalidArgument,
                           "request buffer is not a kernel buffer window of this thread's ring");
    }
  }
  if (invalid.is_ok() && array.array_failed()) {
    invalid =
        make_error(Errc::kIoError, "array has failed ({} members lost)", array.failed_count.load());
  }
  if (invalid.is_ok() && io.kind == IoKind::kRead && array.reads_lost(base + io.offset, io.len)) {
    // A lost range (array/bad_ranges.cpp): the read fails as a disk's does over a bad sector;
    // no member is at fault.
    invalid = make_error(Errc::kIoError,
                         "request [{}, +{}) reads array bytes whose contents were lost (a member "
                         "could not be read there and redundancy could not make them up); a write "
                         "of the whole range makes it readable again",
                         io.offset, io.len);
  }
  if (!invalid.is_ok()) {
    io.first_error_ = std::move(invalid);
  } else if ((io.flags & kIoPreflush) != 0 && io.kind != IoKind::kFlush) {
    // Everything acknowledged before this request reaches stable storage first.
    ++stats.flushes;
    submit_flush(io, true, base + io.offset);
  } else {
    dispatch(io, base + io.offset);
  }
  // Release the submission's own part. Never complete inline: the caller may still be looping
  // over its submissions.
  if (--io.parts_left_ == 0) {
    rejected.emplace_back(&io, std::move(io.first_error_));
    schedule_kick();
  }
}

ArrayQueue::ArrayQueue(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<ArrayQueue> ArrayQueue::make(Array::State& state, IoContext& ctx) {
  return std::unique_ptr<ArrayQueue>(new ArrayQueue(std::make_unique<Impl>(state, ctx)));
}

ArrayQueue::~ArrayQueue() = default;

void ArrayQueue::submit(ArrayIo& io) {
  impl_->submit(io, 0, impl_->array.capacity);
}

void ArrayQueue::submit(ArrayIo& io, const VdInfo& vd) {
  impl_->submit(io, vd.start, vd.size);
}

QueueStats ArrayQueue::stats() const noexcept {
  QueueStats out;
  add_counters(out, impl_->stats);
  return out;
}

IoContext& ArrayQueue::context() noexcept {
  return impl_->ctx;
}

std::uint32_t ArrayQueue::in_flight() const noexcept {
  return impl_->in_flight;
}

}  // namespace graid
