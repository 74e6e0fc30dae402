// Shape validation, capacity and the per-level layouts described in graid/geometry.h.
#include "graid/geometry.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <string>

namespace graid {

std::string_view raid_level_name(RaidLevel level) noexcept {
  switch (level) {
    case RaidLevel::kRaid0:
      return "raid0";
    case RaidLevel::kRaid1:
      return "raid1";
    case RaidLevel::kRaid5:
      return "raid5";
    case RaidLevel::kRaid6:
      return "raid6";
    case RaidLevel::kRaid10:
      return "raid10";
  }
  return "unknown";
}

bool is_valid_raid_level_value(std::uint32_t value) noexcept {
  return value == 0 || value == 1 || value == 5 || value == 6 || value == 10;
}

Result<RaidLevel> parse_raid_level(std::string_view text) {
  std::string lower;
  for (char c : text)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  std::string_view digits = lower;
  if (digits.starts_with("raid")) digits.remove_prefix(4);
  if (digits == "0") return RaidLevel::kRaid0;
  if (digits == "1") return RaidLevel::kRaid1;
  if (digits == "5") return RaidLevel::kRaid5;
  if (digits == "6") return RaidLevel::kRaid6;
  if (digits == "10") return RaidLevel::kRaid10;
  return make_error(Errc::kInvalidArgument,
                    "unknown RAID level '{}' (expected raid0, raid1, raid10, raid5 or raid6)",
                    text);
}

namespace {

// Smallest member count per level, and whether the count must be even.
struct LevelRule {
  std::uint32_t min_members;
  bool even;
};

LevelRule rule_for(RaidLevel level) {
  switch (level) {
    case RaidLevel::kRaid0:
      return {1, false};
    case RaidLevel::kRaid1:
      return {2, false};
    case RaidLevel::kRaid10:
      return {4, true};
    case RaidLevel::kRaid5:
      return {3, false};
    case RaidLevel::kRaid6:
      return {4, false};
  }
  return {0, false};
}

}  // namespace

Result<Geometry> Geometry::make(RaidLevel level, std::uint32_t members, std::uint32_t strip_bytes) {
  if (!is_valid_raid_level_value(static_cast<std::uint32_t>(level))) {
    return make_error(Errc::kInvalidArgument, "unknown RAID level value {}",
                      static_cast<unsigned>(level));
  }
  const LevelRule rule = rule_for(level);
  if (members < rule.min_members) {
    return make_error(Errc::kInvalidArgument, "{} needs at least {} members, got {}",
                      raid_level_name(level), rule.min_members, members);
  }
  if (members > kMaxMembers) {
    return make_error(Errc::kInvalidArgument, "{} members is more than the maximum of {}", members,
                      kMaxMembers);
  }
  if (rule.even && members % 2 != 0) {
    return make_error(Errc::kInvalidArgument, "{} needs an even number of members, got {}",
                      raid_level_name(level), members);
  }
  if (strip_bytes < kMinStripBytes || strip_bytes > kMaxStripBytes ||
      (strip_bytes & (strip_bytes - 1)) != 0) {
    return make_error(Errc::kInvalidArgument,
                      "strip size {} bytes is not a power of two from {} KiB to {} KiB",
                      strip_bytes, kMinStripBytes / 1024, kMaxStripBytes / 1024);
  }
  return Geometry(level, members, strip_bytes);
}

std::uint32_t Geometry::data_strips() const noexcept {
  switch (level_) {
    case RaidLevel::kRaid0:
      return members_;
    case RaidLevel::kRaid1:
      return 1;
    case RaidLevel::kRaid10:
      return members_ / 2;
    case RaidLevel::kRaid5:
      return members_ - 1;
    case RaidLevel::kRaid6:
      return members_ - 2;
  }
  return 0;
}

std::uint32_t Geometry::parity_strips() const noexcept {
  switch (level_) {
    case RaidLevel::kRaid5:
      return 1;
    case RaidLevel::kRaid6:
      return 2;
    default:
      return 0;
  }
}

std::uint32_t Geometry::copies() const noexcept {
  switch (level_) {
    case RaidLevel::kRaid1:
      return members_;
    case RaidLevel::kRaid10:
      return 2;
    default:
      return 1;
  }
}

std::uint32_t Geometry::failures_tolerated() const noexcept {
  switch (level_) {
    case RaidLevel::kRaid0:
      return 0;
    case RaidLevel::kRaid1:
      return members_ - 1;
    case RaidLevel::kRaid10:
      return 1;
    case RaidLevel::kRaid5:
      return 1;
    case RaidLevel::kRaid6:
      return 2;
  }
  return 0;
}

std::uint64_t Geometry::data_capacity(std::uint64_t member_data_bytes) const noexcept {
  return stripes(member_data_bytes) * stripe_data_bytes();
}

// Parity layouts (left-symmetric, as md). The P member walks backwards one member per stripe;
// Q (RAID6) sits right after P; data starts right after the last parity strip and wraps.
std::uint32_t Geometry::p_member(std::uint64_t stripe) const noexcept {
  assert(parity_strips() >= 1);
  return members_ - 1 - static_cast<std::uint32_t>(stripe % members_);
}

std::uint32_t Geometry::q_member(std::uint64_t stripe) const noexcept {
  assert(parity_strips() == 2);
  return (p_member(stripe) + 1) % members_;
}

std::uint32_t Geometry::data_member(std::uint64_t stripe, std::uint32_t data_index,
                                    std::uint32_t copy) const noexcept {
  assert(data_index < data_strips());
  assert(copy < copies());
  switch (level_) {
    case RaidLevel::kRaid0:
      return data_index;
    case RaidLevel::kRaid1:
      return copy;
    case RaidLevel::kRaid10:
      return 2 * data_index + copy;
    case RaidLevel::kRaid5:
    case RaidLevel::kRaid6:
      return (p_member(stripe) + parity_strips() + data_index) % members_;
  }
  return 0;
}

DataLocation Geometry::locate(std::uint64_t offset) const noexcept {
  DataLocation loc;
  const std::uint64_t strip_number = offset / strip_bytes_;  // data strips counted array-wide
  loc.strip_offset = static_cast<std::uint32_t>(offset % strip_bytes_);
  loc.stripe = strip_number / data_strips();
  loc.data_index = static_cast<std::uint32_t>(strip_number % data_strips());
  loc.member = data_member(loc.stripe, loc.data_index);
  loc.member_offset = loc.stripe * strip_bytes_ + loc.strip_offset;
  return loc;
}

MemberPlace Geometry::place(std::uint32_t member, std::uint64_t member_offset) const noexcept {
  assert(member < members_);
  MemberPlace place;
  place.stripe = member_offset / strip_bytes_;
  place.strip_offset = static_cast<std::uint32_t>(member_offset % strip_bytes_);
  switch (level_) {
    case RaidLevel::kRaid0:
      place.data_index = member;
      break;
    case RaidLevel::kRaid1:
      place.copy = member;
      break;
    case RaidLevel::kRaid10:
      place.data_index = member / 2;
      place.copy = member % 2;
      break;
    case RaidLevel::kRaid5:
    case RaidLevel::kRaid6: {
      const std::uint32_t p = p_member(place.stripe);
      // Distance of this member after P, going up and wrapping: 0 is P, 1 is Q on RAID6.
      const std::uint32_t after_p = (member + members_ - p) % members_;
      if (after_p == 0) {
        place.role = StripRole::kP;
        return place;
      }
      if (parity_strips() == 2 && after_p == 1) {
        place.role = StripRole::kQ;
        return place;
      }
      place.data_index = after_p - parity_strips();
      break;
    }
  }
  place.role = StripRole::kData;
  place.array_offset =
      (place.stripe * data_strips() + place.data_index) * strip_bytes_ + place.strip_offset;
  return place;
}

}  // namespace graid
