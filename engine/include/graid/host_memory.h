// Long-lived host memory the engine tells a device backend about.
//
// The engine's stripe staging buffers (old data, images, parity outputs) come from per-thread slab
// pools that live as long as the thread's queue. A GPU backend that is told about a slab once can
// pin it (cudaHostRegister) and move every chunk inside it by DMA, without copying it through a
// staging buffer of its own; pinning costs milliseconds, so it is done per slab, never per I/O.
// Chunks outside every announced region (e.g. the application's own buffer, written zero-copy)
// still work: the backend stages them.
#pragma once

#include <cstddef>
#include <span>

#include "graid/status.h"

namespace graid {

class HostMemoryRegistry {
 public:
  virtual ~HostMemoryRegistry() = default;

  // `region` will hold chunks of future jobs until remove_region(region). A failure is not an
  // I/O error: the caller keeps using the memory, unregistered. Thread-safe.
  virtual Status add_region(std::span<std::byte> region) = 0;
  // Called with a region add_region() accepted, before it is freed, when no job uses it.
  // Thread-safe.
  virtual void remove_region(std::span<std::byte> region) noexcept = 0;
};

}  // namespace graid
