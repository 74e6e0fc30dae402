#include "stripe/buffer_pool.h"

#include <spdlog/spdlog.h>

#include <bit>

namespace graid {

ChunkView PoolBuffer::view(std::size_t offset, std::size_t length) const noexcept {
  assert(offset + length <= size_);
  auto chunk = ChunkView::adopt(data_ + offset, length);
  assert(chunk.is_ok());  // slabs are 4096-aligned, buffers a multiple of 4096 apart
  return chunk.is_ok() ? *chunk : ChunkView{};
}

BufferPool::~BufferPool() {
  for (Slab& slab : slabs_) {
    if (slab.registered) registry_->remove_region(slab.memory.span());
    if (slab.ring_registered) ring_->remove_region(slab.memory.span());
  }
}

std::size_t BufferPool::class_of(std::size_t len) noexcept {
  const std::size_t rounded = std::bit_ceil(len < kMinBytes ? kMinBytes : len);
  return static_cast<std::size_t>(std::countr_zero(rounded / kMinBytes));
}

std::size_t BufferPool::registered_slab_count() const noexcept {
  std::size_t n = 0;
  for (const Slab& slab : slabs_)
    n += slab.registered ? 1 : 0;
  return n;
}

std::size_t BufferPool::ring_registered_slab_count() const noexcept {
  std::size_t n = 0;
  for (const Slab& slab : slabs_)
    n += slab.ring_registered ? 1 : 0;
  return n;
}

Status BufferPool::grow(std::size_t cls) {
  const std::size_t bytes = slab_bytes(cls);
  auto memory = AlignedBuffer::allocate(bytes, 4096);
  if (!memory) return memory.status();
  Slab slab{std::move(*memory), false, false};
  if (registry_ != nullptr) {
    const Status st = registry_->add_region(slab.memory.span());
    slab.registered = st.is_ok();
    if (!st.is_ok() && !registry_refused_) {
      registry_refused_ = true;
      spdlog::warn(
          "graid: staging memory not registered with the parity device ({}); chunks "
          "are staged through the device's own buffers instead",
          st.to_string());
    }
  }
  // A slab the ring refuses (no slot left, RLIMIT_MEMLOCK) still works: its I/O pins pages per
  // request, as unregistered memory always does.
  if (ring_ != nullptr) slab.ring_registered = ring_->add_region(slab.memory.span()).is_ok();
  const std::size_t size = kMinBytes << cls;
  std::byte* base = slab.memory.data();
  for (std::size_t off = 0; off + size <= bytes; off += size)
    free_[cls].push_back(base + off);
  slabs_.push_back(std::move(slab));
  return Status::ok();
}

Result<PoolBuffer> BufferPool::get(std::size_t len) {
  assert(len <= kMaxStripBytes);
  const std::size_t cls = class_of(len);
  auto& list = free_[cls];
  if (list.empty()) GRAID_RETURN_IF_ERROR(grow(cls));
  std::byte* p = list.back();
  list.pop_back();
  return PoolBuffer(p, kMinBytes << cls);
}

void BufferPool::put(PoolBuffer&& buffer) {
  if (buffer.data() == nullptr) return;
  const PoolBuffer taken = std::move(buffer);  // leaves the caller's handle empty
  free_[class_of(taken.size())].push_back(taken.data());
}

}  // namespace graid
