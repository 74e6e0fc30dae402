// Data buffers for NBD requests, shared by the connections of one server thread (not
// thread-safe: the server's thread only).
//
// A request's buffer holds its READ data or WRITE payload (up to kMaxPayload, 32 MiB). Buffers
// come in power-of-two size classes from 4 KiB, 4096-byte aligned (O_DIRECT members), and go back
// to a free list when the reply has been sent, so steady traffic allocates nothing and new memory
// is touched (slow here: page faults) only while the working set grows. The free lists keep at
// most `cache_bytes` in total; beyond that returned buffers are freed. What is in use is bounded
// by the sessions (NbdServerOptions: requests and bytes in flight per connection).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "graid/buffer.h"
#include "graid/status.h"

namespace graid::nbd {

class BufferPool {
 public:
  static constexpr std::size_t kMinBuffer = 4096;
  static constexpr std::size_t kClasses = 14;  // 4 KiB .. 32 MiB

  explicit BufferPool(std::size_t cache_bytes) : cache_bytes_(cache_bytes) {}

  // The size class `bytes` is served from: the buffer's real size, >= bytes. REQUIRES bytes <=
  // 32 MiB.
  static std::size_t class_bytes(std::size_t bytes) noexcept;

  // A buffer of at least `bytes` (kNoSpace when memory runs out).
  Result<AlignedBuffer> take(std::size_t bytes);
  // Returns a buffer from take().
  void give(AlignedBuffer buffer);

  std::size_t cached_bytes() const noexcept { return cached_; }

 private:
  static std::size_t class_of(std::size_t bytes) noexcept;

  std::size_t cache_bytes_;
  std::size_t cached_ = 0;
  std::array<std::vector<AlignedBuffer>, kClasses> free_;
};

}  // namespace graid::nbd
