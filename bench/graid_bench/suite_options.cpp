#include "suite_options.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "options.h"
#include "units.h"

namespace graid::bench {

namespace {

constexpr int kUsageError = 2;

}  // namespace

Status validate_suite_options(const SuiteOptions& o) {
  if (o.out.empty()) return Status(Errc::kInvalidArgument, "--out: give a directory");
  std::error_code ec;
  if (std::filesystem::exists(o.out, ec) && !std::filesystem::is_directory(o.out, ec)) {
    return make_error(Errc::kInvalidArgument, "--out {}: exists and is not a directory", o.out);
  }
  if (!std::filesystem::is_directory(o.dir, ec)) {
    return make_error(Errc::kInvalidArgument, "--dir {}: not a directory", o.dir);
  }
  if (::access(o.dir.c_str(), W_OK) != 0) {
    return make_error(Errc::kInvalidArgument, "--dir {}: not writable", o.dir);
  }
  if (o.member_size != 0 && (o.member_size < kMinMemberBytes || o.member_size % (1 << 20) != 0)) {
    return make_error(Errc::kInvalidArgument,
                      "--member-size {}: must be a whole number of MiB, at least {}",
                      format_size(o.member_size), format_size(kMinMemberBytes));
  }
  for (const std::string& b : o.backends) {
    if (b != "cpu" && b != "cuda" && b != "ref") {
      return make_error(Errc::kInvalidArgument,
                        "--backend {}: not a parity backend (cpu, cuda, ref)", b);
    }
  }
  if (o.seconds < 0 || o.seconds > 3600) {  // 0: the plan's
    return make_error(Errc::kInvalidArgument, "--seconds {}: must be more than 0, at most 3600",
                      o.seconds);
  }
  if (o.threads == 0 || o.threads > 64) {
    return make_error(Errc::kInvalidArgument, "--threads {}: must be 1 to 64", o.threads);
  }
  if (o.queue_depth == 0 || o.queue_depth > kMaxQueueDepth) {
    return make_error(Errc::kInvalidArgument, "--qd {}: must be 1 to {}", o.queue_depth,
                      kMaxQueueDepth);
  }
  if (o.rebuild_bytes_per_second < 1'000'000) {
    return make_error(Errc::kInvalidArgument,
                      "--rebuild-speed: at least 1 MB/s per member (a rebuild must be running)");
  }
  if (o.plots && !o.report_script.empty() && !std::filesystem::is_regular_file(o.report_script)) {
    return make_error(Errc::kInvalidArgument, "--report-script {}: no such file", o.report_script);
  }
  return Status::ok();
}

std::variant<SuiteOptions, int> parse_suite_command_line(int argc, char** argv) {
  SuiteOptions o;
  std::string member_size;
  double rebuild_mb = 100;
  bool no_plots = false;
  bool no_nbd = false;
  std::vector<std::string> levels;
  CLI::App app{
      "graid-bench suite: the benchmark report. RAID5 and RAID6 (RAID10 and RAID0 optimal, for\n"
      "reference) with every parity backend available, optimal, degraded and rebuilding, the\n"
      "review profiles, latency against load; a table, DIR/suite.json (schema\n"
      "graid-bench-report/1, docs/benchmarks.md) and DIR/report.md with PNG plots.",
      "graid-bench suite"};
  app.add_flag("--quick", o.quick, "the short plan: under 3 minutes on 2 cores");
  app.add_option("--out", o.out, "report directory (created)")->capture_default_str();
  app.add_option("--dir", o.dir, "directory for the member files (tmpfs: the engine's own cost)")
      ->capture_default_str();
  app.add_option("--member-size", member_size, "bytes per member (default 256M quick, 1G full)");
  app.add_option("--backend", o.backends,
                 "parity backend(s) to compare: cpu, cuda, ref; repeat (default: cuda when a GPU "
                 "is usable, and cpu; ref on one profile for scale)");
  app.add_option("--level", levels,
                 "only these of the plan's levels (repeat): raid5, raid6; raid10 and raid0 in "
                 "the full plan");
  app.add_option("--seconds", o.seconds, "measured seconds per run (default 0.5 quick, 2 full)");
  app.add_option("--threads", o.threads, "I/O threads")->capture_default_str();
  app.add_option("--qd", o.queue_depth, "requests in flight per thread")->capture_default_str();
  app.add_option("--rebuild-speed", rebuild_mb,
                 "MB/s per member the rebuilding state's rebuild is held at")
      ->capture_default_str();
  app.add_option("--report-script", o.report_script,
                 "the plotting script (default: bench/report/graid_report.py of this build)");
  app.add_flag("--no-plots", no_plots, "write suite.json and the table only");
  app.add_flag("--no-nbd", no_nbd,
               "skip the rows through graidd over NBD (they need this build's graidd and "
               "graidctl, and fio)");
  app.add_option("--seed", o.seed, "seed of the offset and data generators")->capture_default_str();
  try {
    app.parse(argc - 1, argv + 1);  // argv[1] is "suite"
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!member_size.empty()) {
    auto size = parse_size(member_size, "--member-size");
    if (!size.is_ok()) {
      std::fprintf(stderr, "graid-bench suite: %s\n", size.status().message().c_str());
      return kUsageError;
    }
    o.member_size = *size;
    if (o.member_size == 0) o.member_size = 1;  // refused below as too small
  }
  if (!(rebuild_mb >= 1) || rebuild_mb > 1e6) {
    std::fprintf(stderr, "graid-bench suite: --rebuild-speed %g: must be 1 to 1000000 MB/s\n",
                 rebuild_mb);
    return kUsageError;
  }
  for (const std::string& l : levels) {
    auto level = parse_raid_level(l);
    if (!level.is_ok() ||
        (*level != RaidLevel::kRaid5 && *level != RaidLevel::kRaid6 &&
         (o.quick || (*level != RaidLevel::kRaid10 && *level != RaidLevel::kRaid0)))) {
      std::fprintf(stderr, "graid-bench suite: --level %s: the %s plan has raid5 and raid6%s\n",
                   l.c_str(), o.quick ? "quick" : "full",
                   o.quick ? "" : " (and raid10, raid0 for reference)");
      return kUsageError;
    }
    o.levels.push_back(*level);
  }
  if (app.count("--seconds") > 0 && !(o.seconds > 0)) {
    std::fprintf(stderr, "graid-bench suite: --seconds %g: must be more than 0\n", o.seconds);
    return kUsageError;
  }
  o.rebuild_bytes_per_second = static_cast<std::uint64_t>(rebuild_mb * 1e6);
  o.plots = !no_plots;
  o.nbd = !no_nbd;
  if (Status status = validate_suite_options(o); !status.is_ok()) {
    std::fprintf(stderr, "graid-bench suite: %s\n", status.message().c_str());
    return kUsageError;
  }
  return o;
}

}  // namespace graid::bench
