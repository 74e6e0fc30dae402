// Planning the host<->device copies of one batch (plain C++; the cuda backend issues them).
//
// Each chunk a batch reads or writes is one copy between host memory and the batch's device
// arena. Issued one by one, a batch of 256 RAID6 stripes at k = 8 is ~2,500 cudaMemcpyAsync calls
// of 64 KiB, each costing the host about as long as the copy engine needs to move it: the calls,
// not the link, would set the speed, and host CPU per GB (a target) would be spent on them. So:
//
//   1. place_runs(): chunks that follow each other in host memory get neighbouring places in the
//      arena (the engine's staging slabs hand out neighbouring buffers), so
//   2. coalesce_runs() can merge them into one copy each, and
//   3. the backend issues what is left with one cudaMemcpyBatchAsync per direction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace graid::kernels {

// One copy: `len` bytes between host address `host` and arena offset `device_offset`.
struct CopyRun {
  std::uintptr_t host = 0;
  std::size_t device_offset = 0;
  std::size_t len = 0;
  std::uint32_t tag = 0;  // the caller's (e.g. its chunk move's index)
};

// Assigns device_offset to every run, from `cursor` on, in host-address order: a run that
// starts where the previous one ended in host memory is placed right after it in the arena;
// any other starts at the next multiple of `align` (a power of two). Sorts `runs` by host
// address. Returns the cursor after the last run. Runs may overlap in host memory (a source
// shared by two jobs); each still gets a place of its own.
std::size_t place_runs(std::span<CopyRun> runs, std::size_t cursor, std::size_t align);

// Sorts by host address and merges each run with the next when both its host and its device
// ranges end where the next one's begin. The merged run keeps the first run's tag.
void coalesce_runs(std::vector<CopyRun>& runs);

}  // namespace graid::kernels
