// The Prometheus page (graidd/metrics_text.h) from canned verb answers: the series docs/
// monitoring.md lists, one state series per state, cumulative latency buckets, escaped labels,
// and every family announced once before its samples.
#include "graidd/metrics_text.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

namespace graid::testing {
namespace {

using daemon::escape_label;
using daemon::MetricsSnapshot;
using daemon::render_metrics;
using nlohmann::json;

MetricsSnapshot snapshot() {
  MetricsSnapshot s;
  s.controller = {{"version", "0.1.0"},
                  {"parity", {{"backend", "cpu"}}},
                  {"batches", 12},
                  {"fallbacks", 0},
                  {"held_ublk", json::array()},
                  {"event_hooks", {{"ran", 3}, {"failed", 1}, {"timed_out", 0}, {"lost", 2}}}};
  s.dgs = json::array(
      {{{"dg_id", 0},
        {"name", "da\"ta"},
        {"level", "raid5"},
        {"uuid", "u-0"},
        {"state", "rebuilding"},
        {"capacity", 1000},
        {"free", 400},
        {"members", json::array({{{"slot", 0}, {"state", "active"}},
                                 {{"slot", 1}, {"state", "rebuilding"}},
                                 {{"slot", 2}, {"state", "active"}}})},
        {"rebuild",
         {{"slot", 1}, {"percent", 42.5}, {"bytes_per_second", 8e6}, {"eta_seconds", 12.0}}},
        {"check", {{"running", false}, {"percent", 10.0}}},
        {"lost_ranges", json::array({{{"offset", 0}, {"bytes", 4096}}})},
        {"vds", json::array({{{"vd_id", 0}, {"name", "vol"}, {"size", 600}}})}}});
  s.pds = json::array({{{"pd_id", 0},
                        {"path", "/dev/a"},
                        {"state", "member"},
                        {"size", 500},
                        {"health",
                         {{"available", true},
                          {"critical_warning", 4},
                          {"temperature_celsius", 45},
                          {"available_spare", 90},
                          {"available_spare_threshold", 10},
                          {"percentage_used", 3},
                          {"media_errors", 2},
                          {"unsafe_shutdowns", 1},
                          {"error_log_entries", 0},
                          {"power_on_hours", 10}}}},
                       {{"pd_id", 3},
                        {"path", "/dev/d"},
                        {"state", "rebuilding"},
                        {"size", 500},
                        {"health", {{"available", false}, {"reason", "not an NVMe drive"}}}}});
  json buckets = json::array();
  for (int i = 0; i < 32; ++i)
    buckets.push_back(i == 5 ? 10 : i == 7 ? 4 : 0);
  s.stats = {
      {"dgs",
       json::array(
           {{{"dg_id", 0},
             {"degraded_reads", 7},
             {"write_plans", {{"full_stripe", 5}}},
             {"members",
              json::array({{{"slot", 1}, {"pd_id", 3}, {"reads", 2}, {"write_errors", 1}}})}}})},
      {"vds", json::array({{{"dg_id", 0},
                            {"vd_id", 0},
                            {"reads", 9},
                            {"read_bytes", 36864},
                            {"latency_us_buckets", buckets},
                            {"latency_us_sum", 500},
                            {"ublk", {{"reads", 4}, {"write_bytes", 8192}}}}})}};
  s.events = {5, 2, 1};
  s.last_seq = 8;
  return s;
}

bool has_line(const std::string& page, const std::string& line) {
  return page.find("\n" + line + "\n") != std::string::npos;
}

TEST(MetricsTextTest, TheSeriesSayWhatTheVerbsSay) {
  const std::string page = render_metrics(snapshot());
  for (const char* line : {
           R"(graid_info{version="0.1.0",parity="cpu"} 1)",
           R"(graid_events_total{severity="critical"} 1)",
           R"(graid_events_last_seq 8)",
           R"(graid_event_hooks_total{result="lost"} 2)",
           R"(graid_dg_state{dg="0",name="da\"ta",state="rebuilding"} 1)",
           R"(graid_dg_state{dg="0",name="da\"ta",state="optimal"} 0)",
           R"(graid_dg_members{dg="0",state="rebuilding"} 1)",
           R"(graid_dg_members{dg="0",state="active"} 2)",
           R"(graid_dg_lost_ranges{dg="0"} 1)",
           R"(graid_dg_lost_bytes{dg="0"} 4096)",
           R"(graid_job_progress_ratio{dg="0",kind="rebuild"} 0.425)",
           R"(graid_job_speed_bytes_per_second{dg="0",kind="rebuild"} 8000000)",
           R"(graid_job_eta_seconds{dg="0",kind="rebuild"} 12)",
           R"(graid_job_running{dg="0",kind="rebuild"} 1)",
           R"(graid_job_running{dg="0",kind="check"} 0)",
           R"(graid_dg_degraded_reads_total{dg="0"} 7)",
           R"(graid_pd_errors_total{dg="0",slot="1",pd="3",class="write"} 1)",
           R"(graid_pd_io_total{dg="0",slot="1",pd="3",op="read"} 2)",
           R"(graid_vd_size_bytes{dg="0",vd="0",name="vol"} 600)",
           R"(graid_vd_requests_total{dg="0",vd="0",export="nbd",op="read"} 9)",
           R"(graid_vd_requests_total{dg="0",vd="0",export="ublk",op="read"} 4)",
           R"(graid_vd_written_bytes_total{dg="0",vd="0",export="ublk"} 8192)",
           R"(graid_pd_state{pd="3",state="rebuilding"} 1)",
           R"(graid_pd_size_bytes{pd="0"} 500)",
           R"(graid_pd_health_available{pd="0"} 1)",
           R"(graid_pd_health_available{pd="3"} 0)",
           R"(graid_pd_health_critical_warning{pd="0"} 4)",
           R"(graid_pd_health_temperature_celsius{pd="0"} 45)",
           R"(graid_pd_health_available_spare_ratio{pd="0"} 0.9)",
           R"(graid_pd_health_media_errors_total{pd="0"} 2)",
           R"(graid_pd_health_power_on_seconds_total{pd="0"} 36000)",
       }) {
    EXPECT_TRUE(has_line(page, line)) << line << "\n" << page;
  }
}

TEST(MetricsTextTest, LatencyBucketsAreCumulativeSecondsWithSumAndCount) {
  const std::string page = render_metrics(snapshot());
  // Bucket 5 ends at 32 us, bucket 7 at 128 us.
  EXPECT_TRUE(
      has_line(page, R"(graid_vd_request_latency_seconds_bucket{dg="0",vd="0",le="1.6e-05"} 0)"))
      << page;
  EXPECT_TRUE(
      has_line(page, R"(graid_vd_request_latency_seconds_bucket{dg="0",vd="0",le="3.2e-05"} 10)"));
  EXPECT_TRUE(
      has_line(page, R"(graid_vd_request_latency_seconds_bucket{dg="0",vd="0",le="6.4e-05"} 10)"));
  EXPECT_TRUE(
      has_line(page, R"(graid_vd_request_latency_seconds_bucket{dg="0",vd="0",le="0.000128"} 14)"));
  EXPECT_TRUE(
      has_line(page, R"(graid_vd_request_latency_seconds_bucket{dg="0",vd="0",le="+Inf"} 14)"));
  EXPECT_TRUE(has_line(page, R"(graid_vd_request_latency_seconds_count{dg="0",vd="0"} 14)"));
  EXPECT_TRUE(has_line(page, R"(graid_vd_request_latency_seconds_sum{dg="0",vd="0"} 0.0005)"));
}

TEST(MetricsTextTest, EveryFamilyIsAnnouncedOnceBeforeItsSamples) {
  const std::string page = render_metrics(snapshot());
  std::istringstream in(page);
  std::set<std::string> announced;
  std::string current;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("# TYPE ")) {
      std::istringstream w(line.substr(7));
      w >> current;
      EXPECT_TRUE(announced.insert(current).second) << "announced twice: " << current;
      continue;
    }
    if (line.starts_with("#")) continue;
    const std::string name = line.substr(0, line.find_first_of("{ "));
    EXPECT_TRUE(name == current || name == current + "_bucket" || name == current + "_sum" ||
                name == current + "_count")
        << line << " under # TYPE " << current;
  }
  EXPECT_GT(announced.size(), 20u);
  // A PD without a health log has no health series but "available" 0.
  EXPECT_EQ(page.find(R"(graid_pd_health_critical_warning{pd="3"})"), std::string::npos);
}

TEST(MetricsTextTest, LabelValuesAreEscaped) {
  EXPECT_EQ(escape_label(R"(a"b\c)"), R"(a\"b\\c)");
  EXPECT_EQ(escape_label("two\nlines"), "two\\nlines");
  // Nothing at all: every family still parses (an empty DG list, a graidd without hooks).
  const std::string page = render_metrics(MetricsSnapshot{});
  EXPECT_NE(page.find("graid_events_total{severity=\"info\"} 0"), std::string::npos);
  EXPECT_EQ(page.find("graid_event_hooks_total"), std::string::npos);
}

}  // namespace
}  // namespace graid::testing
