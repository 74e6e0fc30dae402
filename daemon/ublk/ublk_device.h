// One VD served as a ublk block device (/dev/ublkbN): the device's life on the control side
// (ADD_DEV, SET_PARAMS, START_DEV; STOP_DEV, DEL_DEV; user recovery) and its queues, queue i
// living on I/O thread i (modulo the thread count), or, split by tag where the driver has
// PER_IO_DAEMON and spreading is asked for, over every thread (plan_queue_parts()).
//
//   create():  ADD_DEV (flags read back) ─► open /dev/ublkcN ─► SET_PARAMS ─► queues fetch on
//              their threads ─► START_DEV (returns once every tag is fetched) ─► live
//   recover(): the device survived a killed graidd (USER_RECOVERY: QUIESCED, I/O waiting) ─►
//              START_USER_RECOVERY ─► open, queues fetch ─► END_USER_RECOVERY ─► live; the
//              requests the dead daemon held are reissued (REISSUE) and served again
//   stop():    STOP_DEV (the kernel drains in-flight I/O, which the queues keep serving, then
//              aborts every fetch) ─► queues finish and are destroyed on their threads ─► every
//              reference to /dev/ublkcN dropped (fd, mapping, ring registration) ─► DEL_DEV
//
// Called from the control thread only (never from an I/O thread: START_DEV and STOP_DEV wait
// for the I/O threads).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graid/array.h"
#include "graid/member.h"
#include "graid/status.h"
#include "ublk/ublk_control.h"
#include "ublk/ublk_params.h"
#include "ublk/ublk_queue.h"

namespace graid::ublk {

// Runs fn on I/O thread `thread` and waits for it (graidd's IoThreads::call).
using ThreadCall =
    std::function<void(std::uint32_t thread, const std::function<void(IoContext&)>& fn)>;

struct UblkDeviceOptions {
  std::uint32_t dev_id = 0xffffffffu;  // the id wanted (a restart asks for the old one); any
  UblkLimits limits;                   // queues = the I/O thread count
  std::uint32_t threads = 1;           // I/O threads to spread queues over
  // With more than one thread, so that one application thread's I/O is not all served by one
  // thread: where the driver has PER_IO_DAEMON (6.16+), each queue's tags are split over the
  // threads (plan_queue_parts()); elsewhere each queue has a helper lane on the next thread and
  // hands it part of its requests while busy (ublk_queue.h), a hand-off between threads per
  // request moved.
  bool spread = false;
  // USER_COPY (6.5+): graid copies request data itself (buffers only for requests being
  // served); false: the driver copies into per-tag buffers (copy mode). limits.user_copy must
  // agree. Falls back to copy mode where the driver refuses it.
  std::chrono::milliseconds start_timeout{10000};
  // Written into the device info's ublksrv_flags, which the driver keeps for the server and
  // never interprets: graidd's owner tag (graidd/ublk_owner.h).
  std::uint64_t server_flags = 0;
  // The driver offers TRY_STOP_DEV (GET_FEATURES has kFlagSafeStopDev): ask for it.
  bool safe_stop = false;
  // The driver offers UPDATE_SIZE (kFlagUpdateSize): ask for it, so resize() works live.
  bool update_size = false;
  // The driver offers QUIESCE_DEV (kFlagQuiesce): ask for it, so hand_over() works.
  bool quiesce = false;
  // Zero copy (the driver offers AUTO_BUF_REG, 6.16+): ask for ZERO_COPY and AUTO_BUF_REG on top
  // of USER_COPY (limits.user_copy must be true), so READs go straight into the requests' pages
  // (ublk_queue.h). Where the driver grants USER_COPY alone, the device serves as USER_COPY.
  bool zero_copy = false;
  // The driver offers BATCH_IO (7.0+; GET_FEATURES has kFlagBatchIo) and graidd was asked to use
  // it (--ublk-batch on): each queue is served with per-queue batch commands
  // (ublk_batch_queue.h). The driver then clears PER_IO_DAEMON: spreading uses helper lanes.
  bool batch = false;
  // stop(): how long the queues get to finish after STOP_DEV before it answers kBusy.
  std::chrono::milliseconds drain_timeout{30000};
  // recover(): whether the device is the caller's to take back (graidd: its owner tag, and its
  // user made it). Asked of the device info recover() reads, so that a device another server
  // took the id of meanwhile is never recovered. Empty: any device.
  std::function<Status(const DevInfo&)> recover_only_if;
};

struct UblkDeviceInfo {
  std::uint32_t dev_id = 0;
  std::string path;  // /dev/ublkbN
  std::uint16_t queues = 0, depth = 0;
  std::uint32_t max_io_bytes = 0;
  std::uint64_t flags = 0;  // as the kernel granted them
  std::uint64_t buffer_bytes = 0;
  // What the kernel's device holds: the VD's size, or less after the VD grew on a kernel that
  // cannot resize a live device (resize()), until it is exported again.
  std::uint64_t size_bytes = 0;
  bool recovered = false;                      // re-attached after a killed daemon
  bool user_copy = false;                      // USER_COPY (else copy mode); also with zero copy
  DataPath data_path = DataPath::kKernelCopy;  // as the granted flags make it
  // How a queue's requests reach more than one thread (UblkDeviceOptions::spread): "off",
  // "helper" (helper lanes) or "tags" (each queue's tags split over the threads).
  std::string spread = "off";
  bool batch = false;  // served with BATCH_IO commands (the granted flags have kFlagBatchIo)
};

// What the flags a device was granted make of its data path.
DataPath data_path_of(std::uint64_t flags) noexcept;

// Which tags of which queue one UblkQueue serves, on which I/O thread.
struct QueuePart {
  std::uint16_t q_id = 0;
  TagSet tags;
  std::uint32_t thread = 0;
};
// The parts of a device's `queues` queues of `depth` tags over `threads` threads: one per queue,
// queue q on thread q % threads; or, `split`, min(threads, depth) per queue, part p holding the
// tags t with t % parts == p, on thread (q + p) % threads (consecutive tags on different threads:
// the driver hands them out in turn, so a burst of requests lands on every thread).
std::vector<QueuePart> plan_queue_parts(std::uint16_t queues, std::uint16_t depth,
                                        std::uint32_t threads, bool split);

class UblkDevice {
 public:
  // A new device for `vd` of `array` (see above). On failure everything made is undone.
  static Result<std::unique_ptr<UblkDevice>> create(UblkControl& control, ThreadCall call,
                                                    Array& array, VdHandle vd,
                                                    const UblkDeviceOptions& options);
  // Re-attaches device `dev_id`, left QUIESCED by a killed graidd, to `vd`. kNotFound when it
  // does not exist, kBusy when it is live (another server has it) or not the caller's
  // (options.recover_only_if says why), kInvalidArgument when its size is not the VD's.
  static Result<std::unique_ptr<UblkDevice>> recover(UblkControl& control, ThreadCall call,
                                                     Array& array, VdHandle vd,
                                                     std::uint32_t dev_id,
                                                     const UblkDeviceOptions& options);
  // Tests: a device made of queues the caller started on its own (fake) driver, as create()
  // leaves one; stop() sends its commands to `commands`. Queue i is served on thread
  // homes[i], or i % threads where `homes` is empty.
  static std::unique_ptr<UblkDevice> adopt(UblkStopCommands& commands, ThreadCall call,
                                           Array& array, VdHandle vd, std::uint32_t dev_id,
                                           std::vector<std::unique_ptr<UblkQueue>> queues,
                                           std::uint32_t threads,
                                           std::chrono::milliseconds drain_timeout,
                                           std::uint64_t flags = 0,
                                           std::vector<std::uint32_t> homes = {});
  // stop() if not done. Queues that still have not finished then are left alive for the life of
  // the process (with their memory), never freed under the kernel.
  ~UblkDevice();
  UblkDevice(const UblkDevice&) = delete;
  UblkDevice& operator=(const UblkDevice&) = delete;

  // Removes the device (see above): STOP_DEV once, then waits up to the drain timeout for every
  // queue to finish, then DEL_DEV. kBusy, with the queues and the device kept as they are, while
  // a queue has not finished; a later stop() waits again and finishes the job. Ok once removed,
  // and from then on.
  Status stop();
  // stop(), but only while nobody has the block device open (TRY_STOP_DEV): false, changing
  // nothing, while someone has; true once removed; kUnsupported when the device was made
  // without kFlagSafeStopDev (the kernel cannot tell). Once the device is stopping, as stop().
  Result<bool> try_stop();
  bool can_try_stop() const noexcept { return (info_.flags & kFlagSafeStopDev) != 0; }
  // The VD grew to `bytes`: where the device was made with kFlagUpdateSize, every queue serves
  // up to the new size, then UPDATE_SIZE tells the kernel (which tells the device's users, as
  // for any disk that changed size), and true. False, changing nothing, where it cannot (the
  // kernel has no UPDATE_SIZE: the new size applies when the VD is exported again).
  // kInvalidArgument for a smaller size or one past the VD; kUnsupported once stopping.
  Result<bool> resize(std::uint64_t bytes);
  bool can_resize() const noexcept { return (info_.flags & kFlagUpdateSize) != 0; }
  // Leaves the device to the next graidd without failing a request (a restart under a mounted
  // filesystem): QUIESCE_DEV (new requests wait in the kernel; the fetches pending then are
  // cancelled), then waits until no queue serves a request. The driver cancels only the fetches
  // pending when it quiesces: a request served then is committed and its tag fetched again, and
  // that fetch stays until /dev/ublkcN is closed. So: every tag cancelled -> the queues are
  // destroyed, /dev/ublkcN let go, true; some tags fetched again -> the queues are kept (never
  // freed; they get nothing more) and the file stays open until the process ends, false. Either
  // way no STOP_DEV or DEL_DEV, now or later: the device stays, QUIESCED once graidd has let go,
  // for recover(), and nothing of the VD's array is in use any more (it may stop clean).
  // kUnsupported without kFlagQuiesce (nothing sent); kBusy, changing nothing more, when a
  // queue still served a request after the drain timeout.
  Result<bool> hand_over();
  bool can_hand_over() const noexcept { return (info_.flags & kFlagQuiesce) != 0; }
  // True once hand_over() left the device to the next graidd.
  bool handed_over() const noexcept { return handed_over_; }
  // True once stop() has removed the device.
  bool removed() const noexcept { return !added_; }

  const UblkDeviceInfo& info() const noexcept { return info_; }
  const VdInfo& vd() const noexcept { return vd_.info(); }
  // Sum of the queues' counters (reads each queue on its thread); after stop(), their totals.
  UblkQueueStats stats();

 private:
  UblkDevice(UblkStopCommands& control, ThreadCall call, Array& array, VdHandle vd)
      : control_(control), call_(std::move(call)), array_(array), vd_(std::move(vd)) {}
  Status open_char_device();
  Status start_queues(std::uint16_t queues, std::uint16_t depth, std::uint32_t max_io,
                      DataPath path);
  // The thread of queues_[i]'s helper lane.
  std::uint32_t helper_thread(std::size_t i) const noexcept { return (homes_[i] + 1) % threads_; }
  // The VD as the queues serve it: its size is the device's (info_.size_bytes).
  VdInfo served_vd() const;
  // Waits until every queue has finished, then destroys them on their threads.
  Status drain_queues(std::chrono::milliseconds timeout);
  // Waits until no queue serves a request; true when every queue has finished.
  Result<bool> wait_quiet(std::chrono::milliseconds timeout);
  void release_char_device();

  UblkStopCommands& control_;
  ThreadCall call_;
  Array& array_;
  VdHandle vd_;
  UblkDeviceInfo info_;
  std::uint32_t threads_ = 1;
  std::shared_ptr<MemberFile> ublkc_;
  // The queues' parts (plan_queue_parts()): queues_[i] lives on thread homes_[i].
  std::vector<std::unique_ptr<UblkQueue>> queues_;
  std::vector<std::uint32_t> homes_;
  std::vector<std::unique_ptr<HelperLane>> helpers_;  // queues_[i]'s, on (homes_[i] + 1) % threads_
  bool spread_ = false;
  UblkQueueStats retired_;     // the counters of the queues destroyed so far
  bool added_ = false;         // the kernel has the device (DEL_DEV owed)
  bool stop_sent_ = false;     // STOP_DEV was sent (stop() waits for the queues)
  bool quiesce_sent_ = false;  // QUIESCE_DEV was sent (hand_over() waits for the queues)
  bool handed_over_ = false;   // left QUIESCED for the next graidd: nothing more to do
  Status stop_result_;         // what STOP_DEV answered
  std::chrono::milliseconds drain_timeout_{30000};
};

}  // namespace graid::ublk
