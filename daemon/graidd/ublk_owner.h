// Which ublk devices are graidd's: every device graidd adds carries a tag in the `ublksrv_flags`
// of its device info, a field the driver keeps for the server and never interprets (ADD_DEV
// stores it, GET_DEV_INFO returns it, user recovery keeps it). At start graidd lists the ublk
// devices the kernel has and finds its own among them: one a killed graidd added but never
// recorded in the state dir (a crash between ADD_DEV and the save), or one whose drive group
// cannot assemble now, which holds its users' I/O until someone releases it (docs/ublk.md,
// "Owned-device discovery").
//
// The tag, 64 bits: a magic (12) so that other ublk servers' devices are never taken for ours,
// this graidd's instance id (32: random, kept in its state dir), so that two graidd instances
// leave each other's devices alone even where their state dirs have the same path (two
// containers with /var/lib/graid), and the DG (14) and VD (6) ids. Besides the tag, a device is
// only ever taken for ours when graidd's own user made it and it is not an unprivileged device
// (ublk_device_may_be_ours).
//
// The previous build's tag (magic 16 bits, a 16-bit hash of the state dir's path, DG and VD 16
// bits each) is still read, with that hash, so that its devices are taken back after an upgrade.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graid/status.h"
#include "ublk/ublk_uapi.h"

namespace graid::daemon {

// Ids beyond what the tag's fields hold (DG ids are the smallest free, VD ids below
// meta::kMaxVds: in practice never) are recorded as all ones, and such a device is not
// attributed.
inline constexpr std::uint32_t kMaxTaggedDg = 0x3ffe;
inline constexpr std::uint32_t kMaxTaggedVd = 0x3e;

struct UblkOwner {
  std::uint32_t dg_id = 0;
  std::uint32_t vd_id = 0;
  bool operator==(const UblkOwner&) const = default;
};

// This graidd's instance id: read from `<state_dir>/instance-id`, made there at first start
// (32 random bits, written atomically, mode 0600). kIoError when the file cannot be read or
// made; kCorrupt when it does not hold one.
Result<std::uint32_t> load_or_make_instance_id(const std::string& state_dir);

// The previous build's instance tag: a hash of the state dir's canonical path (the path as given
// where it cannot be resolved).
std::uint16_t state_dir_tag(const std::string& state_dir);

// The ublksrv_flags of a device serving `owner` for the graidd whose instance id is `instance`.
std::uint64_t ublk_owner_flags(std::uint32_t instance, UblkOwner owner);
// The owner of a device whose ublksrv_flags are `flags` when they are this graidd's: its tag
// with `instance`, or the previous build's with `legacy_instance` (state_dir_tag()); and both ids
// recorded. nullopt otherwise.
std::optional<UblkOwner> ublk_owner_of(std::uint64_t flags, std::uint32_t instance,
                                       std::uint16_t legacy_instance);
// Whether the device `info` describes may be this graidd's at all, whatever its tag says: made
// by graidd's effective user (`euid`) and not an unprivileged device (UBLK_F_UNPRIVILEGED_DEV:
// another user's, who may set any tag). kBusy saying why not.
Status ublk_device_may_be_ours(const ublk::DevInfo& info, uid_t euid);

// The ids of the ublk devices the kernel has now (sysfs class ublk-char: ublkcN), ascending.
// Empty when there are none or the class does not exist (no ublk_drv).
std::vector<std::uint32_t> list_ublk_devices(const std::string& sys_root = "/sys");

}  // namespace graid::daemon
