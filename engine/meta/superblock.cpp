#include "meta/superblock.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "meta/crc32c.h"
#include "meta/little_endian.h"

namespace graid::meta {
namespace {

// ---- On-disk layout (docs/on-disk-format.md; superblock_test pins these) ------------------------

// Frozen prefix: the same bytes mean the same thing in every major version, so a reader can
// always tell "a superblock of a version I do not know" from "garbage".
constexpr std::size_t kOffMagic = 0;    // 8 bytes
constexpr std::size_t kOffMajor = 8;    // u16
constexpr std::size_t kOffMinor = 10;   // u16
constexpr std::size_t kOffCrc = 12;     // u32
constexpr std::size_t kOffSbSize = 16;  // u32
constexpr std::size_t kFrozenPrefix = 20;
// Major 1 header.
constexpr std::size_t kOffArrayFlags = 20;   // u32
constexpr std::size_t kOffEvents = 24;       // u64
constexpr std::size_t kOffCtime = 32;        // u64
constexpr std::size_t kOffUtime = 40;        // u64
constexpr std::size_t kOffArrayUuid = 48;    // 16 bytes
constexpr std::size_t kOffMemberUuid = 64;   // 16 bytes
constexpr std::size_t kOffMemberIndex = 80;  // u32
constexpr std::size_t kOffLevel = 84;        // u32
constexpr std::size_t kOffMemberCount = 88;  // u32
constexpr std::size_t kOffSpareCount = 92;   // u32
constexpr std::size_t kOffStripBytes = 96;   // u32
constexpr std::size_t kOffReserved0 = 100;   // 4 bytes reserved
constexpr std::size_t kOffDataOffset = 104;  // u64
constexpr std::size_t kOffDataSize = 112;    // u64
constexpr std::size_t kOffInitCkpt = 120;    // u64
constexpr std::size_t kOffResyncCkpt = 128;  // u64
constexpr std::size_t kOffCheckCkpt = 136;   // u64
constexpr std::size_t kOffName = 144;        // char[32]
constexpr std::size_t kNameField = kMaxArrayNameLen + 1;
constexpr std::size_t kOffSettings = 176;  // minor 1: 5 x u8, StoredSettings in order
constexpr std::size_t kSettingsBytes = 5;
constexpr std::size_t kOffInitMethod = 181;     // minor 5: u8, InitMethodCode
constexpr std::size_t kOffReserved1 = 182;      // 2 bytes reserved
constexpr std::size_t kOffJournalOffset = 184;  // minor 2: u64
constexpr std::size_t kOffJournalBytes = 192;   // minor 2: u64
constexpr std::size_t kOffJournalEpoch = 200;   // minor 2: u64
constexpr std::size_t kJournalFieldBytes = 24;
constexpr std::size_t kOffReplaceRole = 208;    // minor 3: u32, role + 1 (0: no replace)
constexpr std::size_t kOffReplaceSlot = 212;    // minor 3: u32
constexpr std::size_t kOffReplaceCopied = 216;  // minor 3: u64
constexpr std::size_t kOffReplaceEvents = 224;  // minor 3: u64
constexpr std::size_t kReplaceFieldBytes = 24;
constexpr std::size_t kOffJournalCovered = 232;  // minor 4: u64, events when covered (0: no)
constexpr std::size_t kOffReserved1b = 240;      // 16 bytes reserved
constexpr std::size_t kOffMemberTable = 256;     // kMaxMembers entries
constexpr std::size_t kMemberEntrySize = 32;
constexpr std::size_t kOffVdTable = kOffMemberTable + kMaxMembers * kMemberEntrySize;  // 1280
constexpr std::size_t kVdEntrySize = 64;
constexpr std::size_t kOffBadList = kOffVdTable + kMaxVds * kVdEntrySize;  // 2304, minor 4
// Bad-range list: count(u32) reserved(u32, 0) reserved(u64, 0), then kMaxBadRanges entries of
// offset(u64) len(u32) reserved(u32, 0); unused entries zero.
constexpr std::size_t kBadListHeader = 16;
constexpr std::size_t kBadEntrySize = 16;
constexpr std::size_t kBadListBytes = kBadListHeader + kMaxBadRanges * kBadEntrySize;  // 1040
constexpr std::size_t kOffReserved2 = kOffBadList + kBadListBytes;                     // 3344

// Member entry: uuid(16) state(u32) flags(u32) rebuild_offset(u64).
constexpr std::size_t kMeUuid = 0;
constexpr std::size_t kMeState = 16;
constexpr std::size_t kMeFlags = 20;
constexpr std::size_t kMeRebuild = 24;
// VD entry: id(u32) flags(u32) start(u64) size(u64) name(char[40]).
constexpr std::size_t kVeId = 0;
constexpr std::size_t kVeFlags = 4;
constexpr std::size_t kVeStart = 8;
constexpr std::size_t kVeSize = 16;
constexpr std::size_t kVeName = 24;
constexpr std::size_t kVdNameField = kMaxVdNameLen + 1;

// The reserved areas, in the order their bytes are concatenated into Superblock::reserved.
struct Region {
  std::size_t offset;
  std::size_t size;
};
constexpr std::array<Region, 4> kReservedRegions = {{
    {kOffReserved0, kOffDataOffset - kOffReserved0},
    {kOffReserved1, kOffJournalOffset - kOffReserved1},
    {kOffReserved1b, kOffMemberTable - kOffReserved1b},
    {kOffReserved2, kSuperblockSize - kOffReserved2},
}};

constexpr std::size_t reserved_total() {
  std::size_t total = 0;
  for (const Region& r : kReservedRegions)
    total += r.size;
  return total;
}

static_assert(kSuperblockSize % 4096 == 0, "the superblock must be O_DIRECT-sized");
static_assert(kOffName + kNameField == kOffSettings);
static_assert(kOffSettings + kSettingsBytes == kOffInitMethod);
static_assert(kOffInitMethod + 1 == kOffReserved1);
static_assert(kOffJournalOffset + kJournalFieldBytes == kOffReplaceRole);
static_assert(kOffReplaceRole + kReplaceFieldBytes == kOffJournalCovered);
static_assert(kOffJournalCovered + 8 == kOffReserved1b);
static_assert(kVeName + kVdNameField == kVdEntrySize);
static_assert(kMeRebuild + 8 == kMemberEntrySize);
static_assert(kOffVdTable == 1280 && kOffBadList == 2304 && kOffReserved2 == 3344);
static_assert(reserved_total() == kReservedBytes, "Superblock::reserved must cover every gap");
// Fields + reserved bytes account for the whole block: nothing is left undefined.
static_assert(kOffReserved0 - 0 + (kOffSettings - kOffDataOffset) + kSettingsBytes + 1 +
                  kJournalFieldBytes + kReplaceFieldBytes + 8 + (kOffReserved2 - kOffMemberTable) +
                  reserved_total() ==
              kSuperblockSize);

// The settings bytes in on-disk order (from kOffSettings), with the largest code each knows.
struct SettingField {
  std::uint8_t StoredSettings::*field;
  const char* what;
  std::uint8_t max_code;
};
constexpr std::array<SettingField, kSettingsBytes> kSettingFields = {{
    {&StoredSettings::rebuild_speed, "rebuild speed", kMaxSpeedCode},
    {&StoredSettings::init_speed, "init speed", kMaxSpeedCode},
    {&StoredSettings::check_speed, "check speed", kMaxSpeedCode},
    {&StoredSettings::resync_speed, "resync speed", kMaxSpeedCode},
    {&StoredSettings::journal_policy, "journal policy", kMaxJournalCode},
}};
// The minor version that gave bytes kOffSettings.. their meaning.
constexpr std::uint16_t kSettingsMinor = 1;
// The minor version that gave bytes kOffJournalOffset.. their meaning.
constexpr std::uint16_t kJournalMinor = 2;
// The minor version that gave bytes kOffReplaceRole.. their meaning.
constexpr std::uint16_t kReplaceMinor = 3;
// The minor version that gave bytes kOffJournalCovered.. and kOffBadList.. their meaning.
constexpr std::uint16_t kBadRangesMinor = 4;
// The minor version that gave byte kOffInitMethod its meaning.
constexpr std::uint16_t kInitMethodMinor = 5;

// On-disk value of a Checkpoint with no job pending.
constexpr std::uint64_t kNoCheckpoint = std::numeric_limits<std::uint64_t>::max();
// Largest superblock a future major version may declare; bounds what we try to checksum.
constexpr std::uint32_t kMaxAnySbSize = 1u << 20;

void put_bytes(std::span<std::byte> out, std::size_t offset, std::span<const std::byte> bytes) {
  std::copy(bytes.begin(), bytes.end(), out.begin() + static_cast<std::ptrdiff_t>(offset));
}

Uuid get_uuid(std::span<const std::byte> in, std::size_t offset) {
  Uuid uuid;
  std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(offset), uuid.bytes.size(),
              uuid.bytes.begin());
  return uuid;
}

// A NUL-padded fixed text field. REQUIRES: text.size() < field (validate() checked).
void put_name(std::span<std::byte> out, std::size_t offset, std::size_t field,
              std::string_view text) {
  for (std::size_t i = 0; i < field; ++i) {
    out[offset + i] = i < text.size() ? static_cast<std::byte>(text[i]) : std::byte{0};
  }
}

// Reads a NUL-padded fixed text field: a NUL must end the text, and only NULs may follow it
// (so that re-encoding gives the same bytes).
Result<std::string> get_name(std::span<const std::byte> in, std::size_t offset, std::size_t field,
                             std::string_view what) {
  const auto bytes = in.subspan(offset, field);
  const auto nul = std::find(bytes.begin(), bytes.end(), std::byte{0});
  if (nul == bytes.end()) return make_error(Errc::kCorrupt, "{} is not NUL-terminated", what);
  if (std::any_of(nul, bytes.end(), [](std::byte b) { return b != std::byte{0}; })) {
    return make_error(Errc::kCorrupt, "{} has bytes after its terminating NUL", what);
  }
  std::string text;
  for (auto it = bytes.begin(); it != nul; ++it) {
    text.push_back(static_cast<char>(std::to_integer<unsigned char>(*it)));
  }
  return text;
}

// CRC-32C of the first `size` bytes of `block` as if the crc field were zero.
std::uint32_t block_crc(std::span<const std::byte> block, std::size_t size) {
  constexpr std::array<std::byte, 4> kZeroCrc{};
  std::uint32_t crc = crc32c(block.first(kOffCrc));
  crc = crc32c_extend(crc, kZeroCrc);
  return crc32c_extend(crc, block.subspan(kOffCrc + 4, size - kOffCrc - 4));
}

bool is_zero(std::span<const std::byte> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

bool has_nul(std::string_view text) {
  return text.find('\0') != std::string_view::npos;
}

// The semantic rules of a superblock, failing with `code` (kInvalidArgument for validate(),
// kCorrupt for decode()).
Status check(const Superblock& sb, Errc code) {
  const bool newer_minor = sb.minor_version > kMinorVersion;
  const std::uint32_t slots = sb.member_count + sb.spare_count;  // both <= 32 once checked

  if (sb.events == 0) return make_error(code, "event counter is 0");
  if (sb.array_uuid.is_nil()) return make_error(code, "array UUID is nil");
  if (sb.member_count == 0 || sb.member_count > kMaxMembers) {
    return make_error(code, "member count {} not in 1..{}", sb.member_count, kMaxMembers);
  }
  if (sb.spare_count > kMaxMembers - sb.member_count) {
    return make_error(code, "member count {} + spare count {} exceeds {}", sb.member_count,
                      sb.spare_count, kMaxMembers);
  }
  if (sb.member_index >= slots) {
    return make_error(code, "member index {} >= member count {} + spare count {}", sb.member_index,
                      sb.member_count, sb.spare_count);
  }
  const auto level_value = static_cast<std::uint32_t>(sb.level);
  if (!is_valid_raid_level_value(level_value)) {
    return make_error(code, "unknown RAID level value {}", level_value);
  }
  const Result<Geometry> geometry = Geometry::make(sb.level, sb.member_count, sb.strip_bytes);
  if (!geometry) return make_error(code, "impossible geometry: {}", geometry.status().message());
  if (!newer_minor && (sb.array_flags & ~kArrayKnownFlags) != 0) {
    return make_error(code, "unknown array flags {:#x}", sb.array_flags & ~kArrayKnownFlags);
  }

  if (sb.data_offset % kDataAlign != 0) {
    return make_error(code, "data offset {} not a multiple of {}", sb.data_offset, kDataAlign);
  }
  if (sb.data_offset < kMinDataOffset) {
    return make_error(code, "data offset {} overlaps the superblock (needs >= {})", sb.data_offset,
                      kMinDataOffset);
  }
  if (sb.data_size % kDataAlign != 0) {
    return make_error(code, "data size {} not a multiple of {}", sb.data_size, kDataAlign);
  }
  if (sb.data_size < sb.strip_bytes) {
    return make_error(code, "data size {} smaller than one strip ({})", sb.data_size,
                      sb.strip_bytes);
  }
  if (sb.data_size > std::numeric_limits<std::uint64_t>::max() - sb.data_offset) {
    return make_error(code, "data area end overflows (offset {} + size {})", sb.data_offset,
                      sb.data_size);
  }
  if (sb.journal_bytes != 0) {
    if (sb.journal_offset % kDataAlign != 0 || sb.journal_bytes % kDataAlign != 0) {
      return make_error(code, "journal area {}+{} not aligned to {}", sb.journal_offset,
                        sb.journal_bytes, kDataAlign);
    }
    if (sb.journal_offset < kMinDataOffset || sb.journal_bytes > sb.data_offset ||
        sb.journal_offset > sb.data_offset - sb.journal_bytes) {
      return make_error(code, "journal area {}+{} not between the superblock and the data ({})",
                        sb.journal_offset, sb.journal_bytes, sb.data_offset);
    }
  } else if (sb.journal_offset != 0) {
    return make_error(code, "journal offset {} without a journal area", sb.journal_offset);
  }
  const std::pair<const char*, const Checkpoint*> checkpoints[] = {
      {"init", &sb.init_checkpoint},
      {"resync", &sb.resync_checkpoint},
      {"check", &sb.check_checkpoint}};
  for (const auto& [what, ckpt] : checkpoints) {
    if (ckpt->has_value() && **ckpt > sb.data_size) {
      return make_error(code, "{} checkpoint {} beyond data size {}", what, **ckpt, sb.data_size);
    }
  }
  if (sb.name.size() > kMaxArrayNameLen || has_nul(sb.name)) {
    return make_error(code, "array name longer than {} bytes or holding a NUL", kMaxArrayNameLen);
  }
  // Closed code sets, in every minor (see StoredSettings).
  for (const SettingField& f : kSettingFields) {
    const std::uint8_t value = sb.settings.*f.field;
    if (value > f.max_code) {
      return make_error(code, "{} code {} unknown (1..{}, 0 = unset)", f.what, value, f.max_code);
    }
  }
  if (sb.init_method > kMaxInitMethodCode) {
    return make_error(code, "init method code {} unknown (1..{}, 0 = not recorded)", sb.init_method,
                      kMaxInitMethodCode);
  }

  // Member table.
  std::vector<Uuid> uuids;
  for (std::uint32_t i = 0; i < kMaxMembers; ++i) {
    const MemberEntry& m = sb.members[i];
    if (i >= slots) {
      if (!(m == MemberEntry{})) return make_error(code, "unused member slot {} is not zero", i);
      continue;
    }
    switch (m.state) {
      case MemberState::kActive:
      case MemberState::kFailed:
      case MemberState::kRebuilding:
      case MemberState::kRemoved:
        if (i >= sb.member_count) {
          return make_error(code, "spare slot {} in state {}", i, member_state_name(m.state));
        }
        break;
      case MemberState::kSpare:
        if (i < sb.member_count) return make_error(code, "role slot {} in state spare", i);
        break;
      case MemberState::kEmpty:
        return make_error(code, "member slot {} (< member count + spares) is empty", i);
      default:
        return make_error(code, "member slot {} has unknown state {}", i,
                          static_cast<std::uint32_t>(m.state));
    }
    if (m.uuid.is_nil()) {
      if (m.state != MemberState::kRemoved) {
        return make_error(code, "member slot {} ({}) has a nil UUID", i,
                          member_state_name(m.state));
      }
    } else {
      if (m.uuid == sb.array_uuid) {
        return make_error(code, "member slot {} UUID equals the array UUID", i);
      }
      uuids.push_back(m.uuid);
    }
    if (m.state == MemberState::kRebuilding) {
      if (m.rebuild_offset > sb.data_size) {
        return make_error(code, "member slot {} rebuild checkpoint {} beyond data size {}", i,
                          m.rebuild_offset, sb.data_size);
      }
    } else if (m.rebuild_offset != 0) {
      return make_error(code, "member slot {} has a rebuild checkpoint but is {}", i,
                        member_state_name(m.state));
    }
    if (!newer_minor && m.flags != 0) {
      return make_error(code, "member slot {} has unknown flags {:#x}", i, m.flags);
    }
  }
  std::sort(uuids.begin(), uuids.end());
  if (std::adjacent_find(uuids.begin(), uuids.end()) != uuids.end()) {
    return make_error(code, "duplicate member UUID {} in the member table",
                      std::adjacent_find(uuids.begin(), uuids.end())->to_string());
  }
  if (sb.member_uuid.is_nil()) return make_error(code, "member UUID is nil");
  if (sb.member_uuid != sb.members[sb.member_index].uuid) {
    return make_error(code, "member UUID {} is not the one in slot {}", sb.member_uuid.to_string(),
                      sb.member_index);
  }
  if (sb.replace) {
    const ReplaceRecord& r = *sb.replace;
    if (r.role >= sb.member_count) {
      return make_error(code, "hot replace of role {} >= member count {}", r.role, sb.member_count);
    }
    if (r.slot < sb.member_count || r.slot >= sb.member_count + sb.spare_count ||
        sb.members[r.slot].state != MemberState::kSpare) {
      return make_error(code, "hot replace device in slot {}, which is not a spare slot", r.slot);
    }
    if (r.copied > sb.data_size || r.copied % sb.strip_bytes != 0) {
      return make_error(code, "hot replace checkpoint {} beyond data size {} or not whole strips",
                        r.copied, sb.data_size);
    }
    if (r.events == 0 || r.events > sb.events) {
      return make_error(code, "hot replace record of event {} in a superblock of event {}",
                        r.events, sb.events);
    }
  }

  // VD table.
  const std::uint64_t capacity = geometry->data_capacity(sb.data_size);
  std::vector<std::pair<std::uint64_t, std::size_t>> extents;  // (start, table index)
  for (std::size_t i = 0; i < kMaxVds; ++i) {
    const VdEntry& vd = sb.vds[i];
    if (!vd.in_use()) {
      if (!(vd == VdEntry{})) return make_error(code, "unused VD entry {} is not zero", i);
      continue;
    }
    if (!newer_minor && (vd.flags & ~kVdKnownFlags) != 0) {
      return make_error(code, "VD entry {} has unknown flags {:#x}", i, vd.flags & ~kVdKnownFlags);
    }
    if (vd.size == 0) return make_error(code, "VD entry {} has size 0", i);
    if (vd.start % kDataAlign != 0 || vd.size % kDataAlign != 0) {
      return make_error(code, "VD entry {} extent ({}, {}) not aligned to {}", i, vd.start, vd.size,
                        kDataAlign);
    }
    if (vd.start > capacity || vd.size > capacity - vd.start) {
      return make_error(code, "VD entry {} extent ({}, {}) beyond the array capacity {}", i,
                        vd.start, vd.size, capacity);
    }
    if (vd.name.size() > kMaxVdNameLen || has_nul(vd.name)) {
      return make_error(code, "VD entry {} name longer than {} bytes or holding a NUL", i,
                        kMaxVdNameLen);
    }
    for (const auto& [start, other] : extents) {
      (void)start;
      if (sb.vds[other].id == vd.id) {
        return make_error(code, "VD entries {} and {} share id {}", other, i, vd.id);
      }
    }
    extents.emplace_back(vd.start, i);
  }
  if (sb.bad_ranges.size() > kMaxBadRanges) {
    return make_error(code, "{} bad ranges, at most {}", sb.bad_ranges.size(), kMaxBadRanges);
  }
  for (std::size_t i = 0; i < sb.bad_ranges.size(); ++i) {
    const BadRange& r = sb.bad_ranges[i];
    if (r.len == 0 || r.offset % 512 != 0 || r.len % 512 != 0 || r.offset > capacity ||
        r.len > capacity - r.offset) {
      return make_error(code,
                        "bad range {} ({}, {}) empty, not 512-aligned or beyond the "
                        "array capacity {}",
                        i, r.offset, r.len, capacity);
    }
    if (i > 0 && sb.bad_ranges[i - 1].offset + sb.bad_ranges[i - 1].len > r.offset) {
      return make_error(code, "bad ranges {} and {} overlap or are out of order", i - 1, i);
    }
  }
  std::sort(extents.begin(), extents.end());
  for (std::size_t j = 1; j < extents.size(); ++j) {
    const VdEntry& prev = sb.vds[extents[j - 1].second];
    const VdEntry& next = sb.vds[extents[j].second];
    if (prev.start + prev.size > next.start) {
      return make_error(code, "VD entries {} and {} overlap", extents[j - 1].second,
                        extents[j].second);
    }
  }

  if (!newer_minor && !is_zero(sb.reserved)) {
    return make_error(code, "reserved bytes not zero in a minor {} superblock", sb.minor_version);
  }
  return Status::ok();
}

}  // namespace

// ---- Uuid
// -----------------------------------------------------------------------------------------

Result<Uuid> Uuid::generate() {
  Uuid uuid;
  std::size_t filled = 0;
  while (filled < uuid.bytes.size()) {
    const ssize_t got = getrandom(uuid.bytes.data() + filled, uuid.bytes.size() - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return make_error(Errc::kIoError, "getrandom failed: {}", std::strerror(errno));
    }
    filled += static_cast<std::size_t>(got);
  }
  // RFC 4122 version 4 (random) and variant 10xx, so other tools read it as a random UUID.
  uuid.bytes[6] = (uuid.bytes[6] & std::byte{0x0f}) | std::byte{0x40};
  uuid.bytes[8] = (uuid.bytes[8] & std::byte{0x3f}) | std::byte{0x80};
  return uuid;
}

Result<Uuid> Uuid::parse(std::string_view text) {
  const bool dashed = text.size() == 36;
  if (!dashed && text.size() != 32) {
    return make_error(Errc::kInvalidArgument, "UUID '{}' is not 32 hex digits (dashes optional)",
                      text);
  }
  auto hex_value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  Uuid uuid;
  std::size_t pos = 0;
  for (std::size_t i = 0; i < uuid.bytes.size(); ++i) {
    if (dashed && (pos == 8 || pos == 13 || pos == 18 || pos == 23)) {
      if (text[pos] != '-') {
        return make_error(Errc::kInvalidArgument, "UUID '{}' lacks a dash at position {}", text,
                          pos);
      }
      ++pos;
    }
    const int hi = hex_value(text[pos]);
    const int lo = hex_value(text[pos + 1]);
    if (hi < 0 || lo < 0) {
      return make_error(Errc::kInvalidArgument, "UUID '{}' has a non-hex digit near position {}",
                        text, pos);
    }
    uuid.bytes[i] = static_cast<std::byte>(hi * 16 + lo);
    pos += 2;
  }
  return uuid;
}

std::string Uuid::to_string() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  text.reserve(36);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text.push_back('-');
    const auto b = std::to_integer<unsigned>(bytes[i]);
    text.push_back(kHex[b >> 4]);
    text.push_back(kHex[b & 0xf]);
  }
  return text;
}

bool Uuid::is_nil() const noexcept {
  return is_zero(bytes);
}

std::string_view member_state_name(MemberState state) noexcept {
  switch (state) {
    case MemberState::kEmpty:
      return "empty";
    case MemberState::kActive:
      return "active";
    case MemberState::kFailed:
      return "failed";
    case MemberState::kSpare:
      return "spare";
    case MemberState::kRebuilding:
      return "rebuilding";
    case MemberState::kRemoved:
      return "removed";
  }
  return "unknown";
}

// ---- Superblock -------------------------------------------------------------------------------

Result<Geometry> Superblock::geometry() const {
  if (!is_valid_raid_level_value(static_cast<std::uint32_t>(level))) {
    return make_error(Errc::kInvalidArgument, "unknown RAID level value {}",
                      static_cast<std::uint32_t>(level));
  }
  return Geometry::make(level, member_count, strip_bytes);
}

std::uint64_t Superblock::data_capacity() const {
  const Result<Geometry> g = geometry();
  return g ? g->data_capacity(data_size) : 0;
}

Status validate(const Superblock& sb) {
  return check(sb, Errc::kInvalidArgument);
}

Status encode(const Superblock& sb, std::span<std::byte> out) {
  if (out.size() < kSuperblockSize) {
    return make_error(Errc::kInvalidArgument, "superblock buffer of {} bytes, need {}", out.size(),
                      kSuperblockSize);
  }
  GRAID_RETURN_IF_ERROR(validate(sb));
  const auto block = out.first(kSuperblockSize);
  std::fill(block.begin(), block.end(), std::byte{0});

  put_bytes(block, kOffMagic, kSuperblockMagic);
  put_le<std::uint16_t>(block, kOffMajor, kMajorVersion);
  // A copy from an older minor is upgraded: this writer knows every field of its own minor.
  put_le<std::uint16_t>(block, kOffMinor, std::max(sb.minor_version, kMinorVersion));
  put_le<std::uint32_t>(block, kOffSbSize, kSuperblockSize);
  put_le<std::uint32_t>(block, kOffArrayFlags, sb.array_flags);
  put_le<std::uint64_t>(block, kOffEvents, sb.events);
  put_le<std::uint64_t>(block, kOffCtime, sb.ctime_ns);
  put_le<std::uint64_t>(block, kOffUtime, sb.utime_ns);
  put_bytes(block, kOffArrayUuid, sb.array_uuid.bytes);
  put_bytes(block, kOffMemberUuid, sb.member_uuid.bytes);
  put_le<std::uint32_t>(block, kOffMemberIndex, sb.member_index);
  put_le<std::uint32_t>(block, kOffLevel, static_cast<std::uint32_t>(sb.level));
  put_le<std::uint32_t>(block, kOffMemberCount, sb.member_count);
  put_le<std::uint32_t>(block, kOffSpareCount, sb.spare_count);
  put_le<std::uint32_t>(block, kOffStripBytes, sb.strip_bytes);
  put_le<std::uint64_t>(block, kOffDataOffset, sb.data_offset);
  put_le<std::uint64_t>(block, kOffDataSize, sb.data_size);
  put_le<std::uint64_t>(block, kOffInitCkpt, sb.init_checkpoint.value_or(kNoCheckpoint));
  put_le<std::uint64_t>(block, kOffResyncCkpt, sb.resync_checkpoint.value_or(kNoCheckpoint));
  put_le<std::uint64_t>(block, kOffCheckCkpt, sb.check_checkpoint.value_or(kNoCheckpoint));
  put_name(block, kOffName, kNameField, sb.name);
  for (std::size_t i = 0; i < kSettingFields.size(); ++i) {
    block[kOffSettings + i] = std::byte{sb.settings.*kSettingFields[i].field};
  }
  block[kOffInitMethod] = std::byte{sb.init_method};
  put_le<std::uint64_t>(block, kOffJournalOffset, sb.journal_offset);
  put_le<std::uint64_t>(block, kOffJournalBytes, sb.journal_bytes);
  put_le<std::uint64_t>(block, kOffJournalEpoch, sb.journal_epoch);
  if (sb.replace) {
    put_le<std::uint32_t>(block, kOffReplaceRole, sb.replace->role + 1);
    put_le<std::uint32_t>(block, kOffReplaceSlot, sb.replace->slot);
    put_le<std::uint64_t>(block, kOffReplaceCopied, sb.replace->copied);
    put_le<std::uint64_t>(block, kOffReplaceEvents, sb.replace->events);
  }
  put_le<std::uint64_t>(block, kOffJournalCovered, sb.journal_covered_at);
  put_le<std::uint32_t>(block, kOffBadList, static_cast<std::uint32_t>(sb.bad_ranges.size()));
  for (std::size_t i = 0; i < sb.bad_ranges.size(); ++i) {
    const std::size_t base = kOffBadList + kBadListHeader + i * kBadEntrySize;
    put_le<std::uint64_t>(block, base, sb.bad_ranges[i].offset);
    put_le<std::uint32_t>(block, base + 8, sb.bad_ranges[i].len);
  }

  for (std::size_t i = 0; i < kMaxMembers; ++i) {
    const MemberEntry& m = sb.members[i];
    const std::size_t base = kOffMemberTable + i * kMemberEntrySize;
    put_bytes(block, base + kMeUuid, m.uuid.bytes);
    put_le<std::uint32_t>(block, base + kMeState, static_cast<std::uint32_t>(m.state));
    put_le<std::uint32_t>(block, base + kMeFlags, m.flags);
    put_le<std::uint64_t>(block, base + kMeRebuild, m.rebuild_offset);
  }
  for (std::size_t i = 0; i < kMaxVds; ++i) {
    const VdEntry& vd = sb.vds[i];
    const std::size_t base = kOffVdTable + i * kVdEntrySize;
    put_le<std::uint32_t>(block, base + kVeId, vd.id);
    put_le<std::uint32_t>(block, base + kVeFlags, vd.flags);
    put_le<std::uint64_t>(block, base + kVeStart, vd.start);
    put_le<std::uint64_t>(block, base + kVeSize, vd.size);
    put_name(block, base + kVeName, kVdNameField, vd.name);
  }
  std::size_t reserved_pos = 0;
  for (const Region& r : kReservedRegions) {
    put_bytes(block, r.offset, std::span(sb.reserved).subspan(reserved_pos, r.size));
    reserved_pos += r.size;
  }

  put_le<std::uint32_t>(block, kOffCrc, block_crc(block, kSuperblockSize));
  return Status::ok();
}

Result<EncodedSuperblock> encode(const Superblock& sb) {
  EncodedSuperblock block{};
  GRAID_RETURN_IF_ERROR(encode(sb, block));
  return block;
}

std::optional<FormatVersion> peek_version(std::span<const std::byte> bytes) noexcept {
  if (bytes.size() < kOffMinor + 2) return std::nullopt;
  if (!std::equal(kSuperblockMagic.begin(), kSuperblockMagic.end(), bytes.begin()))
    return std::nullopt;
  return FormatVersion{get_le<std::uint16_t>(bytes, kOffMajor),
                       get_le<std::uint16_t>(bytes, kOffMinor)};
}

Result<Superblock> decode(std::span<const std::byte> bytes) {
  // 1. Identity and integrity, on the frozen prefix only.
  if (bytes.size() < kSuperblockSize) {
    return make_error(Errc::kCorrupt, "truncated superblock: {} bytes, need {}", bytes.size(),
                      kSuperblockSize);
  }
  if (!std::equal(kSuperblockMagic.begin(), kSuperblockMagic.end(), bytes.begin())) {
    return make_error(Errc::kCorrupt, "bad magic: not a graid superblock");
  }
  const auto major = get_le<std::uint16_t>(bytes, kOffMajor);
  const auto minor = get_le<std::uint16_t>(bytes, kOffMinor);
  const auto sb_size = get_le<std::uint32_t>(bytes, kOffSbSize);
  const auto stored_crc = get_le<std::uint32_t>(bytes, kOffCrc);
  if (major == kMajorVersion && sb_size != kSuperblockSize) {
    return make_error(Errc::kCorrupt, "superblock size {} for major {}, expected {}", sb_size,
                      major, kSuperblockSize);
  }
  if (sb_size < kFrozenPrefix || sb_size % 4096 != 0 || sb_size > kMaxAnySbSize) {
    return make_error(Errc::kCorrupt, "implausible superblock size {}", sb_size);
  }
  if (sb_size > bytes.size()) {
    // Only a major we do not know can be larger than ours; the crc needs all its bytes.
    return make_error(Errc::kUnsupported,
                      "superblock major version {} ({} bytes, {} given) is not supported by this "
                      "build (major {})",
                      major, sb_size, bytes.size(), kMajorVersion);
  }
  // Check the crc before the version, so a flipped version bit reads as corruption.
  const std::uint32_t computed_crc = block_crc(bytes, sb_size);
  if (computed_crc != stored_crc) {
    return make_error(Errc::kCorrupt, "crc32c mismatch: stored {:#010x}, computed {:#010x}",
                      stored_crc, computed_crc);
  }
  if (major != kMajorVersion) {
    return make_error(Errc::kUnsupported,
                      "superblock major version {} is not supported by this build (major {})",
                      major, kMajorVersion);
  }

  // 2. Fields. Values the in-memory types cannot hold (enum values, text) are checked here; the
  // rest by check().
  const auto block = bytes.first(kSuperblockSize);
  Superblock sb;
  sb.minor_version = minor;
  sb.array_flags = get_le<std::uint32_t>(block, kOffArrayFlags);
  sb.events = get_le<std::uint64_t>(block, kOffEvents);
  sb.ctime_ns = get_le<std::uint64_t>(block, kOffCtime);
  sb.utime_ns = get_le<std::uint64_t>(block, kOffUtime);
  sb.array_uuid = get_uuid(block, kOffArrayUuid);
  sb.member_uuid = get_uuid(block, kOffMemberUuid);
  sb.member_index = get_le<std::uint32_t>(block, kOffMemberIndex);
  const auto level = get_le<std::uint32_t>(block, kOffLevel);
  if (!is_valid_raid_level_value(level)) {
    return make_error(Errc::kCorrupt, "unknown RAID level value {}", level);
  }
  sb.level = static_cast<RaidLevel>(level);
  sb.member_count = get_le<std::uint32_t>(block, kOffMemberCount);
  sb.spare_count = get_le<std::uint32_t>(block, kOffSpareCount);
  sb.strip_bytes = get_le<std::uint32_t>(block, kOffStripBytes);
  sb.data_offset = get_le<std::uint64_t>(block, kOffDataOffset);
  sb.data_size = get_le<std::uint64_t>(block, kOffDataSize);
  const std::pair<std::size_t, Checkpoint*> checkpoints[] = {
      {kOffInitCkpt, &sb.init_checkpoint},
      {kOffResyncCkpt, &sb.resync_checkpoint},
      {kOffCheckCkpt, &sb.check_checkpoint}};
  for (const auto& [offset, ckpt] : checkpoints) {
    const auto value = get_le<std::uint64_t>(block, offset);
    if (value != kNoCheckpoint) *ckpt = value;
  }
  Result<std::string> name = get_name(block, kOffName, kNameField, "array name");
  if (!name) return name.status();
  sb.name = std::move(name).value();
  // Reserved (zero) before minor 1, so a minor 0 copy reads with every setting unset; anything
  // else there is caught below.
  for (std::size_t i = 0; i < kSettingFields.size(); ++i) {
    sb.settings.*kSettingFields[i].field = std::to_integer<std::uint8_t>(block[kOffSettings + i]);
  }
  // Reserved (zero) before minor 5: an older copy reads as "not recorded".
  sb.init_method = std::to_integer<std::uint8_t>(block[kOffInitMethod]);
  // Reserved (zero) before minor 2: a minor 0 or 1 copy reads with no journal area.
  sb.journal_offset = get_le<std::uint64_t>(block, kOffJournalOffset);
  sb.journal_bytes = get_le<std::uint64_t>(block, kOffJournalBytes);
  sb.journal_epoch = get_le<std::uint64_t>(block, kOffJournalEpoch);
  // Reserved (zero) before minor 3: a copy of an older minor reads with no hot replace.
  const bool replace_bytes = !is_zero(block.subspan(kOffReplaceRole, kReplaceFieldBytes));
  if (const auto role = get_le<std::uint32_t>(block, kOffReplaceRole); role != 0) {
    sb.replace = ReplaceRecord{role - 1, get_le<std::uint32_t>(block, kOffReplaceSlot),
                               get_le<std::uint64_t>(block, kOffReplaceCopied),
                               get_le<std::uint64_t>(block, kOffReplaceEvents)};
  } else if (replace_bytes) {
    return make_error(Errc::kCorrupt, "hot replace fields set (bytes {}..{}) without a role",
                      kOffReplaceRole, kOffReplaceRole + kReplaceFieldBytes - 1);
  }

  // Reserved (zero) before minor 4: a copy of an older minor reads as not covered, no bad range.
  sb.journal_covered_at = get_le<std::uint64_t>(block, kOffJournalCovered);
  const bool minor4_bytes =
      sb.journal_covered_at != 0 || !is_zero(block.subspan(kOffBadList, kBadListBytes));
  const auto bad_count = get_le<std::uint32_t>(block, kOffBadList);
  if (bad_count > kMaxBadRanges) {
    return make_error(Errc::kCorrupt, "bad-range list holds {} entries, at most {}", bad_count,
                      kMaxBadRanges);
  }
  if (!is_zero(block.subspan(kOffBadList + 4, kBadListHeader - 4))) {
    return make_error(Errc::kCorrupt, "bad-range list header has reserved bytes set");
  }
  for (std::size_t i = 0; i < kMaxBadRanges; ++i) {
    const std::size_t base = kOffBadList + kBadListHeader + i * kBadEntrySize;
    if (i >= bad_count || get_le<std::uint32_t>(block, base + 12) != 0) {
      if (!is_zero(block.subspan(base, kBadEntrySize))) {
        return make_error(Errc::kCorrupt,
                          "bad-range entry {} is unused or has reserved bytes set "
                          "but is not zero",
                          i);
      }
      continue;
    }
    sb.bad_ranges.push_back(
        BadRange{get_le<std::uint64_t>(block, base), get_le<std::uint32_t>(block, base + 8)});
  }

  for (std::size_t i = 0; i < kMaxMembers; ++i) {
    MemberEntry& m = sb.members[i];
    const std::size_t base = kOffMemberTable + i * kMemberEntrySize;
    m.uuid = get_uuid(block, base + kMeUuid);
    const auto state = get_le<std::uint32_t>(block, base + kMeState);
    if (state > static_cast<std::uint32_t>(MemberState::kRemoved)) {
      return make_error(Errc::kCorrupt, "member slot {} has unknown state {}", i, state);
    }
    m.state = static_cast<MemberState>(state);
    m.flags = get_le<std::uint32_t>(block, base + kMeFlags);
    m.rebuild_offset = get_le<std::uint64_t>(block, base + kMeRebuild);
  }
  for (std::size_t i = 0; i < kMaxVds; ++i) {
    VdEntry& vd = sb.vds[i];
    const std::size_t base = kOffVdTable + i * kVdEntrySize;
    vd.id = get_le<std::uint32_t>(block, base + kVeId);
    vd.flags = get_le<std::uint32_t>(block, base + kVeFlags);
    vd.start = get_le<std::uint64_t>(block, base + kVeStart);
    vd.size = get_le<std::uint64_t>(block, base + kVeSize);
    Result<std::string> vd_name =
        get_name(block, base + kVeName, kVdNameField, fmt::format("VD entry {} name", i));
    if (!vd_name) return vd_name.status();
    vd.name = std::move(vd_name).value();
  }
  std::size_t reserved_pos = 0;
  for (const Region& r : kReservedRegions) {
    const auto src = block.subspan(r.offset, r.size);
    std::copy(src.begin(), src.end(),
              sb.reserved.begin() + static_cast<std::ptrdiff_t>(reserved_pos));
    reserved_pos += r.size;
  }

  // 3. Semantics.
  GRAID_RETURN_IF_ERROR(check(sb, Errc::kCorrupt));
  if (minor < kSettingsMinor && !(sb.settings == StoredSettings{})) {
    return make_error(Errc::kCorrupt,
                      "reserved bytes not zero in a minor {} superblock (bytes {}..{}, settings "
                      "since minor {})",
                      minor, kOffSettings, kOffSettings + kSettingsBytes - 1, kSettingsMinor);
  }
  if (minor < kJournalMinor &&
      (sb.journal_offset != 0 || sb.journal_bytes != 0 || sb.journal_epoch != 0)) {
    return make_error(Errc::kCorrupt,
                      "reserved bytes not zero in a minor {} superblock (bytes {}..{}, journal "
                      "area since minor {})",
                      minor, kOffJournalOffset, kOffJournalOffset + kJournalFieldBytes - 1,
                      kJournalMinor);
  }
  if (minor < kReplaceMinor && replace_bytes) {
    return make_error(Errc::kCorrupt,
                      "reserved bytes not zero in a minor {} superblock (bytes {}..{}, hot "
                      "replace since minor {})",
                      minor, kOffReplaceRole, kOffReplaceRole + kReplaceFieldBytes - 1,
                      kReplaceMinor);
  }
  if (minor < kBadRangesMinor && minor4_bytes) {
    return make_error(Errc::kCorrupt,
                      "reserved bytes not zero in a minor {} superblock (journal coverage at "
                      "{}..{} or the bad-range list at {}..{}, since minor {})",
                      minor, kOffJournalCovered, kOffJournalCovered + 7, kOffBadList,
                      kOffBadList + kBadListBytes - 1, kBadRangesMinor);
  }
  if (minor < kInitMethodMinor && sb.init_method != kInitMethodNotRecorded) {
    return make_error(Errc::kCorrupt,
                      "reserved bytes not zero in a minor {} superblock (byte {}, the init method "
                      "since minor {})",
                      minor, kOffInitMethod, kInitMethodMinor);
  }
  return sb;
}

bool same_array_state(const Superblock& a, const Superblock& b) {
  Superblock a_as_b = a;
  a_as_b.member_uuid = b.member_uuid;
  a_as_b.member_index = b.member_index;
  return a_as_b == b;
}

Result<NewestCopy> pick_newest(std::span<const Superblock> copies, const Uuid& array_uuid) {
  NewestCopy out;
  bool found = false;
  for (std::size_t i = 0; i < copies.size(); ++i) {
    if (copies[i].array_uuid != array_uuid) {
      out.foreign.push_back(i);
    } else if (!found || copies[i].events > out.events) {
      found = true;
      out.newest = i;
      out.events = copies[i].events;
    }
  }
  if (!found) {
    return make_error(Errc::kNotFound, "no superblock of array {} among {} copies",
                      array_uuid.to_string(), copies.size());
  }
  const Superblock& newest = copies[out.newest];
  out.slot_of.resize(copies.size());
  for (std::size_t i = 0; i < copies.size(); ++i) {
    const Superblock& sb = copies[i];
    out.slot_of[i] = sb.member_index;
    if (sb.array_uuid != array_uuid) continue;
    if (sb.events < out.events) {
      const auto active_as = [&](std::uint32_t slot) {
        return slot < newest.member_count + newest.spare_count && slot < newest.members.size() &&
               newest.members[slot].state == MemberState::kActive &&
               newest.members[slot].uuid == sb.member_uuid;
      };
      bool listed_active = active_as(sb.member_index);
      // A hot replacement one update short of its swap: the newest copy has it in the role.
      if (!listed_active && sb.replace && sb.replace->slot == sb.member_index &&
          sb.replace->role < newest.member_count && active_as(sb.replace->role)) {
        listed_active = true;
        out.slot_of[i] = sb.replace->role;
      }
      if (sb.events + 1 == out.events && listed_active) {
        out.behind.push_back(i);
      } else {
        out.stale.push_back(i);
        continue;
      }
    } else if (!same_array_state(newest, sb)) {
      return make_error(Errc::kCorrupt,
                        "copies {} and {} of array {} are both at event {} but disagree on the "
                        "array state (a split brain, or members of two different histories)",
                        out.newest, i, array_uuid.to_string(), out.events);
    }
    for (const std::size_t j : out.in_sync) {
      if (copies[j].member_uuid == sb.member_uuid) {
        return make_error(Errc::kCorrupt,
                          "copies {} and {} both claim member {} of array {} (a cloned disk?)", j,
                          i, sb.member_uuid.to_string(), array_uuid.to_string());
      }
    }
    out.in_sync.push_back(i);
  }
  return out;
}

std::vector<SplitBrainSign> find_split_brain(std::span<const Superblock> copies,
                                             const NewestCopy& newest) {
  std::vector<SplitBrainSign> out;
  const Superblock& top = copies[newest.newest];
  for (const std::size_t i : newest.stale) {
    const Superblock& sb = copies[i];
    for (std::uint32_t slot = 0; slot < sb.member_count && slot < sb.members.size(); ++slot) {
      if (slot == sb.member_index) continue;
      const MemberState there = sb.members[slot].state;
      if (there != MemberState::kFailed && there != MemberState::kRemoved) continue;
      if (slot >= top.members.size() || top.members[slot].state != MemberState::kActive) continue;
      // The slot is active in the newest copy: did the member that ran on there hold it then?
      const bool holder_in_sync =
          std::any_of(newest.in_sync.begin(), newest.in_sync.end(),
                      [&](std::size_t j) { return newest.slot_of[j] == slot; });
      if (holder_in_sync) out.push_back(SplitBrainSign{i, slot});
    }
  }
  return out;
}

}  // namespace graid::meta
