// Replay of the write-hole journal at assembly (array/journal_replay.h).
#include "array/journal_replay.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "meta/crc32c.h"
#include "meta/journal_record.h"

namespace graid {
namespace {

// Where a valid record was found.
struct Found {
  std::uint32_t member = 0;
  std::uint64_t pos = 0;    // byte inside the journal area
  std::uint64_t bytes = 0;  // record bytes
};

// Finds the valid records in `area` (one member's journal area).
void scan(std::span<const std::byte> area, std::uint32_t member, const meta::Superblock& sb,
          std::map<std::uint64_t, Found>& found) {
  std::size_t pos = 0;
  while (pos + meta::kJournalBlock <= area.size()) {
    auto h = meta::decode_journal_header(area.subspan(pos), sb.array_uuid.bytes, sb.journal_epoch);
    if (!h) {
      pos += meta::kJournalBlock;
      continue;
    }
    const std::uint64_t payload = meta::journal_payload_bytes(*h);
    const std::size_t header = meta::journal_header_bytes(h->entries.size());
    const std::uint64_t bytes = meta::journal_record_bytes(h->entries.size(), payload);
    // A record cut short by the end of the area, or whose payload a later record overwrote in
    // part, is not one: its update's home writes had not started, or had finished long ago.
    if (bytes > area.size() - pos ||
        meta::crc32c(area.subspan(pos + header, static_cast<std::size_t>(payload))) !=
            h->payload_crc) {
      pos += meta::kJournalBlock;
      continue;
    }
    found.try_emplace(h->seq, Found{member, pos, bytes});
    pos += static_cast<std::size_t>(bytes);
  }
}

}  // namespace

Result<JournalReplayResult> replay_journal(Array::State& state, const meta::Superblock& sb) {
  JournalReplayResult out;
  if (sb.journal_bytes == 0) return out;
  const Geometry& g = state.geometry;
  const std::uint32_t n = g.members();
  auto area = AlignedBuffer::allocate(sb.journal_bytes, meta::kJournalBlock);
  if (!area) return area.status();

  std::map<std::uint64_t, Found> found;  // by seq: the order of replay
  for (std::uint32_t m = 0; m < n; ++m) {
    if (!state.members[m] || !state.takes_writes(m)) continue;
    if (Status st = state.members[m]->read_sync(sb.journal_offset, area->span()); !st) {
      Status fs = state.fail_member(m, fmt::format("journal read failed: {}", st.message()));
      (void)fs;
      if (state.array_failed()) return st;
      continue;
    }
    scan(area->span(), m, sb, found);
  }

  for (const auto& [seq, where] : found) {
    if (!state.members[where.member]) continue;
    const auto record = area->span().first(static_cast<std::size_t>(where.bytes));
    if (Status st = state.members[where.member]->read_sync(sb.journal_offset + where.pos, record);
        !st) {
      return st;
    }
    auto h = meta::decode_journal_header(record, sb.array_uuid.bytes, sb.journal_epoch);
    if (!h) return h.status();  // read back differently: the member is not trustworthy
    std::size_t at = meta::journal_header_bytes(h->entries.size());
    for (const meta::JournalEntry& e : h->entries) {
      if (e.chunk >= g.data_strips() + g.parity_strips() || e.offset > g.strip_bytes() ||
          e.len > g.strip_bytes() - e.offset || h->stripe >= state.data_size / g.strip_bytes()) {
        return make_error(Errc::kCorrupt, "journal record {} names stripe {} chunk {} at {}+{}",
                          seq, h->stripe, e.chunk, e.offset, e.len);
      }
      const std::uint32_t member = g.chunk_member(h->stripe, e.chunk);
      const auto data = record.subspan(at, e.len);
      at += e.len;
      if (!state.members[member] || !state.takes_writes(member)) {
        ++out.skipped_strips;
        continue;
      }
      const std::uint64_t at_member = state.device_offset(h->stripe * g.strip_bytes() + e.offset);
      if (Status st = state.members[member]->write_sync(at_member, data); !st) {
        Status fs =
            state.fail_member(member, fmt::format("journal replay write: {}", st.message()));
        (void)fs;
        if (state.array_failed()) return st;
        continue;
      }
      out.bytes += e.len;
    }
    ++out.records;
  }
  for (std::uint32_t m = 0; m < n; ++m) {
    if (!state.members[m] || !state.takes_writes(m)) continue;
    if (Status st = state.members[m]->flush_sync(); !st) {
      Status fs = state.fail_member(m, fmt::format("flush after journal replay: {}", st.message()));
      (void)fs;
      if (state.array_failed()) return st;
    }
  }
  return out;
}

Status clear_journal_area(MemberDevice& device, std::uint64_t offset, std::uint64_t bytes) {
  if (bytes == 0) return Status::ok();
  Status st = device.zero_range(offset, bytes);
  if (st.code() == Errc::kUnsupported) {
    constexpr std::size_t kPiece = std::size_t{1} << 20;
    auto zeroes = AlignedBuffer::allocate(kPiece, meta::kJournalBlock);
    if (!zeroes) return zeroes.status();
    st = Status::ok();
    for (std::uint64_t at = 0; at < bytes && st; at += kPiece) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(kPiece, bytes - at));
      st = device.write_sync(offset + at, zeroes->span().first(n));
    }
  }
  GRAID_RETURN_IF_ERROR(st);
  return device.flush_sync();
}

}  // namespace graid
