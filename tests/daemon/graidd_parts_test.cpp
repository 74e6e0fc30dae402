// graidd's parts that need no daemon: the event log's bounds and queries, the state dir's atomic
// file (round trip, refusals of damaged or newer files), NBD addresses, and the I/O threads'
// call().
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "graidd/event_log.h"
#include "graidd/io_threads.h"
#include "graidd/nbd_exports.h"
#include "graidd/state_store.h"
#include "temp_dir.h"

namespace graid::testing {
namespace {

using namespace graid::daemon;

TEST(EventLog, KeepsTheLastEventsInOrderWithIncreasingSeq) {
  EventLog log(5);
  for (int i = 0; i < 8; ++i)
    log.add("pd_added", std::nullopt, i, std::nullopt, "x");
  auto q = log.since(0);
  ASSERT_EQ(q.events.size(), 5u);
  EXPECT_EQ(q.events.front().seq, 4u);
  EXPECT_EQ(q.events.back().seq, 8u);
  EXPECT_EQ(q.events.back().pd_id, 7u);
  EXPECT_EQ(q.next_seq, 9u);
  EXPECT_EQ(q.dropped, 3u);
  q = log.since(6);
  ASSERT_EQ(q.events.size(), 2u);
  EXPECT_EQ(q.events[0].seq, 7u);
  EXPECT_TRUE(log.since(8).events.empty());
  EXPECT_TRUE(log.since(1000).events.empty());
  EXPECT_EQ(log.since(0, 2).events.size(), 2u);
}

TEST(EventLog, ConcurrentWritersLoseNothingWithinCapacity) {
  EventLog log(kMaxEvents);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i)
        log.add("member_failed", 1u, std::nullopt, std::nullopt, "");
    });
  for (auto& t : threads)
    t.join();
  const auto q = log.since(0);
  ASSERT_EQ(q.events.size(), 4000u);
  for (std::size_t i = 0; i < q.events.size(); ++i)
    EXPECT_EQ(q.events[i].seq, i + 1);
}

TEST(StateStore, RoundTripAndMissingFile) {
  TempDir dir;
  auto empty = load_state(dir.path() + "/none");
  ASSERT_TRUE(empty.is_ok()) << empty.status().to_string();
  EXPECT_TRUE(empty->pds.empty());
  PersistedState s;
  s.pds = {{0, "/dev/shm/a", false}, {3, "/dev/nvme0n1", true}};
  s.dgs = {{1, "01234567-89ab-cdef-0123-456789abcdef"}};
  s.exports = {
      {1, 0, "nbd", "unix:/run/x.sock", "vd0", true, std::nullopt, "", false},
      {1, 2, "ublk", "/dev/ublkb7", "", false, 7u, "", false},
      {1, 3, "nbd", "tcp:127.0.0.1:10809", "vd3", false, std::nullopt, "/etc/k.psk", false},
      {1, 4, "nbd", "tcp:127.0.0.1:10810", "vd4", false, std::nullopt, "", true}};
  ASSERT_TRUE(save_state(dir.path() + "/sub", s).is_ok());
  auto back = load_state(dir.path() + "/sub");
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  ASSERT_EQ(back->pds.size(), 2u);
  EXPECT_EQ(back->pds[1].pd_id, 3u);
  EXPECT_EQ(back->pds[1].path, "/dev/nvme0n1");
  EXPECT_TRUE(back->pds[1].marker_offline);
  ASSERT_EQ(back->dgs.size(), 1u);
  EXPECT_EQ(back->dgs[0].uuid, s.dgs[0].uuid);
  ASSERT_EQ(back->exports.size(), 4u);
  // How an NBD export over TCP is protected comes back as it was given.
  EXPECT_EQ(back->exports[2].tls_psk, "/etc/k.psk");
  EXPECT_FALSE(back->exports[2].insecure_tcp);
  EXPECT_EQ(back->exports[3].tls_psk, "");
  EXPECT_TRUE(back->exports[3].insecure_tcp);
  EXPECT_EQ(back->exports[0].address, "unix:/run/x.sock");
  EXPECT_TRUE(back->exports[0].read_only);
  EXPECT_FALSE(back->exports[0].dev_id.has_value());
  // A ublk export keeps its device id: what a restart re-attaches or asks for again.
  EXPECT_EQ(back->exports[1].kind, "ublk");
  EXPECT_EQ(back->exports[1].vd_id, 2u);
  EXPECT_EQ(back->exports[1].dev_id, std::optional<std::uint32_t>(7u));
  // No temporary file is left behind.
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/sub/state.json.tmp"));
}

TEST(StateStore, RefusesDamagedOrNewerFiles) {
  TempDir dir;
  const auto write = [&](const std::string& text) {
    std::ofstream(dir.file("state.json")) << text;
    return load_state(dir.path());
  };
  for (const char* bad : {"{", "[]", "{\"pds\":[]}", "{\"version\":99}",
                          "{\"version\":1,\"pds\":[{\"pd_id\":0,\"path\":\"/a\"},"
                          "{\"pd_id\":0,\"path\":\"/b\"}]}",
                          "{\"version\":1,\"pds\":[{\"pd_id\":0,\"path\":\"/a\"},"
                          "{\"pd_id\":1,\"path\":\"/a\"}]}",
                          "{\"version\":1,\"pds\":[{\"pd_id\":\"x\",\"path\":\"/a\"}]}",
                          // an export of a kind this graidd does not know
                          "{\"version\":1,\"exports\":[{\"dg_id\":0,\"vd_id\":0,\"kind\":"
                          "\"iscsi\",\"address\":\"x\"}]}"}) {
    SCOPED_TRACE(bad);
    auto r = write(bad);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), Errc::kCorrupt);
  }
}

TEST(NbdAddress, ParsesUnixAndTcpForms) {
  auto a = parse_nbd_address("unix:/run/graid/vd0.sock");
  ASSERT_TRUE(a.is_ok());
  EXPECT_FALSE(a->tcp);
  EXPECT_EQ(a->path, "/run/graid/vd0.sock");
  a = parse_nbd_address("tcp:0.0.0.0:10809");
  ASSERT_TRUE(a.is_ok());
  EXPECT_TRUE(a->tcp);
  EXPECT_EQ(a->host, "0.0.0.0");
  EXPECT_EQ(a->port, 10809);
  a = parse_nbd_address("tcp:10810");
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(a->host, "127.0.0.1");  // loopback unless an address is given
  EXPECT_EQ(a->port, 10810);
  a = parse_nbd_address("tcp:[::1]:0");
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(a->host, "::1");
  for (const char* bad : {"", "unix:", "unix:relative", "tcp:", "tcp:host:", "tcp:1:65536",
                          "tcp:[::1]10809", "udp:1", "tcp:1:2x"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(parse_nbd_address(bad).is_ok());
  }
}

// TCP is refused without TLS unless --insecure-tcp says so (docs/nbd.md, "TLS").
TEST(NbdAddress, TcpNeedsTlsOrInsecureTcp) {
  auto access = [](std::string address, std::string psk, bool insecure) {
    NbdAccess a;
    a.address = std::move(address);
    a.tls_psk = std::move(psk);
    a.insecure_tcp = insecure;
    return check_nbd_access(a);
  };
  EXPECT_TRUE(access("unix:/run/x.sock", "", false).is_ok());
  EXPECT_TRUE(access("unix:/run/x.sock", "/etc/k.psk", false).is_ok()) << "TLS on a socket too";
  EXPECT_TRUE(access("tcp:127.0.0.1:1", "/etc/k.psk", false).is_ok());
  EXPECT_TRUE(access("tcp:127.0.0.1:1", "", true).is_ok());
  const Status plain = access("tcp:127.0.0.1:1", "", false);
  ASSERT_FALSE(plain.is_ok()) << "loopback is not private: any local user can connect";
  EXPECT_NE(plain.message().find("--tls-psk"), std::string::npos) << plain.message();
  EXPECT_NE(plain.message().find("--insecure-tcp"), std::string::npos) << plain.message();
  EXPECT_FALSE(access("tcp:127.0.0.1:1", "/etc/k.psk", true).is_ok()) << "one or the other";
  EXPECT_FALSE(access("unix:/run/x.sock", "", true).is_ok()) << "--insecure-tcp is for tcp";
  EXPECT_FALSE(access("tcp:", "", true).is_ok());
}

TEST(IoThreads, CallRunsOnTheThreadAndWaits) {
  auto threads = IoThreads::start(3);
  ASSERT_TRUE(threads.is_ok());
  std::vector<std::thread::id> ids(3);
  for (std::uint32_t i = 0; i < 3; ++i)
    (*threads)->call(i, [&, i](IoContext&) { ids[i] = std::this_thread::get_id(); });
  EXPECT_NE(ids[0], std::this_thread::get_id());
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_NE(ids[1], ids[2]);
  EXPECT_FALSE(IoThreads::start(0).is_ok());
}

}  // namespace
}  // namespace graid::testing
