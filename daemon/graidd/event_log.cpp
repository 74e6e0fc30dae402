#include "graidd/event_log.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

namespace graid::daemon {

EventLog::EventLog(std::size_t capacity)
    : capacity_(capacity), wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

EventLog::~EventLog() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

Result<EventLogOpened> EventLog::open(const std::string& dir, std::size_t rotate_bytes) {
  EventFileContents contents;
  auto file = EventFile::open(dir, &contents, rotate_bytes);
  if (!file.is_ok()) return file.status();
  MutexLock lock(mutex_);
  file_ = std::move(*file);
  EventLogOpened opened{contents.events.size(), contents.damaged, contents.cut_tail};
  // What was read comes before anything added meanwhile (nothing, as graidd uses it).
  std::deque<Event> older;
  const std::size_t keep = std::min(contents.events.size(), capacity_);
  for (auto it = contents.events.end() - static_cast<std::ptrdiff_t>(keep);
       it != contents.events.end(); ++it)
    older.push_back(std::move(*it));
  if (!contents.events.empty()) next_seq_ = std::max(next_seq_, contents.events.back().seq + 1);
  for (auto& e : events_) {
    e.seq = next_seq_++;
    older.push_back(std::move(e));
  }
  events_ = std::move(older);
  while (events_.size() > capacity_)
    events_.pop_front();
  return opened;
}

std::uint64_t EventLog::add(std::string kind, std::optional<std::uint32_t> dg_id,
                            std::optional<std::uint32_t> pd_id, std::optional<std::uint32_t> vd_id,
                            std::string message) {
  Event e;
  e.severity = severity_of(kind);
  e.kind = std::move(kind);
  e.dg_id = dg_id;
  e.pd_id = pd_id;
  e.vd_id = vd_id;
  e.message = std::move(message);
  return add(std::move(e));
}

std::uint64_t EventLog::add(Event e) {
  std::string where;
  if (e.dg_id) where += fmt::format(" dg {}", *e.dg_id);
  if (e.vd_id) where += fmt::format(" vd {}", *e.vd_id);
  if (e.pd_id) where += fmt::format(" pd {}", *e.pd_id);
  const auto level = e.severity == Severity::kCritical  ? spdlog::level::err
                     : e.severity == Severity::kWarning ? spdlog::level::warn
                                                        : spdlog::level::info;
  spdlog::log(level, "event {}{}: {}", e.kind, where, e.message);
  std::uint64_t seq = 0;
  {
    MutexLock lock(mutex_);
    e.seq = seq = next_seq_++;
    ++added_[static_cast<std::size_t>(e.severity)];
    e.time = std::chrono::system_clock::now();
    if (file_) {
      if (Status st = file_->append(e); !st) {
        // Kept in memory all the same; the first failure of a run of them is an error line.
        if (unsaved_++ == 0 || (unsaved_ & (unsaved_ - 1)) == 0)
          spdlog::error("event log: {} ({} event(s) not on disk so far)", st.message(), unsaved_);
      }
    }
    events_.push_back(std::move(e));
    while (events_.size() > capacity_)
      events_.pop_front();
    if (listener_) listener_(events_.back());
  }
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  return seq;
}

EventQuery EventLog::since(std::uint64_t since, std::size_t limit) const {
  MutexLock lock(mutex_);
  EventQuery q;
  q.next_seq = next_seq_;
  // Events after `since` that are no longer kept.
  const std::uint64_t first_kept = events_.empty() ? next_seq_ : events_.front().seq;
  q.dropped = since < first_kept - 1 ? first_kept - 1 - since : 0;
  // Seqs increase but may have gaps (lines a damaged file lost).
  auto it = std::upper_bound(events_.begin(), events_.end(), since,
                             [](std::uint64_t s, const Event& e) { return s < e.seq; });
  for (; it != events_.end() && q.events.size() < limit; ++it)
    q.events.push_back(*it);
  return q;
}

bool EventLog::says_member_failed(std::uint32_t dg_id, std::uint32_t slot) const {
  MutexLock lock(mutex_);
  for (auto it = events_.rbegin(); it != events_.rend(); ++it) {
    if (it->dg_id != dg_id) continue;
    if (it->kind == "dg_created" || it->kind == "dg_deleted") return false;
    if (it->slot != slot) continue;
    if (it->kind == "member_failed") return true;
    if (it->kind == "member_back" || it->kind == "member_replaced" ||
        it->kind == "rebuild_finished" || it->kind == "replace_finished" ||
        it->kind == "spare_added")
      return false;
  }
  return false;
}

void EventLog::set_listener(std::function<void(const Event&)> listener) {
  MutexLock lock(mutex_);
  listener_ = std::move(listener);
}

std::array<std::uint64_t, 3> EventLog::added_by_severity() const {
  MutexLock lock(mutex_);
  return added_;
}

std::uint64_t EventLog::unsaved() const {
  MutexLock lock(mutex_);
  return unsaved_;
}

}  // namespace graid::daemon
