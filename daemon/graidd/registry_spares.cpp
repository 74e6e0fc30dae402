// Registry: hot spares. `edit pd <id> hotspare <dg>` puts a free PD into a DG's spare slots
// (recorded in the superblocks: the DG finds it again at assembly); `hotspare global` keeps a
// free PD for whichever DG loses a member first (recorded in the state dir, since it belongs to
// no array yet); `hotspare none` takes a global spare back. A DG with a failed member and no
// spare of its own gets the lowest-numbered global spare that fits, as a spare of its own; its
// rebuild job then takes it into the failed role and rebuilds.
#include <spdlog/spdlog.h>

#include <charconv>

#include "graidd/registry.h"

namespace graid::daemon {

using nlohmann::json;

Status Registry::make_dg_spare(Pd& pd, Dg& dg, std::string_view why) {
  auto slot = dg.array->add_spare(std::move(pd.device));
  if (!slot.is_ok()) {
    reopen(pd);
    return slot.status();
  }
  pd.global_spare = false;
  pd.dg_id = dg.id;
  pd.slot = *slot;
  pd.superblock = true;
  pd.sb_uuid = dg.uuid;
  update_slot_map(dg);
  events_.add("pd_hotspare", dg.id, pd.id, std::nullopt,
              fmt::format("{}spare in slot {}", why, *slot));
  return Status::ok();
}

Result<json> Registry::edit_pd_hotspare(Pd& pd, const std::string& value, bool force) {
  if (value == "none") {
    if (!pd.global_spare) {
      return make_error(Errc::kInvalidArgument,
                        "pd {} is not a global hot spare (a dg's spare stays until a failed "
                        "member takes it)",
                        pd.id);
    }
    pd.global_spare = false;
    events_.add("pd_hotspare", std::nullopt, pd.id, std::nullopt, "no longer a global spare");
    if (auto st = save(); !st) return st;
    return pd_json(pd);
  }
  if (pd.dg_id)
    return make_error(Errc::kInvalidArgument, "pd {} already belongs to dg {}", pd.id, *pd.dg_id);
  if (!pd.device)
    return make_error(Errc::kUnsupported, "pd {} is not available: {}", pd.id,
                      pd.message.empty() ? "missing" : pd.message);
  // A spare is written when it is taken (a global one by no operator, who could no longer
  // refuse): other software's signatures are refused now.
  auto signatures = check_signatures(pd.path, force);
  if (!signatures.is_ok()) return signatures.status();
  if (value == "global") {
    if (pd.global_spare) return pd_json(pd);  // already
    if (pd.superblock) {
      // It would be refused when a DG needed it, which is too late to find out.
      return make_error(Errc::kBusy,
                        "pd {} carries a graid superblock (array {}), so it may hold another "
                        "array's data; a global spare must be a blank drive",
                        pd.id, pd.sb_uuid);
    }
    if (*signatures) GRAID_RETURN_IF_ERROR(wipe_signatures_of(pd.path, pd.id));
    pd.global_spare = true;
    events_.add("pd_hotspare", std::nullopt, pd.id, std::nullopt, "global spare");
    if (auto st = save(); !st) return st;
    use_global_spares();  // a DG degraded already takes it at once
    return pd_json(pd);
  }
  std::uint32_t dg_id = 0;
  const char* end = value.data() + value.size();
  if (value.empty() || std::from_chars(value.data(), end, dg_id).ptr != end)
    return make_error(Errc::kInvalidArgument,
                      "hotspare must be a dg id, global or none, not \"{}\"", value);
  auto it = dgs_.find(dg_id);
  if (it == dgs_.end())
    return make_error(Errc::kNotFound, "dg {} does not exist (graidctl list dg shows the DGs)",
                      dg_id);
  Dg& dg = it->second;
  if (!dg.array) return make_error(Errc::kUnsupported, "dg {} is offline: {}", dg.id, dg.message);
  if (dg.array->geometry().redundancy() == Redundancy::kNone)
    return make_error(Errc::kInvalidArgument, "dg {} is RAID0: nothing a spare could rebuild",
                      dg.id);
  if (*signatures) GRAID_RETURN_IF_ERROR(wipe_signatures_of(pd.path, pd.id));
  GRAID_RETURN_IF_ERROR(make_dg_spare(pd, dg, pd.global_spare ? "was a global spare; " : ""));
  if (auto st = save(); !st) return st;
  return pd_json(pd);
}

void Registry::use_global_spares() {
  bool changed = false;
  for (auto& [dg_id, dg] : dgs_) {
    if (!dg.array || dg.array->geometry().redundancy() == Redundancy::kNone) continue;
    if (dg.array->health() == ArrayHealth::kFailed) continue;  // nothing left to rebuild from
    std::uint32_t wanting = 0, spares = 0;
    for (const auto& s : dg.array->member_slots()) {
      if (s.slot < dg.array->member_count()) {
        wanting += s.state == MemberSlotState::kFailed || s.state == MemberSlotState::kRemoved;
      } else {
        spares += s.state == MemberSlotState::kSpare;
      }
    }
    for (auto& [pd_id, pd] : pds_) {
      if (spares >= wanting) break;
      if (!pd.global_spare || pd.dg_id || !pd.device) continue;
      // Something wrote a signature on it since it was made a spare: no operator is here to
      // say --force, so it is not taken.
      Status st = check_signatures(pd.path, /*force=*/false).status();
      if (st) st = make_dg_spare(pd, dg, "global spare taken for a failed member; ");
      if (!st) {
        spdlog::warn("dg {}: global spare pd {} not taken: {}", dg_id, pd_id, st.message());
        events_.add("pd_hotspare_refused", dg_id, pd_id, std::nullopt, st.message());
        continue;
      }
      spdlog::info("dg {}: global spare pd {} taken", dg_id, pd_id);
      ++spares;
      changed = true;
    }
  }
  if (changed) (void)save();  // logged inside; the spares stand (their superblocks say so)
}

}  // namespace graid::daemon
