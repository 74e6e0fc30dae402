// Signatures of other software on a device graidd is asked to take: filesystems, partition
// tables (the GPT backup header at the end included), md, LVM, ZFS, swap, LUKS... found with
// libblkid, the library behind blkid(8) and wipefs(8). A device that holds one is refused unless
// the administrator says --force; then exactly what was found is wiped, as `wipefs -a` does (the
// magic bytes only), so that udev, LVM or mdadm never act on a stale signature after graid wrote
// its metadata around it (an md 1.2 superblock at 4 KiB survives graid's superblock at 0, and
// mdadm would assemble it at the next boot).
//
// Probing reads through a separate buffered read-only descriptor over the whole device; graidd's
// own descriptor (O_DIRECT, O_EXCL) is left alone. A passthrough PD (/dev/ngXnY) is probed
// through its namespace's block device (/dev/nvmeXnY): the character device has no page cache
// and libblkid cannot read it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "graid/status.h"

namespace graid::daemon {

struct DeviceSignature {
  std::string type;   // libblkid's TYPE or PTTYPE: "ext4", "swap", "linux_raid_member", "gpt"...
  std::string usage;  // "filesystem", "raid", "crypto", "other", or "partition table"
  std::string label;  // may be empty
  std::string uuid;   // may be empty
  std::uint64_t offset = 0;  // byte offset of its magic on the device
  bool operator==(const DeviceSignature&) const = default;
};

// The device libblkid reads for the PD at `path`: `path` itself, or for an NVMe generic
// character device its block sibling.
Result<std::string> signature_probe_path(const std::string& path);

// Every signature found on `path` (read-only; nothing is written). kIoError when it cannot be
// opened or read.
Result<std::vector<DeviceSignature>> probe_signatures(const std::string& path);

// "/dev/nvme3n1 holds an ext4 filesystem (label "data", UUID 7d1…) and a gpt partition table":
// what a refusal says. Empty `found`: "".
std::string describe_signatures(const std::string& path, std::span<const DeviceSignature> found);

// Wipes every signature on `path`, as `wipefs -a` does (only the bytes of each magic; a partition
// table's backup header and protective MBR, which libblkid shows once the primary is gone, with
// it), flushes the device and checks that none is left. Returns what it wiped. kIoError when a
// wipe or the flush fails, or a signature stays.
Result<std::vector<DeviceSignature>> wipe_signatures(const std::string& path);

}  // namespace graid::daemon
