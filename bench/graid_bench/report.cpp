#include "report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "units.h"

namespace graid::bench {

namespace {

nlohmann::json latency_json(const LatencySummaryUs& lat) {
  return {
      {"mean", lat.mean}, {"p50", lat.p50}, {"p99", lat.p99}, {"p999", lat.p999}, {"max", lat.max}};
}

std::string mix_text(const MemberCost& cost) {
  return fmt::format("{:.2f}r+{:.2f}w x{}", cost.reads, cost.writes, format_size(cost.io_bytes));
}

}  // namespace

void print_table(std::FILE* out, const RunSetup& setup, std::span<const ProfileReport> reports) {
  fmt::print(out,
             "graid-bench: {} x{} strip {} member {} backend {}{} | {} thread(s) x QD {} | {} "
             "round(s) of raw then array, {:g} s (+{:g} s warm-up) each; median round shown\n",
             setup.level, setup.members, format_size(setup.strip_bytes),
             format_size(setup.member_bytes), setup.backend,
             setup.device.empty() ? "" : fmt::format(" on {}", setup.device), setup.threads,
             setup.queue_depth, setup.rounds, setup.seconds / setup.rounds, setup.warmup_seconds);
  fmt::print(out,
             "{:<14} {:>6} {:>3} {:>5} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} "
             "{:>20} {:>11} {:>10} {:>6}\n",
             "profile", "level", "n", "strip", "backend", "IOPS", "MB/s", "lat-mean", "p50", "p99",
             "p99.9", "cpu-s/GB", "member-ios/req", "raw-iops", "limit-iops", "ratio");
  const auto cell = [](const std::optional<RunFigures>& f, auto get, const char* spec) {
    return f ? fmt::format(fmt::runtime(spec), get(*f)) : std::string("-");
  };
  for (const ProfileReport& r : reports) {
    const auto& a = r.array;
    const auto ratio = r.ratio();
    fmt::print(out,
               "{:<14} {:>6} {:>3} {:>5} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>20} "
               "{:>11.0f} {:>10.0f} {:>6}\n",
               r.profile.name, setup.level, setup.members, format_size(setup.strip_bytes),
               setup.backend,
               cell(
                   a, [](const RunFigures& f) { return f.iops(); }, "{:.0f}"),
               cell(
                   a, [](const RunFigures& f) { return f.bytes_per_s() / 1e6; }, "{:.1f}"),
               cell(
                   a, [](const RunFigures& f) { return f.latency_us.mean; }, "{:.1f}"),
               cell(
                   a, [](const RunFigures& f) { return f.latency_us.p50; }, "{:.1f}"),
               cell(
                   a, [](const RunFigures& f) { return f.latency_us.p99; }, "{:.1f}"),
               cell(
                   a, [](const RunFigures& f) { return f.latency_us.p999; }, "{:.1f}"),
               cell(
                   a, [](const RunFigures& f) { return f.cpu_s_per_gb(); }, "{:.3f}"),
               mix_text(r.cost), r.raw.iops(), r.limit_iops(),
               ratio ? fmt::format("{:.2f}", *ratio) : std::string("-"));
  }
  // The raw side in its own lines: the latency and CPU cost of the members alone.
  fmt::print(out, "raw members (io_uring, O_DIRECT, {} thread(s)):\n", setup.threads);
  fmt::print(out, "{:<14} {:>6} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>6}\n", "profile",
             "QD", "member-IOPS", "MB/s", "lat-mean", "p50", "p99", "p99.9", "cpu-s/GB", "reads");
  for (const ProfileReport& r : reports) {
    fmt::print(out,
               "{:<14} {:>6} {:>11.0f} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>8.3f} "
               "{:>5.0f}%\n",
               r.profile.name, r.raw_queue_depth, r.raw.iops(), r.raw.bytes_per_s() / 1e6,
               r.raw.latency_us.mean, r.raw.latency_us.p50, r.raw.latency_us.p99,
               r.raw.latency_us.p999, r.raw.cpu_s_per_gb(), 100.0 * r.cost.read_fraction());
  }
  // How the raw depth was chosen: each probed depth's member IOPS, the best marked.
  for (const ProfileReport& r : reports) {
    if (r.raw_sweep.empty()) continue;
    std::string points;
    for (const SweepPoint& p : r.raw_sweep)
      points += fmt::format("{}{} {:.0f}{}", points.empty() ? "" : ", ", p.queue_depth, p.iops,
                            p.queue_depth == r.raw_queue_depth ? " (best)" : "");
    fmt::print(out, "raw QD sweep {}: {}\n", r.profile.name, points);
  }
  for (const ProfileReport& r : reports) {
    if (!r.verify) continue;
    fmt::print(out, "verify {}: {} blocks, {} mismatched{}\n", r.profile.name, r.verify->blocks,
               r.verify->mismatched_blocks,
               r.verify->mismatched_blocks
                   ? fmt::format(" (first at array offset {})", r.verify->first_mismatch_offset)
                   : std::string());
  }
}

std::string to_json(const RunSetup& setup, std::span<const ProfileReport> reports) {
  nlohmann::json out = nlohmann::json::array();
  for (const ProfileReport& r : reports) {
    nlohmann::json j;
    j["profile"] = std::string(r.profile.name);
    j["block_bytes"] = r.profile.block_bytes;
    j["read_percent"] = r.profile.read_percent;
    j["level"] = setup.level;
    j["members"] = setup.members;
    j["strip"] = setup.strip_bytes;
    j["member_bytes"] = setup.member_bytes;
    j["backend"] = setup.backend;
    j["device"] = setup.device;
    j["threads"] = setup.threads;
    j["qd"] = setup.queue_depth;
    j["seconds"] = setup.seconds;
    j["rounds"] = setup.rounds;
    j["warmup_seconds"] = setup.warmup_seconds;
    j["span"] = setup.span;
    if (r.array) {
      const RunFigures& a = *r.array;
      j["iops"] = a.iops();
      j["bytes_per_s"] = a.bytes_per_s();
      j["read_ops"] = a.reads;
      j["write_ops"] = a.writes;
      j["lat_us"] = latency_json(a.latency_us);
      j["cpu_s"] = a.cpu_seconds;
      j["cpu_s_per_gb"] = a.cpu_s_per_gb();
    } else {
      for (const char* key : {"iops", "bytes_per_s", "lat_us", "cpu_s_per_gb"})
        j[key] = nullptr;
    }
    j["member_reads_per_io"] = r.cost.reads;
    j["member_writes_per_io"] = r.cost.writes;
    j["member_io_bytes"] = r.cost.io_bytes;
    j["raw_member_iops"] = r.raw.iops();
    j["raw_qd"] = r.raw_queue_depth;
    j["raw_sweep"] = nlohmann::json::array();
    for (const SweepPoint& p : r.raw_sweep)
      j["raw_sweep"].push_back({{"qd", p.queue_depth}, {"member_iops", p.iops}});
    j["round_ratios"] = r.round_ratios;
    j["raw"] = {{"iops", r.raw.iops()},
                {"bytes_per_s", r.raw.bytes_per_s()},
                {"read_fraction", r.cost.read_fraction()},
                {"io_bytes", r.cost.io_bytes},
                {"lat_us", latency_json(r.raw.latency_us)},
                {"cpu_s", r.raw.cpu_seconds},
                {"cpu_s_per_gb", r.raw.cpu_s_per_gb()}};
    j["limit_iops"] = r.limit_iops();
    const auto ratio = r.ratio();
    j["ratio"] = ratio ? nlohmann::json(*ratio) : nlohmann::json(nullptr);
    if (r.verify) {
      j["verify"] = {{"blocks", r.verify->blocks},
                     {"mismatched_blocks", r.verify->mismatched_blocks}};
    }
    out.push_back(std::move(j));
  }
  return out.dump(2);
}

}  // namespace graid::bench
