// The re-sync after an unclean stop as graidd runs it: in the background, by the DG's job runner,
// at the DG's resync_speed under graidd --speed-limit-max, visible in describe dg, with a check
// refused until it is done, and going on after a clean restart part way.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "graidd_harness.h"
#include "nbd_harness.h"
#include "nbd_test_client.h"

namespace graid::testing {
namespace {

using nlohmann::json;

constexpr std::uint32_t kChunk = 128u << 10;

// What write_all() puts at VD byte `at` (a chunk).
void pattern(std::uint64_t at, std::vector<std::byte>& buf) {
  std::mt19937_64 g(at);
  for (std::size_t i = 0; i < buf.size(); i += 8) {
    const std::uint64_t v = g();
    std::memcpy(&buf[i], &v, 8);
  }
}

// Writes `bytes` of the export at `sock` in 128 KiB requests, block i holding fill(i); waits for
// every reply. No flush: the regions' write-intent bits stay set.
void write_all(const std::string& sock, std::uint64_t bytes) {
  NbdTestClient c;
  ASSERT_TRUE(c.connect_unix(sock));
  ASSERT_TRUE(c.handshake("", false));
  std::vector<std::byte> buf(kChunk);
  std::uint64_t handle = 1;
  for (std::uint64_t at = 0; at < bytes; at += kChunk, ++handle) {
    pattern(at, buf);
    ASSERT_TRUE(c.send_request(nbd::kCmdWrite, 0, handle, at, kChunk, buf));
    auto reply = c.recv_reply([](std::uint64_t) { return 0; });
    ASSERT_TRUE(reply.has_value());
    ASSERT_EQ(reply->error, 0u) << "write at " << at;
  }
}

// Reads `bytes` back and compares them with what write_all() wrote.
void verify_all(const std::string& sock, std::uint64_t bytes) {
  NbdTestClient c;
  ASSERT_TRUE(c.connect_unix(sock));
  ASSERT_TRUE(c.handshake("", false));
  std::vector<std::byte> want(kChunk);
  std::uint64_t handle = 1;
  for (std::uint64_t at = 0; at < bytes; at += kChunk, ++handle) {
    pattern(at, want);
    ASSERT_TRUE(c.send_request(nbd::kCmdRead, 0, handle, at, kChunk, {}));
    auto reply = c.recv_reply([](std::uint64_t) { return kChunk; });
    ASSERT_TRUE(reply.has_value());
    ASSERT_EQ(reply->error, 0u);
    ASSERT_TRUE(reply->data == want) << "data differs at VD byte " << at;
  }
}

TEST_F(GraiddTest, AfterAKillTheDgResyncsInTheBackgroundAtItsResyncSpeed) {
  make_pds(4);
  ok({"create", "dg", "raid5", "0-3", "--strip", "16K"});
  constexpr std::uint64_t kVd = 96u << 20;  // 32 MiB per member: over 3 s at `low`
  ok({"create", "vd", "0", "--size", "96M"});
  const std::string sock = dir_.file("vd.sock");
  ok({"export", "vd", "0", "0", "--nbd", "unix:" + sock});
  ok({"edit", "dg", "0", "resync_speed", "low"});
  write_all(sock, kVd);
  if (HasFatalFailure()) return;
  d_->stop(SIGKILL);

  // Restarted with every job capped at 10 MB/s per member (graidd --speed-limit-max, md's
  // speed_limit_max): the re-sync of 32 MiB per member takes over 3 s, so it is caught running.
  ASSERT_TRUE(d_->start({"--speed-limit-max", "10"})) << d_->log();
  const json dg = ok({"describe", "dg", "0"});
  EXPECT_EQ(dg["state"], "resyncing") << dg.dump(1);
  ASSERT_TRUE(dg.contains("resync")) << dg.dump(1);
  EXPECT_LT(dg["resync"]["percent"].get<double>(), 100.0);
  const CtlRun check = d_->ctl({"start", "check", "0"});
  EXPECT_NE(check.exit, 0);
  EXPECT_NE(check.out.find("re-syncing"), std::string::npos) << describe(check);
  // The data reads back while the re-sync runs.
  verify_all(sock, kVd);
  // A clean stop part way leaves the rest pending; graidd started again without the cap goes on
  // with it at the DG's new speed.
  ok({"edit", "dg", "0", "resync_speed", "extreme"});
  const json part = ok({"describe", "dg", "0"});
  ASSERT_TRUE(part.contains("resync")) << "the re-sync ended under the cap: " << part.dump(1);
  ASSERT_EQ(d_->stop(SIGTERM), 0) << d_->log();
  ASSERT_TRUE(d_->start()) << d_->log();  // the export comes back with the DG
  const json done = wait_for("dg", "0", [](const json& j) { return !j.contains("resync"); });
  EXPECT_EQ(done["state"], "optimal") << done.dump(1);
  bool started = false, finished = false;
  const json events = ok({"list", "event"});
  for (const auto& e : events["events"]) {
    started |= e["kind"] == "resync_started";
    finished |= e["kind"] == "resync_finished" &&
                e["message"].get<std::string>().find(", 0 could not be") != std::string::npos;
  }
  EXPECT_TRUE(started && finished) << events.dump(1);
  // Now a check runs, and finds every stripe consistent.
  ok({"start", "check", "0"});
  const json checked = wait_for("dg", "0", [](const json& j) {
    return j.contains("check") && j["check"]["running"] == false && j["check"].contains("last");
  });
  EXPECT_EQ(checked["check"]["last"]["finished"], true) << checked.dump(1);
  EXPECT_EQ(checked["check"]["last"]["mismatches"], 0) << checked.dump(1);
  verify_all(sock, kVd);
}

}  // namespace
}  // namespace graid::testing
