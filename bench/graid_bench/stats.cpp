#include "stats.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace graid::bench {

namespace {

constexpr std::uint64_t kSubBuckets = std::uint64_t{1} << LatencyHistogram::kSubBucketBits;

}  // namespace

std::size_t LatencyHistogram::bucket_index(std::uint64_t value) noexcept {
  if (value < kLinearLimit) return static_cast<std::size_t>(value);
  // Keep the top kSubBucketBits + 1 bits: the leading one picks the power of two (via `shift`),
  // the rest pick one of 64 equal buckets inside it.
  const unsigned shift = static_cast<unsigned>(std::bit_width(value)) - (kSubBucketBits + 1);
  const std::uint64_t top = value >> shift;  // in [64, 128)
  return kLinearLimit + (shift - 1) * kSubBuckets + static_cast<std::size_t>(top - kSubBuckets);
}

std::uint64_t LatencyHistogram::bucket_lowest(std::size_t index) noexcept {
  if (index < kLinearLimit) return index;
  const std::size_t rel = index - kLinearLimit;
  const unsigned shift = static_cast<unsigned>(rel / kSubBuckets) + 1;
  const std::uint64_t top = kSubBuckets + rel % kSubBuckets;
  return top << shift;
}

std::uint64_t LatencyHistogram::bucket_highest(std::size_t index) noexcept {
  if (index < kLinearLimit) return index;
  const std::size_t rel = index - kLinearLimit;
  const unsigned shift = static_cast<unsigned>(rel / kSubBuckets) + 1;
  return bucket_lowest(index) + ((std::uint64_t{1} << shift) - 1);
}

void LatencyHistogram::record(std::uint64_t value) noexcept {
  ++buckets_[bucket_index(value)];
  ++count_;
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
  sum_ += static_cast<long double>(value);
}

void LatencyHistogram::merge(const LatencyHistogram& other) noexcept {
  for (std::size_t i = 0; i < kBucketCount; ++i)
    buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
}

double LatencyHistogram::mean() const noexcept {
  return count_ ? static_cast<double>(sum_ / static_cast<long double>(count_)) : 0.0;
}

std::uint64_t LatencyHistogram::percentile(double p) const noexcept {
  if (count_ == 0) return 0;
  const double clamped = std::clamp(p, 0.0, 100.0);
  // 99.9 has no exact binary form: 99.9% of 10000 computes as 9990.000000000002. Shave the
  // rounding off before ceil() so the rank is the one a person would count.
  const double exact = clamped / 100.0 * static_cast<double>(count_);
  auto rank = static_cast<std::uint64_t>(std::ceil(exact - exact * 1e-12));
  rank = std::clamp<std::uint64_t>(rank, 1, count_);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBucketCount; ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      const std::uint64_t lo = bucket_lowest(i);
      const std::uint64_t mid = lo + (bucket_highest(i) - lo) / 2;
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

RunFigures summarize(std::span<const ThreadTally> tallies, double seconds, double cpu_seconds) {
  RunFigures f;
  LatencyHistogram all;
  for (const ThreadTally& t : tallies) {
    f.reads += t.reads;
    f.writes += t.writes;
    f.bytes += t.bytes;
    all.merge(t.latency_ns);
  }
  f.ops = f.reads + f.writes;
  f.seconds = seconds;
  f.cpu_seconds = cpu_seconds;
  const auto us = [](double ns) { return ns / 1000.0; };
  f.latency_us.mean = us(all.mean());
  f.latency_us.p50 = us(static_cast<double>(all.percentile(50.0)));
  f.latency_us.p99 = us(static_cast<double>(all.percentile(99.0)));
  f.latency_us.p999 = us(static_cast<double>(all.percentile(99.9)));
  f.latency_us.max = us(static_cast<double>(all.max()));
  return f;
}

}  // namespace graid::bench
