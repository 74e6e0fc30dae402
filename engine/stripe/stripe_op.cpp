// StripeOp: everything that must happen to one stripe under its lock (see array_queue_impl.h
// for the state machine and stripe/write_plan.h for the plans).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>

#include "array/array_queue_impl.h"

namespace graid {

void StripeMemberIo::on_done(std::int32_t res) {
  record_member_io(owner->queue(), member, *this, res);
  result = res;
  owner->member_io_done(*this);
}

void StripeOp::reset(Mode mode, std::uint64_t stripe) {
  mode_ = mode;
  phase_ = Phase::kIdle;
  stripe_ = stripe;
  pieces_.clear();
  extents_used_ = 0;
  ios_used_ = 0;
  ios_left_ = 0;
  bitmap_held_ = false;
  replans_ = 0;
  unreadable_ = 0;
  zero_writes_ = false;
  lock_.stripe = stripe;
  lock_.home = &q_.ctx;
  lock_.grant = this;
}

void StripeOp::start() {
  phase_ = Phase::kLocking;
  if (q_.array.locks.acquire(lock_)) run_locked();
  // else: run() is called on this thread once the holder hands the lock over.
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
  if (mode_ == Mode::kMirrorWrite || mode_ == Mode::kPunch) {
    if (a.bitmap && !bitmap_held_) {
      Status st = a.bitmap_begin(stripe_ * a.geometry.strip_bytes(), a.geometry.strip_bytes());
      if (!st) {
        finish(st);
        return;
      }
      bitmap_held_ = true;
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

namespace {

// A piece's bytes inside one data strip: [lo, hi) of strip `d`, starting `src_offset` bytes into
// the piece.
struct Segment {
  std::uint32_t d, lo, hi, src_offset;
};

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

}  // namespace

bool StripeOp::build_extents() {
  const Geometry& g = q_.array.geometry;
  const std::uint32_t strip = g.strip_bytes();
  const std::uint32_t k = g.data_strips();

  // Row intervals touched by any piece, merged.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> rows;
  for (const Piece& p : pieces_) {
    for_each_segment(p, strip, [&](const Segment& s) { rows.emplace_back(s.lo, s.hi); });
  }
  std::sort(rows.begin(), rows.end());
  std::vector<std::pair<std::uint32_t, std::uint32_t>> merged;
  for (const auto& r : rows) {
    if (!merged.empty() && r.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }

  std::uint64_t dead = 0;
  for (std::uint32_t d = 0; d < k; ++d) {
    if (q_.array.is_failed(g.data_member(stripe_, d))) dead |= chunk_bit(d);
  }
  if (q_.array.is_failed(g.p_member(stripe_))) dead |= chunk_bit(k);
  if (g.parity_strips() == 2 && q_.array.is_failed(g.q_member(stripe_))) dead |= chunk_bit(k + 1);
  std::uint64_t unreadable = 0;  // chunks that read with a media error: planned as dead...
  for (std::uint32_t c = 0; c < k + g.parity_strips(); ++c) {
    if (chunk_unreadable(c)) unreadable |= chunk_bit(c);
  }
  dead |= unreadable;

  if (extents_.size() < merged.size()) extents_.resize(merged.size());
  extents_used_ = merged.size();
  for (std::size_t i = 0; i < merged.size(); ++i) {
    Extent& e = extents_[i];
    e.a = merged[i].first;
    e.b = merged[i].second;
    e.touched = 0;
    e.full = 0;
    e.borrowed = 0;
    e.data.fill(nullptr);
    // Coverage of [a, b) per strip: collect the strip's segments inside the extent.
    std::array<std::vector<std::pair<std::uint32_t, std::uint32_t>>, kMaxDataChunks> cover;
    for (const Piece& p : pieces_) {
      for_each_segment(p, strip, [&](const Segment& s) {
        if (s.hi <= e.a || s.lo >= e.b) return;
        e.touched |= chunk_bit(s.d);
        cover[s.d].emplace_back(std::max(s.lo, e.a), std::min(s.hi, e.b));
      });
    }
    for (std::uint32_t d = 0; d < k; ++d) {
      auto& c = cover[d];
      if (c.empty()) continue;
      std::sort(c.begin(), c.end());
      std::uint32_t reach = e.a;
      for (const auto& [lo, hi] : c) {
        if (lo > reach) break;
        reach = std::max(reach, hi);
      }
      if (reach >= e.b) e.full |= chunk_bit(d);
    }

    const std::uint64_t all = low_bits(k + g.parity_strips());
    if (mode_ == Mode::kDegradedRead) {
      if (std::popcount(dead & all) > static_cast<int>(g.parity_strips())) return false;
      e.plan.kind = WritePlanKind::kDegraded;
      e.plan.writes = 0;
      // Touched strips all alive: read them; else everything alive, to rebuild the dead ones.
      e.plan.reads = (e.touched & dead) == 0 ? e.touched : (all & ~dead);
      continue;
    }
    ExtentCoverage c;
    c.k = k;
    c.parity = g.parity_strips();
    c.touched = e.touched;
    c.full = e.full;
    c.dead = dead & all;
    e.plan = plan_write(c);
    if (e.plan.kind == WritePlanKind::kFailed) return false;
    // ... and rewritten with their new contents, which repairs the sectors. Plans other than
    // read-modify-write build every chunk's image; RMW neither reads nor writes an untouched
    // unreadable chunk, which then stays for the next read that meets it to repair.
    if (e.plan.kind != WritePlanKind::kReadModifyWrite) e.plan.writes |= unreadable & all;
  }
  return true;
}

bool StripeOp::chunk_unreadable(std::uint32_t c) const noexcept {
  if (unreadable_ == 0) return false;
  const Geometry& g = q_.array.geometry;
  const std::uint32_t k = g.data_strips();
  const std::uint32_t m = c < k    ? g.data_member(stripe_, c)
                          : c == k ? g.p_member(stripe_)
                                   : g.q_member(stripe_);
  return (unreadable_ >> m) & 1;
}

StripeMemberIo& StripeOp::new_io(std::uint32_t member) {
  if (ios_used_ == ios_.size()) ios_.push_back(std::make_unique<StripeMemberIo>());
  StripeMemberIo& io = *ios_[ios_used_++];
  io.owner = this;
  io.member = member;
  io.result = 0;
  io.fua = false;
  return io;
}

void StripeOp::submit_io(StripeMemberIo& io) {
  ++ios_left_;
  submit_timed(*q_.array.members[io.member], q_.ctx, io);
}

namespace {

// A chunk for a parity job. The pointer is a staging buffer or a caller buffer whose alignment
// borrow_caller_data() checked, so adopt() cannot fail here.
ChunkView chunk_view(std::byte* data, std::uint32_t len) {
  auto view = ChunkView::adopt(data, len);
  assert(view.is_ok());
  return *view;
}

ParityScheme scheme_of(const Geometry& g) {
  return g.parity_strips() == 2 ? ParityScheme::kPQ : ParityScheme::kP;
}

// Member holding chunk `c` (data index, then P, Q) of `stripe`.
std::uint32_t chunk_member(const Geometry& g, std::uint64_t stripe, std::uint32_t c) {
  const std::uint32_t k = g.data_strips();
  if (c < k) return g.data_member(stripe, c);
  return c == k ? g.p_member(stripe) : g.q_member(stripe);
}

}  // namespace

void StripeOp::issue_reads() {
  const Geometry& g = q_.array.geometry;
  const std::uint32_t k = g.data_strips();
  phase_ = Phase::kReading;
  ios_used_ = 0;
  // Queue every read first, then submit: completions never run inline, but counting first keeps
  // the phase's bookkeeping simple to reason about.
  for (std::size_t i = 0; i < extents_used_; ++i) {
    Extent& e = extents_[i];
    const std::uint32_t len = e.b - e.a;
    for (std::uint64_t m = e.plan.reads; m != 0; m &= m - 1) {
      const auto c = static_cast<std::uint32_t>(std::countr_zero(m));
      const bool into_old = e.plan.kind == WritePlanKind::kReadModifyWrite;
      PoolBuffer& dst = into_old ? e.old[c] : e.image[c];
      auto buf = q_.buffers.get(len);
      if (!buf) {
        finish(buf.status());
        return;
      }
      dst = std::move(*buf);
      StripeMemberIo& io = new_io(chunk_member(g, stripe_, c));
      io.offset = q_.array.device_offset(stripe_ * g.strip_bytes() + e.a);
      io.op = MemberOp::kRead;
      io.buf = dst.data();
      io.len = len;
    }
  }
  (void)k;
  if (ios_used_ == 0) {
    start_compute();
    return;
  }
  const std::size_t n = ios_used_;
  for (std::size_t i = 0; i < n; ++i)
    submit_io(*ios_[i]);
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
    if (io.result >= 0) continue;
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
    Status st = a.fail_member(io.member, fmt::format("{} error at byte {}: {}", what, io.offset,
                                                     std::strerror(-io.result)));
    (void)st;  // a failure to record it on the survivors is logged by fail_member
  }
  if (a.array_failed()) {
    return make_error(Errc::kIoError, "stripe {}: member I/O failed beyond redundancy", stripe_);
  }
  return request_error;
}

void StripeOp::borrow_caller_data(Extent& e) {
  const std::uint32_t strip = q_.array.geometry.strip_bytes();
  e.borrowed = 0;
  // Strips fully covered by exactly one piece (several would need their order applied).
  std::array<std::uint8_t, kMaxDataChunks> covering{};
  std::array<std::byte*, kMaxDataChunks> source{};
  for (const Piece& p : pieces_) {
    for_each_segment(p, strip, [&](const Segment& s) {
      if (s.hi <= e.a || s.lo >= e.b) return;
      ++covering[s.d];
      if (!p.zero && s.lo <= e.a && s.hi >= e.b) source[s.d] = p.buf + s.src_offset + (e.a - s.lo);
    });
  }
  for (std::uint64_t m = e.full; m != 0; m &= m - 1) {
    const auto d = static_cast<std::uint32_t>(std::countr_zero(m));
    if (covering[d] == 1 && source[d] != nullptr && is_chunk_aligned(source[d])) {
      e.borrowed |= chunk_bit(d);
      e.data[d] = source[d];
    }
  }
}

void StripeOp::overlay_new_data(Extent& e) {
  const std::uint32_t strip = q_.array.geometry.strip_bytes();
  for (const Piece& p : pieces_) {
    for_each_segment(p, strip, [&](const Segment& s) {
      const std::uint32_t lo = std::max(s.lo, e.a);
      const std::uint32_t hi = std::min(s.hi, e.b);
      if (lo >= hi || (e.borrowed & chunk_bit(s.d)) != 0) return;
      std::byte* dst = e.image[s.d].data() + (lo - e.a);
      if (p.zero) {
        std::memset(dst, 0, hi - lo);
      } else {
        std::memcpy(dst, p.buf + s.src_offset + (lo - s.lo), hi - lo);
      }
    });
  }
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

void StripeOp::start_compute() {
  const Geometry& g = q_.array.geometry;
  const std::uint32_t k = g.data_strips();
  const std::uint32_t npar = g.parity_strips();
  const ParityScheme scheme = scheme_of(g);
  std::vector<StripeJob>& jobs = jobs_;
  jobs.clear();

  // Degraded plans first rebuild what the dead members held.
  for (std::size_t i = 0; i < extents_used_; ++i) {
    Extent& e = extents_[i];
    if (e.plan.kind != WritePlanKind::kDegraded) continue;
    const std::uint32_t len = e.b - e.a;
    const std::uint64_t all = low_bits(k + npar);
    const std::uint64_t missing = all & ~e.plan.reads;
    e.rebuilt = 0;
    if (mode_ == Mode::kDegradedRead && (e.touched & ~e.plan.reads) == 0) continue;
    e.rebuilt = missing;
    StripeJob job;
    job.op = ParityOp::kReconstruct;
    job.scheme = scheme;
    job.k = k;
    job.len = len;
    for (std::uint32_t c = 0; c < k + npar; ++c) {
      Status st = ensure(e.image[c], len);
      if (!st) return finish(st);
      job.chunk[c] = e.image[c].view(0, len);
    }
    for (std::uint64_t m = missing; m != 0; m &= m - 1) {
      job.missing[job.missing_count++] = static_cast<std::uint8_t>(std::countr_zero(m));
    }
    if (job.missing_count > 0) jobs.push_back(job);
  }
  compute_stage_ = ComputeStage::kReconstruct;
  if (!jobs.empty()) return q_.queue_parity(*this);
  after_reconstruct();
}

void StripeOp::after_reconstruct() {
  const Geometry& g = q_.array.geometry;
  const std::uint32_t k = g.data_strips();
  const std::uint32_t npar = g.parity_strips();
  const ParityScheme scheme = scheme_of(g);
  std::vector<StripeJob>& jobs = jobs_;
  jobs.clear();

  if (mode_ == Mode::kDegradedRead) {
    const std::uint32_t strip = g.strip_bytes();
    for (std::size_t i = 0; i < extents_used_; ++i) {
      Extent& e = extents_[i];
      for (const Piece& p : pieces_) {
        for_each_segment(p, strip, [&](const Segment& s) {
          const std::uint32_t lo = std::max(s.lo, e.a);
          const std::uint32_t hi = std::min(s.hi, e.b);
          if (lo >= hi) return;
          std::memcpy(p.buf + s.src_offset + (lo - s.lo), e.image[s.d].data() + (lo - e.a),
                      hi - lo);
        });
      }
    }
    // Read-error correction: write what was rebuilt back where it could not be read.
    bool repair = false;
    for (std::size_t i = 0; i < extents_used_; ++i) {
      Extent& e = extents_[i];
      e.plan.writes = 0;
      for (std::uint64_t m = e.rebuilt; m != 0; m &= m - 1) {
        const auto c = static_cast<std::uint32_t>(std::countr_zero(m));
        if (!chunk_unreadable(c)) continue;
        e.plan.writes |= chunk_bit(c);
        e.data[c] = e.image[c].data();
        repair = true;
      }
    }
    if (!repair) return finish(Status::ok());
    if (Status st = hold_bitmap(); !st) return finish(st);
    return issue_writes();
  }

  // New data images, then parity.
  for (std::size_t i = 0; i < extents_used_; ++i) {
    Extent& e = extents_[i];
    const std::uint32_t len = e.b - e.a;
    const bool rmw = e.plan.kind == WritePlanKind::kReadModifyWrite;
    const bool need_all = e.plan.kind != WritePlanKind::kReadModifyWrite;
    if (e.plan.kind != WritePlanKind::kDegraded) borrow_caller_data(e);
    for (std::uint32_t d = 0; d < k; ++d) {
      const bool touched = (e.touched & chunk_bit(d)) != 0;
      if (!touched && !need_all) continue;
      if ((e.borrowed & chunk_bit(d)) != 0) continue;
      if (Status st = ensure(e.image[d], len); !st) return finish(st);
      e.data[d] = e.image[d].data();
      if (rmw && touched && (e.full & chunk_bit(d)) == 0) {
        std::memcpy(e.image[d].data(), e.old[d].data(), len);
      }
    }
    overlay_new_data(e);

    const std::uint64_t parity_mask = low_bits(k + npar) & ~low_bits(k);
    if ((e.plan.writes & parity_mask) == 0) continue;  // no live parity: data only
    for (std::uint32_t c = k; c < k + npar; ++c) {
      if (Status st = ensure(e.image[c], len); !st) return finish(st);
      e.data[c] = e.image[c].data();
    }
    StripeJob job;
    job.op = ParityOp::kEncode;
    job.len = len;
    if (rmw) {
      // P' = P ^ old(T) ^ new(T): one XOR over 1 + 2|T| sources.
      job.scheme = ParityScheme::kP;
      std::uint32_t n = 0;
      job.chunk[n++] = e.old[k].view(0, len);
      for (std::uint64_t m = e.touched; m != 0; m &= m - 1) {
        const auto d = static_cast<std::uint32_t>(std::countr_zero(m));
        job.chunk[n++] = e.old[d].view(0, len);
        job.chunk[n++] = chunk_view(e.data[d], len);
      }
      job.k = n;
      job.chunk[n] = e.image[k].view(0, len);
    } else {
      job.scheme = scheme;
      job.k = k;
      for (std::uint32_t c = 0; c < k + npar; ++c)
        job.chunk[c] = chunk_view(e.data[c], len);
    }
    jobs.push_back(job);
  }
  compute_stage_ = ComputeStage::kEncode;
  if (!jobs.empty()) return q_.queue_parity(*this);
  after_encode();
}

Status StripeOp::hold_bitmap() {
  Array::State& a = q_.array;
  if (!a.bitmap || bitmap_held_) return Status::ok();
  const std::uint32_t strip = a.geometry.strip_bytes();
  GRAID_RETURN_IF_ERROR(a.bitmap_begin(stripe_ * strip, strip));
  bitmap_held_ = true;
  return Status::ok();
}

void StripeOp::after_encode() {
  if (Status st = hold_bitmap(); !st) return finish(st);
  ++q_.stats.stripe_writes;
  for (std::size_t i = 0; i < extents_used_; ++i) {
    switch (extents_[i].plan.kind) {
      case WritePlanKind::kFullStripe:
        ++q_.stats.full_stripe;
        break;
      case WritePlanKind::kReconstructWrite:
        ++q_.stats.reconstruct_write;
        break;
      case WritePlanKind::kReadModifyWrite:
        ++q_.stats.read_modify_write;
        break;
      case WritePlanKind::kDegraded:
        ++q_.stats.degraded_write;
        break;
      case WritePlanKind::kFailed:
        break;
    }
  }
  issue_writes();
}

void StripeOp::issue_writes() {
  const Geometry& g = q_.array.geometry;
  phase_ = Phase::kWriting;
  ios_used_ = 0;
  for (std::size_t i = 0; i < extents_used_; ++i) {
    Extent& e = extents_[i];
    for (std::uint64_t m = e.plan.writes; m != 0; m &= m - 1) {
      const auto c = static_cast<std::uint32_t>(std::countr_zero(m));
      StripeMemberIo& io = new_io(chunk_member(g, stripe_, c));
      io.op = MemberOp::kWrite;
      io.offset = q_.array.device_offset(stripe_ * g.strip_bytes() + e.a);
      io.buf = e.data[c];
      io.len = e.b - e.a;
      io.fua = fua_;
    }
  }
  if (ios_used_ == 0) return finish(Status::ok());
  const std::size_t n = ios_used_;
  for (std::size_t i = 0; i < n; ++i)
    submit_io(*ios_[i]);
}

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
        if (q_.array.is_failed(member)) continue;
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
    if (!q_.array.is_failed(m) && ((unreadable_ >> m) & 1) == 0) {
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
    if (q_.array.is_failed(m) || ((unreadable_ >> m) & 1) == 0) continue;
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
    if (q_.array.is_failed(m)) continue;
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

void StripeOp::release_buffers() {
  for (std::size_t i = 0; i < extents_used_; ++i) {
    for (auto& b : extents_[i].image)
      q_.buffers.put(std::move(b));
    for (auto& b : extents_[i].old)
      q_.buffers.put(std::move(b));
  }
  extents_used_ = 0;
  q_.buffers.put(std::move(scratch_));
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
    a.bitmap->end_write(stripe_ * a.geometry.strip_bytes(), a.geometry.strip_bytes());
    bitmap_held_ = false;
  }
  release_buffers();
  if (phase_ != Phase::kIdle) a.locks.release(lock_, q_.ctx);
  phase_ = Phase::kIdle;
  for (const Piece& p : pieces_)
    q_.part_done(*p.io, status);
  q_.recycle(*this);
}

}  // namespace graid
