// Whole-array passes with blocking I/O: re-syncing parity/mirrors over a range after an unclean
// stop, and counting inconsistent stripes (the consistency check). The re-sync passes run while
// no queue does I/O on the range (assembly); the check locks the stripes it reads, window by
// window (StripeRangeLock), so it may run while queues do I/O. Throttling and checkpoints come
// with the background-jobs work.
#pragma once

#include <cstdint>

#include "state/array_state.h"

namespace graid {

// Makes parity (or mirror copies) agree with the data for the stripes covering member data
// bytes [member_offset, +len). Stripes whose data cannot all be read (a data member failed) are
// left as they are, logged and added to `*unsynced` (optional). A member whose read or write
// fails is failed (recorded in the superblocks) and the stripe done again without it, as long
// as the array survives. Returns the member bytes re-synced per member.
Result<std::uint64_t> resync_range(Array::State& state, std::uint64_t member_offset,
                                   std::uint64_t len, std::uint64_t* unsynced = nullptr);

// Stripes covering member data bytes [member_offset, +len) that resync_range() could not re-sync
// with the members failed now (a data strip, or every copy of one, lost). Reads nothing.
std::uint64_t count_unsyncable_stripes(const Array::State& state, std::uint64_t member_offset,
                                       std::uint64_t len);

// Initialises a new array's redundancy from member data byte `from` to the end (resync of every
// stripe), recording progress in sb.init_checkpoint every so often; clears nothing (the caller
// clears the checkpoint once it is done). For create() without background_init, before any
// queue exists; an initialisation cut short is finished by Array::initialise()
// (background_init.cpp).
Status initialise(Array::State& state, std::uint64_t from);

// Stripes per window count_inconsistent_stripes() locks at a time: big enough to amortise the
// locking, small enough that writes to those stripes wait only for a few strip reads each.
inline constexpr std::uint64_t kCheckWindowStripes = 16;

// Stripes whose parity (or mirror copies) do not match their data, over the whole array, read
// under stripe locks taken kCheckWindowStripes at a time: safe while I/O runs (a write in flight
// is never seen half done). Stripes with a failed member are not checkable and are skipped.
Result<std::uint64_t> count_inconsistent_stripes(Array::State& state);

}  // namespace graid
