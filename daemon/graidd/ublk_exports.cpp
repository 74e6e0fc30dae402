#include "graidd/ublk_exports.h"

#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include "graidd/ublk_owner.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

namespace graid::daemon {

const char* ublk_state_name(std::uint16_t state) noexcept {
  switch (state) {
    case ublk::kStateDead:
      return "dead";
    case ublk::kStateLive:
      return "live";
    case ublk::kStateQuiesced:
      return "quiesced";
    default:
      return "unknown";
  }
}

UblkExports::~UblkExports() {
  remove_all();
}

std::string UblkExports::unavailable() const {
  if (control_) return "";
  auto st = ensure_control();
  return st ? "" : st.message();
}

Status UblkExports::ensure_control() const {
  if (control_) return {};
  auto c = ublk::UblkControl::open(options_.control_path);
  if (!c.is_ok()) return make_error(Errc::kUnsupported, "{}", c.status().message());
  control_ = std::move(*c);
  features_ = control_->features();
  return {};
}

std::optional<std::uint64_t> UblkExports::features() const {
  if (!ensure_control()) return std::nullopt;
  return features_;
}

ublk::ThreadCall UblkExports::thread_call() {
  return [this](std::uint32_t t, const std::function<void(IoContext&)>& fn) {
    threads_.call(t % threads_.count(), fn);
  };
}

void UblkExports::prepare_threads(std::uint32_t dev_id, std::uint16_t queues) {
  if (threads_prepared_) return;
  threads_prepared_ = true;
  for (std::uint32_t t = 0; t < threads_.count(); ++t) {
    std::optional<cpu_set_t> cpus;
    if (options_.pin_to_queue && t < queues) {
      auto a = control_->queue_affinity(dev_id, static_cast<std::uint16_t>(t));
      if (a.is_ok()) cpus = *a;
    }
    threads_.call(t, [&](IoContext&) {
      if (::prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) != 0)
        spdlog::warn("I/O thread {}: PR_SET_IO_FLUSHER: {}", t, std::strerror(errno));
      if (cpus && ::pthread_setaffinity_np(::pthread_self(), sizeof(*cpus), &*cpus) != 0)
        spdlog::warn("I/O thread {}: cannot pin it to ublk queue {}'s CPUs", t, t);
    });
  }
  // The engine's metadata workers too: the write path waits on their bitmap updates.
  set_metadata_workers_io_flusher();
  std::ofstream oom("/proc/self/oom_score_adj");
  if (oom) oom << "-1000\n";
}

Status UblkExports::add(std::uint32_t dg_id, std::uint32_t vd_id, Array& array, VdHandle handle,
                        std::optional<std::uint32_t> dev_id) {
  if (devices_.contains({dg_id, vd_id}))
    return make_error(Errc::kBusy, "vd {} of dg {} already has a ublk device ({})", vd_id, dg_id,
                      devices_.at({dg_id, vd_id})->info().path);
  GRAID_RETURN_IF_ERROR(ensure_control());
  ublk::UblkDeviceOptions o;
  o.threads = threads_.count();
  o.spread = options_.spread;
  o.limits.queues = threads_.count();
  o.limits.max_depth = options_.depth;
  o.limits.memory_budget = options_.memory_budget;
  const ublk::CopyChoice copy =
      ublk::choose_copy(options_.copy, features_, array.geometry().parity_strips() > 0);
  o.zero_copy = copy.zero_copy;
  o.limits.user_copy = copy.user_copy;
  o.server_flags = ublk_owner_flags(options_.instance, {dg_id, vd_id});
  o.safe_stop = (features_ & ublk::kFlagSafeStopDev) != 0;
  o.update_size = (features_ & ublk::kFlagUpdateSize) != 0;
  o.quiesce = (features_ & ublk::kFlagQuiesce) != 0;
  o.batch = options_.batch && (features_ & ublk::kFlagBatchIo) != 0;
  Result<std::unique_ptr<ublk::UblkDevice>> dev = make_error(Errc::kNotFound, "");
  // Only a device this graidd made for this VD is ever taken back: the id the state dir records
  // may name another server's device by now (ublk del, then another server took the id).
  const auto ours = [this, dg_id, vd_id](const ublk::DevInfo& info) -> Status {
    GRAID_RETURN_IF_ERROR(ublk_device_may_be_ours(info, ::geteuid()));
    const auto owner =
        ublk_owner_of(info.ublksrv_flags, options_.instance, options_.legacy_instance);
    if (!owner) return make_error(Errc::kBusy, "its owner tag is another server's");
    if (*owner != UblkOwner{dg_id, vd_id})
      return make_error(Errc::kBusy, "it is this graidd's device for vd {} of dg {}", owner->vd_id,
                        owner->dg_id);
    return Status::ok();
  };
  if (dev_id) {
    if (auto info = control_->dev_info(*dev_id); info.is_ok()) {
      if (Status st = ours(*info); !st) {
        // Someone else's now: left alone, and this VD gets a device of its own.
        spdlog::warn("dg {} vd {}: {} is not ours any more ({}): left alone; a new device is made",
                     dg_id, vd_id, ublk::block_device_path(*dev_id), st.message());
        dev_id.reset();
      }
    }
  }
  if (dev_id) {
    // A killed graidd leaves its devices waiting for a server (user recovery): take them back,
    // so applications that had them open never see them go.
    o.recover_only_if = ours;
    dev = ublk::UblkDevice::recover(*control_, thread_call(), array, std::move(handle), *dev_id, o);
    if (dev.is_ok()) {
      spdlog::info("dg {} vd {}: re-attached {} (user recovery)", dg_id, vd_id,
                   (*dev)->info().path);
    } else if (dev.status().code() != Errc::kNotFound) {
      return dev.status();
    } else {
      auto again = array.open_vd(vd_id);
      if (!again.is_ok()) return again.status();
      handle = std::move(*again);
      o.dev_id = *dev_id;
    }
  }
  if (!dev.is_ok())
    dev = ublk::UblkDevice::create(*control_, thread_call(), array, std::move(handle), o);
  if (!dev.is_ok()) return dev.status();
  prepare_threads((*dev)->info().dev_id, (*dev)->info().queues);
  held_.erase((*dev)->info().dev_id);
  devices_[{dg_id, vd_id}] = std::move(*dev);
  return {};
}

std::vector<HeldUblk> UblkExports::discover() {
  const std::vector<std::uint32_t> ids = list_ublk_devices(options_.sys_root);
  if (ids.empty() || !ensure_control()) return held();
  for (const std::uint32_t id : ids) {
    const bool served = std::any_of(devices_.begin(), devices_.end(),
                                    [&](const auto& d) { return d.second->info().dev_id == id; });
    if (served) continue;
    auto info = control_->dev_info(id);
    if (!info.is_ok()) continue;  // deleted meanwhile
    if (!ublk_device_may_be_ours(*info, ::geteuid())) continue;
    const auto owner =
        ublk_owner_of(info->ublksrv_flags, options_.instance, options_.legacy_instance);
    if (!owner) continue;
    // A killed graidd's device stays live until the kernel has torn its rings down.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (info->state == ublk::kStateLive && std::chrono::steady_clock::now() < deadline) {
      const pid_t server = info->ublksrv_pid;
      if (server > 0 && server != ::getpid() && (::kill(server, 0) == 0 || errno == EPERM))
        break;  // a running process serves it
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      auto again = control_->dev_info(id);
      if (!again.is_ok()) break;
      info = std::move(again);
    }
    if (!info.is_ok() || info->state == ublk::kStateLive) {
      held_.erase(id);
      continue;
    }
    held_[id] = HeldUblk{id, owner->dg_id, owner->vd_id, info->state, ublk::block_device_path(id)};
  }
  return held();
}

std::vector<HeldUblk> UblkExports::held() const {
  std::vector<HeldUblk> out;
  for (const auto& [id, h] : held_)
    out.push_back(h);
  return out;
}

Status UblkExports::release(std::uint32_t dev_id, std::chrono::milliseconds timeout) {
  auto it = held_.find(dev_id);
  if (it == held_.end())
    return make_error(Errc::kNotFound, "{} is not held", ublk::block_device_path(dev_id));
  GRAID_RETURN_IF_ERROR(ensure_control());
  // STOP_DEV of a dead device (never started, or stopped before) does nothing.
  Status st = control_->stop_dev(dev_id);
  if (!st && st.code() != Errc::kNotFound) return st;
  it->second.state = ublk::kStateDead;
  st = control_->del_dev(dev_id, timeout);
  if (st || st.code() == Errc::kNotFound) {
    held_.erase(it);
    return {};
  }
  return st;
}

Result<bool> UblkExports::remove(std::uint32_t dg_id, std::uint32_t vd_id) {
  auto it = devices_.find({dg_id, vd_id});
  if (it == devices_.end()) return false;
  Status st = it->second->stop();
  if (!st) {
    spdlog::error("dg {} vd {}: removing {}: {}", dg_id, vd_id, it->second->info().path,
                  st.to_string());
    if (st.code() == Errc::kBusy) return st;  // still in the kernel's hands: keep the object
  }
  const ublk::UblkQueueStats s = it->second->stats();
  spdlog::info(
      "dg {} vd {}: {} removed; it served {} requests ({} committed, {} with an error, {} "
      "on another I/O thread, {} reads and {} writes zero-copy, {} copied instead)",
      dg_id, vd_id, it->second->info().path, s.requests, s.commits, s.errors, s.spread,
      s.zero_copy_reads, s.zero_copy_writes, s.zero_copy_fallbacks);
  devices_.erase(it);
  return true;
}

Result<UblkExports::Removal> UblkExports::remove_if_unused(std::uint32_t dg_id,
                                                           std::uint32_t vd_id) {
  auto it = devices_.find({dg_id, vd_id});
  if (it == devices_.end()) return Removal::kNone;
  if (!it->second->can_try_stop()) return Removal::kCannotTell;
  auto stopped = it->second->try_stop();
  if (stopped.is_ok() && !*stopped) return Removal::kInUse;
  if (!stopped.is_ok() && stopped.status().code() == Errc::kBusy) {
    // Stopping, its queues not finished yet: kept, as remove() keeps it.
    spdlog::error("dg {} vd {}: removing {}: {}", dg_id, vd_id, it->second->info().path,
                  stopped.status().to_string());
    return stopped.status();
  }
  auto gone = remove(dg_id, vd_id);  // stopped (or failed to): remove() finishes, logs, forgets
  if (!gone.is_ok()) return gone.status();
  return Removal::kRemoved;
}

Result<std::optional<bool>> UblkExports::resize(std::uint32_t dg_id, std::uint32_t vd_id,
                                                std::uint64_t bytes) {
  auto it = devices_.find({dg_id, vd_id});
  if (it == devices_.end()) return std::optional<bool>();
  auto live = it->second->resize(bytes);
  if (!live.is_ok()) return live.status();
  return std::optional<bool>(*live);
}

Result<bool> UblkExports::hand_over(std::uint32_t dg_id, std::uint32_t vd_id) {
  auto it = devices_.find({dg_id, vd_id});
  if (it == devices_.end())
    return make_error(Errc::kNotFound, "vd {} of dg {} has no ublk device", vd_id, dg_id);
  auto released = it->second->hand_over();
  if (!released.is_ok()) return released.status();
  // Nothing left to stop: the kernel keeps the device. Queues still holding fetches live on
  // (idle) until the process ends, never freed under the kernel.
  if (!*released) (void)it->second.release();
  devices_.erase(it);
  return *released;
}

void UblkExports::remove_all() {
  while (!devices_.empty()) {
    auto [dg, vd] = devices_.begin()->first;
    auto r = remove(dg, vd);
    // Leave it to the process's exit: the kernel then aborts the device's I/O itself.
    if (!r.is_ok()) abandon(dg, vd);
  }
}

bool UblkExports::abandon(std::uint32_t dg_id, std::uint32_t vd_id) {
  auto it = devices_.find({dg_id, vd_id});
  if (it == devices_.end()) return false;
  (void)it->second.release();  // its queues live on the I/O threads until the process ends
  devices_.erase(it);
  return true;
}

std::vector<UblkExportInfo> UblkExports::list() const {
  std::vector<UblkExportInfo> out;
  for (const auto& [key, dev] : devices_)
    out.push_back({key.first, key.second, dev->info()});
  return out;
}

std::optional<UblkExportInfo> UblkExports::find(std::uint32_t dg_id, std::uint32_t vd_id) const {
  auto it = devices_.find({dg_id, vd_id});
  if (it == devices_.end()) return std::nullopt;
  return UblkExportInfo{dg_id, vd_id, it->second->info()};
}

std::optional<ublk::UblkQueueStats> UblkExports::stats(std::uint32_t dg_id, std::uint32_t vd_id) {
  auto it = devices_.find({dg_id, vd_id});
  if (it == devices_.end()) return std::nullopt;
  return it->second->stats();
}

}  // namespace graid::daemon
