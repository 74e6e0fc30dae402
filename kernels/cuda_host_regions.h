// Host memory registered with the device (pinned and mapped), and the lookup the cuda backend
// does for every chunk of a batch: inside a registered region, a chunk moves by DMA (or, mapped,
// is read by the kernel in place); outside, it is staged. kernels/ only (CUDA runtime API).
//
// Lookups never wait for registrations: a batch takes a snapshot of the table (a shared_ptr to
// an immutable sorted vector, copied under a mutex held for just that copy) and looks its chunks
// up in it; add() and remove() register outside that mutex and then publish a new table. A
// reader-writer lock would let a steady stream of batches starve the I/O thread that registers a
// new staging slab, which happens exactly when load grows. A region is only removed when no job
// uses its memory (HostMemoryRegistry's contract), so unregistering it while an older snapshot
// still lists it is safe: nothing will look a chunk up in it again.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "graid/status.h"
#include "graid/thread_annotations.h"

namespace graid::kernels {

struct HostRegion {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  std::uint8_t* device_base = nullptr;  // the region's address on the device (mapped)
};

class HostRegions {
 public:
  using Table = std::vector<HostRegion>;  // sorted by begin, disjoint
  using Snapshot = std::shared_ptr<const Table>;

  HostRegions() = default;
  ~HostRegions() { clear(); }
  HostRegions(const HostRegions&) = delete;
  HostRegions& operator=(const HostRegions&) = delete;

  // Registers `region` (cudaHostRegister, portable + mapped) on `device`. kInvalidArgument when it
  // overlaps a registered region; the CUDA error otherwise.
  Status add(std::span<std::byte> region, int device) EXCLUDES(mu_);
  // Unregisters the region starting at region.data(); false when there is none.
  bool remove(std::span<std::byte> region) EXCLUDES(mu_);
  // Unregisters everything.
  void clear() EXCLUDES(mu_);

  // The current table. Keep it while using what find() returns from it.
  Snapshot snapshot() const EXCLUDES(table_mu_) {
    MutexLock lock(table_mu_);
    return table_;
  }
  // The region of `table` holding [p, p + len), or null.
  static const HostRegion* find(const Table& table, const void* p, std::size_t len);

 private:
  // Publishers hold mu_, so that no two copy-modify-publish the table at once.
  void publish(Snapshot next) REQUIRES(mu_) EXCLUDES(table_mu_) {
    MutexLock lock(table_mu_);
    table_ = std::move(next);
  }

  Mutex mu_;                // serialises add/remove/clear (publishers); never taken by lookups
  mutable Mutex table_mu_;  // guards the pointer only
  Snapshot table_ GUARDED_BY(table_mu_) = std::make_shared<const Table>();
};

}  // namespace graid::kernels
