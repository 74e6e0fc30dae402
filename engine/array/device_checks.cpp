#include "array/device_checks.h"

#include "array/superblock_io.h"

namespace graid {

Status refuse_same_storage(std::span<const std::unique_ptr<MemberDevice>> devices) {
  std::vector<MemberDevice*> pointers;
  for (const auto& d : devices)
    pointers.push_back(d.get());
  return refuse_same_storage(pointers);
}

Status refuse_same_storage(std::span<MemberDevice* const> devices) {
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const DeviceIdentity a = devices[i]->identity();
    for (std::size_t j = 0; j < i; ++j) {
      const bool same_path = devices[j]->path() == devices[i]->path();
      if (!same_path && !(a.known && devices[j]->identity() == a)) continue;
      if (same_path) {
        return make_error(Errc::kInvalidArgument,
                          "{} is listed twice (devices {} and {}); nothing was changed",
                          devices[i]->path(), j, i);
      }
      return make_error(Errc::kInvalidArgument,
                        "{} and {} are the same {} under two names (devices {} and {}); nothing "
                        "was changed",
                        devices[j]->path(), devices[i]->path(), a.block ? "block device" : "file",
                        j, i);
    }
  }
  return Status::ok();
}

Status refuse_graid_superblock(MemberDevice& device) {
  auto old = read_superblock(device);
  if (!old) return Status::ok();
  return make_error(Errc::kBusy,
                    "{} already belongs to graid array {} ('{}'); nothing was changed (force "
                    "overwrites it)",
                    device.path(), old->array_uuid.to_string(), old->name);
}

}  // namespace graid
