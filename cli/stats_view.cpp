#include "stats_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

namespace graid::cli {

namespace {

using nlohmann::json;

// One DG's or VD's cumulative counters as the daemon sent them.
struct Counters {
  std::uint32_t dg_id = 0;
  std::optional<std::uint32_t> vd_id;
  std::uint64_t reads = 0, writes = 0, read_bytes = 0, write_bytes = 0;
  std::array<std::uint64_t, kLatencyBuckets> buckets{};
};

// A count as JSON may hold it: unsigned, or signed but not negative (a daemon that builds its
// numbers from signed integers sends those).
bool is_count(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
}

Status bad_sample(std::string what) {
  return Status(Errc::kCorrupt, fmt::format("graidd sent a stats sample that {}", what));
}

Result<std::uint64_t> counter(const json& row, const char* key) {
  auto it = row.find(key);
  if (it == row.end() || !is_count(*it)) {
    return bad_sample(fmt::format("has no counter \"{}\"", key));
  }
  return it->get<std::uint64_t>();
}

Result<std::vector<Counters>> read_rows(const json& sample, const char* list, bool vds) {
  std::vector<Counters> rows;
  auto it = sample.find(list);
  if (it == sample.end() || !it->is_array()) return bad_sample(fmt::format("has no \"{}\"", list));
  for (const json& row : *it) {
    if (!row.is_object())
      return bad_sample(fmt::format("has a \"{}\" entry that is not an object", list));
    Counters c;
    const char* const keys[] = {"reads", "writes", "read_bytes", "write_bytes"};
    std::uint64_t* const dest[] = {&c.reads, &c.writes, &c.read_bytes, &c.write_bytes};
    for (std::size_t i = 0; i < 4; ++i) {
      auto v = counter(row, keys[i]);
      if (!v.is_ok()) return v.status();
      *dest[i] = *v;
    }
    auto dg = counter(row, "dg_id");
    if (!dg.is_ok()) return dg.status();
    c.dg_id = static_cast<std::uint32_t>(*dg);
    if (vds) {
      auto vd = counter(row, "vd_id");
      if (!vd.is_ok()) return vd.status();
      c.vd_id = static_cast<std::uint32_t>(*vd);
    }
    auto buckets = row.find("latency_us_buckets");
    if (buckets == row.end() || !buckets->is_array() || buckets->size() != kLatencyBuckets) {
      return bad_sample(fmt::format("has no {} latency_us_buckets", kLatencyBuckets));
    }
    for (std::size_t i = 0; i < kLatencyBuckets; ++i) {
      if (!is_count((*buckets)[i])) return bad_sample("has a bucket that is not a count");
      c.buckets[i] = (*buckets)[i].get<std::uint64_t>();
    }
    rows.push_back(c);
  }
  return rows;
}

bool contains(const std::vector<std::uint32_t>& ids, std::uint32_t id) {
  return ids.empty() || std::find(ids.begin(), ids.end(), id) != ids.end();
}

// The rates of `now` against the same object in `then`; nullopt when not comparable.
std::optional<RateRow> rates(const std::vector<Counters>& then, const Counters& now, double s) {
  auto same = std::find_if(then.begin(), then.end(), [&](const Counters& c) {
    return c.dg_id == now.dg_id && c.vd_id == now.vd_id;
  });
  if (same == then.end()) return std::nullopt;
  if (now.reads < same->reads || now.writes < same->writes || now.read_bytes < same->read_bytes ||
      now.write_bytes < same->write_bytes) {
    return std::nullopt;
  }
  std::array<std::uint64_t, kLatencyBuckets> delta{};
  for (std::size_t i = 0; i < kLatencyBuckets; ++i) {
    if (now.buckets[i] < same->buckets[i]) return std::nullopt;
    delta[i] = now.buckets[i] - same->buckets[i];
  }
  RateRow row;
  row.dg_id = now.dg_id;
  row.vd_id = now.vd_id;
  row.read_iops = static_cast<double>(now.reads - same->reads) / s;
  row.write_iops = static_cast<double>(now.writes - same->writes) / s;
  row.read_bps = static_cast<double>(now.read_bytes - same->read_bytes) / s;
  row.write_bps = static_cast<double>(now.write_bytes - same->write_bytes) / s;
  row.p50_us = latency_percentile(delta, 0.50);
  row.p99_us = latency_percentile(delta, 0.99);
  return row;
}

json percentile_json(const std::optional<double>& value) {
  if (!value) return nullptr;
  return std::round(*value * 10) / 10;
}

json row_json(const RateRow& row) {
  json out = json::object();
  out["dg_id"] = row.dg_id;
  if (row.vd_id) out["vd_id"] = *row.vd_id;
  out["read_iops"] = row.read_iops;
  out["write_iops"] = row.write_iops;
  out["read_bps"] = row.read_bps;
  out["write_bps"] = row.write_bps;
  out["p50_us"] = percentile_json(row.p50_us);
  out["p99_us"] = percentile_json(row.p99_us);
  return out;
}

}  // namespace

std::optional<double> latency_percentile(std::span<const std::uint64_t> counts, double q) {
  double total = 0;
  for (std::uint64_t c : counts)
    total += static_cast<double>(c);
  if (total == 0) return std::nullopt;
  const double rank = std::clamp(q, 0.0, 1.0) * total;
  double below = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double c = static_cast<double>(counts[i]);
    if (c > 0 && below + c >= rank) {
      const double lo = i == 0 ? 0.0 : std::ldexp(1.0, static_cast<int>(i) - 1);
      const double hi = std::ldexp(1.0, static_cast<int>(i));
      return lo + (hi - lo) * (rank - below) / c;
    }
    below += c;
  }
  return std::nullopt;  // not reached: rank <= total
}

Result<StatsInterval> compute_interval(const json& before, const json& after,
                                       const StatsSelection& selection) {
  if (!before.is_object() || !after.is_object()) return bad_sample("is not an object");
  auto t0 = counter(before, "time_ns");
  if (!t0.is_ok()) return t0.status();
  auto t1 = counter(after, "time_ns");
  if (!t1.is_ok()) return t1.status();
  if (*t1 <= *t0) return bad_sample("did not move time_ns forward (did graidd restart?)");

  StatsInterval interval;
  interval.interval_s = static_cast<double>(*t1 - *t0) / 1e9;
  if (selection.dgs) {
    auto then = read_rows(before, "dgs", false);
    if (!then.is_ok()) return then.status();
    auto now = read_rows(after, "dgs", false);
    if (!now.is_ok()) return now.status();
    for (const Counters& c : *now) {
      if (!contains(selection.dg_ids, c.dg_id)) continue;
      if (auto row = rates(*then, c, interval.interval_s)) interval.dgs.push_back(*row);
    }
  }
  if (selection.vds) {
    auto then = read_rows(before, "vds", true);
    if (!then.is_ok()) return then.status();
    auto now = read_rows(after, "vds", true);
    if (!now.is_ok()) return now.status();
    for (const Counters& c : *now) {
      if (selection.vd_dg && c.dg_id != *selection.vd_dg) continue;
      if (!contains(selection.vd_ids, *c.vd_id)) continue;
      if (auto row = rates(*then, c, interval.interval_s)) interval.vds.push_back(*row);
    }
  }
  return interval;
}

Status check_selection(const json& sample, const StatsSelection& selection) {
  auto dgs = read_rows(sample, "dgs", false);
  if (!dgs.is_ok()) return dgs.status();
  auto vds = read_rows(sample, "vds", true);
  if (!vds.is_ok()) return vds.status();
  const auto has_dg = [&](std::uint32_t id) {
    return std::any_of(dgs->begin(), dgs->end(), [&](const Counters& c) { return c.dg_id == id; });
  };
  for (const std::uint32_t id : selection.dg_ids) {
    if (!has_dg(id))
      return make_error(Errc::kNotFound, "dg {} does not exist (graidctl list dg shows the DGs)",
                        id);
  }
  if (selection.vd_dg) {
    if (!has_dg(*selection.vd_dg))
      return make_error(Errc::kNotFound, "dg {} does not exist (graidctl list dg shows the DGs)",
                        *selection.vd_dg);
    for (const std::uint32_t id : selection.vd_ids) {
      const bool found = std::any_of(vds->begin(), vds->end(), [&](const Counters& c) {
        return c.dg_id == *selection.vd_dg && c.vd_id == id;
      });
      if (!found)
        return make_error(Errc::kNotFound, "vd {} of dg {} does not exist (graidctl list vd {})",
                          id, *selection.vd_dg, *selection.vd_dg);
    }
  }
  return Status::ok();
}

json interval_to_json(const StatsInterval& interval) {
  json out = json::object();
  out["interval_s"] = interval.interval_s;
  out["dgs"] = json::array();
  for (const RateRow& row : interval.dgs)
    out["dgs"].push_back(row_json(row));
  out["vds"] = json::array();
  for (const RateRow& row : interval.vds)
    out["vds"].push_back(row_json(row));
  return out;
}

}  // namespace graid::cli
