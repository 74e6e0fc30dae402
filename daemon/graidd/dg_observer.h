// An array's events into graidd's event log, naming the DG and, for member events, the PD.
#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include "graid/array.h"
#include "graid/thread_annotations.h"
#include "graidd/event_log.h"

namespace graid::daemon {

// Forwards an array's events into the event log, naming the DG and, for member events, the PD.
class DgObserver final : public ArrayObserver {
 public:
  DgObserver(EventLog& log, std::uint32_t dg_id) : log_(log), dg_id_(dg_id) {}

  void set_slot_map(std::map<std::uint32_t, std::uint32_t> slot_to_pd) {
    MutexLock lock(mutex_);
    slot_to_pd_ = std::move(slot_to_pd);
  }

  // Called (on the array's notifier thread) after each event is logged: how the DG's rebuild
  // job learns of failures and new spares. Once set_wake({}) returns, no call is running.
  void set_wake(std::function<void(ArrayEventKind)> wake) {
    MutexLock lock(wake_mutex_);
    wake_ = std::move(wake);
  }

  void on_event(const ArrayEvent& e) override;

 private:
  Mutex wake_mutex_;
  std::function<void(ArrayEventKind)> wake_ GUARDED_BY(wake_mutex_);
  EventLog& log_;
  const std::uint32_t dg_id_;
  Mutex mutex_;
  std::map<std::uint32_t, std::uint32_t> slot_to_pd_ GUARDED_BY(mutex_);
};

}  // namespace graid::daemon
