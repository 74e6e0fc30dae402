// Anonymous memory straight from mmap, untouched until used: the copy-mode tags' buffers (depth
// × max I/O per queue, 256 MiB a device by default) take physical pages only where requests have
// been, unlike an AlignedBuffer, which is zero-filled (and so resident) at once. Pages the kernel
// gives an anonymous mapping read as zeroes, so nothing old can leak to a drive either. Also
// address space alone (reserve()): the zero-copy tags' windows.
#pragma once

#include <cstddef>
#include <utility>

#include "graid/status.h"

namespace graid::ublk {

class MappedBuffer {
 public:
  MappedBuffer() = default;
  MappedBuffer(MappedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  MappedBuffer& operator=(MappedBuffer&& other) noexcept {
    if (this != &other) {
      unmap();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~MappedBuffer() { unmap(); }

  // `size` bytes (rounded up to the page size), page-aligned; kNoSpace when mmap refuses.
  static Result<MappedBuffer> map(std::size_t size);
  // Address space only (PROT_NONE, no memory behind it): windows that stand for kernel buffers
  // (IoContext::add_kernel_buffer_slot). Touching it faults.
  static Result<MappedBuffer> reserve(std::size_t size);

  std::byte* data() noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  // Bytes of it in memory now (mincore).
  std::size_t resident_bytes() const;

 private:
  void unmap() noexcept;
  static Result<MappedBuffer> map_with(std::size_t size, int prot);

  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace graid::ublk
