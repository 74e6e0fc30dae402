// Metadata I/O on every member at once: superblock and write-intent bitmap updates.
//
// A metadata update (a bit page, a header, a superblock) must reach every live member and be
// flushed there. Done one member after another, a 32-member array pays 32 serial write + flush
// round trips for the first write to a cleared region, and a member that hangs inside a write
// stalls every thread waiting for the update. run_on_members() instead starts one blocking
// operation per member on a worker thread, all at once, and waits once: an update costs one
// write + flush, the slowest member's. A member whose operation has not finished when the
// timeout expires is reported failed (kIoError, "did not finish within"); the caller fails it and
// the update stands on the others.
//
// Workers: one process-wide pool of persistent threads, grown on demand and never shrunk. A call
// takes idle workers and starts new ones only when none is idle, so in steady state an update on
// N members reuses the N workers the previous one used: no thread is created on the hot path of
// a first write to a region. A worker stuck in a hung member stays busy (and holds its member);
// the pool simply starts another for the next call. Threads hung forever cost one stack each,
// bounded by the members that hang, which are failed and never given metadata I/O again.
//
// Lifetime rule: the operation may still be running after run_on_members() returned (timeout),
// even after the array that asked for it is gone. So the workers share ownership of everything
// they touch: each holds its member's shared_ptr and a shared_ptr to the operation, and the
// operation must own what it captures (buffers by shared_ptr or by value, never a reference to
// the caller's stack or state). When the hung call finally returns it finds its buffer and device
// still alive, records a result nobody reads, and releases them.
//
// fork(): a child of a process that has used the pool has none of its workers and may inherit
// locks they held (an allocator's, under ASan: seen in the crash tests when their child was a
// bare fork). Such a child must exec before it touches graid; graidd never forks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "graid/member.h"
#include "graid/status.h"

namespace graid::meta {

// How long a member may take over one metadata operation before it counts as failed.
inline constexpr std::chrono::milliseconds kDefaultMetadataTimeout{30000};

// One member's part of a metadata update: blocking I/O on `member`, which is slot `index` of the
// span given to run_on_members(). Runs on a worker thread; see the lifetime rule above.
using MemberMetadataOp = std::function<Status(MemberDevice& member, std::uint32_t index)>;

// Runs `op` on every non-null member of `members` (indexed by slot) at once, each on its own
// worker thread, and waits until every one has finished or `timeout` has passed since the call.
// Returns one status per slot: ok for null slots, the operation's status, or kIoError naming the
// member and the timeout for an operation still running then (it goes on in the background and
// its result is dropped). Thread-safe. If no worker thread can be started for a member (the
// system is out of threads), its operation waits for a busy worker and may time out.
std::vector<Status> run_on_members(std::span<const std::shared_ptr<MemberDevice>> members,
                                   std::chrono::milliseconds timeout, MemberMetadataOp op);

// Worker threads the pool has started so far, busy or idle (for tests and stats).
std::size_t metadata_worker_threads();

// From now on every worker, present or future, marks itself PR_SET_IO_FLUSHER before its next
// operation (graid::set_metadata_workers_io_flusher()).
void set_workers_io_flusher();

// A shared_ptr that does not own `device` (the caller keeps it alive for as long as any
// metadata operation on it may run): for callers whose devices are owned elsewhere.
inline std::shared_ptr<MemberDevice> unowned_member(MemberDevice* device) {
  return std::shared_ptr<MemberDevice>(std::shared_ptr<MemberDevice>{}, device);
}

}  // namespace graid::meta
