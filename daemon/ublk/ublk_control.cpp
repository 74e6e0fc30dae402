#include "ublk/ublk_control.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace graid::ublk {

struct UblkControl::Ring {
  io_uring ring{};
};

std::string block_device_path(std::uint32_t dev_id) {
  return fmt::format("/dev/ublkb{}", dev_id);
}

std::string char_device_path(std::uint32_t dev_id) {
  return fmt::format("/dev/ublkc{}", dev_id);
}

std::string ublk_unavailable_reason(const std::string& control_path) {
  if (::access(control_path.c_str(), F_OK) != 0)
    return fmt::format(
        "{} does not exist: load the ublk_drv module (modprobe ublk_drv; Linux "
        "6.5 or newer is needed)",
        control_path);
  if (::access(control_path.c_str(), R_OK | W_OK) != 0)
    return fmt::format("{}: {} (graidd must run as root)", control_path, std::strerror(errno));
  return "";
}

std::vector<std::string> flag_names(std::uint64_t flags) {
  // include/uapi/linux/ublk_cmd.h, bits 0-19 (Linux 7.x).
  static constexpr const char* kNames[] = {"ZERO_COPY",
                                           "URING_CMD_COMP_IN_TASK",
                                           "NEED_GET_DATA",
                                           "USER_RECOVERY",
                                           "USER_RECOVERY_REISSUE",
                                           "UNPRIVILEGED_DEV",
                                           "CMD_IOCTL_ENCODE",
                                           "USER_COPY",
                                           "ZONED",
                                           "USER_RECOVERY_FAIL_IO",
                                           "UPDATE_SIZE",
                                           "AUTO_BUF_REG",
                                           "QUIESCE",
                                           "PER_IO_DAEMON",
                                           "BUF_REG_OFF_DAEMON",
                                           "BATCH_IO",
                                           "INTEGRITY",
                                           "SAFE_STOP_DEV",
                                           "NO_AUTO_PART_SCAN",
                                           "SHMEM_ZC"};
  std::vector<std::string> out;
  for (unsigned bit = 0; bit < 64; ++bit) {
    if ((flags & (std::uint64_t{1} << bit)) == 0) continue;
    out.emplace_back(bit < std::size(kNames) ? kNames[bit] : fmt::format("bit {}", bit));
  }
  return out;
}

const char* ctrl_cmd_name(unsigned nr) noexcept {
  switch (nr) {
    case kCmdGetQueueAffinity:
      return "GET_QUEUE_AFFINITY";
    case kCmdGetDevInfo:
      return "GET_DEV_INFO";
    case kCmdAddDev:
      return "ADD_DEV";
    case kCmdDelDev:
      return "DEL_DEV";
    case kCmdStartDev:
      return "START_DEV";
    case kCmdStopDev:
      return "STOP_DEV";
    case kCmdSetParams:
      return "SET_PARAMS";
    case kCmdGetParams:
      return "GET_PARAMS";
    case kCmdStartUserRecovery:
      return "START_USER_RECOVERY";
    case kCmdEndUserRecovery:
      return "END_USER_RECOVERY";
    case kCmdGetFeatures:
      return "GET_FEATURES";
    case kCmdUpdateSize:
      return "UPDATE_SIZE";
    case kCmdQuiesceDev:
      return "QUIESCE_DEV";
    case kCmdTryStopDev:
      return "TRY_STOP_DEV";
    default:
      return "?";
  }
}

Result<std::unique_ptr<UblkControl>> UblkControl::open(const std::string& path) {
  if (auto why = ublk_unavailable_reason(path); !why.empty())
    return make_error(Errc::kNotFound, "ublk is not available: {}", why);
  std::unique_ptr<UblkControl> c(new UblkControl());
  c->path_ = path;
  c->fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (c->fd_ < 0)
    return make_error(Errc::kNotFound, "cannot open {}: {}", path, std::strerror(errno));
  auto ring = std::make_unique<Ring>();
  const int rc = io_uring_queue_init(8, &ring->ring, IORING_SETUP_SQE128);
  if (rc < 0)
    return make_error(Errc::kUnsupported,
                      "the kernel refuses an io_uring with 128-byte SQEs ({}): ublk needs it",
                      std::strerror(-rc));
  c->ring_ = std::move(ring);
  return c;
}

UblkControl::~UblkControl() {
  if (ring_) io_uring_queue_exit(&ring_->ring);
  if (fd_ >= 0) ::close(fd_);
}

Result<int> UblkControl::send(unsigned nr, std::uint32_t dev_id, void* addr, std::uint16_t len,
                              std::uint64_t data0, std::chrono::milliseconds timeout) {
  std::lock_guard lock(mu_);
  io_uring& ring = ring_->ring;
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  if (!sqe) return make_error(Errc::kInternal, "ublk control ring full");
  // A 128-byte SQE: clear all of it; the command goes into the 80-byte area at its tail (the
  // first 48 bytes are the normal SQE).
  std::memset(static_cast<void*>(sqe), 0, 128);
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fd_;
  sqe->cmd_op = ctrl_cmd_op(nr);
  const std::uint64_t tag = ++next_user_data_;
  sqe->user_data = tag;
  CtrlCmd cmd{};
  cmd.dev_id = dev_id;
  cmd.queue_id = 0xffff;
  cmd.len = len;
  cmd.addr = reinterpret_cast<std::uint64_t>(addr);
  cmd.data[0] = data0;
  std::memcpy(reinterpret_cast<std::byte*>(sqe) + 48, &cmd, sizeof(cmd));
  if (int rc = io_uring_submit(&ring); rc < 0)
    return make_error(Errc::kIoError, "ublk {}: submit: {}", ctrl_cmd_name(nr), std::strerror(-rc));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      // Control commands cannot be cancelled: the command stays with the driver and its late
      // completion is skipped by the next command's wait (user_data differs). The caller gets
      // the device in whatever state the command leaves it.
      return make_error(Errc::kBusy, "ublk {} of device {} did not finish in {} ms",
                        ctrl_cmd_name(nr), dev_id, timeout.count());
    }
    __kernel_timespec ts{};
    ts.tv_sec = left.count() / 1000000000;
    ts.tv_nsec = left.count() % 1000000000;
    io_uring_cqe* cqe = nullptr;
    const int rc = io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
    if (rc == -EINTR || rc == -ETIME) continue;
    if (rc < 0)
      return make_error(Errc::kIoError, "ublk {}: wait: {}", ctrl_cmd_name(nr), std::strerror(-rc));
    const std::uint64_t got = cqe->user_data;
    const int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    if (got != tag) continue;  // a timed-out command finishing late
    if (res >= 0) return res;
    const Errc code = res == -ENODEV || res == -ENOENT       ? Errc::kNotFound
                      : res == -EEXIST || res == -EBUSY      ? Errc::kBusy
                      : res == -EINVAL || res == -EOPNOTSUPP ? Errc::kInvalidArgument
                      : res == -EACCES || res == -EPERM      ? Errc::kUnsupported
                                                             : Errc::kIoError;
    return make_error(code, "ublk {} of device {}: {}", ctrl_cmd_name(nr), dev_id,
                      std::strerror(-res));
  }
}

namespace {
constexpr std::chrono::milliseconds kShort{5000};
}  // namespace

std::uint64_t UblkControl::features() {
  std::uint64_t f = 0;
  auto r = send(kCmdGetFeatures, 0, &f, sizeof(f), 0, kShort);
  return r.is_ok() ? f : 0;
}

Result<DevInfo> UblkControl::add_dev(const DevInfo& wanted) {
  DevInfo info = wanted;
  auto r = send(kCmdAddDev, info.dev_id, &info, sizeof(info), 0, kShort);
  if (!r.is_ok()) return r.status();
  return info;
}

Status UblkControl::set_params(std::uint32_t dev_id, const Params& params) {
  Params p = params;
  p.len = sizeof(Params);
  auto r = send(kCmdSetParams, dev_id, &p, sizeof(p), 0, kShort);
  return r.is_ok() ? Status{} : r.status();
}

Result<Params> UblkControl::get_params(std::uint32_t dev_id) {
  Params p{};
  p.len = sizeof(Params);
  auto r = send(kCmdGetParams, dev_id, &p, sizeof(p), 0, kShort);
  if (!r.is_ok()) return r.status();
  return p;
}

Result<DevInfo> UblkControl::dev_info(std::uint32_t dev_id) {
  DevInfo info{};
  auto r = send(kCmdGetDevInfo, dev_id, &info, sizeof(info), 0, kShort);
  if (!r.is_ok()) return r.status();
  return info;
}

Result<cpu_set_t> UblkControl::queue_affinity(std::uint32_t dev_id, std::uint16_t q) {
  cpu_set_t set;
  CPU_ZERO(&set);
  // The queue goes in data[0]; the mask's length must cover every possible CPU.
  auto r = send(kCmdGetQueueAffinity, dev_id, &set, sizeof(set), q, kShort);
  if (!r.is_ok()) return r.status();
  return set;
}

Status UblkControl::start_dev(std::uint32_t dev_id, std::chrono::milliseconds timeout) {
  auto r = send(kCmdStartDev, dev_id, nullptr, 0, static_cast<std::uint64_t>(::getpid()), timeout);
  return r.is_ok() ? Status{} : r.status();
}

Status UblkControl::stop_dev(std::uint32_t dev_id) {
  auto r = send(kCmdStopDev, dev_id, nullptr, 0, 0, std::chrono::milliseconds(60000));
  return r.is_ok() ? Status{} : r.status();
}

Status UblkControl::try_stop_dev(std::uint32_t dev_id) {
  auto r = send(kCmdTryStopDev, dev_id, nullptr, 0, 0, std::chrono::milliseconds(60000));
  return r.is_ok() ? Status{} : r.status();
}

Status UblkControl::update_size(std::uint32_t dev_id, std::uint64_t sectors) {
  auto r = send(kCmdUpdateSize, dev_id, nullptr, 0, sectors, kShort);
  return r.is_ok() ? Status{} : r.status();
}

Status UblkControl::quiesce_dev(std::uint32_t dev_id, std::chrono::milliseconds timeout) {
  // The driver waits up to `timeout` itself (0 would be forever): the command gets a little more.
  auto r = send(kCmdQuiesceDev, dev_id, nullptr, 0, static_cast<std::uint64_t>(timeout.count()),
                timeout + std::chrono::seconds(5));
  return r.is_ok() ? Status{} : r.status();
}

Status UblkControl::del_dev(std::uint32_t dev_id, std::chrono::milliseconds timeout) {
  auto r = send(kCmdDelDev, dev_id, nullptr, 0, 0, timeout);
  return r.is_ok() ? Status{} : r.status();
}

Status UblkControl::start_user_recovery(std::uint32_t dev_id) {
  auto r = send(kCmdStartUserRecovery, dev_id, nullptr, 0, 0, kShort);
  return r.is_ok() ? Status{} : r.status();
}

Status UblkControl::end_user_recovery(std::uint32_t dev_id, std::chrono::milliseconds timeout) {
  auto r = send(kCmdEndUserRecovery, dev_id, nullptr, 0, static_cast<std::uint64_t>(::getpid()),
                timeout);
  return r.is_ok() ? Status{} : r.status();
}

}  // namespace graid::ublk
