// ArrayQueue: a thread's entry to an array. Splits requests by strip and stripe, sends reads that
// need no lock straight to members, gathers the writes of one submission batch into one
// StripeOp per stripe (coalescing), and completes every request exactly once.
#include <spdlog/spdlog.h>

#include <cstring>

#include "array/array_queue_impl.h"

namespace graid {

// One member I/O that needs no stripe lock: an optimal read, a RAID0 write or discard.
class DirectIo final : public TimedMemberRequest {
 public:
  ArrayQueue::Impl* q = nullptr;
  ArrayIo* io = nullptr;
  std::uint32_t member = 0;
  std::uint64_t array_offset = 0;
  PoolBuffer owned;  // zeroes written in place of a discard the member refused

  void on_done(std::int32_t res) override {
    record_member_io(*q, member, *this, res);
    ArrayQueue::Impl& queue = *q;
    ArrayIo& request = *io;
    const MemberOp kind = op;
    const std::uint64_t at = array_offset;
    const std::uint64_t device_at = offset;
    const std::uint32_t bytes = len;
    std::byte* data = buf;
    const std::uint32_t failed_member = member;
    queue.recycle(*this);  // nothing below touches this object
    if (res >= 0) {
      queue.part_done(request, Status::ok());
      return;
    }
    Array::State& a = queue.array;
    const char* what = kind == MemberOp::kRead    ? "read"
                       : kind == MemberOp::kWrite ? "write"
                                                  : "zeroing";
    switch (classify_member_error(kind, res)) {
      case MemberErrorClass::kUnsupported:
        if (kind == MemberOp::kDiscard || kind == MemberOp::kWriteZeroes) {
          // RAID0: write the zeroes the member would have left instead.
          a.zeroing_refused(kind, failed_member, res);
          queue.write_zeroes(request, failed_member, device_at, bytes, at);
          queue.part_done(request, Status::ok());
          return;
        }
        break;
      case MemberErrorClass::kRequest:
        spdlog::error(
            "graid: array '{}': member {} refused a {} at byte {} as malformed: {}; the "
            "request fails, the member stays",
            a.name, failed_member, what, device_at, std::strerror(-res));
        queue.part_done(request, make_error(Errc::kInternal, "member {} refused a {}: {}",
                                            failed_member, what, std::strerror(-res)));
        return;
      case MemberErrorClass::kMedia: {
        const bool over_limit = a.read_errors && a.read_errors->record(failed_member);
        if (over_limit) break;
        if (a.geometry.redundancy() == Redundancy::kNone) {
          // RAID0: nothing to rebuild from. The request fails; the member stays.
          queue.part_done(request, make_error(Errc::kIoError,
                                              "member {}: read error at array "
                                              "byte {}: {}",
                                              failed_member, at, std::strerror(-res)));
          return;
        }
        spdlog::warn(
            "graid: array '{}': member {} ({}): read error at byte {}: {}; "
            "reconstructing and rewriting it",
            a.name, failed_member, a.members[failed_member]->path(), device_at,
            std::strerror(-res));
        queue.repair_read(request, at, bytes, data, failed_member);
        queue.part_done(request, Status::ok());
        return;
      }
      case MemberErrorClass::kDevice:
        break;
    }
    Status st = a.fail_member(
        failed_member, fmt::format("{} error at byte {}: {}", what, at, std::strerror(-res)));
    (void)st;
    if (kind == MemberOp::kRead && !a.array_failed()) {
      // Another copy, or a reconstruction, replaces this part (it adds its own part first, so
      // the request cannot complete in between).
      queue.read_segment(request, at, bytes, data);
      queue.part_done(request, Status::ok());
      return;
    }
    queue.part_done(request, make_error(Errc::kIoError, "member {} failed: {}", failed_member,
                                        std::strerror(-res)));
  }
};

// Flushes every live member; completes when all have answered.
class FlushOp {
 public:
  struct Slot final : TimedMemberRequest {
    FlushOp* owner = nullptr;
    std::uint32_t member = 0;
    void on_done(std::int32_t res) override {
      record_member_io(*owner->q, member, *this, res);
      owner->slot_done(*this, res);
    }
  };

  ArrayQueue::Impl* q = nullptr;
  ArrayIo* io = nullptr;
  std::vector<Slot> slots;
  std::uint32_t left = 0;
  Status error;
  bool member_failed = false;
  bool clears_bitmap = false;  // this flush completes a bitmap clearing cycle
  bool then_dispatch = false;  // a preflush: start the request itself once the flush is done
  std::uint64_t then_offset = 0;

  void start() {
    Array::State& a = q->array;
    slots.resize(a.geometry.members());
    left = 0;
    error = Status::ok();
    member_failed = false;
    // A flush is what makes idle regions' writes durable, so it is also when their bitmap bits
    // can go: candidates are marked now, cleared once every live member has flushed.
    clears_bitmap = a.begin_bitmap_clear();
    for (std::uint32_t m = 0; m < a.geometry.members(); ++m) {
      if (a.is_failed(m)) continue;
      Slot& s = slots[left++];
      s.owner = this;
      s.member = m;
      s.op = MemberOp::kFlush;
      s.offset = 0;
      s.buf = nullptr;
      s.len = 0;
    }
    const std::uint32_t n = left;
    if (n == 0) {
      if (clears_bitmap) a.end_bitmap_clear(/*flushed=*/false);
      q->part_done(*io, make_error(Errc::kIoError, "no live member to flush"));
      q->recycle(*this);
      return;
    }
    for (std::uint32_t i = 0; i < n; ++i)
      submit_timed(*a.members[slots[i].member], q->ctx, slots[i]);
  }

  void slot_done(Slot& s, std::int32_t res) {
    if (res < 0) {
      member_failed = true;
      Status st =
          q->array.fail_member(s.member, fmt::format("flush failed: {}", std::strerror(-res)));
      (void)st;
    }
    if (--left != 0) return;
    if (clears_bitmap) q->array.end_bitmap_clear(/*flushed=*/!member_failed);
    Status result = q->array.array_failed() ? make_error(Errc::kIoError, "flush: array has failed")
                                            : Status::ok();
    ArrayQueue::Impl& queue = *q;
    ArrayIo& request = *io;
    const bool dispatch = then_dispatch && result.is_ok();
    const std::uint64_t offset = then_offset;
    queue.recycle(*this);
    if (dispatch) queue.dispatch(request, offset);  // adds its parts before ours is released
    queue.part_done(request, result);
  }
};

ArrayQueue::Impl::Impl(Array::State& state, IoContext& context)
    : array(state), ctx(context), buffers(state.host_memory) {
  kick_task.q = this;
  parity_task.q = this;
  parity_done_cb.q = this;
}

void ArrayQueue::Impl::queue_parity(StripeOp& op) {
  parity_waiting.push_back(&op);
  if (parity_scheduled) return;
  parity_scheduled = true;
  ctx.defer(parity_task);
}

void ArrayQueue::Impl::run_parity_batch() {
  parity_scheduled = false;
  if (parity_busy || parity_waiting.empty()) return;  // the batch in flight restarts us
  parity_running.clear();
  parity_running.swap(parity_waiting);
  parity_batch.clear();
  for (StripeOp* op : parity_running) {
    parity_batch.insert(parity_batch.end(), op->parity_jobs().begin(), op->parity_jobs().end());
  }
  ++stats.parity_batches;
  stats.parity_jobs += parity_batch.size();
  if (array.async_parity != nullptr) {
    parity_busy = true;
    array.async_parity->submit(ctx, parity_batch, parity_done_cb);
    return;
  }
  finish_parity_batch(array.parity->execute(parity_batch));
}

void ArrayQueue::Impl::finish_parity_batch(Status batch) {
  parity_busy = false;
  std::vector<StripeOp*> done;
  done.swap(parity_running);
  if (!batch.is_ok()) ++stats.parity_batch_failures;
  for (StripeOp* op : done) {
    if (batch.is_ok()) {
      op->parity_done(Status::ok());
    } else {
      // The batch failed (a bad job fails a batch before anything is written; a device fails
      // whole batches): redo each operation on its own on the synchronous backend, so one bad
      // job fails only its operation and a dead device costs no write.
      op->parity_done(array.parity->execute(op->parity_jobs()));
    }
  }
  parity_running.swap(done);  // keep the capacity
  parity_running.clear();
  if (!parity_waiting.empty() && !parity_scheduled) {
    parity_scheduled = true;
    ctx.defer(parity_task);
  }
}

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
}

StripeOp& ArrayQueue::Impl::new_op(StripeOp::Mode mode, std::uint64_t stripe) {
  StripeOp& op = ops.get(*this);
  op.reset(mode, stripe);
  return op;
}

void ArrayQueue::Impl::recycle(StripeOp& op) {
  ops.put(op);
}

StripeOp& ArrayQueue::Impl::pending_write_op(std::uint64_t stripe, StripeOp::Mode mode,
                                             std::uint32_t stripe_offset, std::uint32_t len) {
  auto it = pending.find(stripe);
  // A mirror operation sends every piece to every copy at once, and each copy may apply
  // overlapping pieces in a different order: an overlapping piece starts a new operation, which
  // the stripe lock (FIFO) runs after this one on every copy. Parity operations apply their
  // pieces in order into one image, so they may overlap.
  if (it != pending.end() && it->second->mode() == mode && mode != StripeOp::Mode::kPunch &&
      !(mode == StripeOp::Mode::kMirrorWrite && it->second->overlaps(stripe_offset, len))) {
    ++stats.coalesced;
    return *it->second;
  }
  StripeOp& op = new_op(mode, stripe);
  pending[stripe] = &op;
  pending_order.push_back(&op);
  schedule_kick();
  return op;
}

void ArrayQueue::Impl::recycle(DirectIo& d) {
  buffers.put(std::move(d.owned));
  directs.put(d);
}
void ArrayQueue::Impl::recycle(FlushOp& f) {
  flushes.put(f);
}

void ArrayQueue::Impl::direct_io(ArrayIo& io, MemberOp op, std::uint32_t member,
                                 std::uint64_t member_offset, std::uint32_t len, std::byte* buf,
                                 std::uint64_t array_offset) {
  DirectIo* d = &directs.get();
  d->q = this;
  d->io = &io;
  d->member = member;
  d->array_offset = array_offset;
  d->op = op;
  d->offset = array.device_offset(member_offset);
  d->buf = buf;
  d->len = len;
  d->fua = op == MemberOp::kWrite && (io.flags & kIoFua) != 0;
  add_parts(io, 1);
  submit_timed(*array.members[member], ctx, *d);
}

void ArrayQueue::Impl::read_segment(ArrayIo& io, std::uint64_t array_offset, std::uint32_t len,
                                    std::byte* dst) {
  const Geometry& g = array.geometry;
  const DataLocation loc = g.locate(array_offset);
  if (g.redundancy() == Redundancy::kMirror) {
    const std::uint32_t copies = g.copies();
    const std::uint32_t first = read_rotor++ % copies;
    for (std::uint32_t i = 0; i < copies; ++i) {
      const std::uint32_t m = g.data_member(loc.stripe, loc.data_index, (first + i) % copies);
      if (array.is_failed(m)) continue;
      direct_io(io, MemberOp::kRead, m, loc.member_offset, len, dst, array_offset);
      return;
    }
    add_parts(io, 1);
    part_done(io, make_error(Errc::kIoError, "no live copy of array byte {}", array_offset));
    return;
  }
  if (!array.is_failed(loc.member)) {
    direct_io(io, MemberOp::kRead, loc.member, loc.member_offset, len, dst, array_offset);
    return;
  }
  if (g.redundancy() != Redundancy::kParity) {
    add_parts(io, 1);
    part_done(io, make_error(Errc::kIoError, "member {} holding array byte {} has failed",
                             loc.member, array_offset));
    return;
  }
  degraded_read(io, array_offset, len, dst);
}

void ArrayQueue::Impl::write_zeroes(ArrayIo& io, std::uint32_t member, std::uint64_t device_at,
                                    std::uint32_t len, std::uint64_t array_offset) {
  auto zeroes = buffers.get(len);
  if (!zeroes) {
    add_parts(io, 1);
    part_done(io, zeroes.status());
    return;
  }
  std::memset(zeroes->data(), 0, len);
  DirectIo* d = &directs.get();
  d->q = this;
  d->io = &io;
  d->member = member;
  d->array_offset = array_offset;
  d->op = MemberOp::kWrite;
  d->fua = false;
  d->offset = device_at;
  d->owned = std::move(*zeroes);
  d->buf = d->owned.data();
  d->len = len;
  add_parts(io, 1);
  array.members[member]->submit(ctx, *d);
}

void ArrayQueue::Impl::repair_read(ArrayIo& io, std::uint64_t array_offset, std::uint32_t len,
                                   std::byte* dst, std::uint32_t member) {
  const bool parity = array.geometry.redundancy() == Redundancy::kParity;
  locked_read(io, array_offset, len, dst,
              parity ? StripeOp::Mode::kDegradedRead : StripeOp::Mode::kMirrorRead,
              std::uint64_t{1} << member);
}

void ArrayQueue::Impl::degraded_read(ArrayIo& io, std::uint64_t array_offset, std::uint32_t len,
                                     std::byte* dst) {
  locked_read(io, array_offset, len, dst, StripeOp::Mode::kDegradedRead, 0);
}

void ArrayQueue::Impl::locked_read(ArrayIo& io, std::uint64_t array_offset, std::uint32_t len,
                                   std::byte* dst, StripeOp::Mode mode, std::uint64_t unreadable) {
  const Geometry& g = array.geometry;
  const DataLocation loc = g.locate(array_offset);
  ++stats.degraded_reads;
  StripeOp& op = new_op(mode, loc.stripe);
  Piece piece;
  piece.io = &io;
  piece.stripe_offset = loc.data_index * g.strip_bytes() + loc.strip_offset;
  piece.len = len;
  piece.buf = dst;
  op.add_piece(piece);
  op.set_unreadable(unreadable);
  add_parts(io, 1);
  op.start();
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
  split_by(offset, io.len, array.geometry.strip_bytes(),
           [&](std::uint64_t at, std::uint32_t n, std::uint32_t boff) {
             read_segment(io, at, n, io.buf + boff);
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
  split_by(offset, io.len, stripe_bytes,
           [&](std::uint64_t at, std::uint32_t n, std::uint32_t boff) {
             const auto stripe_offset = static_cast<std::uint32_t>(at % stripe_bytes);
             StripeOp& op = pending_write_op(at / stripe_bytes, mode, stripe_offset, n);
             Piece piece;
             piece.io = &io;
             piece.stripe_offset = stripe_offset;
             piece.len = n;
             piece.buf = io.buf + boff;
             op.add_piece(piece);
             add_parts(io, 1);
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

void ArrayQueue::Impl::submit_flush(ArrayIo& io, bool then_dispatch, std::uint64_t offset) {
  FlushOp& f = flushes.get();
  f.q = this;
  f.io = &io;
  f.then_dispatch = then_dispatch;
  f.then_offset = offset;
  add_parts(io, 1);
  f.start();
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
    }
  }
  if (invalid.is_ok() && array.array_failed()) {
    invalid =
        make_error(Errc::kIoError, "array has failed ({} members lost)", array.failed_count.load());
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
