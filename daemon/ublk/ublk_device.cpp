#include "ublk/ublk_device.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "ublk/ublk_batch_queue.h"
#include "ublk/ublk_kernel_batch.h"
#include "ublk/ublk_kernel_queue.h"

namespace graid::ublk {

namespace {

constexpr std::uint32_t kAnyId = 0xffffffffu;

UblkShape shape_of(const Array& array, const VdInfo& vd) {
  const Geometry& g = array.geometry();
  UblkShape s;
  s.size_bytes = vd.size;
  s.logical_block = array.logical_block_size();
  s.strip_bytes = g.strip_bytes();
  s.data_strips = g.data_strips();
  s.striped = g.level() == RaidLevel::kRaid0 || g.level() == RaidLevel::kRaid10;
  s.discard = array.supports_discard();
  s.write_zeroes = array.supports_write_zeroes();
  return s;
}

}  // namespace

Status UblkDevice::open_char_device() {
  // devtmpfs creates the node as the device is added; udev may still be fixing its mode. Give it
  // a second.
  const std::string path = char_device_path(info_.dev_id);
  for (int i = 0; i < 100; ++i) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      ublkc_ = std::make_shared<MemberFile>(fd, /*buffered=*/false);
      return {};
    }
    if (errno != ENOENT && errno != EACCES)
      return make_error(Errc::kIoError, "cannot open {}: {}", path, std::strerror(errno));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return make_error(Errc::kNotFound, "{} did not appear", path);
}

DataPath data_path_of(std::uint64_t flags) noexcept {
  if ((flags & kFlagUserCopy) == 0) return DataPath::kKernelCopy;
  constexpr std::uint64_t kZero = kFlagZeroCopy | kFlagAutoBufReg;
  return (flags & kZero) == kZero ? DataPath::kZeroCopy : DataPath::kUserCopy;
}

std::vector<QueuePart> plan_queue_parts(std::uint16_t queues, std::uint16_t depth,
                                        std::uint32_t threads, bool split) {
  threads = std::max<std::uint32_t>(1, threads);
  const auto parts = static_cast<std::uint16_t>(
      split ? std::min<std::uint32_t>(threads, std::max<std::uint16_t>(depth, 1)) : 1);
  std::vector<QueuePart> plan;
  plan.reserve(std::size_t{queues} * parts);
  for (std::uint16_t q = 0; q < queues; ++q)
    for (std::uint16_t p = 0; p < parts; ++p)
      plan.push_back({q, TagSet{p, parts}, (q + p) % threads});
  return plan;
}

VdInfo UblkDevice::served_vd() const {
  VdInfo v = vd_.info();
  v.size = info_.size_bytes;
  return v;
}

Status UblkDevice::start_queues(std::uint16_t queues, std::uint16_t depth, std::uint32_t max_io,
                                DataPath path) {
  // Split by tag where any task may serve any tag; else helper lanes, where asked.
  info_.batch = (info_.flags & kFlagBatchIo) != 0;
  const bool split =
      spread_ && threads_ > 1 && (info_.flags & kFlagPerIoDaemon) != 0 && !info_.batch;
  const bool lanes = spread_ && threads_ > 1 && !split;
  const std::vector<QueuePart> parts = plan_queue_parts(queues, depth, threads_, split);
  info_.spread = split ? "tags" : lanes ? "helper" : "off";
  queues_.resize(parts.size());
  helpers_.resize(parts.size());
  homes_.resize(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const QueuePart& part = parts[i];
    homes_[i] = part.thread;
    Status st;
    call_(part.thread, [&](IoContext& ctx) {
      std::unique_ptr<QueueTransport> transport;
      if (info_.batch) {
        auto driver = KernelBatchDriver::create(ctx, ublkc_, part.q_id, depth);
        if (!driver.is_ok()) {
          st = driver.status();
          return;
        }
        transport = std::make_unique<BatchQueueTransport>(ctx, std::move(*driver), depth, path);
      } else {
        auto per_tag = KernelQueueTransport::create(ctx, ublkc_, part.q_id, depth);
        if (!per_tag.is_ok()) {
          st = per_tag.status();
          return;
        }
        transport = std::move(*per_tag);
      }
      auto queue = UblkQueue::create(ctx, array_, served_vd(), part.q_id, depth, max_io,
                                     std::move(transport), path, part.tags);
      if (!queue.is_ok()) {
        st = queue.status();
        return;
      }
      queues_[i] = std::move(*queue);
      queues_[i]->set_away(part.tags.first != 0);
    });
    if (!st) return st;
    // The next thread helps (UblkQueue: requests of odd stripes go there while it is busy).
    if (lanes) {
      call_(helper_thread(i), [&](IoContext& ctx) {
        auto lane = HelperLane::create(ctx, array_, queues_[i]->registered_regions());
        if (!lane.is_ok()) {
          st = lane.status();
          return;
        }
        helpers_[i] = std::move(*lane);
      });
      if (!st) {
        // Never started: nothing to drain.
        call_(part.thread, [&](IoContext&) { queues_[i].reset(); });
        return st;
      }
    }
    call_(part.thread, [&](IoContext&) {
      if (helpers_[i]) queues_[i]->set_helper(*helpers_[i]);
      queues_[i]->start();
    });
  }
  return {};
}

Result<std::unique_ptr<UblkDevice>> UblkDevice::create(UblkControl& control, ThreadCall call,
                                                       Array& array, VdHandle vd,
                                                       const UblkDeviceOptions& options) {
  if (!vd) return make_error(Errc::kInvalidArgument, "no VD to export");
  auto plan = plan_ublk(shape_of(array, vd.info()), options.limits);
  if (!plan.is_ok()) return plan.status();
  std::unique_ptr<UblkDevice> dev(new UblkDevice(control, std::move(call), array, std::move(vd)));
  dev->threads_ = std::max<std::uint32_t>(1, options.threads);
  dev->spread_ = options.spread;
  dev->drain_timeout_ = options.drain_timeout;

  DevInfo wanted{};
  wanted.nr_hw_queues = plan->queues;
  wanted.queue_depth = plan->depth;
  wanted.max_io_buf_bytes = plan->max_io_bytes;
  wanted.dev_id = options.dev_id;
  wanted.ublksrv_pid = ::getpid();
  wanted.ublksrv_flags = options.server_flags;
  wanted.flags =
      kFlagUserRecovery | kFlagUserRecoveryReissue | kFlagCmdIoctlEncode |
      (options.limits.user_copy ? kFlagUserCopy : 0) |
      (options.limits.user_copy && options.zero_copy ? kFlagZeroCopy | kFlagAutoBufReg : 0) |
      (options.safe_stop ? kFlagSafeStopDev : 0) | (options.update_size ? kFlagUpdateSize : 0) |
      (options.quiesce ? kFlagQuiesce : 0) | (options.batch ? kFlagBatchIo : 0);
  auto added = control.add_dev(wanted);
  if (!added.is_ok() && added.status().code() == Errc::kBusy && options.dev_id != kAnyId) {
    wanted.dev_id = kAnyId;  // the old id is taken: any will do
    added = control.add_dev(wanted);
  }
  if (!added.is_ok()) return added.status();
  dev->added_ = true;
  // Never trust what was asked: the kernel clamps the queue count to its CPUs and drops flags it
  // does not know.
  dev->info_.dev_id = added->dev_id;
  dev->info_.path = block_device_path(added->dev_id);
  dev->info_.queues = added->nr_hw_queues;
  dev->info_.depth = added->queue_depth;
  dev->info_.max_io_bytes = std::min(added->max_io_buf_bytes, plan->max_io_bytes);
  dev->info_.flags = added->flags;
  dev->info_.size_bytes = dev->vd_.info().size;
  dev->info_.user_copy = (added->flags & kFlagUserCopy) != 0;
  dev->info_.data_path = data_path_of(added->flags);
  if (options.limits.user_copy && !dev->info_.user_copy) {
    // The driver dropped USER_COPY: start over in copy mode, within the budget.
    (void)control.del_dev(dev->info_.dev_id, std::chrono::seconds(5));
    dev->added_ = false;
    UblkDeviceOptions copy_mode = options;
    copy_mode.limits.user_copy = false;
    copy_mode.zero_copy = false;
    copy_mode.dev_id = dev->info_.dev_id;
    return create(control, dev->call_, array, std::move(dev->vd_), copy_mode);
  }
  dev->info_.buffer_bytes = dev->info_.user_copy ? 0
                                                 : std::uint64_t{dev->info_.queues} *
                                                       dev->info_.depth * dev->info_.max_io_bytes;
  Params params = plan->params;
  params.basic.max_sectors = dev->info_.max_io_bytes >> 9;
  if (params.types & kParamDiscard) {
    if (params.discard.max_discard_sectors)
      params.discard.max_discard_sectors = params.basic.max_sectors;
    if (params.discard.max_write_zeroes_sectors)
      params.discard.max_write_zeroes_sectors = params.basic.max_sectors;
  }

  Status st = dev->open_char_device();
  if (st) st = control.set_params(dev->info_.dev_id, params);
  if (st)
    st = dev->start_queues(dev->info_.queues, dev->info_.depth, dev->info_.max_io_bytes,
                           dev->info_.data_path);
  if (st) st = control.start_dev(dev->info_.dev_id, options.start_timeout);
  if (!st) {
    (void)dev->stop();
    return st;
  }
  return dev;
}

Result<std::unique_ptr<UblkDevice>> UblkDevice::recover(UblkControl& control, ThreadCall call,
                                                        Array& array, VdHandle vd,
                                                        std::uint32_t dev_id,
                                                        const UblkDeviceOptions& options) {
  if (!vd) return make_error(Errc::kInvalidArgument, "no VD to export");
  auto info = control.dev_info(dev_id);
  if (!info.is_ok()) return info.status();
  if (options.recover_only_if) {
    if (Status ours = options.recover_only_if(*info); !ours)
      return make_error(Errc::kBusy, "{} is not ours to take back: {}", block_device_path(dev_id),
                        ours.message());
  }
  if (info->state == kStateLive)
    return make_error(Errc::kBusy, "{} is live, served by process {}", block_device_path(dev_id),
                      info->ublksrv_pid);
  if (info->state != kStateQuiesced || !(info->flags & kFlagUserRecovery))
    return make_error(Errc::kNotFound, "{} is not waiting for recovery (state {})",
                      block_device_path(dev_id), info->state);
  auto params = control.get_params(dev_id);
  if (!params.is_ok()) return params.status();
  // Smaller than the VD when the VD grew while exported on a kernel that could not follow
  // (resize()): served at the device's size, as before.
  const std::uint64_t device_bytes = params->basic.dev_sectors << 9;
  if (device_bytes == 0 || device_bytes > vd.info().size)
    return make_error(Errc::kInvalidArgument, "{} has {} sectors, the VD {}",
                      block_device_path(dev_id), params->basic.dev_sectors, vd.info().size >> 9);
  std::unique_ptr<UblkDevice> dev(new UblkDevice(control, std::move(call), array, std::move(vd)));
  dev->threads_ = std::max<std::uint32_t>(1, options.threads);
  dev->spread_ = options.spread;
  dev->drain_timeout_ = options.drain_timeout;
  dev->info_.dev_id = dev_id;
  dev->info_.path = block_device_path(dev_id);
  dev->info_.queues = info->nr_hw_queues;
  dev->info_.depth = info->queue_depth;
  dev->info_.max_io_bytes = info->max_io_buf_bytes;
  dev->info_.flags = info->flags;
  dev->info_.size_bytes = device_bytes;
  dev->info_.user_copy = (info->flags & kFlagUserCopy) != 0;  // as the device was made
  dev->info_.data_path = data_path_of(info->flags);
  dev->info_.buffer_bytes = dev->info_.user_copy ? 0
                                                 : std::uint64_t{dev->info_.queues} *
                                                       dev->info_.depth * dev->info_.max_io_bytes;
  dev->info_.recovered = true;
  // The killed daemon's rings and /dev/ublkcN are released by the kernel after its exit, not at
  // once: START_USER_RECOVERY says EBUSY until then.
  Status st;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  for (;;) {
    st = control.start_user_recovery(dev_id);
    if (st || st.code() != Errc::kBusy || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!st) return st;
  dev->added_ = true;
  st = dev->open_char_device();
  if (st)
    st = dev->start_queues(dev->info_.queues, dev->info_.depth, dev->info_.max_io_bytes,
                           dev->info_.data_path);
  if (st) st = control.end_user_recovery(dev_id, options.start_timeout);
  if (!st) {
    (void)dev->stop();
    return st;
  }
  return dev;
}

std::unique_ptr<UblkDevice> UblkDevice::adopt(UblkStopCommands& commands, ThreadCall call,
                                              Array& array, VdHandle vd, std::uint32_t dev_id,
                                              std::vector<std::unique_ptr<UblkQueue>> queues,
                                              std::uint32_t threads,
                                              std::chrono::milliseconds drain_timeout,
                                              std::uint64_t flags,
                                              std::vector<std::uint32_t> homes) {
  std::unique_ptr<UblkDevice> dev(new UblkDevice(commands, std::move(call), array, std::move(vd)));
  dev->threads_ = std::max<std::uint32_t>(1, threads);
  dev->drain_timeout_ = drain_timeout;
  dev->info_.dev_id = dev_id;
  dev->info_.path = block_device_path(dev_id);
  dev->info_.queues = static_cast<std::uint16_t>(queues.size());
  dev->info_.flags = flags;
  dev->info_.size_bytes = dev->vd_.info().size;
  dev->helpers_.resize(queues.size());
  dev->homes_ = std::move(homes);
  for (std::size_t i = dev->homes_.size(); i < queues.size(); ++i)
    dev->homes_.push_back(static_cast<std::uint32_t>(i % dev->threads_));
  dev->queues_ = std::move(queues);
  dev->added_ = true;
  return dev;
}

UblkDevice::~UblkDevice() {
  const bool parked = handed_over_ && added_;  // handed over with fetches still pending
  if (parked ? drain_queues(std::chrono::milliseconds(0)).is_ok() : stop().is_ok()) {
    if (parked) release_char_device();  // every queue finished meanwhile
    return;
  }
  // A queue the kernel never released would be freed under it: keep it (and its memory, and its
  // helper lane) for the life of the process instead, and say so.
  std::uint32_t stuck = 0;
  for (std::size_t q = 0; q < queues_.size(); ++q)
    if (queues_[q]) {
      ++stuck;
      (void)queues_[q].release();  // deliberately leaked, see above
      if (helpers_[q]) (void)helpers_[q].release();
    }
  if (stuck != 0 && !parked)
    spdlog::error("{}: {} queue(s) never finished; left in place until graidd exits", info_.path,
                  stuck);
}

Status UblkDevice::drain_queues(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool left = false;
    for (std::size_t q = 0; q < queues_.size(); ++q) {
      if (!queues_[q]) continue;
      const std::uint32_t home = homes_[q];
      bool finished = false;
      call_(home, [&](IoContext&) { finished = queues_[q]->finished(); });
      if (finished) {
        // A finished queue has no request on its helper lane. The lane goes first: it has the
        // queue's buffers registered in its ring.
        if (helpers_[q]) call_(helper_thread(q), [&](IoContext&) { helpers_[q].reset(); });
        call_(home, [&](IoContext&) {
          retired_ += queues_[q]->stats();
          queues_[q].reset();
        });
      }
      left = left || queues_[q] != nullptr;
    }
    if (!left) return {};
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::uint32_t stuck = 0;
  for (const auto& q : queues_)
    stuck += q != nullptr ? 1 : 0;
  return make_error(Errc::kBusy,
                    "{}: {} queue(s) still had requests {} ms after STOP_DEV; the device stays "
                    "until they finish (try again)",
                    info_.path, stuck, timeout.count());
}

void UblkDevice::release_char_device() {
  ublkc_.reset();
  // Each thread's ring drops its registration of /dev/ublkcN at its next poll: make every
  // thread poll (twice: the first call may run before the drop), so DEL_DEV does not wait for it.
  for (int round = 0; round < 2; ++round)
    for (std::uint32_t t = 0; t < threads_; ++t)
      call_(t, [](IoContext&) {});
}

Status UblkDevice::stop() {
  if (!added_ || handed_over_) return {};
  // STOP_DEV drains the device's in-flight I/O (the queues keep serving meanwhile) and then
  // aborts every outstanding fetch, which is what finishes the queues. Sent once: a retry after
  // a drain timeout only waits for the queues again.
  if (!stop_sent_) {
    stop_sent_ = true;
    stop_result_ = control_.stop_dev(info_.dev_id);
  }
  // Until every queue has finished, the device and its queues stay as they are (kBusy).
  if (Status st = drain_queues(drain_timeout_); !st) return st;
  release_char_device();
  Status result = stop_result_;
  if (Status st = control_.del_dev(info_.dev_id, std::chrono::seconds(10)); !st && result)
    result = st;
  added_ = false;
  return result;
}

Result<bool> UblkDevice::resize(std::uint64_t bytes) {
  if (!added_ || stop_sent_ || quiesce_sent_)
    return make_error(Errc::kUnsupported, "{} is being stopped: it cannot change size", info_.path);
  GRAID_RETURN_IF_ERROR(vd_.refresh());
  if (bytes < info_.size_bytes || bytes > vd_.info().size || bytes % 512 != 0)
    return make_error(Errc::kInvalidArgument, "{}: cannot go from {} to {} bytes (the VD has {})",
                      info_.path, info_.size_bytes, bytes, vd_.info().size);
  if (!can_resize()) return false;
  if (bytes == info_.size_bytes) return true;
  // The queues first: the kernel sends nothing past the old end until UPDATE_SIZE returns.
  for (std::size_t q = 0; q < queues_.size(); ++q) {
    if (!queues_[q]) continue;
    call_(homes_[q], [&](IoContext&) { queues_[q]->set_vd_size(bytes); });
    if (helpers_[q])
      call_(helper_thread(q), [&](IoContext&) { queues_[q]->set_helper_vd_size(bytes); });
  }
  if (Status st = control_.update_size(info_.dev_id, bytes >> 9); !st) return st;
  info_.size_bytes = bytes;
  return true;
}

Result<bool> UblkDevice::wait_quiet(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool all_finished = true, quiet = true;
    for (std::size_t q = 0; q < queues_.size(); ++q) {
      if (!queues_[q]) continue;
      call_(homes_[q], [&](IoContext&) {
        const UblkQueue& queue = *queues_[q];
        all_finished = all_finished && queue.finished();
        quiet = quiet && queue.quiet();
      });
    }
    if (all_finished) return true;
    if (quiet) return false;
    if (std::chrono::steady_clock::now() > deadline)
      return make_error(Errc::kBusy, "{}: a queue still served a request {} ms after QUIESCE_DEV",
                        info_.path, timeout.count());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Result<bool> UblkDevice::hand_over() {
  if (handed_over_) return !added_;
  if (!added_ || stop_sent_)
    return make_error(Errc::kUnsupported, "{} is being stopped: it cannot be handed over",
                      info_.path);
  if (!can_hand_over())
    return make_error(Errc::kUnsupported, "{}: the kernel cannot quiesce it (QUIESCE_DEV is 6.16+)",
                      info_.path);
  if (!quiesce_sent_) {
    GRAID_RETURN_IF_ERROR(control_.quiesce_dev(info_.dev_id, std::chrono::seconds(10)));
    quiesce_sent_ = true;
  }
  auto finished = wait_quiet(drain_timeout_);
  if (!finished.is_ok()) return finished.status();
  handed_over_ = true;
  if (!*finished) {
    // Kept, with /dev/ublkcN, until the fetches still pending are cancelled (the process's
    // end); the array is let go now, so that it can stop.
    for (std::size_t q = 0; q < queues_.size(); ++q) {
      if (!queues_[q]) continue;
      call_(homes_[q], [&](IoContext&) { queues_[q]->detach_array(); });
      if (helpers_[q]) call_(helper_thread(q), [&](IoContext&) { helpers_[q].reset(); });
    }
    return false;
  }
  GRAID_RETURN_IF_ERROR(drain_queues(drain_timeout_));  // all finished: destroyed here
  release_char_device();
  added_ = false;  // the kernel keeps it for the next graidd
  return true;
}

Result<bool> UblkDevice::try_stop() {
  if (added_ && !stop_sent_) {
    if (!can_try_stop())
      return make_error(Errc::kUnsupported, "{}: the kernel cannot stop it only if unused",
                        info_.path);
    Status st = control_.try_stop_dev(info_.dev_id);
    if (st.code() == Errc::kBusy) return false;  // open: nothing changed
    if (!st) return st;                          // not stopped: the caller may still stop() it
    stop_sent_ = true;
    stop_result_ = st;
  }
  GRAID_RETURN_IF_ERROR(stop());
  return true;
}

UblkQueueStats UblkDevice::stats() {
  UblkQueueStats sum = retired_;
  for (std::size_t q = 0; q < queues_.size(); ++q) {
    if (!queues_[q]) continue;
    call_(homes_[q], [&](IoContext&) {
      if (!queues_[q]) return;
      sum += queues_[q]->stats();
    });
  }
  return sum;
}

}  // namespace graid::ublk
