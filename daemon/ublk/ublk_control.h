// /dev/ublk-control: adding, configuring, starting, stopping and deleting ublk devices, and user
// recovery. Each command is an IORING_OP_URING_CMD on a small ring of this object's own (the
// commands are 32 bytes: the ring has 128-byte SQEs), sent and waited for synchronously.
//
// START_DEV and END_USER_RECOVERY complete only once every tag of every queue has been fetched,
// so they are sent from the control thread while the I/O threads fetch; every command waits at
// most `timeout` and is cancelled after it (the device is then left for the caller to delete).
// Never call this from a thread that serves a ublk queue: STOP_DEV waits for its I/O.
#pragma once

#include <sched.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "graid/status.h"
#include "ublk/ublk_uapi.h"

namespace graid::ublk {

inline constexpr const char* kControlPath = "/dev/ublk-control";

// "/dev/ublkbN" and "/dev/ublkcN".
std::string block_device_path(std::uint32_t dev_id);
std::string char_device_path(std::uint32_t dev_id);

// Why ublk cannot be used on this machine ("" when it can): no /dev/ublk-control (ublk_drv not
// loaded, or a kernel without it), or no permission.
std::string ublk_unavailable_reason(const std::string& control_path = kControlPath);

// The driver commands for a device that is up (taking it down, resizing it): UblkControl's in
// graidd, a fake's in tests.
class UblkStopCommands {
 public:
  // UPDATE_SIZE (kFlagUpdateSize, 6.16+): the started device's capacity becomes `sectors`.
  virtual Status update_size(std::uint32_t dev_id, std::uint64_t sectors) = 0;
  // QUIESCE_DEV (kFlagQuiesce, 6.16+): new requests wait, the server's fetches are cancelled;
  // kBusy when a queue had no idle tag within `timeout`.
  virtual Status quiesce_dev(std::uint32_t dev_id, std::chrono::milliseconds timeout) = 0;
  virtual Status stop_dev(std::uint32_t dev_id) = 0;
  // TRY_STOP_DEV (kFlagSafeStopDev): as STOP_DEV, but kBusy, changing nothing, while the block
  // device has an opener (a mount, a holder, a process).
  virtual Status try_stop_dev(std::uint32_t dev_id) = 0;
  virtual Status del_dev(std::uint32_t dev_id, std::chrono::milliseconds timeout) = 0;

 protected:
  ~UblkStopCommands() = default;
};

class UblkControl final : public UblkStopCommands {
 public:
  // Opens the control device and sets up the ring. kNotFound when it does not exist (the reason
  // says how to get it), kUnsupported when the kernel refuses a 128-byte-SQE ring.
  static Result<std::unique_ptr<UblkControl>> open(const std::string& path = kControlPath);
  ~UblkControl();
  UblkControl(const UblkControl&) = delete;
  UblkControl& operator=(const UblkControl&) = delete;

  // The flags the driver offers (GET_FEATURES, 6.5+); 0 when the kernel is older.
  std::uint64_t features();

  // ADD_DEV: `wanted` with dev_id (UINT32_MAX: any free id), queues, depth, max_io_buf_bytes and
  // flags filled in. Returns what the kernel made of it (read back: it clamps queues and masks
  // flags it does not know), or kBusy when the id is taken.
  Result<DevInfo> add_dev(const DevInfo& wanted);
  Status set_params(std::uint32_t dev_id, const Params& params);
  Result<Params> get_params(std::uint32_t dev_id);
  Result<DevInfo> dev_info(std::uint32_t dev_id);
  // CPUs of queue `q` (GET_QUEUE_AFFINITY).
  Result<cpu_set_t> queue_affinity(std::uint32_t dev_id, std::uint16_t q);
  // Blocks until every tag is fetched (see above).
  Status start_dev(std::uint32_t dev_id, std::chrono::milliseconds timeout);
  Status stop_dev(std::uint32_t dev_id) override;
  Status try_stop_dev(std::uint32_t dev_id) override;
  Status update_size(std::uint32_t dev_id, std::uint64_t sectors) override;
  Status quiesce_dev(std::uint32_t dev_id, std::chrono::milliseconds timeout) override;
  // Waits until nothing holds /dev/ublkcN any more: close it everywhere first.
  Status del_dev(std::uint32_t dev_id, std::chrono::milliseconds timeout) override;
  Status start_user_recovery(std::uint32_t dev_id);
  Status end_user_recovery(std::uint32_t dev_id, std::chrono::milliseconds timeout);

 private:
  UblkControl() = default;
  // Sends command `nr` for `dev_id` with `addr`/`len` and the inline data; returns the CQE's
  // result (>= 0) or a Status naming the command.
  Result<int> send(unsigned nr, std::uint32_t dev_id, void* addr, std::uint16_t len,
                   std::uint64_t data0, std::chrono::milliseconds timeout);

  struct Ring;
  std::mutex mu_;
  std::unique_ptr<Ring> ring_;
  int fd_ = -1;
  std::uint64_t next_user_data_ = 0;
  std::string path_;
};

// The name of a ublk control command, for messages ("ADD_DEV").
const char* ctrl_cmd_name(unsigned nr) noexcept;
// The names of the UBLK_F_* bits set in `flags` ("USER_RECOVERY", ...; "bit N" for a bit newer
// than this list), in bit order: describe controller and describe vd show them.
std::vector<std::string> flag_names(std::uint64_t flags);

}  // namespace graid::ublk
