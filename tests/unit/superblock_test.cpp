// Superblock encode/decode: round trips, the pinned byte layout, every decode error class, and
// systematic / random corruption (decode must fail cleanly or give a block that re-encodes to
// the same bytes; never crash).
#include "meta/superblock.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "meta/crc32c.h"

namespace graid::meta {
namespace {

// ---- Helpers ------------------------------------------------------------------------------------

// A UUID whose 16 bytes are seed, seed+1, ... (readable in hex dumps, distinct per seed).
Uuid test_uuid(std::uint8_t seed) {
  Uuid u;
  for (std::size_t i = 0; i < u.bytes.size(); ++i)
    u.bytes[i] = static_cast<std::byte>(seed + i);
  return u;
}

// RAID6 over 8 roles + 2 spares with every table and field populated.
Superblock full_superblock() {
  Superblock sb;
  sb.events = 0x0102030405060708ull;
  sb.ctime_ns = 1'700'000'000'000'000'000ull;
  sb.utime_ns = 1'700'000'123'000'000'000ull;
  sb.array_uuid = test_uuid(0xA0);
  sb.level = RaidLevel::kRaid6;
  sb.member_count = 8;
  sb.spare_count = 2;
  sb.strip_bytes = 64 * 1024;
  sb.array_flags = kArrayClean;
  sb.data_offset = kDefaultDataOffset;
  sb.data_size = 64ull << 30;  // 64 GiB per member
  sb.init_checkpoint = std::nullopt;
  sb.resync_checkpoint = 4096;
  sb.check_checkpoint = sb.data_size;  // finished, not yet cleared
  sb.name = "dg0-production";
  sb.settings = StoredSettings{3, 1, 4, 2, 3};  // high, low, extreme, normal; journal always
  sb.journal_offset = 512 * 1024;
  sb.journal_bytes = 512 * 1024;
  sb.journal_epoch = 0x0A0B0C0D;
  sb.replace = ReplaceRecord{3, 9, 5ull << 30, sb.events};  // slot 9 copies role 3
  for (std::uint32_t i = 0; i < 10; ++i) {
    sb.members[i].uuid = test_uuid(static_cast<std::uint8_t>(0x10 * (i + 1) % 0xA0 + i));
    sb.members[i].state = i < 8 ? MemberState::kActive : MemberState::kSpare;
  }
  sb.members[2].state = MemberState::kFailed;
  sb.members[5].state = MemberState::kRebuilding;
  sb.members[5].rebuild_offset = 3ull << 30;
  sb.members[6].state = MemberState::kRemoved;
  sb.members[6].uuid = Uuid{};
  sb.member_index = 3;
  sb.member_uuid = sb.members[3].uuid;
  const std::uint64_t gib = 1ull << 30;
  sb.vds[0] = VdEntry{0, kVdInUse, 0, 100 * gib, "vd-root"};
  sb.vds[3] = VdEntry{7, kVdInUse, 100 * gib, 200 * gib, std::string(kMaxVdNameLen, 'x')};
  sb.vds[15] = VdEntry{15, kVdInUse, 384 * gib - 4096, 4096, ""};  // the last 4 KiB
  return sb;
}

// full_superblock() with the fields of minors 4 and 5 in use too.
Superblock minor4_superblock() {
  Superblock sb = full_superblock();
  sb.set_journal_covered(true);
  sb.bad_ranges = {BadRange{8192, 4096}, BadRange{1ull << 30, 512}};
  sb.init_method = kInitMethodZeroed;
  return sb;
}

// The smallest valid superblock: RAID0 on one member, one strip of data, nothing else.
Superblock minimal_superblock() {
  Superblock sb;
  sb.array_uuid = test_uuid(1);
  sb.member_uuid = test_uuid(100);
  sb.level = RaidLevel::kRaid0;
  sb.member_count = 1;
  sb.strip_bytes = kMinStripBytes;
  sb.data_offset = kMinDataOffset;
  sb.data_size = kMinStripBytes;
  sb.members[0] = MemberEntry{sb.member_uuid, MemberState::kActive, 0, 0};
  return sb;
}

EncodedSuperblock must_encode(const Superblock& sb) {
  Result<EncodedSuperblock> enc = encode(sb);
  EXPECT_TRUE(enc.is_ok()) << enc.status().to_string();
  return enc.is_ok() ? *enc : EncodedSuperblock{};
}

// The textbook bitwise CRC-32C, independent of meta/crc32c.
std::uint32_t bitwise_crc32c(std::span<const std::byte> data) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const std::byte b : data) {
    crc ^= std::to_integer<std::uint32_t>(b);
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

template <typename T>
void poke(EncodedSuperblock& block, std::size_t offset, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    block[offset + i] =
        static_cast<std::byte>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xff);
  }
}

template <typename T>
T peek(const EncodedSuperblock& block, std::size_t offset) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    v |= std::to_integer<std::uint64_t>(block[offset + i]) << (8 * i);
  return static_cast<T>(v);
}

// Recomputes the crc the documented way: crc32c over the whole block with bytes 12..15 zero.
void refix_crc(EncodedSuperblock& block) {
  poke<std::uint32_t>(block, 12, 0);
  poke<std::uint32_t>(block, 12, crc32c(block));
}

// The documented layout (docs/on-disk-format.md), written out by hand so that a change to the
// encoder's offsets fails here.
constexpr std::size_t kMagicAt = 0, kMajorAt = 8, kMinorAt = 10, kCrcAt = 12, kSbSizeAt = 16,
                      kFlagsAt = 20, kEventsAt = 24, kCtimeAt = 32, kUtimeAt = 40,
                      kArrayUuidAt = 48, kMemberUuidAt = 64, kMemberIndexAt = 80, kLevelAt = 84,
                      kMemberCountAt = 88, kSpareCountAt = 92, kStripAt = 96, kRsvd0At = 100,
                      kDataOffsetAt = 104, kDataSizeAt = 112, kInitAt = 120, kResyncAt = 128,
                      kCheckAt = 136, kNameAt = 144, kSettingsAt = 176, kInitMethodAt = 181,
                      kRsvd1At = 182, kJournalAt = 184, kReplaceAt = 208, kCoveredAt = 232,
                      kRsvd1bAt = 240, kMembersAt = 256, kMemberSize = 32, kVdsAt = 1280,
                      kVdSize = 64, kBadListAt = 2304, kRsvd2At = 3344;
constexpr std::size_t member_at(std::size_t i) {
  return kMembersAt + i * kMemberSize;
}
constexpr std::size_t vd_at(std::size_t i) {
  return kVdsAt + i * kVdSize;
}

// ---- Uuid ---------------------------------------------------------------------------------------

TEST(Uuid, GenerateIsRandomVersion4) {
  std::set<Uuid> seen;
  for (int i = 0; i < 100; ++i) {
    Result<Uuid> u = Uuid::generate();
    ASSERT_TRUE(u.is_ok()) << u.status().to_string();
    EXPECT_FALSE(u->is_nil());
    EXPECT_EQ(std::to_integer<int>(u->bytes[6]) >> 4, 4);
    EXPECT_EQ(std::to_integer<int>(u->bytes[8]) >> 6, 2);
    seen.insert(*u);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(Uuid, FormatAndParse) {
  const Uuid u = test_uuid(0xf0);
  EXPECT_EQ(u.to_string(), "f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff");
  for (const char* text :
       {"f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff", "F0F1F2F3-F4F5-F6F7-F8F9-FAFBFCFDFEFF",
        "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"}) {
    Result<Uuid> parsed = Uuid::parse(text);
    ASSERT_TRUE(parsed.is_ok()) << text << ": " << parsed.status().to_string();
    EXPECT_EQ(*parsed, u) << text;
  }
  EXPECT_TRUE(Uuid{}.is_nil());
  EXPECT_EQ(Uuid{}.to_string(), "00000000-0000-0000-0000-000000000000");
  for (const char* bad :
       {"", "f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfef", "f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeffa",
        "f0f1f2f3+f4f5-f6f7-f8f9-fafbfcfdfeff", "g0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff",
        "f0f1f2f3f4f5f6f7f8f9fafbfcfdfe-f", "f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfe f"}) {
    Result<Uuid> parsed = Uuid::parse(bad);
    EXPECT_FALSE(parsed.is_ok()) << bad;
    if (!parsed) {
      EXPECT_EQ(parsed.status().code(), Errc::kInvalidArgument) << bad;
    }
  }
}

// ---- Round trips
// ----------------------------------------------------------------------------------

TEST(Superblock, RoundTripFull) {
  const Superblock sb = full_superblock();
  const EncodedSuperblock block = must_encode(sb);
  Result<Superblock> back = decode(block);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(*back, sb);
  EXPECT_EQ(must_encode(*back), block);
}

TEST(Superblock, RoundTripMinimal) {
  const Superblock sb = minimal_superblock();
  const EncodedSuperblock block = must_encode(sb);
  Result<Superblock> back = decode(block);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(*back, sb);
  EXPECT_FALSE(back->init_checkpoint.has_value());
  EXPECT_EQ(must_encode(*back), block);
}

TEST(Superblock, EncodeIntoSpan) {
  const Superblock sb = full_superblock();
  std::vector<std::byte> buffer(kSuperblockSize + 100, std::byte{0x5a});
  ASSERT_TRUE(encode(sb, buffer).is_ok());
  const EncodedSuperblock block = must_encode(sb);
  EXPECT_TRUE(std::equal(block.begin(), block.end(), buffer.begin()));
  EXPECT_EQ(buffer[kSuperblockSize], std::byte{0x5a}) << "wrote past the block";
  // A longer input decodes from its first kSuperblockSize bytes.
  Result<Superblock> back = decode(buffer);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(*back, sb);

  std::vector<std::byte> small(kSuperblockSize - 1);
  const Status st = encode(sb, small);
  EXPECT_EQ(st.code(), Errc::kInvalidArgument);
}

TEST(Superblock, EncodeRefusesInvalid) {
  Superblock sb = minimal_superblock();
  sb.name = std::string(kMaxArrayNameLen + 1, 'n');
  Result<EncodedSuperblock> enc = encode(sb);
  ASSERT_FALSE(enc.is_ok());
  EXPECT_EQ(enc.status().code(), Errc::kInvalidArgument);
  EXPECT_NE(enc.status().message().find("array name"), std::string::npos);

  sb = minimal_superblock();
  sb.name = std::string("a\0b", 3);
  EXPECT_EQ(validate(sb).code(), Errc::kInvalidArgument);
  sb = minimal_superblock();
  sb.vds[0] = VdEntry{1, kVdInUse, 0, 4096, std::string(kMaxVdNameLen + 1, 'v')};
  EXPECT_EQ(validate(sb).code(), Errc::kInvalidArgument);
  sb = minimal_superblock();
  sb.level = static_cast<RaidLevel>(3);
  EXPECT_EQ(validate(sb).code(), Errc::kInvalidArgument);
  EXPECT_FALSE(sb.geometry().is_ok());
  EXPECT_EQ(sb.data_capacity(), 0u);
  sb = minimal_superblock();
  sb.members[0].state = static_cast<MemberState>(99);
  EXPECT_EQ(validate(sb).code(), Errc::kInvalidArgument);
}

TEST(Superblock, GeometryAndHelpers) {
  const Superblock sb = full_superblock();
  Result<Geometry> g = sb.geometry();
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(g->level(), RaidLevel::kRaid6);
  EXPECT_EQ(g->members(), 8u);
  EXPECT_EQ(g->strip_bytes(), 64u * 1024);
  EXPECT_EQ(sb.data_capacity(), 6 * (64ull << 30));
  EXPECT_TRUE(sb.clean());
  EXPECT_FALSE(minimal_superblock().clean());
  EXPECT_EQ(member_state_name(MemberState::kRebuilding), "rebuilding");
}

// ---- Pinned layout
// --------------------------------------------------------------------------------

TEST(SuperblockLayout, FieldsAtDocumentedOffsetsLittleEndian) {
  const Superblock sb = minor4_superblock();
  const EncodedSuperblock b = must_encode(sb);
  auto bytes_at = [&](std::size_t offset, std::size_t n) {
    return std::vector<std::uint8_t>(reinterpret_cast<const std::uint8_t*>(b.data()) + offset,
                                     reinterpret_cast<const std::uint8_t*>(b.data()) + offset + n);
  };
  using V = std::vector<std::uint8_t>;
  EXPECT_EQ(bytes_at(kMagicAt, 8), (V{'g', 'r', 'a', 'i', 'd', '-', 's', 'b'}));
  EXPECT_EQ(bytes_at(kMajorAt, 2), (V{0x01, 0x00}));
  EXPECT_EQ(bytes_at(kMinorAt, 2), (V{0x05, 0x00}));
  EXPECT_EQ(bytes_at(kSbSizeAt, 4), (V{0x00, 0x10, 0x00, 0x00}));
  EXPECT_EQ(bytes_at(kFlagsAt, 4), (V{0x01, 0x00, 0x00, 0x00}));
  EXPECT_EQ(bytes_at(kEventsAt, 8), (V{0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}));
  EXPECT_EQ(peek<std::uint64_t>(b, kCtimeAt), sb.ctime_ns);
  EXPECT_EQ(peek<std::uint64_t>(b, kUtimeAt), sb.utime_ns);
  EXPECT_EQ(bytes_at(kArrayUuidAt, 4), (V{0xA0, 0xA1, 0xA2, 0xA3}));
  EXPECT_EQ(bytes_at(kMemberUuidAt, 16),
            V(reinterpret_cast<const std::uint8_t*>(sb.member_uuid.bytes.data()),
              reinterpret_cast<const std::uint8_t*>(sb.member_uuid.bytes.data()) + 16));
  EXPECT_EQ(bytes_at(kMemberIndexAt, 4), (V{0x03, 0x00, 0x00, 0x00}));
  EXPECT_EQ(bytes_at(kLevelAt, 4), (V{0x06, 0x00, 0x00, 0x00}));
  EXPECT_EQ(bytes_at(kMemberCountAt, 4), (V{0x08, 0x00, 0x00, 0x00}));
  EXPECT_EQ(bytes_at(kSpareCountAt, 4), (V{0x02, 0x00, 0x00, 0x00}));
  EXPECT_EQ(bytes_at(kStripAt, 4), (V{0x00, 0x00, 0x01, 0x00}));  // 64 KiB
  EXPECT_EQ(bytes_at(kRsvd0At, 4), (V{0, 0, 0, 0}));
  EXPECT_EQ(bytes_at(kDataOffsetAt, 8), (V{0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00}));
  EXPECT_EQ(bytes_at(kDataSizeAt, 8), (V{0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00}));
  EXPECT_EQ(peek<std::uint64_t>(b, kInitAt), ~0ull);  // no job pending
  EXPECT_EQ(bytes_at(kResyncAt, 8), (V{0x00, 0x10, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(peek<std::uint64_t>(b, kCheckAt), sb.data_size);
  EXPECT_EQ(bytes_at(kNameAt, 15),
            (V{'d', 'g', '0', '-', 'p', 'r', 'o', 'd', 'u', 'c', 't', 'i', 'o', 'n', 0}));
  // Settings (minor 1): rebuild, init, check, resync speed, journal policy; one byte each.
  EXPECT_EQ(bytes_at(kSettingsAt, 5), (V{3, 1, 4, 2, 3}));
  // How the array was initialised (minor 5): zeroed.
  EXPECT_EQ(bytes_at(kInitMethodAt, 1), V{3});
  EXPECT_EQ(bytes_at(kRsvd1At, 2), V(2, 0));
  // Journal area (minor 2): offset, bytes, epoch.
  EXPECT_EQ(bytes_at(kJournalAt, 8), (V{0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00}));
  EXPECT_EQ(bytes_at(kJournalAt + 8, 8), (V{0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00}));
  EXPECT_EQ(bytes_at(kJournalAt + 16, 8), (V{0x0D, 0x0C, 0x0B, 0x0A, 0x00, 0x00, 0x00, 0x00}));
  // Hot replace (minor 3): role + 1, slot, copied, events.
  EXPECT_EQ(bytes_at(kReplaceAt, 8), (V{0x04, 0, 0, 0, 0x09, 0, 0, 0}));
  EXPECT_EQ(bytes_at(kReplaceAt + 8, 8), (V{0, 0, 0, 0x40, 0x01, 0, 0, 0}));
  EXPECT_EQ(bytes_at(kReplaceAt + 16, 8), (V{0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}));
  // Journal coverage (minor 4): the events of the update that wrote it.
  EXPECT_EQ(bytes_at(kCoveredAt, 8), (V{0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}));
  EXPECT_EQ(bytes_at(kRsvd1bAt, 16), V(16, 0));
  // Member table: slot 5 is rebuilding at 3 GiB, slot 8 is a spare.
  EXPECT_EQ(bytes_at(member_at(5), 16),
            V(reinterpret_cast<const std::uint8_t*>(sb.members[5].uuid.bytes.data()),
              reinterpret_cast<const std::uint8_t*>(sb.members[5].uuid.bytes.data()) + 16));
  EXPECT_EQ(bytes_at(member_at(5) + 16, 16),
            (V{0x04, 0, 0, 0, /*flags*/ 0, 0, 0, 0, /*rebuild*/ 0, 0, 0, 0xC0, 0, 0, 0, 0}));
  EXPECT_EQ(peek<std::uint32_t>(b, member_at(8) + 16), 3u);
  EXPECT_EQ(bytes_at(member_at(10), kMemberSize), V(kMemberSize, 0));
  // VD table: entry 3 is id 7 at 100 GiB, 200 GiB long, a 39-character name.
  EXPECT_EQ(bytes_at(vd_at(3), 24), (V{0x07, 0, 0, 0, 0x01, 0, 0, 0, 0,    0, 0, 0,
                                       0x19, 0, 0, 0, 0,    0, 0, 0, 0x32, 0, 0, 0}));
  EXPECT_EQ(bytes_at(vd_at(3) + 24, 40), [] {
    V v(39, 'x');
    v.push_back(0);
    return v;
  }());
  EXPECT_EQ(bytes_at(vd_at(1), kVdSize), V(kVdSize, 0));
  EXPECT_EQ(peek<std::uint32_t>(b, vd_at(15)), 15u);
  // Lost ranges (minor 4): count, 12 reserved bytes, then {offset u64, len u32, 4 reserved}.
  EXPECT_EQ(bytes_at(kBadListAt, 16), (V{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(bytes_at(kBadListAt + 16, 16),
            (V{0x00, 0x20, 0, 0, 0, 0, 0, 0, 0x00, 0x10, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(bytes_at(kBadListAt + 32, 16),
            (V{0, 0, 0, 0x40, 0, 0, 0, 0, 0x00, 0x02, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(bytes_at(kBadListAt + 48, 16 * 62), V(16 * 62, 0));
  EXPECT_EQ(bytes_at(kRsvd2At, kSuperblockSize - kRsvd2At), V(kSuperblockSize - kRsvd2At, 0));

  // crc32c (independent bitwise implementation) over the block with the crc field zeroed.
  EncodedSuperblock zeroed = b;
  poke<std::uint32_t>(zeroed, kCrcAt, 0);
  EXPECT_EQ(peek<std::uint32_t>(b, kCrcAt), bitwise_crc32c(zeroed));
}

// A fixed superblock gives fixed bytes: any layout or encoding change shows up as a new crc.
TEST(SuperblockLayout, GoldenBytes) {
  Superblock sb = minimal_superblock();
  sb.ctime_ns = 1;
  sb.utime_ns = 2;
  const EncodedSuperblock b = must_encode(sb);
  std::vector<std::uint8_t> head(reinterpret_cast<const std::uint8_t*>(b.data()),
                                 reinterpret_cast<const std::uint8_t*>(b.data()) + 120);
  const std::vector<std::uint8_t> expected = {
      'g',  'r',  'a',      'i',      'd',      '-',      's', 'b', 1,   0,
      5,    0,    head[12], head[13], head[14], head[15],          // crc, checked below
      0x00, 0x10, 0,        0,                                     // sb_size 4096
      0,    0,    0,        0,                                     // array flags
      1,    0,    0,        0,        0,        0,        0,   0,  // events 1
      1,    0,    0,        0,        0,        0,        0,   0,  // ctime
      2,    0,    0,        0,        0,        0,        0,   0,  // utime
      1,    2,    3,        4,        5,        6,        7,   8,   9,   10,
      11,   12,   13,       14,       15,       16,  // array uuid
      100,  101,  102,      103,      104,      105,      106, 107, 108, 109,
      110,  111,  112,      113,      114,      115,      0,   0,   0,   0,  // member index
      0,    0,    0,        0,                                               // raid0
      1,    0,    0,        0,                                               // 1 member
      0,    0,    0,        0,                                               // 0 spares
      0x00, 0x10, 0,        0,                                               // strip 4096
      0,    0,    0,        0,                                               // reserved
      0x00, 0x10, 0,        0,        0,        0,        0,   0,            // data offset 4096
      0x00, 0x10, 0,        0,        0,        0,        0,   0,            // data size 4096
  };
  EXPECT_EQ(head, expected);
  EncodedSuperblock zeroed = b;
  poke<std::uint32_t>(zeroed, kCrcAt, 0);
  EXPECT_EQ(peek<std::uint32_t>(b, kCrcAt), bitwise_crc32c(zeroed));
  // The crc covers every byte, so these pin the whole encoding of both test superblocks.
  EXPECT_EQ(peek<std::uint32_t>(b, kCrcAt), 0xEEB122B1u);
  EXPECT_EQ(peek<std::uint32_t>(must_encode(full_superblock()), kCrcAt), 0xC877934Bu);
}

// ---- Decode errors, one crafted input per check
// ---------------------------------------------------

struct Craft {
  const char* what;
  std::function<void(EncodedSuperblock&)> patch;  // applied to the encoded full superblock
  Errc code;
  const char* message;  // a substring the error must contain
  bool fix_crc = true;
};

TEST(SuperblockDecode, EachCheckHasItsError) {
  const std::uint64_t gib = 1ull << 30;
  const std::vector<Craft> crafts = {
      {"bad magic", [](auto& b) { b[0] = std::byte{'G'}; }, Errc::kCorrupt, "bad magic"},
      {"bad crc", [](auto& b) { b[kCrcAt] ^= std::byte{1}; }, Errc::kCorrupt, "crc32c mismatch",
       false},
      {"unchecked edit", [](auto& b) { b[kNameAt] = std::byte{'D'}; }, Errc::kCorrupt,
       "crc32c mismatch", false},
      {"major 2", [](auto& b) { poke<std::uint16_t>(b, kMajorAt, 2); }, Errc::kUnsupported,
       "major version 2"},
      {"major 0", [](auto& b) { poke<std::uint16_t>(b, kMajorAt, 0); }, Errc::kUnsupported,
       "major version 0"},
      {"major 2 larger than given",
       [](auto& b) {
         poke<std::uint16_t>(b, kMajorAt, 2);
         poke<std::uint32_t>(b, kSbSizeAt, 8192);
       },
       Errc::kUnsupported, "8192 bytes"},
      {"major 1 wrong size", [](auto& b) { poke<std::uint32_t>(b, kSbSizeAt, 8192); },
       Errc::kCorrupt, "superblock size 8192"},
      {"major 2 odd size",
       [](auto& b) {
         poke<std::uint16_t>(b, kMajorAt, 2);
         poke<std::uint32_t>(b, kSbSizeAt, 4000);
       },
       Errc::kCorrupt, "implausible superblock size"},
      {"events 0", [](auto& b) { poke<std::uint64_t>(b, kEventsAt, 0); }, Errc::kCorrupt,
       "event counter is 0"},
      {"nil array uuid", [](auto& b) { std::fill_n(b.begin() + kArrayUuidAt, 16, std::byte{0}); },
       Errc::kCorrupt, "array UUID is nil"},
      {"level 4", [](auto& b) { poke<std::uint32_t>(b, kLevelAt, 4); }, Errc::kCorrupt,
       "unknown RAID level value 4"},
      {"member count 0", [](auto& b) { poke<std::uint32_t>(b, kMemberCountAt, 0); }, Errc::kCorrupt,
       "member count 0 not in 1..32"},
      {"member count 33", [](auto& b) { poke<std::uint32_t>(b, kMemberCountAt, 33); },
       Errc::kCorrupt, "member count 33 not in 1..32"},
      {"member count huge", [](auto& b) { poke<std::uint32_t>(b, kMemberCountAt, 0xFFFFFFFFu); },
       Errc::kCorrupt, "not in 1..32"},
      {"members + spares > 32", [](auto& b) { poke<std::uint32_t>(b, kSpareCountAt, 25); },
       Errc::kCorrupt, "spare count 25 exceeds 32"},
      {"spares wrap", [](auto& b) { poke<std::uint32_t>(b, kSpareCountAt, 0xFFFFFFFCu); },
       Errc::kCorrupt, "exceeds 32"},
      {"member index beyond", [](auto& b) { poke<std::uint32_t>(b, kMemberIndexAt, 10); },
       Errc::kCorrupt, "member index 10 >= member count 8 + spare count 2"},
      {"impossible geometry: raid6 on 3",
       [](auto& b) {
         poke<std::uint32_t>(b, kMemberCountAt, 3);
         poke<std::uint32_t>(b, kSpareCountAt, 0);
         poke<std::uint32_t>(b, kMemberIndexAt, 0);
       },
       Errc::kCorrupt, "impossible geometry"},
      {"impossible geometry: strip", [](auto& b) { poke<std::uint32_t>(b, kStripAt, 3000); },
       Errc::kCorrupt, "impossible geometry"},
      {"unknown array flag", [](auto& b) { poke<std::uint32_t>(b, kFlagsAt, 0x81); },
       Errc::kCorrupt, "unknown array flags 0x80"},
      {"data offset unaligned", [](auto& b) { poke<std::uint64_t>(b, kDataOffsetAt, 4096 + 512); },
       Errc::kCorrupt, "data offset 4608 not a multiple"},
      {"data offset over superblock", [](auto& b) { poke<std::uint64_t>(b, kDataOffsetAt, 0); },
       Errc::kCorrupt, "overlaps the superblock"},
      {"data size unaligned",
       [](auto& b) { poke<std::uint64_t>(b, kDataSizeAt, (64ull << 30) + 1); }, Errc::kCorrupt,
       "not a multiple of 4096"},
      {"data size below a strip", [](auto& b) { poke<std::uint64_t>(b, kDataSizeAt, 4096); },
       Errc::kCorrupt, "smaller than one strip"},
      {"data end overflows",
       [](auto& b) { poke<std::uint64_t>(b, kDataOffsetAt, 0xFFFFFFFFFFFFF000ull); },
       Errc::kCorrupt, "overflows"},
      {"init checkpoint beyond",
       [](auto& b) { poke<std::uint64_t>(b, kInitAt, (64ull << 30) + 4096); }, Errc::kCorrupt,
       "init checkpoint"},
      {"check checkpoint beyond", [](auto& b) { poke<std::uint64_t>(b, kCheckAt, ~0ull - 1); },
       Errc::kCorrupt, "check checkpoint"},
      {"array name unterminated",
       [](auto& b) { std::fill_n(b.begin() + kNameAt, 32, std::byte{'a'}); }, Errc::kCorrupt,
       "array name is not NUL-terminated"},
      {"array name junk after NUL", [](auto& b) { b[kNameAt + 20] = std::byte{'z'}; },
       Errc::kCorrupt, "array name has bytes after its terminating NUL"},
      {"unknown member state", [](auto& b) { poke<std::uint32_t>(b, member_at(1) + 16, 6); },
       Errc::kCorrupt, "member slot 1 has unknown state 6"},
      {"empty role slot", [](auto& b) { poke<std::uint32_t>(b, member_at(1) + 16, 0); },
       Errc::kCorrupt, "member slot 1 (< member count + spares) is empty"},
      {"spare in a role slot", [](auto& b) { poke<std::uint32_t>(b, member_at(1) + 16, 3); },
       Errc::kCorrupt, "role slot 1 in state spare"},
      {"active in a spare slot", [](auto& b) { poke<std::uint32_t>(b, member_at(9) + 16, 1); },
       Errc::kCorrupt, "spare slot 9 in state active"},
      {"unused slot not zero", [](auto& b) { b[member_at(20) + 3] = std::byte{1}; }, Errc::kCorrupt,
       "unused member slot 20 is not zero"},
      {"nil uuid on active slot",
       [](auto& b) { std::fill_n(b.begin() + member_at(0), 16, std::byte{0}); }, Errc::kCorrupt,
       "member slot 0 (active) has a nil UUID"},
      {"duplicate member uuid",
       [](auto& b) { std::copy_n(b.begin() + member_at(0), 16, b.begin() + member_at(9)); },
       Errc::kCorrupt, "duplicate member UUID"},
      {"member uuid is array uuid",
       [](auto& b) { std::copy_n(b.begin() + kArrayUuidAt, 16, b.begin() + member_at(1)); },
       Errc::kCorrupt, "equals the array UUID"},
      {"own uuid not in own slot", [](auto& b) { poke<std::uint32_t>(b, kMemberIndexAt, 4); },
       Errc::kCorrupt, "is not the one in slot 4"},
      {"nil own uuid", [](auto& b) { std::fill_n(b.begin() + kMemberUuidAt, 16, std::byte{0}); },
       Errc::kCorrupt, "member UUID is nil"},
      {"rebuild offset on active", [](auto& b) { poke<std::uint64_t>(b, member_at(1) + 24, 4096); },
       Errc::kCorrupt, "rebuild checkpoint but is active"},
      {"rebuild offset beyond",
       [](auto& b) { poke<std::uint64_t>(b, member_at(5) + 24, (64ull << 30) + 4096); },
       Errc::kCorrupt, "rebuild checkpoint"},
      {"unknown member flags", [](auto& b) { poke<std::uint32_t>(b, member_at(1) + 20, 2); },
       Errc::kCorrupt, "unknown flags 0x2"},
      {"unused VD not zero", [](auto& b) { b[vd_at(1)] = std::byte{1}; }, Errc::kCorrupt,
       "unused VD entry 1 is not zero"},
      {"VD unknown flags", [](auto& b) { poke<std::uint32_t>(b, vd_at(0) + 4, 0x11); },
       Errc::kCorrupt, "VD entry 0 has unknown flags 0x10"},
      {"VD size 0", [](auto& b) { poke<std::uint64_t>(b, vd_at(0) + 16, 0); }, Errc::kCorrupt,
       "VD entry 0 has size 0"},
      {"VD unaligned", [](auto& b) { poke<std::uint64_t>(b, vd_at(3) + 8, 100 * gib + 512); },
       Errc::kCorrupt, "not aligned"},
      {"VD beyond capacity", [](auto& b) { poke<std::uint64_t>(b, vd_at(15) + 16, 8192); },
       Errc::kCorrupt, "VD entry 15 extent"},
      {"VD end overflows",
       [](auto& b) { poke<std::uint64_t>(b, vd_at(15) + 8, 0xFFFFFFFFFFFFF000ull); },
       Errc::kCorrupt, "beyond the array capacity"},
      {"VD overlap", [](auto& b) { poke<std::uint64_t>(b, vd_at(3) + 8, 100 * gib - 4096); },
       Errc::kCorrupt, "VD entries 0 and 3 overlap"},
      {"VD duplicate id", [](auto& b) { poke<std::uint32_t>(b, vd_at(3), 0); }, Errc::kCorrupt,
       "VD entries 0 and 3 share id 0"},
      {"VD name unterminated", [](auto& b) { b[vd_at(3) + 63] = std::byte{'x'}; }, Errc::kCorrupt,
       "VD entry 3 name is not NUL-terminated"},
      {"VD name junk", [](auto& b) { b[vd_at(0) + 24 + 30] = std::byte{'x'}; }, Errc::kCorrupt,
       "VD entry 0 name has bytes after"},
      {"reserved 0 not zero", [](auto& b) { b[kRsvd0At] = std::byte{1}; }, Errc::kCorrupt,
       "reserved bytes not zero"},
      {"reserved 1b not zero", [](auto& b) { b[kRsvd1bAt + 15] = std::byte{1}; }, Errc::kCorrupt,
       "reserved bytes not zero"},
      {"reserved 1 (182) not zero", [](auto& b) { b[kRsvd1At] = std::byte{1}; }, Errc::kCorrupt,
       "reserved bytes not zero"},
      {"init method 5", [](auto& b) { b[kInitMethodAt] = std::byte{5}; }, Errc::kCorrupt,
       "init method code 5 unknown"},
      {"rebuild speed 5", [](auto& b) { b[kSettingsAt] = std::byte{5}; }, Errc::kCorrupt,
       "rebuild speed code 5 unknown"},
      {"init speed 255", [](auto& b) { b[kSettingsAt + 1] = std::byte{255}; }, Errc::kCorrupt,
       "init speed code 255 unknown"},
      {"check speed 5", [](auto& b) { b[kSettingsAt + 2] = std::byte{5}; }, Errc::kCorrupt,
       "check speed code 5 unknown"},
      {"resync speed 9", [](auto& b) { b[kSettingsAt + 3] = std::byte{9}; }, Errc::kCorrupt,
       "resync speed code 9 unknown"},
      {"journal policy 4", [](auto& b) { b[kSettingsAt + 4] = std::byte{4}; }, Errc::kCorrupt,
       "journal policy code 4 unknown"},
      {"settings in a minor 0 superblock", [](auto& b) { poke<std::uint16_t>(b, kMinorAt, 0); },
       Errc::kCorrupt, "reserved bytes not zero in a minor 0 superblock (bytes 176..180"},
      {"reserved 2 not zero", [](auto& b) { b[kSuperblockSize - 1] = std::byte{1}; },
       Errc::kCorrupt, "reserved bytes not zero"},
  };
  const EncodedSuperblock good = must_encode(full_superblock());
  ASSERT_TRUE(decode(good).is_ok());
  for (const Craft& c : crafts) {
    EncodedSuperblock b = good;
    c.patch(b);
    if (c.fix_crc) refix_crc(b);
    Result<Superblock> r = decode(b);
    ASSERT_FALSE(r.is_ok()) << c.what << ": decoded";
    EXPECT_EQ(r.status().code(), c.code) << c.what << ": " << r.status().to_string();
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << c.what << ": got '" << r.status().message() << "', want '" << c.message << "'";
  }
}

TEST(SuperblockDecode, TruncatedAtEveryLength) {
  const EncodedSuperblock good = must_encode(full_superblock());
  for (std::size_t len = 0; len < kSuperblockSize; ++len) {
    Result<Superblock> r = decode(std::span(good).first(len));
    ASSERT_FALSE(r.is_ok()) << len;
    ASSERT_EQ(r.status().code(), Errc::kCorrupt) << len;
    ASSERT_NE(r.status().message().find("truncated"), std::string::npos) << len;
  }
}

// A newer minor version is accepted; its reserved bytes and flag bits are kept and written back.
TEST(SuperblockDecode, NewerMinorPreservesUnknownBytes) {
  EncodedSuperblock b = must_encode(full_superblock());
  poke<std::uint16_t>(b, kMinorAt, 6);
  b[kRsvd0At] = std::byte{0x11};
  b[kRsvd1At + 1] = std::byte{0x22};
  b[kRsvd1bAt + 5] = std::byte{0x55};
  b[kRsvd2At + 500] = std::byte{0x33};
  b[kSuperblockSize - 1] = std::byte{0x44};
  poke<std::uint32_t>(b, kFlagsAt, 0x8001);
  poke<std::uint32_t>(b, member_at(0) + 20, 0x4);
  poke<std::uint32_t>(b, vd_at(0) + 4, 0x101);
  refix_crc(b);
  Result<Superblock> r = decode(b);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->minor_version, 6);
  EXPECT_TRUE(r->clean());
  EXPECT_EQ(r->members[0].flags, 0x4u);
  EXPECT_TRUE(r->vds[0].in_use());
  EXPECT_EQ(r->reserved[0], std::byte{0x11});
  EXPECT_EQ(r->reserved[4 + 1], std::byte{0x22});
  EXPECT_EQ(r->reserved[4 + 2 + 5], std::byte{0x55});
  EXPECT_EQ(r->reserved[4 + 2 + 16 + 500], std::byte{0x33});
  EXPECT_EQ(r->reserved[kReservedBytes - 1], std::byte{0x44});
  EXPECT_EQ(must_encode(*r), b);

  EXPECT_EQ(r->settings, full_superblock().settings);

  // Rules that do not depend on the minor still hold: setting codes stay closed...
  EncodedSuperblock bad_code = b;
  bad_code[kSettingsAt + 4] = std::byte{4};
  refix_crc(bad_code);
  EXPECT_EQ(decode(bad_code).status().code(), Errc::kCorrupt);
  // ... and unused entries stay zero.
  b[vd_at(1) + 4] = std::byte{0x02};
  refix_crc(b);
  EXPECT_EQ(decode(b).status().code(), Errc::kCorrupt);
}

// ---- Settings (minor 1)
// ---------------------------------------------------------------------------

TEST(SuperblockSettings, RoundTripEveryCode) {
  for (std::uint8_t speed = 0; speed <= kMaxSpeedCode; ++speed) {
    for (std::uint8_t journal = 0; journal <= kMaxJournalCode; ++journal) {
      Superblock sb = minimal_superblock();
      sb.settings = StoredSettings{speed, static_cast<std::uint8_t>(kMaxSpeedCode - speed), speed,
                                   1, journal};
      const EncodedSuperblock block = must_encode(sb);
      EXPECT_EQ(peek<std::uint8_t>(block, kSettingsAt), speed);
      EXPECT_EQ(peek<std::uint8_t>(block, kSettingsAt + 1), kMaxSpeedCode - speed);
      EXPECT_EQ(peek<std::uint8_t>(block, kSettingsAt + 4), journal);
      Result<Superblock> back = decode(block);
      ASSERT_TRUE(back.is_ok()) << back.status().to_string();
      EXPECT_EQ(back->settings, sb.settings);
      EXPECT_EQ(*back, sb);
    }
  }
}

TEST(SuperblockSettings, ValidateRefusesUnknownCodes) {
  Superblock sb = minimal_superblock();
  sb.settings.check_speed = kMaxSpeedCode + 1;
  const Status st = validate(sb);
  EXPECT_EQ(st.code(), Errc::kInvalidArgument);
  EXPECT_NE(st.message().find("check speed code 5"), std::string::npos) << st.message();
  sb = minimal_superblock();
  sb.settings.journal_policy = kMaxJournalCode + 1;
  EXPECT_EQ(validate(sb).code(), Errc::kInvalidArgument);
  EXPECT_FALSE(encode(sb).is_ok());
}

// A superblock written by a minor 0 build (bytes 176..180 reserved, zero) reads with every setting
// unset, and the next write upgrades it to minor 1 without changing anything else.
TEST(SuperblockSettings, MinorZeroReadsUnsetAndIsUpgradedOnWrite) {
  Superblock sb = full_superblock();
  sb.settings = StoredSettings{};
  sb.journal_offset = sb.journal_bytes = sb.journal_epoch = 0;
  sb.replace.reset();
  EncodedSuperblock minor0 = must_encode(sb);
  poke<std::uint16_t>(minor0, kMinorAt, 0);
  refix_crc(minor0);
  Result<Superblock> r = decode(minor0);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->minor_version, 0);
  EXPECT_EQ(r->settings, StoredSettings{});

  const EncodedSuperblock rewritten = must_encode(*r);
  EXPECT_EQ(peek<std::uint16_t>(rewritten, kMinorAt), kMinorVersion);
  EncodedSuperblock expected = minor0;
  poke<std::uint16_t>(expected, kMinorAt, kMinorVersion);
  refix_crc(expected);
  EXPECT_EQ(rewritten, expected);

  // Settings recorded on a copy read from minor 0 are written with the current minor.
  r->settings.rebuild_speed = 4;
  const EncodedSuperblock with_settings = must_encode(*r);
  EXPECT_EQ(peek<std::uint16_t>(with_settings, kMinorAt), kMinorVersion);
  Result<Superblock> back = decode(with_settings);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->settings.rebuild_speed, 4);
}

// ---- Journal area (minor 2)
// -------------------------------------------------------------------------------

TEST(SuperblockJournal, RoundTripAtTheDocumentedOffsets) {
  const Superblock sb = full_superblock();
  const EncodedSuperblock block = must_encode(sb);
  EXPECT_EQ(peek<std::uint64_t>(block, kJournalAt), sb.journal_offset);
  EXPECT_EQ(peek<std::uint64_t>(block, kJournalAt + 8), sb.journal_bytes);
  EXPECT_EQ(peek<std::uint64_t>(block, kJournalAt + 16), sb.journal_epoch);
  Result<Superblock> back = decode(block);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(*back, sb);
  EXPECT_EQ(back->bitmap_area_end(), sb.journal_offset);
  Superblock none = sb;
  none.journal_offset = none.journal_bytes = 0;
  EXPECT_EQ(none.bitmap_area_end(), none.data_offset);
}

TEST(SuperblockJournal, MinorOneWithJournalBytesIsCorrupt) {
  EncodedSuperblock b = must_encode(full_superblock());
  poke<std::uint16_t>(b, kMinorAt, 1);
  refix_crc(b);
  Result<Superblock> r = decode(b);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Errc::kCorrupt);
  EXPECT_NE(r.status().message().find("journal area since minor 2"), std::string::npos)
      << r.status().message();
  // A minor 1 copy (zero there) reads with no journal area.
  Superblock old = full_superblock();
  old.journal_offset = old.journal_bytes = old.journal_epoch = 0;
  old.replace.reset();
  EncodedSuperblock ob = must_encode(old);
  poke<std::uint16_t>(ob, kMinorAt, 1);
  refix_crc(ob);
  Result<Superblock> ro = decode(ob);
  ASSERT_TRUE(ro.is_ok()) << ro.status().to_string();
  EXPECT_EQ(ro->journal_bytes, 0u);
}

TEST(SuperblockJournal, ValidateRefusesAreasOutsideTheMetadata) {
  Superblock sb = full_superblock();
  sb.journal_bytes = sb.data_offset;  // runs into the data area
  EXPECT_EQ(validate(sb).code(), Errc::kInvalidArgument);
  sb = full_superblock();
  sb.journal_offset = 0;  // over the superblock
  EXPECT_EQ(validate(sb).code(), Errc::kInvalidArgument);
  sb = full_superblock();
  sb.journal_bytes = 1000;  // not aligned
  EXPECT_EQ(validate(sb).code(), Errc::kInvalidArgument);
  sb = full_superblock();
  sb.journal_bytes = 0;  // an offset without an area
  EXPECT_EQ(validate(sb).code(), Errc::kInvalidArgument);
}

// ---- Hot replace record (minor 3)
// -------------------------------------------------------------------------------

TEST(SuperblockReplace, RoundTripsAndOlderMinorsHaveNone) {
  const Superblock sb = full_superblock();
  Result<Superblock> back = decode(must_encode(sb));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  ASSERT_TRUE(back->replace.has_value());
  EXPECT_EQ(*back->replace, *sb.replace);
  Superblock none = sb;
  none.replace.reset();
  const EncodedSuperblock nb = must_encode(none);
  EXPECT_EQ(peek<std::uint32_t>(nb, kReplaceAt), 0u);  // role + 1 = 0: no replace
  Result<Superblock> nback = decode(nb);
  ASSERT_TRUE(nback.is_ok()) << nback.status().to_string();
  EXPECT_FALSE(nback->replace.has_value());

  // A minor 2 copy with those bytes set is corrupt; with them zero it reads with no replace.
  EncodedSuperblock b = must_encode(sb);
  poke<std::uint16_t>(b, kMinorAt, 2);
  refix_crc(b);
  Result<Superblock> r = decode(b);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Errc::kCorrupt);
  EXPECT_NE(r.status().message().find("hot replace since minor 3"), std::string::npos)
      << r.status().message();
  EncodedSuperblock ob = nb;
  poke<std::uint16_t>(ob, kMinorAt, 2);
  refix_crc(ob);
  EXPECT_TRUE(decode(ob).is_ok());
  // Fields without a role are corrupt in any minor.
  EncodedSuperblock orphan = nb;
  poke<std::uint64_t>(orphan, kReplaceAt + 8, 4096);
  refix_crc(orphan);
  EXPECT_EQ(decode(orphan).status().code(), Errc::kCorrupt);
}

TEST(SuperblockReplace, ValidateRefusesRecordsThatDoNotFitTheTable) {
  auto refused = [](auto change) {
    Superblock sb = full_superblock();
    change(*sb.replace, sb);
    return validate(sb).code() == Errc::kInvalidArgument;
  };
  EXPECT_TRUE(refused([](ReplaceRecord& r, Superblock&) { r.role = 8; }));   // not a role
  EXPECT_TRUE(refused([](ReplaceRecord& r, Superblock&) { r.slot = 7; }));   // a role's slot
  EXPECT_TRUE(refused([](ReplaceRecord& r, Superblock&) { r.slot = 10; }));  // beyond the spares
  EXPECT_TRUE(refused([](ReplaceRecord& r, Superblock& sb) {
    sb.members[r.slot].state = MemberState::kFailed;  // not a spare entry
  }));
  EXPECT_TRUE(refused([](ReplaceRecord& r, Superblock& sb) { r.copied = sb.data_size + 65536; }));
  EXPECT_TRUE(refused([](ReplaceRecord& r, Superblock&) { r.copied = 4096; }));  // part strip
  EXPECT_TRUE(refused([](ReplaceRecord& r, Superblock& sb) { r.events = sb.events + 1; }));
  EXPECT_TRUE(refused([](ReplaceRecord& r, Superblock&) { r.events = 0; }));
  EXPECT_FALSE(refused([](ReplaceRecord& r, Superblock& sb) { r.copied = sb.data_size; }));
  EXPECT_FALSE(refused([](ReplaceRecord& r, Superblock&) { r.events = 1; }));  // void, valid
}

// ---- Journal coverage and lost ranges (minor 4)
// ----------------------------------------------------------------

TEST(SuperblockMinor4, RoundTripsAndOlderMinorsHaveNone) {
  const Superblock sb = minor4_superblock();
  Result<Superblock> back = decode(must_encode(sb));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_TRUE(back->journal_covered());
  EXPECT_EQ(back->bad_ranges, sb.bad_ranges);
  // A stamp an older writer carried forward (events moved on) reads as not covered, and the copy
  // still re-encodes to the same bytes.
  EncodedSuperblock stale = must_encode(sb);
  poke<std::uint64_t>(stale, kEventsAt, sb.events + 1);
  refix_crc(stale);
  Result<Superblock> carried = decode(stale);
  ASSERT_TRUE(carried.is_ok()) << carried.status().to_string();
  EXPECT_FALSE(carried->journal_covered());
  EXPECT_EQ(must_encode(*carried), stale);
  // A minor 3 copy with either set is corrupt; with both zero it reads with neither.
  for (const bool covered : {true, false}) {
    Superblock one = sb;
    one.set_journal_covered(covered);
    if (covered) one.bad_ranges.clear();
    EncodedSuperblock b = must_encode(one);
    poke<std::uint16_t>(b, kMinorAt, 3);
    refix_crc(b);
    Result<Superblock> r = decode(b);
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("since minor 4"), std::string::npos)
        << r.status().message();
  }
  Superblock none = sb;
  none.set_journal_covered(false);
  none.bad_ranges.clear();
  none.init_method = kInitMethodNotRecorded;  // minor 5's
  EncodedSuperblock nb = must_encode(none);
  poke<std::uint16_t>(nb, kMinorAt, 3);
  refix_crc(nb);
  Result<Superblock> older = decode(nb);
  ASSERT_TRUE(older.is_ok()) << older.status().to_string();
  EXPECT_FALSE(older->journal_covered());
  EXPECT_TRUE(older->bad_ranges.empty());
}

// ---- Init method (minor 5)
// ---------------------------------------------------------------------------------

TEST(SuperblockMinor5, InitMethodRoundTripsAndOlderMinorsHaveNone) {
  for (std::uint8_t code = 0; code <= kMaxInitMethodCode; ++code) {
    Superblock sb = minimal_superblock();
    sb.init_method = code;
    const EncodedSuperblock b = must_encode(sb);
    EXPECT_EQ(peek<std::uint8_t>(b, kInitMethodAt), code);
    Result<Superblock> back = decode(b);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_EQ(back->init_method, code);
  }
  Superblock sb = minimal_superblock();
  sb.init_method = kMaxInitMethodCode + 1;
  EXPECT_EQ(validate(sb).code(), Errc::kInvalidArgument);
  // A minor 4 copy reads as not recorded, and with the byte set is corrupt.
  sb.init_method = kInitMethodNotRecorded;
  EncodedSuperblock older = must_encode(sb);
  poke<std::uint16_t>(older, kMinorAt, 4);
  refix_crc(older);
  Result<Superblock> r = decode(older);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->init_method, kInitMethodNotRecorded);
  older[kInitMethodAt] = std::byte{kInitMethodResync};
  refix_crc(older);
  r = decode(older);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("the init method since minor 5"), std::string::npos)
      << r.status().message();
}

TEST(SuperblockMinor4, LostRangesMustBeOrderedAlignedAndInside) {
  auto refused = [](std::vector<BadRange> ranges) {
    Superblock sb = minor4_superblock();
    sb.bad_ranges = std::move(ranges);
    return validate(sb).code() == Errc::kInvalidArgument;
  };
  const std::uint64_t capacity = minor4_superblock().data_capacity();
  EXPECT_FALSE(refused({}));
  EXPECT_FALSE(refused({BadRange{0, 512}, BadRange{512, 512}}));
  EXPECT_FALSE(refused({BadRange{capacity - 4096, 4096}}));
  EXPECT_TRUE(refused({BadRange{0, 0}}));                         // empty
  EXPECT_TRUE(refused({BadRange{100, 512}}));                     // not 512-aligned
  EXPECT_TRUE(refused({BadRange{0, 1000}}));                      // length not aligned
  EXPECT_TRUE(refused({BadRange{4096, 512}, BadRange{0, 512}}));  // out of order
  EXPECT_TRUE(refused({BadRange{0, 1024}, BadRange{512, 512}}));  // overlapping
  EXPECT_TRUE(refused({BadRange{capacity - 512, 1024}}));         // beyond the capacity
  EXPECT_TRUE(refused(std::vector<BadRange>(kMaxBadRanges + 1, BadRange{0, 512})));
  std::vector<BadRange> full;
  for (std::uint64_t i = 0; i < kMaxBadRanges; ++i)
    full.push_back(BadRange{i * 4096, 512});
  EXPECT_FALSE(refused(full));
  // On disk: a count past the capacity, an entry past the count, reserved bytes.
  const EncodedSuperblock good = must_encode(minor4_superblock());
  const std::pair<const char*, std::function<void(EncodedSuperblock&)>> crafts[] = {
      {"count 65", [](auto& b) { poke<std::uint32_t>(b, kBadListAt, 65); }},
      {"entry past the count", [](auto& b) { poke<std::uint32_t>(b, kBadListAt + 16 * 5, 1); }},
      {"header reserved", [](auto& b) { b[kBadListAt + 9] = std::byte{1}; }},
      {"entry reserved", [](auto& b) { b[kBadListAt + 16 + 13] = std::byte{1}; }},
  };
  for (const auto& [what, patch] : crafts) {
    EncodedSuperblock b = good;
    patch(b);
    refix_crc(b);
    EXPECT_EQ(decode(b).status().code(), Errc::kCorrupt) << what;
  }
}

TEST(SuperblockSettings, SettingsArePartOfTheArrayState) {
  const Superblock base = full_superblock();
  Superblock changed = base;
  changed.settings.journal_policy = 1;
  EXPECT_FALSE(same_array_state(base, changed));
}

// ---- Systematic and random corruption
// ---------------------------------------------------------------

TEST(SuperblockCorruption, EverySingleBitFlipIsCaught) {
  for (const Superblock& sb : {full_superblock(), minimal_superblock()}) {
    EncodedSuperblock b = must_encode(sb);
    for (std::size_t bit = 0; bit < kSuperblockSize * 8; ++bit) {
      const auto mask = static_cast<std::byte>(1u << (bit % 8));
      b[bit / 8] ^= mask;
      Result<Superblock> r = decode(b);
      ASSERT_FALSE(r.is_ok()) << "bit " << bit;
      ASSERT_EQ(r.status().code(), Errc::kCorrupt)
          << "bit " << bit << ": " << r.status().to_string();
      b[bit / 8] ^= mask;
    }
    ASSERT_TRUE(decode(b).is_ok());
  }
}

// An error message with its numbers, UUIDs and hex values replaced by '#', so messages from the
// same check compare equal.
std::string message_shape(std::string_view message) {
  std::string shape;
  std::size_t pos = 0;
  while (pos < message.size()) {
    std::size_t end = message.find(' ', pos);
    if (end == std::string_view::npos) end = message.size();
    const std::string_view word = message.substr(pos, end - pos);
    const bool variable =
        word.find_first_not_of("0123456789abcdefx-(),:") == std::string_view::npos ||
        word.find_first_of("0123456789") != std::string_view::npos;
    shape += variable ? "#" : std::string(word);
    shape += ' ';
    pos = end + 1;
  }
  return shape;
}

// Random byte edits, half of them with the crc re-fixed so the deeper checks see them. Decode
// either fails cleanly (kCorrupt/kUnsupported with a message) or yields a superblock that
// validates and re-encodes to exactly the mutated bytes.
TEST(SuperblockCorruption, RandomMutationsFailCleanlyOrRoundTrip) {
  std::mt19937_64 rng(20240611);
  const std::array<EncodedSuperblock, 2> seeds = {must_encode(full_superblock()),
                                                  must_encode(minimal_superblock())};
  // Values that sit on the edges of the checks, written at random field-aligned offsets.
  const std::uint64_t interesting[] = {
      0,     1,          2, 3, 4, 5, 6, 10, 31, 32, 33, 4095, 4096, 65536, 1u << 20, 0xFFFFFFFFull,
      ~0ull, 64ull << 30};
  constexpr int kIterations = 100000;
  int decoded_ok = 0;
  int corrupt = 0;
  int unsupported = 0;
  std::set<std::string> failed_checks;  // error messages with the numbers stripped
  for (int it = 0; it < kIterations; ++it) {
    EncodedSuperblock b = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      // Mostly the header and tables, where the checks are.
      const std::size_t limit = rng() % 4 == 0 ? kSuperblockSize : 2304;
      switch (rng() % 3) {
        case 0:
          b[rng() % limit] = static_cast<std::byte>(rng() & 0xff);
          break;
        case 1:
          b[rng() % limit] ^= static_cast<std::byte>(1u << (rng() % 8));
          break;
        default: {
          const std::size_t offset = (rng() % (limit / 4)) * 4;
          const std::uint64_t v = interesting[rng() % std::size(interesting)];
          if (offset + 8 <= kSuperblockSize && rng() % 2 == 0) {
            poke<std::uint64_t>(b, offset, v);
          } else {
            poke<std::uint32_t>(b, offset, static_cast<std::uint32_t>(v));
          }
        }
      }
    }
    const bool fixed = rng() % 2 == 0;
    if (fixed) refix_crc(b);
    Result<Superblock> r = decode(b);
    if (!r.is_ok()) {
      const Errc code = r.status().code();
      ASSERT_TRUE(code == Errc::kCorrupt || code == Errc::kUnsupported) << r.status().to_string();
      ASSERT_FALSE(r.status().message().empty());
      (code == Errc::kCorrupt ? corrupt : unsupported)++;
      failed_checks.insert(message_shape(r.status().message()));
      continue;
    }
    ++decoded_ok;
    ASSERT_TRUE(validate(*r).is_ok()) << validate(*r).to_string();
    Result<EncodedSuperblock> again = encode(*r);
    ASSERT_TRUE(again.is_ok()) << again.status().to_string();
    // A copy of an older minor comes back with the current one (and its crc), nothing else.
    if (peek<std::uint16_t>(b, kMinorAt) < kMinorVersion) {
      poke<std::uint16_t>(b, kMinorAt, kMinorVersion);
      refix_crc(b);
    }
    ASSERT_EQ(*again, b) << "iteration " << it << " decoded but re-encoded differently";
  }
  // The loop must reach the deep checks and also find accepted mutations, or it tests little.
  EXPECT_GT(decoded_ok, kIterations / 200);
  EXPECT_GE(failed_checks.size(), 25u) << "mutations reach too few distinct checks";
  RecordProperty("distinct_checks", static_cast<int>(failed_checks.size()));
  EXPECT_GT(corrupt, kIterations / 4);
  RecordProperty("decoded_ok", decoded_ok);
  RecordProperty("corrupt", corrupt);
  RecordProperty("unsupported", unsupported);
}

// ---- Newest-copy selection
// ---------------------------------------------------------------------------

// The copy member `index` of `sb`'s array would hold.
Superblock copy_for_member(Superblock sb, std::uint32_t index) {
  sb.member_index = index;
  sb.member_uuid = sb.members[index].uuid;
  return sb;
}

TEST(PickNewest, ChoosesHighestEventsAndReportsStale) {
  Superblock base = full_superblock();
  base.events = 10;
  Superblock older = base;
  older.events = 8;
  older.members[2].state = MemberState::kActive;  // before member 2 failed
  Superblock other_array = minimal_superblock();

  std::vector<Superblock> copies = {
      copy_for_member(older, 2),  // 0: stale (the failed member missed the updates)
      copy_for_member(base, 0),   // 1
      other_array,                // 2: foreign
      copy_for_member(base, 1),   // 3
      copy_for_member(base, 8),   // 4: spare, in sync
      copy_for_member(older, 7),  // 5: stale
  };
  Result<NewestCopy> r = pick_newest(copies, base.array_uuid);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->newest, 1u);
  EXPECT_EQ(r->events, 10u);
  EXPECT_EQ(r->in_sync, (std::vector<std::size_t>{1, 3, 4}));
  EXPECT_EQ(r->stale, (std::vector<std::size_t>{0, 5}));
  EXPECT_EQ(r->foreign, (std::vector<std::size_t>{2}));

  Result<NewestCopy> other = pick_newest(copies, other_array.array_uuid);
  ASSERT_TRUE(other.is_ok());
  EXPECT_EQ(other->newest, 2u);
  EXPECT_EQ(other->in_sync, (std::vector<std::size_t>{2}));
  EXPECT_EQ(other->foreign.size(), 5u);
}

TEST(PickNewest, NewestMayComeLate) {
  Superblock base = full_superblock();
  base.events = 4;
  Superblock newer = base;
  newer.events = 6;
  newer.array_flags = 0;  // opened: dirty
  std::vector<Superblock> copies = {copy_for_member(base, 0), copy_for_member(base, 1),
                                    copy_for_member(newer, 3)};
  Result<NewestCopy> r = pick_newest(copies, base.array_uuid);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->newest, 2u);
  EXPECT_EQ(r->in_sync, (std::vector<std::size_t>{2}));
  EXPECT_EQ(r->stale, (std::vector<std::size_t>{0, 1}));
}

// An update interrupted by a power cut leaves some members one event behind (issue 8 item 2;
// before, those were stale and a RAID5 with two of them did not assemble).
TEST(PickNewest, OneEventBehindAndListedActiveIsInSync) {
  Superblock base = full_superblock();
  base.events = 5;
  base.members[2].state = MemberState::kActive;
  Superblock newer = base;
  newer.events = 6;
  newer.members[2].state = MemberState::kFailed;  // the update recorded member 2's failure
  std::vector<Superblock> copies = {copy_for_member(base, 0), copy_for_member(base, 1),
                                    copy_for_member(newer, 3), copy_for_member(base, 2)};
  Result<NewestCopy> r = pick_newest(copies, base.array_uuid);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->newest, 2u);
  EXPECT_EQ(r->in_sync, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(r->behind, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(r->stale, (std::vector<std::size_t>{3}));  // listed failed: stale even one behind
  EXPECT_TRUE(find_split_brain(copies, *r).empty());
}

// Two halves that ran apart each record the other as failed (issue 8 item 7).
TEST(PickNewest, FindsASplitBrain) {
  Superblock base = full_superblock();
  base.member_count = 2;
  base.level = RaidLevel::kRaid1;
  for (std::uint32_t m = 0; m < 2; ++m)
    base.members[m].state = MemberState::kActive;
  base.events = 5;
  Superblock left = base;  // member 0 ran on alone for a while
  left.events = 9;
  left.members[1].state = MemberState::kFailed;
  Superblock right = base;  // member 1 ran on alone, elsewhere
  right.events = 7;
  right.members[0].state = MemberState::kFailed;
  std::vector<Superblock> copies = {copy_for_member(left, 0), copy_for_member(right, 1)};
  Result<NewestCopy> r = pick_newest(copies, base.array_uuid);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->stale, (std::vector<std::size_t>{1}));
  const auto signs = find_split_brain(copies, *r);
  ASSERT_EQ(signs.size(), 1u);
  EXPECT_EQ(signs[0].copy, 1u);
  EXPECT_EQ(signs[0].slot, 0u);

  // A member that merely missed updates (it records nobody as failed) is no split brain.
  copies[1] = copy_for_member(base, 1);
  r = pick_newest(copies, base.array_uuid);
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(find_split_brain(copies, *r).empty());
}

TEST(PickNewest, RefusesSplitBrainAndDuplicates) {
  Superblock base = full_superblock();
  Superblock diverged = base;
  diverged.vds[1] = VdEntry{1, kVdInUse, 300 * (1ull << 30), 1ull << 30, "late"};
  std::vector<Superblock> split = {copy_for_member(base, 0), copy_for_member(diverged, 1)};
  Result<NewestCopy> r = pick_newest(split, base.array_uuid);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Errc::kCorrupt);
  EXPECT_NE(r.status().message().find("disagree"), std::string::npos);

  std::vector<Superblock> cloned = {copy_for_member(base, 0), copy_for_member(base, 1),
                                    copy_for_member(base, 0)};
  r = pick_newest(cloned, base.array_uuid);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Errc::kCorrupt);
  EXPECT_NE(r.status().message().find("both claim member"), std::string::npos);

  r = pick_newest(split, test_uuid(0x77));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Errc::kNotFound);
  r = pick_newest({}, base.array_uuid);
  EXPECT_EQ(r.status().code(), Errc::kNotFound);
}

TEST(PickNewest, SameArrayStateIgnoresOnlyMemberIdentity) {
  const Superblock base = full_superblock();
  EXPECT_TRUE(same_array_state(copy_for_member(base, 0), copy_for_member(base, 9)));
  Superblock changed = base;
  changed.utime_ns += 1;
  EXPECT_FALSE(same_array_state(base, changed));
  changed = base;
  changed.reserved[7] = std::byte{1};
  EXPECT_FALSE(same_array_state(base, changed));
}

}  // namespace
}  // namespace graid::meta
