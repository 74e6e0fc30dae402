#include "cost_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>
#include <vector>

#include "graid/member.h"

namespace graid::bench {

namespace {

struct Count {
  double reads = 0;
  double writes = 0;
  double read_bytes = 0;  // bytes those member I/Os move (reads: gaps read through included)
  double write_bytes = 0;
};

// The engine's merging (IoContextOptions::merge, as graid's IoContext does it for file and block
// members): per member, contiguous ranges go as one I/O of at most kMergeBytes and
// kMergeSegments ranges; reads also across gaps of at most kReadGap bytes (read into scratch).
constexpr std::uint64_t kMergeBytes = 1U << 20;
constexpr std::uint32_t kMergeSegments = 256;
constexpr std::uint64_t kReadGap = IoContextOptions{}.merge_read_gap;

struct Range {
  std::uint32_t member;
  std::uint64_t offset;
  std::uint64_t len;
};

// Member I/Os and bytes for `ranges` (sorted here) after merging.
std::pair<double, double> merged_ios(std::vector<Range>& ranges, bool read) {
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return std::tie(a.member, a.offset) < std::tie(b.member, b.offset);
  });
  double ios = 0;
  double bytes = 0;
  for (std::size_t i = 0; i < ranges.size();) {
    std::uint64_t end = ranges[i].offset + ranges[i].len;
    std::uint64_t run = ranges[i].len;
    std::uint32_t segments = 1;
    std::size_t j = i + 1;
    for (; j < ranges.size() && ranges[j].member == ranges[i].member && ranges[j].offset >= end;
         ++j) {
      const std::uint64_t gap = ranges[j].offset - end;
      const std::uint32_t add = gap != 0 ? 2 : 1;
      if ((gap != 0 && (!read || gap > kReadGap)) || run + gap + ranges[j].len > kMergeBytes ||
          segments + add > kMergeSegments) {
        break;
      }
      run += gap + ranges[j].len;
      segments += add;
      end = ranges[j].offset + ranges[j].len;
    }
    ios += 1;
    bytes += static_cast<double>(run);
    i = j;
  }
  return {ios, bytes};
}

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
    sum.read_bytes += c.read_bytes;
    sum.write_bytes += c.write_bytes;
  }
  const auto n = static_cast<double>(samples);
  return Count{sum.reads / n, sum.writes / n, sum.read_bytes / n, sum.write_bytes / n};
}

// Data pieces per request (cut at strip boundaries), as for a read without merging.
Count piece_count(const Geometry& g, std::uint64_t block) {
  return average_over_alignments(g, block, [&](std::uint64_t offset) {
    Count c;
    for_each_stripe(g, offset, block,
                    [&](StripeSlice slice) { c.reads += static_cast<double>(slice.pieces); });
    return c;
  });
}

// A read: one piece per strip touched, each from the member holding it (mirrors: one copy for
// the whole request, as the engine picks), merged per member.
Count read_cost(const Geometry& g, std::uint64_t block) {
  std::vector<Range> ranges;
  return average_over_alignments(g, block, [&](std::uint64_t offset) {
    ranges.clear();
    const std::uint64_t strip = g.strip_bytes();
    for (std::uint64_t at = offset; at < offset + block;) {
      const std::uint64_t n = std::min(offset + block, (at / strip + 1) * strip) - at;
      const DataLocation loc = g.locate(at);
      ranges.push_back(Range{loc.member, loc.member_offset, n});
      at += n;
    }
    const auto [ios, bytes] = merged_ios(ranges, /*read=*/true);
    return Count{ios, 0, bytes, 0};
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
  const double size = static_cast<double>(std::min<std::uint64_t>(block, g.strip_bytes()));
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
    c.read_bytes = c.reads * size;
    c.write_bytes = c.writes * size;
    return c;
  });
}

// Whole stripes (see member_ios_per_array_io): a request of at least a stripe puts block / k
// contiguous bytes on every member that takes writes (consecutive rows), merged; a smaller one
// its pieces' share, strip-sized I/Os at most.
Count sequential_write_cost(const Geometry& g, std::uint64_t block) {
  const double per_piece = writes_per_piece_without_reads(g);
  if (block < g.stripe_data_bytes()) {
    const Count pieces = piece_count(g, block);  // data pieces per request
    const double size = static_cast<double>(std::min<std::uint64_t>(block, g.strip_bytes()));
    return Count{0, pieces.reads * per_piece, 0, pieces.reads * per_piece * size};
  }
  // RAID0: every member holds data; RAID10: every member a copy; parity levels: data or parity.
  const double members = static_cast<double>(g.members());
  const double bytes = static_cast<double>(block) * per_piece;
  const double ios = members * std::ceil(bytes / members / static_cast<double>(kMergeBytes));
  return Count{0, ios, 0, bytes};
}

}  // namespace

MemberCost member_ios_per_array_io(const Geometry& geometry, const Profile& profile) {
  const std::uint64_t block = profile.block_bytes;
  const double read_share = static_cast<double>(profile.read_percent) / 100.0;
  const double write_share = 1.0 - read_share;

  MemberCost cost;
  double bytes = 0;
  if (read_share > 0) {
    const Count r = read_cost(geometry, block);
    cost.reads += read_share * r.reads;
    bytes += read_share * r.read_bytes;
  }
  if (write_share > 0) {
    const Count w = profile.pattern == AccessPattern::kSequential
                        ? sequential_write_cost(geometry, block)
                        : random_write_cost(geometry, block);
    cost.reads += write_share * w.reads;
    cost.writes += write_share * w.writes;
    bytes += write_share * (w.read_bytes + w.write_bytes);
  }
  // One size for the raw baseline: the mean, in whole 4 KiB blocks (what it can issue).
  const double mean = cost.total() > 0 ? bytes / cost.total() : static_cast<double>(block);
  cost.io_bytes =
      static_cast<std::uint32_t>(std::max<double>(4096, std::floor(mean / 4096) * 4096));
  return cost;
}

}  // namespace graid::bench
