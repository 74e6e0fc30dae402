// Blocking superblock I/O shared by create, assemble and member-failure recording. Internal to
// engine/array.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "meta/superblock.h"
#include "state/array_state.h"

namespace graid {

// Nanoseconds since the epoch (superblock ctime/utime).
std::uint64_t wall_clock_ns();

// Reads and decodes the superblock of `m`, writing nothing. kNotFound when the block does not
// begin with the superblock magic (no graid superblock: a blank or erased device); decoding
// errors (kCorrupt, kUnsupported) otherwise.
Result<meta::Superblock> read_superblock(MemberDevice& m);

// What graid metadata `m` carries (Array::find_metadata), writing nothing. kIoError when its
// first block cannot be read.
Result<GraidMetadata> find_graid_metadata(MemberDevice& m);

// The array's members by slot, null for failed or missing ones (what metadata is written to).
std::vector<std::shared_ptr<MemberDevice>> live_members(const Array::State& s);
// The devices that take writes, by slot: live members and those being rebuilt (null for the
// others). What must be flushed before anything says their writes are durable (a write-intent
// bit cleared, a job's checkpoint dropped). A hot replacement is not among them: its flush is
// Array::State::record_replace_checkpoint()'s.
std::vector<std::shared_ptr<MemberDevice>> writing_members(const Array::State& s);

// Writes `sb`, made each member's own copy (member_index, member_uuid), to every non-null
// member of `members` (indexed by slot) and flushes it. All members are written at once
// (meta::run_on_members), so an update costs one write + flush, not one per member, and one
// slow member does not hold the others back; one that takes longer than `timeout` is reported
// failed (kIoError). Returns one status per slot (ok for null slots).
std::vector<Status> write_superblock_copies(std::span<const std::shared_ptr<MemberDevice>> members,
                                            const meta::Superblock& sb,
                                            std::chrono::milliseconds timeout);

// Flushes every non-null member of `members` at once; as write_superblock_copies for the rest.
std::vector<Status> flush_members(std::span<const std::shared_ptr<MemberDevice>> members,
                                  std::chrono::milliseconds timeout);

}  // namespace graid
