#include "jobs/sync_policy.h"

#include <cstring>

namespace graid {

namespace {

enum WindowNote : std::uint64_t {
  kBulk = 0,      // parity levels, or mirrors copying in the buffers
  kShared = 1,    // mirrors: the copies written from the buffer their source was read into
  kByStrips = 2,  // a member failed in part of the window: the level module's way
};

std::uint64_t bit(std::uint32_t m) {
  return std::uint64_t{1} << m;
}

}  // namespace

bool SyncPolicy::any_dead(const JobWindow& w) const {
  for (std::uint32_t m = 0; m < s_.geometry.members(); ++m) {
    if (s_.dead_at(m, w.first()) || s_.dead_at(m, w.first() + w.count() - 1)) return true;
  }
  return false;
}

Status SyncPolicy::member_failed() {
  if (!stop_on_failure_ || s_.failed_count.load(std::memory_order_acquire) == 0)
    return Status::ok();
  member_lost_ = true;
  return make_error(Errc::kIoError, "a member failed");
}

std::uint64_t SyncPolicy::reads(JobWindow& w) {
  const Geometry& g = s_.geometry;
  const std::uint64_t all = g.members() == 64 ? ~0ull : bit(g.members()) - 1;
  if (any_dead(w)) {
    w.note = kByStrips;
    return 0;
  }
  if (g.redundancy() == Redundancy::kParity) return all;
  // Mirrors: where each member's strips have the same first copy throughout the window, that
  // copy is read straight into the buffer the member is written from.
  std::vector<std::uint32_t> source_of(g.members(), g.members());
  for (std::uint64_t stripe = w.first(); stripe < w.first() + w.count(); ++stripe) {
    for (std::uint32_t d = 0; d < g.data_strips(); ++d) {
      const std::uint32_t src = g.data_member(stripe, d, 0);
      for (std::uint32_t c = 0; c < g.copies(); ++c) {
        const std::uint32_t m = g.data_member(stripe, d, c);
        if (source_of[m] != g.members() && source_of[m] != src) return all;  // copy in buffers
        source_of[m] = src;
      }
    }
  }
  std::uint64_t sources = 0;
  for (std::uint32_t m = 0; m < g.members(); ++m) {
    if (source_of[m] == g.members()) return all;  // holds no data strip here
    if (source_of[m] == m) sources |= bit(m);
  }
  for (std::uint32_t m = 0; m < g.members(); ++m) {
    // A source is its own source; every copy of it shares its buffer.
    if (source_of[source_of[m]] != source_of[m]) return all;
  }
  for (std::uint32_t m = 0; m < g.members(); ++m)
    w.share_buffer(m, source_of[m]);
  w.note = kShared;
  return sources;
}

bool SyncPolicy::prepare(JobWindow& w) {
  const Geometry& g = s_.geometry;
  if (w.note == kByStrips || w.note == kShared || g.redundancy() == Redundancy::kMirror) {
    return true;  // no parity (compute() decides)
  }
  // Every stripe's parity from its data, in the window's buffers, in one batch.
  return add_stripe_jobs(g, w, ParityOp::kEncode);
}

std::optional<std::uint64_t> SyncPolicy::compute(JobWindow& w) {
  const Geometry& g = s_.geometry;
  if (w.note == kByStrips) return std::nullopt;
  if (!member_failed()) return std::nullopt;  // the fallback stops the run
  const std::uint64_t all = g.members() == 64 ? ~0ull : bit(g.members()) - 1;
  if (w.note == kShared) return all & ~w.read_mask();
  if (g.redundancy() == Redundancy::kMirror) {
    std::uint64_t written = 0;
    for (std::uint64_t stripe = w.first(); stripe < w.first() + w.count(); ++stripe) {
      for (std::uint32_t d = 0; d < g.data_strips(); ++d) {
        const std::byte* src = w.at(g.data_member(stripe, d, 0), stripe);
        for (std::uint32_t c = 1; c < g.copies(); ++c) {
          const std::uint32_t m = g.data_member(stripe, d, c);
          std::memcpy(w.at(m, stripe), src, g.strip_bytes());
          written |= bit(m);
        }
      }
    }
    return written;  // a member's source strips go back as they were read (the window is locked)
  }
  // The parity, computed from prepare()'s jobs: written strip by strip.
  const std::uint32_t k = g.data_strips();
  const std::uint32_t chunks = k + g.parity_strips();
  for (std::uint64_t stripe = w.first(); stripe < w.first() + w.count(); ++stripe) {
    for (std::uint32_t c = k; c < chunks; ++c)
      w.write_strip(g.chunk_member(stripe, c), stripe);
  }
  return 0;
}

Status SyncPolicy::fallback(std::uint64_t first, std::uint64_t count) {
  for (std::uint64_t stripe = first; stripe < first + count; ++stripe) {
    GRAID_RETURN_IF_ERROR(member_failed());
    StripeOutcome r =
        process_stripe_failing_members(s_, access_, StripeTask::kResync, stripe, what_);
    if (!r.status) {
      return make_error(r.status.code(), "stripe {}: {}", stripe, r.status.message());
    }
    if (r.skipped) ++unsynced_;
  }
  return member_failed();
}

Status SyncPolicy::retire(std::uint64_t first, std::uint64_t count) {
  // A member that failed while the window was in flight: its stripes are done again once the
  // array is optimal (the initialisation), or were done strip by strip around it (a re-sync).
  GRAID_RETURN_IF_ERROR(member_failed());
  GRAID_RETURN_IF_ERROR(on_retire_(first, count));
  passed_ += count;
  next_ = first + count;
  return Status::ok();
}

}  // namespace graid
