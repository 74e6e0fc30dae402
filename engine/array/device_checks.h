// Checks on the devices handed to create and assemble, before anything is written. Internal to
// engine/array.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "graid/member.h"
#include "graid/status.h"

namespace graid {

// Refuses (kInvalidArgument, naming both paths) when two devices are the same storage: the same
// path twice, or one file or block device under two names (a symlink, a hard link, "dir/./m0").
Status refuse_same_storage(std::span<const std::unique_ptr<MemberDevice>> devices);
Status refuse_same_storage(std::span<MemberDevice* const> devices);

// Refuses (kBusy, naming what it found) a device that carries graid metadata: a readable
// superblock (it belongs to an array, maybe a live one), a damaged one, or one of a format this
// build cannot read (describe_graid_metadata); kIoError when its first block cannot be read.
// Writes nothing.
Status refuse_graid_superblock(MemberDevice& device);

// The logical block size an array over `devices` must use: the largest of theirs. kInvalidArgument
// when it is not a power of two or does not divide `strip_bytes`.
Result<std::uint32_t> array_logical_block(std::span<MemberDevice* const> devices,
                                          std::uint32_t strip_bytes);

// Refuses (kInvalidArgument, naming both sizes) a device joining a running array whose logical
// block is larger than the array's `array_block`: the array issues I/O aligned to its own block,
// which such a device refuses (EINVAL on every 512-byte-aligned write of a 4Kn drive).
Status refuse_larger_block(MemberDevice& device, std::uint32_t array_block,
                           std::string_view array_name);

// The same over owning pointers (unique_ptr or shared_ptr; null entries are skipped).
template <typename Owning>
Result<std::uint32_t> array_logical_block(const std::vector<Owning>& devices,
                                          std::uint32_t strip_bytes) {
  std::vector<MemberDevice*> raw;
  for (const auto& d : devices)
    raw.push_back(d.get());
  return array_logical_block(std::span<MemberDevice* const>(raw), strip_bytes);
}

}  // namespace graid
