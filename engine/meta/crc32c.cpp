#include "meta/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

#include "graid/checksum.h"

namespace graid::meta {

std::uint32_t crc32c_extend(std::uint32_t crc, std::span<const std::byte> data) noexcept {
  // ISA-L works on the raw register: seed with the inverted standard value, invert the result.
  unsigned int state = ~crc;
  // crc32_iscsi takes an int length; feed larger spans in pieces (chaining is exact).
  constexpr std::size_t kMaxPiece = std::size_t{1} << 30;
  while (!data.empty()) {
    const std::size_t piece = std::min(data.size(), kMaxPiece);
    // ISA-L's prototype lacks const but does not write through the pointer.
    auto* bytes = const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(data.data()));
    state = crc32_iscsi(bytes, static_cast<int>(piece), state);
    data = data.subspan(piece);
  }
  return ~state;
}

std::uint32_t crc32c(std::span<const std::byte> data) noexcept {
  return crc32c_extend(0, data);
}

}  // namespace graid::meta

namespace graid {

std::uint32_t crc32c(std::span<const std::byte> data) noexcept {
  return meta::crc32c(data);
}

}  // namespace graid
