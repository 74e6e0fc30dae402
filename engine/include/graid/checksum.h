// CRC-32C for graid's callers outside the engine (graidd's event log): the engine's metadata
// CRC (engine/meta/crc32c.h), the same function under a public name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace graid {

// CRC-32C (Castagnoli; crc32c("123456789") == 0xE3069283) of `data`.
std::uint32_t crc32c(std::span<const std::byte> data) noexcept;
inline std::uint32_t crc32c(std::string_view text) noexcept {
  return crc32c(std::as_bytes(std::span<const char>(text.data(), text.size())));
}

}  // namespace graid
