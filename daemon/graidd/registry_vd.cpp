// Registry: virtual drives and their exports (create, list, describe, delete, export, unexport).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "graidd/block_device_users.h"
#include "graidd/registry.h"
#include "graidd/request_args.h"

namespace graid::daemon {

using nlohmann::json;

namespace {

constexpr std::uint64_t kVdAlign = 4096;  // VD sizes are multiples of this

}  // namespace

Result<json> Registry::create_vd(const json& args) {
  auto found = find_dg(args, /*need_online=*/true);
  if (!found.is_ok()) return found.status();
  Dg& dg = **found;
  Array& array = *dg.array;
  if (array.health() == ArrayHealth::kFailed)
    return make_error(Errc::kUnsupported, "dg {} has failed: no VD can be made on it", dg.id);
  const std::uint64_t largest = array.largest_free_extent();
  std::uint64_t size = largest;
  if (const auto requested = arg_opt_u64(args, "size")) {
    size = *requested;
    if (size == 0) return make_error(Errc::kInvalidArgument, "a VD needs a size above 0");
    if (size % kVdAlign != 0)
      return make_error(Errc::kInvalidArgument,
                        "a VD size must be a multiple of 4 KiB; {} is not (try {})", size,
                        (size + kVdAlign - 1) / kVdAlign * kVdAlign);
    if (size > largest)
      return make_error(Errc::kNoSpace,
                        "dg {} has no free extent of {} bytes; the largest free extent is {} bytes",
                        dg.id, size, largest);
  } else if (size == 0) {
    return make_error(Errc::kNoSpace, "dg {} has no free space left", dg.id);
  }
  // --ublk / --no-ublk; neither: a ublk device where this machine has ublk.
  const std::optional<bool> ublk_arg = arg_opt_bool(args, "ublk");
  const std::string ublk_missing = ublk_.unavailable();
  const bool want_ublk = ublk_arg.value_or(ublk_missing.empty());
  if (want_ublk && !ublk_missing.empty())
    return make_error(Errc::kUnsupported, "cannot export the new VD as a ublk device: {}",
                      ublk_missing);
  std::string name = arg_string(args, "name");
  if (name.empty()) {
    // The engine wants a name: the first free "vdN".
    const auto vds = array.vds();
    for (std::uint32_t i = 0; name.empty(); ++i) {
      const std::string candidate = fmt::format("vd{}", i);
      if (std::none_of(vds.begin(), vds.end(),
                       [&](const VdInfo& v) { return v.name == candidate; }))
        name = candidate;
    }
  }
  auto vd = array.create_vd(name, size);
  if (!vd.is_ok()) return vd.status();
  if (want_ublk) {
    if (auto st = export_ublk(dg, vd->id, std::nullopt); !st) {
      // Nothing half-done: the VD goes again.
      if (auto undo = array.delete_vd(vd->id); !undo)
        spdlog::error("dg {}: vd {} made but not exported, and not deleted: {}", dg.id, vd->id,
                      undo.to_string());
      return make_error(st.code(), "the VD was not created: its ublk device failed: {}",
                        st.message());
    }
  }
  events_.add("vd_created", dg.id, std::nullopt, vd->id,
              fmt::format("\"{}\", {} bytes at {}", name, vd->size, vd->start));
  if (auto s = save(); !s) return s;
  return vd_json(dg, *vd);
}

Result<json> Registry::list_vd(const json& args) {
  json out = json::array();
  std::optional<std::uint32_t> only;
  if (arg_opt_id(args, "dg_id")) {
    auto dg = find_dg(args);
    if (!dg.is_ok()) return dg.status();
    only = (*dg)->id;
  }
  for (const auto& [id, dg] : dgs_) {
    if ((only && id != *only) || !dg.array) continue;
    for (const auto& vd : dg.array->vds())
      out.push_back(vd_json(dg, vd));
  }
  return out;
}

Result<json> Registry::describe_vd(const json& args) {
  auto dg = find_dg(args);
  if (!dg.is_ok()) return dg.status();
  auto vd = find_vd(**dg, args);
  if (!vd.is_ok()) return vd.status();
  return vd_json(**dg, *vd);
}

Result<json> Registry::delete_vd(const json& args) {
  auto found = find_dg(args);
  if (!found.is_ok()) return found.status();
  Dg& dg = **found;
  auto vd = find_vd(dg, args);
  if (!vd.is_ok()) return vd.status();
  if (!arg_bool(args, "confirm"))
    return make_error(Errc::kInvalidArgument,
                      "deleting vd {} of dg {} drops its data: add --confirm", vd->id, dg.id);
  GRAID_RETURN_IF_ERROR(refuse_nbd_clients(dg, vd->id,
                                           fmt::format("vd {} of dg {} not deleted", vd->id, dg.id),
                                           arg_bool(args, "force")));
  if (auto gone = unexport_ublk(dg, vd->id, "vd deleted", arg_bool(args, "force")); !gone.is_ok())
    return make_error(gone.status().code(), "vd {} of dg {} not deleted: {}", vd->id, dg.id,
                      gone.status().message());
  if (nbd_.remove(dg.id, vd->id))
    events_.add("export_stopped", dg.id, std::nullopt, vd->id, "nbd export stopped (vd deleted)");
  forget_exports(dg.id, vd->id);
  auto st = dg.array->delete_vd(vd->id);
  if (!st) {
    (void)save();  // logged inside; the operation stands
    return st;
  }
  vd_counters_.erase({dg.id, vd->id});
  events_.add("vd_deleted", dg.id, std::nullopt, vd->id, "deleted");
  if (auto s = save(); !s) return s;
  return json{{"deleted", vd->id}};
}

Result<json> Registry::edit_vd(const json& args) {
  const std::string key = arg_required_string(args, "key");
  if (key != "size")
    return make_error(Errc::kInvalidArgument, "vd has no setting \"{}\"; the one setting is size",
                      key);
  auto found = find_dg(args, /*need_online=*/true);
  if (!found.is_ok()) return found.status();
  Dg& dg = **found;
  auto vd = find_vd(dg, args);
  if (!vd.is_ok()) return vd.status();
  const auto size = arg_opt_u64(args, "size");
  if (!size) return make_error(Errc::kInvalidArgument, "edit vd size needs the new size");
  if (*size == 0 || *size % kVdAlign != 0)
    return make_error(Errc::kInvalidArgument,
                      "a VD size must be a multiple of 4 KiB above 0; {} is not (try {})", *size,
                      std::max(kVdAlign, (*size + kVdAlign - 1) / kVdAlign * kVdAlign));
  if (dg.array->health() == ArrayHealth::kFailed)
    return make_error(Errc::kUnsupported, "dg {} has failed: its VDs cannot change", dg.id);
  auto grown = dg.array->resize_vd(vd->id, *size);
  if (!grown.is_ok()) return grown.status();
  // The VD with its exports' sizes as they are now, and what each export's users see.
  std::vector<std::string> notes;
  const auto answer = [&] {
    json j = vd_json(dg, *grown);
    j["previous_size"] = vd->size;
    j["notes"] = notes;
    return j;
  };
  if (grown->size == vd->size) return answer();  // nothing to do
  // What each export's users see now: the size it was made (or last resized) with, which a
  // second edit in a row does not change (not the VD's previous size).
  const auto ublk_before = ublk_.find(dg.id, vd->id);
  const std::uint64_t ublk_seen = ublk_before ? ublk_before->device.size_bytes : vd->size;
  auto ublk = ublk_.resize(dg.id, vd->id, grown->size);
  if (!ublk.is_ok()) {
    notes.push_back(fmt::format("its ublk device keeps {} bytes until it is exported again: {}",
                                ublk_seen, ublk.status().message()));
    spdlog::error("dg {} vd {}: {}", dg.id, vd->id, notes.back());
  } else if (*ublk && **ublk) {
    notes.push_back(fmt::format("its ublk device now has {} bytes", grown->size));
  } else if (*ublk) {
    notes.push_back(fmt::format(
        "its ublk device keeps {} bytes until it is exported again (this kernel cannot resize a "
        "live ublk device: UPDATE_SIZE is Linux 6.16+)",
        ublk_seen));
  }
  if (const auto nbd = nbd_.find(dg.id, vd->id)) {
    notes.push_back(fmt::format(
        "its NBD export keeps telling clients {} bytes until it is exported again (NBD has no "
        "message for a new size)",
        nbd->size));
  }
  std::string summary = fmt::format("{} -> {} bytes", vd->size, grown->size);
  for (const auto& n : notes)
    summary += "; " + n;
  events_.add("vd_resized", dg.id, std::nullopt, vd->id, summary);
  if (auto s = save(); !s) return s;
  return answer();
}

Result<json> Registry::export_vd(const json& args) {
  auto found = find_dg(args, /*need_online=*/true);
  if (!found.is_ok()) return found.status();
  Dg& dg = **found;
  auto vd = find_vd(dg, args);
  if (!vd.is_ok()) return vd.status();
  const std::string address = arg_string(args, "nbd");
  if (arg_bool(args, "ublk")) {
    if (!address.empty())
      return make_error(Errc::kInvalidArgument, "export vd takes --ublk or --nbd, not both");
    if (ublk_.find(dg.id, vd->id))
      return make_error(Errc::kBusy, "vd {} of dg {} is already exported as {}", vd->id, dg.id,
                        ublk_.find(dg.id, vd->id)->device.path);
    if (auto st = export_ublk(dg, vd->id, std::nullopt); !st) return st;
    if (auto s = save(); !s) return s;
    return vd_json(dg, *vd);
  }
  if (address.empty())
    return make_error(Errc::kInvalidArgument,
                      "export vd needs --ublk, --nbd unix:PATH or --nbd tcp:ADDR:PORT");
  ExportEntry e;
  e.dg_id = dg.id;
  e.vd_id = vd->id;
  e.address = address;
  e.read_only = arg_bool(args, "read_only");
  e.name = arg_string(args, "name");
  if (e.name.empty()) e.name = fmt::format("dg{}-vd{}", dg.id, vd->id);
  if (e.name.size() > 4096)
    return make_error(Errc::kInvalidArgument, "the export name is too long");
  e.tls_psk = arg_string(args, "tls_psk");
  e.insecure_tcp = arg_bool(args, "insecure_tcp");
  if (!e.tls_psk.empty() && e.tls_psk[0] != '/')
    return make_error(Errc::kInvalidArgument, "--tls-psk needs an absolute path, not \"{}\"",
                      e.tls_psk);
  GRAID_RETURN_IF_ERROR(export_nbd(dg, e, /*restoring=*/false));
  if (auto s = save(); !s) return s;
  return vd_json(dg, *vd);
}

Status Registry::export_nbd(Dg& dg, const ExportEntry& e, bool restoring) {
  NbdAccess access;
  access.address = e.address;
  access.tls_psk = e.tls_psk;
  access.insecure_tcp = e.insecure_tcp;
  access.limits = options_.nbd;
  GRAID_RETURN_IF_ERROR(check_nbd_access(access));
  auto handle = dg.array->open_vd(e.vd_id);
  if (!handle.is_ok()) return handle.status();
  auto& counters = vd_counters_[{dg.id, e.vd_id}];
  if (!counters) counters = std::make_shared<nbd::NbdExportCounters>();
  GRAID_RETURN_IF_ERROR(nbd_.add(dg.id, e.vd_id, *dg.array, std::move(*handle), access, e.name,
                                 e.read_only, counters));
  const std::string how = !e.tls_psk.empty() ? fmt::format(", TLS with the keys of {}", e.tls_psk)
                          : e.insecure_tcp
                              ? std::string(
                                    ", WITHOUT TLS (--insecure-tcp): every local user and "
                                    "every host that reaches it can read and write the VD")
                              : std::string();
  if (e.insecure_tcp)
    spdlog::warn(
        "dg {} vd {}: NBD export at {} without TLS (--insecure-tcp): every local user "
        "and every host that reaches it can read and write the VD",
        dg.id, e.vd_id, e.address);
  if (!restoring) export_entries_.push_back(e);
  events_.add("export_started", dg.id, std::nullopt, e.vd_id,
              fmt::format("{}nbd at {} as \"{}\"{}{}", restoring ? "restored " : "", e.address,
                          e.name, e.read_only ? ", read-only" : "", how));
  return {};
}

Status Registry::refuse_nbd_clients(const Dg& dg, std::uint32_t vd_id, std::string_view what,
                                    bool force) const {
  const std::vector<nbd::NbdClientInfo> clients = nbd_.clients(dg.id, vd_id);
  if (clients.empty() || force) return Status::ok();
  std::vector<std::string> who;
  for (const auto& c : clients)
    who.push_back(fmt::format("{} since {}", c.peer, rfc3339(c.since)));
  return make_error(Errc::kBusy,
                    "{}: {} NBD client{} connected ({}); add --force to disconnect {} (requests in "
                    "flight are answered first)",
                    what, clients.size(), clients.size() == 1 ? " is" : "s are",
                    fmt::join(who, "; "), clients.size() == 1 ? "it" : "them");
}

Result<json> Registry::unexport_vd(const json& args) {
  const bool want_nbd = arg_bool(args, "nbd");
  const bool want_ublk = arg_bool(args, "ublk");
  const bool all = !want_nbd && !want_ublk;
  const bool force = arg_bool(args, "force");
  auto found = find_dg(args);
  const bool running = found.is_ok() && (*found)->array && find_vd(**found, args).is_ok();
  if (!running) {
    // A DG that is offline or gone: what is left of the VD's exports is a ublk device held for
    // it (its users' I/O waiting) and the entries restored when the DG comes back.
    const std::uint32_t dg_id = arg_id(args, "dg_id");
    const std::uint32_t vd_id = arg_id(args, "vd_id");
    const bool held = (all || want_ublk) && !held_of(dg_id, vd_id).empty();
    const bool recorded =
        std::any_of(export_entries_.begin(), export_entries_.end(), [&](const ExportEntry& e) {
          return e.dg_id == dg_id && e.vd_id == vd_id &&
                 (all || e.kind == (want_ublk ? "ublk" : "nbd"));
        });
    if (held || recorded) {
      std::vector<std::string> released;
      if (held) {
        auto r = release_held(dg_id, vd_id, force, "unexported");
        if (!r.is_ok()) return r.status();
        released = std::move(*r);
      }
      if (all || want_ublk) forget_exports(dg_id, vd_id, "ublk");
      if (all || want_nbd) forget_exports(dg_id, vd_id, "nbd");
      events_.add(
          "export_stopped", dg_id, std::nullopt, vd_id,
          fmt::format("exports forgotten while the drive group is not running{}",
                      released.empty() ? std::string()
                                       : fmt::format("; released {}", fmt::join(released, ", "))));
      if (auto s = save(); !s) return s;
      return json{{"dg_id", dg_id},
                  {"vd_id", vd_id},
                  {"state", "offline"},
                  {"exports", json::array()},
                  {"released", released}};
    }
    if (!found.is_ok()) return found.status();
    if (!(*found)->array) return find_dg(args, /*need_online=*/true).status();
  }
  Dg& dg = **found;
  auto vd = find_vd(dg, args);
  if (!vd.is_ok()) return vd.status();
  const bool has_nbd = nbd_.find(dg.id, vd->id).has_value();
  const bool has_ublk = ublk_.find(dg.id, vd->id).has_value();
  const bool has_held = !held_of(dg.id, vd->id).empty();
  if (want_ublk && !has_ublk && !has_held)
    return make_error(Errc::kInvalidArgument, "vd {} of dg {} has no ublk export", vd->id, dg.id);
  if (want_nbd && !has_nbd)
    return make_error(Errc::kInvalidArgument, "vd {} of dg {} has no nbd export", vd->id, dg.id);
  if (all && !has_nbd && !has_ublk && !has_held)
    return make_error(Errc::kInvalidArgument, "vd {} of dg {} is not exported", vd->id, dg.id);
  if ((all || want_nbd) && has_nbd) {
    GRAID_RETURN_IF_ERROR(refuse_nbd_clients(
        dg, vd->id, fmt::format("the nbd export of vd {} of dg {} not stopped", vd->id, dg.id),
        force));
  }
  if (all || want_ublk) {
    auto gone = unexport_ublk(dg, vd->id, "unexported", force);
    if (!gone.is_ok()) return gone.status();
    if (has_held) {
      auto released = release_held(dg.id, vd->id, force, "unexported");
      if (!released.is_ok()) return released.status();
    }
  }
  if ((all || want_nbd) && has_nbd) {
    nbd_.remove(dg.id, vd->id);
    forget_exports(dg.id, vd->id, "nbd");
    events_.add("export_stopped", dg.id, std::nullopt, vd->id, "nbd export stopped");
  }
  if (auto s = save(); !s) return s;
  return vd_json(dg, *vd);
}

Status Registry::export_ublk(Dg& dg, std::uint32_t vd_id, std::optional<std::uint32_t> dev_id) {
  auto handle = dg.array->open_vd(vd_id);
  if (!handle.is_ok()) return handle.status();
  GRAID_RETURN_IF_ERROR(ublk_.add(dg.id, vd_id, *dg.array, std::move(*handle), dev_id));
  const auto info = ublk_.find(dg.id, vd_id);
  ExportEntry e;
  e.dg_id = dg.id;
  e.vd_id = vd_id;
  e.kind = "ublk";
  e.address = info->device.path;
  e.dev_id = info->device.dev_id;
  export_entries_.push_back(e);
  events_.add("export_started", dg.id, std::nullopt, vd_id,
              fmt::format("ublk {}{} ({} queues x {} tags, requests up to {} KiB, {} copy, driver "
                          "flags {:#x})",
                          info->device.path, info->device.recovered ? " re-attached" : "",
                          info->device.queues, info->device.depth, info->device.max_io_bytes >> 10,
                          ublk::data_path_name(info->device.data_path), info->device.flags));
  return {};
}

Result<bool> Registry::unexport_ublk(Dg& dg, std::uint32_t vd_id, std::string_view why,
                                     bool force) {
  const auto info = ublk_.find(dg.id, vd_id);
  if (!info) return false;
  const std::string& path = info->device.path;
  // Removing a device under a filesystem or an application loses what they have not written
  // (the kernel fails the writeback that removal starts): refused unless forced.
  auto users = block_device_users(path);
  if (!users.is_ok()) {
    spdlog::warn("dg {} vd {}: cannot tell who uses {}: {}", dg.id, vd_id, path,
                 users.status().message());
  } else if (!users->empty() && !force) {
    return make_error(Errc::kBusy,
                      "{} is in use: {}. Unmount or close it first, or add --force, which syncs "
                      "its filesystems and the device and then removes it anyway: what its users "
                      "have not yet written is lost and a filesystem on it shuts down",
                      path, fmt::join(*users, "; "));
  }
  if (!force && (!users.is_ok() || users->empty())) {
    // Where the kernel can tell (TRY_STOP_DEV, 7.0+), it decides: exact, where the look above
    // is best effort.
    auto r = ublk_.remove_if_unused(dg.id, vd_id);
    if (!r.is_ok()) return r.status();
    if (*r == UblkExports::Removal::kInUse)
      return make_error(Errc::kBusy,
                        "{} is open (the kernel says so), by someone graidd cannot name (a mount "
                        "in another namespace, a process it cannot see). Close it first, or add "
                        "--force, which syncs the device and then removes it anyway: what its "
                        "users have not yet written is lost",
                        path);
    if (*r == UblkExports::Removal::kRemoved) {
      forget_exports(dg.id, vd_id, "ublk");
      events_.add("export_stopped", dg.id, std::nullopt, vd_id,
                  fmt::format("ublk {} removed ({})", path, why));
      return true;
    }
  }
  std::string forced;
  if (force && users.is_ok() && !users->empty()) {
    Status synced = sync_block_device(path, /*mounts=*/true);
    forced = fmt::format(", forced while in use: {}{}", fmt::join(*users, "; "),
                         synced ? "" : fmt::format("; {}", synced.message()));
    spdlog::warn("dg {} vd {}: removing {} while in use ({}){}", dg.id, vd_id, path,
                 fmt::join(*users, "; "), synced ? "" : fmt::format(": {}", synced.message()));
  }
  auto gone = ublk_.remove(dg.id, vd_id);
  if (!gone.is_ok()) {
    if (forced.empty()) return gone.status();
    // Stopped, but the kernel deletes a device only once nobody holds it: a mounted filesystem
    // keeps it until it is unmounted.
    return make_error(gone.status().code(),
                      "{} is stopped (its users now get I/O errors) but not yet deleted: {}. The "
                      "kernel deletes it once they let go of it: unmount or close it, then run "
                      "this again",
                      path, gone.status().message());
  }
  forget_exports(dg.id, vd_id, "ublk");
  events_.add("export_stopped", dg.id, std::nullopt, vd_id,
              fmt::format("ublk {} removed ({}{})", path, why, forced));
  return true;
}

}  // namespace graid::daemon
