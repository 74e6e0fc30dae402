// TLS with pre-shared keys on the NBD server (docs/nbd.md, "TLS"), with real clients: nbdinfo,
// nbdcopy (libnbd) and qemu-img with a PSK can use the export; a client without TLS, another
// user without the key, and a client with a wrong key cannot. Also the PSK file checks, the
// handshake and idle timeouts, and the server's data buffer budget.
#include "nbd/nbd_tls.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include "nbd/buffer_pool.h"
#include "nbd_harness.h"
#include "nbd_test_client.h"
#include "temp_dir.h"

namespace graid::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
constexpr const char* kOtherKey =
    "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

std::string write_file(const TempDir& dir, const std::string& name, const std::string& text,
                       mode_t mode) {
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  EXPECT_EQ(::chmod(path.c_str(), mode), 0);
  return path;
}

TEST(TlsPskKeysTest, LoadsPsktoolFilesAndRefusesBadOnes) {
  TempDir dir;
  auto good = nbd::TlsPskKeys::load(write_file(
      dir, "good.psk", std::string("# a comment\nalice:") + kKey + "\nbob:" + kOtherKey + "\r\n\n",
      0600));
  ASSERT_TRUE(good.is_ok()) << good.status().to_string();
  EXPECT_EQ((*good)->size(), 2u);
  ASSERT_NE((*good)->find("alice"), nullptr);
  EXPECT_EQ((*good)->find("alice")->size(), 32u);
  EXPECT_EQ((*good)->find("alice")->front(), 0x01);
  EXPECT_EQ((*good)->find("carol"), nullptr);
  struct Bad {
    const char* text;
    mode_t mode;
    const char* why;
  };
  const std::string k = kKey;
  for (const Bad& b : {Bad{"", 0600, "holds no key"}, Bad{"alice", 0600, "identity:hexkey"},
                       Bad{":00112233445566778899aabbccddeeff", 0600, "identity:hexkey"},
                       Bad{"alice:0011", 0600, "16 bytes or more"},
                       Bad{"alice:0011223344556677889xaabbccddeeff", 0600, "not hex"},
                       Bad{"alice:00112233445566778899aabbccddeef", 0600, "16 bytes or more"},
                       Bad{"a:00112233445566778899aabbccddeeff\na:00112233445566778899aabbccddeeff",
                           0600, "repeats"},
                       Bad{"alice:00112233445566778899aabbccddeeff", 0644, "group or other"},
                       Bad{"alice:00112233445566778899aabbccddeeff", 0602, "group or other"}}) {
    SCOPED_TRACE(b.text);
    auto r = nbd::TlsPskKeys::load(write_file(dir, "bad.psk", b.text, b.mode));
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), Errc::kInvalidArgument);
    EXPECT_NE(r.status().message().find(b.why), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(nbd::TlsPskKeys::load(dir.file("none.psk")).status().code(), Errc::kNotFound);
}

// Issue 48 item 4: the key file rule is ssh's. Opened without following a link and without
// blocking; the descriptor is what is checked: a regular file of at most 1 MiB, owned by root or
// graidd's user, with no group or other access, in directories that only root or that user can
// change. Before, a file was refused only when every user could read or write it, checked by
// name after it was opened: 0640, 0660, another user's 0600 file and one in a 0777 directory
// were taken, a FIFO blocked the control thread and /dev/zero was read without end.
TEST(TlsPskKeysTest, TheKeyFileRuleIsSshs) {
  TempDir dir;
  const std::string line = std::string("alice:") + kKey + "\n";
  const auto refused = [](const std::string& path, const char* why) {
    SCOPED_TRACE(path);
    auto r = nbd::TlsPskKeys::load(path);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), Errc::kInvalidArgument) << r.status().to_string();
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  };
  refused(write_file(dir, "g.psk", line, 0640), "group or other");
  refused(write_file(dir, "gw.psk", line, 0660), "group or other");
  // Another user's file.
  const std::string theirs = write_file(dir, "theirs.psk", line, 0600);
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0) << "the tests run as root";
  refused(theirs, "owned by uid 65534");
  // A directory others may write to (not sticky): they could swap the file.
  const std::string open_dir = dir.file("open");
  ASSERT_EQ(::mkdir(open_dir.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(open_dir.c_str(), 0777), 0);
  refused(write_file(dir, "open/k.psk", line, 0600), "writable by group or other users");
  // Not regular files: a FIFO (its open would block), a device, a link.
  const std::string fifo = dir.file("fifo.psk");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  refused(fifo, "not a regular file");
  refused("/dev/zero", "not a regular file");
  const std::string good = write_file(dir, "good.psk", line, 0600);
  const std::string link = dir.file("link.psk");
  ASSERT_EQ(::symlink(good.c_str(), link.c_str()), 0);
  refused(link, "a symbolic link");
  // At most 1 MiB.
  refused(write_file(dir, "big.psk", line + std::string(1u << 20, '#'), 0600), "larger than");
  // The temp dir's parent is sticky and root's (/dev/shm, /tmp): others cannot swap what is in
  // it, so a file there is fine.
  auto ok = nbd::TlsPskKeys::load(good);
  EXPECT_TRUE(ok.is_ok()) << ok.status().to_string();
}

class NbdTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    psk_ = write_file(dir_, "keys.psk", std::string("alice:") + kKey + "\n", 0600);
    auto keys = nbd::TlsPskKeys::load(psk_);
    ASSERT_TRUE(keys.is_ok()) << keys.status().to_string();
    keys_ = *keys;
  }
  std::unique_ptr<ServerThread> serve(TestArray& a, nbd::NbdServerOptions o = {}) {
    o.tcp = true;
    o.tcp_address = "127.0.0.1";
    o.tcp_port = 0;
    o.tls = keys_;
    auto s = std::make_unique<ServerThread>(exports_of(export_of(a)), o);
    EXPECT_TRUE(s->status().is_ok()) << s->status().to_string();
    return s;
  }
  std::string tls_uri(std::uint16_t port, const std::string& psk_file) const {
    return "nbds://alice@127.0.0.1:" + std::to_string(port) + "/vd0?tls-psk-file=" + psk_file;
  }

  TempDir dir_;
  std::string psk_;
  std::shared_ptr<const nbd::TlsPskKeys> keys_;
};

// A client that speaks no TLS is refused every option but ABORT (NBD_REP_ERR_TLS_REQD) and
// EXPORT_NAME closes the connection; STARTTLS with data is invalid.
TEST_F(NbdTlsTest, OptionsBeforeStartTlsAreRefused) {
  TestArray a(RaidLevel::kRaid5, 3, 8 << 20, 4 << 20);
  auto server = serve(a);
  NbdTestClient c;
  ASSERT_TRUE(c.connect_tcp(server->port()));
  ASSERT_TRUE(c.greet());
  for (std::uint32_t opt : {nbd::kOptList, nbd::kOptStructuredReply, nbd::kOptGo, nbd::kOptInfo}) {
    SCOPED_TRACE(opt);
    std::vector<std::byte> data;
    if (opt == nbd::kOptGo || opt == nbd::kOptInfo) data.assign(6, std::byte{0});
    ASSERT_TRUE(c.send_option(opt, data));
    auto r = c.recv_option_reply();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->type, nbd::kRepErrTlsReqd);
  }
  ASSERT_TRUE(c.send_option(nbd::kOptStartTls, std::vector<std::byte>(4)));
  auto r = c.recv_option_reply();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->type, nbd::kRepErrInvalid);
  std::vector<std::byte> name(4);  // EXPORT_NAME "": no reply can say "TLS first"
  ASSERT_TRUE(c.send_option(nbd::kOptExportName, name));
  EXPECT_TRUE(c.sees_eof());
}

// The real clients: libnbd (nbdinfo, nbdcopy) and qemu with the PSK read and write the export;
// without TLS, as another user, or with a wrong key they get nothing.
TEST_F(NbdTlsTest, ClientsWithTheKeyGetInOthersDoNot) {
  if (!have_tool("nbdinfo") || !have_tool("nbdcopy"))
    GTEST_SKIP() << "needs nbdinfo and nbdcopy (Debian: libnbd-bin)";
  constexpr std::uint64_t kVd = 16u << 20;
  TestArray a(RaidLevel::kRaid5, 3, 16 << 20, kVd);
  auto server = serve(a);
  const std::uint16_t port = server->port();
  const std::string plain = "nbd://127.0.0.1:" + std::to_string(port) + "/vd0";

  ToolRun r = run_tool("nbdinfo --size '" + plain + "'");
  EXPECT_NE(r.status, 0) << "no TLS, no access: " << r.output;
  EXPECT_NE(r.output.find("requires TLS"), std::string::npos) << r.output;
  if (::geteuid() == 0 && have_tool("setpriv")) {
    // Another local user (nobody) on loopback: refused as well.
    r = run_tool("setpriv --reuid=65534 --regid=65534 --clear-groups nbdinfo --size '" + plain +
                 "'");
    EXPECT_NE(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("requires TLS"), std::string::npos) << r.output;
    // Nor can it use the key file (mode 0600, root's).
    r = run_tool("setpriv --reuid=65534 --regid=65534 --clear-groups nbdinfo --size '" +
                 tls_uri(port, psk_) + "'");
    EXPECT_NE(r.status, 0) << r.output;
  }
  const std::string wrong =
      write_file(dir_, "wrong.psk", std::string("alice:") + kOtherKey + "\n", 0600);
  r = run_tool("nbdinfo --size '" + tls_uri(port, wrong) + "'");
  EXPECT_NE(r.status, 0) << "a wrong key: " << r.output;

  r = run_tool("nbdinfo --size '" + tls_uri(port, psk_) + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, std::to_string(kVd) + "\n");

  // 16 MiB in and out through TLS: large requests go out in many records.
  std::vector<char> data(kVd);
  std::mt19937_64 rng(42);
  for (auto& b : data)
    b = static_cast<char>(rng());
  std::ofstream(dir_.file("in.img"), std::ios::binary).write(data.data(), data.size());
  r = run_tool("nbdcopy '" + dir_.file("in.img") + "' '" + tls_uri(port, psk_) + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto on_array = a.read(0, 1u << 20);
  EXPECT_EQ(std::memcmp(on_array.data(), data.data(), on_array.size()), 0);
  r = run_tool("nbdcopy '" + tls_uri(port, psk_) + "' '" + dir_.file("out.img") + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream out(dir_.file("out.img"), std::ios::binary);
  std::vector<char> back((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  ASSERT_EQ(back.size(), data.size());
  EXPECT_TRUE(back == data);

  if (have_tool("qemu-img")) {
    // qemu's PSK credentials: a directory with keys.psk.
    std::filesystem::create_directory(dir_.file("qemu"));
    write_file(dir_, "qemu/keys.psk", std::string("alice:") + kKey + "\n", 0600);
    r = run_tool("qemu-img info --output=json --object tls-creds-psk,id=tls0,endpoint=client,dir=" +
                 dir_.file("qemu") +
                 ",username=alice --image-opts driver=nbd,server.type=inet,server.host=127.0.0.1,"
                 "server.port=" +
                 std::to_string(port) + ",export=vd0,tls-creds=tls0");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("\"virtual-size\": " + std::to_string(kVd)), std::string::npos)
        << r.output;
  }
}

// A connection that has not finished its handshake in time is closed; so is one idle past the
// idle limit (with no request in flight).
TEST_F(NbdTlsTest, HandshakeAndIdleTimeoutsCloseConnections) {
  TestArray a(RaidLevel::kRaid5, 3, 8 << 20, 4 << 20);
  nbd::NbdServerOptions o;
  o.handshake_timeout = 300ms;
  o.tls = nullptr;
  o.unix_path = dir_.file("s.sock");
  o.idle_timeout = 600ms;
  ServerThread server(exports_of(export_of(a)), o);
  ASSERT_TRUE(server.status().is_ok()) << server.status().to_string();
  {
    NbdTestClient silent;  // connects and says nothing
    ASSERT_TRUE(silent.connect_unix(server.path()));
    ASSERT_TRUE(silent.recv_bytes(nbd::kGreetingSize).has_value());
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(silent.sees_eof());
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  }
  {
    NbdTestClient idle;
    ASSERT_TRUE(idle.connect_unix(server.path()));
    ASSERT_TRUE(idle.handshake("vd0", false));
    // A request now and then keeps it open past the limit...
    for (int i = 0; i < 4; ++i) {
      std::this_thread::sleep_for(300ms);
      ASSERT_TRUE(idle.send_request(nbd::kCmdFlush, 0, i, 0, 0));
      ASSERT_TRUE(idle.recv_reply([](std::uint64_t) { return 0u; }).has_value());
    }
    // ... and silence closes it.
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(idle.sees_eof());
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 400ms);
  }
}

// Many connections reading at once under a server budget of one largest request: they take
// turns for the buffers (a release wakes the others) and every read is answered with the data.
TEST_F(NbdTlsTest, ConnectionsShareTheServerBudget) {
  constexpr std::uint32_t kLen = nbd::kMaxPayload;
  TestArray a(RaidLevel::kRaid5, 3, 40 << 20, kLen);
  const auto expect = a.read(0, kLen);
  nbd::NbdServerOptions o;
  o.unix_path = dir_.file("b.sock");
  o.max_bytes_total = nbd::BufferPool::class_bytes(kLen);
  ServerThread server(exports_of(export_of(a)), o);
  ASSERT_TRUE(server.status().is_ok()) << server.status().to_string();
  constexpr int kClients = 4;
  std::vector<std::thread> clients;
  std::atomic<int> good{0};
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&] {
      NbdTestClient c;
      if (!c.connect_unix(server.path()) || !c.handshake("vd0", false)) return;
      for (std::uint64_t h = 0; h < 2; ++h)
        if (!c.send_request(nbd::kCmdRead, 0, h, 0, kLen)) return;
      for (int n = 0; n < 2; ++n) {
        auto r = c.recv_reply([](std::uint64_t) { return nbd::kMaxPayload; });
        if (!r || r->error != 0 || r->data.size() != kLen ||
            std::memcmp(r->data.data(), expect.data(), kLen) != 0)
          return;
      }
      ++good;
    });
  }
  for (auto& t : clients)
    t.join();
  EXPECT_EQ(good.load(), kClients);
}

}  // namespace
}  // namespace graid::testing
