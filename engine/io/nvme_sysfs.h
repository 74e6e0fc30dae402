// What sysfs says about NVMe namespace nodes: the class of a character device (is it an NVMe
// generic namespace device?), the block device of the same namespace and back, and that block
// device's queue limits. Every function takes the roots of sysfs and /dev, so tests run them on a
// fake tree in a temp dir. Nothing here opens a device. Internal to engine/io.
//
// Pairing: the kernel names a namespace's block device nvme<A>n<B> and its generic character
// device ng<A>n<B> with the same numbers, both children of the same controller (or, with native
// multipath, of the same subsystem). A pair is taken when the names match and, where sysfs links
// both to a parent device, the parents are the same.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "io/nvme_identify.h"

namespace graid::nvme {

struct SysfsRoots {
  std::string sys = "/sys";
  std::string dev = "/dev";
};

// The name of the class a character device number belongs to ("nvme-generic" for /dev/ngXnY,
// "nvme" for a controller's /dev/nvmeX, "mem" for /dev/null); empty when sysfs does not know it.
std::string char_device_class(const SysfsRoots& roots, std::uint64_t rdev);

// The kernel's name of a device number ("ng0n1", "nvme0n1"); empty when sysfs does not know it.
std::string device_name(const SysfsRoots& roots, bool block, std::uint64_t rdev);

// The block device name of the namespace whose generic device is `ng_name`, and back; empty
// when there is none (the kernel made no block device, say for a format it cannot use).
std::string block_sibling(const SysfsRoots& roots, const std::string& ng_name);
std::string generic_sibling(const SysfsRoots& roots, const std::string& block_name);

// The device number a sysfs device has (its "dev" file), if any.
std::optional<std::uint64_t> sysfs_devnum(const SysfsRoots& roots, bool block,
                                          const std::string& name);

// The node under roots.dev for a device named `name`, when it exists with the device number sysfs
// gives; empty otherwise (no node, or a stale one).
std::string device_node(const SysfsRoots& roots, bool block, const std::string& name);

// /sys/class/block/<name>/queue limits; fields stay unknown where a file is missing.
QueueLimits read_queue_limits(const SysfsRoots& roots, const std::string& block_name);

// The controller's sysfs directory of a device (its "device" link, resolved): model, serial and
// firmware_rev live there. Empty when unknown.
std::string parent_device_dir(const SysfsRoots& roots, bool block, const std::string& name);

}  // namespace graid::nvme
