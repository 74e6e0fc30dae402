// Drive-group settings between the public names (graid::ArraySettings) and the superblock's
// codes (meta::StoredSettings). Internal to engine/array.
#pragma once

#include "graid/array.h"
#include "meta/superblock.h"

namespace graid {

// The codes that record `settings`, every field explicit (never unset). kInvalidArgument for a
// value outside the enums (a cast from a bad integer).
Result<meta::StoredSettings> stored_settings(const ArraySettings& settings);

// The settings `stored` records, with the defaults of ArraySettings for unset fields.
// REQUIRES: codes in range (meta::decode and meta::validate check them).
ArraySettings array_settings(const meta::StoredSettings& stored) noexcept;

// How create initialised an array, between InitMethod and the superblock's code (minor 5):
// kNotRecorded <-> meta::kInitMethodNotRecorded (a DG created by an older build).
std::uint8_t init_method_code(InitMethod method) noexcept;
// REQUIRES: a code in range (meta::decode and meta::validate check it).
InitMethod init_method_of(std::uint8_t code) noexcept;

}  // namespace graid
