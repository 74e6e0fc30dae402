#include "state/event_notifier.h"

#include <spdlog/spdlog.h>

namespace graid {

void EventNotifier::start(ArrayObserver* observer, std::string array_name, std::string array_uuid) {
  name_ = std::move(array_name);
  uuid_ = std::move(array_uuid);
  observer_ = observer;
  if (observer_ != nullptr) thread_ = std::thread([this] { loop(); });
}

void EventNotifier::emit(ArrayEvent event) {
  if (observer_ == nullptr) return;
  event.array_name = name_;
  event.array_uuid = uuid_;
  event.time = std::chrono::system_clock::now();
  {
    MutexLock guard(mutex_);
    if (stopping_) return;
    if (queue_.size() >= kMaxQueued) {
      if (dropped_++ == 0) {
        spdlog::warn("graid: array '{}': observer is not keeping up; dropping events", name_);
      }
      return;
    }
    queue_.push_back(std::move(event));
    ++queued_total_;
  }
  wake_.notify_one();
}

void EventNotifier::wait_delivered() {
  if (!thread_.joinable() || std::this_thread::get_id() == thread_.get_id()) return;
  UniqueLock lock(mutex_);
  const std::uint64_t target = queued_total_;
  while (delivered_total_ < target && !stopping_)
    lock.wait(delivered_cv_);
}

void EventNotifier::shutdown() {
  if (!thread_.joinable()) return;
  {
    MutexLock guard(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

std::uint64_t EventNotifier::dropped() const {
  MutexLock guard(mutex_);
  return dropped_;
}

void EventNotifier::loop() {
  UniqueLock lock(mutex_);
  for (;;) {
    while (!stopping_ && queue_.empty())
      lock.wait(wake_);
    if (queue_.empty()) {
      delivered_cv_.notify_all();
      return;  // stopping, and everything delivered
    }
    ArrayEvent event = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    observer_->on_event(event);
    lock.lock();
    ++delivered_total_;
    delivered_cv_.notify_all();
  }
}

}  // namespace graid
