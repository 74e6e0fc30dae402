#include "cost_model.h"

#include <algorithm>
#include <numeric>

namespace graid::bench {

namespace {

struct Count {
  double reads = 0;
  double writes = 0;
};

// One stripe's share of a request: data pieces touched and whether it covers the whole stripe.
struct StripeSlice {
  std::uint64_t pieces = 0;
  bool full = false;
};

// Alignments a request of `block` bytes can have relative to a stripe, sampled at most this many
// times (the largest geometry, 31 data strips of 1 MiB with 4 KiB blocks, needs 7936).
constexpr std::uint64_t kMaxAlignmentSamples = 8192;

// Calls `fn(StripeSlice)` for every stripe the request [offset, offset + block) touches.
template <typename Fn>
void for_each_stripe(const Geometry& g, std::uint64_t offset, std::uint64_t block, Fn&& fn) {
  const std::uint64_t strip = g.strip_bytes();
  const std::uint64_t stripe_bytes = g.stripe_data_bytes();
  const std::uint64_t end = offset + block;
  for (std::uint64_t s = offset / stripe_bytes; s * stripe_bytes < end; ++s) {
    const std::uint64_t base = s * stripe_bytes;
    const std::uint64_t a = std::max(offset, base) - base;
    const std::uint64_t b = std::min(end, base + stripe_bytes) - base;
    fn(StripeSlice{(b - 1) / strip - a / strip + 1, a == 0 && b == stripe_bytes});
  }
}

// Averages `per_request(offset)` over the alignments a block-aligned request can take.
template <typename Fn>
Count average_over_alignments(const Geometry& g, std::uint64_t block, Fn&& per_request) {
  const std::uint64_t stripe_bytes = g.stripe_data_bytes();
  const std::uint64_t samples =
      std::min(stripe_bytes / std::gcd(block, stripe_bytes), kMaxAlignmentSamples);
  Count sum;
  for (std::uint64_t i = 0; i < samples; ++i) {
    const Count c = per_request(i * block);
    sum.reads += c.reads;
    sum.writes += c.writes;
  }
  return Count{sum.reads / static_cast<double>(samples), sum.writes / static_cast<double>(samples)};
}

Count read_cost(const Geometry& g, std::uint64_t block) {
  return average_over_alignments(g, block, [&](std::uint64_t offset) {
    Count c;
    for_each_stripe(g, offset, block,
                    [&](StripeSlice slice) { c.reads += static_cast<double>(slice.pieces); });
    return c;
  });
}

// Member writes per data piece when nothing has to be read first.
double writes_per_piece_without_reads(const Geometry& g) {
  switch (g.level()) {
    case RaidLevel::kRaid0:
      return 1.0;
    case RaidLevel::kRaid1:
    case RaidLevel::kRaid10:
      return static_cast<double>(g.copies());
    case RaidLevel::kRaid5:
    case RaidLevel::kRaid6:
      return static_cast<double>(g.data_strips() + g.parity_strips()) /
             static_cast<double>(g.data_strips());
  }
  return 1.0;
}

Count random_write_cost(const Geometry& g, std::uint64_t block) {
  const auto k = static_cast<double>(g.data_strips());
  const auto p = static_cast<double>(g.parity_strips());
  const bool parity = g.parity_strips() > 0;
  const double mirror_writes = writes_per_piece_without_reads(g);
  return average_over_alignments(g, block, [&](std::uint64_t offset) {
    Count c;
    for_each_stripe(g, offset, block, [&](StripeSlice slice) {
      const auto t = static_cast<double>(slice.pieces);
      if (!parity) {
        c.writes += t * mirror_writes;
      } else if (slice.full) {
        c.writes += k + p;
      } else {
        const double rmw_reads = t + p;
        const double rcw_reads = k - t;
        c.reads += std::min(rmw_reads, rcw_reads);
        c.writes += t + p;
      }
    });
    return c;
  });
}

Count sequential_write_cost(const Geometry& g, std::uint64_t block) {
  const Count pieces = read_cost(g, block);  // data pieces per request, as for a read
  return Count{0.0, pieces.reads * writes_per_piece_without_reads(g)};
}

}  // namespace

MemberCost member_ios_per_array_io(const Geometry& geometry, const Profile& profile) {
  const std::uint64_t block = profile.block_bytes;
  const double read_share = static_cast<double>(profile.read_percent) / 100.0;
  const double write_share = 1.0 - read_share;

  MemberCost cost;
  cost.io_bytes =
      static_cast<std::uint32_t>(std::min<std::uint64_t>(block, geometry.strip_bytes()));
  if (read_share > 0) {
    cost.reads += read_share * read_cost(geometry, block).reads;
  }
  if (write_share > 0) {
    const Count w = profile.pattern == AccessPattern::kSequential
                        ? sequential_write_cost(geometry, block)
                        : random_write_cost(geometry, block);
    cost.reads += write_share * w.reads;
    cost.writes += write_share * w.writes;
  }
  return cost;
}

}  // namespace graid::bench
