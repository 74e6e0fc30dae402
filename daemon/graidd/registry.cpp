// Registry: start-up (state dir, PDs, assembly, exports), shutdown, persistence, array events.
#include "graidd/registry.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <thread>

#include "graidd/block_device_users.h"
#include "graidd/device_signatures.h"
#include "graidd/request_args.h"
#include "graidd/ublk_owner.h"

namespace graid::daemon {

namespace {

RegistryOptions with_ublk_owner(RegistryOptions o) {
  o.ublk.legacy_instance = state_dir_tag(o.state_dir);  // the instance id is read at start()
  return o;
}

}  // namespace

Registry::Registry(RegistryOptions options, IoThreads& threads, EventLog& events)
    : options_(with_ublk_owner(std::move(options))),
      threads_(threads),
      events_(events),
      nbd_(threads),
      ublk_(threads, options_.ublk),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (wake_fd_ < 0)
    spdlog::error("eventfd: {}; global hot spares wait for the next request", std::strerror(errno));
}

Registry::~Registry() {
  shutdown();
  if (state_lock_fd_ >= 0) ::close(state_lock_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Registry::poke() const {
  if (wake_fd_ < 0) return;
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

Status Registry::save() {
  PersistedState s;
  for (const auto& [id, pd] : pds_)
    s.pds.push_back({id, pd.path, pd.marker_offline, pd.global_spare});
  for (const auto& [id, dg] : dgs_)
    s.dgs.push_back({id, dg.uuid});
  s.exports = export_entries_;
  auto status = save_state(options_.state_dir, s);
  if (!status) spdlog::error("cannot save the state: {}", status.to_string());
  return status;
}

ArrayOptions Registry::array_options(DgObserver& observer) const {
  ArrayOptions o;
  o.parity = options_.parity.backend;
  o.async_parity = options_.parity.async;
  o.job_parity = options_.parity.job_async;
  o.host_memory = options_.parity.host_memory;
  o.observer = &observer;
  return o;
}

std::unique_ptr<DgObserver> Registry::make_observer(std::uint32_t dg_id) {
  return std::make_unique<DgObserver>(events_, dg_id);
}

void Registry::update_slot_map(Dg& dg) {
  std::map<std::uint32_t, std::uint32_t> map;
  for (const auto& [id, pd] : pds_)
    if (pd.dg_id == dg.id && pd.slot) map[*pd.slot] = id;
  dg.observer->set_slot_map(std::move(map));
}

void Registry::sync_slots(Dg& dg) {
  if (!dg.array) return;
  const auto slots = dg.array->member_slots();
  const auto replace = dg.array->replace_progress();
  for (auto& [id, pd] : pds_) {
    if (pd.device) {
      // Held by the registry: a free PD, or one the array closed; not in a slot. A PD whose
      // array took it as a spare no longer has its device here.
      if (pd.dg_id == dg.id && pd.slot) pd.slot.reset();
      continue;
    }
    bool found = false;
    for (const auto& s : slots) {
      if (s.state == MemberSlotState::kReplacement) continue;  // the copy's slot: not a role yet
      if (!s.path.empty() && s.path == pd.path) {
        pd.dg_id = dg.id;
        pd.slot = s.slot;
        found = true;
      }
    }
    if (pd.replacing && pd.dg_id == dg.id) {
      if (found) {
        // The copy took the slot: the PD it copied is out of the DG.
        pd.replacing = false;
        if (auto from = pds_.find(pd.replacing_from); from != pds_.end()) {
          Pd& old = from->second;
          old.slot.reset();
          old.replaced = true;
          old.message = fmt::format(
              "replaced by pd {} in dg {}; its superblock is erased; held by the dg until it "
              "stops or graidd restarts, then free",
              pd.id, dg.id);
        }
      } else if (!replace || replace->path != pd.path) {
        // Given up (a write failed, a stop): the array let it go; it is free again once held
        // here. I/O threads whose rings registered its file drop it at their next poll, and
        // the copy may still be letting go: until it can be opened it stays `replacing` and the
        // next refresh tries again.
        drop_ring_files();
        reopen(pd);
        if (pd.device || !pd.busy) {
          pd.replacing = false;  // free, or missing (the drive went away)
          pd.dg_id.reset();
        } else {
          pd.missing = false;  // not gone: still held by the DG's copy
          pd.message = "being released by dg " + std::to_string(dg.id) + ": " + pd.message;
        }
      }
      continue;
    }
    // A failed member whose role another device took: still held by the array, in no slot.
    if (!found && pd.dg_id == dg.id) pd.slot.reset();
  }
  update_slot_map(dg);
}

void Registry::refresh() {
  for (auto& [id, dg] : dgs_)
    sync_slots(dg);
  if (options_.health != nullptr) {
    // The drives the health monitor reads (a changed list is read at once).
    std::vector<HealthTarget> targets;
    for (const auto& [id, pd] : pds_)
      if (!pd.missing) targets.push_back({id, pd.path, pd.dg_id});
    options_.health->set_targets(std::move(targets));
  }
}

void Registry::start_jobs(Dg& dg) {
  if (!dg.array || dg.array->geometry().redundancy() == Redundancy::kNone) return;
  dg.jobs = std::make_unique<JobRunner>(*dg.array, dg.id);
  JobRunner* job = dg.jobs.get();
  if (dg.array->check_progress()) {
    // A check stopped or cut short: it goes on (as a check: whether it repaired is not kept).
    if (auto st = job->start_check(false); !st) spdlog::warn("dg {}: {}", dg.id, st.message());
  }
  dg.observer->set_wake([this, job](ArrayEventKind kind) {
    if (kind == ArrayEventKind::kMemberFailed || kind == ArrayEventKind::kSpareAdded ||
        kind == ArrayEventKind::kMemberReplaced || kind == ArrayEventKind::kReplaceStarted) {
      job->wake(kind == ArrayEventKind::kMemberFailed);
    }
    // A DG without a spare of its own may take a global one, and the PDs of a hot replace that
    // ended change hands (on the control thread).
    if (kind == ArrayEventKind::kMemberFailed || kind == ArrayEventKind::kReplaceFinished ||
        kind == ArrayEventKind::kReplaceStopped) {
      poke();
    }
  });
}

void Registry::stop_jobs(Dg& dg) {
  if (dg.observer) dg.observer->set_wake({});
  dg.jobs.reset();  // records the checkpoint of the job in progress
}

Result<std::unique_ptr<MemberDevice>> Registry::open_pd_device(const std::string& path) const {
  OpenOptions o;
  o.exclusive = true;  // a block device in use (mounted, md, another graidd) is refused
  o.lock = true;       // a regular file another process holds is refused
  return open_member(path, o);
}

Result<bool> Registry::check_signatures(const std::string& path, bool force) {
  auto found = probe_signatures(path);
  if (!found.is_ok()) return found.status();
  if (found->empty()) return false;
  if (!force) {
    return make_error(Errc::kInvalidArgument, "{}: add --force to wipe {} and use it",
                      describe_signatures(path, *found), found->size() == 1 ? "it" : "them");
  }
  return true;
}

Status Registry::wipe_signatures_of(const std::string& path, std::optional<std::uint32_t> pd_id) {
  auto wiped = wipe_signatures(path);
  if (!wiped.is_ok()) return wiped.status();
  if (wiped->empty()) return Status::ok();
  const std::string what = describe_signatures(path, *wiped);
  spdlog::warn("{}: wiped (--force)", what);
  events_.add("pd_wiped", std::nullopt, pd_id, std::nullopt, what + ": wiped (--force)");
  return Status::ok();
}

void Registry::drop_ring_files() {
  for (int round = 0; round < 2; ++round)
    for (std::uint32_t t = 0; t < threads_.count(); ++t)
      threads_.call(t, [](IoContext&) {});
}

void Registry::reopen_released(Pd& pd) {
  const auto deadline = std::chrono::steady_clock::now() + kReleaseWait;
  for (;;) {
    drop_ring_files();
    reopen(pd);
    if (pd.device || !pd.busy || std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Registry::reopen(Pd& pd) {
  auto dev = open_pd_device(pd.path);
  if (!dev.is_ok()) {
    pd.missing = true;
    pd.busy = dev.status().code() == Errc::kBusy;
    pd.message = dev.status().message();
    pd.device.reset();
    return;
  }
  // A path can name another device by now: a file put where a failed PD's was, a drive swapped
  // in at the same node. A PD is the device graidd first opened this run; anything else at its
  // path is left alone (missing) until the PD is deleted and the new device added as a PD.
  const DeviceIdentity now = (*dev)->identity();
  if (pd.identity.known) {
    std::string other;
    if (now != pd.identity) {
      other = now.block ? "a different device" : "a different file";
    } else if (now.block && !pd.info.serial.empty()) {
      const std::string serial = probe_pd(**dev).serial;
      if (!serial.empty() && serial != pd.info.serial)
        other = fmt::format("a drive with serial {}, not {}", serial, pd.info.serial);
    }
    if (!other.empty()) {
      pd.missing = true;
      pd.busy = false;
      pd.message = fmt::format(
          "{} now names {} than pd {} was: graidd leaves it alone (delete the pd, and add the new "
          "device with graidctl create pd)",
          pd.path, other, pd.id);
      pd.device.reset();
      spdlog::warn("pd {}: {}", pd.id, pd.message);
      return;
    }
  }
  pd.missing = false;
  pd.busy = false;
  pd.message.clear();
  pd.device = std::move(*dev);
  if (!pd.identity.known) pd.identity = now;
}

std::optional<std::uint32_t> Registry::pd_at_slot(std::uint32_t dg_id, std::uint32_t slot) const {
  for (const auto& [id, pd] : pds_)
    if (pd.dg_id == dg_id && pd.slot == slot) return id;
  return std::nullopt;
}

const Registry::Pd* Registry::stale_pd_of(std::uint32_t dg_id, std::uint32_t slot) const {
  for (const auto& [id, pd] : pds_)
    if (pd.dg_id == dg_id && !pd.slot && pd.stale_slot == slot) return &pd;
  return nullptr;
}

void Registry::settle_events() const {
  for (const auto& [id, dg] : dgs_)
    if (dg.array) dg.array->wait_for_events();
}

Status Registry::start() {
  if (::mkdir(options_.state_dir.c_str(), 0700) != 0 && errno != EEXIST)
    return make_error(Errc::kIoError, "mkdir {}: {}", options_.state_dir, std::strerror(errno));
  const std::string lock = options_.state_dir + "/lock";
  state_lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (state_lock_fd_ < 0)
    return make_error(Errc::kIoError, "open {}: {}", lock, std::strerror(errno));
  if (::flock(state_lock_fd_, LOCK_EX | LOCK_NB) != 0)
    return make_error(Errc::kBusy, "state dir {} is in use by another graidd", options_.state_dir);
  // The event log first: what start-up finds is logged after what the last run logged.
  auto opened = events_.open(options_.state_dir);
  if (!opened.is_ok()) return opened.status();
  if (opened->damaged > 0 || opened->cut_tail)
    spdlog::warn("event log {}/{}: {} damaged line(s) skipped{}", options_.state_dir,
                 kEventFileName, opened->damaged,
                 opened->cut_tail ? ", an unfinished last line cut off" : "");
  events_.add("daemon_started", std::nullopt, std::nullopt, std::nullopt,
              fmt::format("graidd {} (pid {}), parity {}", options_.version, ::getpid(),
                          options_.parity.backend ? options_.parity.backend->name() : "none"));
  auto loaded = load_state(options_.state_dir);
  if (!loaded.is_ok()) return loaded.status();
  // The id every ublk device this graidd adds carries (graidd/ublk_owner.h).
  auto instance = load_or_make_instance_id(options_.state_dir);
  if (!instance.is_ok()) return instance.status();
  ublk_.set_instance(*instance);
  std::map<std::string, std::uint32_t> dg_by_uuid;
  for (const auto& d : loaded->dgs)
    dg_by_uuid[d.uuid] = d.dg_id;
  export_entries_ = loaded->exports;

  // Open every PD and read its superblock.
  std::map<std::string, std::vector<Pd*>> groups;  // array uuid -> its PDs
  const auto busy_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (const auto& e : loaded->pds) {
    Pd& pd = pds_[e.pd_id];
    pd.id = e.pd_id;
    pd.path = e.path;
    pd.marker_offline = e.marker_offline;
    pd.global_spare = e.global_spare;
    reopen(pd);
    // A daemon that was just killed may still hold its drives for a moment: the kernel tears
    // down its io_uring rings (which hold the files, and so their locks) after the process is
    // gone. Wait for that, up to a deadline shared by all PDs.
    while (pd.missing && pd.busy && std::chrono::steady_clock::now() < busy_deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      reopen(pd);
    }
    if (pd.missing) {
      spdlog::warn("pd {} ({}) is missing: {}", pd.id, pd.path, pd.message);
      events_.add("pd_missing", std::nullopt, pd.id, std::nullopt, pd.message);
      continue;
    }
    pd.identity = pd.device->identity();
    pd.info = probe_pd(*pd.device);
    auto exam = Array::examine(*pd.device);
    if (exam.is_ok()) {
      pd.superblock = true;
      pd.sb_uuid = exam->array_uuid;
      groups[exam->array_uuid].push_back(&pd);
    } else if (exam.status().code() != Errc::kNotFound) {
      // Graid metadata this build cannot use (damaged, or a newer format): in no DG, and no DG
      // takes it without --force.
      auto found = Array::find_metadata(*pd.device);
      pd.message = fmt::format("carries {}: not assembled, and no dg takes it without --force",
                               found.is_ok() ? found->description : exam.status().message());
      spdlog::warn("pd {} ({}) {}", pd.id, pd.path, pd.message);
      events_.add("pd_unreadable_metadata", std::nullopt, pd.id, std::nullopt, pd.message);
    }
  }
  // DGs the state knows whose PDs are all gone: offline, kept so the id stays taken.
  for (const auto& [uuid, id] : dg_by_uuid) {
    if (groups.contains(uuid)) continue;
    Dg& dg = dgs_[id];
    dg.id = id;
    dg.uuid = uuid;
    dg.observer = make_observer(id);
    dg.message = "no member of this drive group was found";
    spdlog::error("dg {} ({}): {}", id, uuid, dg.message);
    events_.add("dg_offline", id, std::nullopt, std::nullopt, dg.message);
  }
  for (auto& [uuid, members] : groups) {
    std::uint32_t id = 0;
    if (auto it = dg_by_uuid.find(uuid); it != dg_by_uuid.end()) {
      id = it->second;
    } else {
      id = smallest_free_id(dgs_);
      while (std::any_of(dg_by_uuid.begin(), dg_by_uuid.end(),
                         [&](const auto& kv) { return kv.second == id && !dgs_.contains(id); }))
        ++id;
      spdlog::warn("PDs carry array {} that the state does not list: assembling it as dg {}", uuid,
                   id);
    }
    assemble_group(id, uuid, members);
  }
  (void)save();  // logged inside; the operation stands
  release_dead_held();
  for (const auto& e : std::vector<ExportEntry>(export_entries_))
    restore_export(e);
  claim_held(std::nullopt);
  use_global_spares();  // a DG that came up degraded
  return {};
}

void Registry::log_failures_found_at_start(const Dg& dg) {
  // A member the superblocks show failed whose failure the event log lacks (it failed while no
  // graidd ran, or graidd died between recording it and logging it) is logged now.
  for (const MemberSlot& s : dg.array->member_slots()) {
    if (s.slot >= dg.array->member_count()) continue;
    if (s.state != MemberSlotState::kFailed && s.state != MemberSlotState::kRemoved) continue;
    if (events_.says_member_failed(dg.id, s.slot)) continue;
    Event e;
    e.severity = Severity::kCritical;
    e.kind = "member_failed";
    e.dg_id = dg.id;
    e.slot = s.slot;
    if (const Pd* pd = stale_pd_of(dg.id, s.slot)) e.pd_id = pd->id;
    e.message = fmt::format("member slot {} found failed at start ({})", s.slot,
                            member_slot_state_name(s.state));
    events_.add(std::move(e));
  }
}

std::vector<std::string> Registry::assemble_group(std::uint32_t dg_id, const std::string& uuid,
                                                  std::vector<Pd*> members, bool force) {
  Dg& dg = dgs_[dg_id];
  dg.id = dg_id;
  dg.uuid = uuid;
  dg.observer = make_observer(dg_id);
  std::optional<MemberExamination> exam;
  std::vector<std::unique_ptr<MemberDevice>> devices;
  std::map<const Pd*, std::uint32_t> own_slot;  // as each PD's own superblock says
  for (Pd* pd : members) {
    auto e = Array::examine(*pd->device);
    if (e.is_ok()) {
      pd->slot = e->slot;  // as its own superblock says; the array's view replaces it below
      own_slot[pd] = e->slot;
      if (!exam || e->events > exam->events) exam = *e;
    }
    pd->dg_id = dg_id;
    pd->stale_slot.reset();
    devices.push_back(std::move(pd->device));
  }
  AssembleOptions ao;
  ao.allow_degraded = true;
  ao.force = force;
  ao.background_resync = true;  // the DG's redundancy job re-syncs at its resync speed
  AssembleReport report;
  auto array = Array::assemble(std::move(devices), array_options(*dg.observer), ao, &report);
  if (!array.is_ok()) {
    dg.exam = exam;
    dg.message = array.status().message();
    for (Pd* pd : members)
      reopen(*pd);
    spdlog::error("dg {} cannot be assembled: {}", dg_id, dg.message);
    events_.add("dg_offline", dg_id, std::nullopt, std::nullopt, dg.message);
    return {};
  }
  dg.exam.reset();
  dg.array = std::move(*array);
  dg.was_clean = report.was_clean;
  // Map PDs to slots by the path the array holds for each.
  const auto slots = dg.array->member_slots();
  for (Pd* pd : members) {
    pd->slot.reset();
    for (const auto& s : slots)
      if (!s.path.empty() && s.path == pd->path) pd->slot = s.slot;
    if (!pd->slot) {
      // Not taken by assembly (a stale superblock): the array closed it; hold it again.
      reopen(*pd);
      const auto own = own_slot.find(pd);
      if (own != own_slot.end() && own->second < dg.array->member_count()) {
        pd->stale_slot = own->second;
        const auto role = dg.array->member_slot(own->second);
        const bool open =
            role.is_ok() && role->path.empty() &&
            (role->state == MemberSlotState::kFailed || role->state == MemberSlotState::kRemoved);
        pd->message = open
                          ? fmt::format(
                                "stale: out of dg {} (slot {}) when it last stopped; graidctl edit "
                                "pd {} marker online takes it back, delete pd {} takes it out",
                                dg_id, own->second, pd->id, pd->id)
                          : fmt::format(
                                "stale: out of dg {}, whose slot {} another drive has taken; "
                                "graidctl delete pd {} takes it out of the dg",
                                dg_id, own->second, pd->id);
      } else {
        pd->message = "stale superblock: not used by the drive group";
      }
    }
  }
  const auto replace = dg.array->replace_progress();
  if (replace) {
    // A hot replace recorded in the superblocks resumes: its PD is the copy, in no slot yet.
    for (Pd* pd : members) {
      if (pd->path != replace->path) continue;
      pd->slot.reset();
      pd->replacing = true;
      pd->global_spare = false;
      pd->message.clear();
      if (const auto from = pd_at_slot(dg_id, replace->member)) pd->replacing_from = *from;
    }
  }
  update_slot_map(dg);
  start_jobs(dg);
  std::string how = report.was_clean ? "clean" : "after an unclean stop";
  if (report.resync_pending_bytes > 0) {
    how += fmt::format(", re-syncing {} MiB per member in the background",
                       (report.resync_pending_bytes + (1u << 20) - 1) >> 20);
  } else if (!report.was_clean) {
    how += fmt::format(", re-synced {} bytes per member", report.resynced_bytes);
  }
  if (replace) {
    how += fmt::format(", the hot replace of slot {} resumes at {} MiB", replace->member,
                       replace->copied_bytes >> 20);
  }
  // A role whose own drive is here but stale says so, by PD: the administrator's next step is
  // that PD (marker online, replace, delete), not a missing drive.
  std::vector<std::string> stale, failed;
  std::set<std::uint32_t> stale_roles;
  for (const Pd* pd : members) {
    if (!pd->stale_slot) continue;
    stale.push_back(fmt::format("slot {}: stale (pd {})", *pd->stale_slot, pd->id));
    stale_roles.insert(*pd->stale_slot);
  }
  for (std::size_t i = 0; i < report.failed_members.size(); ++i) {
    if (i < report.failed_roles.size() && stale_roles.contains(report.failed_roles[i])) continue;
    failed.push_back(report.failed_members[i]);
  }
  if (!stale.empty()) how += fmt::format(", {}", fmt::join(stale, ", "));
  if (report.stale_members.size() > stale.size())
    how += fmt::format(", stale members not used: {}", fmt::join(report.stale_members, ", "));
  if (!failed.empty()) how += fmt::format(", failed or missing: {}", fmt::join(failed, ", "));
  if (!report.overrides.empty())
    how += fmt::format(", forced: {}", fmt::join(report.overrides, "; "));
  dg.message.clear();
  log_failures_found_at_start(dg);
  events_.add("dg_assembled", dg_id, std::nullopt, std::nullopt,
              fmt::format("{} {} assembled ({}): {}", raid_level_name(dg.array->geometry().level()),
                          dg.array->name().empty() ? uuid : dg.array->name(),
                          array_health_name(dg.array->health()), how));
  return report.overrides;
}

void Registry::restore_export(const ExportEntry& e) {
  auto dg_it = dgs_.find(e.dg_id);
  std::string problem;
  if (e.kind == "ublk") {
    if (dg_it == dgs_.end() || !dg_it->second.array) {
      problem = "its drive group is not running";
    } else {
      forget_exports(e.dg_id, e.vd_id, "ublk");  // export_ublk records it again
      auto st = export_ublk(dg_it->second, e.vd_id, e.dev_id);
      if (!st) problem = st.message();
    }
    if (!problem.empty()) {
      spdlog::error("cannot restore the ublk export of dg {} vd {}: {}", e.dg_id, e.vd_id, problem);
      events_.add("export_failed", e.dg_id, std::nullopt, e.vd_id,
                  fmt::format("ublk export not restored: {}", problem));
    }
    return;
  }
  if (dg_it == dgs_.end() || !dg_it->second.array) {
    problem = "its drive group is not running";
  } else if (auto st = export_nbd(dg_it->second, e, /*restoring=*/true); !st) {
    problem = st.message();
  }
  if (!problem.empty()) {
    spdlog::error("cannot restore the nbd export of dg {} vd {} at {}: {}", e.dg_id, e.vd_id,
                  e.address, problem);
    events_.add("export_failed", e.dg_id, std::nullopt, e.vd_id,
                fmt::format("nbd export at {} not restored: {}", e.address, problem));
  }
}

void Registry::forget_exports(std::uint32_t dg_id, std::uint32_t vd_id, std::string_view kind) {
  std::erase_if(export_entries_, [&](const ExportEntry& e) {
    return e.dg_id == dg_id && e.vd_id == vd_id && (kind.empty() || e.kind == kind);
  });
}

void Registry::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // A device in use (a filesystem mounted on it: a package upgrade restarts graidd under it)
  // is not removed, which would fail the writeback removal starts: flushed, then left to the
  // kernel, which holds its I/O once this process is gone until the next graidd takes it back.
  std::set<std::uint32_t> left_running;
  std::set<std::uint32_t> parked;  // DGs with queues of a handed-over device kept, idle
  for (const UblkExportInfo& e : ublk_.list()) {
    auto users = block_device_users(e.device.path);
    if (!users.is_ok() || users->empty()) {
      // Where the kernel can tell (TRY_STOP_DEV), a device nobody has open goes now and one
      // that is open stays, whatever the look above missed.
      auto r = ublk_.remove_if_unused(e.dg_id, e.vd_id);
      if (!r.is_ok() || *r != UblkExports::Removal::kInUse) continue;
      users = std::vector<std::string>{"open (the kernel says so)"};
    }
    const Status synced = sync_block_device(e.device.path, /*mounts=*/false);
    const std::string sync_note = synced ? "" : fmt::format(" ({})", synced.message());
    // Where the kernel can quiesce the device (QUIESCE_DEV, 6.16+), its requests wait in the
    // kernel from now on and graidd lets go of it at once: the DG stops clean.
    const Result<bool> handed = ublk_.hand_over(e.dg_id, e.vd_id);
    if (handed.is_ok()) {
      spdlog::warn(
          "dg {} vd {}: {} is in use ({}): quiesced (QUIESCE_DEV) and left for the next graidd "
          "to take back{}; its requests wait in the kernel until then; dg {} stops clean",
          e.dg_id, e.vd_id, e.device.path, fmt::join(*users, "; "), sync_note, e.dg_id);
      if (!*handed) {
        ++devices_left_;  // its idle queues keep /dev/ublkcN open: end as a kill
        parked.insert(e.dg_id);
      }
      continue;
    }
    if (handed.status().code() != Errc::kUnsupported)
      spdlog::error("dg {} vd {}: {}: {}", e.dg_id, e.vd_id, e.device.path,
                    handed.status().to_string());
    spdlog::warn(
        "dg {} vd {}: {} is in use ({}): left for the next graidd to take back{}; dg {} keeps "
        "running until graidd exits and re-syncs what its write-intent bitmap marks at the next "
        "start",
        e.dg_id, e.vd_id, e.device.path, fmt::join(*users, "; "), sync_note, e.dg_id);
    ublk_.abandon(e.dg_id, e.vd_id);
    left_running.insert(e.dg_id);
    ++devices_left_;
  }
  ublk_.remove_all();  // a clean stop removes the devices (their entries bring them back)
  nbd_.remove_all();
  for (auto& [id, dg] : dgs_) {
    if (!dg.array) continue;
    stop_jobs(dg);
    if (left_running.contains(id)) {
      // Its device's queues serve on the I/O threads until they stop: not stopped, not freed.
      (void)dg.array.release();
      continue;
    }
    auto quiet = dg.array->quiesce(std::chrono::seconds(30));
    if (!quiet) spdlog::error("dg {}: {}", id, quiet.to_string());
    auto st = dg.array->stop();
    if (!st) spdlog::error("dg {} not stopped clean: {}", id, st.to_string());
    if (const std::uint32_t attached = dg.array->queues_attached(); attached != 0) {
      // A ublk device whose queues never finished still serves from them, or a handed-over
      // one's idle queues stay attached: the array stays (memory and open members) until the
      // process exits rather than being freed under them.
      if (parked.contains(id))
        spdlog::info("dg {}: stopped; {} idle ublk queue(s) kept until the exit", id, attached);
      else
        spdlog::error("dg {}: {} queue(s) still attached; the array is left for the exit", id,
                      attached);
      (void)dg.array.release();
      continue;
    }
    dg.array.reset();
  }
}

Result<Registry::Pd*> Registry::find_pd(const nlohmann::json& args, const char* key) {
  const std::uint32_t id = arg_id(args, key);
  auto it = pds_.find(id);
  if (it == pds_.end())
    return make_error(Errc::kNotFound, "pd {} does not exist (graidctl list pd shows the PDs)", id);
  return &it->second;
}

Result<Registry::Dg*> Registry::find_dg(const nlohmann::json& args, bool need_online) {
  const std::uint32_t id = arg_id(args, "dg_id");
  auto it = dgs_.find(id);
  if (it == dgs_.end())
    return make_error(Errc::kNotFound, "dg {} does not exist (graidctl list dg shows the DGs)", id);
  if (need_online && !it->second.array)
    return make_error(Errc::kUnsupported, "dg {} is offline: {}", id, it->second.message);
  return &it->second;
}

Result<VdInfo> Registry::find_vd(Dg& dg, const nlohmann::json& args) {
  const std::uint32_t id = arg_id(args, "vd_id");
  if (dg.array)
    for (const auto& vd : dg.array->vds())
      if (vd.id == id) return vd;
  return make_error(Errc::kNotFound, "vd {} of dg {} does not exist (graidctl list vd {})", id,
                    dg.id, dg.id);
}

}  // namespace graid::daemon
