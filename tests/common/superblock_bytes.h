// Edits of a member's superblock bytes as other software would leave them, for tests of what
// graid does with metadata it cannot decode: a newer graid's format, or a damaged block. Works on
// the file (or device) directly, with its own CRC-32C (docs/on-disk-format.md, "Checksum"), so the
// tests do not lean on the code they test.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

namespace graid::testing {

// CRC-32C (Castagnoli), bit by bit.
inline std::uint32_t reference_crc32c(const std::byte* data, std::size_t n) {
  std::uint32_t crc = ~0u;
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= static_cast<std::uint8_t>(data[i]);
    for (int k = 0; k < 8; ++k)
      crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// Rewrites the superblock at the start of `path` as a build of format `major`.`minor` would
// claim it, its crc made to match: a well-formed block of a format this build may not know.
inline void stamp_superblock_version(const std::string& path, std::uint16_t major,
                                     std::uint16_t minor) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  std::array<std::byte, 4096> block{};
  f.read(reinterpret_cast<char*>(block.data()), block.size());
  ASSERT_TRUE(f.good()) << path;
  const auto put = [&](std::size_t at, std::uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i)
      block[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
  };
  put(8, major, 2);
  put(10, minor, 2);
  put(12, 0, 4);
  put(12, reference_crc32c(block.data(), block.size()), 4);
  f.seekp(0);
  f.write(reinterpret_cast<const char*>(block.data()), block.size());
  ASSERT_TRUE(f.good()) << path;
}

// Flips one bit of byte `at` of `path` (a damaged superblock when `at` < 4096).
inline void flip_bit(const std::string& path, std::size_t at) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(static_cast<std::streamoff>(at));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(static_cast<char>(c ^ 1));
  ASSERT_TRUE(f.good()) << path;
}

}  // namespace graid::testing
