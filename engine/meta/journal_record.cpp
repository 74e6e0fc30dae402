// Encoding and decoding of write-hole journal records (meta/journal_record.h).
#include "meta/journal_record.h"

#include <algorithm>
#include <cstring>

#include "meta/crc32c.h"

namespace graid::meta {
namespace {

constexpr std::array<std::byte, 8> kMagic = {std::byte{'g'}, std::byte{'r'}, std::byte{'a'},
                                             std::byte{'i'}, std::byte{'d'}, std::byte{'j'},
                                             std::byte{'n'}, std::byte{'l'}};
constexpr std::size_t kOffVersion = 8, kOffCrc = 12, kOffUuid = 16, kOffEpoch = 32, kOffSeq = 40,
                      kOffStripe = 48, kOffCount = 56, kOffPayload = 60, kOffPayloadCrc = 64,
                      kOffRecord = 68, kOffEntries = 72, kEntryBytes = 12;
// More entries than any stripe update can have (32 chunks, 512-byte pieces of a 1 MiB strip);
// bounds what a corrupt count can make the reader look at.
constexpr std::uint32_t kMaxEntries = 32 * 2048;

template <typename T>
void put(std::span<std::byte> out, std::size_t at, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}
template <typename T>
T get(std::span<const std::byte> in, std::size_t at) {
  T v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<T>(std::to_integer<std::uint8_t>(in[at + i])) << (8 * i);
  return v;
}
std::size_t round_up(std::uint64_t n) {
  return static_cast<std::size_t>((n + kJournalBlock - 1) / kJournalBlock * kJournalBlock);
}
std::uint32_t header_crc(std::span<const std::byte> header) {
  std::uint32_t crc = crc32c(header.first(kOffCrc));
  const std::array<std::byte, 4> zero{};
  crc = crc32c_extend(crc, zero);
  return crc32c_extend(crc, header.subspan(kOffCrc + 4));
}

}  // namespace

std::size_t journal_header_bytes(std::size_t entries) noexcept {
  return round_up(kOffEntries + entries * kEntryBytes);
}

std::size_t journal_record_bytes(std::size_t entries, std::uint64_t payload) noexcept {
  return journal_header_bytes(entries) + round_up(payload);
}

std::uint64_t journal_payload_bytes(const JournalHeader& header) noexcept {
  std::uint64_t total = 0;
  for (const JournalEntry& e : header.entries)
    total += e.len;
  return total;
}

Status encode_journal_header(const JournalHeader& header, std::span<std::byte> out) {
  const std::size_t bytes = journal_header_bytes(header.entries.size());
  if (out.size() < bytes || header.entries.size() > kMaxEntries) {
    return make_error(Errc::kInvalidArgument, "journal header of {} entries needs {} bytes",
                      header.entries.size(), bytes);
  }
  for (const JournalEntry& e : header.entries) {
    if (e.len == 0 || e.len % 512 != 0) {
      return make_error(Errc::kInvalidArgument, "journal entry length {} not a multiple of 512",
                        e.len);
    }
  }
  const std::uint64_t payload = journal_payload_bytes(header);
  const auto block = out.first(bytes);
  std::fill(block.begin(), block.end(), std::byte{0});
  std::copy(kMagic.begin(), kMagic.end(), block.begin());
  put<std::uint32_t>(block, kOffVersion, kJournalVersion);
  std::copy(header.array_uuid.begin(), header.array_uuid.end(), block.begin() + kOffUuid);
  put<std::uint64_t>(block, kOffEpoch, header.epoch);
  put<std::uint64_t>(block, kOffSeq, header.seq);
  put<std::uint64_t>(block, kOffStripe, header.stripe);
  put<std::uint32_t>(block, kOffCount, static_cast<std::uint32_t>(header.entries.size()));
  put<std::uint32_t>(block, kOffPayload, static_cast<std::uint32_t>(payload));
  put<std::uint32_t>(block, kOffPayloadCrc, header.payload_crc);
  put<std::uint32_t>(
      block, kOffRecord,
      static_cast<std::uint32_t>(journal_record_bytes(header.entries.size(), payload)));
  for (std::size_t i = 0; i < header.entries.size(); ++i) {
    const std::size_t at = kOffEntries + i * kEntryBytes;
    put<std::uint32_t>(block, at, header.entries[i].chunk);
    put<std::uint32_t>(block, at + 4, header.entries[i].offset);
    put<std::uint32_t>(block, at + 8, header.entries[i].len);
  }
  put<std::uint32_t>(block, kOffCrc, header_crc(block));
  return Status::ok();
}

Result<JournalHeader> decode_journal_header(std::span<const std::byte> bytes,
                                            const std::array<std::byte, 16>& array_uuid,
                                            std::uint64_t epoch) {
  if (bytes.size() < kJournalBlock || !std::equal(kMagic.begin(), kMagic.end(), bytes.begin())) {
    return make_error(Errc::kNotFound, "no journal record");
  }
  if (!std::equal(array_uuid.begin(), array_uuid.end(), bytes.begin() + kOffUuid) ||
      get<std::uint64_t>(bytes, kOffEpoch) != epoch) {
    return make_error(Errc::kNotFound, "a journal record of another array or epoch");
  }
  if (get<std::uint32_t>(bytes, kOffVersion) != kJournalVersion) {
    return make_error(Errc::kCorrupt, "journal record version {}",
                      get<std::uint32_t>(bytes, kOffVersion));
  }
  const auto count = get<std::uint32_t>(bytes, kOffCount);
  if (count == 0 || count > kMaxEntries) {
    return make_error(Errc::kCorrupt, "journal record with {} entries", count);
  }
  const std::size_t header_bytes = journal_header_bytes(count);
  if (bytes.size() < header_bytes) {
    return make_error(Errc::kCorrupt, "journal header of {} bytes truncated", header_bytes);
  }
  const auto head = bytes.first(header_bytes);
  if (header_crc(head) != get<std::uint32_t>(head, kOffCrc)) {
    return make_error(Errc::kCorrupt, "journal header crc mismatch");
  }
  JournalHeader h;
  std::copy(array_uuid.begin(), array_uuid.end(), h.array_uuid.begin());
  h.epoch = epoch;
  h.seq = get<std::uint64_t>(head, kOffSeq);
  h.stripe = get<std::uint64_t>(head, kOffStripe);
  h.payload_crc = get<std::uint32_t>(head, kOffPayloadCrc);
  h.entries.resize(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::size_t at = kOffEntries + i * kEntryBytes;
    h.entries[i] = JournalEntry{get<std::uint32_t>(head, at), get<std::uint32_t>(head, at + 4),
                                get<std::uint32_t>(head, at + 8)};
    if (h.entries[i].len == 0 || h.entries[i].len % 512 != 0) {
      return make_error(Errc::kCorrupt, "journal entry {} has length {}", i, h.entries[i].len);
    }
  }
  const std::uint64_t payload = journal_payload_bytes(h);
  if (payload != get<std::uint32_t>(head, kOffPayload) ||
      journal_record_bytes(count, payload) != get<std::uint32_t>(head, kOffRecord)) {
    return make_error(Errc::kCorrupt, "journal record sizes disagree");
  }
  return h;
}

}  // namespace graid::meta
