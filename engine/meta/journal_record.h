// The on-disk record of the write-hole journal (engine/journal/journal.h): one stripe update's new
// contents (data strips and parity), written to the journal area of the stripe's parity members
// before the update goes to its home locations. Pure encoding and decoding, no I/O.
//
//   record = header (header_bytes, a multiple of 4096) + payload (entries' bytes in order,
//            padded to 4096)
//   header:  0 magic "graidjnl"   8 u32 version (1)   12 u32 header crc32c (this field as 0)
//           16 array uuid (16)   32 u64 epoch        40 u64 seq      48 u64 stripe
//           56 u32 entry count   60 u32 payload bytes  64 u32 payload crc32c
//           68 u32 record bytes  72 entries: u32 chunk, u32 offset in strip, u32 length (12 B)
// All little-endian. A chunk is a data strip index 0..k-1, then P (k) and Q (k+1).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "graid/status.h"

namespace graid::meta {

inline constexpr std::size_t kJournalBlock = 4096;
inline constexpr std::uint32_t kJournalVersion = 1;

struct JournalEntry {
  std::uint32_t chunk = 0;   // data strip index, then P, Q
  std::uint32_t offset = 0;  // byte offset inside the strip
  std::uint32_t len = 0;     // bytes, a multiple of 512

  friend bool operator==(const JournalEntry&, const JournalEntry&) = default;
};

struct JournalHeader {
  std::array<std::byte, 16> array_uuid{};
  std::uint64_t epoch = 0;
  std::uint64_t seq = 0;
  std::uint64_t stripe = 0;
  std::vector<JournalEntry> entries;
  std::uint32_t payload_crc = 0;  // crc32c of the payload bytes (not the padding)
};

// Bytes of the header for `entries` entries, and of the whole record for `payload` bytes.
std::size_t journal_header_bytes(std::size_t entries) noexcept;
std::size_t journal_record_bytes(std::size_t entries, std::uint64_t payload) noexcept;
// The payload bytes a header's entries describe.
std::uint64_t journal_payload_bytes(const JournalHeader& header) noexcept;

// Writes `header` into out[0, journal_header_bytes(entries)) (zero-filled first), computing the
// header crc. kInvalidArgument if `out` is too small or an entry length is not a multiple of 512.
Status encode_journal_header(const JournalHeader& header, std::span<std::byte> out);

// A header parsed from untrusted bytes at the start of `bytes`, accepted only for `array_uuid`
// and `epoch`. kNotFound when it is not a record of that array and epoch (no magic, another
// array or epoch: the usual case while scanning), kCorrupt when the magic matches but the rest
// does not (a torn or overwritten record).
Result<JournalHeader> decode_journal_header(std::span<const std::byte> bytes,
                                            const std::array<std::byte, 16>& array_uuid,
                                            std::uint64_t epoch);

}  // namespace graid::meta
