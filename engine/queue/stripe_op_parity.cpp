// StripeOp on parity levels: extents and plans (stripe/write_plan.h), reads, reconstruction of
// lost chunks, parity encode through the queue's parity batch, and the member writes.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>

#include "queue/array_queue_impl.h"

namespace graid {

bool StripeOp::build_extents() {
  const Geometry& g = q_.array.geometry;
  const std::uint32_t strip = g.strip_bytes();
  const std::uint32_t k = g.data_strips();

  // Row intervals touched by any piece, merged.
  std::vector<Interval>& rows = rows_scratch_;
  rows.clear();
  for (const Piece& p : pieces_) {
    for_each_segment(p, strip, [&](const Segment& s) { rows.emplace_back(s.lo, s.hi); });
  }
  std::sort(rows.begin(), rows.end());
  std::vector<Interval>& merged = merged_scratch_;
  merged.clear();
  for (const auto& r : rows) {
    if (!merged.empty() && r.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }

  std::uint64_t dead = 0;
  for (std::uint32_t d = 0; d < k; ++d) {
    if (q_.array.dead_at(g.data_member(stripe_, d), stripe_)) dead |= chunk_bit(d);
  }
  if (q_.array.dead_at(g.p_member(stripe_), stripe_)) dead |= chunk_bit(k);
  if (g.parity_strips() == 2 && q_.array.dead_at(g.q_member(stripe_), stripe_)) {
    dead |= chunk_bit(k + 1);
  }
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
    auto& cover = cover_scratch_;
    for (std::uint32_t d = 0; d < k; ++d)
      cover[d].clear();
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
    c.allow_read_modify_write = q_.array.initialised(stripe_);
    e.plan = plan_write(c);
    if (e.plan.kind == WritePlanKind::kFailed) return false;
    // ... and rewritten with their new contents, which repairs the sectors. Plans other than
    // read-modify-write build every chunk's image; RMW neither reads nor writes an untouched
    // unreadable chunk, which then stays for the next read that meets it to repair.
    if (e.plan.kind != WritePlanKind::kReadModifyWrite) e.plan.writes |= unreadable & all;
  }
  return true;
}

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
      StripeMemberIo& io = new_io(g.chunk_member(stripe_, c));
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

void StripeOp::start_compute() {
  const Geometry& g = q_.array.geometry;
  const std::uint32_t k = g.data_strips();
  const std::uint32_t npar = g.parity_strips();
  const ParityScheme scheme = g.parity_scheme();
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
  const ParityScheme scheme = g.parity_scheme();
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

void StripeOp::after_encode() {
  if (Status st = hold_bitmap(); !st) return finish(st);
  if (count_ > 1) {
    q_.stats.stripe_writes += count_;
    q_.stats.full_stripe += count_;
    ++q_.stats.stripe_runs;
    q_.stats.run_stripes += count_;
    return journal_or_write();  // no record for a run: issue_writes()
  }
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
  journal_or_write();
}

void StripeOp::issue_writes() {
  if (count_ > 1) return issue_run_writes();
  const Geometry& g = q_.array.geometry;
  phase_ = Phase::kWriting;
  ios_used_ = 0;
  for (std::size_t i = 0; i < extents_used_; ++i) {
    Extent& e = extents_[i];
    for (std::uint64_t m = e.plan.writes; m != 0; m &= m - 1) {
      const auto c = static_cast<std::uint32_t>(std::countr_zero(m));
      StripeMemberIo& io = new_io(g.chunk_member(stripe_, c));
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

}  // namespace graid
