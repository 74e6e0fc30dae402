// graidd's event log: the state changes `graidctl list event` shows (PD added, member failed, DG
// degraded, resync finished, export started, ...). In memory, bounded: the oldest events drop
// out once kMaxEvents are kept. Thread-safe: arrays' notifier threads append, the control thread
// queries.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "graid/thread_annotations.h"

namespace graid::daemon {

// A time as graidctl prints times: RFC 3339 in UTC with milliseconds
// ("2026-12-07T19:59:42.877Z").
std::string rfc3339(std::chrono::system_clock::time_point t);

// The events kept: the last 10,000 (documented in docs/daemon.md).
inline constexpr std::size_t kMaxEvents = 10000;

struct Event {
  std::uint64_t seq = 0;  // from 1, increasing by one per event
  std::chrono::system_clock::time_point time;
  std::string kind;  // snake_case, listed in docs/cli.md ("pd_added", "member_failed", ...)
  std::optional<std::uint32_t> dg_id, pd_id, vd_id;
  std::string message;
};

struct EventQuery {
  std::vector<Event> events;   // seq > since, oldest first
  std::uint64_t next_seq = 1;  // the seq the next event will get
  std::uint64_t dropped = 0;   // events that fell out of the log so far (oldest first)
};

class EventLog {
 public:
  explicit EventLog(std::size_t capacity = kMaxEvents) : capacity_(capacity) {}

  // Appends an event (and logs it at info level); returns its seq.
  std::uint64_t add(std::string kind, std::optional<std::uint32_t> dg_id,
                    std::optional<std::uint32_t> pd_id, std::optional<std::uint32_t> vd_id,
                    std::string message);
  // Events with seq > since, at most `limit` of them (the oldest first).
  EventQuery since(std::uint64_t since, std::size_t limit = kMaxEvents) const;

 private:
  const std::size_t capacity_;
  mutable Mutex mutex_;
  std::deque<Event> events_ GUARDED_BY(mutex_);
  std::uint64_t next_seq_ GUARDED_BY(mutex_) = 1;
  std::uint64_t dropped_ GUARDED_BY(mutex_) = 0;
};

}  // namespace graid::daemon
