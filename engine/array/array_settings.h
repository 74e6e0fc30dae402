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

}  // namespace graid
