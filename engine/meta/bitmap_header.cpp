// The write-intent bitmap header's encoding and the bitmap's layout (meta/bitmap_header.h).
#include "meta/bitmap_header.h"

#include <algorithm>
#include <bit>

#include "meta/crc32c.h"
#include "meta/little_endian.h"

namespace graid::meta {
namespace {

// ---- Header byte layout (pinned by write_intent_bitmap_test; keep docs/on-disk-format.md true) --
constexpr std::size_t kOffMagic = 0;
constexpr std::size_t kOffMajor = 8;
constexpr std::size_t kOffMinor = 10;
constexpr std::size_t kOffCrc = 12;
constexpr std::size_t kOffUuid = 16;
constexpr std::size_t kOffRegionBytes = 32;
constexpr std::size_t kOffRegionCount = 40;
constexpr std::size_t kOffDataSize = 48;
constexpr std::size_t kOffDataOffset = 56;
constexpr std::size_t kOffEvents = 64;
constexpr std::size_t kOffPagesOffset = 72;
constexpr std::size_t kOffEventsCleared = 80;  // minor 1
constexpr std::size_t kHeaderUsedBytes = 88;   // the rest of the block is reserved, zero
static_assert(kHeaderUsedBytes <= kBitmapHeaderSize);

// CRC-32C of the header block as if its crc field were zero.
std::uint32_t header_crc(std::span<const std::byte> block) {
  static constexpr std::array<std::byte, 4> kZero{};
  std::uint32_t crc = crc32c(block.first(kOffCrc));
  crc = crc32c_extend(crc, kZero);
  return crc32c_extend(crc, block.subspan(kOffCrc + 4, kBitmapHeaderSize - kOffCrc - 4));
}

}  // namespace

// ---- Layout -------------------------------------------------------------------------------------

std::uint64_t bitmap_page_capacity(std::uint64_t data_offset) noexcept {
  if (data_offset < kBitmapPagesOffset) return 0;
  return (data_offset - kBitmapPagesOffset) / kBitmapPageSize;
}

std::uint64_t bitmap_region_count(std::uint64_t data_size, std::uint64_t region_bytes) noexcept {
  if (region_bytes == 0) return 0;
  return data_size / region_bytes + (data_size % region_bytes != 0 ? 1 : 0);
}

std::uint64_t bitmap_page_count(std::uint64_t region_count) noexcept {
  return region_count / kBitsPerPage + (region_count % kBitsPerPage != 0 ? 1 : 0);
}

Status validate_layout(std::uint64_t data_offset, std::uint64_t data_size,
                       std::uint64_t region_bytes) {
  if (!std::has_single_bit(region_bytes) || region_bytes < kMinRegionBytes)
    return make_error(Errc::kInvalidArgument,
                      "bitmap region size {} is not a power of two >= {} bytes", region_bytes,
                      kMinRegionBytes);
  if (data_size == 0) return make_error(Errc::kInvalidArgument, "bitmap data size is 0");
  if (data_offset % 4096 != 0)
    return make_error(Errc::kInvalidArgument, "data offset {} is not a multiple of 4096",
                      data_offset);
  const std::uint64_t capacity = bitmap_page_capacity(data_offset);
  const std::uint64_t needed = bitmap_page_count(bitmap_region_count(data_size, region_bytes));
  if (needed > capacity)
    return make_error(Errc::kNoSpace,
                      "bitmap needs {} bit pages for {} regions of {} bytes, but only {} fit "
                      "between byte {} and the data offset {}",
                      needed, bitmap_region_count(data_size, region_bytes), region_bytes, capacity,
                      kBitmapPagesOffset, data_offset);
  return Status::ok();
}

Result<std::uint64_t> choose_region_bytes(std::uint64_t data_size, std::uint64_t data_offset) {
  if (data_size == 0) return make_error(Errc::kInvalidArgument, "bitmap data size is 0");
  const std::uint64_t capacity_bits = bitmap_page_capacity(data_offset) * kBitsPerPage;
  if (capacity_bits == 0)
    return make_error(Errc::kNoSpace,
                      "data offset {} leaves no room for the write-intent bitmap (needs >= {})",
                      data_offset, kBitmapPagesOffset + kBitmapPageSize);
  // Terminates: capacity_bits >= kBitsPerPage, and at 2^48-byte regions any uint64 size needs
  // at most 2^16 regions.
  std::uint64_t region = kDefaultMinRegionBytes;
  while (bitmap_region_count(data_size, region) > capacity_bits)
    region <<= 1;
  return region;
}

// ---- Header -------------------------------------------------------------------------------------

Status encode_header(const BitmapHeader& header, std::span<std::byte> out) {
  if (out.size() < kBitmapHeaderSize)
    return make_error(Errc::kInvalidArgument, "bitmap header buffer holds {} bytes, needs {}",
                      out.size(), kBitmapHeaderSize);
  GRAID_RETURN_IF_ERROR(validate_layout(header.data_offset, header.data_size, header.region_bytes));
  const auto block = out.first(kBitmapHeaderSize);
  std::fill(block.begin(), block.end(), std::byte{0});
  std::copy(kBitmapMagic.begin(), kBitmapMagic.end(), block.begin() + kOffMagic);
  put_le<std::uint16_t>(block, kOffMajor, kBitmapMajorVersion);
  // Always our minor: bytes a newer minor gave meaning to are written as zero, so claiming that
  // minor would be a lie.
  put_le<std::uint16_t>(block, kOffMinor, kBitmapMinorVersion);
  std::copy(header.array_uuid.begin(), header.array_uuid.end(), block.begin() + kOffUuid);
  put_le<std::uint64_t>(block, kOffRegionBytes, header.region_bytes);
  put_le<std::uint64_t>(block, kOffRegionCount, header.region_count());
  put_le<std::uint64_t>(block, kOffDataSize, header.data_size);
  put_le<std::uint64_t>(block, kOffDataOffset, header.data_offset);
  put_le<std::uint64_t>(block, kOffEvents, header.events);
  put_le<std::uint64_t>(block, kOffPagesOffset, kBitmapPagesOffset);
  put_le<std::uint64_t>(block, kOffEventsCleared, header.events_cleared);
  put_le<std::uint32_t>(block, kOffCrc, header_crc(block));
  return Status::ok();
}

Result<BitmapHeader> decode_header(std::span<const std::byte> bytes) {
  if (bytes.size() < kBitmapHeaderSize)
    return make_error(Errc::kCorrupt, "bitmap header truncated: {} bytes, needs {}", bytes.size(),
                      kBitmapHeaderSize);
  const auto block = bytes.first(kBitmapHeaderSize);
  if (!std::equal(kBitmapMagic.begin(), kBitmapMagic.end(), block.begin() + kOffMagic))
    return make_error(Errc::kCorrupt, "bad bitmap magic (not a graid write-intent bitmap)");
  // The crc before the version, so a flipped version bit reads as corruption.
  const auto stored_crc = get_le<std::uint32_t>(block, kOffCrc);
  const std::uint32_t computed_crc = header_crc(block);
  if (stored_crc != computed_crc)
    return make_error(Errc::kCorrupt,
                      "bitmap header crc32c mismatch: stored {:#010x}, computed {:#010x}",
                      stored_crc, computed_crc);
  const auto major = get_le<std::uint16_t>(block, kOffMajor);
  if (major > kBitmapMajorVersion)
    return make_error(Errc::kUnsupported, "bitmap major version {} is newer than this build's {}",
                      major, kBitmapMajorVersion);
  if (major != kBitmapMajorVersion)
    return make_error(Errc::kCorrupt, "bad bitmap major version {}", major);

  BitmapHeader header;
  header.minor_version = get_le<std::uint16_t>(block, kOffMinor);
  std::copy_n(block.begin() + kOffUuid, header.array_uuid.size(), header.array_uuid.begin());
  header.region_bytes = get_le<std::uint64_t>(block, kOffRegionBytes);
  header.data_size = get_le<std::uint64_t>(block, kOffDataSize);
  header.data_offset = get_le<std::uint64_t>(block, kOffDataOffset);
  header.events = get_le<std::uint64_t>(block, kOffEvents);
  // Reserved (zero) in minor 0, so such a header reads as "unknown".
  header.events_cleared = get_le<std::uint64_t>(block, kOffEventsCleared);
  const auto pages_offset = get_le<std::uint64_t>(block, kOffPagesOffset);
  if (pages_offset != kBitmapPagesOffset)
    return make_error(Errc::kCorrupt, "bitmap pages offset {} is not {}", pages_offset,
                      kBitmapPagesOffset);
  if (Status s = validate_layout(header.data_offset, header.data_size, header.region_bytes); !s)
    return make_error(Errc::kCorrupt, "bad bitmap layout: {}", s.message());
  const auto stored_count = get_le<std::uint64_t>(block, kOffRegionCount);
  if (stored_count != header.region_count())
    return make_error(Errc::kCorrupt,
                      "bitmap region count {} does not match data size {} / region size {} "
                      "(expected {})",
                      stored_count, header.data_size, header.region_bytes, header.region_count());
  return header;
}

}  // namespace graid::meta
