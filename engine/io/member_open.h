// Pieces open_member() shares between the file/block member (file_member.cpp) and the NVMe
// passthrough member (nvme_member.cpp). Internal to engine/io.
#pragma once

#include <sys/stat.h>

#include <memory>
#include <string>

#include "graid/member.h"

namespace graid {

// The error class of an errno from open/stat/ioctl on a member.
Errc errc_for_errno(int err);

// Takes the exclusive advisory lock of OpenOptions::lock on `fd` without waiting for it.
Status lock_member_file(int fd, const std::string& path);

// open_member() for a character device `path` (stat as `st`): an NVMe generic namespace device
// becomes a passthrough member; any other character device is refused without being opened.
Result<std::unique_ptr<MemberDevice>> open_nvme_member(const std::string& path,
                                                       const struct stat& st,
                                                       const OpenOptions& options);

}  // namespace graid
