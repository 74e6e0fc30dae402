// The NBD server in process, driven by a raw-socket client: the handshake's options, pipelined
// randomized I/O checked byte for byte against a model (simple and structured replies), the
// errors every bad request gets, hostile clients (bad magic, huge lengths, disconnecting
// mid-write) that must neither crash the server nor change a byte outside what was written,
// stopping with requests in flight, and the listeners (unix socket mode 0600, TCP).
#include <sys/stat.h>

#include <algorithm>
#include <future>
#include <map>
#include <random>
#include <thread>

#include "nbd_harness.h"
#include "nbd_test_client.h"

namespace graid::testing {
namespace {

using namespace graid::nbd;

constexpr std::uint64_t kVdBytes = 8u << 20;

class NbdServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    array_ = std::make_unique<TestArray>(RaidLevel::kRaid5, 4, 8u << 20, kVdBytes, 16 * 1024);
    ASSERT_NE(array_->array, nullptr);
    model_.assign(kVdBytes, std::byte{0});
  }
  void TearDown() override {
    server_.reset();
    array_.reset();
  }

  void start(std::vector<NbdExport> exports, NbdServerOptions o = {}) {
    if (o.unix_path.empty()) o.unix_path = array_->files.dir.file("nbd.sock");
    server_ = std::make_unique<ServerThread>(std::move(exports), o);
    ASSERT_TRUE(server_->status().is_ok()) << server_->status().to_string();
  }
  void start() { start(exports_of(export_of(*array_))); }

  // The whole VD, read through the array after the server has stopped, equals the model.
  void expect_array_matches_model() {
    server_->stop();
    const auto bytes = array_->read(0, static_cast<std::uint32_t>(kVdBytes));
    ASSERT_EQ(bytes.size(), model_.size());
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i] != model_[i]) {
        ADD_FAILURE() << "VD byte " << i << " differs from the model";
        return;
      }
    }
    EXPECT_EQ(*array_->array->count_inconsistent_stripes(), 0u);
  }

  std::unique_ptr<TestArray> array_;
  std::unique_ptr<ServerThread> server_;
  std::vector<std::byte> model_;
};

TEST_F(NbdServerTest, HandshakeOptions) {
  auto second = export_of(*array_, "second", /*read_only=*/true);
  start(exports_of(export_of(*array_), std::move(second)));
  NbdTestClient c;
  ASSERT_TRUE(c.connect_unix(server_->path()));
  ASSERT_TRUE(c.greet());
  // LIST names both exports, then ACK.
  ASSERT_TRUE(c.send_option(kOptList, {}));
  std::vector<std::string> names;
  for (;;) {
    auto r = c.recv_option_reply();
    ASSERT_TRUE(r.has_value());
    if (r->type == kRepAck) break;
    ASSERT_EQ(r->type, kRepServer);
    const auto len = NbdTestClient::be(r->data, 0, 4);
    names.emplace_back(reinterpret_cast<const char*>(r->data.data() + 4), len);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"vd0", "second"}));
  // Unknown options and STARTTLS: ERR_UNSUP; LIST with data: ERR_INVALID.
  for (std::uint32_t opt : {kOptStartTls, 42u, 0x7fffffffu}) {
    ASSERT_TRUE(c.send_option(opt, std::vector<std::byte>(3)));
    auto r = c.recv_option_reply();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->option, opt);
    EXPECT_EQ(r->type, kRepErrUnsup);
  }
  ASSERT_TRUE(c.send_option(kOptList, std::vector<std::byte>(1)));
  EXPECT_EQ(c.recv_option_reply()->type, kRepErrInvalid);
  // INFO: the empty name is no export when there are two; a malformed INFO is ERR_INVALID.
  std::vector<std::byte> info;
  NbdTestClient::put(info, 0, 4);
  NbdTestClient::put(info, 0, 2);
  ASSERT_TRUE(c.send_option(kOptInfo, info));
  EXPECT_EQ(c.recv_option_reply()->type, kRepErrUnknown);
  ASSERT_TRUE(c.send_option(kOptInfo, std::vector<std::byte>(5)));
  EXPECT_EQ(c.recv_option_reply()->type, kRepErrInvalid);
  // INFO on "second" with NAME, DESCRIPTION, BLOCK_SIZE.
  info.clear();
  NbdTestClient::put(info, 6, 4);
  for (char ch : std::string("second"))
    info.push_back(static_cast<std::byte>(ch));
  NbdTestClient::put(info, 3, 2);
  NbdTestClient::put(info, kInfoName, 2);
  NbdTestClient::put(info, kInfoDescription, 2);
  NbdTestClient::put(info, kInfoBlockSize, 2);
  ASSERT_TRUE(c.send_option(kOptInfo, info));
  std::map<std::uint64_t, std::vector<std::byte>> got;
  for (;;) {
    auto r = c.recv_option_reply();
    ASSERT_TRUE(r.has_value());
    if (r->type == kRepAck) break;
    ASSERT_EQ(r->type, kRepInfo);
    got[NbdTestClient::be(r->data, 0, 2)] = r->data;
  }
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(NbdTestClient::be(got[kInfoExport], 2, 8), kVdBytes);
  const auto flags = NbdTestClient::be(got[kInfoExport], 10, 2);
  EXPECT_NE(flags & kFlagReadOnly, 0u);
  EXPECT_NE(flags & kFlagCanMultiConn, 0u);
  EXPECT_EQ(flags & kFlagSendTrim, 0u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(got[kInfoName].data() + 2), 6), "second");
  EXPECT_EQ(NbdTestClient::be(got[kInfoBlockSize], 2, 4), 512u);
  EXPECT_EQ(NbdTestClient::be(got[kInfoBlockSize], 6, 4), 4096u);
  EXPECT_EQ(NbdTestClient::be(got[kInfoBlockSize], 10, 4), kMaxPayload);
  // An oversized option: TOO_BIG, then the server closes.
  std::vector<std::byte> h;
  NbdTestClient::put(h, kOptMagic, 8);
  NbdTestClient::put(h, kOptInfo, 4);
  NbdTestClient::put(h, 0xfffffff0u, 4);
  ASSERT_TRUE(c.send_bytes(h));
  EXPECT_EQ(c.recv_option_reply()->type, kRepErrTooBig);
  EXPECT_TRUE(c.sees_eof());
  // ABORT is acknowledged, then closed.
  NbdTestClient d;
  ASSERT_TRUE(d.connect_unix(server_->path()));
  ASSERT_TRUE(d.greet());
  ASSERT_TRUE(d.send_option(kOptAbort, {}));
  EXPECT_EQ(d.recv_option_reply()->type, kRepAck);
  EXPECT_TRUE(d.sees_eof());
  // Bad option magic and unknown client flags: closed.
  NbdTestClient e;
  ASSERT_TRUE(e.connect_unix(server_->path()));
  ASSERT_TRUE(e.greet());
  ASSERT_TRUE(e.send_bytes(std::vector<std::byte>(16, std::byte{0x55})));
  EXPECT_TRUE(e.sees_eof());
  NbdTestClient f;
  ASSERT_TRUE(f.connect_unix(server_->path()));
  ASSERT_TRUE(f.greet(0x80));
  EXPECT_TRUE(f.sees_eof());
}

// Pipelined random requests, checked against a model; each batch's ranges are disjoint, so the
// model is exact whatever order the server completes them in.
void random_io(NbdTestClient& c, std::vector<std::byte>& model, std::uint64_t seed, int batches) {
  std::mt19937_64 rng(seed);
  std::uint64_t next_handle = 1;
  for (int b = 0; b < batches; ++b) {
    struct Op {
      std::uint16_t type;
      std::uint64_t offset;
      std::uint32_t len;
      std::vector<std::byte> data;
    };
    std::map<std::uint64_t, Op> ops;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> used;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      const std::uint32_t len = 512 * static_cast<std::uint32_t>(1 + rng() % 256);
      const std::uint64_t off = 512 * (rng() % ((model.size() - len) / 512 + 1));
      if (std::any_of(used.begin(), used.end(),
                      [&](auto u) { return off < u.second && u.first < off + len; }))
        continue;
      used.emplace_back(off, off + len);
      Op op{kCmdRead, off, len, {}};
      const auto pick = rng() % 10;
      std::uint16_t flags = 0;
      if (pick < 4) {
        op.type = kCmdWrite;
        op.data = random_bytes(len, rng());
        if (rng() % 4 == 0) flags |= kCmdFlagFua;
      } else if (pick == 4) {
        op.type = kCmdTrim;
      } else if (pick == 5) {
        op.type = kCmdWriteZeroes;
        if (rng() % 2 == 0) flags |= kCmdFlagNoHole;
        if (rng() % 4 == 0) flags |= kCmdFlagFua;
      }
      const std::uint64_t handle = next_handle++ * 0x9E3779B97F4A7C15ull;
      ASSERT_TRUE(c.send_request(op.type, flags, handle, off, len, op.data));
      ops.emplace(handle, std::move(op));
    }
    if (rng() % 4 == 0) {
      ASSERT_TRUE(c.send_request(kCmdFlush, 0, 0xF1u, 0, 0));
      ops.emplace(0xF1u, Op{kCmdFlush, 0, 0, {}});
    }
    const std::size_t expected = ops.size();
    for (std::size_t i = 0; i < expected; ++i) {
      auto r = c.recv_reply([&](std::uint64_t h) {
        auto it = ops.find(h);
        return it != ops.end() && it->second.type == kCmdRead ? it->second.len : 0u;
      });
      ASSERT_TRUE(r.has_value()) << "no reply";
      auto it = ops.find(r->handle);
      ASSERT_NE(it, ops.end()) << "reply with an unknown handle " << r->handle;
      ASSERT_EQ(r->error, 0u);
      Op& op = it->second;
      if (op.type == kCmdRead) {
        ASSERT_EQ(r->data.size(), op.len);
        ASSERT_TRUE(std::equal(r->data.begin(), r->data.end(), model.begin() + op.offset))
            << "read at " << op.offset << " +" << op.len << " differs from the model";
      } else if (op.type == kCmdWrite) {
        std::copy(op.data.begin(), op.data.end(), model.begin() + op.offset);
      } else if (op.type == kCmdTrim || op.type == kCmdWriteZeroes) {
        std::fill_n(model.begin() + op.offset, op.len, std::byte{0});
      }
      ops.erase(it);
    }
  }
}

TEST_F(NbdServerTest, RandomizedIoMatchesAModel) {
  start();
  for (const bool structured : {false, true}) {
    SCOPED_TRACE(structured ? "structured replies" : "simple replies");
    NbdTestClient c;
    ASSERT_TRUE(c.connect_unix(server_->path()));
    ASSERT_TRUE(c.handshake("", structured));
    EXPECT_EQ(c.size(), kVdBytes);
    EXPECT_EQ(c.flags() & kFlagSendDf, structured ? kFlagSendDf : 0);
    random_io(c, model_, structured ? 2 : 1, 60);
    ASSERT_TRUE(c.send_request(kCmdDisc, 0, 0, 0, 0));
    EXPECT_TRUE(c.sees_eof());
  }
  expect_array_matches_model();
}

// Writes on one connection are seen by reads on another once answered (CAN_MULTI_CONN).
TEST_F(NbdServerTest, TwoConnectionsShareTheExport) {
  start();
  NbdTestClient a, b;
  ASSERT_TRUE(a.connect_unix(server_->path()) && a.handshake("vd0", true));
  ASSERT_TRUE(b.connect_unix(server_->path()) && b.handshake("vd0", false));
  const auto data = random_bytes(64 * 1024, 9);
  ASSERT_TRUE(a.send_request(kCmdWrite, 0, 1, 128 * 1024, 64 * 1024, data));
  ASSERT_EQ(a.recv_reply([](auto) { return 0u; })->error, 0u);
  ASSERT_TRUE(b.send_request(kCmdFlush, 0, 2, 0, 0));
  ASSERT_EQ(b.recv_reply([](auto) { return 0u; })->error, 0u);
  ASSERT_TRUE(b.send_request(kCmdRead, 0, 3, 128 * 1024, 64 * 1024));
  auto r = b.recv_reply([](auto) { return 64u * 1024; });
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->data, data);
  std::copy(data.begin(), data.end(), model_.begin() + 128 * 1024);
  expect_array_matches_model();
}

TEST_F(NbdServerTest, BadRequestsGetTheirErrorsAndTheConnectionGoesOn) {
  start(exports_of(export_of(*array_), export_of(*array_, "ro", true)));
  for (const bool structured : {false, true}) {
    NbdTestClient c;
    ASSERT_TRUE(c.connect_unix(server_->path()));
    ASSERT_TRUE(c.handshake("vd0", structured));
    auto expect_error = [&](std::uint16_t type, std::uint16_t flags, std::uint64_t off,
                            std::uint32_t len, std::uint32_t error,
                            std::span<const std::byte> payload = {}) {
      ASSERT_TRUE(c.send_request(type, flags, 77, off, len, payload));
      auto r = c.recv_reply([](auto) { return 0u; });
      ASSERT_TRUE(r.has_value());
      EXPECT_EQ(r->handle, 77u);
      EXPECT_EQ(r->error, error) << "type " << type << " off " << off << " len " << len;
    };
    const std::vector<std::byte> junk(4096, std::byte{0xEE});
    expect_error(kCmdRead, 0, kVdBytes, 512, kErrInval);
    expect_error(kCmdRead, 0, ~0ull - 511, 1024, kErrInval);
    expect_error(kCmdTrim, 0, kVdBytes - 512, 1024, kErrInval);
    expect_error(kCmdWrite, 0, kVdBytes - 512, 4096, kErrNoSpc, junk);  // payload consumed
    expect_error(kCmdWriteZeroes, 0, kVdBytes, 512, kErrNoSpc);
    expect_error(kCmdRead, 0, 100, 512, kErrInval);
    expect_error(kCmdWrite, 0, 0, 1000, kErrInval, std::span(junk).first(1000));
    expect_error(kCmdRead, 0, 0, kMaxPayload + 4096, kErrOverflow);
    expect_error(kCmdCache, 0, 0, 4096, kErrInval);
    expect_error(kCmdBlockStatus, 0, 0, 4096, kErrInval);
    expect_error(200, 0, 0, 4096, kErrInval);
    expect_error(kCmdWrite, kCmdFlagNoHole, 0, 4096, kErrInval, junk);
    expect_error(kCmdFlush, 0, 4096, 0, kErrInval);
    // Still in step: a good read of what the model holds.
    random_io(c, model_, structured ? 11 : 12, 3);
  }
  NbdTestClient ro;
  ASSERT_TRUE(ro.connect_unix(server_->path()) && ro.handshake("ro", true));
  EXPECT_NE(ro.flags() & kFlagReadOnly, 0u);
  const std::vector<std::byte> junk(4096, std::byte{0xEE});
  ASSERT_TRUE(ro.send_request(kCmdWrite, 0, 5, 0, 4096, junk));
  EXPECT_EQ(ro.recv_reply([](auto) { return 0u; })->error, kErrPerm);
  ASSERT_TRUE(ro.send_request(kCmdTrim, 0, 6, 0, 4096));
  EXPECT_EQ(ro.recv_reply([](auto) { return 0u; })->error, kErrPerm);
  ASSERT_TRUE(ro.send_request(kCmdRead, 0, 7, 0, 4096));
  auto r = ro.recv_reply([](auto) { return 4096u; });
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->error, 0u);
  EXPECT_TRUE(std::equal(r->data.begin(), r->data.end(), model_.begin()));
  expect_array_matches_model();
}

// Hostile clients: the server survives each, keeps serving others, and no byte of the VD changes
// but those a completed write put there.
TEST_F(NbdServerTest, HostileClientsChangeNothing) {
  start();
  NbdTestClient good;
  ASSERT_TRUE(good.connect_unix(server_->path()) && good.handshake("vd0", true));
  random_io(good, model_, 21, 5);
  {  // Wrong request magic: closed without a reply.
    NbdTestClient c;
    ASSERT_TRUE(c.connect_unix(server_->path()) && c.handshake("", false));
    ASSERT_TRUE(c.send_bytes(std::vector<std::byte>(28, std::byte{0x41})));
    EXPECT_TRUE(c.sees_eof());
  }
  {  // A 4 GiB write: EOVERFLOW, then closed; its data is never read.
    NbdTestClient c;
    ASSERT_TRUE(c.connect_unix(server_->path()) && c.handshake("", false));
    ASSERT_TRUE(c.send_request(kCmdWrite, 0, 3, 0, 0xfffffe00u));
    auto r = c.recv_reply([](auto) { return 0u; });
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->error, kErrOverflow);
    EXPECT_TRUE(c.sees_eof());
  }
  {  // Disconnects mid-write: header and half the payload, then gone.
    NbdTestClient c;
    ASSERT_TRUE(c.connect_unix(server_->path()) && c.handshake("", true));
    const auto half = random_bytes(32 * 1024, 5);
    ASSERT_TRUE(c.send_request(kCmdWrite, 0, 4, 1 << 20, 64 * 1024, half));
  }
  {  // Many reads in flight, then gone without reading a reply.
    NbdTestClient c;
    ASSERT_TRUE(c.connect_unix(server_->path()) && c.handshake("", false));
    for (std::uint64_t i = 0; i < 40; ++i)
      ASSERT_TRUE(c.send_request(kCmdRead, 0, i, (i * 65536) % kVdBytes, 65536));
  }
  {  // Garbage instead of a handshake.
    NbdTestClient c;
    ASSERT_TRUE(c.connect_unix(server_->path()));
    ASSERT_TRUE(c.send_bytes(std::vector<std::byte>(100, std::byte{0xff})));
    EXPECT_TRUE(c.sees_eof());
  }
  // The first client carries on, and a new one is served.
  random_io(good, model_, 22, 5);
  NbdTestClient late;
  ASSERT_TRUE(late.connect_unix(server_->path()) && late.handshake("vd0", false));
  random_io(late, model_, 23, 5);
  expect_array_matches_model();
}

// stop() with requests in flight: each connection answers what it took, then closes.
TEST_F(NbdServerTest, StopAnswersRequestsInFlight) {
  start();
  NbdTestClient c;
  ASSERT_TRUE(c.connect_unix(server_->path()) && c.handshake("", false));
  const auto data = random_bytes(256 * 1024, 3);
  for (std::uint64_t i = 0; i < 8; ++i)
    ASSERT_TRUE(c.send_request(kCmdWrite, 0, i, i * 256 * 1024, 256 * 1024, data));
  // The first reply shows the server has started taking them.
  auto first = c.recv_reply([](auto) { return 0u; });
  ASSERT_TRUE(first.has_value());
  std::thread stopper([&] { server_->stop(); });
  std::size_t replies = 1;
  while (c.recv_reply([](auto) { return 0u; }).has_value())
    ++replies;
  stopper.join();
  EXPECT_GE(replies, 1u);
  EXPECT_LE(replies, 8u);
  // Whatever was answered is on the array; answered or not, every write was whole or absent.
  const auto bytes = array_->read(0, 8 * 256 * 1024);
  for (std::size_t i = 0; i < 8; ++i) {
    const auto* p = bytes.data() + i * 256 * 1024;
    const bool whole = std::equal(data.begin(), data.end(), p);
    const bool absent =
        std::all_of(p, p + data.size(), [](std::byte b) { return b == std::byte{0}; });
    EXPECT_TRUE(whole || absent) << "write " << i << " torn";
  }
}

// stop() while a reply waits on a socket the client never reads (an 8 MiB READ over a unix
// socket): the connection gets stop_timeout to send it, then is closed and the server finishes.
// Hung on main f1b45f8 (the sendmsg waited for the client forever; here the client's close after
// 10 s ends it).
TEST_F(NbdServerTest, StopClosesAConnectionThatNeverReadsItsReply) {
  NbdServerOptions o;
  o.stop_timeout = std::chrono::milliseconds(300);
  start(exports_of(export_of(*array_)), o);
  NbdTestClient c;
  ASSERT_TRUE(c.connect_unix(server_->path()) && c.handshake("", false));
  ASSERT_TRUE(c.send_request(kCmdRead, 0, 1, 0, static_cast<std::uint32_t>(kVdBytes)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the reply fills the socket
  std::promise<void> stopped;
  auto done = stopped.get_future();
  const auto t0 = std::chrono::steady_clock::now();
  std::thread stopper([&] {
    server_->stop();
    stopped.set_value();
  });
  const bool in_time = done.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  const auto took = std::chrono::steady_clock::now() - t0;
  if (!in_time) c.close();  // ends the send, so that the test fails instead of hanging
  stopper.join();
  EXPECT_TRUE(in_time) << "stop() did not return within 10 s";
  EXPECT_GE(took, std::chrono::milliseconds(250)) << "closed before its stop_timeout";
  // The server closed the connection: what the client reads ends (before the whole reply).
  if (in_time) {
    EXPECT_TRUE(c.sees_eof());
  }
}

TEST_F(NbdServerTest, ListenersUnixMode0600AndTcp) {
  NbdServerOptions o;
  o.tcp = true;
  o.tcp_port = 0;
  start(exports_of(export_of(*array_)), o);
  struct stat st {};
  ASSERT_EQ(::stat(server_->path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_NE(server_->port(), 0);
  NbdTestClient c;
  ASSERT_TRUE(c.connect_tcp(server_->port()));
  ASSERT_TRUE(c.handshake("vd0", true));
  random_io(c, model_, 31, 10);
  // A second server on the same live socket path is refused.
  NbdServerOptions again;
  again.unix_path = server_->path();
  ServerThread other(exports_of(export_of(*array_)), again);
  EXPECT_EQ(other.status().code(), Errc::kBusy);
  expect_array_matches_model();
  EXPECT_NE(::access(array_->files.dir.file("nbd.sock").c_str(), F_OK), 0);  // removed at stop
}

}  // namespace
}  // namespace graid::testing
