// ArrayQueue::Impl's journal flush: what lets the write-hole journal reuse ring space whose
// records are retired (journal/journal.h).
#include <cstring>

#include "queue/array_queue_impl.h"

namespace graid {

void ArrayQueue::Impl::JournalFlush::Slot::on_done(std::int32_t res) {
  if (to_replacement) {
    if (res < 0) q->array.replacement_failed("flush", res);
    q->array.release_replacement();
    res = 0;
  } else {
    record_member_io(*q, member, *this, res);
  }
  q->journal_flush_slot_done(*this, res);
}

void ArrayQueue::Impl::journal_flush(std::uint64_t ticket) {
  JournalFlush& f = journal_flush_state;
  if (f.running != 0) {
    f.next = std::max(f.next, ticket);
    return;
  }
  f.running = ticket;
  ++in_flight;
  start_journal_flush();
}

void ArrayQueue::Impl::start_journal_flush() {
  JournalFlush& f = journal_flush_state;
  const std::uint32_t n = array.geometry.members();
  if (f.slots.size() < n + 1) f.slots.resize(n + 1);
  f.left = 0;
  // A hot replacement holds a copy of its role's ring, so its home writes are flushed too (held
  // before the roles' devices are loaded: see hold_replacement).
  const std::uint32_t replaced = array.replace_member.load(std::memory_order_relaxed);
  MemberDevice* copy =
      replaced == Array::State::kNoReplace ? nullptr : array.hold_replacement(replaced, 0, 0);
  for (std::uint32_t m = 0; m < n; ++m) {
    if (!array.takes_writes(m) || !array.members[m]) continue;
    JournalFlush::Slot& s = f.slots[f.left++];
    s.q = this;
    s.member = m;
    set_flush(s);
    s.to_replacement = false;
  }
  if (copy != nullptr && (f.left == 0 || copy == array.members[replaced].get())) {
    array.release_replacement();  // nothing to flush, or swapped in: flushed as the role's device
    copy = nullptr;
  }
  if (copy != nullptr) {
    JournalFlush::Slot& s = f.slots[f.left++];
    s.q = this;
    s.member = replaced;
    set_flush(s);
    s.to_replacement = true;
  }
  const std::uint32_t count = f.left;
  if (count == 0) {
    journal_flush_slot_done(f.slots[0], 0);  // nothing to flush: done at once
    return;
  }
  for (std::uint32_t i = 0; i < count; ++i) {
    if (f.slots[i].to_replacement) {
      f.slots[i].device = copy;
      submit_timed(*copy, ctx, f.slots[i]);
      continue;
    }
    MemberDevice& device = *array.members[f.slots[i].member];
    f.slots[i].device = &device;
    submit_timed(device, ctx, f.slots[i]);
  }
}

void ArrayQueue::Impl::journal_flush_slot_done(JournalFlush::Slot& slot, std::int32_t res) {
  JournalFlush& f = journal_flush_state;
  if (res < 0 && array.members[slot.member].get() == slot.device) {
    // A member that cannot flush is failed: nothing relies on it from now on, so the flush of
    // the others is what makes the retired records' home writes durable.
    Status st = array.fail_member(slot.member, fmt::format("flush failed: {}", std::strerror(-res)),
                                  slot.device);
    (void)st;
  }
  if (f.left > 0 && --f.left != 0) return;
  const std::uint64_t done = f.running;
  if (f.next != 0) {
    f.running = std::exchange(f.next, 0);
    array.journal->end_flush(done);
    start_journal_flush();
    return;
  }
  f.running = 0;
  array.journal->end_flush(done);
  --in_flight;
}

}  // namespace graid
