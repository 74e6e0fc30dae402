// Registry: drive groups (create, list, describe, delete, edit dg).
#include <spdlog/spdlog.h>

#include <set>

#include "graidd/registry.h"
#include "graidd/request_args.h"

namespace graid::daemon {

using nlohmann::json;

Result<json> Registry::create_dg(const json& args) {
  const std::string level_name = arg_required_string(args, "level");
  auto level = parse_raid_level(level_name);
  if (!level.is_ok())
    return make_error(Errc::kInvalidArgument,
                      "unknown RAID level \"{}\" (raid0, raid1, raid10, raid5, raid6)", level_name);
  const auto members = arg_ids(args, "pd_ids", true);
  const auto spares = arg_ids(args, "spare_ids", false);
  if (members.empty()) return make_error(Errc::kInvalidArgument, "create dg needs PDs");
  const std::uint64_t strip = arg_opt_u64(args, "strip").value_or(64 * 1024);
  const std::string name = arg_string(args, "name");
  const bool assume_clean = arg_bool(args, "assume_clean");
  const bool force = arg_bool(args, "force");
  if (name.size() > 31)
    return make_error(Errc::kInvalidArgument, "the name \"{}\" is longer than 31 bytes", name);
  auto geometry = Geometry::make(*level, static_cast<std::uint32_t>(members.size()),
                                 strip > UINT32_MAX ? 0 : static_cast<std::uint32_t>(strip));
  if (!geometry.is_ok())
    return make_error(Errc::kInvalidArgument, "{} with {} PDs and a {}-byte strip: {}",
                      raid_level_name(*level), members.size(), strip, geometry.status().message());
  std::set<std::uint32_t> seen;
  std::uint64_t smallest = UINT64_MAX;
  for (const auto* list : {&members, &spares}) {
    for (const auto id : *list) {
      auto it = pds_.find(id);
      if (it == pds_.end())
        return make_error(Errc::kNotFound, "pd {} does not exist (graidctl list pd)", id);
      const Pd& pd = it->second;
      if (!seen.insert(id).second)
        return make_error(Errc::kInvalidArgument, "pd {} is named twice", id);
      if (pd.dg_id) return make_error(Errc::kBusy, "pd {} already belongs to dg {}", id, *pd.dg_id);
      if (pd.global_spare)
        return make_error(
            Errc::kBusy, "pd {} is a global hot spare (graidctl edit pd {} hotspare none frees it)",
            id, id);
      if (pd.missing || !pd.device)
        return make_error(Errc::kInvalidArgument, "pd {} ({}) is missing: {}", id, pd.path,
                          pd.message);
    }
  }
  for (const auto id : members)
    smallest = std::min(smallest, pds_[id].device->size());
  for (const auto id : spares)
    if (pds_[id].device->size() < smallest)
      return make_error(Errc::kNoSpace, "spare pd {} is smaller than the smallest member", id);

  // Other software's signatures on any of them: all refused at once, or wiped with --force.
  std::vector<std::uint32_t> to_wipe;
  std::vector<std::string> found;
  for (const auto* list : {&members, &spares}) {
    for (const auto id : *list) {
      auto signatures = check_signatures(pds_[id].path, force);
      if (!signatures.is_ok()) {
        found.push_back(fmt::format("pd {}: {}", id, signatures.status().message()));
        if (signatures.status().code() != Errc::kInvalidArgument) return signatures.status();
      } else if (*signatures) {
        to_wipe.push_back(id);
      }
    }
  }
  if (!found.empty()) return make_error(Errc::kInvalidArgument, "{}", fmt::join(found, "; "));
  for (const auto id : to_wipe)
    GRAID_RETURN_IF_ERROR(wipe_signatures_of(pds_[id].path, id));

  const std::uint32_t dg_id = smallest_free_id(dgs_);
  auto observer = make_observer(dg_id);
  CreateOptions co;
  co.level = *level;
  co.strip_bytes = static_cast<std::uint32_t>(strip);
  co.name = name;
  co.assume_clean = assume_clean;
  // The DG is usable at once; its redundancy job initialises it at the DG's init speed.
  co.background_init = true;
  std::vector<std::unique_ptr<MemberDevice>> devices;
  for (const auto id : members)
    devices.push_back(std::move(pds_[id].device));
  auto array = Array::create(std::move(devices), co, array_options(*observer), force);
  if (!array.is_ok()) {
    for (const auto id : members)
      reopen(pds_[id]);
    return array.status();
  }
  Dg& dg = dgs_[dg_id];
  dg.id = dg_id;
  dg.observer = std::move(observer);
  dg.array = std::move(*array);
  dg.uuid = dg.array->uuid();
  for (std::size_t i = 0; i < members.size(); ++i) {
    Pd& pd = pds_[members[i]];
    pd.dg_id = dg_id;
    pd.slot = static_cast<std::uint32_t>(i);
    pd.superblock = true;
    pd.sb_uuid = dg.uuid;
  }
  std::string spare_problems;
  for (const auto id : spares) {
    Pd& pd = pds_[id];
    auto slot = dg.array->add_spare(std::move(pd.device));
    if (!slot.is_ok()) {
      reopen(pd);
      spare_problems +=
          fmt::format("; pd {} not added as a spare: {}", id, slot.status().message());
      continue;
    }
    pd.dg_id = dg_id;
    pd.slot = *slot;
    pd.superblock = true;
    pd.sb_uuid = dg.uuid;
  }
  update_slot_map(dg);
  start_jobs(dg);
  events_.add(
      "dg_created", dg_id, std::nullopt, std::nullopt,
      fmt::format("{} of {} PDs, strip {}, {} bytes, {}{}", raid_level_name(*level), members.size(),
                  strip, dg.array->capacity(),
                  dg.array->init_progress()
                      ? std::string("initialising in the background")
                      : fmt::format("initialised: {}", init_method_name(dg.array->init_method())),
                  spare_problems));
  if (auto st = save(); !st) return st;
  return dg_json(dg, true);
}

Result<json> Registry::list_dg(const json&) {
  json out = json::array();
  for (const auto& [id, dg] : dgs_)
    out.push_back(dg_json(dg, false));
  return out;
}

Result<json> Registry::describe_dg(const json& args) {
  auto dg = find_dg(args);
  if (!dg.is_ok()) return dg.status();
  return dg_json(**dg, true);
}

Result<json> Registry::delete_dg(const json& args) {
  auto found = find_dg(args);
  if (!found.is_ok()) return found.status();
  Dg& dg = **found;
  if (!arg_bool(args, "confirm"))
    return make_error(Errc::kInvalidArgument,
                      "deleting dg {} erases its superblocks: add --confirm", dg.id);
  const std::size_t vds = dg.array ? dg.array->vds().size() : dg.exam ? dg.exam->vds.size() : 0;
  if (vds > 0)
    return make_error(Errc::kBusy, "dg {} still has {} VD(s): delete them first", dg.id, vds);
  // ublk devices held for its VDs since a graidd was killed: nothing can serve them once the DG
  // is gone.
  if (!held_of(dg.id, std::nullopt).empty()) {
    auto released = release_held(dg.id, std::nullopt, arg_bool(args, "force"), "dg deleted");
    if (!released.is_ok())
      return make_error(released.status().code(), "dg {} not deleted: {}", dg.id,
                        released.status().message());
  }
  if (dg.array) {
    stop_jobs(dg);
    auto quiet = dg.array->quiesce(std::chrono::seconds(10));
    if (!quiet) return quiet;
    auto st = dg.array->stop();
    if (!st) return st;
    dg.array.reset();
  }
  std::vector<std::string> problems;  // PDs left as they are, and why
  for (auto& [id, pd] : pds_) {
    if (pd.dg_id != dg.id) continue;
    if (!pd.device) reopen_released(pd);
    if (pd.device) {
      // Only this DG's superblock: whatever else the device carries is not ours to erase.
      auto st = Array::erase_superblock(*pd.device, dg.uuid);
      if (!st) problems.push_back(fmt::format("pd {}: {}", id, st.message()));
    } else {
      problems.push_back(fmt::format("pd {} not erased: {}", id, pd.message));
    }
    pd.dg_id.reset();
    pd.slot.reset();
    pd.marker_offline = false;
    pd.replacing = false;  // a hot replace given up with the DG
    pd.replaced = false;
    pd.superblock = false;
    pd.sb_uuid.clear();
    if (!pd.missing) pd.message.clear();  // a missing PD keeps saying why
  }
  const std::uint32_t id = dg.id;
  std::erase_if(export_entries_, [&](const ExportEntry& e) { return e.dg_id == id; });
  dgs_.erase(id);
  std::string summary = "deleted";
  for (const auto& p : problems)
    summary += "; " + p;
  events_.add("dg_deleted", id, std::nullopt, std::nullopt, summary);
  if (auto st = save(); !st) return st;
  return json{{"deleted", id}, {"not_erased", problems}};
}

}  // namespace graid::daemon

namespace graid::daemon {

Result<nlohmann::json> Registry::start_check(const nlohmann::json& args) {
  auto found = find_dg(args, /*need_online=*/true);
  if (!found.is_ok()) return found.status();
  Dg& dg = **found;
  const bool repair = args.value("repair", false);
  if (!dg.jobs)
    return make_error(Errc::kInvalidArgument, "dg {} is RAID0: there is nothing to check", dg.id);
  if (!dg.array->rebuilding_members().empty())
    return make_error(Errc::kBusy, "dg {} is rebuilding; check it once the rebuild is done", dg.id);
  if (dg.array->resync_progress())
    return make_error(Errc::kBusy,
                      "dg {} is re-syncing after an unclean stop (graidctl describe dg {} shows "
                      "how far); check it once that is done",
                      dg.id, dg.id);
  if (dg.array->init_progress())
    return make_error(Errc::kBusy,
                      "dg {} is initialising (graidctl describe dg {} shows how far); check it "
                      "once that is done",
                      dg.id, dg.id);
  if (auto st = dg.jobs->start_check(repair); !st)
    return make_error(st.code(), "dg {}: {}", dg.id, st.message());
  events_.add("check_requested", dg.id, std::nullopt, std::nullopt,
              repair ? "check with repair" : "check");
  return dg_json(dg, false);
}

Result<nlohmann::json> Registry::stop_check(const nlohmann::json& args) {
  auto found = find_dg(args, /*need_online=*/true);
  if (!found.is_ok()) return found.status();
  Dg& dg = **found;
  if (!dg.jobs || !dg.jobs->stop_check())
    return make_error(Errc::kInvalidArgument, "dg {} has no check running", dg.id);
  return dg_json(dg, false);
}

Status Registry::take_down_failed(Dg& dg, bool confirm) {
  std::vector<std::uint32_t> exported;
  for (const auto& vd : dg.array->vds())
    if (nbd_.find(dg.id, vd.id) || ublk_.find(dg.id, vd.id)) exported.push_back(vd.id);
  if (!confirm) {
    return make_error(
        Errc::kInvalidArgument,
        "dg {} failed while running: more members failed than {} tolerates, and its I/O fails "
        "with EIO. Forcing it online stops it and starts it again from what its PDs hold now: "
        "members recorded failed are taken back, newest first, and the data on them may be out "
        "of date (writes made while they were gone are not on them).{} Add --confirm to do it",
        dg.id, raid_level_name(dg.array->geometry().level()),
        exported.empty() ? std::string()
                         : fmt::format(" Its exported VDs ({}) must be unexported first.",
                                       fmt::join(exported, ", ")));
  }
  if (!exported.empty()) {
    return make_error(Errc::kBusy,
                      "dg {} still exports vd {}: unexport them first (graidctl unexport vd {} "
                      "<vd>); nothing was changed",
                      dg.id, fmt::join(exported, ", "), dg.id);
  }
  GRAID_RETURN_IF_ERROR(dg.array->quiesce(std::chrono::seconds(10)));
  stop_jobs(dg);
  if (auto st = dg.array->stop(); !st)
    spdlog::info("dg {}: stopped failed: {}", dg.id, st.message());
  dg.array.reset();
  for (auto& [id, pd] : pds_) {
    if (pd.dg_id != dg.id) continue;
    pd.slot.reset();
    if (!pd.device) reopen_released(pd);
  }
  dg.message = "failed while running; stopped to be forced online";
  events_.add("dg_offline", dg.id, std::nullopt, std::nullopt, dg.message);
  return Status::ok();
}

Result<json> Registry::force_online(Dg& dg, bool confirm) {
  if (dg.array) {
    if (dg.array->health() != ArrayHealth::kFailed)
      return make_error(Errc::kInvalidArgument, "dg {} is {}: there is nothing to force", dg.id,
                        array_health_name(dg.array->health()));
    // Failed while running: stopped here, then forced up below as an offline DG is.
    GRAID_RETURN_IF_ERROR(take_down_failed(dg, confirm));
  }
  // The PDs that carry this DG's superblock now. A missing PD that came back is only looked at
  // here (opened and closed again), so that the refusal without --confirm changes nothing.
  std::vector<Pd*> members;
  std::vector<std::string> names;
  for (auto& [id, pd] : pds_) {
    std::unique_ptr<MemberDevice> probe;
    MemberDevice* dev = pd.device.get();
    if (dev == nullptr && pd.missing) {
      if (auto opened = open_pd_device(pd.path); opened.is_ok()) {
        probe = std::move(*opened);
        dev = probe.get();
      }
    }
    if (dev == nullptr) continue;  // in a running DG, or still missing
    auto exam = Array::examine(*dev);
    if (!exam.is_ok() || exam->array_uuid != dg.uuid) continue;
    members.push_back(&pd);
    names.push_back(fmt::format("pd {} (slot {}, events {})", id, exam->slot, exam->events));
  }
  if (members.empty())
    return make_error(Errc::kNotFound,
                      "no PD carries dg {}'s superblock: bring its drives back (graidctl list pd "
                      "shows which are missing)",
                      dg.id);
  if (!confirm) {
    return make_error(Errc::kInvalidArgument,
                      "dg {} is offline: {}. Forcing it online starts it from what its PDs hold "
                      "now ({}): members recorded failed or stale are taken back, newest first, "
                      "and the data on them may be out of date (writes made while they were gone "
                      "are not on them). Add --confirm to do it",
                      dg.id, dg.message, fmt::join(names, ", "));
  }
  for (Pd* pd : members)
    if (!pd->device) reopen(*pd);  // one that came back (its probe is closed by now)
  std::erase_if(members, [](const Pd* pd) { return !pd->device; });
  if (members.empty())
    return make_error(Errc::kNotFound, "dg {}'s PDs could not be opened again", dg.id);
  const std::string was = dg.message;
  auto overrides = assemble_group(dg.id, dg.uuid, members, /*force=*/true);
  if (!dg.array)
    return make_error(Errc::kIoError, "dg {} cannot start even forced: {}", dg.id, dg.message);
  for (Pd* pd : members) {
    if (!pd->slot) continue;
    pd->marker_offline = false;  // it is back in its role
    pd->message.clear();
  }
  const std::string what = overrides.empty() ? std::string("nothing had to be overridden")
                                             : fmt::format("{}", fmt::join(overrides, "; "));
  spdlog::warn("dg {} forced online (was: {}): {}", dg.id, was, what);
  events_.add("dg_forced_online", dg.id, std::nullopt, std::nullopt,
              fmt::format("data on taken-back members may be stale: {}", what));
  for (const auto& e : std::vector<ExportEntry>(export_entries_))
    if (e.dg_id == dg.id) restore_export(e);
  claim_held(dg.id);
  if (auto st = save(); !st) return st;
  json out = dg_json(dg, true);
  out["forced"] = overrides;
  return out;
}

}  // namespace graid::daemon
