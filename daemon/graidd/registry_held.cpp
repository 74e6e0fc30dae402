// Registry: the ublk devices graidd owns but does not serve (docs/ublk.md, "Owned-device
// discovery"). A killed graidd leaves its ublk devices to the kernel, which holds their I/O
// (user recovery) until a server takes them back; the next graidd takes back those its state
// dir records for a running DG (restore_export). What is left is found by the owner tag every
// device carries (graidd/ublk_owner.h): a device the killed graidd added but never recorded is
// taken back for its VD, one that never started is deleted, and one whose DG cannot run is held
// and shown until the DG comes back (force_online) or the administrator releases it
// (unexport vd --force, delete dg).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "graidd/block_device_users.h"
#include "graidd/registry.h"

namespace graid::daemon {

namespace {

constexpr std::chrono::milliseconds kReleaseTimeout{10000};

}  // namespace

void Registry::release_dead_held() {
  for (const HeldUblk& h : ublk_.discover()) {
    if (h.state != ublk::kStateDead) continue;
    // Never started (a crash between ADD_DEV and START_DEV) or stopped and not yet deleted:
    // nothing is served through it, so nothing is lost by deleting it. A stopped device that a
    // mounted filesystem still holds stays until it is unmounted.
    Status st = ublk_.release(h.dev_id, std::chrono::milliseconds(1000));
    if (st) {
      spdlog::info("{} (dg {} vd {}): deleted, left dead by an earlier graidd", h.path, h.dg_id,
                   h.vd_id);
      events_.add("export_stopped", h.dg_id, std::nullopt, h.vd_id,
                  fmt::format("ublk {} deleted: an earlier graidd left it dead (never started, or "
                              "stopped and not deleted)",
                              h.path));
    } else {
      spdlog::warn("{} (dg {} vd {}): dead, not yet deleted: {}", h.path, h.dg_id, h.vd_id,
                   st.message());
    }
  }
}

std::string Registry::held_reason(const HeldUblk& h) const {
  auto it = dgs_.find(h.dg_id);
  if (it == dgs_.end()) return fmt::format("dg {} does not exist", h.dg_id);
  const Dg& dg = it->second;
  if (!dg.array) return fmt::format("dg {} is offline: {}", dg.id, dg.message);
  const auto vds = dg.array->vds();
  if (std::none_of(vds.begin(), vds.end(), [&](const VdInfo& v) { return v.id == h.vd_id; }))
    return fmt::format("vd {} of dg {} does not exist", h.vd_id, dg.id);
  if (auto served = ublk_.find(dg.id, h.vd_id))
    return fmt::format("vd {} of dg {} is served by {}", h.vd_id, dg.id, served->device.path);
  if (h.state == ublk::kStateDead) return "stopped, deleted once nobody holds it";
  return "";
}

void Registry::claim_held(std::optional<std::uint32_t> only_dg) {
  bool recorded = false;
  for (const HeldUblk& h : ublk_.held()) {
    if (only_dg && h.dg_id != *only_dg) continue;
    std::string why = held_reason(h);
    if (why.empty()) {
      // The VD is there and has no device: a graidd killed between ADD_DEV and saving the
      // state dir. Its users get their device back.
      Status st = export_ublk(dgs_.at(h.dg_id), h.vd_id, h.dev_id);
      if (st) {
        spdlog::warn("dg {} vd {}: took back {}, which the state dir did not record", h.dg_id,
                     h.vd_id, h.path);
        events_.add("export_started", h.dg_id, std::nullopt, h.vd_id,
                    fmt::format("ublk {} taken back: an earlier graidd made it but had not "
                                "recorded it",
                                h.path));
        recorded = true;
        continue;
      }
      why = st.message();
    }
    const bool waiting = h.state == ublk::kStateQuiesced;
    const std::string message =
        fmt::format("ublk {} is held for vd {} of dg {} ({}){}: {} releases it{}", h.path, h.vd_id,
                    h.dg_id, why, waiting ? "; I/O to it waits" : "",
                    fmt::format("graidctl unexport vd {} {} --force", h.dg_id, h.vd_id),
                    waiting ? ", failing that I/O" : "");
    spdlog::warn("{}", message);
    events_.add("ublk_held", h.dg_id, std::nullopt, h.vd_id, message);
  }
  if (recorded) (void)save();  // logged inside; the device is served either way
}

std::vector<HeldUblk> Registry::held_of(std::uint32_t dg_id,
                                        std::optional<std::uint32_t> vd_id) const {
  std::vector<HeldUblk> out;
  for (const HeldUblk& h : ublk_.held())
    if (h.dg_id == dg_id && (!vd_id || h.vd_id == *vd_id)) out.push_back(h);
  return out;
}

Result<std::vector<std::string>> Registry::release_held(std::uint32_t dg_id,
                                                        std::optional<std::uint32_t> vd_id,
                                                        bool force, std::string_view why) {
  const std::vector<HeldUblk> held = held_of(dg_id, vd_id);
  // Who uses them, all looked at before anything is released: a refusal changes nothing. No
  // exclusive-open probe and no sync: a quiesced device would hold them until it is served.
  DeviceUsersRoots roots;
  roots.exclusive_probe = false;
  std::vector<std::string> in_use;
  for (const HeldUblk& h : held) {
    auto users = block_device_users(h.path, roots);
    if (users.is_ok() && !users->empty())
      in_use.push_back(fmt::format("{} ({})", h.path, fmt::join(*users, "; ")));
  }
  if (!in_use.empty() && !force) {
    return make_error(Errc::kBusy,
                      "{} in use: {}. {}: bring the drive group back (its I/O is then served), or "
                      "add --force, which releases it anyway: the I/O waiting on it fails and a "
                      "filesystem on it shuts down",
                      in_use.size() == 1 ? "a device held for it is" : "devices held for it are",
                      fmt::join(in_use, ", "), held_reason(held.front()));
  }
  std::vector<std::string> released;
  for (const HeldUblk& h : held) {
    Status st = ublk_.release(h.dev_id, kReleaseTimeout);
    if (!st)
      return make_error(st.code(),
                        "{} is stopped (its users now get I/O errors) but not yet deleted: {}. The "
                        "kernel deletes it once they let go of it: unmount or close it, then run "
                        "this again",
                        h.path, st.message());
    released.push_back(h.path);
    spdlog::warn("dg {} vd {}: released held {} ({}{})", h.dg_id, h.vd_id, h.path, why,
                 force && !in_use.empty() ? ", forced while in use" : "");
    events_.add("export_stopped", h.dg_id, std::nullopt, h.vd_id,
                fmt::format("held ublk {} released ({}{})", h.path, why,
                            force && !in_use.empty() ? ", forced while in use" : ""));
    forget_exports(h.dg_id, h.vd_id, "ublk");
  }
  return released;
}

}  // namespace graid::daemon
