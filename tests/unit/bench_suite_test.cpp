// graid-bench suite's pure parts: its command line (every bad option a clear error, nothing run),
// the plan each mode makes, the limit and the reason a share above 1.05 must carry, and the JSON
// document against its schema (graid-bench-report/1, docs/benchmarks.md), field by field.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/graid_bench/suite.h"
#include "bench/graid_bench/suite_options.h"
#include "bench/graid_bench/suite_report.h"
#include "temp_dir.h"

namespace graid::bench {
namespace {

struct Parsed {
  std::optional<SuiteOptions> options;
  int code = -1;
  std::string err;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"graid-bench", "suite"});
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  ::testing::internal::CaptureStderr();
  auto r = parse_suite_command_line(static_cast<int>(argv.size()), argv.data());
  Parsed out;
  out.err = ::testing::internal::GetCapturedStderr();
  if (auto* o = std::get_if<SuiteOptions>(&r)) {
    out.options = *o;
  } else {
    out.code = std::get<int>(r);
  }
  return out;
}

class BenchSuiteOptionsTest : public ::testing::Test {
 protected:
  graid::testing::TempDir dir_{"/tmp"};
};

TEST_F(BenchSuiteOptionsTest, DefaultsAndQuick) {
  auto p = parse({"--quick", "--dir", dir_.path(), "--out", dir_.file("report")});
  ASSERT_TRUE(p.options) << p.err;
  EXPECT_TRUE(p.options->quick);
  EXPECT_TRUE(p.options->plots);
  EXPECT_EQ(p.options->dir, dir_.path());
  EXPECT_EQ(p.options->rebuild_bytes_per_second, 100'000'000u);
  EXPECT_EQ(p.options->member_size, 0u);  // the plan's
  EXPECT_TRUE(p.options->nbd);
  auto q = parse({"--dir", dir_.path(), "--no-nbd", "--no-plots"});
  ASSERT_TRUE(q.options) << q.err;
  EXPECT_FALSE(q.options->nbd);
  EXPECT_FALSE(q.options->plots);
}

TEST_F(BenchSuiteOptionsTest, EveryBadOptionIsAClearError) {
  const std::string d = dir_.path();
  const struct {
    std::vector<std::string> args;
    std::string says;
  } cases[] = {
      {{"--bogus"}, "--bogus"},
      {{"--dir", d + "/missing"}, "--dir " + d + "/missing: not a directory"},
      {{"--dir", d, "--member-size", "1M"}, "--member-size 1M: must be a whole number of MiB"},
      {{"--dir", d, "--member-size", "lots"}, "--member-size"},
      {{"--dir", d, "--backend", "gpu"}, "--backend gpu: not a parity backend"},
      {{"--dir", d, "--seconds", "0"}, "--seconds 0: must be more than 0"},
      {{"--dir", d, "--seconds", "-2"}, "--seconds"},
      {{"--dir", d, "--threads", "0"}, "--threads 0: must be 1 to 64"},
      {{"--dir", d, "--qd", "0"}, "--qd 0: must be 1 to"},
      {{"--dir", d, "--rebuild-speed", "0"}, "--rebuild-speed 0: must be 1 to"},
      {{"--dir", d, "--report-script", d + "/none.py"}, "--report-script " + d + "/none.py"},
      {{"--dir", d, "--out", "/etc/passwd"}, "--out /etc/passwd: exists and is not a directory"},
      {{"--dir", d, "--level", "raid1"}, "--level raid1: the full plan has raid5 and raid6"},
      {{"--dir", d, "--quick", "--level", "raid10"}, "--level raid10: the quick plan has raid5"},
      {{"--dir", d, "--level", "7"}, "--level 7:"},
  };
  for (const auto& c : cases) {
    auto p = parse(c.args);
    EXPECT_FALSE(p.options) << c.says;
    EXPECT_NE(p.code, 0) << c.says;
    EXPECT_NE(p.err.find(c.says), std::string::npos) << "stderr: " << p.err;
  }
  // Refusals change nothing: no report directory was made.
  EXPECT_FALSE(std::filesystem::exists(dir_.file("report")));
}

TEST_F(BenchSuiteOptionsTest, HelpExitsZero) {
  auto p = parse({"--help"});
  EXPECT_FALSE(p.options);
  EXPECT_EQ(p.code, 0);
}

TEST(BenchSuitePlanTest, QuickAndFullPlans) {
  SuiteOptions o;
  o.backends = {"cpu"};
  o.quick = true;
  auto quick = suite_plan(o);
  ASSERT_TRUE(quick.is_ok());
  ASSERT_EQ(quick->size(), 2u);  // RAID5 and RAID6, every state
  for (const SuiteCase& c : *quick) {
    EXPECT_TRUE(c.states);
    EXPECT_EQ(c.backend, "cpu");
  }
  EXPECT_EQ((*quick)[0].level, RaidLevel::kRaid5);
  EXPECT_FALSE((*quick)[0].load_profiles.empty());
  o.quick = false;
  auto full = suite_plan(o);
  ASSERT_TRUE(full.is_ok());
  ASSERT_EQ(full->size(), 4u);  // + RAID10 and RAID0, optimal only
  EXPECT_EQ((*full)[2].level, RaidLevel::kRaid10);
  EXPECT_FALSE((*full)[2].states);
  EXPECT_EQ((*full)[3].level, RaidLevel::kRaid0);
  EXPECT_EQ((*full)[0].profiles.size(), 10u);
  const auto& points = (*full)[0].load_points;
  ASSERT_FALSE(points.empty());
  EXPECT_GT(points.back(), 100.0) << "one point past the measured maximum";
  // The default backends: cpu (and cuda where usable) plus ref on one profile for scale.
  o.backends.clear();
  auto with_ref = suite_plan(o);
  ASSERT_TRUE(with_ref.is_ok());
  EXPECT_EQ(with_ref->back().backend, "ref");
  EXPECT_EQ(with_ref->back().profiles.size(), 1u);
  // --level keeps only those (the ref case is RAID5's).
  o.quick = true;
  o.backends = {"cpu", "ref"};
  o.levels = {RaidLevel::kRaid6};
  auto only6 = suite_plan(o);
  ASSERT_TRUE(only6.is_ok());
  ASSERT_EQ(only6->size(), 2u);  // RAID6 on cpu and on ref
  for (const SuiteCase& c : *only6)
    EXPECT_EQ(c.level, RaidLevel::kRaid6);
}

ProfileReport report_of(const char* name, AccessPattern pattern, double array_iops, double raw_iops,
                        std::vector<SweepPoint> sweep) {
  ProfileReport r;
  r.profile = Profile{name, 4096, pattern, 0};
  r.cost.reads = 2;
  r.cost.writes = 2;
  r.cost.io_bytes = 4096;
  r.raw.ops = static_cast<std::uint64_t>(raw_iops);
  r.raw.seconds = 1;
  RunFigures a;
  a.ops = static_cast<std::uint64_t>(array_iops);
  a.writes = a.ops;
  a.bytes = a.ops * 4096;
  a.seconds = 1;
  a.cpu_seconds = 0.5;
  a.latency_us = {10, 9, 30, 60, 100};
  r.array = a;
  r.raw_sweep = std::move(sweep);
  r.raw_queue_depth = r.raw_sweep.empty() ? 32 : r.raw_sweep.front().queue_depth;
  r.round_ratios = {array_iops / (raw_iops / 4)};
  return r;
}

TEST(BenchSuiteReportTest, TheLimitIsTheBestRawRunAndAShareAboveItNeedsAReason) {
  // The round's raw run gave 400,000 member IOPS, a probe 480,000: the limit is 120,000.
  auto r = report_of("4k-randwrite", AccessPattern::kRandom, 110'000, 400'000,
                     {{32, 300'000}, {64, 480'000}, {128, 350'000}});
  ASSERT_TRUE(suite_limit_iops(r).has_value());
  EXPECT_DOUBLE_EQ(*suite_limit_iops(r), 120'000);
  EXPECT_TRUE(share_reason(r).empty()) << "0.92 needs no reason";
  RunSetup setup;
  setup.level = "raid5";
  setup.backend = "cpu";
  const SuiteRow row = row_from(r, setup, ArrayState::kOptimal);
  ASSERT_TRUE(row.limit_share.has_value());
  EXPECT_NEAR(*row.limit_share, 110'000.0 / 120'000, 1e-9);
  EXPECT_DOUBLE_EQ(row.cpu_us_per_io(), 0.5 / 110'000 * 1e6);

  auto over = report_of("4k-randwrite", AccessPattern::kRandom, 140'000, 400'000,
                        {{32, 300'000}, {64, 480'000}, {128, 350'000}});
  EXPECT_NE(share_reason(over).find("no raw run"), std::string::npos) << share_reason(over);
  auto deepest = report_of("4k-randwrite", AccessPattern::kRandom, 140'000, 400'000,
                           {{512, 300'000}, {1024, 480'000}});
  deepest.raw_queue_depth = 1024;
  EXPECT_NE(share_reason(deepest).find("deepest allowed (QD 1024)"), std::string::npos);
  auto seq = report_of("64k-seqwrite", AccessPattern::kSequential, 140'000, 400'000, {});
  EXPECT_NE(share_reason(seq).find("coalesced"), std::string::npos);
  EXPECT_NE(share_reason(seq).find("best raw run 400000 member IOPS"), std::string::npos)
      << share_reason(seq);
  // Three times the limit is no pattern's doing: the raw runs met other load.
  auto far = report_of("1m-seqwrite", AccessPattern::kSequential, 300'000, 400'000, {});
  EXPECT_NE(share_reason(far).find("met other load"), std::string::npos) << share_reason(far);
  // Degraded rows have no raw run: no limit, no share.
  ProfileReport degraded = r;
  degraded.raw = RunFigures{};
  degraded.raw_sweep.clear();
  EXPECT_FALSE(row_from(degraded, setup, ArrayState::kDegraded).limit_share.has_value());
}

TEST(BenchSuiteReportTest, TheDocumentFollowsTheSchema) {
  auto r = report_of("4k-randwrite", AccessPattern::kRandom, 140'000, 400'000, {{64, 480'000}});
  RunSetup setup;
  setup.level = "raid6";
  setup.members = 6;
  setup.strip_bytes = 65536;
  setup.backend = "cpu";
  setup.threads = 1;
  setup.queue_depth = 32;
  std::vector<SuiteRow> rows = {row_from(r, setup, ArrayState::kOptimal),
                                row_from(r, setup, ArrayState::kRebuilding)};
  rows[1].limit_iops.reset();
  rows[1].limit_share.reset();
  rows[1].limit_reason.clear();
  rows[1].rebuild_bytes_per_second = 100'000'000;
  rows[1].rebuild_ran_throughout = false;
  SuiteRow load = rows[0];
  load.limit_iops.reset();
  load.limit_share.reset();
  load.limit_reason.clear();
  load.load_percent = 50;
  load.target_iops = 70'000;
  rows.push_back(load);
  SuiteHost host;
  host.generated = "2026-12-07T00:00:00Z";
  host.command = "graid-bench suite --quick";
  host.cpu = "test cpu";
  host.cores = 2;
  host.kernel = "6.1";
  host.members = "files on /dev/shm, 256 MiB each";
  const auto doc = nlohmann::json::parse(to_report_json(host, rows));
  EXPECT_EQ(doc["schema"], "graid-bench-report/1");
  EXPECT_EQ(doc["source"], "graid-bench suite");
  EXPECT_EQ(doc["command"], "graid-bench suite --quick");
  EXPECT_EQ(doc["host"]["cores"], 2);
  ASSERT_EQ(doc["rows"].size(), 3u);
  for (const auto& row : doc["rows"]) {
    for (const char* key : {"engine", "backend", "frontend", "level", "state", "profile"})
      EXPECT_TRUE(row[key].is_string()) << key;
    for (const char* key : {"members", "block_bytes", "read_percent", "iops", "mb_per_s",
                            "cpu_us_per_io", "cores_per_miops"})
      EXPECT_TRUE(row[key].is_number()) << key;
    for (const char* key : {"mean", "p50", "p99", "p999", "max"})
      EXPECT_TRUE(row["lat_us"][key].is_number()) << key;
    for (const char* key : {"limit_iops", "limit_share", "load_percent", "target_iops"})
      EXPECT_TRUE(row.contains(key) && (row[key].is_null() || row[key].is_number())) << key;
    EXPECT_EQ(row["engine"], "graid");
    EXPECT_EQ(row["frontend"], "in-process");
  }
  const auto& opt = doc["rows"][0];
  EXPECT_EQ(opt["state"], "optimal");
  EXPECT_DOUBLE_EQ(opt["iops"].get<double>(), 140'000);
  EXPECT_DOUBLE_EQ(opt["limit_share"].get<double>(), 140'000.0 / 120'000);
  EXPECT_TRUE(opt["limit_reason"].is_string()) << "a share of 1.17 carries its reason";
  EXPECT_EQ(opt["raw"]["best_member_iops"], 480'000);
  const auto& reb = doc["rows"][1];
  EXPECT_EQ(reb["state"], "rebuilding");
  EXPECT_TRUE(reb["limit_share"].is_null());
  EXPECT_EQ(reb["rebuild"]["ran_throughout"], false);
  EXPECT_EQ(doc["rows"][2]["load_percent"], 50);

  // What the plotting script reads: its own schema check accepts the document.
  graid::testing::TempDir dir("/tmp");
  const std::string path = dir.file("suite.json");
  {
    std::ofstream out(path);
    out << to_report_json(host, rows);
  }
  const std::string python =
      std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::string cmd = python + " " + GRAID_REPORT_SCRIPT + " --check " + path + " >/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace graid::bench
