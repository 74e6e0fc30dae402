// The ublk exports graidd serves: one ublk block device (/dev/ublkbN) per exported VD, queue i of
// every device on I/O thread i (docs/ublk.md). Owns the control device, opened at the first
// export (so loading ublk_drv after graidd started works), and readies the I/O threads for ublk
// then: PR_SET_IO_FLUSHER (their I/O must not wait on memory reclaim that writes to this very
// device), each pinned to its queue's CPUs where asked (UblkExportOptions::pin_to_queue), the
// process's OOM score at -1000.
//
// Called from the control thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graid/array.h"
#include "graidd/io_threads.h"
#include "ublk/ublk_device.h"

namespace graid::daemon {

struct UblkExportOptions {
  std::uint32_t depth = 128;                   // per queue, at most
  std::uint64_t memory_budget = 256ull << 20;  // per-tag buffers per device (copy mode)
  // Who copies request data (graidd --ublk-copy): chosen per device from the driver's features
  // and the VD's level (ublk::choose_copy, docs/ublk.md).
  ublk::CopyMode copy = ublk::CopyMode::kAuto;
  // Pin I/O thread i to the CPUs of ublk queue i (graidd --ublk-affinity queue). Off by default:
  // where every queue maps to one CPU, a lone submitter then shares its CPU with the thread that
  // serves it while the others idle (docs/ublk.md, "Threads and CPUs").
  bool pin_to_queue = false;
  // Each queue served by every I/O thread: its tags split over them where the driver has
  // PER_IO_DAEMON, else helper lanes (graidd --ublk-spread on; UblkDeviceOptions::spread). Off by
  // default: slower where the CPUs are few (docs/ublk.md).
  bool spread = false;
  // Serve each queue with BATCH_IO's per-queue commands where the driver has them (7.0+;
  // graidd --ublk-batch on, ublk_batch_queue.h); elsewhere a command per tag.
  bool batch = false;
  std::string control_path = ublk::kControlPath;
  std::string sys_root = "/sys";  // where the ublk devices are listed (class ublk-char)
  // This graidd's instance id (graidd/ublk_owner.h): every device it adds carries it, and a
  // device is recovered or discovered only when its tag carries it (or the previous build's tag
  // carries `legacy_instance`, the state dir's path hash) and graidd's user made it.
  std::uint32_t instance = 0;
  std::uint16_t legacy_instance = 0;
};

// A device of this graidd's that it does not serve (discover()): left by a graidd that was
// killed, either never recorded in the state dir or for a drive group that cannot run now.
struct HeldUblk {
  std::uint32_t dev_id = 0;
  std::uint32_t dg_id = 0, vd_id = 0;  // from its owner tag
  std::uint16_t state = 0;             // ublk::kStateDead, kStateQuiesced
  std::string path;                    // /dev/ublkbN
};

// "dead" (never started, or stopped and not yet deleted), "quiesced" (its I/O waits for a
// server), "live".
const char* ublk_state_name(std::uint16_t state) noexcept;

struct UblkExportInfo {
  std::uint32_t dg_id = 0, vd_id = 0;
  ublk::UblkDeviceInfo device;
};

class UblkExports {
 public:
  UblkExports(IoThreads& threads, UblkExportOptions options)
      : threads_(threads), options_(std::move(options)) {}
  // Removes every device first.
  ~UblkExports();
  UblkExports(const UblkExports&) = delete;
  UblkExports& operator=(const UblkExports&) = delete;

  // Why ublk devices cannot be made here ("" when they can).
  std::string unavailable() const;
  // This graidd's instance id (UblkExportOptions::instance), once read from its state dir:
  // before any device is added or discovered.
  void set_instance(std::uint32_t instance) noexcept { options_.instance = instance; }

  // Serves `handle` (an open VD of `array`) as a ublk device. `dev_id`: the device it had before
  // a restart: re-attached if a killed graidd left it waiting (user recovery), else asked for
  // again so the path stays the same. kBusy when the VD already has a ublk export.
  Status add(std::uint32_t dg_id, std::uint32_t vd_id, Array& array, VdHandle handle,
             std::optional<std::uint32_t> dev_id);
  // Removes the VD's device (I/O in flight is finished first). False when it had none; an error
  // when the kernel would not let go of it.
  Result<bool> remove(std::uint32_t dg_id, std::uint32_t vd_id);
  // remove(), but only if nobody has the device open, which the kernel tells exactly where it
  // offers TRY_STOP_DEV (7.0+, kFlagSafeStopDev): kInUse then, changing nothing. kCannotTell on
  // older kernels (nothing done: the caller decides, from block_device_users()); kNone when the
  // VD has no ublk device; errors as remove().
  enum class Removal : std::uint8_t { kRemoved, kInUse, kCannotTell, kNone };
  Result<Removal> remove_if_unused(std::uint32_t dg_id, std::uint32_t vd_id);
  // What the driver offers (GET_FEATURES; 0 before 6.5), opening the control device if need
  // be; nullopt where this machine has no ublk.
  std::optional<std::uint64_t> features() const;
  // Whether the driver offers TRY_STOP_DEV (after the control device was opened).
  bool safe_stop() const noexcept { return (features_ & ublk::kFlagSafeStopDev) != 0; }
  // The VD grew to `bytes`: its device follows live where the kernel can (UPDATE_SIZE, 6.16+;
  // true), else keeps its size until the VD is exported again (false). nullopt when the VD has
  // no ublk device; errors as UblkDevice::resize().
  Result<std::optional<bool>> resize(std::uint32_t dg_id, std::uint32_t vd_id, std::uint64_t bytes);
  // Leaves the VD's device, in use at SIGTERM, to the next graidd without failing a request
  // (UblkDevice::hand_over: QUIESCE_DEV, 6.16+) and forgets it; the VD's array is then free to
  // stop. True when graidd let go of the device entirely; false when its queues (idle, getting
  // nothing more) and /dev/ublkcN stay until the process ends, which must then end as
  // Registry::devices_left() says. kUnsupported where the kernel cannot (then abandon());
  // kNotFound without a device; other errors as hand_over() (the device is kept: abandon() it).
  Result<bool> hand_over(std::uint32_t dg_id, std::uint32_t vd_id);
  void remove_all();
  // Leaves the VD's device to the kernel as it is (in use at SIGTERM, or one whose removal
  // failed): no STOP_DEV, its queues serve until the process exits, and then the kernel quiesces
  // the device and holds its I/O for the next graidd, which takes it back (user recovery, as after
  // a kill). Its array must outlive the process's I/O threads (Registry::shutdown). Logs nothing
  // (the caller says why). False when the VD has no ublk export.
  bool abandon(std::uint32_t dg_id, std::uint32_t vd_id);
  // Every device, in (dg, vd) order.
  std::vector<UblkExportInfo> list() const;

  // Lists the ublk devices the kernel has and keeps, as held, those carrying this graidd's tag
  // that it does not serve. A device still live whose server has exited (the kernel tears a
  // killed daemon's rings down after it is gone) is waited for, up to 10 s, until it is
  // quiesced; one live under a running process is not ours to take. add() with a held device's
  // id takes it back. Returns what is held now.
  std::vector<HeldUblk> discover();
  // The held devices, in device id order.
  std::vector<HeldUblk> held() const;
  // Removes held device `dev_id`: STOP_DEV (the I/O waiting on it fails), then DEL_DEV, which
  // the kernel finishes once nobody holds the device (a mounted filesystem keeps it until it is
  // unmounted): kBusy after `timeout`, the device stopped and still held. kNotFound when it is
  // not held.
  Status release(std::uint32_t dev_id, std::chrono::milliseconds timeout);

  std::optional<UblkExportInfo> find(std::uint32_t dg_id, std::uint32_t vd_id) const;
  // The device's request counters; nullopt when the VD has no ublk export.
  std::optional<ublk::UblkQueueStats> stats(std::uint32_t dg_id, std::uint32_t vd_id);

 private:
  Status ensure_control() const;
  void prepare_threads(std::uint32_t dev_id, std::uint16_t queues);
  ublk::ThreadCall thread_call();

  using Key = std::pair<std::uint32_t, std::uint32_t>;
  IoThreads& threads_;
  UblkExportOptions options_;
  mutable std::unique_ptr<ublk::UblkControl> control_;  // opened at first need
  std::map<Key, std::unique_ptr<ublk::UblkDevice>> devices_;
  std::map<std::uint32_t, HeldUblk> held_;  // by device id
  bool threads_prepared_ = false;
  mutable std::uint64_t features_ = 0;  // what GET_FEATURES offered
};

}  // namespace graid::daemon
