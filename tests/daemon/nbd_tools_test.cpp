// The NBD server against the real clients, over RAID5 and RAID6 arrays on tmpfs files: nbdinfo
// (size, name, flags), nbdcopy (a random file in and out again, compared), qemu-io (pattern
// writes and verified reads, unaligned ones included, which qemu turns into aligned
// read-modify-writes from the advertised block size), and fio's nbd engine (random writes with
// crc32c verification, then a verify-only pass), also with a member failed mid-run. Each test
// skips, saying so, when its tool is missing (Debian: libnbd-bin, qemu-utils, fio).
#include <fstream>
#include <iterator>

#include "nbd_harness.h"

namespace graid::testing {
namespace {

constexpr std::uint64_t kMemberBytes = 16u << 20;
constexpr std::uint64_t kVdBytes = 24u << 20;

class NbdToolsTest : public ::testing::TestWithParam<RaidLevel> {
 protected:
  void SetUp() override {
    const std::uint32_t members = GetParam() == RaidLevel::kRaid6 ? 5 : 4;
    array_ = std::make_unique<TestArray>(GetParam(), members, kMemberBytes, kVdBytes);
    ASSERT_NE(array_->array, nullptr);
    nbd::NbdServerOptions o;
    o.unix_path = array_->files.dir.file("nbd.sock");
    auto e = export_of(*array_, "vd0");
    e.description = "graid test VD";
    server_ = std::make_unique<ServerThread>(exports_of(std::move(e)), o);
    ASSERT_TRUE(server_->status().is_ok()) << server_->status().to_string();
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (array_ && array_->array) {
      EXPECT_EQ(*array_->array->count_inconsistent_stripes(), 0u);
    }
    server_.reset();
    array_.reset();
  }
  std::string file(const std::string& name) const { return array_->files.dir.file(name); }

  // fio with the nbd engine on the export; `extra` picks the workload.
  ToolRun fio(const std::string& extra) {
    return run_tool("fio --name=nbd --ioengine=nbd --uri='" + server_->uri() +
                        "' --bs=4k --size=16M --iodepth=16 --rw=randwrite --verify=crc32c"
                        " --verify_fatal=1 --verify_state_save=0 --randseed=7 " +
                        extra,
                    90);
  }

  std::unique_ptr<TestArray> array_;
  std::unique_ptr<ServerThread> server_;
};

#define REQUIRE_TOOL(name) \
  if (!have_tool(name))    \
  GTEST_SKIP() << name << " not installed (Debian: libnbd-bin, qemu-utils, fio)"

TEST_P(NbdToolsTest, NbdinfoSeesSizeNameAndFlags) {
  REQUIRE_TOOL("nbdinfo");
  const ToolRun r = run_tool("nbdinfo --json '" + server_->uri() + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* want :
       {"\"export-size\": 25165824", "\"is_read_only\": false", "\"can_flush\": true",
        "\"can_fua\": true", "\"can_trim\": true", "\"can_zero\": true", "\"can_multi_conn\": true",
        "\"description\": \"graid test VD\"", "\"block_size_minimum\": 512",
        "\"block_size_maximum\": 33554432"}) {
    EXPECT_NE(r.output.find(want), std::string::npos) << "no " << want << " in\n" << r.output;
  }
  const ToolRun list = run_tool("nbdinfo --list '" + server_->uri() + "'");
  ASSERT_EQ(list.status, 0) << list.output;
  EXPECT_NE(list.output.find("export=\"vd0\""), std::string::npos) << list.output;
}

TEST_P(NbdToolsTest, NbdcopyRoundTrip) {
  REQUIRE_TOOL("nbdcopy");
  const auto data = random_bytes(kVdBytes, 99);
  {
    std::ofstream f(file("in.img"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  }
  ToolRun r = run_tool("nbdcopy '" + file("in.img") + "' '" + server_->uri() + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_tool("nbdcopy '" + server_->uri() + "' '" + file("out.img") + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream f(file("out.img"), std::ios::binary);
  const std::vector<char> back((std::istreambuf_iterator<char>(f)),
                               std::istreambuf_iterator<char>());
  ASSERT_EQ(back.size(), data.size());
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
  // And through the array itself, not only through the server.
  const auto direct = array_->read(0, static_cast<std::uint32_t>(kVdBytes));
  EXPECT_EQ(direct, data);
}

TEST_P(NbdToolsTest, QemuIoPatterns) {
  REQUIRE_TOOL("qemu-io");
  const std::string cmds =
      "-c 'write -P 0xab 0 1M' -c 'write -P 0x5a 1M 64k' -c 'write -P 0x11 3000 5000'"
      " -c 'write -z 2M 128k' -c 'write -P 0x77 -f 4M 256k' -c 'flush'"
      " -c 'read -P 0xab 0 3000' -c 'read -P 0x11 3000 5000' -c 'read -P 0xab 8000 1040576'"
      " -c 'read -P 0x5a 1M 64k' -c 'read -P 0 2M 128k' -c 'read -P 0x77 4M 256k'"
      " -c 'discard 8M 1M' -c 'read -P 0 8M 1M'";
  const ToolRun r = run_tool("qemu-io -f raw " + cmds + " '" + server_->uri() + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("failed"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("error"), std::string::npos) << r.output;
}

TEST_P(NbdToolsTest, FioRandomWriteVerify) {
  REQUIRE_TOOL("fio");
  ToolRun r = fio("");
  ASSERT_EQ(r.status, 0) << r.output;
  r = fio("--verify_only=1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("verify: bad"), std::string::npos) << r.output;
}

// A member fails while fio writes: every write goes on (degraded), and every block verifies,
// during the run and in a second, verify-only pass that reads through reconstruction.
TEST_P(NbdToolsTest, FioVerifiesWithAMemberFailedMidRun) {
  REQUIRE_TOOL("fio");
  ToolRun r;
  std::thread writer([&] { r = fio("--size=24M"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(array_->array->fail_member(1, "test: failed mid-run").is_ok());
  writer.join();
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(array_->array->health(), ArrayHealth::kDegraded);
  r = fio("--size=24M --verify_only=1");
  ASSERT_EQ(r.status, 0) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Levels, NbdToolsTest,
                         ::testing::Values(RaidLevel::kRaid5, RaidLevel::kRaid6),
                         [](const auto& p) {
                           return p.param == RaidLevel::kRaid5 ? std::string("raid5")
                                                               : std::string("raid6");
                         });

}  // namespace
}  // namespace graid::testing
