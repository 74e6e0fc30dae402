// Shape validation and capacity; the per-level rules come from the level modules
// (engine/level/), which Geometry fronts.
#include "graid/geometry.h"

#include <cassert>
#include <cctype>
#include <string>

#include "graid/parity.h"
#include "level/level_module.h"

namespace graid {

std::string_view raid_level_name(RaidLevel level) noexcept {
  const LevelModule* m = find_level_module(static_cast<std::uint32_t>(level));
  return m != nullptr ? m->name() : "unknown";
}

bool is_valid_raid_level_value(std::uint32_t value) noexcept {
  return find_level_module(value) != nullptr;
}

Result<RaidLevel> parse_raid_level(std::string_view text) {
  std::string lower;
  for (char c : text)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  std::string_view digits = lower;
  if (digits.starts_with("raid")) digits.remove_prefix(4);
  std::string names;
  for (const LevelModule* m : level_modules()) {
    std::string_view name = m->name();
    if (name.substr(4) == digits) return m->level();
    names += fmt::format("{}{}", names.empty() ? "" : ", ", name);
  }
  return make_error(Errc::kInvalidArgument, "unknown RAID level '{}' (expected one of {})", text,
                    names);
}

Result<Geometry> Geometry::make(RaidLevel level, std::uint32_t members, std::uint32_t strip_bytes) {
  const LevelModule* module = find_level_module(static_cast<std::uint32_t>(level));
  if (module == nullptr) {
    return make_error(Errc::kInvalidArgument, "unknown RAID level value {}",
                      static_cast<unsigned>(level));
  }
  if (members < module->min_members()) {
    return make_error(Errc::kInvalidArgument, "{} needs at least {} members, got {}",
                      module->name(), module->min_members(), members);
  }
  if (members > kMaxMembers) {
    return make_error(Errc::kInvalidArgument, "{} members is more than the maximum of {}", members,
                      kMaxMembers);
  }
  if (module->even_members() && members % 2 != 0) {
    return make_error(Errc::kInvalidArgument, "{} needs an even number of members, got {}",
                      module->name(), members);
  }
  if (strip_bytes < kMinStripBytes || strip_bytes > kMaxStripBytes ||
      (strip_bytes & (strip_bytes - 1)) != 0) {
    return make_error(Errc::kInvalidArgument,
                      "strip size {} bytes is not a power of two from {} KiB to {} KiB",
                      strip_bytes, kMinStripBytes / 1024, kMaxStripBytes / 1024);
  }
  return Geometry(*module, level, members, strip_bytes);
}

Redundancy Geometry::redundancy() const noexcept {
  return module_->redundancy();
}

std::uint32_t Geometry::data_strips() const noexcept {
  return module_->data_strips(members_);
}

std::uint32_t Geometry::parity_strips() const noexcept {
  return module_->parity_strips();
}

ParityScheme Geometry::parity_scheme() const noexcept {
  return parity_strips() == 2 ? ParityScheme::kPQ : ParityScheme::kP;
}

std::uint32_t Geometry::copies() const noexcept {
  return module_->copies(members_);
}

std::uint32_t Geometry::failures_tolerated() const noexcept {
  return module_->failures_tolerated(members_);
}

bool Geometry::survives(std::uint64_t failed_mask) const noexcept {
  return module_->survives(members_, failed_mask);
}

std::uint64_t Geometry::data_capacity(std::uint64_t member_data_bytes) const noexcept {
  return stripes(member_data_bytes) * stripe_data_bytes();
}

std::uint32_t Geometry::p_member(std::uint64_t stripe) const noexcept {
  assert(parity_strips() >= 1);
  return module_->parity_member(members_, stripe, 0);
}

std::uint32_t Geometry::q_member(std::uint64_t stripe) const noexcept {
  assert(parity_strips() == 2);
  return module_->parity_member(members_, stripe, 1);
}

std::uint32_t Geometry::chunk_member(std::uint64_t stripe, std::uint32_t c) const noexcept {
  const std::uint32_t k = data_strips();
  if (c < k) return data_member(stripe, c);
  return c == k ? p_member(stripe) : q_member(stripe);
}

std::uint32_t Geometry::data_member(std::uint64_t stripe, std::uint32_t data_index,
                                    std::uint32_t copy) const noexcept {
  assert(data_index < data_strips());
  assert(copy < copies());
  return module_->data_member(members_, stripe, data_index, copy);
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
  module_->place(members_, member, place);
  if (place.role == StripRole::kData) {
    place.array_offset =
        (place.stripe * data_strips() + place.data_index) * strip_bytes_ + place.strip_offset;
  }
  return place;
}

}  // namespace graid
