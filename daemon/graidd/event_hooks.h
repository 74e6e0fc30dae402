// Alert hooks, as `mdadm --monitor --program`: graidd runs the administrator's program for every
// event of severity warning or worse (docs/monitoring.md, "Alert hooks").
//
// The program runs as `PROGRAM KIND DG [PD]` (DG is "-" for events of no DG; PD only for events
// of a PD), with the event in GRAID_EVENT_SEQ, _TIME, _SEVERITY, _KIND, _DG, _PD, _VD, _SLOT and
// _MESSAGE (those not concerned are unset) and GRAID_SOCKET naming graidd's control socket, so
// the hook can ask graidctl for more. One hook runs at a time, in event order, on a thread of
// its own; at most `max_queued` (64) events wait, and those beyond are counted, logged, and
// reported by an `events_lost` event once there is room again. A hook that has not exited after
// `timeout` (30 s) is killed with its whole process group (SIGKILL). The child starts in a
// process group of its own, with stdin /dev/null, stdout and stderr captured (the first 4 KiB
// are logged when the hook fails), no other descriptor of graidd's, the default signal mask and
// dispositions, and an OOM score adjustment of 0 (graidd's unit runs at -1000).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "graid/status.h"
#include "graid/thread_annotations.h"
#include "graidd/event.h"

namespace graid::daemon {

class EventLog;

struct EventHookOptions {
  std::string program;  // an absolute path to an executable regular file
  std::string socket;   // graidd's control socket, given to the hook as GRAID_SOCKET
  std::size_t max_queued = 64;
  std::chrono::milliseconds timeout{30'000};
};

struct EventHookStats {
  std::uint64_t ran = 0;        // hooks that exited 0
  std::uint64_t failed = 0;     // exited non-zero, killed by a signal, or could not start
  std::uint64_t timed_out = 0;  // of the failed, killed at the timeout
  std::uint64_t lost = 0;       // events that got no hook: the queue was full
};

class EventHooks {
 public:
  // Checks the program (absolute, a regular file, executable) and starts the hook thread; the
  // log's listener then queues every warning and critical event. kInvalidArgument names what is
  // wrong with the program.
  static Result<std::unique_ptr<EventHooks>> start(EventHookOptions options, EventLog& log);
  // Stops taking events, lets a running hook finish (within its timeout) and drops what waits
  // (logged).
  ~EventHooks();
  EventHooks(const EventHooks&) = delete;
  EventHooks& operator=(const EventHooks&) = delete;

  EventHookStats stats() const;
  const std::string& program() const noexcept { return options_.program; }

  struct Key {
    explicit Key() = default;
  };
  EventHooks(Key, EventHookOptions options, EventLog& log);

 private:
  // The log's listener (under the log's lock): queues the event, never blocks.
  void enqueue(const Event& e);
  void loop();
  // Runs the program for `e` and waits for it (or kills it at the timeout).
  void run_one(const Event& e);

  const EventHookOptions options_;
  EventLog& log_;
  mutable Mutex mutex_;
  std::condition_variable wake_;
  std::deque<Event> queue_ GUARDED_BY(mutex_);
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::uint64_t lost_unreported_ GUARDED_BY(mutex_) = 0;  // lost since the last events_lost
  EventHookStats stats_ GUARDED_BY(mutex_);
  std::thread thread_;
};

}  // namespace graid::daemon
