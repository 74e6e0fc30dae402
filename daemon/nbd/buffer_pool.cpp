#include "nbd/buffer_pool.h"

#include <bit>
#include <cassert>

namespace graid::nbd {

std::size_t BufferPool::class_of(std::size_t bytes) noexcept {
  const std::size_t rounded = std::bit_ceil(bytes < kMinBuffer ? kMinBuffer : bytes);
  return static_cast<std::size_t>(std::countr_zero(rounded) - std::countr_zero(kMinBuffer));
}

std::size_t BufferPool::class_bytes(std::size_t bytes) noexcept {
  return kMinBuffer << class_of(bytes);
}

Result<AlignedBuffer> BufferPool::take(std::size_t bytes) {
  const std::size_t c = class_of(bytes);
  assert(c < kClasses);
  if (c >= kClasses) return make_error(Errc::kInvalidArgument, "buffer of {} bytes", bytes);
  auto& list = free_[c];
  if (!list.empty()) {
    AlignedBuffer b = std::move(list.back());
    list.pop_back();
    cached_ -= b.size();
    return b;
  }
  return AlignedBuffer::allocate(kMinBuffer << c, 4096);
}

void BufferPool::give(AlignedBuffer buffer) {
  if (buffer.size() == 0) return;
  if (cached_ + buffer.size() > cache_bytes_) return;  // freed here
  const std::size_t c = class_of(buffer.size());
  if (c >= kClasses || (kMinBuffer << c) != buffer.size()) return;
  cached_ += buffer.size();
  free_[c].push_back(std::move(buffer));
}

}  // namespace graid::nbd
