// The write-intent bitmap's header block and layout (docs/on-disk-format.md, "Write-intent
// bitmap"): where the bitmap sits on a member, how regions map to bits, and the header's
// encoding. Pure: no I/O, so graidctl examine reads it without the engine. The bitmap itself (its
// protocol and persistence) is meta/write_intent_bitmap.h.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "graid/status.h"

namespace graid::meta {

// ---- Placement and sizes ------------------------------------------------------------------------

// Where the bitmap header sits on every member. The 4 KiB after the superblock block stay free
// for a future backup superblock.
inline constexpr std::uint64_t kBitmapOffset = 8192;
// The header block, then the bit pages, each this many bytes (O_DIRECT-sized).
inline constexpr std::size_t kBitmapHeaderSize = 4096;
inline constexpr std::size_t kBitmapPageSize = 4096;
inline constexpr std::uint64_t kBitsPerPage = kBitmapPageSize * 8;
// Where bit page 0 starts.
inline constexpr std::uint64_t kBitmapPagesOffset = kBitmapOffset + kBitmapHeaderSize;
// Smallest region size accepted; region sizes are powers of two.
inline constexpr std::uint64_t kMinRegionBytes = 64 * 1024;
// Smallest region size choose_region_bytes() picks: finer regions cost more bit-page writes
// (one per newly touched region) for little less resync.
inline constexpr std::uint64_t kDefaultMinRegionBytes = 1024 * 1024;

// A major bump is an incompatible layout (readers refuse it); a minor bump only gives meaning to
// reserved bytes, which an older version writes as zero and ignores. So a field a minor adds must
// read as "unknown" when zero: an older writer that rewrites the header zeroes it.
//   minor 0: the first layout.
//   minor 1: events_cleared at bytes 80..87.
inline constexpr std::uint16_t kBitmapMajorVersion = 1;
inline constexpr std::uint16_t kBitmapMinorVersion = 1;

// The first 8 bytes of the header: ASCII "graid-bm".
inline constexpr std::array<std::byte, 8> kBitmapMagic = {
    std::byte{'g'}, std::byte{'r'}, std::byte{'a'}, std::byte{'i'},
    std::byte{'d'}, std::byte{'-'}, std::byte{'b'}, std::byte{'m'}};

using ArrayUuidBytes = std::array<std::byte, 16>;

// Bit pages that fit between the header and `data_offset` (0 when the header does not fit).
std::uint64_t bitmap_page_capacity(std::uint64_t data_offset) noexcept;
// Regions of `region_bytes` covering `data_size` bytes: ceil(data_size / region_bytes).
std::uint64_t bitmap_region_count(std::uint64_t data_size, std::uint64_t region_bytes) noexcept;
// Bit pages holding `region_count` bits: ceil(region_count / kBitsPerPage).
std::uint64_t bitmap_page_count(std::uint64_t region_count) noexcept;

// The smallest power of two >= kDefaultMinRegionBytes whose region count for `data_size` fits
// the bit pages available below `data_offset`. kInvalidArgument for data_size 0; kNoSpace when
// data_offset leaves no room for the header and one bit page.
Result<std::uint64_t> choose_region_bytes(std::uint64_t data_size, std::uint64_t data_offset);

// Checks a layout: region_bytes a power of two >= kMinRegionBytes, data_size > 0, data_offset a
// multiple of 4096, and the bit pages fit below data_offset. kInvalidArgument / kNoSpace naming
// the rule.
Status validate_layout(std::uint64_t data_offset, std::uint64_t data_size,
                       std::uint64_t region_bytes);

// ---- Header -------------------------------------------------------------------------------------

// The decoded header block. region_count is not stored here: it is always
// bitmap_region_count(data_size, region_bytes), and encode writes it so readers can check it.
struct BitmapHeader {
  // As read. encode_header() always writes kBitmapMinorVersion: it writes reserved bytes as zero.
  std::uint16_t minor_version = kBitmapMinorVersion;
  ArrayUuidBytes array_uuid{};
  std::uint64_t region_bytes = 0;
  std::uint64_t data_size = 0;    // member data bytes the bits cover
  std::uint64_t data_offset = 0;  // where the data area (and so the bitmap area) ends
  // Bumped each time the header is rewritten (created: 1, each persisted clear: +1). Members at a
  // lower count missed a clear: harmless for the union load() takes, and reported.
  std::uint64_t events = 1;
  // The re-add baseline (minor 1; md's events_cleared): the array's superblock event count when
  // bits were last cleared. A device whose own superblock is at or past it missed no write whose
  // bit is gone, so a re-add of it rebuilds only the set bits' regions. 0: unknown (a header of
  // minor 0, or one an older build rewrote): nothing can be trusted that way.
  std::uint64_t events_cleared = 0;

  std::uint64_t region_count() const noexcept {
    return bitmap_region_count(data_size, region_bytes);
  }
  friend bool operator==(const BitmapHeader&, const BitmapHeader&) = default;
};

using EncodedBitmapHeader = std::array<std::byte, kBitmapHeaderSize>;

// Serializes `header` (after validate_layout) into the first kBitmapHeaderSize bytes of `out`
// with its crc32c. kInvalidArgument if `out` is short or the layout is invalid.
Status encode_header(const BitmapHeader& header, std::span<std::byte> out);

// Parses a header from untrusted bytes (reads only the first kBitmapHeaderSize). kCorrupt for a
// short buffer, bad magic, bad crc, a stored region count that does not match data_size, or a
// layout validate_layout() refuses (e.g. more bits than the area holds); kUnsupported for an
// unknown major version. The message names the check. Never reads past `bytes`.
Result<BitmapHeader> decode_header(std::span<const std::byte> bytes);

}  // namespace graid::meta
