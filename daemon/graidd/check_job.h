// A DG's consistency check (graidctl start|stop check): one Array::check() run on a thread of
// its own at the DG's check speed, its outcome kept for describe dg. Stopping it records the
// check's position in the superblocks; the next start (or graidd's next start, which resumes a
// pending check) goes on from there.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "graid/array.h"
#include "graid/thread_annotations.h"

namespace graid::daemon {

struct CheckStatus {
  bool running = false;
  bool repair = false;
  double percent = 0;                 // running: how far
  double bytes_per_second = 0;        // running: since this run started
  std::optional<double> eta_seconds;  // running: at that rate
  std::optional<CheckReport> last;    // the last run that ended
  std::string last_error;             // ... if it failed
};

class CheckJob {
 public:
  explicit CheckJob(Array& array) : array_(array) {}
  ~CheckJob() { stop(); }
  CheckJob(const CheckJob&) = delete;
  CheckJob& operator=(const CheckJob&) = delete;

  // Starts a check (kBusy while one runs).
  Status start(bool repair) EXCLUDES(mutex_);
  // Stops the check in progress and waits for it (its position is recorded). False when none
  // was running.
  bool stop() EXCLUDES(mutex_);
  CheckStatus status() const EXCLUDES(mutex_);

 private:
  void run(bool repair) EXCLUDES(mutex_);

  Array& array_;
  std::atomic<bool> stop_{false};
  mutable Mutex mutex_;
  bool running_ GUARDED_BY(mutex_) = false;
  bool repair_ GUARDED_BY(mutex_) = false;
  std::uint64_t started_offset_ GUARDED_BY(mutex_) = 0;
  std::chrono::steady_clock::time_point started_at_ GUARDED_BY(mutex_);
  std::optional<CheckReport> last_ GUARDED_BY(mutex_);
  std::string last_error_ GUARDED_BY(mutex_);
  std::thread thread_;  // only start() and stop() touch it, both on the control thread
};

}  // namespace graid::daemon
