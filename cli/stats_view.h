// graidctl stats: rates and latency percentiles from two `stats` samples (docs/cli.md, "stats").
// The daemon's counters are cumulative; graidctl subtracts an earlier sample from a later one and
// divides by the time between them. Pure functions over the samples' JSON.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <vector>

#include "command_line.h"
#include "graid/status.h"

namespace graid::cli {

// Latency buckets per DG and VD: bucket 0 counts requests under 1 us, bucket i those of
// [2^(i-1), 2^i) us.
inline constexpr std::size_t kLatencyBuckets = 32;

// The q-quantile (0 < q <= 1) of the latencies counted in `counts`, in microseconds, found by
// walking the cumulative counts to the bucket holding the q*total-th request and interpolating
// linearly inside that bucket (the requests are taken as spread evenly over it). nullopt when
// the buckets count no request. Exact to within the bucket: p50 of requests all in [16, 32) us
// is reported as 24 us.
std::optional<double> latency_percentile(std::span<const std::uint64_t> counts, double q);

// One DG's or VD's rates over an interval.
struct RateRow {
  std::uint32_t dg_id = 0;
  std::optional<std::uint32_t> vd_id;  // set for VDs
  double read_iops = 0;
  double write_iops = 0;
  double read_bps = 0;  // bytes per second
  double write_bps = 0;
  std::optional<double> p50_us;  // nullopt: no request finished in the interval
  std::optional<double> p99_us;
};

struct StatsInterval {
  double interval_s = 0;
  std::vector<RateRow> dgs;
  std::vector<RateRow> vds;
};

// The rates between two `stats` results, `before` taken first, keeping the rows `selection`
// asks for. A DG or VD missing from `before` (created in between) or whose counters went down
// (deleted and made again with the same id) is left out of this interval. Refused (Errc::kCorrupt,
// with the reason) when a sample is not shaped as docs/cli.md says or time_ns did not increase.
Result<StatsInterval> compute_interval(const nlohmann::json& before, const nlohmann::json& after,
                                       const StatsSelection& selection);

// Refuses (Errc::kNotFound, naming it) a DG or VD that `selection` names and `sample` (a `stats`
// result) does not have: `stats dg 7` of a missing DG is an error, not an empty table.
Status check_selection(const nlohmann::json& sample, const StatsSelection& selection);

// The interval as graidctl prints it with --format json:
// {"interval_s":..,"dgs":[{"dg_id","read_iops","write_iops","read_bps","write_bps","p50_us",
// "p99_us"}],"vds":[{"dg_id","vd_id",...}]}; a percentile without requests is null.
nlohmann::json interval_to_json(const StatsInterval& interval);

}  // namespace graid::cli
