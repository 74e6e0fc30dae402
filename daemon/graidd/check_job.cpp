#include "graidd/check_job.h"

#include <spdlog/spdlog.h>

#include "graidd/job_pace.h"
#include "graidd/job_progress.h"

namespace graid::daemon {

Status CheckJob::start(bool repair) {
  {
    MutexLock lock(mutex_);
    if (running_) return make_error(Errc::kBusy, "a check is running already");
  }
  if (thread_.joinable()) thread_.join();  // the last run's thread, finished
  stop_.store(false, std::memory_order_release);
  {
    MutexLock lock(mutex_);
    running_ = true;
    repair_ = repair;
    started_offset_ = array_.check_progress().value_or(0);
    started_at_ = std::chrono::steady_clock::now();
    last_error_.clear();
  }
  thread_ = std::thread([this, repair] { run(repair); });
  return Status::ok();
}

bool CheckJob::stop() {
  bool was_running = false;
  {
    MutexLock lock(mutex_);
    was_running = running_;
  }
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  return was_running;
}

void CheckJob::run(bool repair) {
  CheckControl control;
  control.stop = &stop_;
  control.repair = repair;
  pace_by_setting(control, array_, &ArraySettings::check_speed);
  auto report = array_.check(control);
  MutexLock lock(mutex_);
  running_ = false;
  if (report.is_ok()) {
    last_ = *report;
  } else {
    last_error_ = report.status().message();
    spdlog::error("check of array '{}' failed: {}", array_.name(), last_error_);
  }
}

CheckStatus CheckJob::status() const {
  CheckStatus out;
  std::uint64_t started_offset = 0;
  std::chrono::steady_clock::time_point started_at;
  {
    MutexLock lock(mutex_);
    out.running = running_;
    out.repair = repair_;
    out.last = last_;
    out.last_error = last_error_;
    started_offset = started_offset_;
    started_at = started_at_;
  }
  if (!out.running) return out;
  const JobProgress p =
      job_progress(array_.member_data_bytes(), array_.check_progress().value_or(started_offset),
                   started_offset, started_at);
  out.percent = p.percent;
  out.bytes_per_second = p.bytes_per_second;
  out.eta_seconds = p.eta_seconds;
  return out;
}

}  // namespace graid::daemon
