// The event log on disk: `events.jsonl` in the state dir, one event a line, appended and synced
// (fdatasync) before add() returns, so an event is on disk before graidd acts on it or replies.
//
// A line is `{"crc":"XXXXXXXX","event":EVENT}`: EVENT the event as a JSON object (seq, time,
// time_ms, severity, kind, dg_id, pd_id, vd_id, slot, message) and XXXXXXXX the CRC-32C of
// EVENT's bytes as written, in hex. `jq .event events.jsonl` reads it. A line whose CRC does not
// match, or that does not parse, is skipped and counted; an unfinished last line (a crash in
// the middle of an append) is cut off at open.
//
// Bounded: when an append would take the file past `rotate_bytes` (4 MiB), it is renamed to
// `events.jsonl.1` (replacing the older one) and a new file begun, so at most twice that is kept.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graid/status.h"
#include "graidd/event.h"

namespace graid::daemon {

inline constexpr std::size_t kEventFileBytes = 4u << 20;
inline constexpr std::string_view kEventFileName = "events.jsonl";

// The line an event is written as (newline included), and the event a line holds (nullopt:
// damaged, a CRC that does not match, or not an event).
std::string encode_event_line(const Event& e);
std::optional<Event> decode_event_line(std::string_view line);

struct EventFileContents {
  std::vector<Event> events;  // oldest first (events.jsonl.1, then events.jsonl)
  std::uint64_t damaged = 0;  // lines skipped: a CRC mismatch, not JSON, not an event
  bool cut_tail = false;      // an unfinished last line was cut off
};

class EventFile {
 public:
  // Opens (creating it, mode 0600) `dir`/events.jsonl for appends and reads back what both files
  // hold into `contents`.
  static Result<std::unique_ptr<EventFile>> open(const std::string& dir,
                                                 EventFileContents* contents,
                                                 std::size_t rotate_bytes = kEventFileBytes);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  // Writes the event's line and syncs it. Not thread-safe: the EventLog holds its lock.
  Status append(const Event& e);

  struct Key {
    explicit Key() = default;
  };
  EventFile(Key, std::string dir, int fd, std::uint64_t size, std::size_t rotate_bytes);

 private:
  Status rotate();

  const std::string dir_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  const std::size_t rotate_bytes_;
};

}  // namespace graid::daemon
