#include "graid/buffer.h"

#include <cstdlib>
#include <cstring>

namespace graid {

void AlignedBuffer::Free::operator()(std::byte* p) const noexcept {
  std::free(p);
}

Result<AlignedBuffer> AlignedBuffer::allocate(std::size_t size, std::size_t alignment) {
  if (alignment < kChunkAlign || (alignment & (alignment - 1)) != 0) {
    return make_error(Errc::kInvalidArgument,
                      "buffer alignment {} is not a power of two of at least {}", alignment,
                      kChunkAlign);
  }
  AlignedBuffer buffer;
  buffer.alignment_ = alignment;
  if (size == 0) return buffer;
  // aligned_alloc wants a size that is a multiple of the alignment.
  const std::size_t rounded = (size + alignment - 1) & ~(alignment - 1);
  void* p = std::aligned_alloc(alignment, rounded);
  if (p == nullptr) {
    return make_error(Errc::kNoSpace, "cannot allocate {} bytes aligned to {}", size, alignment);
  }
  std::memset(p, 0, rounded);
  buffer.data_.reset(static_cast<std::byte*>(p));
  buffer.size_ = size;
  return buffer;
}

ChunkView AlignedBuffer::view() noexcept {
  return ChunkView(data_.get(), size_);
}

ChunkView AlignedBuffer::view(std::size_t offset, std::size_t length) noexcept {
  assert(offset <= size_ && length <= size_ - offset);
  assert(offset % kChunkAlign == 0);
  return ChunkView(data_.get() + offset, length);
}

Result<ChunkView> AlignedBuffer::view_checked(std::size_t offset, std::size_t length) noexcept {
  if (offset > size_ || length > size_ - offset) {
    return make_error(Errc::kOutOfRange, "view [{}, +{}) outside a buffer of {} bytes", offset,
                      length, size_);
  }
  if (offset % kChunkAlign != 0) {
    return make_error(Errc::kInvalidArgument, "view offset {} is not {}-byte aligned", offset,
                      kChunkAlign);
  }
  return ChunkView(data_.get() + offset, length);
}

Result<ChunkView> ChunkView::adopt(void* data, std::size_t length) noexcept {
  if (data == nullptr && length != 0) {
    return make_error(Errc::kInvalidArgument, "null chunk pointer with length {}", length);
  }
  if (!is_chunk_aligned(data)) {
    return make_error(Errc::kInvalidArgument, "chunk pointer {} is not {}-byte aligned", data,
                      kChunkAlign);
  }
  return ChunkView(static_cast<std::byte*>(data), length);
}

}  // namespace graid
