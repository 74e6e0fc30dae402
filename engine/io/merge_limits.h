// How large a merged member I/O may be (IoContextOptions::merge, MemberFile::set_merge_limits):
// for a regular file our own bound; for a block device also the queue's limits from sysfs
// (max_sectors_kb: the largest request the block layer sends the device unsplit; max_segments),
// so what the context merges is what reaches the drive. Internal to engine/io.
#pragma once

#include <cstdint>
#include <string>

namespace graid {

struct MergeLimits {
  std::uint32_t max_bytes = 0;
  std::uint16_t max_segments = 0;
};

// The bound for any file: 1 MiB and 256 iovecs (the kernel takes 1024).
inline constexpr MergeLimits kFileMergeLimits{1U << 20, 256};

// For the block device numbered `rdev`: kFileMergeLimits capped by
// <sys>/dev/block/<major>:<minor>/queue/{max_sectors_kb,max_segments} (a partition's are its
// disk's: ../queue). Where sysfs says nothing the file bound stands: the kernel splits what its
// queue cannot take, so a guess costs speed, never correctness.
MergeLimits block_merge_limits(std::uint64_t rdev, const std::string& sys = "/sys");

}  // namespace graid
