// EventNotifier: delivers an array's events to its ArrayObserver on a thread of its own.
// Internal to engine/array.
//
// Why a thread: member failures are found and recorded on the I/O threads (a completion fails
// its member and writes the superblocks right there), and on whatever thread calls the control
// API; an observer called from there would run on an I/O thread, or inside an Array call holding
// the control mutex, where it could neither block nor call back into the array. Raising an event
// only takes a short mutex and appends to a bounded queue; the notifier thread calls the observer
// with no lock held. Events are rare (member failures, health changes, background jobs), so a
// mutex-protected queue costs nothing that matters.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <string>
#include <thread>

#include "graid/array.h"
#include "graid/thread_annotations.h"

namespace graid {

class EventNotifier {
 public:
  // Events beyond this many undelivered ones are dropped (and counted): an observer that stops
  // returning must not grow memory without bound.
  static constexpr std::size_t kMaxQueued = 4096;

  EventNotifier() = default;
  ~EventNotifier() { shutdown(); }
  EventNotifier(const EventNotifier&) = delete;
  EventNotifier& operator=(const EventNotifier&) = delete;

  // Starts delivering to `observer` (none: events are discarded). Call once, before emit().
  void start(ArrayObserver* observer, std::string array_name, std::string array_uuid);
  // Queues `event`, filling in the array's name, uuid and the time. Never blocks on the
  // observer; safe from any thread.
  void emit(ArrayEvent event) EXCLUDES(mutex_);
  // Returns once every event emitted before the call has been delivered (the observer returned
  // from it), or at once without an observer, after shutdown, or on the notifier thread itself.
  void wait_delivered() EXCLUDES(mutex_);
  // Delivers what is queued, then stops the thread. Idempotent.
  void shutdown() EXCLUDES(mutex_);
  std::uint64_t dropped() const EXCLUDES(mutex_);

 private:
  void loop() EXCLUDES(mutex_);

  ArrayObserver* observer_ = nullptr;
  std::string name_, uuid_;
  mutable Mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable delivered_cv_;
  std::deque<ArrayEvent> queue_ GUARDED_BY(mutex_);
  std::uint64_t queued_total_ GUARDED_BY(mutex_) = 0;     // events ever queued
  std::uint64_t delivered_total_ GUARDED_BY(mutex_) = 0;  // of those, delivered
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::uint64_t dropped_ GUARDED_BY(mutex_) = 0;
  std::thread thread_;
};

}  // namespace graid
