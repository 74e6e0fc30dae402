// libFuzzer target for the superblock decoder.
//
// Properties checked on every input:
//   - decode() never crashes, reads out of bounds or hits UB (the sanitizers watch);
//   - a failure is kCorrupt or kUnsupported with a message;
//   - a success validates and re-encodes to exactly the bytes it was decoded from (a copy of an
//     older minor comes back with the current minor and its crc);
//   - the same for a copy with the crc re-fixed, so the checks behind the crc are fuzzed too;
//   - Uuid::parse() of the leading bytes is total and round-trips through to_string().
//
// Random bytes almost never carry the magic and a valid crc, so a custom mutator starts from
// valid encoded superblocks now and then and re-fixes the crc after half the mutations: no
// corpus files are needed. Run: superblock_fuzz -max_len=4200 -max_total_time=60
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string_view>
#include <vector>

#include "meta/crc32c.h"
#include "meta/superblock.h"

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

namespace graid::meta {
namespace {

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "superblock_fuzz: property violated: %s\n", what);
    std::abort();
  }
}

Uuid seq_uuid(std::uint8_t seed) {
  Uuid u;
  for (std::size_t i = 0; i < u.bytes.size(); ++i)
    u.bytes[i] = static_cast<std::byte>(seed + i);
  return u;
}

// Valid superblocks of several shapes, encoded: the mutator's starting points.
const std::vector<EncodedSuperblock>& templates() {
  static const std::vector<EncodedSuperblock> encoded = [] {
    std::vector<EncodedSuperblock> out;
    auto add = [&out](const Superblock& sb) {
      Result<EncodedSuperblock> enc = encode(sb);
      require(enc.is_ok(), "a template superblock encodes");
      out.push_back(*enc);
    };
    const std::uint64_t gib = std::uint64_t{1} << 30;

    Superblock minimal;
    minimal.array_uuid = seq_uuid(1);
    minimal.member_uuid = seq_uuid(100);
    minimal.level = RaidLevel::kRaid0;
    minimal.member_count = 1;
    minimal.strip_bytes = kMinStripBytes;
    minimal.data_offset = kMinDataOffset;
    minimal.data_size = kMinStripBytes;
    minimal.members[0] = MemberEntry{minimal.member_uuid, MemberState::kActive, 0, 0};
    add(minimal);

    Superblock raid6;
    raid6.events = 12345;
    raid6.array_uuid = seq_uuid(0xA0);
    raid6.level = RaidLevel::kRaid6;
    raid6.member_count = 6;
    raid6.spare_count = 2;
    raid6.strip_bytes = 64 * 1024;
    raid6.array_flags = kArrayClean;
    raid6.data_size = 16 * gib;
    raid6.resync_checkpoint = 8192;
    raid6.name = "dg6";
    raid6.settings = StoredSettings{1, 2, 3, 4, 3};
    for (std::uint32_t i = 0; i < 8; ++i) {
      raid6.members[i] = MemberEntry{seq_uuid(static_cast<std::uint8_t>(16 * i + 3)),
                                     i < 6 ? MemberState::kActive : MemberState::kSpare, 0, 0};
    }
    raid6.members[1].state = MemberState::kRebuilding;
    raid6.members[1].rebuild_offset = gib;
    raid6.members[4] = MemberEntry{Uuid{}, MemberState::kRemoved, 0, 0};
    raid6.member_index = 7;
    raid6.member_uuid = raid6.members[7].uuid;
    raid6.vds[0] = VdEntry{0, kVdInUse, 0, 10 * gib, "root"};
    raid6.vds[5] = VdEntry{5, kVdInUse, 10 * gib, 54 * gib, "data"};
    add(raid6);

    Superblock raid10 = raid6;
    raid10.level = RaidLevel::kRaid10;
    raid10.spare_count = 0;
    raid10.members[6] = MemberEntry{};
    raid10.members[7] = MemberEntry{};
    raid10.member_index = 2;
    raid10.member_uuid = raid10.members[2].uuid;
    raid10.vds[5].size = 38 * gib;
    raid10.init_checkpoint = 0;
    add(raid10);

    Superblock raid5 = minimal;
    raid5.level = RaidLevel::kRaid5;
    raid5.member_count = 3;
    raid5.members[1] = MemberEntry{seq_uuid(40), MemberState::kFailed, 0, 0};
    raid5.members[2] = MemberEntry{seq_uuid(60), MemberState::kActive, 0, 0};
    raid5.data_size = 4 * kMinStripBytes;
    raid5.vds[15] = VdEntry{9, kVdInUse, 4096, 4096, std::string(kMaxVdNameLen, 'z')};
    add(raid5);
    return out;
  }();
  return encoded;
}

void refix_crc(std::span<std::uint8_t> block) {
  std::memset(block.data() + 12, 0, 4);
  const std::uint32_t crc = crc32c(std::as_bytes(block.first(kSuperblockSize)));
  for (int i = 0; i < 4; ++i)
    block[12 + i] = static_cast<std::uint8_t>(crc >> (8 * i));
}

void check_decode(std::span<const std::byte> bytes) {
  Result<Superblock> sb = decode(bytes);
  if (!sb.is_ok()) {
    const Errc code = sb.status().code();
    require(code == Errc::kCorrupt || code == Errc::kUnsupported, "decode fails with a known code");
    require(!sb.status().message().empty(), "decode errors carry a message");
    return;
  }
  require(bytes.size() >= kSuperblockSize, "decode succeeds only on a whole block");
  require(validate(*sb).is_ok(), "a decoded superblock validates");
  Result<EncodedSuperblock> again = encode(*sb);
  require(again.is_ok(), "a decoded superblock encodes");
  std::vector<std::uint8_t> expected(kSuperblockSize);
  std::memcpy(expected.data(), bytes.data(), kSuperblockSize);
  if (sb->minor_version < kMinorVersion) {
    expected[10] = static_cast<std::uint8_t>(kMinorVersion & 0xff);
    expected[11] = static_cast<std::uint8_t>(kMinorVersion >> 8);
    refix_crc(expected);
  }
  require(std::memcmp(again->data(), expected.data(), kSuperblockSize) == 0,
          "a decoded superblock re-encodes to the same bytes (older minors upgraded)");
  (void)sb->geometry();
  (void)sb->data_capacity();
  const Superblock copies[] = {*sb, *sb};
  Result<NewestCopy> newest = pick_newest(std::span(copies).first(1), sb->array_uuid);
  require(newest.is_ok() && newest->in_sync.size() == 1, "a copy alone is the newest");
}

void check_uuid_parse(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), std::min<std::size_t>(size, 40));
  Result<Uuid> uuid = Uuid::parse(text);
  if (!uuid.is_ok()) return;
  Result<Uuid> again = Uuid::parse(uuid->to_string());
  require(again.is_ok() && *again == *uuid, "UUID text round-trips");
}

}  // namespace
}  // namespace graid::meta

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace graid::meta;
  check_decode(std::as_bytes(std::span(data, size)));
  if (size >= kSuperblockSize) {
    std::vector<std::uint8_t> fixed(data, data + kSuperblockSize);
    refix_crc(fixed);
    check_decode(std::as_bytes(std::span(fixed)));
  }
  check_uuid_parse(data, size);
  return 0;
}

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size,
                                               std::size_t max_size, unsigned int seed) {
  using namespace graid::meta;
  std::minstd_rand rng(seed);
  if (max_size >= kSuperblockSize && (size < kSuperblockSize || rng() % 16 == 0)) {
    const auto& pool = templates();
    const EncodedSuperblock& start = pool[rng() % pool.size()];
    std::memcpy(data, start.data(), kSuperblockSize);
    size = kSuperblockSize;
  }
  size = LLVMFuzzerMutate(data, size, max_size);
  if (size >= kSuperblockSize && rng() % 2 == 0) refix_crc(std::span(data, size));
  return size;
}
