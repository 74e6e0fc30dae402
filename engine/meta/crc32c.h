// CRC-32C (Castagnoli, the iSCSI / ext4 / NVMe CRC) for on-disk metadata.
//
// Standard convention: reflected polynomial 0x82F63B78, initial value ~0, final xor ~0, so
// crc32c("123456789") == 0xE3069283. Values chain: crc32c_extend(crc32c(a), b) == crc32c(a + b),
// which lets a caller skip over a field (the superblock's own crc) without copying the block.
//
// Backed by ISA-L's crc32_iscsi (SSE4.2 / PCLMUL / AVX-512 at run time). ISA-L's function takes
// the *internal* register state as its seed and returns it without the final inversion; the
// wrappers here convert, so nothing outside crc32c.cpp sees that convention.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace graid::meta {

// CRC-32C of `data` (the empty span gives 0).
std::uint32_t crc32c(std::span<const std::byte> data) noexcept;

// Continues a CRC-32C: given `crc` = crc32c(a), returns crc32c(a followed by `data`).
// crc32c_extend(0, data) == crc32c(data).
std::uint32_t crc32c_extend(std::uint32_t crc, std::span<const std::byte> data) noexcept;

}  // namespace graid::meta
