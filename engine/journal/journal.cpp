// Journal ring space: reservations, retirement, and reuse after a flush (journal/journal.h).
#include "journal/journal.h"

#include <algorithm>

namespace graid {

Journal::Journal(std::uint32_t members, std::uint64_t area_offset, std::uint64_t area_bytes,
                 const std::array<std::byte, 16>& array_uuid, std::uint64_t epoch)
    : area_offset_(area_offset), area_bytes_(area_bytes), uuid_(array_uuid), epoch_(epoch) {
  MutexLock guard(mutex_);
  rings_.resize(members);
}

std::uint64_t Journal::reclaim(Ring& ring) {
  while (!ring.records.empty()) {
    const Record& r = ring.records.front();
    if (!r.retired || flush_done_ <= r.retire_ticket) break;
    ring.records.pop_front();
  }
  return ring.records.empty() ? ring.head : ring.records.front().pos;
}

bool Journal::fits(Ring& ring, std::uint64_t bytes) {
  const std::uint64_t tail = reclaim(ring);
  if (ring.records.empty() && ring.head % area_bytes_ + bytes > area_bytes_) {
    ring.head += area_bytes_ - ring.head % area_bytes_;  // empty: start again at the beginning
    return true;
  }
  const std::uint64_t phys = ring.head % area_bytes_;
  const std::uint64_t pad = phys + bytes > area_bytes_ ? area_bytes_ - phys : 0;
  return ring.head + pad + bytes - tail <= area_bytes_;
}

bool Journal::needs_flush(const Ring& ring) const {
  if (ring.records.empty()) return false;
  const Record& r = ring.records.front();
  // Retired but not yet covered by a flush, and no flush issued since its retirement.
  return r.retired && flush_done_ <= r.retire_ticket && flush_issued_ <= r.retire_ticket;
}

Journal::Reserve Journal::reserve(std::span<const std::uint32_t> members, std::uint64_t bytes,
                                  Reservation& out, IoContext& home, Task& retry,
                                  std::uint64_t* ticket) {
  if (bytes > area_bytes_ || members.size() > out.slots.size()) return Reserve::kTooLarge;
  MutexLock guard(mutex_);
  bool all = true;
  bool flush = false;
  for (std::uint32_t m : members) {
    if (!fits(rings_[m], bytes)) {
      all = false;
      flush = flush || needs_flush(rings_[m]);
    }
  }
  if (!all) {
    waiters_.emplace_back(&home, &retry);
    if (!flush) return Reserve::kWait;
    *ticket = ++flush_issued_;
    return Reserve::kWaitFlush;
  }
  out.count = 0;
  for (std::uint32_t m : members) {
    Ring& ring = rings_[m];
    const std::uint64_t phys = ring.head % area_bytes_;
    if (phys + bytes > area_bytes_) ring.head += area_bytes_ - phys;  // never straddle the end
    ring.records.push_back(Record{ring.head, ring.head + bytes, false, 0});
    out.slots[out.count++] = Slot{m, ring.head, bytes};
    ring.head += bytes;
  }
  return Reserve::kOk;
}

void Journal::retire(const Reservation& r) {
  bool front = false;
  {
    MutexLock guard(mutex_);
    for (std::uint32_t i = 0; i < r.count; ++i) {
      Ring& ring = rings_[r.slots[i].member];
      auto it = std::find_if(ring.records.begin(), ring.records.end(),
                             [&](const Record& rec) { return rec.pos == r.slots[i].logical; });
      if (it == ring.records.end()) continue;
      it->retired = true;
      it->retire_ticket = flush_issued_;
      front = front || it == ring.records.begin();
    }
    front = front && !waiters_.empty();
  }
  // A waiter may now be the one to flush this record's space free.
  if (front) wake();
}

void Journal::end_flush(std::uint64_t ticket) {
  {
    MutexLock guard(mutex_);
    flush_done_ = std::max(flush_done_, ticket);
  }
  wake();
}

void Journal::wake() {
  std::vector<std::pair<IoContext*, Task*>> ready;
  {
    MutexLock guard(mutex_);
    ready.swap(waiters_);
  }
  for (auto& [ctx, task] : ready)
    ctx->post(*task);
}

bool Journal::activate() {
  MutexLock guard(mutex_);
  const auto was = state_.load(std::memory_order_relaxed);
  if (was == kTurningOff) {
    reactivate_ = true;  // on again once the epoch has moved: see finish_turn_off()
    return false;
  }
  state_.store(kOn, std::memory_order_seq_cst);
  return was == kOff;
}

bool Journal::begin_turn_off() {
  MutexLock guard(mutex_);
  if (state_.load(std::memory_order_relaxed) != kOn) return false;
  reactivate_ = false;
  state_.store(kTurningOff, std::memory_order_release);
  return true;
}

Journal::Enter Journal::enter(IoContext& home, Task& retry) {
  MutexLock guard(mutex_);
  switch (state_.load(std::memory_order_relaxed)) {
    case kOn:
      ++held_;
      return Enter::kJournal;
    case kTurningOff:
      waiters_.emplace_back(&home, &retry);
      return Enter::kWait;
    default:
      return Enter::kNone;
  }
}

void Journal::leave() {
  MutexLock guard(mutex_);
  if (held_ > 0) --held_;
}

bool Journal::drained() {
  MutexLock guard(mutex_);
  return held_ == 0;
}

void Journal::finish_turn_off(std::uint64_t new_epoch) {
  {
    MutexLock guard(mutex_);
    // Records of the old epoch stay in the rings until reclaimed as usual (one may still be
    // being written); none of them is replayed any more.
    epoch_.store(new_epoch, std::memory_order_release);
    state_.store(reactivate_ ? kOn : kOff, std::memory_order_release);
    reactivate_ = false;
  }
  wake();
}

void Journal::cancel_turn_off() {
  {
    MutexLock guard(mutex_);
    state_.store(kOn, std::memory_order_release);
    reactivate_ = false;
  }
  wake();
}

std::size_t Journal::outstanding(std::uint32_t member) {
  MutexLock guard(mutex_);
  reclaim(rings_[member]);
  return rings_[member].records.size();
}

}  // namespace graid
