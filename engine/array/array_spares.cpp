// Hot spares and replacements: adding a device to a spare slot of the member table, and putting
// a spare or a new device into a failed role, which a rebuild (rebuild.cpp) then fills.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "array/device_checks.h"
#include "array/journal_replay.h"
#include "array/superblock_io.h"
#include "state/array_state.h"

namespace graid {

// What a device joining the array (as a spare or into a role) must pass: big enough, not the
// storage of a member or spare under another name, no graid metadata unless `force` (a device
// that comes back into its own role carries the array's own: `force` then).
Status check_new_device(const Array::State& s, MemberDevice& device, bool force)
    REQUIRES(s.control_mutex) {
  const std::uint64_t needed = s.data_offset + s.data_size;
  if (device.size() < needed) {
    return make_error(Errc::kNoSpace,
                      "{} has {} bytes; array '{}' needs {} per member; nothing was changed",
                      device.path(), device.size(), s.name, needed);
  }
  GRAID_RETURN_IF_ERROR(refuse_larger_block(device, s.logical_block, s.name));
  std::vector<MemberDevice*> all;
  for (std::uint32_t m = 0; m < s.members.size(); ++m)
    if (s.members[m] && !s.is_failed(m)) all.push_back(s.members[m].get());
  for (const auto& d : s.spares)
    if (d) all.push_back(d.get());
  if (s.replacement_owner) all.push_back(s.replacement_owner.get());
  all.push_back(&device);
  GRAID_RETURN_IF_ERROR(refuse_same_storage(all));
  if (!force) GRAID_RETURN_IF_ERROR(refuse_graid_superblock(device));
  return Status::ok();
}

namespace {

// Why failed role `member` cannot take a new device now, or ok.
Status check_failed_role(const Array::State& s, std::uint32_t member) REQUIRES(s.control_mutex) {
  if (member >= s.members.size()) {
    return make_error(Errc::kOutOfRange, "array '{}' has no member {} (it has {})", s.name, member,
                      s.members.size());
  }
  if (!s.is_failed(member)) {
    return make_error(Errc::kInvalidArgument, "member {} of array '{}' has not failed", member,
                      s.name);
  }
  if (s.is_rebuilding(member)) {
    return make_error(Errc::kInvalidArgument, "member {} of array '{}' is being rebuilt already",
                      member, s.name);
  }
  if (s.array_failed()) {
    return make_error(Errc::kIoError,
                      "array '{}' has failed ({} members lost): there is nothing to rebuild "
                      "member {} from",
                      s.name, s.failed_count.load(), member);
  }
  return Status::ok();
}

// Puts `device` (member uuid `uuid`) into failed role `member` as kRebuilding from 0 and records
// it; below stripe `bitmap_below` (its own device back) it lacks only what the bitmap marks
// (readd_bitmap_below). The device that held the role stays open until the array goes
// (member_table.h).
Status install_locked(Array::State& s, std::uint32_t member, std::shared_ptr<MemberDevice> device,
                      const meta::Uuid& uuid, const std::string& how,
                      std::uint64_t bitmap_below = 0) REQUIRES(s.control_mutex) {
  const std::string path = device->path();
  if (Status st = clear_journal_area(*device, s.sb.journal_offset, s.sb.journal_bytes); !st) {
    return make_error(st.code(), "{}: clearing its journal area: {}; nothing was changed", path,
                      st.message());
  }
  s.members.set(member, std::move(device));
  s.sb.members[member] = meta::MemberEntry{uuid, meta::MemberState::kRebuilding, 0, 0};
  s.rebuilt[member].store(0, std::memory_order_release);
  s.readd_bitmap_below[member].store(bitmap_below, std::memory_order_release);
  s.rebuilding[member].store(1, std::memory_order_release);
  Status st = s.write_superblocks_locked();
  if (!st) return st;
  if (!s.is_rebuilding(member)) {
    return make_error(Errc::kIoError, "{} failed taking its superblock as member {}", path, member);
  }
  spdlog::info("graid: array '{}': {} takes failed member {}'s place ({}); rebuild pending", s.name,
               path, member, how);
  s.emit(ArrayEventKind::kMemberReplaced, member, fmt::format("{} took its place ({})", path, how));
  return Status::ok();
}

}  // namespace

Result<std::uint32_t> Array::add_spare(std::unique_ptr<MemberDevice> device, bool force) {
  if (!device) return make_error(Errc::kInvalidArgument, "no device given");
  State& s = *state_;
  MutexLock guard(s.control_mutex);
  const auto n = static_cast<std::uint32_t>(s.members.size());
  if (n + s.sb.spare_count >= kMaxMembers) {
    return make_error(Errc::kNoSpace, "array '{}' already has {} members and spares, the most {}",
                      s.name, n + s.sb.spare_count, kMaxMembers);
  }
  GRAID_RETURN_IF_ERROR(check_new_device(s, *device, force));
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

Result<std::shared_ptr<MemberDevice>> Array::remove_spare(std::uint32_t slot) {
  State& s = *state_;
  std::shared_ptr<MemberDevice> device;
  {
    MutexLock guard(s.control_mutex);
    const auto n = static_cast<std::uint32_t>(s.members.size());
    if (slot < n || slot >= n + s.sb.spare_count ||
        s.sb.members[slot].state != meta::MemberState::kSpare) {
      return make_error(Errc::kInvalidArgument, "slot {} of array '{}' is not a hot spare", slot,
                        s.name);
    }
    if (s.sb.replace && s.sb.replace->slot == slot) {
      return make_error(Errc::kInvalidArgument,
                        "slot {} of array '{}' holds the copy of a hot replace of member {}: "
                        "cancel the replace to take it out",
                        slot, s.name, s.sb.replace->role);
    }
    device = s.spares[slot - n];
    s.drop_spare_locked(slot);
    GRAID_RETURN_IF_ERROR(s.write_superblocks_locked());
  }
  const std::string path = device ? device->path() : std::string("(missing)");
  if (device) {
    if (Status st = erase_superblock(*device); !st) {
      spdlog::warn("graid: array '{}': spare {} taken out, but its superblock was not erased: {}",
                   s.name, path, st.message());
    }
  }
  spdlog::info("graid: array '{}': spare {} (slot {}) taken out", s.name, path, slot);
  return device;
}

Status Array::take_spare(std::uint32_t member) {
  State& s = *state_;
  MutexLock guard(s.control_mutex);
  GRAID_RETURN_IF_ERROR(check_failed_role(s, member));
  const auto n = static_cast<std::uint32_t>(s.members.size());
  const auto spare =
      std::find_if(s.spares.begin(), s.spares.end(), [](const auto& d) { return d != nullptr; });
  if (spare == s.spares.end()) {
    return make_error(Errc::kNotFound, "array '{}' has no hot spare to replace member {}", s.name,
                      member);
  }
  const auto slot = n + static_cast<std::uint32_t>(spare - s.spares.begin());
  std::shared_ptr<MemberDevice> device = *spare;
  const meta::Uuid uuid = s.sb.members[slot].uuid;
  s.drop_spare_locked(slot);  // the role's superblock update below records both
  return install_locked(s, member, std::move(device), uuid,
                        fmt::format("hot spare from slot {}", slot));
}

namespace {

// md's recovery_offset rule for a device taken back into failed role `member`: the member data
// bytes below which it lacks only what the bitmap marks (0: rebuilt in full), and why. Decided
// from the device's own superblock, the last one it took while it was in the array: its state
// there says how far it was in sync (active: all of it; rebuilding: up to its recorded offset,
// flushed before it was recorded), and its event count whether every write it missed since still
// has its bit (no bit was cleared after it).
ReaddPlan plan_readd(Array::State& s, std::uint32_t member, MemberDevice& device)
    REQUIRES(s.control_mutex) {
  const auto full = [](std::string why) {
    return ReaddPlan{0, fmt::format("taken back, rebuilt in full: {}", why)};
  };
  if (!s.bitmap) return full("the array keeps no write-intent bitmap");
  auto own = read_superblock(device);
  if (!own) return full(fmt::format("its superblock cannot be used ({})", own.status().message()));
  if (own->array_uuid != s.sb.array_uuid || own->member_index != member ||
      own->member_uuid != s.sb.members[member].uuid) {
    return full("its superblock is not the one it had as this member");
  }
  const std::uint64_t cleared = s.events_at_bitmap_clear.load(std::memory_order_acquire);
  if (own->events < cleared) {
    return full(fmt::format(
        "write-intent bits were cleared since it was last in sync (its events {}, cleared at {})",
        own->events, cleared));
  }
  const meta::MemberEntry& entry = own->members[member];
  std::uint64_t below = 0;
  if (entry.state == meta::MemberState::kActive) {
    below = s.data_size;
  } else if (entry.state == meta::MemberState::kRebuilding) {
    below = std::min(s.data_size, entry.rebuild_offset) / s.geometry.strip_bytes() *
            s.geometry.strip_bytes();
    if (below == 0) return full("it failed before its rebuild recorded any progress");
  } else {
    return full(fmt::format("its superblock records it {}", meta::member_state_name(entry.state)));
  }
  std::uint64_t dirty = 0;
  for (std::uint64_t r = 0; r < s.bitmap->region_count(); ++r)
    dirty += s.bitmap->is_dirty(r) ? 1 : 0;
  std::string where = fmt::format(
      "taken back, rebuilt where the bitmap marks writes it missed ({} of {} regions so far)",
      dirty, s.bitmap->region_count());
  if (below < s.data_size) {
    where +=
        fmt::format(" below {} MiB, where its rebuild had got to, and in full above", below >> 20);
  }
  return ReaddPlan{below, std::move(where)};
}

}  // namespace

Result<ReaddPlan> Array::readd_failed(std::uint32_t member) {
  State& s = *state_;
  MutexLock guard(s.control_mutex);
  GRAID_RETURN_IF_ERROR(check_failed_role(s, member));
  std::shared_ptr<MemberDevice> device = s.members[member];
  if (!device) {
    return make_error(Errc::kNotFound, "member {} of array '{}' has no device to take back", member,
                      s.name);
  }
  GRAID_RETURN_IF_ERROR(refuse_larger_block(*device, s.logical_block, s.name));
  ReaddPlan plan = plan_readd(s, member, *device);
  auto uuid = meta::Uuid::generate();  // a new identity: its old superblock no longer counts
  if (!uuid) return uuid.status();
  GRAID_RETURN_IF_ERROR(install_locked(s, member, std::move(device), *uuid, plan.description,
                                       plan.bitmap_limited_below / s.geometry.strip_bytes()));
  return plan;
}

Result<ReaddPlan> Array::readd_device(std::uint32_t member, std::unique_ptr<MemberDevice> device,
                                      bool force) {
  if (!device) return make_error(Errc::kInvalidArgument, "no device given");
  State& s = *state_;
  MutexLock guard(s.control_mutex);
  GRAID_RETURN_IF_ERROR(check_failed_role(s, member));
  // Its own superblock says whether it is this member coming back: the array, the slot and the
  // member UUID the role still records. One of this array's own devices from before (another
  // slot, an older member of this one) holds nothing of anyone else's: no force needed.
  const auto own = read_superblock(*device);
  const bool ours = own && own->array_uuid == s.sb.array_uuid;
  const bool returning =
      ours && own->member_index == member && own->member_uuid == s.sb.members[member].uuid;
  GRAID_RETURN_IF_ERROR(check_new_device(s, *device, force || ours));
  ReaddPlan plan =
      returning ? plan_readd(s, member, *device)
                : ReaddPlan{0, fmt::format("taken back, rebuilt in full: {}",
                                           ours ? "its superblock is not the one it had as this "
                                                  "member"
                                                : "it carries no superblock of this array")};
  auto uuid = meta::Uuid::generate();  // a new identity: its old superblock no longer counts
  if (!uuid) return uuid.status();
  GRAID_RETURN_IF_ERROR(install_locked(s, member, std::shared_ptr<MemberDevice>(std::move(device)),
                                       *uuid, plan.description,
                                       plan.bitmap_limited_below / s.geometry.strip_bytes()));
  return plan;
}

Status Array::replace_failed(std::uint32_t member, std::unique_ptr<MemberDevice> device,
                             bool force) {
  if (!device) return make_error(Errc::kInvalidArgument, "no device given");
  State& s = *state_;
  MutexLock guard(s.control_mutex);
  GRAID_RETURN_IF_ERROR(check_failed_role(s, member));
  GRAID_RETURN_IF_ERROR(check_new_device(s, *device, force));
  auto uuid = meta::Uuid::generate();
  if (!uuid) return uuid.status();
  return install_locked(s, member, std::shared_ptr<MemberDevice>(std::move(device)), *uuid,
                        "replacement");
}

}  // namespace graid
