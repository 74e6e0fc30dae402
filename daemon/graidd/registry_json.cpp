// Registry: the JSON objects graidctl prints (docs/cli.md, "JSON objects").
#include "graidd/registry.h"

namespace graid::daemon {

using nlohmann::json;

namespace {

json opt(const std::optional<std::uint32_t>& v) {
  return v ? json(*v) : json(nullptr);
}

}  // namespace

std::string Registry::pd_state(const Pd& pd) const {
  if (pd.missing) return "missing";
  if (pd.replacing) return "replacing";
  if (pd.replaced) return "replaced";
  if (!pd.dg_id) return pd.global_spare ? "spare" : "free";
  if (pd.marker_offline) return "offline";
  if (pd.stale_slot) return "stale";
  auto it = dgs_.find(*pd.dg_id);
  if (it == dgs_.end() || !it->second.array || !pd.slot) return pd.slot ? "member" : "failed";
  auto slot = it->second.array->member_slot(*pd.slot);
  if (!slot.is_ok()) return "member";
  switch (slot->state) {
    case MemberSlotState::kActive:
      return "member";
    case MemberSlotState::kSpare:
      return "spare";
    case MemberSlotState::kRebuilding:
      return "rebuilding";
    default:
      return "failed";
  }
}

json Registry::pd_json(const Pd& pd) const {
  json j;
  j["pd_id"] = pd.id;
  j["path"] = pd.path;
  j["state"] = pd_state(pd);
  j["dg_id"] = opt(pd.dg_id);
  j["slot"] = opt(pd.slot);
  // "global" for a global hot spare, the DG's id for a DG's spare, null otherwise.
  const std::string state = j["state"];
  j["hotspare"] = pd.global_spare    ? json("global")
                  : state == "spare" ? opt(pd.dg_id)
                                     : json(nullptr);
  j["size"] = pd.info.size;
  j["logical_block_size"] = pd.info.logical_block_size;
  j["io_mode"] = pd.info.io_mode;
  j["kind"] = pd.info.kind;
  j["model"] = pd.info.model;
  j["serial"] = pd.info.serial;
  j["firmware"] = pd.info.firmware;
  j["superblock"] = {{"found", pd.superblock},
                     {"array_uuid", pd.superblock ? json(pd.sb_uuid) : json(nullptr)},
                     {"dg_id", opt(pd.dg_id)}};
  j["message"] = pd.message;
  j["health"] = health_json(pd);
  return j;
}

json Registry::health_json(const Pd& pd) const {
  if (options_.health == nullptr)
    return {{"available", false}, {"reason", "graidd reads no health logs (--health-interval 0)"}};
  const auto h = options_.health->health(pd.id);
  if (!h) return {{"available", false}, {"reason", "not read yet"}};
  if (!h->available) return {{"available", false}, {"reason", h->reason}};
  const NvmeHealth& l = h->log;
  return {{"available", true},
          {"controller", h->controller},
          {"read_at", rfc3339(h->read_at)},
          {"critical_warning", l.critical_warning},
          {"critical_warning_text", nvme_critical_warning_text(l.critical_warning)},
          {"temperature_celsius", static_cast<int>(l.temperature_kelvin) - 273},
          {"available_spare", l.available_spare},
          {"available_spare_threshold", l.available_spare_threshold},
          {"percentage_used", l.percentage_used},
          {"data_units_read", l.data_units_read},
          {"data_units_written", l.data_units_written},
          {"power_cycles", l.power_cycles},
          {"power_on_hours", l.power_on_hours},
          {"unsafe_shutdowns", l.unsafe_shutdowns},
          {"media_errors", l.media_errors},
          {"error_log_entries", l.error_log_entries}};
}

json Registry::settings_json(const Dg& dg) const {
  ArraySettings s;
  if (dg.array)
    s = dg.array->settings();
  else if (dg.exam)
    s = dg.exam->settings;
  return {{"rebuild_speed", background_speed_name(s.rebuild_speed)},
          {"init_speed", background_speed_name(s.init_speed)},
          {"check_speed", background_speed_name(s.check_speed)},
          {"resync_speed", background_speed_name(s.resync_speed)},
          {"journal", journal_policy_name(s.journal_policy)}};
}

namespace {

// A job that stays pending across runs (initialisation, re-sync).
json pending_json(const InitStatus& in) {
  json j = {{"running", in.running},
            {"percent", in.percent},
            {"bytes_per_second", in.bytes_per_second},
            {"eta_seconds", in.eta_seconds ? json(*in.eta_seconds) : json(nullptr)}};
  if (!in.paused.empty()) j["paused"] = in.paused;
  return j;
}

json check_json(const CheckStatus& c) {
  json j = {{"running", c.running}};
  if (c.running) {
    j["repair"] = c.repair;
    j["percent"] = c.percent;
    j["bytes_per_second"] = c.bytes_per_second;
    j["eta_seconds"] = c.eta_seconds ? json(*c.eta_seconds) : json(nullptr);
  }
  if (c.last) {
    j["last"] = {{"finished", c.last->finished},
                 {"from_stripe", c.last->from_stripe},
                 {"stripes", c.last->stripes},
                 {"mismatches", c.last->mismatches},
                 {"repaired", c.last->repaired},
                 {"skipped", c.last->skipped},
                 {"mismatch_stripes", c.last->mismatch_stripes}};
  }
  if (!c.last_error.empty()) j["error"] = c.last_error;
  return j;
}

}  // namespace

json Registry::dg_json(const Dg& dg, bool detail) const {
  json j;
  j["dg_id"] = dg.id;
  j["uuid"] = dg.uuid;
  j["settings"] = settings_json(dg);
  if (dg.array) {
    const Array& a = *dg.array;
    const auto vds = a.vds();
    std::uint64_t used = 0;
    for (const auto& vd : vds)
      used += vd.size;
    j["name"] = a.name();
    j["level"] = raid_level_name(a.geometry().level());
    j["strip"] = a.geometry().strip_bytes();
    j["member_count"] = a.member_count();
    j["state"] = array_health_name(a.health());
    // The write-hole journal: its area per member (0: none, the DG predates it or is not
    // RAID5/6) and whether partial-stripe writes go through it now.
    const Array::JournalState js = a.journal_state();
    j["journal"] = {
        {"area_bytes", js.area_bytes}, {"active", js.active}, {"covers_all", js.covers_all}};
    // Array data whose contents are lost (docs/resilience.md, "Lost ranges"): reads fail there
    // until a write covers a whole range.
    json lost = json::array();
    for (const LostRange& r : a.lost_ranges())
      lost.push_back({{"offset", r.offset}, {"bytes", r.len}});
    j["lost_ranges"] = std::move(lost);
    if (dg.jobs) {
      const RebuildStatus r = dg.jobs->status();
      if (r.running) {
        j["state"] = "rebuilding";
        j["rebuild"] = {{"slot", r.member},
                        {"pd_id", opt(pd_at_slot(dg.id, r.member))},
                        {"percent", r.percent},
                        {"bytes_per_second", r.bytes_per_second},
                        {"eta_seconds", r.eta_seconds ? json(*r.eta_seconds) : json(nullptr)}};
      } else if (!r.last_error.empty()) {
        j["rebuild"] = {{"error", r.last_error}};
      }
    }
    if (auto rp = a.replace_progress()) {
      // A hot replace: the DG keeps its redundancy while the copy runs.
      j["replace"] = {
          {"slot", rp->member},
          {"pd_id", opt(pd_at_slot(dg.id, rp->member))},
          {"new_path", rp->path},
          {"percent", rp->total_bytes == 0 ? 100.0 : 100.0 * rp->copied_bytes / rp->total_bytes}};
      if (dg.jobs) {
        // The copy's rate and ETA while it runs (waiting behind a re-sync or a rebuild: none).
        const InitStatus rs = dg.jobs->replace_status();
        j["replace"]["running"] = rs.running;
        j["replace"]["bytes_per_second"] = rs.bytes_per_second;
        j["replace"]["eta_seconds"] = rs.eta_seconds ? json(*rs.eta_seconds) : json(nullptr);
      }
      if (j["state"] == "optimal") j["state"] = "replacing";
    }
    if (dg.jobs) {
      // Re-sync after an unclean stop: pending (running, or waiting its turn) or none.
      const InitStatus rs = dg.jobs->resync_status();
      if (rs.pending) {
        j["resync"] = pending_json(rs);
        if (j["state"] == "optimal") j["state"] = "resyncing";
      }
      // Background initialisation: pending (running, or waiting for an optimal DG) or none.
      const InitStatus in = dg.jobs->init_status();
      if (in.pending) {
        j["init"] = pending_json(in);
        if (j["state"] == "optimal") j["state"] = "initialising";
      }
    }
    if (dg.jobs) j["check"] = check_json(dg.jobs->check_status());
    if (j["state"] == "optimal" && j.contains("check") && j["check"]["running"] == true)
      j["state"] = "checking";
    j["capacity"] = a.capacity();
    j["free"] = a.capacity() - std::min(used, a.capacity());
    j["vd_count"] = vds.size();
    j["clean"] = dg.was_clean;
    j["init_method"] = init_method_name(a.init_method());
    const auto slots = a.member_slots();
    std::uint32_t spares = 0;
    json members = json::array();
    std::vector<std::string> stale_notes;
    for (const auto& s : slots) {
      if (s.state == MemberSlotState::kEmpty) continue;
      if (s.slot >= a.member_count()) ++spares;
      json m = {{"slot", s.slot},
                {"pd_id", opt(pd_at_slot(dg.id, s.slot))},
                {"path", s.path},
                {"state", member_slot_state_name(s.state)}};
      if (s.state == MemberSlotState::kRebuilding) m["rebuilt_bytes"] = s.rebuild_offset;
      if (s.path.empty() &&
          (s.state == MemberSlotState::kFailed || s.state == MemberSlotState::kRemoved)) {
        // Its own drive present but stale (out of the DG when it last stopped), not missing.
        if (const Pd* stale = stale_pd_of(dg.id, s.slot)) {
          m["pd_id"] = stale->id;
          m["path"] = stale->path;
          m["state"] = "stale";
          stale_notes.push_back(
              fmt::format("slot {}: stale (pd {}; graidctl edit pd {} marker "
                          "online takes it back)",
                          s.slot, stale->id, stale->id));
        }
      }
      members.push_back(std::move(m));
    }
    if (dg.message.empty() && !stale_notes.empty())
      j["message"] = fmt::format("{}", fmt::join(stale_notes, "; "));
    j["spare_count"] = spares;
    if (detail) {
      j["members"] = members;
      json list = json::array();
      for (const auto& vd : vds)
        list.push_back(vd_json(dg, vd));
      j["vds"] = list;
    }
  } else {
    const auto& e = dg.exam;
    j["name"] = e ? e->name : "";
    j["level"] = e ? json(raid_level_name(e->level)) : json(nullptr);
    j["strip"] = e ? json(e->strip_bytes) : json(nullptr);
    j["member_count"] = e ? json(e->member_count) : json(nullptr);
    j["spare_count"] = e ? json(e->spare_count) : json(nullptr);
    j["state"] = "offline";
    j["capacity"] = e ? json(e->capacity) : json(nullptr);
    j["free"] = nullptr;
    j["vd_count"] = e ? e->vds.size() : 0;
    j["clean"] = e ? e->clean : false;
    j["init_method"] = nullptr;
    if (detail) {
      json members = json::array();
      if (e)
        for (const auto& s : e->slots) {
          if (s.state == MemberSlotState::kEmpty) continue;
          const auto pd = pd_at_slot(dg.id, s.slot);
          members.push_back({{"slot", s.slot},
                             {"pd_id", opt(pd)},
                             {"path", pd ? json(pds_.at(*pd).path) : json("")},
                             {"state", member_slot_state_name(s.state)}});
        }
      j["members"] = members;
      j["vds"] = json::array();
    }
  }
  if (!j.contains("message")) j["message"] = dg.message;
  j["held_ublk"] = held_json(dg.id);
  return j;
}

json Registry::held_json(std::uint32_t dg_id) const {
  json out = json::array();
  for (const HeldUblk& h : ublk_.held()) {
    if (h.dg_id != dg_id) continue;
    out.push_back({{"vd_id", h.vd_id},
                   {"dev_id", h.dev_id},
                   {"device", h.path},
                   {"state", ublk_state_name(h.state)},
                   {"reason", held_reason(h)}});
  }
  return out;
}

json Registry::vd_json(const Dg& dg, const VdInfo& vd) const {
  json j;
  j["dg_id"] = dg.id;
  j["vd_id"] = vd.id;
  j["name"] = vd.name;
  j["start"] = vd.start;
  j["size"] = vd.size;
  j["state"] = dg.array ? std::string(array_health_name(dg.array->health())) : "offline";
  json exports = json::array();
  if (auto e = nbd_.find(dg.id, vd.id)) {
    // Who uses it: connections past their handshake (unexport and delete refuse while any do).
    json clients = json::array();
    for (const auto& c : nbd_.clients(dg.id, vd.id))
      clients.push_back({{"peer", c.peer}, {"since", rfc3339(c.since)}});
    exports.push_back({{"kind", "nbd"},
                       {"clients", std::move(clients)},
                       {"address", e->address},
                       {"name", e->name},
                       {"read_only", e->read_only},
                       {"connections", e->connections},
                       {"tcp_port", e->tcp_port},
                       // Who may connect: "psk" (TLS with the keys of tls_psk), "insecure"
                       // (TCP without TLS, --insecure-tcp), "unix" (the socket's 0600 mode).
                       {"access", !e->tls_psk.empty() ? "psk"
                                  : e->insecure_tcp   ? "insecure"
                                                      : "unix"},
                       {"tls_psk", e->tls_psk},
                       {"size", e->size}});
  }
  if (auto u = ublk_.find(dg.id, vd.id)) {
    exports.push_back({{"kind", "ublk"},
                       {"address", u->device.path},
                       {"device", u->device.path},
                       {"name", ""},
                       {"read_only", false},
                       {"dev_id", u->device.dev_id},
                       {"queues", u->device.queues},
                       {"depth", u->device.depth},
                       {"max_io_bytes", u->device.max_io_bytes},
                       {"buffer_bytes", u->device.buffer_bytes},
                       {"recovered", u->device.recovered},
                       {"copy", ublk::data_path_name(u->device.data_path)},
                       {"spread", u->device.spread},
                       // BATCH_IO (7.0+, --ublk-batch on): per-queue batch commands.
                       {"batch", u->device.batch},
                       // TRY_STOP_DEV (7.0+): whether "in use" is the kernel's word or a look.
                       {"safe_stop", (u->device.flags & ublk::kFlagSafeStopDev) != 0},
                       // UPDATE_SIZE (6.16+): whether edit vd size reaches the device live.
                       {"update_size", (u->device.flags & ublk::kFlagUpdateSize) != 0},
                       // QUIESCE_DEV (6.16+): whether a SIGTERM with the device in use hands it
                       // over quiesced (the DG then stops clean).
                       {"quiesce", (u->device.flags & ublk::kFlagQuiesce) != 0},
                       {"size", u->device.size_bytes},
                       // Every flag the device was made with, as the kernel granted them.
                       {"features", ublk::flag_names(u->device.flags)},
                       {"state", "live"}});
    j["ublk_device"] = u->device.path;
    j["ublk_reason"] = "";
  } else {
    j["ublk_device"] = nullptr;
    const std::string why = ublk_.unavailable();
    j["ublk_reason"] = why.empty() ? "not exported as a ublk device (graidctl export vd "
                                     "<dg> <vd> --ublk)"
                                   : why;
  }
  j["exports"] = exports;
  return j;
}

}  // namespace graid::daemon
