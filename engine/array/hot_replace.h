// The parts of a hot replace the copy job (jobs/replace_job.cpp) shares with its lifecycle
// (hot_replace.cpp): giving up, copying strips the old member cannot read, and the swap.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "state/array_state.h"

namespace graid::hot_replace {

// Gives the pending replace up, closing its device (once the copy, if one runs, lets go of it);
// the array is as it was. False when none was pending.
bool give_up(Array::State& s, std::uint32_t member, const std::string& why);

// Copies stripes [first, first + count) of `member` to `target` (their locks held), strip by
// strip: read, or reconstruct what cannot be read.
Status copy_strips(Array::State& s, std::uint32_t member, MemberDevice& target, std::uint64_t first,
                   std::uint64_t count, std::span<std::byte> strip_buf);

// Puts the copied replacement into role `member`. On failure the replace is given up by the
// caller, the array as it was (the old device keeps the role); kNotFound: it was cancelled.
Status swap_in(Array::State& s, std::uint32_t member, std::string& old_path);

}  // namespace graid::hot_replace
