// Which ublk devices are graidd's: every device graidd adds carries a tag in the `ublksrv_flags`
// of its device info, a field the driver keeps for the server and never interprets (ADD_DEV
// stores it, GET_DEV_INFO returns it, user recovery keeps it). At start graidd lists the ublk
// devices the kernel has and finds its own among them: one a killed graidd added but never
// recorded in the state dir (a crash between ADD_DEV and the save), or one whose drive group
// cannot assemble now, which holds its users' I/O until someone releases it (docs/ublk.md,
// "Owned-device discovery").
//
// The tag, 64 bits: a magic (16) so that other ublk servers' devices are never taken for ours,
// the state dir's tag (16) so that two graidd instances on one host (each with its own state
// dir) leave each other's devices alone, and the DG and VD ids (16 each).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace graid::daemon {

// An id that does not fit the tag's 16 bits (DG ids are the smallest free, VD ids below
// meta::kMaxVds: in practice never) is recorded as this, and such a device is not attributed.
inline constexpr std::uint32_t kUnrecordedId = 0xffff;

struct UblkOwner {
  std::uint32_t dg_id = 0;
  std::uint32_t vd_id = 0;
  bool operator==(const UblkOwner&) const = default;
};

// The state dir's 16-bit tag: a hash of its canonical path (the path as given where it cannot be
// resolved).
std::uint16_t state_dir_tag(const std::string& state_dir);
// The ublksrv_flags of a device serving `owner` for the graidd whose state dir tag is `instance`.
std::uint64_t ublk_owner_flags(std::uint16_t instance, UblkOwner owner);
// The owner of a device whose ublksrv_flags are `flags`, when it is this graidd's (magic and
// instance match) and both ids were recorded; nullopt otherwise.
std::optional<UblkOwner> ublk_owner_of(std::uint64_t flags, std::uint16_t instance);

// The ids of the ublk devices the kernel has now (sysfs class ublk-char: ublkcN), ascending.
// Empty when there are none or the class does not exist (no ublk_drv).
std::vector<std::uint32_t> list_ublk_devices(const std::string& sys_root = "/sys");

}  // namespace graid::daemon
