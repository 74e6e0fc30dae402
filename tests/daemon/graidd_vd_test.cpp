// edit vd size end to end through graidctl: a VD grows in place, the refusals change nothing, an
// NBD export keeps the size it told its clients until the VD is exported again, and the new size
// survives a restart (a ublk device following live, with UPDATE_SIZE, is the VM's ublk-resize);
// and describe controller's view of the ublk driver.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "graidd_harness.h"
#include "nbd_harness.h"
#include "nbd_test_client.h"

namespace graid::testing {
namespace {

using nlohmann::json;

constexpr std::uint32_t kChunk = 64u << 10;

std::vector<std::byte> chunk_at(std::uint64_t at) {
  std::vector<std::byte> buf(kChunk);
  for (std::size_t i = 0; i < buf.size(); i += 8) {
    const std::uint64_t v = (at + i) * 0x9e3779b97f4a7c15ull;
    std::memcpy(buf.data() + i, &v, 8);
  }
  return buf;
}

// Writes (or, with `verify`, reads back and compares) [from, to) of the export at `sock`.
void write_or_verify(const std::string& sock, std::uint64_t from, std::uint64_t to, bool verify) {
  NbdTestClient c;
  ASSERT_TRUE(c.connect_unix(sock));
  ASSERT_TRUE(c.handshake("", false));
  std::uint64_t handle = 1;
  for (std::uint64_t at = from; at < to; at += kChunk, ++handle) {
    const std::vector<std::byte> want = chunk_at(at);
    if (verify) {
      ASSERT_TRUE(c.send_request(nbd::kCmdRead, 0, handle, at, kChunk, {}));
      auto reply = c.recv_reply([](std::uint64_t) { return kChunk; });
      ASSERT_TRUE(reply.has_value());
      ASSERT_EQ(reply->error, 0u) << "read at " << at;
      ASSERT_TRUE(reply->data == want) << "data differs at VD byte " << at;
    } else {
      ASSERT_TRUE(c.send_request(nbd::kCmdWrite, 0, handle, at, kChunk, want));
      auto reply = c.recv_reply([](std::uint64_t) { return 0; });
      ASSERT_TRUE(reply.has_value());
      ASSERT_EQ(reply->error, 0u) << "write at " << at;
    }
  }
}

// The size an NBD client is told (nbdinfo), or "" without nbdinfo.
std::string nbd_size(const std::string& sock) {
  if (!have_tool("nbdinfo")) return "";
  const ToolRun r = run_tool("nbdinfo --size 'nbd+unix:///?socket=" + sock + "'");
  EXPECT_EQ(r.status, 0) << r.output;
  return r.output;
}

TEST_F(GraiddTest, EditVdSizeGrowsTheVdAndNbdFollowsOnTheNextExport) {
  make_pds(3);
  ok({"create", "dg", "raid5", "0-2", "--strip", "16K"});
  ok({"create", "vd", "0", "--size", "8M", "--no-ublk"});
  ok({"create", "vd", "0", "--size", "4M", "--no-ublk"});  // right after vd 0, at 8 MiB
  const std::string sock = dir_.file("vd.sock");
  ok({"export", "vd", "0", "0", "--nbd", "unix:" + sock});
  write_or_verify(sock, 0, 8u << 20, false);
  if (HasFatalFailure()) return;

  const json before = snapshot();
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused{
      {{"edit", "vd", "0", "0", "size", "4M"}, "shrinking"},
      {{"edit", "vd", "0", "0", "size", "9M"}, "at most 8388608 bytes, up to VD 1"},
      {{"edit", "vd", "0", "0", "size", "5000"}, "multiple of 4 KiB"},
      {{"edit", "vd", "0", "0", "size", "1T"}, "cannot grow"},
      {{"edit", "vd", "0", "9", "size", "16M"}, "vd 9"},
      {{"edit", "vd", "0", "0", "colour", "red"}, "the one setting is size"},
      {{"edit", "vd", "0", "0", "size"}, ""},
  };
  for (const auto& [args, why] : refused) {
    const CtlRun r = d_->ctl(args);
    EXPECT_NE(r.exit, 0) << describe(r);
    EXPECT_NE(describe(r).find(why), std::string::npos) << describe(r);
  }
  EXPECT_EQ(snapshot(), before) << "refusals change nothing";

  ok({"delete", "vd", "0", "1", "--confirm"});
  const json grown = ok({"edit", "vd", "0", "0", "size", "16M"});
  EXPECT_EQ(grown["size"], 16u << 20);
  EXPECT_EQ(grown["previous_size"], 8u << 20);
  ASSERT_EQ(grown["exports"].size(), 1u) << grown.dump();
  EXPECT_EQ(grown["exports"][0]["size"], 8u << 20) << "NBD keeps what it told its clients";
  ASSERT_EQ(grown["notes"].size(), 1u) << grown.dump();
  EXPECT_NE(grown["notes"][0].get<std::string>().find("NBD"), std::string::npos);
  const std::string told = nbd_size(sock);
  if (!told.empty()) {
    EXPECT_EQ(told, std::to_string(8u << 20) + "\n");
  }
  // Growing to the same size again is no change.
  EXPECT_EQ(ok({"edit", "vd", "0", "0", "size", "16M"})["size"], 16u << 20);

  ok({"unexport", "vd", "0", "0"});
  ok({"export", "vd", "0", "0", "--nbd", "unix:" + sock});
  const std::string now = nbd_size(sock);
  if (!now.empty()) {
    EXPECT_EQ(now, std::to_string(16u << 20) + "\n");
  }
  write_or_verify(sock, 8u << 20, 16u << 20, false);
  if (HasFatalFailure()) return;

  bool resized_event = false;
  const json events = ok({"list", "event"})["events"];  // a copy: ok()'s result is a temporary
  for (const json& e : events)
    resized_event = resized_event || e.value("kind", "") == "vd_resized";
  EXPECT_TRUE(resized_event);

  EXPECT_EQ(d_->stop(SIGTERM), 0);
  ASSERT_TRUE(d_->start()) << d_->log();
  const json vd = ok({"describe", "vd", "0", "0"});
  EXPECT_EQ(vd["size"], 16u << 20);
  ASSERT_EQ(vd["exports"].size(), 1u) << vd.dump();
  EXPECT_EQ(vd["exports"][0]["size"], 16u << 20);
  write_or_verify(sock, 0, 16u << 20, true);
}

// describe controller says what the kernel's ublk driver offers, by name, or why there is no
// ublk (this machine's kernel may have none; the VM's ublk-resize looks at 7.3's).
TEST_F(GraiddTest, DescribeControllerShowsTheUblkDriversFeatures) {
  const json c = ok({"describe", "controller"});
  ASSERT_TRUE(c.contains("ublk")) << c.dump(1);
  const json& u = c["ublk"];
  ASSERT_TRUE(u["features"].is_array()) << u.dump();
  if (u["available"].get<bool>()) {
    EXPECT_EQ(u["reason"], "");
  } else {
    EXPECT_NE(u["reason"].get<std::string>(), "") << "no ublk: the reason says why";
    EXPECT_TRUE(u["features"].empty());
  }
}

}  // namespace
}  // namespace graid::testing
