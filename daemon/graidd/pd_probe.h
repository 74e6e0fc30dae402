// What graidd tells about a physical drive (`describe pd`): its kind, model, serial and firmware
// from sysfs for a block device (an NVMe namespace's controller), size and logical block size
// from the opened device.
#pragma once

#include <cstdint>
#include <string>

#include "graid/member.h"

namespace graid::daemon {

struct PdInfo {
  std::string kind;  // "block" or "file"
  std::string model, serial, firmware;
  std::uint64_t size = 0;
  std::uint32_t logical_block_size = 512;
  bool direct_io = true;
};

// Reads what `device` and sysfs say. Never fails: fields it cannot learn stay empty.
PdInfo probe_pd(const MemberDevice& device);

}  // namespace graid::daemon
