#include "graidd/rebuild_job.h"

#include <spdlog/spdlog.h>

#include "graidd/job_pace.h"
#include "graidd/job_progress.h"

namespace graid::daemon {

RebuildJob::RebuildJob(Array& array, std::uint32_t dg_id)
    : array_(array), dg_id_(dg_id), thread_([this] { loop(); }) {}

RebuildJob::~RebuildJob() {
  stop();
}

void RebuildJob::wake() {
  {
    MutexLock lock(mutex_);
    woken_ = true;
  }
  cv_.notify_all();
}

void RebuildJob::stop() {
  {
    MutexLock lock(mutex_);  // so the thread cannot miss it between its check and its wait
    stop_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

RebuildStatus RebuildJob::status() const {
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

InitStatus RebuildJob::pending_status(const PendingJob& job, std::uint64_t total,
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

PendingJob RebuildJob::job_copy(PendingJob RebuildJob::*job) const {
  MutexLock lock(mutex_);
  return this->*job;
}

void RebuildJob::begin_run(PendingJob RebuildJob::*job, std::uint64_t done) {
  MutexLock lock(mutex_);
  PendingJob& j = this->*job;
  j.running = true;
  j.started_offset = done;
  j.started_at = std::chrono::steady_clock::now();
}

InitStatus RebuildJob::init_status() const {
  const auto done = array_.init_progress();
  if (!done) return {};
  return pending_status(job_copy(&RebuildJob::init_), array_.member_data_bytes(), *done);
}

InitStatus RebuildJob::resync_status() const {
  const auto progress = array_.resync_progress();
  if (!progress) return {};
  return pending_status(job_copy(&RebuildJob::resync_), progress->total, progress->done);
}

InitStatus RebuildJob::replace_status() const {
  const auto progress = array_.replace_progress();
  if (!progress) return {};
  return pending_status(job_copy(&RebuildJob::replace_), progress->total_bytes,
                        progress->copied_bytes);
}

void RebuildJob::run_resync() {
  const auto from = array_.resync_progress();
  if (!from) return;
  begin_run(&RebuildJob::resync_, from->done);
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

void RebuildJob::run_init() {
  const auto from = array_.init_progress();
  if (!from || array_.health() != ArrayHealth::kOptimal) return;
  begin_run(&RebuildJob::init_, *from);
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

void RebuildJob::run_replace() {
  const auto from = array_.replace_progress();
  if (!from) return;
  begin_run(&RebuildJob::replace_, from->copied_bytes);
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

void RebuildJob::take_spares() {
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

void RebuildJob::loop() {
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
      run_init();  // a failure meanwhile wakes this loop again
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
