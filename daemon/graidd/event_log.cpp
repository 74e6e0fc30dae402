#include "graidd/event_log.h"

#include <spdlog/spdlog.h>

#include <ctime>

namespace graid::daemon {

std::string rfc3339(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch());
  const std::time_t secs = static_cast<std::time_t>(ms.count() / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03}Z", buf, ms.count() % 1000);
}

std::uint64_t EventLog::add(std::string kind, std::optional<std::uint32_t> dg_id,
                            std::optional<std::uint32_t> pd_id, std::optional<std::uint32_t> vd_id,
                            std::string message) {
  std::string where;
  if (dg_id) where += fmt::format(" dg {}", *dg_id);
  if (vd_id) where += fmt::format(" vd {}", *vd_id);
  if (pd_id) where += fmt::format(" pd {}", *pd_id);
  spdlog::info("event {}{}: {}", kind, where, message);
  MutexLock lock(mutex_);
  Event e;
  e.seq = next_seq_++;
  e.time = std::chrono::system_clock::now();
  e.kind = std::move(kind);
  e.dg_id = dg_id;
  e.pd_id = pd_id;
  e.vd_id = vd_id;
  e.message = std::move(message);
  events_.push_back(std::move(e));
  while (events_.size() > capacity_) {
    events_.pop_front();
    ++dropped_;
  }
  return next_seq_ - 1;
}

EventQuery EventLog::since(std::uint64_t since, std::size_t limit) const {
  MutexLock lock(mutex_);
  EventQuery q;
  q.next_seq = next_seq_;
  q.dropped = dropped_;
  // Events are consecutive: the one with seq s sits at index s - front().seq.
  if (events_.empty()) return q;
  const std::uint64_t first = events_.front().seq;
  std::size_t index = since < first ? 0 : static_cast<std::size_t>(since - first + 1);
  for (; index < events_.size() && q.events.size() < limit; ++index)
    q.events.push_back(events_[index]);
  return q;
}

}  // namespace graid::daemon
