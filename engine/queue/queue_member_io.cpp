// Queue operations that go to members without a stripe lock: DirectIo (an optimal read, a RAID0
// write or discard, a read-error repair's first step) and FlushOp (every live member flushed),
// and the reads that fall back to a StripeOp (degraded, redone from another copy). The queue's
// constructor and destructor live here, where both operation types are complete.
#include <spdlog/spdlog.h>

#include <cstring>

#include "queue/array_queue_impl.h"

namespace graid {

Status kernel_buffer_refusal(std::string_view path) {
  return make_error(Errc::kUnsupported, "{} needs the request's data in memory (zero copy)", path);
}

// One member I/O that needs no stripe lock: an optimal read, a RAID0 write or discard.
class DirectIo final : public TimedMemberRequest {
 public:
  ArrayQueue::Impl* q = nullptr;
  ArrayIo* io = nullptr;
  std::uint32_t member = 0;
  const MemberDevice* device = nullptr;  // where it went (see StripeMemberIo::device)
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
    const MemberDevice* went_to = device;
    queue.recycle(*this);  // nothing below touches this object
    if (res >= 0) {
      queue.part_done(request, Status::ok());
      return;
    }
    Array::State& a = queue.array;
    if (kind == MemberOp::kRead && a.members[failed_member].get() != went_to) {
      // The role has another device now (see StripeMemberIo::device): read it again as planned
      // today; the old device's error is no news.
      queue.read_segment(request, at, bytes, data);
      queue.part_done(request, Status::ok());
      return;
    }
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
        if ((request.flags & kIoKernelBuffer) != 0) {
          // The repair reconstructs into the buffer: served again in memory, where the error
          // is counted and repaired.
          queue.part_done(request, kernel_buffer_refusal("a read error's repair"));
          return;
        }
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
    Status st = a.fail_member(failed_member,
                              fmt::format("{} error at byte {}: {}", what, at, std::strerror(-res)),
                              went_to);
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
    const MemberDevice* device = nullptr;  // where it went (see StripeMemberIo::device)
    bool to_replacement = false;           // the member's hot replacement (hold_replacement)
    void on_done(std::int32_t res) override {
      if (!to_replacement) record_member_io(*owner->q, member, *this, res);
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
    left = 0;
    error = Status::ok();
    member_failed = false;
    // A flush is what makes idle regions' writes durable, so it is also when their bitmap bits
    // can go: candidates are marked now, cleared once every live member has flushed.
    clears_bitmap = a.begin_bitmap_clear();
    // A hot replacement takes the writes of its role, so it is flushed with it (held before the
    // roles' devices are loaded: see hold_replacement).
    const std::uint32_t replaced = a.replace_member.load(std::memory_order_relaxed);
    MemberDevice* copy =
        replaced == Array::State::kNoReplace ? nullptr : a.hold_replacement(replaced, 0, 0);
    slots.resize(a.geometry.members() + 1);
    for (std::uint32_t m = 0; m < a.geometry.members(); ++m) {
      if (!a.takes_writes(m)) continue;
      Slot& s = slots[left++];
      s.owner = this;
      s.member = m;
      set_flush(s);
      s.to_replacement = false;
    }
    const std::uint32_t roles = left;
    if (copy != nullptr && copy != a.members[replaced].get()) {
      Slot& s = slots[left++];
      s.owner = this;
      s.member = replaced;
      set_flush(s);
      s.to_replacement = true;
      s.device = copy;
    } else if (copy != nullptr) {
      a.release_replacement();  // swapped in already: flushed as the role's device
    }
    std::uint32_t n = left;
    if (roles == 0 && n > 0) {
      // No role to flush: the replacement alone means nothing (the array has failed).
      a.release_replacement();
      left = n = 0;
    }
    if (n == 0) {
      if (clears_bitmap) a.end_bitmap_clear(/*flushed=*/false);
      q->part_done(*io, make_error(Errc::kIoError, "no live member to flush"));
      q->recycle(*this);
      return;
    }
    for (std::uint32_t i = 0; i < n; ++i) {
      if (slots[i].to_replacement) {
        submit_timed(*copy, q->ctx, slots[i]);
        continue;
      }
      MemberDevice& device = *a.members[slots[i].member];
      slots[i].device = &device;
      submit_timed(device, q->ctx, slots[i]);
    }
  }

  void slot_done(Slot& s, std::int32_t res) {
    if (s.to_replacement) {
      if (res < 0) q->array.replacement_failed("flush", res);
      q->array.release_replacement();
      res = 0;
    }
    // An old device's flush error (its role has a new device now) is no news: the failure that
    // replaced it is recorded, and writes to the new one came after this flush was asked for.
    if (res < 0 && q->array.members[s.member].get() == s.device) {
      member_failed = true;
      Status st = q->array.fail_member(
          s.member, fmt::format("flush failed: {}", std::strerror(-res)), s.device);
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
    : array(state), ctx(context), buffers(state.host_memory, &ring_regions) {
  kick_task.q = this;
  parity_task.q = this;
  parity_done_cb.q = this;
}
ArrayQueue::Impl::~Impl() = default;

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
  MemberDevice& device = *array.members[member];
  if ((io.flags & kIoKernelBuffer) != 0 && device.io_mode() == MemberIoMode::kPassthrough) {
    // Its commands carry the buffer's address, and a kernel buffer has none.
    add_parts(io, 1);
    part_done(io, kernel_buffer_refusal("an NVMe passthrough member"));
    return;
  }
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
  d->device = &device;
  submit_timed(device, ctx, *d);
}

void ArrayQueue::Impl::read_segment(ArrayIo& io, std::uint64_t array_offset, std::uint32_t len,
                                    std::byte* dst, std::uint32_t copy) {
  const Geometry& g = array.geometry;
  const DataLocation loc = g.locate(array_offset);
  if (g.redundancy() == Redundancy::kMirror) {
    const std::uint32_t copies = g.copies();
    // A stripe whose copies may differ (initialisation or re-sync pending) is read from the
    // first live copy, the one the job copies from, so a read never returns data the job then
    // overwrites; others rotate among the copies.
    const std::uint32_t pick = copy == kNextCopy ? read_rotor++ : copy;
    const std::uint32_t first = array.initialised(loc.stripe) ? pick % copies : 0;
    for (std::uint32_t i = 0; i < copies; ++i) {
      const std::uint32_t m = g.data_member(loc.stripe, loc.data_index, (first + i) % copies);
      if (array.dead_at(m, loc.stripe)) continue;
      direct_io(io, MemberOp::kRead, m, loc.member_offset, len, dst, array_offset);
      return;
    }
    add_parts(io, 1);
    part_done(io, make_error(Errc::kIoError, "no live copy of array byte {}", array_offset));
    return;
  }
  if (!array.dead_at(loc.member, loc.stripe)) {
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
  MemberDevice& device = *array.members[member];
  d->device = &device;
  device.submit(ctx, *d);
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
  if ((io.flags & kIoKernelBuffer) != 0) {
    add_parts(io, 1);
    part_done(io, kernel_buffer_refusal(mode == StripeOp::Mode::kMirrorRead
                                            ? "a read error's repair"
                                            : "a read reconstructed from parity"));
    return;
  }
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

void ArrayQueue::Impl::submit_flush(ArrayIo& io, bool then_dispatch, std::uint64_t offset) {
  FlushOp& f = flushes.get();
  f.q = this;
  f.io = &io;
  f.then_dispatch = then_dispatch;
  f.then_offset = offset;
  add_parts(io, 1);
  f.start();
}

}  // namespace graid
