// Host memory registered with the device (pinned and mapped), and the lookup the cuda backend
// does for every chunk of a batch: inside a registered region, a chunk moves by DMA (or, mapped,
// is read by the kernel in place); outside, it is staged. kernels/ only (CUDA runtime API).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <shared_mutex>
#include <span>
#include <vector>

#include "graid/status.h"

namespace graid::kernels {

// One registered region; unregistered on destruction.
struct HostRegion {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  std::uint8_t* device_base = nullptr;  // the region's address on the device (mapped)

  HostRegion() = default;
  HostRegion(const HostRegion&) = delete;
  HostRegion& operator=(const HostRegion&) = delete;
  HostRegion(HostRegion&& o) noexcept;
  HostRegion& operator=(HostRegion&& o) noexcept;
  ~HostRegion();
};

class HostRegions {
 public:
  // Registers `region` (cudaHostRegister, portable + mapped) on `device`. kInvalidArgument when it
  // overlaps a registered region; the CUDA error otherwise. Takes the lock exclusively.
  Status add(std::span<std::byte> region, int device);
  // Unregisters the region starting at region.data(); false when there is none. Exclusive lock:
  // waits for every batch that may be using it.
  bool remove(std::span<std::byte> region);
  void clear();

  // Held shared by a batch for as long as it uses what find() returned.
  std::shared_mutex& mutex() const noexcept { return mu_; }
  // The region holding [p, p + len), or null. REQUIRES: mutex() held (shared suffices).
  const HostRegion* find(const void* p, std::size_t len) const;

 private:
  mutable std::shared_mutex mu_;
  std::vector<HostRegion> regions_;  // GUARDED_BY(mu_), sorted by begin
};

}  // namespace graid::kernels
