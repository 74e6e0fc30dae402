// Registry: physical drives (create, list, describe, delete, edit pd).
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <set>

#include "graidd/registry.h"
#include "graidd/request_args.h"

namespace graid::daemon {

using nlohmann::json;

Result<json> Registry::create_pd(const json& args) {
  const auto paths = arg_strings(args, "paths");
  if (paths.size() > 256)
    return make_error(Errc::kInvalidArgument, "create pd takes at most 256 paths at once");
  const bool force = arg_bool(args, "force");
  struct Candidate {
    std::string path;
    std::unique_ptr<MemberDevice> device;
    DeviceIdentity identity;
    bool erase = false;
    bool wipe = false;  // other software's signatures to wipe (--force)
  };
  std::vector<Candidate> todo;
  for (const auto& path : paths) {
    Candidate c;
    c.path = path;
    if (c.path.empty() || c.path[0] != '/')
      return make_error(Errc::kInvalidArgument, "{}: give an absolute path", c.path);
    for (const auto& [id, pd] : pds_)
      if (pd.path == c.path)
        return make_error(Errc::kInvalidArgument, "{} is already pd {}", c.path, id);
    struct stat st {};
    if (::stat(c.path.c_str(), &st) != 0)
      return make_error(Errc::kInvalidArgument, "{} does not exist", c.path);
    if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode) && !S_ISCHR(st.st_mode))
      return make_error(Errc::kInvalidArgument,
                        "{} is neither a block device, an NVMe generic device (/dev/ngXnY) nor a "
                        "regular file",
                        c.path);
    // The same storage under two names (a link, "dir/./x"), checked before opening it: the
    // second open would only say "in use". (Character devices other than NVMe's are refused by
    // the open below, without being opened.)
    const bool device = S_ISBLK(st.st_mode) || S_ISCHR(st.st_mode);
    DeviceIdentity pre;
    pre.known = true;
    pre.block = S_ISBLK(st.st_mode);
    pre.dev = device ? st.st_rdev : st.st_dev;
    pre.ino = device ? 0 : st.st_ino;
    for (const auto& [id, pd] : pds_)
      if (pd.identity == pre)
        return make_error(Errc::kInvalidArgument, "{} is the same drive as pd {} ({})", c.path, id,
                          pd.path);
    for (const auto& other : todo)
      if (other.identity == pre)
        return make_error(Errc::kInvalidArgument, "{} and {} are the same drive", other.path,
                          c.path);
    // An NVMe namespace's other node (/dev/ngXnY for /dev/nvmeXnY and back): the open below
    // would only say "in use".
    if (device) {
      if (auto sibling = nvme_sibling_path(c.path); sibling.is_ok()) {
        for (const auto& [id, pd] : pds_)
          if (pd.path == *sibling)
            return make_error(Errc::kInvalidArgument, "{} is the same NVMe namespace as pd {} ({})",
                              c.path, id, pd.path);
        for (const auto& other : todo)
          if (other.path == *sibling)
            return make_error(Errc::kInvalidArgument, "{} and {} are the same NVMe namespace",
                              other.path, c.path);
      }
    }
    auto dev = open_pd_device(c.path);
    if (!dev.is_ok()) {
      const Errc code = dev.status().code() == Errc::kBusy ? Errc::kBusy : Errc::kInvalidArgument;
      return make_error(code, "{}", dev.status().message());
    }
    c.device = std::move(*dev);
    c.identity = c.device->identity();
    if (c.identity.known) {
      for (const auto& [id, pd] : pds_)
        if (pd.identity == c.identity)
          return make_error(Errc::kInvalidArgument, "{} is the same drive as pd {} ({})", c.path,
                            id, pd.path);
      for (const auto& other : todo)
        if (other.identity == c.identity)
          return make_error(Errc::kInvalidArgument, "{} and {} are the same drive", other.path,
                            c.path);
    }
    if (c.device->size() < kMinPdBytes)
      return make_error(Errc::kNoSpace,
                        "{} is too small: {} bytes; a PD needs at least {} (1 MiB of metadata "
                        "and 1 MiB of data)",
                        c.path, c.device->size(), kMinPdBytes);
    // Graid metadata of any kind: a readable superblock, a damaged one, or one of a format this
    // build cannot read (never taken for a blank drive).
    auto metadata = Array::find_metadata(*c.device);
    if (!metadata.is_ok()) return metadata.status();
    if (metadata->kind != GraidMetadata::Kind::kNone) {
      if (!force) {
        const bool newer = metadata->kind == GraidMetadata::Kind::kUnknownFormat;
        return make_error(Errc::kInvalidArgument,
                          "{} carries {}: {}add --force to erase it and take the drive", c.path,
                          metadata->description, newer ? "upgrade graid, or " : "");
      }
      c.erase = true;
    }
    auto signatures = check_signatures(c.path, force);
    if (!signatures.is_ok()) return signatures.status();
    c.wipe = *signatures;
    todo.push_back(std::move(c));
  }
  // Everything checked: now change things.
  json out = json::array();
  for (auto& c : todo) {
    if (c.erase) {
      auto st = Array::erase_superblock(*c.device);
      if (!st) return make_error(st.code(), "{}: erasing its superblock: {}", c.path, st.message());
      spdlog::warn("{}: erased a graid superblock (--force)", c.path);
    }
    if (c.wipe) GRAID_RETURN_IF_ERROR(wipe_signatures_of(c.path, std::nullopt));
    const std::uint32_t id = smallest_free_id(pds_);
    Pd& pd = pds_[id];
    pd.id = id;
    pd.path = c.path;
    pd.identity = c.identity;
    pd.info = probe_pd(*c.device);
    pd.device = std::move(c.device);
    events_.add("pd_added", std::nullopt, id, std::nullopt,
                fmt::format("{} ({} bytes)", pd.path, pd.info.size));
    out.push_back(pd_json(pd));
  }
  if (auto st = save(); !st) return st;
  return json{{"pds", out}};
}

Result<json> Registry::list_pd(const json&) {
  json out = json::array();
  for (const auto& [id, pd] : pds_)
    out.push_back(pd_json(pd));
  return out;
}

Result<json> Registry::describe_pd(const json& args) {
  auto pd = find_pd(args);
  if (!pd.is_ok()) return pd.status();
  return pd_json(**pd);
}

Result<json> Registry::delete_pd(const json& args) {
  const auto list = arg_ids(args, "pd_ids", true);
  if (list.empty()) return make_error(Errc::kInvalidArgument, "delete pd needs PD ids");
  std::set<std::uint32_t> ids;
  for (const auto v : list) {
    auto pd = find_pd(json{{"pd_id", v}});
    if (!pd.is_ok()) return pd.status();
    if ((*pd)->replaced) {
      return make_error(Errc::kBusy,
                        "pd {} was replaced in dg {}, which holds it open until it stops or graidd "
                        "restarts: delete it then",
                        (*pd)->id, *(*pd)->dg_id);
    }
    if ((*pd)->dg_id) GRAID_RETURN_IF_ERROR(check_removable(**pd));
    if (!ids.insert((*pd)->id).second)
      return make_error(Errc::kInvalidArgument, "pd {} is named twice", (*pd)->id);
  }
  // Everything checked: now change things.
  for (const auto id : ids) {
    Pd& pd = pds_[id];
    if (pd.dg_id) {
      GRAID_RETURN_IF_ERROR(remove_from_dg(pd));
      continue;
    }
    events_.add("pd_deleted", std::nullopt, id, std::nullopt, pd.path);
    pds_.erase(id);
  }
  if (auto st = save(); !st) return st;
  return json{{"deleted", json(std::vector<std::uint32_t>(ids.begin(), ids.end()))}};
}

Status Registry::check_removable(const Pd& pd) const {
  const Dg& dg = dgs_.at(*pd.dg_id);
  if (pd.replacing) {
    return make_error(Errc::kBusy,
                      "pd {} is the copy of a hot replace in dg {}: it is in use until the copy "
                      "ends or is given up",
                      pd.id, dg.id);
  }
  if (!dg.array || dg.array->health() == ArrayHealth::kFailed) {
    return make_error(Errc::kBusy,
                      "pd {} belongs to dg {}, which is {}: its members are what may bring it back "
                      "(graidctl edit dg {} force_online); delete the dg to free them",
                      pd.id, dg.id, dg.array ? "failed" : "offline", dg.id);
  }
  if (!pd.slot) return Status::ok();  // stale, or its role went to a spare or a replacement
  const Array& array = *dg.array;
  auto slot = array.member_slot(*pd.slot);
  if (!slot.is_ok()) return slot.status();
  switch (slot->state) {
    case MemberSlotState::kFailed:
    case MemberSlotState::kRemoved:
    case MemberSlotState::kSpare:
      return Status::ok();
    case MemberSlotState::kRebuilding:
      return make_error(Errc::kBusy,
                        "pd {} is being rebuilt into slot {} of dg {}: take it offline first "
                        "(graidctl edit pd {} marker offline)",
                        pd.id, *pd.slot, dg.id, pd.id);
    default:
      return make_error(Errc::kBusy,
                        "pd {} is an active member of dg {} (slot {}): take it out of the dg "
                        "first (graidctl edit pd {} marker offline, or replace pd {} {} <new pd>)",
                        pd.id, dg.id, *pd.slot, pd.id, dg.id, pd.id);
  }
}

Status Registry::remove_from_dg(Pd& pd) {
  Dg& dg = dgs_.at(*pd.dg_id);
  const std::uint32_t id = pd.id;
  std::string what;
  if (pd.slot && *pd.slot >= dg.array->member_count()) {
    auto removed = dg.array->remove_spare(*pd.slot);
    if (!removed.is_ok()) return removed.status();
    what = fmt::format("hot spare (slot {}) taken out of dg {}; its superblock is erased", *pd.slot,
                       dg.id);
  } else {
    // A member that failed, was taken offline or vanished: the DG's superblocks keep its role
    // failed until a spare or a replacement takes it; the drive's own superblock is left as it is
    // (for examination). A device the array still holds is let go when the DG stops.
    const std::string role = pd.slot         ? fmt::format("slot {}", *pd.slot)
                             : pd.stale_slot ? fmt::format("slot {}, stale", *pd.stale_slot)
                                             : std::string("its role taken by another drive");
    const bool held = !pd.device && !pd.missing;
    what = fmt::format("removed from dg {} ({}); its superblock is left as it is{}", dg.id, role,
                       held ? fmt::format("; dg {} holds the drive open until it stops or graidd "
                                          "restarts",
                                          dg.id)
                            : "");
  }
  spdlog::info("pd {} ({}): {}", id, pd.path, what);
  events_.add("pd_removed", dg.id, id, std::nullopt, what);
  pds_.erase(id);
  update_slot_map(dg);
  return Status::ok();
}

Result<json> Registry::edit_pd(const json& args) {
  auto found = find_pd(args);
  if (!found.is_ok()) return found.status();
  Pd& pd = **found;
  const std::string key = arg_required_string(args, "key");
  const std::string value = arg_required_string(args, "value");
  if (key == "io_mode") return edit_pd_io_mode(pd, value);
  if (key == "hotspare") return edit_pd_hotspare(pd, value, arg_bool(args, "force"));
  if (key != "marker")
    return make_error(Errc::kInvalidArgument,
                      "unknown pd setting \"{}\" (known: marker, io_mode, hotspare)", key);
  if (value != "offline" && value != "online")
    return make_error(Errc::kInvalidArgument, "marker must be offline or online, not \"{}\"",
                      value);
  if (value == "online" && pd.dg_id && !pd.slot && pd.stale_slot) return readd_stale(pd);
  if (value == "online" && pd.marker_offline && pd.dg_id && !pd.slot)
    return make_error(Errc::kUnsupported,
                      "pd {}'s place in dg {} has been taken (a spare or a replacement): it cannot "
                      "come back while the dg runs (delete pd {} takes it out of the dg)",
                      pd.id, *pd.dg_id, pd.id);
  if (!pd.dg_id || !pd.slot)
    return make_error(Errc::kInvalidArgument, "pd {} is not a member of a drive group", pd.id);
  Dg& dg = dgs_.at(*pd.dg_id);
  if (!dg.array) return make_error(Errc::kUnsupported, "dg {} is offline", dg.id);
  Array& array = *dg.array;
  if (value == "offline") {
    if (pd.marker_offline) return pd_json(pd);  // already
    if (*pd.slot >= array.member_count())
      return make_error(Errc::kUnsupported,
                        "pd {} is a hot spare of dg {}, not a member: nothing to take offline",
                        pd.id, dg.id);
    std::uint64_t failed = 0;
    for (std::uint32_t m = 0; m < array.member_count(); ++m)
      if (array.member_health(m) == MemberHealth::kFailed) failed |= std::uint64_t{1} << m;
    if ((failed >> *pd.slot & 1) == 0 &&
        !array.geometry().survives(failed | std::uint64_t{1} << *pd.slot))
      return make_error(Errc::kInvalidArgument,
                        "taking pd {} offline would fail dg {} ({} tolerates {} failed "
                        "member(s)): refused",
                        pd.id, dg.id, raid_level_name(array.geometry().level()),
                        array.geometry().failures_tolerated());
    auto st = array.fail_member(
        *pd.slot, fmt::format("marked offline (graidctl edit pd {} marker offline)", pd.id));
    if (!st) return st;
    pd.marker_offline = true;
    events_.add("pd_offline", dg.id, pd.id, std::nullopt, "marked offline");
    if (auto s = save(); !s) return s;
    return pd_json(pd);
  }
  if (!pd.marker_offline)
    return make_error(Errc::kInvalidArgument, "pd {} is not marked offline", pd.id);
  if (*pd.slot >= array.member_count() || array.member_health(*pd.slot) != MemberHealth::kFailed)
    return make_error(Errc::kUnsupported,
                      "pd {}'s place in dg {} has been taken (a spare or a replacement): it cannot "
                      "come back while the dg runs (delete pd {} takes it out of the dg)",
                      pd.id, dg.id, pd.id);
  auto plan = array.readd_failed(*pd.slot);
  if (!plan) return plan.status();
  pd.marker_offline = false;
  events_.add("pd_online", dg.id, pd.id, std::nullopt,
              fmt::format("back in slot {}; {}", *pd.slot, plan->description));
  if (auto s = save(); !s) return s;
  return pd_json(pd);
}

Result<json> Registry::readd_stale(Pd& pd) {
  const std::uint32_t slot = *pd.stale_slot;
  Dg& dg = dgs_.at(*pd.dg_id);
  if (!dg.array) return make_error(Errc::kUnsupported, "dg {} is offline: {}", dg.id, dg.message);
  if (!pd.device)
    return make_error(Errc::kUnsupported, "pd {} ({}) is not available: {}", pd.id, pd.path,
                      pd.message.empty() ? "missing" : pd.message);
  auto role = dg.array->member_slot(slot);
  if (!role.is_ok()) return role.status();
  if (role->state != MemberSlotState::kFailed && role->state != MemberSlotState::kRemoved) {
    return make_error(Errc::kUnsupported,
                      "pd {}'s place in dg {} (slot {}) has been taken (a spare or a "
                      "replacement): it cannot come back while the dg runs (delete pd {} takes it "
                      "out of the dg)",
                      pd.id, dg.id, slot, pd.id);
  }
  // The same drive (reopen() made sure of its identity): its own superblock decides how much is
  // rebuilt (Array::readd_device).
  auto plan = dg.array->readd_device(slot, std::move(pd.device));
  if (!plan) {
    reopen(pd);
    return plan.status();
  }
  pd.slot = slot;
  pd.stale_slot.reset();
  pd.marker_offline = false;
  pd.message.clear();
  update_slot_map(dg);
  events_.add("pd_online", dg.id, pd.id, std::nullopt,
              fmt::format("back in slot {} after a restart; {}", slot, plan->description));
  if (auto s = save(); !s) return s;
  return pd_json(pd);
}

// Moves a free PD between its namespace's two nodes: /dev/ngXnY (NVMe passthrough) and
// /dev/nvmeXnY (the block device, O_DIRECT). The drive and its contents stay; only how graidd
// reaches it (and the path state.json records) changes. Refused for a PD in a DG: its array holds
// the open device, and swapping a live member's device underneath it is not something the
// engine offers.
Result<json> Registry::edit_pd_io_mode(Pd& pd, const std::string& value) {
  if (value != "passthrough" && value != "block")
    return make_error(Errc::kInvalidArgument, "io_mode must be passthrough or block, not \"{}\"",
                      value);
  if (pd.dg_id)
    return make_error(Errc::kBusy,
                      "pd {} belongs to dg {}: io_mode can change only on a free pd (delete the "
                      "dg, or create it from the other node)",
                      pd.id, *pd.dg_id);
  if (pd.missing || !pd.device)
    return make_error(Errc::kUnsupported, "pd {} ({}) is missing: {}", pd.id, pd.path, pd.message);
  if (pd.info.kind == "file")
    return make_error(Errc::kInvalidArgument,
                      "pd {} ({}) is a file: io_mode applies to NVMe namespaces", pd.id, pd.path);
  const bool passthrough = pd.device->io_mode() == MemberIoMode::kPassthrough;
  if (passthrough == (value == "passthrough")) return pd_json(pd);  // already
  auto other = nvme_sibling_path(pd.path);
  if (!other.is_ok())
    return make_error(Errc::kInvalidArgument, "pd {}: {}", pd.id, other.status().message());
  for (const auto& [id, p] : pds_)
    if (p.path == *other)
      return make_error(Errc::kInvalidArgument, "{} is already pd {}", *other, id);
  // Close first: the open PD holds the namespace (O_EXCL, flock) and would keep the other node
  // from being opened exclusively.
  const std::string old_path = pd.path;
  pd.device.reset();
  auto dev = open_pd_device(*other);
  if (!dev.is_ok()) {
    reopen(pd);
    if (pd.device) {
      pd.identity = pd.device->identity();
      pd.info = probe_pd(*pd.device);
    }
    const Errc code = dev.status().code() == Errc::kBusy ? Errc::kBusy : Errc::kInvalidArgument;
    return make_error(code, "pd {}: {}; it stays on {}", pd.id, dev.status().message(), old_path);
  }
  pd.device = std::move(*dev);
  pd.path = *other;
  pd.identity = pd.device->identity();
  pd.info = probe_pd(*pd.device);
  events_.add("pd_io_mode", std::nullopt, pd.id, std::nullopt,
              fmt::format("{} -> {} ({})", old_path, pd.path, pd.info.io_mode));
  if (auto st = save(); !st) return st;
  return pd_json(pd);
}

Result<json> Registry::replace_pd(const json& args) {
  auto found = find_dg(args, /*need_online=*/true);
  if (!found.is_ok()) return found.status();
  Dg& dg = **found;
  auto old_pd = find_pd(args, "old_pd_id");
  if (!old_pd.is_ok()) return old_pd.status();
  auto new_pd = find_pd(args, "new_pd_id");
  if (!new_pd.is_ok()) return new_pd.status();
  Pd& from = **old_pd;
  Pd& to = **new_pd;
  if (&from == &to) {
    return make_error(Errc::kInvalidArgument, "pd {} cannot replace itself{}", to.id,
                      from.stale_slot ? fmt::format(" (graidctl edit pd {} marker online takes it "
                                                    "back into its slot)",
                                                    from.id)
                                      : std::string());
  }
  // A PD that assembly found stale in its role (not held by the array) is replaced in that role
  // while it is failed, as a failed member is.
  const std::optional<std::uint32_t> from_slot = from.slot ? from.slot : from.stale_slot;
  if (from.dg_id != dg.id || !from_slot || *from_slot >= dg.array->member_count())
    return make_error(Errc::kInvalidArgument, "pd {} is not a member of dg {}", from.id, dg.id);
  if (!from.slot && dg.array->member_health(*from_slot) != MemberHealth::kFailed) {
    return make_error(Errc::kInvalidArgument,
                      "pd {}'s slot {} in dg {} has been taken by another drive: there is "
                      "nothing of it to replace (delete pd {} takes it out of the dg)",
                      from.id, *from_slot, dg.id, from.id);
  }
  if (to.dg_id)
    return make_error(Errc::kInvalidArgument, "pd {} already belongs to dg {}", to.id, *to.dg_id);
  if (!to.device)
    return make_error(Errc::kUnsupported, "pd {} is not available: {}", to.id,
                      to.message.empty() ? "missing" : to.message);
  auto signatures = check_signatures(to.path, arg_bool(args, "force"));
  if (!signatures.is_ok()) return signatures.status();
  const std::uint32_t slot = *from_slot;
  if (dg.array->member_health(slot) != MemberHealth::kFailed)
    return hot_replace(dg, from, to, *signatures);
  if (*signatures) GRAID_RETURN_IF_ERROR(wipe_signatures_of(to.path, to.id));
  auto st = dg.array->replace_failed(slot, std::move(to.device));
  if (!st) {
    reopen(to);
    return st;
  }
  from.slot.reset();
  if (from.stale_slot) {
    from.stale_slot.reset();
    from.message = fmt::format(
        "replaced by pd {} in slot {} of dg {}; still carries the dg's old superblock (delete pd "
        "{} takes it out of the dg)",
        to.id, slot, dg.id, from.id);
  }
  to.global_spare = false;
  to.dg_id = dg.id;
  to.slot = slot;
  to.superblock = true;
  to.sb_uuid = dg.uuid;
  update_slot_map(dg);
  events_.add("pd_replaced", dg.id, to.id, std::nullopt,
              fmt::format("replaces pd {} in slot {}; rebuild follows", from.id, slot));
  if (auto s = save(); !s) return s;
  return dg_json(dg, true);
}

Result<json> Registry::hot_replace(Dg& dg, Pd& from, Pd& to, bool wipe) {
  const std::uint32_t slot = *from.slot;
  if (from.marker_offline) {
    return make_error(Errc::kInvalidArgument, "pd {} is marked offline: replace it as failed",
                      from.id);
  }
  if (wipe) GRAID_RETURN_IF_ERROR(wipe_signatures_of(to.path, to.id));
  auto st = dg.array->start_replace(slot, std::move(to.device));
  if (!st) {
    reopen(to);
    return st;
  }
  to.global_spare = false;
  to.dg_id = dg.id;
  to.slot.reset();
  to.replacing = true;
  to.replacing_from = from.id;
  const bool degraded = dg.array->health() != ArrayHealth::kOptimal;
  events_.add("pd_replacing", dg.id, to.id, std::nullopt,
              fmt::format("copies pd {} (slot {}) and then takes its place; {}", from.id, slot,
                          degraded ? "the dg stays degraded meanwhile: the copy does not stand "
                                     "in for its failed member (replace pd that one to rebuild it)"
                                   : "the dg keeps its redundancy meanwhile"));
  if (auto s = save(); !s) return s;
  return dg_json(dg, true);
}

}  // namespace graid::daemon
