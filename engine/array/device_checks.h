// Checks on the devices handed to create and assemble, before anything is written. Internal to
// engine/array.
#pragma once

#include <memory>
#include <span>

#include "graid/member.h"
#include "graid/status.h"

namespace graid {

// Refuses (kInvalidArgument, naming both paths) when two devices are the same storage: the same
// path twice, or one file or block device under two names (a symlink, a hard link, "dir/./m0").
Status refuse_same_storage(std::span<const std::unique_ptr<MemberDevice>> devices);

// The logical block size an array over `devices` must use: the largest of theirs. kInvalidArgument
// when it is not a power of two or does not divide `strip_bytes`.
Result<std::uint32_t> array_logical_block(std::span<const std::unique_ptr<MemberDevice>> devices,
                                          std::uint32_t strip_bytes);

}  // namespace graid
