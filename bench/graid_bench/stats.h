// What a benchmark run measured: latency histograms and the figures derived from them.
//
// LatencyHistogram is log-linear, as HdrHistogram: values below 128 ns get a bucket each; above,
// every power-of-two range [2^e, 2^(e+1)) is split into 64 equal buckets, so a reported value is
// within 1/64 (1.6 %) of the true one, over the whole 64-bit range, in 30 KiB of counters. Each
// thread records into its own histogram (no sharing on the I/O path); they are merged at the end.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace graid::bench {

class LatencyHistogram {
 public:
  static constexpr unsigned kSubBucketBits = 6;  // 64 buckets per power of two
  static constexpr std::size_t kLinearLimit = std::size_t{2} << kSubBucketBits;  // 128
  static constexpr std::size_t kBucketCount =
      kLinearLimit + (64 - kSubBucketBits - 1) * (std::size_t{1} << kSubBucketBits);

  void record(std::uint64_t value) noexcept;
  void merge(const LatencyHistogram& other) noexcept;

  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t min() const noexcept { return count_ ? min_ : 0; }
  std::uint64_t max() const noexcept { return max_; }
  double mean() const noexcept;
  // The value at percentile `p` (0..100): the middle of the bucket holding the ceil(p% * count)-th
  // smallest value, clamped to [min, max]. 0 when empty.
  std::uint64_t percentile(double p) const noexcept;

  // Bucket of `value`, and the smallest and largest values that bucket holds.
  static std::size_t bucket_index(std::uint64_t value) noexcept;
  static std::uint64_t bucket_lowest(std::size_t index) noexcept;
  static std::uint64_t bucket_highest(std::size_t index) noexcept;

 private:
  std::array<std::uint64_t, kBucketCount> buckets_{};
  std::uint64_t count_ = 0;
  std::uint64_t min_ = ~std::uint64_t{0};
  std::uint64_t max_ = 0;
  long double sum_ = 0;  // wide enough that hours of nanosecond latencies do not lose precision
};

// One thread's tally over the measured window. Latencies are in nanoseconds.
struct ThreadTally {
  std::uint64_t reads = 0;
  std::uint64_t writes = 0;
  std::uint64_t bytes = 0;
  LatencyHistogram latency_ns;
};

struct LatencySummaryUs {
  double mean = 0;
  double p50 = 0;
  double p99 = 0;
  double p999 = 0;
  double max = 0;
};

// The figures of one run (array or raw), for reports.
struct RunFigures {
  std::uint64_t ops = 0;
  std::uint64_t reads = 0;
  std::uint64_t writes = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;      // length of the measured window
  double cpu_seconds = 0;  // process user + system CPU over the window (all threads)
  LatencySummaryUs latency_us;

  double iops() const noexcept { return seconds > 0 ? static_cast<double>(ops) / seconds : 0; }
  double bytes_per_s() const noexcept {
    return seconds > 0 ? static_cast<double>(bytes) / seconds : 0;
  }
  // CPU seconds per 10^9 bytes moved; 0 when nothing moved.
  double cpu_s_per_gb() const noexcept {
    return bytes > 0 ? cpu_seconds / (static_cast<double>(bytes) / 1e9) : 0;
  }
};

// Merges the threads' tallies into one run's figures.
RunFigures summarize(std::span<const ThreadTally> tallies, double seconds, double cpu_seconds);

}  // namespace graid::bench
