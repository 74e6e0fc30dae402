// RAID geometry: where every byte of an array lives on its members.
//
// Pure functions of (level, member count, strip size); no I/O, no state. Each level's rules live in
// its module (engine/level/: one file per level); Geometry is their public face. Terms:
//
//   strip   strip_bytes of one member, the unit of striping (md calls it a chunk).
//   stripe  one row of strips across all members at the same member offset.
//   k       data strips per stripe (data_strips()); a stripe holds k * strip_bytes of data.
//
// Layouts (n = members):
//
//   RAID0   k = n. Data strip d of stripe s is on member d.
//   RAID1   k = 1, n copies. Every member holds every byte at the same offset.
//   RAID10  k = n/2, 2 copies ("near-2", md's default). Data strip d of a stripe is on members
//           2d and 2d+1, so mirror pairs are (0,1), (2,3), ...
//   RAID5   k = n-1, left-symmetric as md (ALGORITHM_LEFT_SYMMETRIC). For stripe s:
//             P on member p = n-1 - (s mod n); data strip d on member (p+1+d) mod n.
//           n=4:   stripe 0: D0 D1 D2 P      stripe 1: D1 D2 P  D0
//                  stripe 2: D2 P  D0 D1     stripe 3: P  D0 D1 D2
//   RAID6   k = n-2, left-symmetric with Q following P (md's RAID6 ALGORITHM_LEFT_SYMMETRIC):
//             P on p = n-1 - (s mod n); Q on (p+1) mod n; data strip d on (p+2+d) mod n.
//           n=5:   stripe 0: Q  D0 D1 D2 P   stripe 1: D0 D1 D2 P  Q
//                  stripe 2: D1 D2 P  Q  D0  ...
//           Q = sum over d of g^d * D_d in GF(2^8) (poly 0x11d, g = 2), d the data index.
//
// Member offsets here are relative to the start of each member's data area (the superblock and
// other metadata live before it; see meta/superblock.h).
#pragma once

#include <cstdint>
#include <string_view>

#include "graid/status.h"

namespace graid {

enum class ParityScheme : std::uint8_t;  // graid/parity.h

enum class RaidLevel : std::uint8_t {
  kRaid0 = 0,
  kRaid1 = 1,
  kRaid5 = 5,
  kRaid6 = 6,
  kRaid10 = 10,
};

// "raid0", "raid1", "raid10", "raid5", "raid6".
std::string_view raid_level_name(RaidLevel level) noexcept;
// Accepts "raid5", "RAID5", "5" and the like; kInvalidArgument otherwise.
Result<RaidLevel> parse_raid_level(std::string_view text);
// True for the numeric values of RaidLevel (for decoding untrusted bytes).
bool is_valid_raid_level_value(std::uint32_t value) noexcept;

inline constexpr std::uint32_t kMaxMembers = 32;
inline constexpr std::uint32_t kMinStripBytes = 4096;
inline constexpr std::uint32_t kMaxStripBytes = 1u << 20;

// How a level keeps redundancy, which decides the write path: kNone writes members directly
// (RAID0), kMirror writes every copy (RAID1, RAID10), kParity updates data and parity together
// under the stripe lock (RAID5, RAID6).
enum class Redundancy : std::uint8_t { kNone, kMirror, kParity };

class LevelModule;  // engine-internal: level/level_module.h

// What a member holds at some place in a stripe.
enum class StripRole : std::uint8_t { kData, kP, kQ };

// Where a data byte of the array lives (its primary copy for mirrored levels).
struct DataLocation {
  std::uint32_t member = 0;         // member index, 0-based
  std::uint64_t member_offset = 0;  // byte offset in that member's data area
  std::uint64_t stripe = 0;         // stripe number
  std::uint32_t data_index = 0;     // data strip index within the stripe, 0..k-1
  std::uint32_t strip_offset = 0;   // byte offset within the strip

  friend bool operator==(const DataLocation&, const DataLocation&) = default;
};

// What a member holds at a given member offset (inverse of DataLocation).
struct MemberPlace {
  StripRole role = StripRole::kData;
  std::uint64_t stripe = 0;
  std::uint32_t data_index = 0;  // for kData: which data strip (for mirrors: the copy's strip)
  std::uint32_t copy = 0;        // for mirrored levels: which copy (0 = primary)
  std::uint32_t strip_offset = 0;
  std::uint64_t array_offset = 0;  // for kData: the array byte this is (a copy of)

  friend bool operator==(const MemberPlace&, const MemberPlace&) = default;
};

class Geometry {
 public:
  // Validates the shape: RAID0 >= 1 member, RAID1 >= 2, RAID10 >= 4 and even, RAID5 >= 3,
  // RAID6 >= 4, all at most kMaxMembers; strip a power of two in [4 KiB, 1 MiB]. Anything else
  // is kInvalidArgument with a message naming the rule that was broken.
  static Result<Geometry> make(RaidLevel level, std::uint32_t members, std::uint32_t strip_bytes);

  RaidLevel level() const noexcept { return level_; }
  Redundancy redundancy() const noexcept;
  std::uint32_t members() const noexcept { return members_; }
  std::uint32_t strip_bytes() const noexcept { return strip_bytes_; }

  // k: data strips per stripe.
  std::uint32_t data_strips() const noexcept;
  // Parity strips per stripe: 1 for RAID5, 2 for RAID6, else 0.
  std::uint32_t parity_strips() const noexcept;
  // The parity code of a stripe's jobs (graid/parity.h): kPQ for two parity strips, else kP.
  // The one place that maps the level to the code, for when more codes come.
  ParityScheme parity_scheme() const noexcept;
  // Copies of each data byte: n for RAID1, 2 for RAID10, else 1.
  std::uint32_t copies() const noexcept;
  // Members that may fail, whichever they are, with no data lost: 0, n-1, 1 (one per mirror
  // pair; more if in different pairs), 1, 2.
  std::uint32_t failures_tolerated() const noexcept;
  // True when every data byte is still readable with the members in `failed_mask` (bit m: member
  // m) gone; beyond failures_tolerated() for RAID10 failures in different pairs.
  bool survives(std::uint64_t failed_mask) const noexcept;
  // Data bytes in one stripe: k * strip_bytes.
  std::uint64_t stripe_data_bytes() const noexcept {
    return std::uint64_t{data_strips()} * strip_bytes_;
  }

  // Array data capacity when every member has `member_data_bytes` usable bytes (whole stripes
  // only; a partial strip at the end of a member is not used).
  std::uint64_t data_capacity(std::uint64_t member_data_bytes) const noexcept;
  // Stripes that fit in `member_data_bytes`.
  std::uint64_t stripes(std::uint64_t member_data_bytes) const noexcept {
    return member_data_bytes / strip_bytes_;
  }

  // Where array byte `offset` lives (primary copy).
  DataLocation locate(std::uint64_t offset) const noexcept;
  // Member holding data strip `data_index` (0..k-1) of `stripe`; `copy` selects the mirror copy
  // (0..copies()-1) for RAID1/10 and must be 0 otherwise.
  std::uint32_t data_member(std::uint64_t stripe, std::uint32_t data_index,
                            std::uint32_t copy = 0) const noexcept;
  // Parity members of `stripe`. REQUIRES: parity_strips() >= 1 (P) or == 2 (Q).
  std::uint32_t p_member(std::uint64_t stripe) const noexcept;
  std::uint32_t q_member(std::uint64_t stripe) const noexcept;
  // Member holding chunk `c` of a parity stripe: data strips 0..k-1, then P (k) and Q (k+1).
  std::uint32_t chunk_member(std::uint64_t stripe, std::uint32_t c) const noexcept;

  // What `member` holds at `member_offset` (inverse of locate()/data_member()).
  MemberPlace place(std::uint32_t member, std::uint64_t member_offset) const noexcept;

  // The level's module (engine-internal interface).
  const LevelModule& module() const noexcept { return *module_; }

 private:
  Geometry(const LevelModule& module, RaidLevel level, std::uint32_t members,
           std::uint32_t strip_bytes)
      : module_(&module), level_(level), members_(members), strip_bytes_(strip_bytes) {}

  const LevelModule* module_ = nullptr;
  RaidLevel level_ = RaidLevel::kRaid0;
  std::uint32_t members_ = 0;
  std::uint32_t strip_bytes_ = 0;
};

}  // namespace graid
