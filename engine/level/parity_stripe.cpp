// Background-job work on one stripe of a parity level (RAID5, RAID6): resync recomputes P (and
// Q) from the data; check verifies them; rebuild remakes the strips of members being rebuilt. Data
// strips first, then P, then Q, as StripeJob wants.
#include <algorithm>

#include "level/level_module.h"

namespace graid {
namespace {

StripeJob parity_job(const Geometry& g, std::span<AlignedBuffer> bufs, ParityOp op) {
  StripeJob job;
  job.op = op;
  job.scheme = g.parity_strips() == 2 ? ParityScheme::kPQ : ParityScheme::kP;
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
    if (!out.member_io(m, access.read_strip(m, stripe, bufs[c].span()))) return out;
  }
  if (!run_job(access, job, out)) return out;
  for (std::uint32_t c = 0; c < chunks; ++c) {
    const std::uint32_t m = g.chunk_member(stripe, c);
    if (!access.is_stale(m)) continue;
    if (!out.member_io(m, access.write_strip(m, stripe, bufs[c].span()))) return out;
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
      if (!out.member_io(m, access.read_strip(m, stripe, bufs[c].span()))) return out;
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
    if (!out.member_io(m, access.read_strip(m, stripe, bufs[d].span()))) return out;
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
