#include "graidd/pd_health.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <filesystem>

#include "graidd/event_log.h"

namespace graid::daemon {

std::string nvme_controller_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !(S_ISBLK(st.st_mode) || S_ISCHR(st.st_mode))) return path;
  const std::string link =
      fmt::format("/sys/dev/{}/{}:{}/device", S_ISBLK(st.st_mode) ? "block" : "char",
                  major(st.st_rdev), minor(st.st_rdev));
  std::error_code ec;
  const auto target = std::filesystem::canonical(link, ec);
  if (ec) return path;
  return target.filename().string();
}

HealthMonitor::HealthMonitor(EventLog& log, std::chrono::milliseconds interval, Reader reader,
                             ControllerOf controller_of)
    : log_(log),
      interval_(interval),
      reader_(std::move(reader)),
      controller_of_(controller_of ? std::move(controller_of) : ControllerOf(nvme_controller_of)) {
  thread_ = std::thread([this] { loop(); });
}

HealthMonitor::~HealthMonitor() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void HealthMonitor::set_targets(std::vector<HealthTarget> targets) {
  {
    MutexLock lock(mutex_);
    if (targets == targets_) return;
    targets_ = std::move(targets);
    targets_changed_ = true;
  }
  wake_.notify_all();
}

std::optional<PdHealth> HealthMonitor::health(std::uint32_t pd_id) const {
  MutexLock lock(mutex_);
  const auto it = health_.find(pd_id);
  if (it == health_.end()) return std::nullopt;
  return it->second;
}

void HealthMonitor::poll_now() {
  UniqueLock lock(mutex_);
  const std::uint64_t target = polls_ + 1;
  poll_wanted_ = true;
  wake_.notify_all();
  while (polls_ < target && !stopping_)
    lock.wait(polled_);
}

void HealthMonitor::loop() {
  UniqueLock lock(mutex_);
  auto next = std::chrono::steady_clock::now();  // the first pass as soon as there are targets
  for (;;) {
    while (!stopping_ && !poll_wanted_ && !targets_changed_ &&
           (targets_.empty() || std::chrono::steady_clock::now() < next)) {
      if (targets_.empty())
        lock.wait(wake_);
      else
        lock.wait_until(wake_, next);
    }
    if (stopping_) return;
    const bool periodic = !poll_wanted_ && !targets_changed_;
    poll_wanted_ = false;
    targets_changed_ = false;
    lock.unlock();
    poll();
    lock.lock();
    ++polls_;
    polled_.notify_all();
    // A pass for changed targets does not move the periodic one.
    if (periodic || next <= std::chrono::steady_clock::now())
      next = std::chrono::steady_clock::now() + interval_;
  }
}

void HealthMonitor::poll() {
  std::vector<HealthTarget> targets;
  {
    MutexLock lock(mutex_);
    targets = targets_;
  }
  // One read per controller, for all its PDs.
  std::map<std::string, std::vector<const HealthTarget*>> by_controller;
  std::map<std::uint32_t, PdHealth> found;
  for (const HealthTarget& t : targets) {
    struct stat st {};
    if (::stat(t.path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      found[t.pd_id] = PdHealth{false, "a file, not an NVMe drive", t.path, {}, {}};
      continue;
    }
    by_controller[controller_of_(t.path)].push_back(&t);
  }
  for (const auto& [controller, pds] : by_controller) {
    const auto read = reader_(pds.front()->path);
    PdHealth h;
    h.controller = controller;
    h.read_at = std::chrono::system_clock::now();
    if (read.is_ok()) {
      h.available = true;
      h.log = *read;
    } else {
      h.reason = read.status().code() == Errc::kUnsupported ? "not an NVMe drive"
                                                            : read.status().message();
    }
    for (const HealthTarget* t : pds)
      found[t->pd_id] = h;
    if (!h.available) continue;
    std::string who;
    for (const HealthTarget* t : pds)
      who += fmt::format("{}pd {}", who.empty() ? "" : ", ", t->pd_id);
    const std::uint8_t before = warned_.contains(controller) ? warned_[controller] : 0;
    const std::uint8_t now = h.log.critical_warning;
    warned_[controller] = now;
    const std::uint8_t raised = now & static_cast<std::uint8_t>(~before);
    const std::uint8_t cleared = before & static_cast<std::uint8_t>(~now);
    if (raised != 0) {
      log_.add("pd_health_critical", pds.front()->dg_id, pds.front()->pd_id, std::nullopt,
               fmt::format("{} ({}): critical warning {:#04x}: {}", controller, who, now,
                           nvme_critical_warning_text(raised)));
    }
    if (cleared != 0) {
      log_.add(
          "pd_health_cleared", pds.front()->dg_id, pds.front()->pd_id, std::nullopt,
          fmt::format("{} ({}): cleared: {}; critical warning now {:#04x} ({})", controller, who,
                      nvme_critical_warning_text(cleared), now, nvme_critical_warning_text(now)));
    }
  }
  MutexLock lock(mutex_);
  health_ = std::move(found);
}

}  // namespace graid::daemon
