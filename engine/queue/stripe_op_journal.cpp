// StripeOp and the write-hole journal (journal/journal.h): while the journal is active, the record
// of every RAID5/6 stripe update that writes parity is written to the live parity members'
// journal rings before the update's own writes, and retired once they are done.
#include <atomic>
#include <bit>
#include <cstring>

#include "meta/crc32c.h"
#include "meta/journal_record.h"
#include "queue/array_queue_impl.h"

namespace graid {

bool StripeOp::journal_wanted() {
  const Journal* j = q_.array.journal.get();
  journal_targets_ = 0;
  // A run has none: it went ahead only after finding the journal off with its stripes locked
  // (plan_run), so no record of them can be in a ring (turning off moved the epoch) and none
  // can be written before it ends; journal coverage waits for it as for any bare update.
  if (j == nullptr || !j->active() || mode_ != Mode::kWrite || count_ > 1) return false;
  const Geometry& g = q_.array.geometry;
  const std::uint32_t k = g.data_strips();
  // Every update that writes a live parity strip, full-stripe ones included: a full-stripe write
  // needs no record for its own sake, but without one an older record of the same stripe, still
  // in its ring, would be replayed over it after a crash. The record goes to the parity members
  // written that are not failed (a plan may rewrite a failed member's strip it could not read;
  // that write may fail, the record's must not be planned there). Without one there is no
  // parity to disagree with the data, and the stripe's records are on dead members.
  //
  // A member being rebuilt takes records exactly where it is in sync at the decision (dead_at),
  // and that only ever grows for a stripe: below rebuilt[m] it stays in sync, and a bitmap re-add
  // in a clean region is behind from the first write there on, whose bit is set (hold_bitmap)
  // before this decision. So a member either holds no record of a stripe or holds the newest
  // one, and replay, which reads it, never finds an older record outranking a newer write
  // (OlderRecordOnAReaddedParityMemberDoesNotUndoANewerWrite).
  std::uint64_t written = 0;
  for (std::size_t i = 0; i < extents_used_; ++i)
    written |= extents_[i].plan.writes;
  for (std::uint32_t c = k; c < k + g.parity_strips(); ++c) {
    if ((written & chunk_bit(c)) == 0) continue;
    const std::uint32_t m = g.chunk_member(stripe_, c);
    if (q_.array.dead_at(m, stripe_)) continue;
    journal_members_[journal_targets_++] = m;
  }
  return journal_targets_ > 0;
}

bool StripeOp::count_bare(bool on) {
  if (on == bare_) return false;
  bare_ = on;
  if (on) {
    // Sequentially consistent, as the journal's state read after it (Journal::active).
    q_.bare_updates.fetch_add(1, std::memory_order_seq_cst);
    return false;
  }
  q_.bare_updates.fetch_sub(1, std::memory_order_seq_cst);  // before it reads the pending flag
  return q_.array.journal_coverage_pending.load(std::memory_order_seq_cst);
}

void StripeOp::journal_or_write() {
  // Counted in before asking: if the journal turns on meanwhile, its coverage waits for this.
  if (q_.array.journal) count_bare(true);
  if (journal_wanted()) {
    switch (q_.array.journal->enter(q_.ctx, journal_decide_)) {
      case Journal::Enter::kJournal:
        if (count_bare(false)) q_.array.try_record_journal_coverage();
        journal_entered_ = true;
        return build_journal_record();  // then issue_writes()
      case Journal::Enter::kWait:
        if (count_bare(false)) q_.array.try_record_journal_coverage();
        return;  // turning off: journal_decide_ asks again once that is over
      case Journal::Enter::kNone:
        break;
    }
  }
  issue_writes();
}

void StripeOp::build_journal_record() {
  Array::State& a = q_.array;
  meta::JournalHeader h;
  h.array_uuid = a.journal->array_uuid();
  h.epoch = a.journal->epoch();
  h.seq = a.journal->next_seq();
  h.stripe = stripe_;
  for (std::size_t i = 0; i < extents_used_; ++i) {
    const Extent& e = extents_[i];
    for (std::uint64_t m = e.plan.writes; m != 0; m &= m - 1) {
      const auto c = static_cast<std::uint32_t>(std::countr_zero(m));
      h.entries.push_back(meta::JournalEntry{c, e.a, e.b - e.a});
    }
  }
  // journal_members_ / journal_targets_: set by journal_wanted().
  const std::uint64_t payload = meta::journal_payload_bytes(h);
  journal_bytes_ = meta::journal_record_bytes(h.entries.size(), payload);
  journal_data_ = nullptr;
  if (journal_bytes_ <= kMaxStripBytes) {
    auto buf = q_.buffers.get(static_cast<std::uint32_t>(journal_bytes_));
    if (!buf) return finish(buf.status());
    journal_buf_ = std::move(*buf);
    journal_data_ = journal_buf_.data();
  } else {
    auto big = AlignedBuffer::allocate(journal_bytes_, meta::kJournalBlock);
    if (!big) return finish(big.status());
    journal_big_ = std::move(*big);
    journal_data_ = journal_big_.data();
  }
  // Payload: each entry's new contents, in entry order, after the header.
  const std::size_t header_bytes = meta::journal_header_bytes(h.entries.size());
  std::byte* out = journal_data_ + header_bytes;
  std::size_t n = 0;
  for (std::size_t i = 0; i < extents_used_; ++i) {
    const Extent& e = extents_[i];
    for (std::uint64_t m = e.plan.writes; m != 0; m &= m - 1) {
      const auto c = static_cast<std::uint32_t>(std::countr_zero(m));
      std::memcpy(out, e.data[c], h.entries[n].len);
      out += h.entries[n].len;
      ++n;
    }
  }
  std::memset(out, 0, journal_bytes_ - header_bytes - payload);
  h.payload_crc = meta::crc32c({journal_data_ + header_bytes, static_cast<std::size_t>(payload)});
  if (Status st = meta::encode_journal_header(h, {journal_data_, header_bytes}); !st) {
    return finish(st);
  }
  reserve_journal();
}

void StripeOp::reserve_journal() {
  Journal& j = *q_.array.journal;
  std::uint64_t ticket = 0;
  switch (j.reserve({journal_members_.data(), journal_targets_}, journal_bytes_, journal_res_,
                    q_.ctx, journal_retry_, &ticket)) {
    case Journal::Reserve::kOk:
      break;
    case Journal::Reserve::kWaitFlush:
      q_.journal_flush(ticket);
      return;
    case Journal::Reserve::kWait:
      return;  // journal_retry_ runs reserve_journal() again
    case Journal::Reserve::kTooLarge:
      return finish(make_error(Errc::kInternal,
                               "stripe {}: a journal record of {} bytes does not fit the {}-byte "
                               "journal area",
                               stripe_, journal_bytes_, j.area_bytes()));
  }
  journal_held_ = true;
  ++q_.stats.journal_records;
  q_.stats.journal_bytes += journal_bytes_ * journal_res_.count;
  phase_ = Phase::kJournaling;
  ios_used_ = 0;
  for (std::uint32_t i = 0; i < journal_res_.count; ++i) {
    StripeMemberIo& io = new_io(journal_res_.slots[i].member);
    io.op = MemberOp::kWrite;
    io.offset = j.device_offset(journal_res_.slots[i]);
    io.buf = journal_data_;
    io.len = static_cast<std::uint32_t>(journal_bytes_);
    io.fua = true;  // the record is durable before any home write starts
  }
  const std::size_t n = ios_used_;
  for (std::size_t i = 0; i < n; ++i)
    submit_io(*ios_[i]);
}

void StripeOp::drop_journal() {
  if (journal_held_) {
    q_.array.journal->retire(journal_res_);
    journal_held_ = false;
  }
  if (journal_entered_) {
    q_.array.journal->leave();
    journal_entered_ = false;
  }
  q_.buffers.put(std::move(journal_buf_));
  journal_big_ = AlignedBuffer();
  journal_data_ = nullptr;
}

}  // namespace graid
