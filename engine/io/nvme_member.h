// The NVMe passthrough member (nvme_member.cpp); open_member() makes it for /dev/ngXnY. Internal
// to engine/io.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "graid/member.h"
#include "io/nvme_command.h"

namespace graid {

// A passthrough member over an already open `file` with the given limits and size, skipping
// Identify and sysfs: how tests reach the member's own checks (ring shape, alignment, range) on a
// machine without NVMe. Commands it sends to a file that is not an NVMe generic device fail as
// the kernel says (-EOPNOTSUPP from io_uring, ENOTTY from the ioctl).
std::unique_ptr<MemberDevice> make_nvme_member_for_testing(std::string path,
                                                           std::shared_ptr<MemberFile> file,
                                                           const nvme::Limits& limits,
                                                           std::uint64_t size);

}  // namespace graid
