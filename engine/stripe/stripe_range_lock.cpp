#include "stripe/stripe_range_lock.h"

#include <cassert>

namespace graid {

void StripeRangeLock::Slot::run() {
  // Notified under the lock: once the job thread sees `granted` it may reuse or free the slot,
  // and it can see it only after this unlocks.
  MutexLock lock(owner->mutex_);
  granted = true;
  owner->granted_cv_.notify_all();
}

void StripeRangeLock::lock(std::uint64_t first, std::uint64_t count) {
  unlock();
  while (slots_.size() < count) {
    auto slot = std::make_unique<Slot>();
    slot->owner = this;
    slot->waiter.home = nullptr;  // grants run on the releasing thread
    slot->waiter.grant = slot.get();
    slots_.push_back(std::move(slot));
  }
  first_ = first;
  for (std::uint64_t i = 0; i < count; ++i) {
    Slot& slot = *slots_[i];
    slot.waiter.stripe = first + i;
    // slot.owner->mutex_ is our mutex_, named the way `granted`'s guard names it (the analysis
    // does not know that slot.owner == this).
    assert(slot.owner == this);
    {
      MutexLock lock(slot.owner->mutex_);
      slot.granted = false;
    }
    if (!table_.acquire(slot.waiter)) {
      UniqueLock lock(slot.owner->mutex_);
      while (!slot.granted)
        lock.wait(granted_cv_);
    }
    held_ = i + 1;
  }
}

void StripeRangeLock::unlock() {
  for (std::uint64_t i = 0; i < held_; ++i)
    table_.release(slots_[i]->waiter);
  held_ = 0;
}

}  // namespace graid
