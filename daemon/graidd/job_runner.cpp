#include "graidd/job_runner.h"

#include <spdlog/spdlog.h>

#include "graidd/job_pace.h"
#include "graidd/job_progress.h"

namespace graid::daemon {

JobRunner::JobRunner(Array& array, std::uint32_t dg_id)
    : array_(array), dg_id_(dg_id), thread_([this] { loop(); }) {}

JobRunner::~JobRunner() {
  stop();
}

void JobRunner::wake(bool member_failed) {
  {
    MutexLock lock(mutex_);
    woken_ = true;
    // The rebuild goes first: a check running gives way (check_wanted_ stays set, so it goes on
    // from its position afterwards).
    if (member_failed && check_running_) check_stop_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void JobRunner::stop() {
  {
    MutexLock lock(mutex_);  // so the thread cannot miss it between its check and its wait
    stop_.store(true, std::memory_order_release);
    check_stop_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status JobRunner::start_check(bool repair) {
  {
    MutexLock lock(mutex_);
    if (check_wanted_) return make_error(Errc::kBusy, "a check is running already");
    check_wanted_ = true;
    check_repair_ = repair;
    check_error_.clear();
    woken_ = true;
  }
  cv_.notify_all();
  return Status::ok();
}

bool JobRunner::stop_check() {
  UniqueLock lock(mutex_);
  const bool was = check_wanted_;
  check_wanted_ = false;
  if (check_running_) check_stop_.store(true, std::memory_order_release);
  while (check_running_)
    lock.wait(check_cv_);
  return was;
}

CheckStatus JobRunner::check_status() const {
  CheckStatus out;
  bool running = false;
  std::uint64_t started_offset = 0;
  std::chrono::steady_clock::time_point started_at;
  {
    MutexLock lock(mutex_);
    out.running = check_wanted_ || check_running_;
    out.repair = check_repair_;
    out.last = check_last_;
    out.last_error = check_error_;
    running = check_running_;
    started_offset = check_started_offset_;
    started_at = check_started_at_;
  }
  if (!running) return out;
  const JobProgress p =
      job_progress(array_.member_data_bytes(), array_.check_progress().value_or(started_offset),
                   started_offset, started_at);
  out.percent = p.percent;
  out.bytes_per_second = p.bytes_per_second;
  out.eta_seconds = p.eta_seconds;
  return out;
}

void JobRunner::run_check() {
  bool repair = false;
  {
    MutexLock lock(mutex_);
    if (!check_wanted_ || stop_.load(std::memory_order_acquire)) return;
    // Stripes not yet re-synced or initialised would be false mismatches, and a member being
    // rebuilt is not yet checkable: the check waits for those (they wake this loop when done).
    if (array_.resync_progress() || array_.init_progress() || !array_.rebuilding_members().empty())
      return;
    check_running_ = true;
    check_stop_.store(false, std::memory_order_release);
    repair = check_repair_;
    check_started_offset_ = array_.check_progress().value_or(0);
    check_started_at_ = std::chrono::steady_clock::now();
  }
  CheckControl control;
  control.stop = &check_stop_;
  control.repair = repair;
  pace_by_setting(control, array_, &ArraySettings::check_speed);
  auto report = array_.check(control);
  {
    MutexLock lock(mutex_);
    check_running_ = false;
    if (!report.is_ok()) {
      check_wanted_ = false;
      check_error_ = report.status().message();
      spdlog::error("dg {}: check failed: {}", dg_id_, check_error_);
    } else if (report->finished || !check_wanted_ || stop_.load(std::memory_order_acquire)) {
      // Finished, or stopped by stop_check() or stop() (a daemon stop leaves it pending on
      // disk: the next start goes on with it).
      check_wanted_ = false;
      check_last_ = *report;
    }
    // Otherwise a member failed: it stays wanted and goes on after the rebuild.
  }
  check_cv_.notify_all();
}

RebuildStatus JobRunner::status() const {
  RebuildStatus out;
  std::uint64_t started_offset = 0;
  std::chrono::steady_clock::time_point started_at;
  {
    MutexLock lock(mutex_);
    out.running = running_;
    out.member = member_;
    out.last_error = last_error_;
    started_offset = started_offset_;
    started_at = started_at_;
  }
  if (!out.running) return out;
  auto slot = array_.member_slot(out.member);
  if (!slot.is_ok() || slot->state != MemberSlotState::kRebuilding) return out;
  const JobProgress p =
      job_progress(array_.member_data_bytes(), slot->rebuild_offset, started_offset, started_at);
  out.percent = p.percent;
  out.bytes_per_second = p.bytes_per_second;
  out.eta_seconds = p.eta_seconds;
  return out;
}

InitStatus JobRunner::pending_status(const PendingJob& job, std::uint64_t total,
                                     std::uint64_t done) {
  InitStatus out;
  out.pending = true;
  out.running = job.running;
  out.paused = job.paused;
  const JobProgress p = job.running
                            ? job_progress(total, done, job.started_offset, job.started_at)
                            : job_progress(total, done, done, std::chrono::steady_clock::now());
  out.percent = p.percent;
  out.bytes_per_second = p.bytes_per_second;
  out.eta_seconds = p.eta_seconds;
  return out;
}

PendingJob JobRunner::job_copy(PendingJob JobRunner::*job) const {
  MutexLock lock(mutex_);
  return this->*job;
}

void JobRunner::begin_run(PendingJob JobRunner::*job, std::uint64_t done) {
  MutexLock lock(mutex_);
  PendingJob& j = this->*job;
  j.running = true;
  j.started_offset = done;
  j.started_at = std::chrono::steady_clock::now();
}

InitStatus JobRunner::init_status() const {
  const auto done = array_.init_progress();
  if (!done) return {};
  return pending_status(job_copy(&JobRunner::init_), array_.member_data_bytes(), *done);
}

InitStatus JobRunner::resync_status() const {
  const auto progress = array_.resync_progress();
  if (!progress) return {};
  return pending_status(job_copy(&JobRunner::resync_), progress->total, progress->done);
}

InitStatus JobRunner::replace_status() const {
  const auto progress = array_.replace_progress();
  if (!progress) return {};
  return pending_status(job_copy(&JobRunner::replace_), progress->total_bytes,
                        progress->copied_bytes);
}

void JobRunner::run_resync() {
  const auto from = array_.resync_progress();
  if (!from) return;
  begin_run(&JobRunner::resync_, from->done);
  InitControl control;
  control.stop = &stop_;
  pace_by_setting(control, array_, &ArraySettings::resync_speed);
  auto done = array_.resync(control);
  MutexLock lock(mutex_);
  resync_.running = false;
  if (!done.is_ok()) {
    resync_.paused = done.status().message();
    spdlog::error("dg {}: re-sync failed: {}", dg_id_, resync_.paused);
  } else {
    resync_.paused = done->paused;
    if (done->finished) spdlog::info("dg {}: re-sync finished", dg_id_);
  }
}

void JobRunner::run_init() {
  const auto from = array_.init_progress();
  if (!from || array_.health() != ArrayHealth::kOptimal) return;
  begin_run(&JobRunner::init_, *from);
  InitControl control;
  control.stop = &stop_;
  pace_by_setting(control, array_, &ArraySettings::init_speed);
  auto done = array_.initialise(control);
  MutexLock lock(mutex_);
  init_.running = false;
  if (!done.is_ok()) {
    init_.paused = done.status().message();
    spdlog::error("dg {}: initialisation failed: {}", dg_id_, init_.paused);
  } else {
    init_.paused = done->paused;
    if (done->finished) spdlog::info("dg {}: initialisation finished", dg_id_);
  }
}

void JobRunner::run_replace() {
  const auto from = array_.replace_progress();
  if (!from) return;
  begin_run(&JobRunner::replace_, from->copied_bytes);
  RebuildControl control;
  control.stop = &stop_;
  pace_by_setting(control, array_, &ArraySettings::rebuild_speed);
  auto done = array_.replace(control);
  MutexLock lock(mutex_);
  replace_.running = false;
  replace_.paused = done.is_ok() ? std::string() : done.status().message();
  if (!done.is_ok()) {
    last_error_ = replace_.paused;
    spdlog::error("dg {}: hot replace failed: {}", dg_id_, last_error_);
  }
}

void JobRunner::take_spares() {
  for (std::uint32_t m = 0; m < array_.member_count(); ++m) {
    auto slot = array_.member_slot(m);
    if (!slot.is_ok()) continue;
    if (slot->state != MemberSlotState::kFailed && slot->state != MemberSlotState::kRemoved)
      continue;
    Status st = array_.take_spare(m);
    if (st.is_ok()) {
      spdlog::info("dg {}: a hot spare took member slot {}", dg_id_, m);
    } else if (st.code() != Errc::kNotFound) {
      spdlog::warn("dg {}: no spare put into member slot {}: {}", dg_id_, m, st.message());
    }
  }
}

void JobRunner::loop() {
  for (;;) {
    {
      UniqueLock lock(mutex_);
      while (!woken_ && !stop_.load(std::memory_order_acquire))
        lock.wait(cv_);
      woken_ = false;
    }
    if (stop_.load(std::memory_order_acquire)) return;
    run_resync();
    if (stop_.load(std::memory_order_acquire)) return;
    take_spares();
    const auto members = array_.rebuilding_members();
    if (members.empty()) {
      run_replace();
      run_init();   // a failure meanwhile wakes this loop again
      run_check();  // likewise
      continue;
    }
    {
      MutexLock lock(mutex_);
      running_ = true;
      member_ = members.front();
      started_offset_ = array_.member_slot(member_)->rebuild_offset;
      started_at_ = std::chrono::steady_clock::now();
      last_error_.clear();
    }
    RebuildControl control;
    control.stop = &stop_;
    pace_by_setting(control, array_, &ArraySettings::rebuild_speed);
    auto done = array_.rebuild(control);
    MutexLock lock(mutex_);
    running_ = false;
    if (!done.is_ok()) {
      last_error_ = done.status().message();
      spdlog::error("dg {}: rebuild failed: {}", dg_id_, last_error_);
      continue;  // waits for the next event (a new spare, a replacement)
    }
    woken_ = woken_ || *done;  // more members may wait (RAID6: two rebuilt one after the other)
  }
}

}  // namespace graid::daemon
