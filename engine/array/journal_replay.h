// Replaying the write-hole journal at assembly (journal/journal.h): after an unclean stop, every
// valid record of the current epoch found in the journal area of a member that takes writes is
// applied in sequence order (its strips written to their home locations), then the members are
// flushed. Internal to engine/array.
#pragma once

#include <cstdint>

#include "state/array_state.h"

namespace graid {

struct JournalReplayResult {
  std::uint64_t records = 0;         // distinct records applied (a RAID6 record has two copies)
  std::uint64_t bytes = 0;           // strip bytes written home
  std::uint64_t skipped_strips = 0;  // strips whose member does not take writes now
};

// Reads the journal areas sb.journal_offset/journal_bytes of the members, for records of
// sb.array_uuid and sb.journal_epoch, and applies them. A member that fails a read or a write is
// failed (Array::State::fail_member); kIoError when the array fails meanwhile.
Result<JournalReplayResult> replay_journal(Array::State& state, const meta::Superblock& sb);

// Erases the journal area of a device about to take a role (a spare, a replacement, a member
// taken back), so that none of its old records can be replayed: one re-added within the same
// epoch would otherwise hold records older than writes it missed. Zeroes (or discards to zeroes)
// [offset, +bytes), then flushes.
Status clear_journal_area(MemberDevice& device, std::uint64_t offset, std::uint64_t bytes);

}  // namespace graid
