#include "ublk/mapped_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace graid::ublk {

Result<MappedBuffer> MappedBuffer::map(std::size_t size) {
  return map_with(size, PROT_READ | PROT_WRITE);
}

Result<MappedBuffer> MappedBuffer::reserve(std::size_t size) {
  return map_with(size, PROT_NONE);
}

Result<MappedBuffer> MappedBuffer::map_with(std::size_t size, int prot) {
  MappedBuffer b;
  if (size == 0) return b;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t rounded = (size + page - 1) / page * page;
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (prot == PROT_NONE ? MAP_NORESERVE : 0);
  void* p = ::mmap(nullptr, rounded, prot, flags, -1, 0);
  if (p == MAP_FAILED)
    return make_error(Errc::kNoSpace, "cannot map {} bytes: {}", rounded, std::strerror(errno));
  b.data_ = static_cast<std::byte*>(p);
  b.size_ = rounded;
  return b;
}

std::size_t MappedBuffer::resident_bytes() const {
  if (data_ == nullptr) return 0;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core(size_ / page);
  if (::mincore(data_, size_, in_core.data()) != 0) return size_;  // unknown: say all of it
  std::size_t n = 0;
  for (unsigned char c : in_core)
    n += (c & 1) != 0 ? page : 0;
  return n;
}

void MappedBuffer::unmap() noexcept {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace graid::ublk
