// Who is using a block device graidd serves: before `unexport vd` or `delete vd` takes a ublk
// device away (docs/ublk.md, "Stopping and deleting"), and before SIGTERM stops one. Removing a
// device under a mounted filesystem or an application loses what they have not written yet.
//
// Best effort on Linux 6.12, which has no way to ask the ublk driver "is it open?": mounts
// (mountinfo), stacked devices (sysfs holders), swap, processes with the device open (every
// /proc/<pid>/fd), and an exclusive-open probe, which catches an exclusive claim the others
// missed (a mount in another mount namespace, a holder sysfs did not show). A process that opens
// the device after this looked is not seen.
#pragma once

#include <sys/stat.h>

#include <string>
#include <vector>

#include "graid/status.h"

namespace graid::daemon {

struct DeviceUsersRoots {
  std::string proc = "/proc";
  std::string sys = "/sys";
  bool exclusive_probe = true;  // try O_EXCL on a block device (tests with fake trees: off)
};

// One line per user found, for an error message: "mounted at /mnt/data", "held by dm-3",
// "used as swap", "open in pid 4242 (fio)", "claimed exclusively by someone". Empty when nobody
// was found. An error only when `path` cannot be looked at (stat). A regular file (tests) is
// matched by device and inode, a device node by its type and number.
Result<std::vector<std::string>> block_device_users(const std::string& path,
                                                    const DeviceUsersRoots& roots = {});
// What `--force` and SIGTERM do before a device in use goes or is left: syncfs() on every
// filesystem mounted from it (when `mounts`), then fsync() of the device itself, which writes its
// page cache and sends the device a flush (graid makes every acknowledged write durable on the
// members). The first failure, naming the step; the later steps still run.
Status sync_block_device(const std::string& path, bool mounts, const DeviceUsersRoots& roots = {});
// The same as block_device_users for the file `target` describes (what stat(2) said of `path`):
// tests give a block device's numbers without having one.
std::vector<std::string> device_users(const struct stat& target, const std::string& path,
                                      const DeviceUsersRoots& roots);

}  // namespace graid::daemon
