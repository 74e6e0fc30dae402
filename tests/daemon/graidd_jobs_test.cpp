// A DG's job runner (daemon/graidd/job_runner.*): one thread runs the DG's background jobs one at
// a time, as md's sync thread. A member failing while a check runs interrupts the check, the hot
// spare is rebuilt first, and the check then goes on from the position it had reached and finds
// the DG clean.
#include <gtest/gtest.h>

#include <thread>

#include "graidd_harness.h"

namespace graid::testing {
namespace {

using nlohmann::json;

TEST_F(GraiddTest, ACheckGivesWayToTheRebuildAndGoesOnFromItsPosition) {
  // Every job at 20 MB/s per member at most: the check and the rebuild take seconds each.
  EXPECT_EQ(d_->stop(SIGTERM), 0);
  ASSERT_TRUE(d_->start({"--speed-limit-max", "20"})) << d_->log();
  make_pds(5);
  ok({"create", "dg", "raid5", "0-3", "--strip", "16K", "--spare", "4"});
  ok({"start", "check", "0"});
  json dg;
  for (int i = 0; i < 400; ++i) {
    dg = ok({"describe", "dg", "0"});
    if (dg["check"].value("percent", 0.0) >= 10.0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(dg["check"]["running"], true) << dg.dump(1);
  ASSERT_GE(dg["check"].value("percent", 0.0), 10.0) << dg.dump(1);
  ASSERT_LT(dg["check"].value("percent", 0.0), 80.0)
      << "too fast to be interrupted: " << dg.dump(1);
  ok({"edit", "pd", "1", "marker", "offline"});

  // The rebuild runs while the check waits (still asked for: running in describe dg's terms).
  bool rebuilt_while_check_waits = false;
  for (int i = 0; i < 1200; ++i) {
    dg = ok({"describe", "dg", "0"});
    rebuilt_while_check_waits |= dg["state"] == "rebuilding" && dg["check"]["running"] == true;
    if (dg["state"] == "optimal" && dg["check"]["running"] == false) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(rebuilt_while_check_waits) << dg.dump(1);
  ASSERT_EQ(dg["state"], "optimal") << dg.dump(1);
  ASSERT_EQ(dg["check"]["running"], false) << dg.dump(1);
  const json last = dg["check"]["last"];
  EXPECT_EQ(last["finished"], true) << dg.dump(1);
  EXPECT_EQ(last["mismatches"], 0) << dg.dump(1);
  EXPECT_GT(last["from_stripe"].get<std::uint64_t>(), 0u) << "resumed, not restarted";

  // The order the events say: check stopped for the rebuild, rebuild done, check resumed.
  const json events = ok({"list", "event"})["events"];  // a copy: ok()'s result is a temporary
  int step = 0;
  for (const auto& e : events) {
    const std::string kind = e["kind"];
    const std::string message = e.value("message", "");
    if (step == 0 && kind == "check_stopped") step = 1;
    if (step == 1 && kind == "rebuild_finished") step = 2;
    if (step == 2 && kind == "check_started" && message.find("resumed at") != std::string::npos)
      step = 3;
    if (step == 3 && kind == "check_finished") step = 4;
  }
  EXPECT_EQ(step, 4) << events.dump(1);
}

}  // namespace
}  // namespace graid::testing
