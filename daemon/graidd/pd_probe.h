// What graidd tells about a physical drive (`describe pd`): its kind, model, serial and firmware
// from sysfs for a block device or an NVMe generic device (an NVMe namespace's controller), size,
// logical block size and I/O mode from the opened device.
#pragma once

#include <cstdint>
#include <string>

#include "graid/member.h"

namespace graid::daemon {

struct PdInfo {
  std::string kind;  // "block", "nvme" (a generic character device, /dev/ngXnY) or "file"
  std::string model, serial, firmware;
  std::uint64_t size = 0;
  std::uint32_t logical_block_size = 512;
  bool direct_io = true;
  std::string io_mode = "direct";  // "direct", "buffered" or "passthrough"
};

// Reads what `device` and sysfs say. Never fails: fields it cannot learn stay empty.
PdInfo probe_pd(const MemberDevice& device);

}  // namespace graid::daemon
