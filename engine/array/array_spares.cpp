// Hot spares: adding a device to a spare slot of the member table. Using one (rebuild onto it)
// comes with the resilience work.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "array/array_state.h"
#include "array/device_checks.h"

namespace graid {

Result<std::uint32_t> Array::add_spare(std::unique_ptr<MemberDevice> device, bool force) {
  if (!device) return make_error(Errc::kInvalidArgument, "no device given");
  State& s = *state_;
  MutexLock guard(s.control_mutex);
  const auto n = static_cast<std::uint32_t>(s.members.size());
  if (n + s.sb.spare_count >= kMaxMembers) {
    return make_error(Errc::kNoSpace, "array '{}' already has {} members and spares, the most {}",
                      s.name, n + s.sb.spare_count, kMaxMembers);
  }
  const std::uint64_t needed = s.data_offset + s.data_size;
  if (device->size() < needed) {
    return make_error(Errc::kNoSpace,
                      "{} has {} bytes; a spare of array '{}' needs {}; nothing was changed",
                      device->path(), device->size(), s.name, needed);
  }
  std::vector<MemberDevice*> all;
  for (const auto& d : s.members)
    if (d) all.push_back(d.get());
  for (const auto& d : s.spares)
    if (d) all.push_back(d.get());
  all.push_back(device.get());
  GRAID_RETURN_IF_ERROR(refuse_same_storage(all));
  if (!force) GRAID_RETURN_IF_ERROR(refuse_graid_superblock(*device));
  auto uuid = meta::Uuid::generate();
  if (!uuid) return uuid.status();
  const std::uint32_t slot = n + s.sb.spare_count;
  s.sb.members[slot] = meta::MemberEntry{*uuid, meta::MemberState::kSpare, 0, 0};
  ++s.sb.spare_count;
  MemberDevice* added = device.get();
  const std::string path = device->path();
  s.spares.push_back(std::move(device));
  Status st = s.write_superblocks_locked();
  const auto kept = std::find_if(s.spares.begin(), s.spares.end(),
                                 [&](const auto& d) { return d.get() == added; });
  if (kept == s.spares.end()) {
    return make_error(Errc::kIoError, "{} could not take its superblock; not added", path);
  }
  if (!st) {
    s.drop_spare_locked(n + static_cast<std::uint32_t>(kept - s.spares.begin()));
    return st;
  }
  spdlog::info("graid: array '{}': {} added as a spare (slot {})", s.name, path, slot);
  s.emit(ArrayEventKind::kSpareAdded, slot, fmt::format("{} added as a spare", path));
  return slot;
}

}  // namespace graid
