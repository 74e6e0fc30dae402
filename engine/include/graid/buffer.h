// Aligned memory for chunk data.
//
// Parity code (ISA-L's xor_gen/pq_gen, later the GPU's wide loads) and O_DIRECT I/O both need
// aligned buffers. Ceph crashed for years on misaligned buffers handed to ISA-L because the rule
// lived in a comment; here it lives in the types:
//
//   AlignedBuffer  owns memory whose start is aligned to kChunkAlign (or more).
//   ChunkView      a non-owning (pointer, length) whose pointer is known to be kChunkAlign-aligned.
//                  It can only be made from an AlignedBuffer or through ChunkView::adopt(), which
//                  checks the pointer and fails with a Status instead of trusting the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "graid/status.h"

namespace graid {

// Alignment every chunk pointer carries: one cache line, which also satisfies ISA-L (32 B) and
// 16-byte vector loads on the GPU.
inline constexpr std::size_t kChunkAlign = 64;

class ChunkView;

// Heap memory aligned to `alignment` (a power of two, at least kChunkAlign). Move-only; freed on
// destruction. Zero-filled on allocation so a fresh buffer never leaks old heap contents to disk.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Moving leaves the source empty (size 0), so a moved-from buffer never looks usable.
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::move(other.data_)),
        size_(std::exchange(other.size_, 0)),
        alignment_(other.alignment_) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    data_ = std::move(other.data_);
    size_ = std::exchange(other.size_, 0);
    alignment_ = other.alignment_;
    return *this;
  }

  // Allocates `size` bytes. Fails (kInvalidArgument) for a bad alignment, (kNoSpace) when the
  // allocation fails. A size of 0 gives an empty buffer.
  static Result<AlignedBuffer> allocate(std::size_t size, std::size_t alignment = kChunkAlign);

  std::byte* data() noexcept { return data_.get(); }
  const std::byte* data() const noexcept { return data_.get(); }
  std::size_t size() const noexcept { return size_; }
  std::size_t alignment() const noexcept { return alignment_; }
  std::span<std::byte> span() noexcept { return {data_.get(), size_}; }
  std::span<const std::byte> span() const noexcept { return {data_.get(), size_}; }

  // The whole buffer as a chunk.
  ChunkView view() noexcept;
  // A sub-range; `offset` must keep kChunkAlign alignment and the range must fit. Checked with
  // assert in debug builds; use view_checked() for untrusted offsets.
  ChunkView view(std::size_t offset, std::size_t length) noexcept;
  Result<ChunkView> view_checked(std::size_t offset, std::size_t length) noexcept;

 private:
  struct Free {
    void operator()(std::byte* p) const noexcept;
  };
  std::unique_ptr<std::byte[], Free> data_;
  std::size_t size_ = 0;
  std::size_t alignment_ = kChunkAlign;
};

// A chunk of memory: kChunkAlign-aligned pointer plus a length in bytes. Trivially copyable, as
// it sits in batch descriptors; it does not own what it points to.
class ChunkView {
 public:
  ChunkView() = default;

  // Wraps caller memory after checking its alignment (kInvalidArgument if misaligned or null
  // with a non-zero length).
  static Result<ChunkView> adopt(void* data, std::size_t length) noexcept;

  std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::span<std::byte> span() const noexcept { return {data_, size_}; }

 private:
  friend class AlignedBuffer;
  ChunkView(std::byte* data, std::size_t size) noexcept : data_(data), size_(size) {}

  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

inline bool is_chunk_aligned(const void* p) noexcept {
  return (reinterpret_cast<std::uintptr_t>(p) & (kChunkAlign - 1)) == 0;
}

}  // namespace graid
