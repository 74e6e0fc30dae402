// Per-thread pool of staging buffers for stripe operations (old data, images, parity).
//
// Size classes are powers of two from 4 KiB to the largest strip (1 MiB); buffers are 4096-byte
// aligned (O_DIRECT) and kept on per-class free lists after use, so a thread that has warmed up
// allocates nothing per I/O. Not thread-safe: one pool per ArrayQueue.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <vector>

#include "graid/buffer.h"
#include "graid/geometry.h"

namespace graid {

class BufferPool {
 public:
  static constexpr std::size_t kMinBytes = 4096;
  static constexpr std::size_t kClasses = 9;  // 4 KiB .. 1 MiB
  static_assert((kMinBytes << (kClasses - 1)) == kMaxStripBytes);

  // A buffer of at least `len` bytes (len <= kMaxStripBytes). Fails only when memory runs out.
  Result<AlignedBuffer> get(std::size_t len) {
    const std::size_t cls = class_of(len);
    auto& list = free_[cls];
    if (!list.empty()) {
      AlignedBuffer b = std::move(list.back());
      list.pop_back();
      return b;
    }
    return AlignedBuffer::allocate(kMinBytes << cls, 4096);
  }

  void put(AlignedBuffer&& buffer) {
    if (buffer.size() == 0) return;
    free_[class_of(buffer.size())].push_back(std::move(buffer));
  }

 private:
  static std::size_t class_of(std::size_t len) {
    const std::size_t rounded = std::bit_ceil(len < kMinBytes ? kMinBytes : len);
    return static_cast<std::size_t>(std::countr_zero(rounded / kMinBytes));
  }

  std::array<std::vector<AlignedBuffer>, kClasses> free_;
};

}  // namespace graid
