// graidd's event log: the state changes `graidctl events` shows (PD added, member failed, DG
// degraded, resync finished, export started, ...), each with a severity (event.h).
//
// Kept on disk once open() has been called (event_file.h: the state dir's events.jsonl, synced
// before add() returns) and read back at start, so sequence numbers continue across restarts
// and a crash loses no event; the last kMaxEvents are kept in memory for queries. Without open()
// (unit tests) the log is in memory only.
//
// Thread-safe: arrays' notifier threads append, the control thread queries. wake_fd() becomes
// readable after each append (the control loop's long polls); a listener sees every event (the
// alert hooks).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graid/status.h"
#include "graid/thread_annotations.h"
#include "graidd/event.h"
#include "graidd/event_file.h"

namespace graid::daemon {

// The events kept in memory: the last 10,000 (documented in docs/daemon.md).
inline constexpr std::size_t kMaxEvents = 10000;

struct EventQuery {
  std::vector<Event> events;   // seq > since, oldest first
  std::uint64_t next_seq = 1;  // the seq the next event will get
  std::uint64_t dropped = 0;   // events after `since` no longer kept (before the oldest kept)
};

// What open() found on disk.
struct EventLogOpened {
  std::uint64_t events = 0;   // events read back
  std::uint64_t damaged = 0;  // lines skipped (EventFileContents)
  bool cut_tail = false;
};

class EventLog {
 public:
  explicit EventLog(std::size_t capacity = kMaxEvents);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Reads back and continues the log in `dir` (event_file.h). Call before the first add().
  Result<EventLogOpened> open(const std::string& dir, std::size_t rotate_bytes = kEventFileBytes);

  // Appends an event (its severity from severity_of(kind)), logs it at its level, and, where
  // the log is open, writes it to disk before returning; returns its seq.
  std::uint64_t add(std::string kind, std::optional<std::uint32_t> dg_id,
                    std::optional<std::uint32_t> pd_id, std::optional<std::uint32_t> vd_id,
                    std::string message);
  // The same for an event the caller filled in (slot, a severity of its own); seq and time are
  // the log's.
  std::uint64_t add(Event e);
  // Events with seq > since, at most `limit` of them (the oldest first).
  EventQuery since(std::uint64_t since, std::size_t limit = kMaxEvents) const;

  // Whether the log's last word on member `slot` of DG `dg_id` is that it failed (member_failed,
  // with no later member_back, member_replaced, rebuild_finished, replace_finished or
  // spare_added for that slot, nor dg_created or dg_deleted of the DG).
  bool says_member_failed(std::uint32_t dg_id, std::uint32_t slot) const;

  // An eventfd, readable after each add() (drain it before looking again).
  int wake_fd() const noexcept { return wake_fd_; }
  // Called with each event after it is kept, under the log's lock: keep it short (the alert
  // hooks queue it). Set before events flow, or from the thread that adds them.
  void set_listener(std::function<void(const Event&)> listener);

  // Appends that did not reach the disk (logged as errors; the events are kept in memory).
  std::uint64_t unsaved() const;
  // Events added since this log was made, by severity (info, warning, critical): the metrics'
  // graid_events_total.
  std::array<std::uint64_t, 3> added_by_severity() const;

 private:
  const std::size_t capacity_;
  int wake_fd_ = -1;
  mutable Mutex mutex_;
  std::unique_ptr<EventFile> file_ GUARDED_BY(mutex_);
  std::deque<Event> events_ GUARDED_BY(mutex_);
  std::uint64_t next_seq_ GUARDED_BY(mutex_) = 1;
  std::uint64_t unsaved_ GUARDED_BY(mutex_) = 0;
  std::array<std::uint64_t, 3> added_ GUARDED_BY(mutex_){};
  std::function<void(const Event&)> listener_ GUARDED_BY(mutex_);
};

}  // namespace graid::daemon
