// graidctl status (cli/status_view.h): mdadm --detail --test's exit codes from `describe dg`
// results, the worst DG winning, and the lines that say why.
#include <gtest/gtest.h>

#include "status_view.h"

namespace graid::cli {
namespace {

using nlohmann::json;

json dg(int id, const std::string& state, json members = json::array(),
        json extra = json::object()) {
  json d = {{"dg_id", id},
            {"name", "dg" + std::to_string(id)},
            {"level", "raid5"},
            {"member_count", 3},
            {"state", state},
            {"members", std::move(members)},
            {"lost_ranges", json::array()}};
  for (auto& [k, v] : extra.items())
    d[k] = v;
  return d;
}

json members(const std::string& s0, const std::string& s1, const std::string& s2) {
  return json::array({{{"slot", 0}, {"pd_id", 0}, {"path", "/dev/a"}, {"state", s0}},
                      {{"slot", 1}, {"pd_id", 1}, {"path", "/dev/b"}, {"state", s1}},
                      {{"slot", 2}, {"pd_id", 2}, {"path", "/dev/c"}, {"state", s2}},
                      {{"slot", 3}, {"pd_id", 3}, {"path", "/dev/d"}, {"state", "spare"}}});
}

TEST(GraidctlStatusTest, EachStateHasMdadmsCode) {
  EXPECT_EQ(dg_status_code(dg(0, "optimal", members("active", "active", "active"))), 0);
  for (const char* optimal : {"initialising", "resyncing", "checking", "replacing"})
    EXPECT_EQ(dg_status_code(dg(0, optimal, members("active", "active", "active"))), 0) << optimal;
  EXPECT_EQ(dg_status_code(dg(0, "degraded", members("active", "failed", "active"))), 1);
  EXPECT_EQ(dg_status_code(dg(0, "rebuilding", members("active", "rebuilding", "active"))), 1);
  // A hot replace while another member is out of sync: the member decides.
  EXPECT_EQ(dg_status_code(dg(0, "replacing", members("active", "removed", "active"))), 1);
  EXPECT_EQ(dg_status_code(dg(0, "optimal", members("active", "active", "active"),
                              {{"lost_ranges", json::array({{{"offset", 0}, {"bytes", 4096}}})}})),
            1);
  EXPECT_EQ(dg_status_code(dg(0, "failed")), 2);
  EXPECT_EQ(dg_status_code(dg(0, "offline")), 2);
  // A spare slot that is not active does not count.
  json spare_gone = members("active", "active", "active");
  spare_gone[3]["state"] = "failed";
  EXPECT_EQ(dg_status_code(dg(0, "optimal", spare_gone)), 0);
}

TEST(GraidctlStatusTest, TheWorstDgWinsAndNoDgIsOptimal) {
  EXPECT_EQ(build_status(json::array(), json::array()).exit_code, 0);
  const json pds = json::array();
  const auto report =
      build_status(json::array({dg(0, "optimal", members("active", "active", "active")),
                                dg(1, "degraded", members("active", "failed", "active")),
                                dg(2, "optimal", members("active", "active", "active"))}),
                   pds);
  EXPECT_EQ(report.exit_code, 1);
  EXPECT_EQ(
      build_status(
          json::array({dg(0, "degraded", members("failed", "active", "active")),
                       dg(1, "offline", json::array(), {{"message", "2 of 3 members missing"}})}),
          pds)
          .exit_code,
      2);
  const json j = status_to_json(report);
  EXPECT_EQ(j["status"], "degraded");
  EXPECT_EQ(j["exit_code"], 1);
  ASSERT_EQ(j["dgs"].size(), 3u);
  EXPECT_EQ(j["dgs"][1]["status"], "degraded");
  EXPECT_EQ(j["dgs"][0]["status"], "optimal");
}

TEST(GraidctlStatusTest, TheLinesSayWhichMemberWhyAndHowFarJobsAre) {
  const json pds = json::array(
      {{{"pd_id", 1}, {"message", "I/O error at 4096: EIO"}}, {{"pd_id", 2}, {"message", ""}}});
  json rebuilding = dg(3, "rebuilding", members("active", "active", "rebuilding"),
                       {{"rebuild",
                         {{"slot", 2},
                          {"pd_id", 2},
                          {"percent", 42.5},
                          {"bytes_per_second", 81'000'000},
                          {"eta_seconds", 252}}}});
  json failed = dg(4, "degraded", members("active", "failed", "active"),
                   {{"lost_ranges", json::array({{{"offset", 0}, {"bytes", 1 << 20}},
                                                 {{"offset", 1 << 30}, {"bytes", 1 << 19}}})},
                    {"check", {{"running", true}, {"percent", 12.0}}}});
  json offline = dg(5, "offline", json::array(), {{"message", "2 of 3 members are missing"}});
  const auto report = build_status(json::array({rebuilding, failed, offline}), pds);
  const std::string text = render_status(report);
  EXPECT_NE(text.find("dg 3 (dg3) raid5, 3 members: rebuilding [degraded]\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("  slot 2 (pd 2, /dev/c): rebuilding, 42.5 %, 81.0 MB/s, 4 min 12 s left\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  slot 1 (pd 1, /dev/b): failed: I/O error at 4096: EIO\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  2 lost range(s), 1.5 MiB in all"), std::string::npos) << text;
  EXPECT_NE(text.find("  checking: 12.0 %\n"), std::string::npos) << text;
  EXPECT_NE(
      text.find("dg 5 (dg5) raid5, 3 members: offline [failed]\n  2 of 3 members are missing\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("status: failed (exit 2)\n"), std::string::npos) << text;
  EXPECT_EQ(render_status(build_status(json::array(), pds)),
            "no drive groups\nstatus: optimal (exit 0)\n");
}

}  // namespace
}  // namespace graid::cli
