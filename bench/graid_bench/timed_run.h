// The measurement harness shared by the array run and the raw baseline: N threads that set up,
// meet at a start line, run closed-loop until a deadline, and a measured window in between.
//
//   setup (rings, buffers) ─► start line ─► warm-up ─► measured window ─► drain (not counted)
//                                            [start,   measure_from,     end)
//
// Process CPU time (getrusage RUSAGE_SELF: every thread, io_uring's io-wq workers included) is
// sampled by the coordinating thread at measure_from and at end.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "graid/status.h"
#include "stats.h"

namespace graid::bench {

using Clock = std::chrono::steady_clock;

struct Window {
  Clock::time_point start;         // threads start issuing I/O
  Clock::time_point measure_from;  // completions from here on are counted
  Clock::time_point end;           // no new I/O from here on; completions after it are not counted

  bool counts(Clock::time_point t) const noexcept { return t >= measure_from && t < end; }
  // Whether a worker may issue more I/O at `now`: before the end, and not interrupted.
  bool open_at(Clock::time_point now) const noexcept;
};

// One thread's share of a run. Created, used and destroyed on its own thread.
class TimedWorker {
 public:
  virtual ~TimedWorker() = default;
  // Issues I/O from window.start, counts completions inside the window into `tally`, stops
  // issuing once !window.open_at(now) and returns when nothing is in flight.
  virtual Status run(const Window& window, ThreadTally& tally) = 0;
};

// Makes thread `index`'s worker, on that thread (so per-thread resources such as an io_uring are
// created where they are used). Setup errors come back as a Status and abort the run.
using WorkerFactory = std::function<Result<std::unique_ptr<TimedWorker>>(std::uint32_t index)>;

struct TimedRunConfig {
  std::uint32_t threads = 1;
  double warmup_seconds = 0;
  double seconds = 1;
};

// Runs `threads` workers over one window and returns the merged figures, or the first error any
// thread reported. Never throws; no exception leaves a worker thread.
Result<RunFigures> run_timed(const TimedRunConfig& config, const WorkerFactory& factory);

// User + system CPU seconds this process has used so far.
double process_cpu_seconds() noexcept;

}  // namespace graid::bench
