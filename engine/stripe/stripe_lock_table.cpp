#include "stripe/stripe_lock_table.h"

#include <cassert>

namespace graid {

StripeLockTable::Partition& StripeLockTable::partition_of(std::uint64_t stripe) noexcept {
  // Fibonacci hashing spreads consecutive stripes (sequential writes) over partitions.
  const std::uint64_t h = stripe * 0x9E3779B97F4A7C15ull;
  return partitions_[h >> (64 - kPartitionBits)];
}

bool StripeLockTable::acquire(Waiter& w) {
  Partition& part = partition_of(w.stripe);
  MutexLock guard(part.mutex);
  for (Waiter* h = part.holders; h != nullptr; h = h->next_holder_) {
    if (h->stripe == w.stripe) {
      w.next_waiter_ = nullptr;
      if (h->last_waiter_ == nullptr) {
        h->first_waiter_ = &w;
      } else {
        h->last_waiter_->next_waiter_ = &w;
      }
      h->last_waiter_ = &w;
      return false;
    }
  }
  w.first_waiter_ = nullptr;
  w.last_waiter_ = nullptr;
  w.next_holder_ = part.holders;
  part.holders = &w;
  return true;
}

void StripeLockTable::release(Waiter& w, IoContext& current) {
  release(w, &current);
}

void StripeLockTable::release(Waiter& w) {
  release(w, nullptr);
}

void StripeLockTable::release(Waiter& w, IoContext* current) {
  Partition& part = partition_of(w.stripe);
  Waiter* next = nullptr;
  {
    MutexLock guard(part.mutex);
    Waiter** link = &part.holders;
    while (*link != &w) {
      assert(*link != nullptr && "release() of a stripe lock that is not held");
      link = &(*link)->next_holder_;
    }
    next = w.first_waiter_;
    if (next == nullptr) {
      *link = w.next_holder_;
    } else {
      // The first waiter becomes the holder in w's place and inherits the rest of the queue.
      next->first_waiter_ = next->next_waiter_;
      next->last_waiter_ = next->first_waiter_ == nullptr ? nullptr : w.last_waiter_;
      next->next_waiter_ = nullptr;
      next->next_holder_ = w.next_holder_;
      *link = next;
    }
    w.next_holder_ = nullptr;
    w.first_waiter_ = w.last_waiter_ = nullptr;
  }
  if (next != nullptr) {
    if (next->home == nullptr) {
      next->grant->run();  // a blocked job thread: wake it (see Waiter::home)
    } else if (next->home == current) {
      current->defer(*next->grant);
    } else {
      next->home->post(*next->grant);
    }
  }
}

void StripeLockTable::transfer(Waiter& from, Waiter& to) {
  Partition& part = partition_of(from.stripe);
  MutexLock guard(part.mutex);
  Waiter** link = &part.holders;
  while (*link != &from) {
    assert(*link != nullptr && "transfer() of a stripe lock that is not held");
    link = &(*link)->next_holder_;
  }
  to.stripe = from.stripe;
  to.next_holder_ = from.next_holder_;
  to.first_waiter_ = from.first_waiter_;
  to.last_waiter_ = from.last_waiter_;
  to.next_waiter_ = nullptr;
  *link = &to;
  from.next_holder_ = nullptr;
  from.first_waiter_ = from.last_waiter_ = nullptr;
}

std::size_t StripeLockTable::held_count() {
  std::size_t n = 0;
  for (Partition& part : partitions_) {
    MutexLock guard(part.mutex);
    for (Waiter* h = part.holders; h != nullptr; h = h->next_holder_)
      ++n;
  }
  return n;
}

}  // namespace graid
