// A DG's background jobs, run one at a time on one thread of the DG's own (md's sync thread):
// the re-sync an unclean stop left (Array::resync, at the DG's resync speed), hot spares put into
// failed roles and Array::rebuild() at the DG's rebuild speed, a pending hot replace
// (Array::replace), then, with every member in sync, a pending background initialisation
// (Array::initialise, init speed), and a consistency check someone asked for (graidctl start
// check, or one a stop cut short: Array::check, check speed). Woken by the array's events (a
// member failed, a spare was added, a replacement took a role) and by requests. A member failing
// while the check runs interrupts it (its position recorded) so the rebuild goes first, as md's
// recovery does; the check goes on afterwards from where it was. Stopped, every job's checkpoint
// recorded, before the array stops or goes.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "graid/array.h"
#include "graid/thread_annotations.h"

namespace graid::daemon {

// What `describe dg` shows of a rebuild.
struct RebuildStatus {
  bool running = false;
  std::uint32_t member = 0;           // the slot being rebuilt
  double percent = 0;                 // of that member's data area
  double bytes_per_second = 0;        // since this run started
  std::optional<double> eta_seconds;  // at that rate
  std::string last_error;             // the last run's failure, if it failed
};

// What `describe dg` shows of a background initialisation.
struct InitStatus {
  bool pending = false;  // not finished (running, paused or waiting)
  bool running = false;
  double percent = 0;                 // of the members' data area
  double bytes_per_second = 0;        // running: since this run started
  std::optional<double> eta_seconds;  // running: at that rate
  std::string paused;                 // why the last run stopped early (a failure, a stop)
};

// What `describe dg` shows of a consistency check.
struct CheckStatus {
  bool running = false;  // asked for and not ended (waiting while a rebuild goes first, or running)
  bool repair = false;
  double percent = 0;                 // running: how far
  double bytes_per_second = 0;        // running: since this run started
  std::optional<double> eta_seconds;  // running: at that rate
  std::optional<CheckReport> last;    // the last run that ended
  std::string last_error;             // ... if it failed
};

// A job that may stay pending across runs (initialisation, re-sync): its last run.
struct PendingJob {
  bool running = false;
  std::uint64_t started_offset = 0;  // bytes done when this run started
  std::chrono::steady_clock::time_point started_at;
  std::string paused;  // why the last run stopped early
};

class JobRunner {
 public:
  JobRunner(Array& array, std::uint32_t dg_id);
  ~JobRunner();  // stop()
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Look for work (spares to put into failed roles, members to rebuild). Any thread.
  // `member_failed`: a member failed, so a check running now gives way to the rebuild.
  void wake(bool member_failed = false) EXCLUDES(mutex_);
  // Stops the job in progress (it records its checkpoint) and joins the thread. Idempotent.
  void stop() EXCLUDES(mutex_);
  // Asks for a check (kBusy while one is asked for or runs). It runs once nothing goes before it.
  Status start_check(bool repair) EXCLUDES(mutex_);
  // Stops the check asked for or running and waits until it is not running (its position is
  // recorded). False when none was.
  bool stop_check() EXCLUDES(mutex_);
  CheckStatus check_status() const EXCLUDES(mutex_);
  RebuildStatus status() const EXCLUDES(mutex_);
  InitStatus init_status() const EXCLUDES(mutex_);
  // The background re-sync after an unclean stop, in the same terms.
  InitStatus resync_status() const EXCLUDES(mutex_);
  // A hot replace's copy, in the same terms (pending while the array has one).
  InitStatus replace_status() const EXCLUDES(mutex_);

 private:
  void loop() EXCLUDES(mutex_);
  void take_spares();
  // `job`'s status with `done` of `total` bytes done (a copy taken under mutex_).
  static InitStatus pending_status(const PendingJob& job, std::uint64_t total, std::uint64_t done);
  // A copy of one of the PendingJob members, taken under mutex_.
  PendingJob job_copy(PendingJob JobRunner::*job) const EXCLUDES(mutex_);
  // Marks one of them running from `done` bytes, now.
  void begin_run(PendingJob JobRunner::*job, std::uint64_t done) EXCLUDES(mutex_);
  void run_init() EXCLUDES(mutex_);
  // A re-sync after an unclean stop (Array::resync), at the DG's resync speed, before anything
  // else: a rebuild or a copy through stripes not yet re-synced would carry their stale parity.
  void run_resync() EXCLUDES(mutex_);
  // A hot replace pending (Array::start_replace): its copy and swap, at the rebuild speed, once
  // no member needs a rebuild.
  void run_replace() EXCLUDES(mutex_);
  // A check asked for, unless something else needs the thread first.
  void run_check() EXCLUDES(mutex_);

  Array& array_;
  const std::uint32_t dg_id_;
  std::atomic<bool> stop_{false};
  mutable Mutex mutex_;
  std::condition_variable cv_;
  bool woken_ GUARDED_BY(mutex_) = true;  // look once at start
  bool running_ GUARDED_BY(mutex_) = false;
  std::uint32_t member_ GUARDED_BY(mutex_) = 0;
  std::uint64_t started_offset_ GUARDED_BY(mutex_) = 0;
  std::chrono::steady_clock::time_point started_at_ GUARDED_BY(mutex_);
  std::string last_error_ GUARDED_BY(mutex_);
  PendingJob init_ GUARDED_BY(mutex_);
  PendingJob resync_ GUARDED_BY(mutex_);
  PendingJob replace_ GUARDED_BY(mutex_);
  // The check: asked for (and not ended), running now, how, and its last outcome. check_stop_
  // ends a run: stop(), stop_check(), or a member failing (then check_wanted_ stays set).
  std::atomic<bool> check_stop_{false};
  std::condition_variable check_cv_;  // check_running_ went false
  bool check_wanted_ GUARDED_BY(mutex_) = false;
  bool check_running_ GUARDED_BY(mutex_) = false;
  bool check_repair_ GUARDED_BY(mutex_) = false;
  std::uint64_t check_started_offset_ GUARDED_BY(mutex_) = 0;
  std::chrono::steady_clock::time_point check_started_at_ GUARDED_BY(mutex_);
  std::optional<CheckReport> check_last_ GUARDED_BY(mutex_);
  std::string check_error_ GUARDED_BY(mutex_);
  std::thread thread_;  // last: starts once the rest exists
};

}  // namespace graid::daemon
