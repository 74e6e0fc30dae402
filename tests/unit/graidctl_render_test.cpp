// graidctl's output (cli/render_table.h, cli/stats_view.h): canned daemon results rendered as
// tables with their columns and formatted sizes, fields that are missing or mistyped shown as
// "-", and the stats rates and percentiles on known counter and bucket deltas.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <string>

#include "render_table.h"
#include "stats_view.h"

namespace graid::cli {
namespace {

using nlohmann::json;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The line of `text` that contains `part`, or "".
std::string line_with(const std::string& text, const std::string& part) {
  std::size_t at = text.find(part);
  if (at == std::string::npos) return "";
  std::size_t begin = text.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return text.substr(begin, text.find('\n', at) - begin);
}

const json kPd = json::parse(R"({"pd_id":0,"path":"/dev/nvme0n1","state":"member","dg_id":1,
  "slot":2,"size":1000204886016,"logical_block_size":512,"io_mode":"direct","kind":"block",
  "model":"Samsung 990","serial":"S6Z1","superblock":{"found":true,"array_uuid":"ab-cd",
  "dg_id":1},"message":""})");

const json kFreePd = json::parse(R"({"pd_id":7,"path":"/tmp/d7.img","state":"free",
  "dg_id":null,"slot":null,"size":1073741824,"logical_block_size":512,"io_mode":"buffered",
  "kind":"file","model":"","serial":"","superblock":{"found":false,"array_uuid":null,
  "dg_id":null},"message":""})");

const json kVd = json::parse(R"({"dg_id":1,"vd_id":0,"name":"db","start":0,
  "size":107374182400,"state":"optimal","exports":[{"kind":"nbd",
  "address":"unix:/run/x.sock","name":"db","read_only":true,"access":"unix","connections":2,
  "tcp_port":null},{"kind":"nbd","address":"tcp:0.0.0.0:10809","name":"db","read_only":false,
  "access":"psk","tls_psk":"/etc/graid/db.psk","connections":0,"tcp_port":10809}]})");

const json kDg = json::parse(R"({"dg_id":1,"name":"fast","uuid":"ab-cd","level":"raid5",
  "strip":65536,"member_count":4,"spare_count":0,"state":"degraded","capacity":3000000000000,
  "free":1610612736,"vd_count":1,"clean":true,"init_method":"zero",
  "settings":{"rebuild_speed":"normal","init_speed":"high","check_speed":"low",
  "resync_speed":"normal","journal":"degraded-only"},
  "members":[{"slot":0,"pd_id":0,"path":"/dev/nvme0n1","state":"active"},
             {"slot":1,"pd_id":1,"path":"/dev/nvme1n1","state":"failed"}],
  "vds":[],"message":"member 1 failed"})");

TEST(TextTableTest, AlignsColumns) {
  TextTable t({{"ID", true}, {"NAME"}, {"SIZE", true}});
  t.add_row({"1", "a", "64 KiB"});
  t.add_row({"100", "longer", "1 GiB"});
  EXPECT_EQ(t.render(),
            " ID  NAME      SIZE\n"
            "  1  a       64 KiB\n"
            "100  longer   1 GiB\n");
}

TEST(RenderTest, PdList) {
  json list = json::array({kPd, kFreePd});
  std::string text = render_result("list", "pd", list);
  for (const char* column : {"ID", "PATH", "STATE", "DG", "SLOT", "SIZE", "KIND", "MODEL"}) {
    EXPECT_TRUE(has(line_with(text, "PATH"), column)) << column << "\n" << text;
  }
  EXPECT_TRUE(has(line_with(text, "/dev/nvme0n1"), "931.5 GiB")) << text;
  EXPECT_TRUE(has(line_with(text, "/dev/nvme0n1"), "member")) << text;
  EXPECT_TRUE(has(line_with(text, "/tmp/d7.img"), "1 GiB")) << text;
  EXPECT_TRUE(has(line_with(text, "/tmp/d7.img"), "free")) << text;
  // Three lines: header and two rows, the same width up to the last column.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
  EXPECT_EQ(line_with(text, "PATH").find("STATE"), line_with(text, "/tmp/d7.img").find("free"));

  // create pd answers {"pds":[...]}: the same table.
  EXPECT_EQ(render_result("create", "pd", json{{"pds", list}}), text);
}

TEST(RenderTest, DgListAndDescribe) {
  json listed = kDg;
  listed.erase("members");
  listed.erase("vds");
  std::string text = render_result("list", "dg", json::array({listed}));
  for (const char* column : {"ID", "NAME", "LEVEL", "STRIP", "STATE", "CAPACITY", "FREE", "VDS"}) {
    EXPECT_TRUE(has(line_with(text, "LEVEL"), column)) << column << "\n" << text;
  }
  const std::string row = line_with(text, "raid5");
  EXPECT_TRUE(has(row, "64 KiB")) << text;
  EXPECT_TRUE(has(row, "2.7 TiB")) << text;
  EXPECT_TRUE(has(row, "1.5 GiB")) << text;
  EXPECT_TRUE(has(row, "degraded")) << text;

  std::string block = render_result("describe", "dg", kDg);
  EXPECT_TRUE(has(line_with(block, "strip:"), "64 KiB")) << block;
  EXPECT_TRUE(has(line_with(block, "capacity:"), "2.7 TiB")) << block;
  EXPECT_TRUE(has(line_with(block, "settings.journal:"), "degraded-only")) << block;
  EXPECT_TRUE(has(line_with(block, "clean:"), "yes")) << block;
  EXPECT_TRUE(has(block, "members:\n")) << block;
  EXPECT_TRUE(has(line_with(block, "/dev/nvme1n1"), "failed")) << block;
  EXPECT_TRUE(has(block, "vds:\n")) << block;
  // key: value lines come in the documented order.
  EXPECT_LT(block.find("dg_id:"), block.find("level:"));
  EXPECT_LT(block.find("level:"), block.find("capacity:"));
  // The same block for the results that return a dg.
  EXPECT_EQ(render_result("create", "dg", kDg), block);
  EXPECT_EQ(render_result("edit", "dg", kDg), block);
}

// Issue 47 item 8: a job's rate, ETA and percentage in human units in tables (the JSON keeps the
// exact numbers), and edit vd size's notes printed, not dropped.
TEST(RenderTest, RatesEtasAndPercentagesReadAsUnitsAndNotesAreShown) {
  json dg = kDg;
  dg["state"] = "rebuilding";
  dg["rebuild"] = {{"slot", 1},
                   {"pd_id", 4},
                   {"percent", 69.4444},
                   {"bytes_per_second", 182634256.74667132},
                   {"eta_seconds", 39.2}};
  const std::string block = render_result("describe", "dg", dg);
  EXPECT_TRUE(has(line_with(block, "rebuild.bytes_per_second:"), "182.6 MB/s")) << block;
  EXPECT_TRUE(has(line_with(block, "rebuild.eta_seconds:"), "39 s")) << block;
  EXPECT_TRUE(has(line_with(block, "rebuild.percent:"), "69.4 %")) << block;
  EXPECT_FALSE(has(block, "182634256")) << block;
  dg["rebuild"]["eta_seconds"] = 252.0;
  EXPECT_TRUE(has(render_result("describe", "dg", dg), "4 min 12 s"));

  json vd = kVd;
  vd["previous_size"] = 8388608;
  vd["notes"] = {"its NBD export keeps telling clients 8388608 bytes until it is exported again"};
  const std::string text = render_result("edit", "vd", vd);
  EXPECT_TRUE(has(text, "notes:\n  its NBD export keeps telling clients 8388608 bytes")) << text;
  EXPECT_TRUE(has(line_with(text, "previous_size:"), "8 MiB")) << text;
}

TEST(RenderTest, HeldUblkDevicesAreShownWhereThereAreAny) {
  // docs/ublk.md, "Owned-device discovery": a device held for an offline DG.
  json offline = json::parse(R"({"dg_id":2,"uuid":"u","state":"offline","members":[],"vds":[],
    "message":"cannot assemble","held_ublk":[{"vd_id":0,"dev_id":5,"device":"/dev/ublkb5",
    "state":"quiesced","reason":"dg 2 is offline: cannot assemble"}]})");
  std::string block = render_result("describe", "dg", offline);
  EXPECT_TRUE(has(block, "held ublk devices:\n")) << block;
  const std::string row = line_with(block, "/dev/ublkb5");
  EXPECT_TRUE(has(row, "quiesced")) << block;
  EXPECT_TRUE(has(row, "dg 2 is offline")) << block;
  offline["held_ublk"] = json::array();
  EXPECT_FALSE(has(render_result("describe", "dg", offline), "held ublk")) << "none: no table";

  json controller = json::parse(R"({"version":"0.1.0","pid":42,"held_ublk":[{"dg_id":7,
    "vd_id":1,"dev_id":3,"device":"/dev/ublkb3","state":"dead","reason":"dg 7 does not exist"}]})");
  std::string c = render_result("describe", "controller", controller);
  EXPECT_TRUE(has(line_with(c, "DEVICE"), "DG")) << c;
  EXPECT_TRUE(has(line_with(c, "/dev/ublkb3"), "dg 7 does not exist")) << c;
}

TEST(RenderTest, DgProgressLineForWatch) {
  json dg = {{"dg_id", 2}, {"state", "rebuilding"}};
  dg["rebuild"] = {{"percent", 50.0}, {"bytes_per_second", 98.2e6}, {"eta_seconds", 65.0}};
  EXPECT_TRUE(dg_job_running(dg));
  EXPECT_EQ(dg_progress_line(dg),
            "dg 2 rebuilding [###############...............]  50%  98.2 MB/s  ETA 1m05s\n");
  dg = {{"dg_id", 0}, {"state", "initialising"}, {"init", {{"percent", 3.4}}}};
  EXPECT_EQ(dg_progress_line(dg), "dg 0 initialising [#.............................]   3%\n");
  dg = {{"dg_id", 1}, {"state", "checking"}, {"check", {{"running", true}, {"percent", 100.0}}}};
  EXPECT_EQ(dg_progress_line(dg), "dg 1 checking [##############################] 100%\n");
  dg = {{"dg_id", 3}, {"state", "replacing"}, {"replace", {{"slot", 1}, {"percent", 20.0}}}};
  EXPECT_TRUE(dg_job_running(dg));
  EXPECT_EQ(dg_progress_line(dg), "dg 3 replacing [######........................]  20%\n");
  dg = {{"dg_id", 1}, {"state", "optimal"}};
  EXPECT_FALSE(dg_job_running(dg));
  EXPECT_EQ(dg_progress_line(dg), "dg 1 optimal\n");
  // Odd values do not throw or overrun the bar.
  dg = {{"dg_id", 1}, {"state", "rebuilding"}, {"rebuild", {{"percent", 250}}}};
  EXPECT_EQ(dg_progress_line(dg), "dg 1 rebuilding [##############################] 100%\n");
  dg = {{"state", "rebuilding"}, {"rebuild", "x"}};
  EXPECT_EQ(dg_progress_line(dg), "dg - rebuilding\n");
}

TEST(RenderTest, VdListAndDescribe) {
  std::string text = render_result("list", "vd", json::array({kVd}));
  for (const char* column : {"DG", "VD", "NAME", "START", "SIZE", "STATE", "EXPORTS"}) {
    EXPECT_TRUE(has(line_with(text, "EXPORTS"), column)) << column << "\n" << text;
  }
  EXPECT_TRUE(has(line_with(text, "db"), "100 GiB")) << text;
  EXPECT_TRUE(has(line_with(text, "db"), "unix:/run/x.sock (ro)")) << text;

  std::string block = render_result("describe", "vd", kVd);
  EXPECT_TRUE(has(line_with(block, "size:"), "100 GiB")) << block;
  EXPECT_TRUE(has(block, "exports:\n")) << block;
  EXPECT_TRUE(has(line_with(block, "unix:/run/x.sock"), "yes")) << block;
  EXPECT_TRUE(has(line_with(block, "KIND"), "ACCESS")) << block;
  EXPECT_TRUE(has(line_with(block, "tcp:0.0.0.0:10809"), "psk")) << block;
  EXPECT_EQ(render_result("export", "vd", kVd), block);
}

TEST(RenderTest, PdDescribeControllerEventsVersionDelete) {
  std::string pd = render_result("describe", "pd", kFreePd);
  EXPECT_TRUE(has(line_with(pd, "size:"), "1 GiB")) << pd;
  EXPECT_TRUE(has(line_with(pd, "dg_id:"), "-")) << pd;
  EXPECT_TRUE(has(line_with(pd, "superblock.found:"), "no")) << pd;

  json controller = json::parse(R"({"version":"0.1.0","pid":42,"uptime_s":7,"io_threads":4,
    "socket":"/run/graid/graidd.sock","state_dir":"/var/lib/graid","parity":{"backend":"cuda",
    "requested":"auto","reason":"found","gpu":"NVIDIA H200"},"batches":10,"jobs":20,
    "fallbacks":0})");
  std::string c = render_result("describe", "controller", controller);
  EXPECT_TRUE(has(line_with(c, "parity.backend:"), "cuda")) << c;
  EXPECT_TRUE(has(line_with(c, "parity.gpu:"), "NVIDIA H200")) << c;
  EXPECT_TRUE(has(line_with(c, "pid:"), "42")) << c;

  json events = json::parse(R"({"events":[{"seq":5,"time":"2025-01-01T00:00:00Z",
    "kind":"dg_degraded","dg_id":1,"pd_id":null,"vd_id":null,"message":"member 1 failed"}],
    "next_seq":6,"dropped":3})");
  std::string e = render_result("list", "event", events);
  for (const char* column : {"SEQ", "TIME", "KIND", "MESSAGE"}) {
    EXPECT_TRUE(has(line_with(e, "KIND"), column)) << column << "\n" << e;
  }
  EXPECT_TRUE(has(line_with(e, "dg_degraded"), "member 1 failed")) << e;
  EXPECT_TRUE(has(e, "3 older events were dropped")) << e;

  EXPECT_EQ(render_result("version", "", json{{"version", "0.1.0"}, {"api", 1}}),
            "graidd 0.1.0 (control api 1)\n");
  EXPECT_EQ(render_result("delete", "pd", json{{"deleted", {1, 2}}}), "deleted pd 1, 2\n");
  EXPECT_EQ(render_result("delete", "dg", json{{"deleted", 3}}), "deleted dg 3\n");
}

TEST(RenderTest, PdHealthReadsInUnitsOrSaysWhyItIsNotThere) {
  json pd = kPd;
  pd["health"] = json::parse(R"({"available":true,"controller":"/dev/nvme0","read_at":
    "2026-12-07T10:00:00Z","critical_warning":5,"critical_warning_text":
    "available spare below threshold, NVM subsystem reliability degraded",
    "temperature_celsius":41,"available_spare":4,"available_spare_threshold":10,
    "percentage_used":103,"data_units_read":2048,"data_units_written":0,"power_cycles":12,
    "power_on_hours":9000,"unsafe_shutdowns":3,"media_errors":7,"error_log_entries":21})");
  std::string text = render_result("describe", "pd", pd);
  EXPECT_TRUE(has(text, "health:\n")) << text;
  EXPECT_TRUE(has(line_with(text, "critical warning:"), "0x05 available spare below threshold"))
      << text;
  EXPECT_TRUE(has(line_with(text, "temperature:"), "41 °C")) << text;
  EXPECT_TRUE(has(line_with(text, "available spare:"), "4 % (threshold 10 %)")) << text;
  EXPECT_TRUE(has(line_with(text, "used:"), "103 % of rated endurance")) << text;
  EXPECT_TRUE(has(line_with(text, "media errors:"), "7")) << text;
  EXPECT_TRUE(has(line_with(text, "power on:"), "9000 h, 12 power cycles")) << text;
  // 2048 data units of 512,000 bytes: 1,048,576,000 bytes.
  EXPECT_TRUE(has(line_with(text, "data read:"), "1000 MiB")) << text;
  EXPECT_FALSE(has(text, "health.")) << "flattened as well as rendered:\n" << text;

  pd["health"] = json{{"available", false}, {"reason", "a file, not an NVMe drive"}};
  text = render_result("describe", "pd", pd);
  EXPECT_TRUE(has(text, "health: not available (a file, not an NVMe drive)\n")) << text;
}

TEST(RenderTest, BytesAndSecondsReadInUnitsWhateverTheirObject) {
  // Issue 49 item 7: sizes in binary units, times as durations, in every table; JSON keeps the
  // numbers.
  json c = json::parse(R"({"version":"0.1.0","pid":42,"uptime_s":3725,
    "journal":{"bytes":67108864,"region_bytes":1048576},"bytes_per_second":98200000})");
  std::string text = render_result("describe", "controller", c);
  EXPECT_TRUE(has(line_with(text, "uptime_s:"), "1 h 02 min")) << text;
  EXPECT_TRUE(has(line_with(text, "journal.bytes:"), "64 MiB")) << text;
  EXPECT_TRUE(has(line_with(text, "journal.region_bytes:"), "1 MiB")) << text;
  EXPECT_TRUE(has(line_with(text, "bytes_per_second:"), "98.2 MB/s")) << text;
  EXPECT_TRUE(has(line_with(text, "pid:"), "42")) << text;
}

TEST(RenderTest, OddResultsDoNotThrow) {
  // Missing and mistyped fields print as "-"; an unexpected shape prints as JSON.
  std::string text = render_result("list", "pd", json::array({json{{"pd_id", "x"}}, 5}));
  EXPECT_TRUE(has(text, "PATH")) << text;
  EXPECT_EQ(render_result("list", "pd", json{{"odd", true}}), "{\n  \"odd\": true\n}\n");
  EXPECT_EQ(render_result("describe", "pd", json("text")), "\"text\"\n");
  EXPECT_EQ(size_text(json{{"size", "big"}}, "size"), "big");
  EXPECT_EQ(size_text(json{{"size", -1}}, "size"), "-1");
  EXPECT_EQ(field_text(json{{"a", nullptr}}, "a"), "-");
  EXPECT_EQ(field_text(json::array(), "a"), "-");
}

TEST(StatsViewTest, PercentilesInterpolateInsideTheBucket) {
  std::array<std::uint64_t, kLatencyBuckets> b{};
  EXPECT_FALSE(latency_percentile(b, 0.5));
  b[5] = 100;  // all in [16, 32) us
  EXPECT_DOUBLE_EQ(*latency_percentile(b, 0.5), 24.0);
  EXPECT_DOUBLE_EQ(*latency_percentile(b, 0.99), 31.84);
  b = {};
  b[0] = 50;                                               // [0, 1) us
  b[10] = 49;                                              // [512, 1024) us
  b[20] = 1;                                               // [524288, 1048576) us
  EXPECT_DOUBLE_EQ(*latency_percentile(b, 0.5), 1.0);      // the 50th request ends bucket 0
  EXPECT_DOUBLE_EQ(*latency_percentile(b, 0.99), 1024.0);  // the 99th ends bucket 10
  EXPECT_DOUBLE_EQ(*latency_percentile(b, 1.0), 1048576.0);
  b = {};
  b[1] = 4;  // [1, 2) us
  EXPECT_DOUBLE_EQ(*latency_percentile(b, 0.25), 1.25);
  b = {};
  b[31] = 2;  // [2^30, 2^31) us
  EXPECT_DOUBLE_EQ(*latency_percentile(b, 0.5), 1610612736.0);
}

json dg_row(std::uint32_t id, std::uint64_t reads, std::uint64_t writes, std::uint64_t rbytes,
            std::uint64_t wbytes, std::array<std::uint64_t, kLatencyBuckets> buckets) {
  return json{{"dg_id", id},           {"reads", reads},
              {"writes", writes},      {"read_bytes", rbytes},
              {"write_bytes", wbytes}, {"degraded_reads", 0},
              {"stripe_writes", 0},    {"latency_us_buckets", buckets}};
}

json vd_row(std::uint32_t dg, std::uint32_t vd, std::uint64_t reads,
            std::array<std::uint64_t, kLatencyBuckets> buckets) {
  return json{{"dg_id", dg},
              {"vd_id", vd},
              {"reads", reads},
              {"writes", 0},
              {"read_bytes", reads * 4096},
              {"write_bytes", 0},
              {"flushes", 0},
              {"errors", 0},
              {"latency_us_buckets", buckets}};
}

TEST(StatsViewTest, RatesFromTwoSamples) {
  std::array<std::uint64_t, kLatencyBuckets> b0{}, b1{};
  b0[3] = 10;
  b1[3] = 10;
  b1[7] = 200;  // 200 new requests, all in [64, 128) us
  json before = {{"time_ns", 1'000'000'000},
                 {"dgs", {dg_row(0, 100, 50, 409600, 204800, b0), dg_row(1, 0, 0, 0, 0, {})}},
                 {"vds", {vd_row(0, 0, 100, b0), vd_row(0, 1, 0, {})}}};
  json after = {{"time_ns", 3'000'000'000},  // 2 s later
                {"dgs",
                 {dg_row(0, 300, 50, 409600 + 2'000'000, 204800, b1), dg_row(1, 0, 0, 0, 0, {}),
                  dg_row(2, 5, 5, 5, 5, {})}},  // dg 2: new, left out
                {"vds", {vd_row(0, 0, 300, b1), vd_row(0, 1, 0, {})}}};

  auto interval = compute_interval(before, after, StatsSelection{});
  ASSERT_TRUE(interval.is_ok()) << interval.status().to_string();
  EXPECT_DOUBLE_EQ(interval->interval_s, 2.0);
  ASSERT_EQ(interval->dgs.size(), 2u);
  const RateRow& dg0 = interval->dgs[0];
  EXPECT_EQ(dg0.dg_id, 0u);
  EXPECT_DOUBLE_EQ(dg0.read_iops, 100.0);
  EXPECT_DOUBLE_EQ(dg0.write_iops, 0.0);
  EXPECT_DOUBLE_EQ(dg0.read_bps, 1'000'000.0);
  EXPECT_DOUBLE_EQ(dg0.write_bps, 0.0);
  ASSERT_TRUE(dg0.p50_us);
  EXPECT_DOUBLE_EQ(*dg0.p50_us, 96.0);
  EXPECT_DOUBLE_EQ(*dg0.p99_us, 64.0 + 64.0 * 0.99);
  EXPECT_FALSE(interval->dgs[1].p50_us);  // idle: no latency
  ASSERT_EQ(interval->vds.size(), 2u);
  EXPECT_EQ(interval->vds[0].vd_id, 0u);
  EXPECT_DOUBLE_EQ(interval->vds[0].read_iops, 100.0);
  EXPECT_DOUBLE_EQ(interval->vds[0].read_bps, 100.0 * 4096);

  json doc = interval_to_json(*interval);
  EXPECT_EQ(doc["interval_s"], 2.0);
  EXPECT_EQ(doc["dgs"][0]["read_iops"], 100.0);
  EXPECT_EQ(doc["dgs"][0]["p50_us"], 96.0);
  EXPECT_TRUE(doc["dgs"][1]["p50_us"].is_null());
  EXPECT_EQ(doc["vds"][1]["vd_id"], 1);
  for (const char* key :
       {"dg_id", "read_iops", "write_iops", "read_bps", "write_bps", "p50_us", "p99_us"}) {
    EXPECT_TRUE(doc["dgs"][0].contains(key)) << key;
  }

  std::string table = render_stats(*interval);
  EXPECT_TRUE(has(table, "interval 2.00 s")) << table;
  EXPECT_TRUE(has(line_with(table, "READ IOPS"), "P99 us")) << table;
  // dg 0: 100 read IOPS, 1.0 MB/s read, p50 96.0 us.
  const std::string row = line_with(table, "  100  ");
  EXPECT_TRUE(has(row, "1.0")) << table;
  EXPECT_TRUE(has(row, "96.0")) << table;

  // Selections.
  StatsSelection only_dg1;
  only_dg1.vds = false;
  only_dg1.dg_ids = {1};
  interval = compute_interval(before, after, only_dg1);
  ASSERT_TRUE(interval.is_ok());
  ASSERT_EQ(interval->dgs.size(), 1u);
  EXPECT_EQ(interval->dgs[0].dg_id, 1u);
  EXPECT_TRUE(interval->vds.empty());
  StatsSelection vd1_of_dg0;
  vd1_of_dg0.dgs = false;
  vd1_of_dg0.vd_dg = 0;
  vd1_of_dg0.vd_ids = {1};
  interval = compute_interval(before, after, vd1_of_dg0);
  ASSERT_TRUE(interval.is_ok());
  EXPECT_TRUE(interval->dgs.empty());
  ASSERT_EQ(interval->vds.size(), 1u);
  EXPECT_EQ(interval->vds[0].vd_id, 1u);

  // Counters that went down (the dg was made again) leave the row out.
  json reset = after;
  reset["dgs"][0]["reads"] = 1;
  interval = compute_interval(before, reset, StatsSelection{});
  ASSERT_TRUE(interval.is_ok());
  ASSERT_EQ(interval->dgs.size(), 1u);
  EXPECT_EQ(interval->dgs[0].dg_id, 1u);
}

TEST(StatsViewTest, RefusesBadSamples) {
  json good = {{"time_ns", 5}, {"dgs", json::array()}, {"vds", json::array()}};
  json later = good;
  later["time_ns"] = 6;
  EXPECT_TRUE(compute_interval(good, later, {}).is_ok());
  EXPECT_FALSE(compute_interval(later, good, {}).is_ok());  // time went back
  EXPECT_FALSE(compute_interval(good, good, {}).is_ok());
  json no_dgs = later;
  no_dgs.erase("dgs");
  EXPECT_FALSE(compute_interval(good, no_dgs, {}).is_ok());
  json short_buckets = later;
  short_buckets["dgs"] = {dg_row(0, 1, 1, 1, 1, {})};
  short_buckets["dgs"][0]["latency_us_buckets"] = {1, 2, 3};
  auto r = compute_interval(good, short_buckets, {});
  ASSERT_FALSE(r.is_ok());
  EXPECT_TRUE(has(r.status().message(), "latency_us_buckets")) << r.status().message();
  json missing_counter = later;
  missing_counter["dgs"] = {dg_row(0, 1, 1, 1, 1, {})};
  missing_counter["dgs"][0].erase("reads");
  EXPECT_FALSE(compute_interval(good, missing_counter, {}).is_ok());
  EXPECT_FALSE(compute_interval(json::array(), later, {}).is_ok());
}

}  // namespace
}  // namespace graid::cli
