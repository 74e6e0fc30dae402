#include "suite_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace graid::bench {

namespace {

constexpr double kShareTolerance = 1.05;
// A share this far above 1 is not the pattern's doing (see share_reason).
constexpr double kFarAbove = 1.5;

nlohmann::json optional_number(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

const char* array_state_name(ArrayState state) noexcept {
  switch (state) {
    case ArrayState::kOptimal:
      return "optimal";
    case ArrayState::kDegraded:
      return "degraded";
    case ArrayState::kRebuilding:
      return "rebuilding";
  }
  return "?";
}

std::optional<double> suite_limit_iops(const ProfileReport& report) {
  if (!report.array || report.cost.total() <= 0 || report.best_raw_iops() <= 0) return std::nullopt;
  return report.best_raw_iops() / report.cost.total();
}

std::string share_reason(const ProfileReport& report) {
  const auto limit = suite_limit_iops(report);
  if (!limit) return {};
  const double share = report.array->iops() / *limit;
  if (share <= kShareTolerance) return {};
  const std::string best = fmt::format("best raw run {:.0f} member IOPS, QD {}",
                                       report.best_raw_iops(), report.raw_queue_depth);
  // Merging across requests or a deeper queue can explain some of a share above 1; not this
  // much: the raw runs met other load (a short run on a busy machine).
  if (share > kFarAbove) {
    return fmt::format(
        "far above what merging explains: the raw runs most likely met other load on this "
        "machine ({}); longer runs (--seconds) would tell",
        best);
  }
  const Profile& p = report.profile;
  if (p.pattern == AccessPattern::kSequential && p.read_percent < 100) {
    return fmt::format(
        "sequential writes of several requests coalesced into member I/Os larger than the "
        "limit's (cost_model.h; {})",
        best);
  }
  if (p.pattern == AccessPattern::kSequential) {
    return fmt::format(
        "sequential reads of adjacent requests merged into member I/Os larger than the limit's "
        "(cost_model.h; {})",
        best);
  }
  if (!report.raw_sweep.empty() && report.raw_queue_depth == report.raw_sweep.back().queue_depth) {
    return fmt::format(
        "the members' best depth was the deepest allowed (QD {}): they may give more",
        report.raw_queue_depth);
  }
  std::string ratios;
  for (const double r : report.round_ratios)
    ratios += fmt::format("{}{:.2f}", ratios.empty() ? "" : ", ", r);
  return fmt::format(
      "no raw run (rounds and sweep probes) reached the member I/O rate the array's pattern got "
      "({}); rounds' ratios {}",
      best, ratios);
}

SuiteRow row_from(const ProfileReport& report, const RunSetup& setup, ArrayState state) {
  SuiteRow row;
  row.backend = setup.backend;
  row.device = setup.device;
  row.level = setup.level;
  row.members = setup.members;
  row.strip_bytes = setup.strip_bytes;
  row.state = state;
  row.profile = report.profile;
  row.threads = setup.threads;
  row.queue_depth = setup.queue_depth;
  if (report.array) row.array = *report.array;
  if (const auto limit = suite_limit_iops(report)) {
    row.limit_iops = *limit;
    row.limit_share = report.array->iops() / *limit;
    row.limit_reason = share_reason(report);
    row.raw_member_iops = report.best_raw_iops();
    row.raw_queue_depth = report.raw_queue_depth;
    row.member_ios_per_request = report.cost.total();
  }
  return row;
}

std::string to_report_json(const SuiteHost& host, std::span<const SuiteRow> rows) {
  nlohmann::json doc;
  doc["schema"] = kReportSchema;
  doc["source"] = "graid-bench suite";
  doc["generated"] = host.generated;
  doc["command"] = host.command;
  doc["host"] = {
      {"cpu", host.cpu}, {"cores", host.cores}, {"kernel", host.kernel}, {"members", host.members}};
  doc["plan"] = {{"quick", host.quick}, {"seconds", host.seconds}};
  doc["rows"] = nlohmann::json::array();
  for (const SuiteRow& r : rows) {
    const LatencySummaryUs& lat = r.array.latency_us;
    nlohmann::json j;
    j["engine"] = "graid";
    j["backend"] = r.backend;
    if (!r.device.empty()) j["device"] = r.device;
    j["frontend"] = "in-process";
    j["level"] = r.level;
    j["members"] = r.members;
    j["strip_bytes"] = r.strip_bytes;
    j["state"] = array_state_name(r.state);
    j["profile"] = std::string(r.profile.name);
    j["block_bytes"] = r.profile.block_bytes;
    j["read_percent"] = r.profile.read_percent;
    j["threads"] = r.threads;
    j["qd"] = r.queue_depth;
    j["seconds"] = r.array.seconds;
    j["iops"] = r.array.iops();
    j["mb_per_s"] = r.array.bytes_per_s() / 1e6;
    j["lat_us"] = {{"mean", lat.mean},
                   {"p50", lat.p50},
                   {"p99", lat.p99},
                   {"p999", lat.p999},
                   {"max", lat.max}};
    j["cpu_us_per_io"] = r.cpu_us_per_io();
    j["cores_per_miops"] = r.cpu_us_per_io();
    j["limit_iops"] = optional_number(r.limit_iops);
    if (r.limit_iops) {
      j["raw"] = {{"best_member_iops", r.raw_member_iops},
                  {"qd", r.raw_queue_depth},
                  {"member_ios_per_request", r.member_ios_per_request}};
    }
    j["limit_share"] = optional_number(r.limit_share);
    if (!r.limit_reason.empty()) j["limit_reason"] = r.limit_reason;
    j["load_percent"] = optional_number(r.load_percent);
    j["target_iops"] = optional_number(r.target_iops);
    if (r.state == ArrayState::kRebuilding) {
      j["rebuild"] = {{"bytes_per_second_per_member", r.rebuild_bytes_per_second},
                      {"ran_throughout", r.rebuild_ran_throughout}};
    }
    doc["rows"].push_back(std::move(j));
  }
  return doc.dump(1);
}

void print_suite_rows(std::FILE* out, std::span<const SuiteRow> rows, bool header) {
  if (header) {
    fmt::print(out, "{:<6} {:<7} {:<10} {:<14} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>6}\n",
               "level", "backend", "state", "profile", "load%", "IOPS", "MB/s", "mean-us", "p99-us",
               "p99.9-us", "cpu-us/io", "limit");
  }
  for (const SuiteRow& r : rows) {
    const LatencySummaryUs& lat = r.array.latency_us;
    std::string share = r.limit_share ? fmt::format("{:.2f}", *r.limit_share) : "-";
    if (!r.limit_reason.empty()) share += " (" + r.limit_reason + ")";
    if (r.state == ArrayState::kRebuilding && !r.rebuild_ran_throughout) {
      share += " [the rebuild finished before the end]";
    }
    fmt::print(out,
               "{:<6} {:<7} {:<10} {:<14} {:>6} {:>10.0f} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} "
               "{:>8.2f} {:>6}\n",
               r.level, r.backend, array_state_name(r.state), r.profile.name,
               r.load_percent ? fmt::format("{:.0f}", *r.load_percent) : "-", r.array.iops(),
               r.array.bytes_per_s() / 1e6, lat.mean, lat.p99, lat.p999, r.cpu_us_per_io(), share);
  }
  std::fflush(out);
}

}  // namespace graid::bench
