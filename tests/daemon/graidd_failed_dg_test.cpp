// A DG that fails while running, brought back with edit dg force_online once its members are
// back. The members are loop devices over files, so that a member can really fail under I/O (its
// loop device shrunk below the data, as a drive gone bad) and come back (its saved contents
// restored and the device grown again). Needs root and loop devices; skipped otherwise.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "graidd_harness.h"
#include "nbd_harness.h"

namespace graid::testing {
namespace {

using nlohmann::json;

// Loop devices over files of dir, detached at the end.
class LoopDevices {
 public:
  ~LoopDevices() {
    for (const auto& dev : devices_)
      (void)run_tool("losetup -d " + dev);
  }
  // The new device's path, or "" (with the reason in `error`).
  std::string attach(const std::string& file) {
    const ToolRun r = run_tool("losetup -f --show " + file);
    if (r.status != 0) {
      error = r.output;
      return "";
    }
    std::string dev = r.output.substr(0, r.output.find('\n'));
    devices_.push_back(dev);
    files_.push_back(file);
    return dev;
  }
  // Sets the loop device's size from its file again.
  bool resize(std::size_t i) { return run_tool("losetup -c " + devices_[i]).status == 0; }
  const std::string& file(std::size_t i) const { return files_[i]; }
  std::string error;

 private:
  std::vector<std::string> devices_;
  std::vector<std::string> files_;
};

// RAID5 over four loop devices; fio writes through NBD; two members then fail under I/O, and the
// DG shows failed. force_online without --confirm says what it would do and changes nothing, and
// while a VD is exported it is refused. Once the members' devices are back and the VD unexported,
// --confirm stops the DG and assembles it again forced (the member that failed last taken back),
// and what fio wrote reads back.
TEST_F(GraiddTest, ForceOnlineRestartsADgThatFailedWhileRunning) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for loop devices";
  struct stat st {};
  if (::stat("/dev/loop-control", &st) != 0) GTEST_SKIP() << "no loop devices here";
  if (!have_tool("fio") || !have_tool("losetup")) GTEST_SKIP() << "needs fio and losetup";
  constexpr std::uint64_t kBytes = 64u << 20;
  LoopDevices loops;
  std::vector<std::string> args = {"create", "pd"};
  for (int i = 0; i < 4; ++i) {
    const std::string dev = loops.attach(make_pd_file(dir_, "loop" + std::to_string(i), kBytes));
    if (dev.empty()) GTEST_SKIP() << "losetup failed: " << loops.error;
    args.push_back(dev);
  }
  ok(args);
  ok({"create", "dg", "raid5", "0-3", "--strip", "16K", "--assume-clean"});
  ok({"create", "vd", "0", "--size", "24M"});
  const std::string sock = dir_.file("fio.sock");
  ok({"export", "vd", "0", "0", "--nbd", "unix:" + sock});
  const auto fio = [&](const std::string& extra) {
    return fio_over_nbd(nbd_uri(sock), 29, extra, 120);
  };
  ToolRun w = fio("--rw=randwrite");
  ASSERT_EQ(w.status, 0) << w.output;
  // What members 1 and 2 hold now, to bring back later.
  for (std::size_t i : {1u, 2u})
    ASSERT_EQ(run_tool("cp " + loops.file(i) + " " + loops.file(i) + ".saved").status, 0);

  // Both shrink to 1 MiB (their superblocks stay reachable, their data does not).
  for (std::size_t i : {1u, 2u}) {
    ASSERT_EQ(::truncate(loops.file(i).c_str(), 1 << 20), 0);
    ASSERT_TRUE(loops.resize(i));
  }
  // The same writes again (the same bytes): they fail on the shrunk members, which fails them
  // (a read error alone would be reconstructed, up to the member's read-error limit).
  (void)fio("--rw=randwrite");
  const json failed = wait_for("dg", "0", [](const json& j) { return j["state"] == "failed"; });
  ASSERT_EQ(failed["state"], "failed") << failed.dump();

  // The members come back.
  for (std::size_t i : {1u, 2u}) {
    // Into the same inode (the loop device holds it), then the device grown again.
    ASSERT_EQ(run_tool("cp " + loops.file(i) + ".saved " + loops.file(i)).status, 0);
    ASSERT_TRUE(loops.resize(i));
  }
  const json before = snapshot();
  const CtlRun asked = d_->ctl({"edit", "dg", "0", "force_online"});
  EXPECT_NE(asked.exit, 0);
  EXPECT_NE(describe(asked).find("--confirm"), std::string::npos) << describe(asked);
  EXPECT_NE(describe(asked).find("unexported first"), std::string::npos) << describe(asked);
  const CtlRun exported = d_->ctl({"edit", "dg", "0", "force_online", "--confirm"});
  EXPECT_NE(exported.exit, 0);
  EXPECT_NE(describe(exported).find("unexport"), std::string::npos) << describe(exported);
  EXPECT_EQ(snapshot(), before) << "refusals change nothing";

  ok({"unexport", "vd", "0", "0"});
  const json forced = ok({"edit", "dg", "0", "force_online", "--confirm"});
  EXPECT_EQ(forced["state"], "degraded") << forced.dump();
  ASSERT_TRUE(forced["forced"].is_array());
  EXPECT_FALSE(forced["forced"].empty()) << forced.dump();
  bool event = false;
  const json events = ok({"list", "event"})["events"];  // a copy: ok()'s result is a temporary
  for (const auto& e : events)
    event |= e["kind"] == "dg_forced_online" && e["dg_id"] == 0;
  EXPECT_TRUE(event) << events.dump(1);
  ok({"export", "vd", "0", "0", "--nbd", "unix:" + sock});
  const ToolRun v = fio("--rw=randwrite --verify_only=1");
  EXPECT_EQ(v.status, 0) << v.output;
  EXPECT_EQ(d_->stop(SIGTERM), 0);
}

}  // namespace
}  // namespace graid::testing
