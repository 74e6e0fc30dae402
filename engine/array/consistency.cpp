#include "array/consistency.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "stripe/stripe_range_lock.h"

namespace graid {

namespace {

// Buffers for one stripe's chunks (data, then P, Q) of one strip each.
struct StripeBuffers {
  std::vector<AlignedBuffer> chunk;

  static Result<StripeBuffers> make(std::uint32_t count, std::uint32_t strip) {
    StripeBuffers b;
    for (std::uint32_t i = 0; i < count; ++i) {
      auto buf = AlignedBuffer::allocate(strip, 4096);
      if (!buf) return buf.status();
      b.chunk.push_back(std::move(*buf));
    }
    return b;
  }
};

std::uint32_t chunk_member(const Geometry& g, std::uint64_t stripe, std::uint32_t c) {
  const std::uint32_t k = g.data_strips();
  if (c < k) return g.data_member(stripe, c);
  return c == k ? g.p_member(stripe) : g.q_member(stripe);
}

StripeJob parity_job(const Geometry& g, StripeBuffers& b, ParityOp op) {
  StripeJob job;
  job.op = op;
  job.scheme = g.parity_strips() == 2 ? ParityScheme::kPQ : ParityScheme::kP;
  job.k = g.data_strips();
  job.len = g.strip_bytes();
  for (std::uint32_t c = 0; c < job.k + g.parity_strips(); ++c)
    job.chunk[c] = b.chunk[c].view();
  return job;
}

}  // namespace

namespace {

// Outcome of re-syncing one stripe.
struct StripeResync {
  Status status;                      // first error; ok otherwise
  std::uint32_t failed_member = ~0u;  // member whose read or write failed, if any
  bool skipped = false;               // could not be re-synced (data member dead)
};

StripeResync resync_stripe(Array::State& s, std::uint64_t stripe, StripeBuffers& bufs) {
  const Geometry& g = s.geometry;
  const std::uint32_t k = g.data_strips();
  const std::uint64_t at = s.device_offset(stripe * g.strip_bytes());
  StripeResync out;
  auto io = [&](std::uint32_t m, Status st) {
    if (!st && out.status.is_ok()) {
      out.status = std::move(st);
      out.failed_member = m;
    }
    return out.status.is_ok();
  };
  if (g.parity_strips() > 0) {
    for (std::uint32_t d = 0; d < k; ++d) {
      if (s.is_failed(g.data_member(stripe, d))) {
        out.skipped = true;
        return out;
      }
    }
    for (std::uint32_t d = 0; d < k; ++d) {
      const std::uint32_t m = g.data_member(stripe, d);
      if (!io(m, s.members[m]->read_sync(at, bufs.chunk[d].span()))) return out;
    }
    StripeJob job = parity_job(g, bufs, ParityOp::kEncode);
    if (Status st = s.parity->execute(std::span(&job, 1)); !st) {
      out.status = std::move(st);
      return out;
    }
    for (std::uint32_t c = k; c < k + g.parity_strips(); ++c) {
      const std::uint32_t m = chunk_member(g, stripe, c);
      if (s.is_failed(m)) continue;
      if (!io(m, s.members[m]->write_sync(at, bufs.chunk[c].span()))) return out;
    }
    return out;
  }
  for (std::uint32_t d = 0; d < k; ++d) {
    std::uint32_t source = g.members();
    for (std::uint32_t c = 0; c < g.copies() && source == g.members(); ++c) {
      if (!s.is_failed(g.data_member(stripe, d, c))) source = g.data_member(stripe, d, c);
    }
    if (source == g.members()) {
      out.skipped = true;
      continue;
    }
    if (!io(source, s.members[source]->read_sync(at, bufs.chunk[0].span()))) return out;
    for (std::uint32_t c = 0; c < g.copies(); ++c) {
      const std::uint32_t m = g.data_member(stripe, d, c);
      if (m == source || s.is_failed(m)) continue;
      if (!io(m, s.members[m]->write_sync(at, bufs.chunk[0].span()))) return out;
    }
  }
  return out;
}

}  // namespace

std::uint64_t count_unsyncable_stripes(const Array::State& s, std::uint64_t member_offset,
                                       std::uint64_t len) {
  const Geometry& g = s.geometry;
  const std::uint32_t strip = g.strip_bytes();
  if (g.level() == RaidLevel::kRaid0 || len == 0) return 0;
  const std::uint64_t first = member_offset / strip;
  const std::uint64_t last =
      std::min(g.stripes(s.data_size), (member_offset + len + strip - 1) / strip);
  std::uint64_t count = 0;
  for (std::uint64_t stripe = first; stripe < last; ++stripe) {
    bool dead = false;
    for (std::uint32_t d = 0; d < g.data_strips() && !dead; ++d) {
      if (g.parity_strips() > 0) {
        dead = s.is_failed(g.data_member(stripe, d));
        continue;
      }
      bool any_copy = false;
      for (std::uint32_t c = 0; c < g.copies(); ++c)
        any_copy |= !s.is_failed(g.data_member(stripe, d, c));
      dead = !any_copy;
    }
    count += dead ? 1 : 0;
  }
  return count;
}

Result<std::uint64_t> resync_range(Array::State& s, std::uint64_t member_offset, std::uint64_t len,
                                   std::uint64_t* unsynced) {
  const Geometry& g = s.geometry;
  const std::uint32_t strip = g.strip_bytes();
  if (g.level() == RaidLevel::kRaid0 || len == 0) return std::uint64_t{0};
  const std::uint64_t first = member_offset / strip;
  const std::uint64_t last =
      std::min(g.stripes(s.data_size), (member_offset + len + strip - 1) / strip);
  auto bufs = StripeBuffers::make(g.members(), strip);
  if (!bufs) return bufs.status();
  std::uint64_t synced = 0, skipped = 0;
  for (std::uint64_t stripe = first; stripe < last; ++stripe) {
    StripeResync r = resync_stripe(s, stripe, *bufs);
    // A member that fails a read or write here fails as it would under I/O, and the stripe is
    // done again without it (bounded: each round fails one more member).
    for (std::uint32_t round = 0; !r.status && r.failed_member < g.members(); ++round) {
      if (r.status.code() != Errc::kIoError || round >= g.members()) return r.status;
      Status fs = s.fail_member(
          r.failed_member, fmt::format("re-sync of stripe {}: {}", stripe, r.status.message()));
      (void)fs;  // logged by fail_member
      if (s.array_failed()) {
        return make_error(Errc::kIoError, "array failed while re-syncing stripe {}: {}", stripe,
                          r.status.message());
      }
      r = resync_stripe(s, stripe, *bufs);
    }
    if (!r.status) return r.status;
    if (r.skipped) {
      ++skipped;
      continue;
    }
    synced += strip;
  }
  if (skipped > 0) {
    spdlog::warn(
        "graid: array '{}': {} stripes could not be re-synced (a data member has "
        "failed); their parity is trusted as written",
        s.sb.name, skipped);
  }
  if (unsynced != nullptr) *unsynced += skipped;
  return synced;
}

Status initialise(Array::State& s, std::uint64_t from) {
  // Checkpoints every 1/64 of the data area (at least 64 MiB apart): a crash costs at most that
  // much redone work, and the superblocks are not rewritten for every stripe.
  const std::uint64_t strip = s.geometry.strip_bytes();
  const std::uint64_t step =
      std::max<std::uint64_t>((s.data_size / 64 + strip - 1) / strip * strip, 64u << 20);
  for (std::uint64_t at = from / strip * strip; at < s.data_size;) {
    const std::uint64_t len = std::min(step, s.data_size - at);
    auto synced = resync_range(s, at, len);
    if (!synced) return synced.status();
    at += len;
    if (at < s.data_size) {
      std::lock_guard guard(s.control_mutex);
      s.sb.init_checkpoint = at;
      GRAID_RETURN_IF_ERROR(s.write_superblocks_locked());
    }
  }
  return Status::ok();
}

namespace {

// Whether one stripe's parity (or every mirror copy) matches its data; false also for a stripe
// with a failed member (not checkable, so not counted). REQUIRES: the stripe locked.
Result<bool> stripe_inconsistent(Array::State& s, std::uint64_t stripe, StripeBuffers& bufs) {
  const Geometry& g = s.geometry;
  const std::uint32_t strip = g.strip_bytes();
  const std::uint32_t k = g.data_strips();
  const std::uint64_t at = s.device_offset(stripe * strip);
  if (g.parity_strips() > 0) {
    for (std::uint32_t c = 0; c < k + g.parity_strips(); ++c) {
      if (s.is_failed(chunk_member(g, stripe, c))) return false;
    }
    for (std::uint32_t c = 0; c < k + g.parity_strips(); ++c) {
      GRAID_RETURN_IF_ERROR(
          s.members[chunk_member(g, stripe, c)]->read_sync(at, bufs.chunk[c].span()));
    }
    StripeJob job = parity_job(g, bufs, ParityOp::kVerify);
    GRAID_RETURN_IF_ERROR(s.parity->execute(std::span(&job, 1)));
    return !job.parity_ok;
  }
  bool bad = false;
  for (std::uint32_t d = 0; d < k; ++d) {
    bool have_first = false;
    for (std::uint32_t c = 0; c < g.copies(); ++c) {
      const std::uint32_t m = g.data_member(stripe, d, c);
      if (s.is_failed(m)) continue;
      AlignedBuffer& dst = have_first ? bufs.chunk[1] : bufs.chunk[0];
      GRAID_RETURN_IF_ERROR(s.members[m]->read_sync(at, dst.span()));
      if (have_first && std::memcmp(bufs.chunk[0].data(), dst.data(), strip) != 0) bad = true;
      have_first = true;
    }
  }
  return bad;
}

}  // namespace

Result<std::uint64_t> count_inconsistent_stripes(Array::State& s) {
  const Geometry& g = s.geometry;
  if (g.level() == RaidLevel::kRaid0) return std::uint64_t{0};
  auto bufs = StripeBuffers::make(g.members(), g.strip_bytes());
  if (!bufs) return bufs.status();
  // Window by window under stripe locks, so no write is half done on a stripe being read (a
  // read between a write's data and parity updates would see a false mismatch).
  StripeRangeLock window(s.locks);
  const std::uint64_t stripes = g.stripes(s.data_size);
  std::uint64_t bad = 0;
  for (std::uint64_t first = 0; first < stripes; first += kCheckWindowStripes) {
    window.lock(first, std::min(kCheckWindowStripes, stripes - first));
    for (std::uint64_t stripe = first; stripe < first + window.count(); ++stripe) {
      auto inconsistent = stripe_inconsistent(s, stripe, *bufs);
      if (!inconsistent) return inconsistent.status();
      bad += *inconsistent ? 1 : 0;
    }
    window.unlock();
  }
  return bad;
}

}  // namespace graid
