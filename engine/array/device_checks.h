// Checks on the devices handed to create and assemble, before anything is written. Internal to
// engine/array.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "graid/member.h"
#include "graid/status.h"

namespace graid {

// Refuses (kInvalidArgument, naming both paths) when two devices are the same storage: the same
// path twice, or one file or block device under two names (a symlink, a hard link, "dir/./m0").
Status refuse_same_storage(std::span<const std::unique_ptr<MemberDevice>> devices);
Status refuse_same_storage(std::span<MemberDevice* const> devices);

}  // namespace graid
