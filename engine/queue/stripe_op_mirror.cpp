// StripeOp on mirrored levels: writes to every live copy, reads redone from another copy under
// the lock (read-error correction), and whole-stripe discards on every member.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>

#include "queue/array_queue_impl.h"

namespace graid {

void StripeOp::issue_mirror_writes() {
  const Geometry& g = q_.array.geometry;
  const std::uint32_t strip = g.strip_bytes();
  phase_ = Phase::kWriting;
  ios_used_ = 0;
  // Zero pieces are discards (or write-zeroes), unless a member refused one: then written.
  auto zeroing_op = [](const Piece& p) {
    return p.keep ? MemberOp::kWriteZeroes : MemberOp::kDiscard;
  };
  auto written = [&](const Piece& p) {
    return p.zero && (zero_writes_ || !q_.array.zeroing_supported(zeroing_op(p)).load());
  };
  const bool write_zeroes = std::any_of(pieces_.begin(), pieces_.end(), written);
  if (write_zeroes && scratch_.size() < strip) {
    q_.buffers.put(std::move(scratch_));
    auto buf = q_.buffers.get(strip);
    if (!buf) return finish(buf.status());
    scratch_ = std::move(*buf);
    std::memset(scratch_.data(), 0, strip);
  }
  for (const Piece& p : pieces_) {
    for_each_segment(p, strip, [&](const Segment& s) {
      for (std::uint32_t copy = 0; copy < g.copies(); ++copy) {
        const std::uint32_t member = g.data_member(stripe_, s.d, copy);
        if (q_.array.dead_at(member, stripe_)) continue;
        StripeMemberIo& io = new_io(member);
        io.op = p.zero && !written(p) ? zeroing_op(p) : MemberOp::kWrite;
        io.offset = q_.array.device_offset(stripe_ * strip + s.lo);
        io.buf = !p.zero ? p.buf + s.src_offset : written(p) ? scratch_.data() : nullptr;
        io.len = s.hi - s.lo;
        io.fua = fua_ && io.op == MemberOp::kWrite;
      }
    });
  }
  if (ios_used_ == 0) return finish(make_error(Errc::kIoError, "no live copy to write"));
  const std::size_t n = ios_used_;
  if (kernel_buffer_) {
    // Kernel buffers go only where fixed-buffer I/O takes them: refused, before anything is
    // written, where a copy (or the replacement its writes go to as well) is an NVMe
    // passthrough drive, whose commands carry an address.
    Array::State& a = q_.array;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t m = ios_[i]->member;
      const auto& device = a.members[m];
      bool refused = device && device->io_mode() == MemberIoMode::kPassthrough;
      if (MemberDevice* copy = a.hold_replacement(m, stripe_, ios_[i]->offset)) {
        refused = refused || copy->io_mode() == MemberIoMode::kPassthrough;
        a.release_replacement();
      }
      if (refused) return finish(kernel_buffer_refusal("a write to an NVMe passthrough member"));
    }
  }
  for (std::size_t i = 0; i < n; ++i)
    submit_io(*ios_[i]);
}

// kMirrorRead: one piece (a strip segment) whose first read failed with a media error on the
// members in unreadable_. Under the stripe lock (so no write can land in between), read a
// copy that is neither failed nor unreadable, hand the data to the caller, and write it back to
// the copies that could not be read.
void StripeOp::issue_mirror_read() {
  const Geometry& g = q_.array.geometry;
  const Piece& p = pieces_.front();
  const std::uint32_t strip = g.strip_bytes();
  const std::uint32_t d = p.stripe_offset / strip;
  phase_ = Phase::kReading;
  ios_used_ = 0;
  std::uint32_t source = g.members();  // a copy neither failed nor unreadable
  for (std::uint32_t copy = 0; copy < g.copies(); ++copy) {
    const std::uint32_t m = g.data_member(stripe_, d, copy);
    if (!q_.array.dead_at(m, stripe_) && ((unreadable_ >> m) & 1) == 0) {
      source = m;
      break;
    }
  }
  if (source == g.members()) {
    return finish(
        make_error(Errc::kIoError, "stripe {}: no copy of strip {} could be read", stripe_, d));
  }
  if (scratch_.size() < p.len) {
    q_.buffers.put(std::move(scratch_));
    auto buf = q_.buffers.get(p.len);
    if (!buf) return finish(buf.status());
    scratch_ = std::move(*buf);
  }
  StripeMemberIo& io = new_io(source);
  io.op = MemberOp::kRead;
  io.offset = q_.array.device_offset(stripe_ * strip + p.stripe_offset % strip);
  io.buf = scratch_.data();
  io.len = p.len;
  submit_io(io);
}

void StripeOp::after_mirror_read() {
  const Geometry& g = q_.array.geometry;
  const Piece& p = pieces_.front();
  const std::uint32_t strip = g.strip_bytes();
  const std::uint32_t d = p.stripe_offset / strip;
  std::memcpy(p.buf, scratch_.data(), p.len);
  if (Status st = hold_bitmap(); !st) return finish(st);
  phase_ = Phase::kWriting;
  ios_used_ = 0;
  for (std::uint32_t copy = 0; copy < g.copies(); ++copy) {
    const std::uint32_t m = g.data_member(stripe_, d, copy);
    if (q_.array.dead_at(m, stripe_) || ((unreadable_ >> m) & 1) == 0) continue;
    StripeMemberIo& io = new_io(m);
    io.op = MemberOp::kWrite;
    io.offset = q_.array.device_offset(stripe_ * strip + p.stripe_offset % strip);
    io.buf = scratch_.data();
    io.len = p.len;
  }
  if (ios_used_ == 0) return finish(Status::ok());
  const std::size_t n = ios_used_;
  for (std::size_t i = 0; i < n; ++i)
    submit_io(*ios_[i]);
}

void StripeOp::issue_punches() {
  const Geometry& g = q_.array.geometry;
  phase_ = Phase::kWriting;
  ios_used_ = 0;
  for (std::uint32_t m = 0; m < g.members(); ++m) {
    if (q_.array.dead_at(m, stripe_)) continue;
    StripeMemberIo& io = new_io(m);
    io.op = pieces_.front().keep ? MemberOp::kWriteZeroes : MemberOp::kDiscard;
    io.offset = q_.array.device_offset(stripe_ * g.strip_bytes());
    io.buf = nullptr;
    io.len = g.strip_bytes();
  }
  if (ios_used_ == 0) return finish(make_error(Errc::kIoError, "no live member to discard on"));
  const std::size_t n = ios_used_;
  for (std::size_t i = 0; i < n; ++i)
    submit_io(*ios_[i]);
}

}  // namespace graid
