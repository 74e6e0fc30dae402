#include "array/device_checks.h"

#include <algorithm>

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

Result<std::uint32_t> array_logical_block(std::span<MemberDevice* const> devices,
                                          std::uint32_t strip_bytes) {
  std::uint32_t block = 512;
  for (MemberDevice* d : devices) {
    if (!d) continue;
    const std::uint32_t b = d->logical_block_size();
    if (b == 0 || (b & (b - 1)) != 0 || strip_bytes % b != 0) {
      return make_error(Errc::kInvalidArgument,
                        "{} has a logical block size of {} bytes, which does not divide the "
                        "strip of {} bytes",
                        d->path(), b, strip_bytes);
    }
    block = std::max(block, b);
  }
  return block;
}

Status refuse_larger_block(MemberDevice& device, std::uint32_t array_block,
                           std::string_view array_name) {
  const std::uint32_t b = device.logical_block_size();
  if (b <= array_block) return Status::ok();
  return make_error(Errc::kInvalidArgument,
                    "{} has a logical block size of {} bytes, larger than array '{}''s {} bytes: "
                    "the array's {}-byte I/O would be refused by it; nothing was changed (use a "
                    "device formatted with {}-byte blocks)",
                    device.path(), b, array_name, array_block, array_block, array_block);
}

Status refuse_graid_superblock(MemberDevice& device) {
  auto found = find_graid_metadata(device);
  if (!found) return found.status();
  switch (found->kind) {
    case GraidMetadata::Kind::kNone:
      return Status::ok();
    case GraidMetadata::Kind::kSuperblock: {
      auto sb = read_superblock(device);
      if (sb) {
        return make_error(Errc::kBusy,
                          "{} already belongs to graid array {} ('{}'); nothing was changed "
                          "(force overwrites it)",
                          device.path(), sb->array_uuid.to_string(), sb->name);
      }
      break;  // changed under us: named as found
    }
    case GraidMetadata::Kind::kUnknownFormat:
      return make_error(Errc::kBusy,
                        "{} holds {}; nothing was changed (upgrade graid, or force overwrites it)",
                        device.path(), found->description);
    case GraidMetadata::Kind::kDamaged:
      break;
  }
  return make_error(Errc::kBusy, "{} holds {}; nothing was changed (force overwrites it)",
                    device.path(), found->description);
}

}  // namespace graid
