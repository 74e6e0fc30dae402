// Per-thread pool of staging buffers for stripe operations (old data, images, parity).
//
// Size classes are powers of two from 4 KiB to the largest strip (1 MiB). Buffers are carved
// from slabs (4096-byte aligned for O_DIRECT, zero-filled when allocated) and kept on per-class
// free lists after use, so a thread that has warmed up allocates nothing per I/O. Each slab is
// announced once to up to two HostMemoryRegistry objects, and withdrawn when the pool is
// destroyed: the array's parity device, if any (a GPU backend pins it), and the queue's ring (the
// kernel pins it for fixed-buffer member I/O). Not thread-safe: one pool per ArrayQueue.
//
//   slab (class 64 KiB, 1 MiB):  [ buf | buf | buf | ... | buf ]   16 buffers
//   slab (class 1 MiB, 8 MiB):   [ buf | buf | ... | buf ]          8 buffers
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <utility>
#include <vector>

#include "graid/buffer.h"
#include "graid/geometry.h"
#include "graid/host_memory.h"

namespace graid {

// A buffer lent by a BufferPool: a slice of one of its slabs. Move-only and non-owning (moving
// leaves the source empty); give it back with BufferPool::put() or drop it before the pool is
// destroyed (a dropped buffer is not reused).
class PoolBuffer {
 public:
  PoolBuffer() = default;
  PoolBuffer(PoolBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  // REQUIRES: *this is empty (assigning over a lent buffer would lose it).
  PoolBuffer& operator=(PoolBuffer&& other) noexcept {
    assert(data_ == nullptr || this == &other);
    if (this != &other) {
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;

  std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  // [offset, offset + length) as a chunk; offset keeps the 4096-byte alignment's kChunkAlign
  // multiple (asserted in debug builds).
  ChunkView view(std::size_t offset, std::size_t length) const noexcept;

 private:
  friend class BufferPool;
  PoolBuffer(std::byte* data, std::size_t size) noexcept : data_(data), size_(size) {}

  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

class BufferPool {
 public:
  static constexpr std::size_t kMinBytes = 4096;
  static constexpr std::size_t kClasses = 9;  // 4 KiB .. 1 MiB
  static_assert((kMinBytes << (kClasses - 1)) == kMaxStripBytes);
  // A slab holds 8 buffers of its class, and is at least 1 MiB.
  static constexpr std::size_t kMinSlabBytes = std::size_t{1} << 20;
  static constexpr std::size_t kBuffersPerSlab = 8;

  // `registry` and `ring` (optional, must outlive the pool) are told about every slab.
  explicit BufferPool(HostMemoryRegistry* registry = nullptr,
                      HostMemoryRegistry* ring = nullptr) noexcept
      : registry_(registry), ring_(ring) {}
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer of at least `len` bytes (len <= kMaxStripBytes). Fails only when memory runs out.
  Result<PoolBuffer> get(std::size_t len);
  // Takes back a buffer this pool lent (an empty one is ignored).
  void put(PoolBuffer&& buffer);

  static constexpr std::size_t slab_bytes(std::size_t cls) noexcept {
    const std::size_t want = (kMinBytes << cls) * kBuffersPerSlab;
    return want < kMinSlabBytes ? kMinSlabBytes : want;
  }
  std::size_t slab_count() const noexcept { return slabs_.size(); }
  // Slabs `registry` / `ring` accepted.
  std::size_t registered_slab_count() const noexcept;
  std::size_t ring_registered_slab_count() const noexcept;

 private:
  struct Slab {
    AlignedBuffer memory;
    bool registered = false;
    bool ring_registered = false;
  };
  static std::size_t class_of(std::size_t len) noexcept;
  Status grow(std::size_t cls);

  HostMemoryRegistry* registry_ = nullptr;
  HostMemoryRegistry* ring_ = nullptr;
  bool registry_refused_ = false;  // logged once; later slabs are still offered
  std::vector<Slab> slabs_;
  std::array<std::vector<std::byte*>, kClasses> free_;
};

}  // namespace graid
