// The drive health monitor (graidd/pd_health.h) with a fake log reader: one read per
// controller, a Critical Warning bit that appears raises one critical event and its clearing one
// info event, the same log twice raises nothing, and PDs that are not NVMe say why.
#include "graidd/pd_health.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <mutex>

#include "graidd/event_log.h"
#include "temp_dir.h"

namespace graid::testing {
namespace {

using namespace graid::daemon;
using namespace std::chrono_literals;

// Logs by path, and how often each was read.
struct FakeDrives {
  std::mutex mu;
  std::map<std::string, NvmeHealth> logs;
  std::map<std::string, int> reads;
  Result<NvmeHealth> read(const std::string& path) {
    std::lock_guard g(mu);
    ++reads[path];
    auto it = logs.find(path);
    if (it == logs.end()) return make_error(Errc::kUnsupported, "{}: not an NVMe device", path);
    return it->second;
  }
  void set_warning(const std::string& path, std::uint8_t bits) {
    std::lock_guard g(mu);
    logs[path].critical_warning = bits;
  }
};

std::vector<Event> of_kind(const EventLog& log, const std::string& kind) {
  std::vector<Event> out;
  for (const Event& e : log.since(0).events)
    if (e.kind == kind) out.push_back(e);
  return out;
}

TEST(PdHealthTest, AWarningBitRaisesOneEventAndItsClearingAnother) {
  EventLog log;
  FakeDrives drives;
  drives.logs["/dev/nvme1n1"].temperature_kelvin = 310;
  drives.logs["/dev/nvme1n1"].available_spare = 100;
  // nvme1n1 and nvme1n2 are namespaces of one controller; nvme2n1 of another.
  drives.logs["/dev/nvme1n2"] = drives.logs["/dev/nvme1n1"];
  drives.logs["/dev/nvme2n1"] = drives.logs["/dev/nvme1n1"];
  HealthMonitor monitor(
      log, 1h, [&](const std::string& p) { return drives.read(p); },
      [](const std::string& p) { return p.substr(5, 5); });  // "nvme1", "nvme2"
  monitor.set_targets({{1, "/dev/nvme1n1", 0u}, {2, "/dev/nvme1n2", 0u}, {3, "/dev/nvme2n1", 1u}});
  monitor.poll_now();
  auto h1 = monitor.health(1);
  ASSERT_TRUE(h1 && h1->available);
  EXPECT_EQ(h1->controller, "nvme1");
  EXPECT_EQ(h1->log.temperature_kelvin, 310);
  ASSERT_TRUE(monitor.health(2) && monitor.health(2)->available);
  {
    std::lock_guard g(drives.mu);
    EXPECT_EQ(drives.reads["/dev/nvme1n2"], 0) << "one read per controller";
  }
  EXPECT_TRUE(of_kind(log, "pd_health_critical").empty());

  drives.set_warning("/dev/nvme1n1", 0x04);
  monitor.poll_now();
  monitor.poll_now();  // the same log again: nothing new
  auto critical = of_kind(log, "pd_health_critical");
  ASSERT_EQ(critical.size(), 1u);
  EXPECT_EQ(critical[0].severity, Severity::kCritical);
  EXPECT_EQ(critical[0].pd_id, 1u);
  EXPECT_EQ(critical[0].dg_id, 0u);
  EXPECT_NE(critical[0].message.find("NVM subsystem reliability degraded"), std::string::npos)
      << critical[0].message;
  EXPECT_NE(critical[0].message.find("pd 1, pd 2"), std::string::npos) << critical[0].message;
  EXPECT_EQ(monitor.health(2)->log.critical_warning, 0x04);

  // Another bit: one more event, naming only the new one.
  drives.set_warning("/dev/nvme1n1", 0x05);
  monitor.poll_now();
  critical = of_kind(log, "pd_health_critical");
  ASSERT_EQ(critical.size(), 2u);
  EXPECT_NE(critical[1].message.find("available spare below threshold"), std::string::npos);
  EXPECT_EQ(critical[1].message.find("reliability"), std::string::npos) << critical[1].message;

  drives.set_warning("/dev/nvme1n1", 0);
  monitor.poll_now();
  monitor.poll_now();
  const auto cleared = of_kind(log, "pd_health_cleared");
  ASSERT_EQ(cleared.size(), 1u);
  EXPECT_EQ(cleared[0].severity, Severity::kInfo);
  EXPECT_EQ(of_kind(log, "pd_health_critical").size(), 2u);
  EXPECT_TRUE(monitor.health(3) && monitor.health(3)->available);
}

TEST(PdHealthTest, DrivesThatAreNotNvmeSayWhyAndGoneTargetsAreForgotten) {
  EventLog log;
  FakeDrives drives;
  TempDir dir;
  const std::string file = dir.file("pd0");
  std::ofstream(file) << "x";
  HealthMonitor monitor(
      log, 1h, [&](const std::string& p) { return drives.read(p); },
      [](const std::string& p) { return p; });
  monitor.set_targets({{0, file, std::nullopt}, {5, "/dev/sda", std::nullopt}});
  monitor.poll_now();
  ASSERT_TRUE(monitor.health(0));
  EXPECT_FALSE(monitor.health(0)->available);
  EXPECT_EQ(monitor.health(0)->reason, "a file, not an NVMe drive");
  {
    std::lock_guard g(drives.mu);
    EXPECT_EQ(drives.reads[file], 0) << "a file is not asked";
  }
  ASSERT_TRUE(monitor.health(5));
  EXPECT_EQ(monitor.health(5)->reason, "not an NVMe drive");
  monitor.set_targets({{5, "/dev/sda", std::nullopt}});
  monitor.poll_now();
  EXPECT_FALSE(monitor.health(0));
}

TEST(PdHealthTest, TheIntervalReadsAgainByItself) {
  EventLog log;
  FakeDrives drives;
  drives.logs["/dev/nvme3n1"] = {};
  HealthMonitor monitor(
      log, 50ms, [&](const std::string& p) { return drives.read(p); },
      [](const std::string& p) { return p; });
  monitor.set_targets({{7, "/dev/nvme3n1", std::nullopt}});
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard g(drives.mu);
      if (drives.reads["/dev/nvme3n1"] >= 3) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  std::lock_guard g(drives.mu);
  EXPECT_GE(drives.reads["/dev/nvme3n1"], 3);
}

}  // namespace
}  // namespace graid::testing
