#include "array/consistency.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <vector>

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

Result<std::uint64_t> resync_range(Array::State& s, std::uint64_t member_offset,
                                   std::uint64_t len) {
  const Geometry& g = s.geometry;
  const std::uint32_t strip = g.strip_bytes();
  if (g.level() == RaidLevel::kRaid0 || len == 0) return std::uint64_t{0};
  const std::uint64_t first = member_offset / strip;
  const std::uint64_t last =
      std::min(g.stripes(s.data_size), (member_offset + len + strip - 1) / strip);
  const std::uint32_t k = g.data_strips();
  auto bufs = StripeBuffers::make(g.members(), strip);
  if (!bufs) return bufs.status();
  std::uint64_t synced = 0, skipped = 0;
  for (std::uint64_t stripe = first; stripe < last; ++stripe) {
    const std::uint64_t at = s.device_offset(stripe * strip);
    if (g.parity_strips() > 0) {
      bool data_alive = true;
      for (std::uint32_t d = 0; d < k; ++d)
        data_alive &= !s.is_failed(g.data_member(stripe, d));
      if (!data_alive) {
        ++skipped;
        continue;
      }
      for (std::uint32_t d = 0; d < k; ++d) {
        GRAID_RETURN_IF_ERROR(
            s.members[g.data_member(stripe, d)]->read_sync(at, bufs->chunk[d].span()));
      }
      StripeJob job = parity_job(g, *bufs, ParityOp::kEncode);
      GRAID_RETURN_IF_ERROR(s.parity->execute(std::span(&job, 1)));
      for (std::uint32_t c = k; c < k + g.parity_strips(); ++c) {
        const std::uint32_t m = chunk_member(g, stripe, c);
        if (s.is_failed(m)) continue;
        GRAID_RETURN_IF_ERROR(s.members[m]->write_sync(at, bufs->chunk[c].span()));
      }
    } else {
      for (std::uint32_t d = 0; d < k; ++d) {
        std::uint32_t source = g.members();
        for (std::uint32_t c = 0; c < g.copies() && source == g.members(); ++c) {
          if (!s.is_failed(g.data_member(stripe, d, c))) source = g.data_member(stripe, d, c);
        }
        if (source == g.members()) {
          ++skipped;
          continue;
        }
        GRAID_RETURN_IF_ERROR(s.members[source]->read_sync(at, bufs->chunk[0].span()));
        for (std::uint32_t c = 0; c < g.copies(); ++c) {
          const std::uint32_t m = g.data_member(stripe, d, c);
          if (m == source || s.is_failed(m)) continue;
          GRAID_RETURN_IF_ERROR(s.members[m]->write_sync(at, bufs->chunk[0].span()));
        }
      }
    }
    synced += strip;
  }
  if (skipped > 0) {
    spdlog::warn(
        "graid: array '{}': {} stripes could not be re-synced (a data member has "
        "failed); their parity is trusted as written",
        s.sb.name, skipped);
  }
  return synced;
}

Result<std::uint64_t> count_inconsistent_stripes(Array::State& s) {
  const Geometry& g = s.geometry;
  const std::uint32_t strip = g.strip_bytes();
  if (g.level() == RaidLevel::kRaid0) return std::uint64_t{0};
  auto bufs = StripeBuffers::make(g.members(), strip);
  if (!bufs) return bufs.status();
  const std::uint32_t k = g.data_strips();
  std::uint64_t bad = 0;
  for (std::uint64_t stripe = 0; stripe < g.stripes(s.data_size); ++stripe) {
    const std::uint64_t at = s.device_offset(stripe * strip);
    if (g.parity_strips() > 0) {
      bool all_alive = true;
      for (std::uint32_t c = 0; c < k + g.parity_strips(); ++c) {
        all_alive &= !s.is_failed(chunk_member(g, stripe, c));
      }
      if (!all_alive) continue;
      for (std::uint32_t c = 0; c < k + g.parity_strips(); ++c) {
        GRAID_RETURN_IF_ERROR(
            s.members[chunk_member(g, stripe, c)]->read_sync(at, bufs->chunk[c].span()));
      }
      StripeJob job = parity_job(g, *bufs, ParityOp::kVerify);
      GRAID_RETURN_IF_ERROR(s.parity->execute(std::span(&job, 1)));
      if (!job.parity_ok) ++bad;
    } else {
      bool stripe_bad = false;
      for (std::uint32_t d = 0; d < k; ++d) {
        bool have_first = false;
        for (std::uint32_t c = 0; c < g.copies(); ++c) {
          const std::uint32_t m = g.data_member(stripe, d, c);
          if (s.is_failed(m)) continue;
          AlignedBuffer& dst = have_first ? bufs->chunk[1] : bufs->chunk[0];
          GRAID_RETURN_IF_ERROR(s.members[m]->read_sync(at, dst.span()));
          if (have_first && std::memcmp(bufs->chunk[0].data(), dst.data(), strip) != 0) {
            stripe_bad = true;
          }
          have_first = true;
        }
      }
      if (stripe_bad) ++bad;
    }
  }
  return bad;
}

}  // namespace graid
