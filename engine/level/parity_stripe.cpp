// Background-job work on one stripe of a parity level (RAID5, RAID6): resync recomputes P (and
// Q) from the data; check verifies them; rebuild remakes the strips of members being rebuilt. Data
// strips first, then P, then Q, as StripeJob wants.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "level/level_module.h"

namespace graid {
namespace {

StripeJob parity_job(const Geometry& g, std::span<AlignedBuffer> bufs, ParityOp op) {
  StripeJob job;
  job.op = op;
  job.scheme = g.parity_scheme();
  job.k = g.data_strips();
  job.len = g.strip_bytes();
  for (std::uint32_t c = 0; c < job.k + g.parity_strips(); ++c)
    job.chunk[c] = bufs[c].view();
  return job;
}

// Runs one job on the access's backend; false (the error in `out`) when it fails.
bool run_job(StripeAccess& access, StripeJob& job, StripeOutcome& out) {
  Status st = access.parity() != nullptr
                  ? access.parity()->execute(std::span(&job, 1))
                  : make_error(Errc::kInternal, "parity level without a parity backend");
  if (!st) out.status = std::move(st);
  return out.status.is_ok();
}

// kRebuild: reads every chunk of a member neither failed nor stale, reconstructs the missing
// ones (failed and stale, at most the parity count) and writes the stale ones.
StripeOutcome rebuild_parity_stripe(const Geometry& g, StripeAccess& access, std::uint64_t stripe) {
  const std::uint32_t chunks = g.data_strips() + g.parity_strips();
  std::span<AlignedBuffer> bufs = access.scratch();
  StripeOutcome out;
  StripeJob job = parity_job(g, bufs, ParityOp::kReconstruct);
  bool any_stale = false;
  for (std::uint32_t c = 0; c < chunks; ++c) {
    const std::uint32_t m = g.chunk_member(stripe, c);
    const bool stale = access.is_stale(m);
    if (!stale && !access.is_failed(m, stripe)) continue;
    if (job.missing_count == g.parity_strips()) {
      out.skipped = true;  // more chunks missing than parity can give back
      return out;
    }
    job.missing[job.missing_count++] = static_cast<std::uint8_t>(c);
    any_stale |= stale;
  }
  if (!any_stale) return out;
  for (std::uint32_t c = 0; c < chunks; ++c) {
    const std::uint32_t m = g.chunk_member(stripe, c);
    if (access.is_stale(m) || access.is_failed(m, stripe)) continue;
    if (!out.member_read(m, access.read_strip(m, stripe, bufs[c].span()))) return out;
  }
  if (!run_job(access, job, out)) return out;
  for (std::uint32_t c = 0; c < chunks; ++c) {
    const std::uint32_t m = g.chunk_member(stripe, c);
    if (!access.is_stale(m)) continue;
    if (!out.member_io(m, access.write_strip(m, stripe, bufs[c].span()))) return out;
  }
  return out;
}

// kRepair: reads the whole stripe and, when parity disagrees, fixes the strip the deltas between
// stored and recomputed parity point at (locate_parity_mismatch): a data strip RAID6 can locate
// is corrected (D ^= delta of P), parity strips that alone differ are rewritten, and anything
// else gets parity recomputed from the data (md's repair).
StripeOutcome repair_parity_stripe(const Geometry& g, StripeAccess& access, std::uint64_t stripe) {
  const std::uint32_t k = g.data_strips();
  const std::uint32_t m = g.parity_strips();
  const std::uint32_t chunks = k + m;
  const std::size_t len = g.strip_bytes();
  std::span<AlignedBuffer> bufs = access.scratch();
  StripeOutcome out;
  for (std::uint32_t c = 0; c < chunks; ++c) {
    if (access.is_failed(g.chunk_member(stripe, c), stripe)) {
      out.skipped = true;  // nothing to compare with
      return out;
    }
  }
  for (std::uint32_t c = 0; c < chunks; ++c) {
    const std::uint32_t member = g.chunk_member(stripe, c);
    if (!out.member_read(member, access.read_strip(member, stripe, bufs[c].span()))) return out;
  }
  StripeJob verify = parity_job(g, bufs, ParityOp::kVerify);
  if (!run_job(access, verify, out) || verify.parity_ok) return out;
  out.inconsistent = true;
  // Parity recomputed from the stored data, then XORed with the stored parity: the deltas.
  std::array<AlignedBuffer, 2> computed;
  StripeJob encode = parity_job(g, bufs, ParityOp::kEncode);
  for (std::uint32_t j = 0; j < m; ++j) {
    auto buf = AlignedBuffer::allocate(len, 4096);
    if (!buf) {
      out.status = buf.status();
      return out;
    }
    computed[j] = std::move(*buf);
    encode.chunk[k + j] = computed[j].view();
  }
  if (!run_job(access, encode, out)) return out;
  std::array<ChunkView, 2> deltas;
  for (std::uint32_t j = 0; j < m; ++j) {
    std::byte* delta = computed[j].data();
    const std::byte* stored = bufs[k + j].data();
    for (std::size_t i = 0; i < len; ++i)
      delta[i] ^= stored[i];
    deltas[j] = computed[j].view();
  }
  const ParityMismatch where =
      locate_parity_mismatch(verify.scheme, k, std::span<const ChunkView>(deltas.data(), m), len);
  auto write_parity = [&](std::uint32_t mask) {
    for (std::uint32_t j = 0; j < m; ++j) {
      if ((mask >> j & 1u) == 0) continue;
      std::byte* fixed = bufs[k + j].data();
      for (std::size_t i = 0; i < len; ++i)
        fixed[i] ^= deltas[j].data()[i];  // stored ^ delta = recomputed
      const std::uint32_t member = g.chunk_member(stripe, k + j);
      if (!out.member_io(member, access.write_strip(member, stripe, bufs[k + j].span()))) {
        return false;
      }
    }
    return true;
  };
  switch (where.kind) {
    case ParityMismatch::Kind::kNone:
      break;
    case ParityMismatch::Kind::kData: {
      const std::uint32_t member = g.chunk_member(stripe, where.data_index);
      std::byte* fixed = bufs[where.data_index].data();
      for (std::size_t i = 0; i < len; ++i)
        fixed[i] ^= deltas[0].data()[i];
      if (!out.member_io(member,
                         access.write_strip(member, stripe, bufs[where.data_index].span()))) {
        return out;
      }
      out.repaired = fmt::format(
          "data strip {} on member {} was wrong (located by P and Q) and was "
          "corrected",
          where.data_index, member);
      break;
    }
    case ParityMismatch::Kind::kParity:
      if (!write_parity(where.parity_mask)) return out;
      out.repaired = where.parity_mask == 1u   ? "P was wrong and was rewritten"
                     : where.parity_mask == 2u ? "Q was wrong and was rewritten"
                                               : "P and Q were wrong and were rewritten";
      break;
    case ParityMismatch::Kind::kUnknown:
      if (!write_parity((1u << m) - 1)) return out;
      out.repaired = m == 1 ? "parity rewritten from the data (RAID5 cannot tell which strip was "
                              "wrong)"
                            : "more than one strip differs: parity rewritten from the data";
      break;
  }
  return out;
}

}  // namespace

bool can_resync_parity_stripe(const Geometry& g, std::uint64_t stripe, std::uint64_t failed) {
  for (std::uint32_t d = 0; d < g.data_strips(); ++d) {
    if ((failed >> g.data_member(stripe, d) & 1u) != 0) return false;
  }
  return true;
}

StripeOutcome process_parity_stripe(StripeTask task, const Geometry& g, StripeAccess& access,
                                    std::uint64_t stripe) {
  const std::uint32_t k = g.data_strips();
  const std::uint32_t chunks = k + g.parity_strips();
  std::span<AlignedBuffer> bufs = access.scratch();
  StripeOutcome out;
  auto run = [&](StripeJob& job) { return run_job(access, job, out); };
  if (task == StripeTask::kRebuild) return rebuild_parity_stripe(g, access, stripe);
  if (task == StripeTask::kRepair) return repair_parity_stripe(g, access, stripe);
  if (task == StripeTask::kCheck) {
    // A stripe with a failed member has nothing to compare against: not checkable.
    for (std::uint32_t c = 0; c < chunks; ++c) {
      if (access.is_failed(g.chunk_member(stripe, c), stripe)) {
        out.skipped = true;
        return out;
      }
    }
    for (std::uint32_t c = 0; c < chunks; ++c) {
      const std::uint32_t m = g.chunk_member(stripe, c);
      if (!out.member_read(m, access.read_strip(m, stripe, bufs[c].span()))) return out;
    }
    StripeJob job = parity_job(g, bufs, ParityOp::kVerify);
    if (!run(job)) return out;
    out.inconsistent = !job.parity_ok;
    return out;
  }
  for (std::uint32_t d = 0; d < k; ++d) {
    if (access.is_failed(g.data_member(stripe, d), stripe)) {
      out.skipped = true;
      return out;
    }
  }
  for (std::uint32_t d = 0; d < k; ++d) {
    const std::uint32_t m = g.data_member(stripe, d);
    if (!out.member_read(m, access.read_strip(m, stripe, bufs[d].span()))) return out;
  }
  StripeJob job = parity_job(g, bufs, ParityOp::kEncode);
  if (!run(job)) return out;
  for (std::uint32_t c = k; c < chunks; ++c) {
    const std::uint32_t m = g.chunk_member(stripe, c);
    if (access.is_failed(m, stripe)) continue;
    if (!out.member_io(m, access.write_strip(m, stripe, bufs[c].span()))) return out;
  }
  return out;
}

}  // namespace graid
