// graidd's objects and what can be done to them: physical drives (PDs), drive groups (DGs: one
// Array each) and virtual drives (VDs: extents of a DG), with their NBD exports. Every operation
// checks its whole input before it changes anything, and answers with the JSON result graidctl
// prints (docs/cli.md) or a Status naming what is wrong.
//
// Threading: the control thread calls everything here, one request at a time; no locking is
// needed for the objects. Arrays report their own events (member failed, degraded, resync) on
// their notifier threads straight into the EventLog, which has its own lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "graid/array.h"
#include "graid/parity.h"
#include "graidd/dg_observer.h"
#include "graidd/event_hooks.h"
#include "graidd/event_log.h"
#include "graidd/io_threads.h"
#include "graidd/job_runner.h"
#include "graidd/nbd_exports.h"
#include "graidd/parity_choice.h"
#include "graidd/pd_health.h"
#include "graidd/pd_probe.h"
#include "graidd/state_store.h"
#include "graidd/ublk_exports.h"

namespace graid::daemon {

// The smallest PD: the metadata area (1 MiB) plus 1 MiB of data.
inline constexpr std::uint64_t kMinPdBytes = std::uint64_t{2} << 20;

struct RegistryOptions {
  std::string state_dir;
  std::string socket_path;
  ParityChoice parity;
  std::string version;
  UblkExportOptions ublk;
  NbdLimits nbd;                            // every NBD server's limits
  const EventHooks* event_hooks = nullptr;  // the alert hooks, for describe controller; or none
  std::string metrics_address;  // where /metrics is served ("" when not), for describe controller
  HealthMonitor* health = nullptr;  // reads the NVMe drives' health logs (graidd/pd_health.h)
};

class Registry {
 public:
  Registry(RegistryOptions options, IoThreads& threads, EventLog& events);
  // shutdown() if it has not run.
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Locks the state dir (a second graidd on it is refused), loads it, opens the PDs it lists,
  // assembles every DG found on them (re-syncing after an unclean stop), and restores the exports.
  // Problems with single objects (a missing drive, a DG that cannot start, an export that cannot
  // listen) are logged, recorded as events and shown in their objects; only a state dir that cannot
  // be read fails start-up.
  Status start();
  // Stops every export (their requests in flight are answered), then stops every array, which
  // marks it clean. A ublk device still in use (mounted, open) is flushed and left to the kernel
  // for the next graidd to take back, and its DG is left running, not marked clean, until the
  // process exits (docs/daemon.md). Idempotent.
  void shutdown();
  // ublk devices shutdown() left to the kernel in use. The process must then end without tearing
  // down its I/O threads' rings first (graidd_main: _Exit), as a kill would: with the device's
  // /dev/ublkcN still open, the driver's cancel path re-queues the device's requests endlessly
  // (a soft lockup on Linux 6.12) until that file closes too.
  std::uint32_t devices_left() const noexcept { return devices_left_; }

  // Brings what the registry knows of member slots up to date with the arrays (a hot spare
  // taken into a failed role by a rebuild job). Called before each request.
  void refresh();

  // Work other threads ask of the control thread: an eventfd that becomes readable when a
  // member fails (graidd's control loop polls it), and what to do then: give global hot spares
  // to DGs that have a failed member and no spare of their own (registry_spares.cpp).
  int wake_fd() const noexcept { return wake_fd_; }
  // Returns once every running array's observer has logged the events raised so far: called
  // before a command that changes something is answered, so its events (a member failed) are on
  // disk by then.
  void settle_events() const;
  void housekeeping() {
    refresh();
    use_global_spares();
  }

  // The control verbs (docs/cli.md); `args` is the request's args object. Each returns the
  // result JSON or a Status whose code becomes the error code on the wire.
  Result<nlohmann::json> create_pd(const nlohmann::json& args);
  Result<nlohmann::json> list_pd(const nlohmann::json& args);
  Result<nlohmann::json> describe_pd(const nlohmann::json& args);
  Result<nlohmann::json> delete_pd(const nlohmann::json& args);
  Result<nlohmann::json> edit_pd(const nlohmann::json& args);

  Result<nlohmann::json> create_dg(const nlohmann::json& args);
  Result<nlohmann::json> list_dg(const nlohmann::json& args);
  Result<nlohmann::json> describe_dg(const nlohmann::json& args);
  Result<nlohmann::json> delete_dg(const nlohmann::json& args);
  Result<nlohmann::json> edit_dg(const nlohmann::json& args);

  Result<nlohmann::json> create_vd(const nlohmann::json& args);
  Result<nlohmann::json> list_vd(const nlohmann::json& args);
  Result<nlohmann::json> describe_vd(const nlohmann::json& args);
  Result<nlohmann::json> delete_vd(const nlohmann::json& args);
  // edit vd <dg> <vd> size SIZE: grows the VD in place (Array::resize_vd); its ublk device
  // follows live where the kernel can, NBD exports on their next export.
  Result<nlohmann::json> edit_vd(const nlohmann::json& args);
  Result<nlohmann::json> export_vd(const nlohmann::json& args);
  Result<nlohmann::json> unexport_vd(const nlohmann::json& args);

  Result<nlohmann::json> replace_pd(const nlohmann::json& args);
  Result<nlohmann::json> start_check(const nlohmann::json& args);
  Result<nlohmann::json> stop_check(const nlohmann::json& args);
  Result<nlohmann::json> describe_controller(const nlohmann::json& args);
  Result<nlohmann::json> list_event(const nlohmann::json& args);
  // test event: a `test` event (warning), so an administrator can check alert hooks.
  Result<nlohmann::json> test_event(const nlohmann::json& args);
  const EventLog& events() const noexcept { return events_; }
  // The Prometheus page (graidd/metrics_text.h), from what the verbs above answer.
  std::string metrics();
  Result<nlohmann::json> stats(const nlohmann::json& args);

 private:
  struct Pd {
    std::uint32_t id = 0;
    std::string path;
    bool marker_offline = false;
    bool global_spare = false;  // free, waiting for any DG that loses a member
    // Held while the PD is in no running array (keeps its lock: O_EXCL or flock); a running
    // array holds the device itself.
    std::unique_ptr<MemberDevice> device;
    DeviceIdentity identity;
    PdInfo info;
    bool missing = false;     // could not be opened at start
    bool busy = false;        // ... because something else holds it
    std::string message;      // why it is missing, stale, ...
    bool superblock = false;  // carried a graid superblock when opened
    std::string sb_uuid;      // its array's UUID then
    std::optional<std::uint32_t> dg_id, slot;
    // Held here, not by its DG's array: assembly found its superblock stale (it was out of the
    // DG when it last stopped). The role it had, per its own superblock: `marker online` or
    // `replace pd` takes that role back while it is failed.
    std::optional<std::uint32_t> stale_slot;
    // A hot replace (graidctl replace pd of a working member): `replacing` while this PD is the
    // copy (held by the array, in no slot yet), of the PD `replacing_from`; `replaced` once a
    // copy took this PD's slot (held by the array until it stops, its superblock erased).
    bool replacing = false;
    std::uint32_t replacing_from = 0;
    bool replaced = false;
  };
  struct Dg {
    std::uint32_t id = 0;
    std::string uuid;
    std::unique_ptr<DgObserver> observer;  // outlives `array` (declared before it)
    std::unique_ptr<Array> array;          // null: offline (could not be assembled)
    std::unique_ptr<JobRunner> jobs;  // with `array` (redundant levels); stopped before it goes
    std::optional<MemberExamination> exam;  // what the superblocks say, for an offline DG
    std::string message;                    // why it is offline; how it was assembled
    bool was_clean = true;
  };

  // Helpers (registry.cpp).
  Status save();
  ArrayOptions array_options(DgObserver& observer) const;
  std::unique_ptr<DgObserver> make_observer(std::uint32_t dg_id);
  void update_slot_map(Dg& dg);
  // Re-reads which PD holds which slot from the array (by path), then update_slot_map().
  void sync_slots(Dg& dg);
  // The DG's background jobs (rebuild, check): started once its array runs (a rebuild or a
  // check that was under way resumes), stopped before the array stops or goes.
  void start_jobs(Dg& dg);
  static void stop_jobs(Dg& dg);
  // Global hot spares (registry_spares.cpp): `edit pd <id> hotspare <dg>|global|none`; moving
  // a PD into a DG's spare slots; and giving global spares to DGs that need them.
  // `force`: wipe other software's signatures on it (check_signatures).
  Result<nlohmann::json> edit_pd_hotspare(Pd& pd, const std::string& value, bool force);
  Status make_dg_spare(Pd& pd, Dg& dg, std::string_view why);
  void use_global_spares();
  void poke() const;  // makes wake_fd() readable; any thread
  Result<std::unique_ptr<MemberDevice>> open_pd_device(const std::string& path) const;
  // Other software's signatures on the device at `path` (graidd/device_signatures.h), checked
  // wherever a device is about to be written by graid (create pd, create dg, a spare, a
  // replacement): kInvalidArgument naming what was found and where unless `force`; with
  // `force`, true when there is something to wipe (wipe_signatures_of() then, once every check
  // of the command has passed). Writes nothing.
  static Result<bool> check_signatures(const std::string& path, bool force);
  // Wipes them (--force) and records what went (event pd_wiped; `pd_id` when it is a PD).
  Status wipe_signatures_of(const std::string& path, std::optional<std::uint32_t> pd_id);

  void reopen(Pd& pd);
  // The I/O threads' rings let go of the files of members no array holds any more (each thread
  // drops them at its next poll; this makes every thread poll twice).
  void drop_ring_files();
  // reopen() of a PD that a stopped array of this graidd just let go of: the kernel may still
  // hold the file, and its lock, for requests that used it (a removed registered file is put
  // when they are done, not always before the update returns). "In use" is then ours: tried
  // again for up to kReleaseWait before the PD is left busy.
  void reopen_released(Pd& pd);
  static constexpr std::chrono::milliseconds kReleaseWait{3000};
  Result<nlohmann::json> edit_pd_io_mode(Pd& pd, const std::string& value);  // registry_pd.cpp
  // delete pd of a PD in a DG (registry_pd.cpp): whether it may go (a member that failed, was
  // taken offline, vanished or is stale, or a DG's hot spare; not a working member, one being
  // rebuilt or copied, nor one of a DG that failed or is offline: kBusy saying what to do), and
  // taking it out (Array::remove_spare for a spare; a failed role stays failed), with an event.
  Status check_removable(const Pd& pd) const;
  Status remove_from_dg(Pd& pd);
  // marker online of a PD that assembly found stale in its role (Pd::stale_slot): takes the
  // drive back into that role while it is failed (Array::readd_device). registry_pd.cpp.
  Result<nlohmann::json> readd_stale(Pd& pd);
  // replace pd of a working member: `to` becomes a copy of `from`, then takes its slot (the
  // DG's redundancy job runs the copy; sync_slots() follows the outcome); `wipe`: other
  // software's signatures on `to` first (--force). registry_pd.cpp.
  Result<nlohmann::json> hot_replace(Dg& dg, Pd& from, Pd& to, bool wipe);
  // Assembles a DG from its PDs (AssembleOptions::force with `force`: graidctl edit dg <id>
  // force_online). Returns what the force overrode (empty without it); on failure the DG is
  // offline with dg.message saying why.
  std::vector<std::string> assemble_group(std::uint32_t dg_id, const std::string& uuid,
                                          std::vector<Pd*> pds, bool force = false);
  // Each member slot's I/O counters (ArrayStats::members) with its PD, for `stats`.
  nlohmann::json member_io(const ArrayStats& s, const Dg& dg) const;
  // Logs member_failed for each failed role of a just-assembled DG that the event log does not
  // show failed (EventLog::says_member_failed): "found failed at start".
  void log_failures_found_at_start(const Dg& dg);
  // graidctl edit dg <id> force_online [--confirm] (registry_dg.cpp).
  Result<nlohmann::json> force_online(Dg& dg, bool confirm);
  // For force_online of a DG that failed while running: refuses without `confirm` (saying what
  // forcing does) or while its VDs are exported, changing nothing; else stops the array and holds
  // its PDs again, leaving the DG offline for the forced assembly.
  Status take_down_failed(Dg& dg, bool confirm);
  void restore_export(const ExportEntry& entry);
  // Serves a VD over NBD as `entry` says (address, name, TLS) and records it unless
  // `restoring` (registry_vd.cpp).
  Status export_nbd(Dg& dg, const ExportEntry& entry, bool restoring);
  // Serves a VD as a ublk device and records it in the state dir (registry_vd.cpp). `dev_id`:
  // the device it had before a restart.
  Status export_ublk(Dg& dg, std::uint32_t vd_id, std::optional<std::uint32_t> dev_id);
  // Removes a VD's ublk device, if it has one, and forgets it. False when it had none. A device
  // in use (graidd/block_device_users.h) is refused with kBusy naming its users, unless `force`:
  // then its filesystems and the device are synced first and it goes anyway.
  Result<bool> unexport_ublk(Dg& dg, std::uint32_t vd_id, std::string_view why, bool force);
  // ublk devices this graidd owns but does not serve (registry_held.cpp). At start, before the
  // exports are restored: finds them and deletes the dead ones.
  void release_dead_held();
  // After the exports of a DG (or of all, nullopt) are restored: takes back the held devices of
  // VDs that have none (never recorded), and logs and records the others as held.
  void claim_held(std::optional<std::uint32_t> only_dg);
  // Why a held device is not served ("" when it could be).
  std::string held_reason(const HeldUblk& h) const;
  std::vector<HeldUblk> held_of(std::uint32_t dg_id, std::optional<std::uint32_t> vd_id) const;
  // unexport vd / delete dg: releases the held devices of a VD (or of the whole DG), refused
  // with kBusy while one is in use unless `force`, and forgets their exports. Returns their paths.
  Result<std::vector<std::string>> release_held(std::uint32_t dg_id,
                                                std::optional<std::uint32_t> vd_id, bool force,
                                                std::string_view why);
  nlohmann::json held_json(std::uint32_t dg_id) const;  // registry_json.cpp
  // unexport vd / delete vd of a VD whose NBD export has clients (connections past their
  // handshake): kBusy naming each (peer, since when) unless `force`, changing nothing.
  Status refuse_nbd_clients(const Dg& dg, std::uint32_t vd_id, std::string_view what,
                            bool force) const;
  // Drops a VD's exports (of `kind`, or all) from what the state dir restores at start.
  void forget_exports(std::uint32_t dg_id, std::uint32_t vd_id, std::string_view kind = {});
  // The smallest id not in use: ids go 0, 1, 2... in order of creation and are never reused
  // while their object exists.
  template <typename Map>
  static std::uint32_t smallest_free_id(const Map& map) {
    std::uint32_t id = 0;
    while (map.contains(id))
      ++id;
    return id;
  }

  Result<Pd*> find_pd(const nlohmann::json& args, const char* key = "pd_id");
  Result<Dg*> find_dg(const nlohmann::json& args, bool need_online = false);
  Result<VdInfo> find_vd(Dg& dg, const nlohmann::json& args);

  // JSON views (registry_json.cpp).
  nlohmann::json pd_json(const Pd& pd) const;
  // A PD's drive health as the monitor last read it (registry_json.cpp).
  nlohmann::json health_json(const Pd& pd) const;
  std::string pd_state(const Pd& pd) const;
  nlohmann::json dg_json(const Dg& dg, bool detail) const;
  nlohmann::json vd_json(const Dg& dg, const VdInfo& vd) const;
  nlohmann::json settings_json(const Dg& dg) const;
  std::optional<std::uint32_t> pd_at_slot(std::uint32_t dg_id, std::uint32_t slot) const;
  // The PD of DG `dg_id` that is stale in role `slot` (Pd::stale_slot), if any.
  const Pd* stale_pd_of(std::uint32_t dg_id, std::uint32_t slot) const;

  RegistryOptions options_;
  IoThreads& threads_;
  EventLog& events_;
  std::map<std::uint32_t, Pd> pds_;
  std::map<std::uint32_t, Dg> dgs_;
  NbdExports nbd_;    // after dgs_: destroyed first (its servers hold VDs of the arrays)
  UblkExports ublk_;  // likewise
  std::vector<ExportEntry> export_entries_;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::shared_ptr<nbd::NbdExportCounters>>
      vd_counters_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  bool shut_down_ = false;
  std::uint32_t devices_left_ = 0;  // see devices_left()
  int state_lock_fd_ = -1;          // flock on <state dir>/lock: one graidd per state dir
  int wake_fd_ = -1;                // eventfd: see wake_fd()
};

}  // namespace graid::daemon
