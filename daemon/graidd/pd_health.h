// Drive health: graidd reads each NVMe controller's SMART / Health Information log (Get Log Page
// 02h, graid/member.h) once per --health-interval (30 minutes, as smartd), on a thread of its
// own (an admin command to a sick drive may take the driver's whole admin timeout), and keeps
// what it read for `describe pd`, `list pd` and the metrics. A Critical Warning bit that appears
// raises one `pd_health_critical` event (critical), and bits that clear one
// `pd_health_cleared` (info); a log that stays the same raises nothing. docs/monitoring.md,
// "Drive health".
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "graid/member.h"
#include "graid/thread_annotations.h"

namespace graid::daemon {

class EventLog;

// A PD to watch: its path and DG (for events).
struct HealthTarget {
  std::uint32_t pd_id = 0;
  std::string path;
  std::optional<std::uint32_t> dg_id;
  bool operator==(const HealthTarget&) const = default;
};

struct PdHealth {
  bool available = false;
  std::string reason;      // why not, when not available
  std::string controller;  // the NVMe controller the log is from ("nvme1"), or the path
  NvmeHealth log;
  std::chrono::system_clock::time_point read_at;
};

class HealthMonitor {
 public:
  using Reader = std::function<Result<NvmeHealth>(const std::string& path)>;
  // The controller a PD's path belongs to (one log read per controller); by default the sysfs
  // device of the path's block or character device, else the path itself.
  using ControllerOf = std::function<std::string(const std::string& path)>;

  HealthMonitor(EventLog& log, std::chrono::milliseconds interval, Reader reader = read_nvme_health,
                ControllerOf controller_of = {});
  // Stops the thread (a read in progress finishes first).
  ~HealthMonitor();
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  // The PDs to watch (the registry's, on each refresh). New ones are read at once.
  void set_targets(std::vector<HealthTarget> targets);
  // What was last read for `pd_id`; nullopt before its first read.
  std::optional<PdHealth> health(std::uint32_t pd_id) const;
  // Reads every target now (and waits for it): the tests' clock.
  void poll_now();

 private:
  void loop();
  // One pass over the targets as they are now.
  void poll();

  EventLog& log_;
  const std::chrono::milliseconds interval_;
  const Reader reader_;
  const ControllerOf controller_of_;
  mutable Mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable polled_;
  std::vector<HealthTarget> targets_ GUARDED_BY(mutex_);
  bool targets_changed_ GUARDED_BY(mutex_) = false;
  bool poll_wanted_ GUARDED_BY(mutex_) = false;
  std::uint64_t polls_ GUARDED_BY(mutex_) = 0;
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::map<std::uint32_t, PdHealth> health_ GUARDED_BY(mutex_);
  // The Critical Warning byte last read per controller (only the poll thread touches it).
  std::map<std::string, std::uint8_t> warned_;
  std::thread thread_;
};

// The sysfs device of `path`'s block or character device (e.g. "nvme1" for /dev/nvme1n1 and
// /dev/ng1n1), or `path` itself when it has none.
std::string nvme_controller_of(const std::string& path);

}  // namespace graid::daemon
