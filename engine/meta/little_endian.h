// Little-endian integers at byte offsets of on-disk blocks, written and read byte by byte (no
// packed-struct copies), so the metadata format is the same on every host
// (docs/on-disk-format.md, "Encoding rules").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace graid::meta {

template <typename T>
void put_le(std::span<std::byte> out, std::size_t offset, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out[offset + i] = static_cast<std::byte>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xff);
}

template <typename T>
T get_le(std::span<const std::byte> in, std::size_t offset) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    value |= static_cast<std::uint64_t>(in[offset + i]) << (8 * i);
  return static_cast<T>(value);
}

}  // namespace graid::meta
