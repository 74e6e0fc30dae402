// The NVMe passthrough member: a namespace's generic character device (/dev/ngXnY) driven with
// NVMe commands. Asynchronous I/O goes through the thread's ring as IORING_OP_URING_CMD
// (nvme_io_op.h); the blocking calls (metadata, initialisation) through the NVME_IOCTL_IO_CMD
// ioctl; what the namespace is comes from Identify through NVME_IOCTL_ADMIN_CMD and sysfs.
#include "io/nvme_member.h"

#include <fcntl.h>
#include <linux/nvme_ioctl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

#include "graid/buffer.h"
#include "graid/member.h"
#include "io/member_open.h"
#include "io/nvme_command.h"
#include "io/nvme_identify.h"
#include "io/nvme_io_op.h"
#include "io/nvme_sysfs.h"

namespace graid {
namespace {

// read_sync/write_sync buffers, as for file members.
constexpr std::uintptr_t kSyncBufferAlign = 4096;
// zero_range without Write Zeroes writes zeroes from a buffer this big.
constexpr std::size_t kZeroBufferBytes = 1 << 20;

// An fd closed on every path.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~UniqueFd() { reset(); }
  int get() const noexcept { return fd_; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

Errc errc_for_result(std::int32_t err) {
  switch (-err) {
    case ERANGE:
      return Errc::kOutOfRange;
    case EINVAL:
      return Errc::kInvalidArgument;
    case EOPNOTSUPP:
      return Errc::kUnsupported;
    case ENOSPC:
      return Errc::kNoSpace;
    default:
      return Errc::kIoError;
  }
}

// Identify (admin opcode 06h) into a 4096-byte buffer.
Status identify(int fd, const std::string& path, std::uint32_t cns, std::uint32_t nsid,
                std::span<std::byte> page) {
  nvme_admin_cmd cmd{};
  cmd.opcode = nvme::kAdminIdentify;
  cmd.nsid = nsid;
  cmd.addr = reinterpret_cast<std::uintptr_t>(page.data());
  cmd.data_len = static_cast<std::uint32_t>(page.size());
  cmd.cdw10 = cns;
  const int ret = ::ioctl(fd, NVME_IOCTL_ADMIN_CMD, &cmd);
  if (ret == 0) return Status::ok();
  const char* what = cns == nvme::kCnsNamespace ? "Identify Namespace" : "Identify Controller";
  if (ret > 0) {
    return make_error(Errc::kIoError, "{}: {} failed: {} (NVMe status {:#x})", path, what,
                      nvme::status_name(static_cast<std::uint32_t>(ret)), ret);
  }
  const int err = errno;
  return make_error(err == EACCES || err == EPERM ? Errc::kInvalidArgument : Errc::kIoError,
                    "{}: {}: {}{}", path, what, std::strerror(err),
                    err == EACCES || err == EPERM ? " (NVMe admin commands need root)" : "");
}

// Get Features (admin opcode 0Ah), current value, of `fid` for namespace `nsid`: the
// completion's dword 0.
Result<std::uint32_t> get_feature(int fd, const std::string& path, std::uint32_t fid,
                                  std::uint32_t nsid) {
  nvme_admin_cmd cmd{};
  cmd.opcode = nvme::kAdminGetFeatures;
  cmd.nsid = nsid;
  cmd.cdw10 = fid;  // SEL 0: the current value
  const int ret = ::ioctl(fd, NVME_IOCTL_ADMIN_CMD, &cmd);
  if (ret == 0) return cmd.result;
  if (ret > 0) {
    return make_error(Errc::kIoError, "{}: Get Features {:#x} failed: {} (NVMe status {:#x})", path,
                      fid, nvme::status_name(static_cast<std::uint32_t>(ret)), ret);
  }
  return make_error(Errc::kIoError, "{}: Get Features {:#x}: {}", path, fid, std::strerror(errno));
}

// Whether reads of deallocated blocks fail (DULBE) rather than return what DLFEAT says. Where
// the namespace has the error but its state cannot be read, it is taken as on: graid then never
// deallocates to zero a range, which costs only speed.
bool deallocated_reads_fail(int fd, const std::string& path, std::uint32_t nsid,
                            const nvme::NamespaceInfo& ns) {
  if (!ns.has_deallocated_error()) return false;
  auto value = get_feature(fd, path, nvme::kFeatureErrorRecovery, nsid);
  if (value.is_ok()) return nvme::error_recovery_dulbe(*value);
  fmt::print(stderr,
             "graid: {}; taking the Deallocated or Unwritten Logical Block error as enabled: "
             "ranges are zeroed by Write Zeroes without deallocating\n",
             value.status().message());
  return true;
}

class NvmeMember final : public MemberDevice {
 public:
  NvmeMember(std::string path, std::shared_ptr<MemberFile> file, UniqueFd claim,
             nvme::Limits limits, std::uint64_t size, DeviceIdentity identity)
      : path_(std::move(path)),
        file_(std::move(file)),
        claim_(std::move(claim)),
        limits_(limits),
        size_(size),
        identity_(identity) {}

  const std::string& path() const noexcept override { return path_; }
  std::uint64_t size() const noexcept override { return size_; }
  bool direct_io() const noexcept override { return true; }
  MemberIoMode io_mode() const noexcept override { return MemberIoMode::kPassthrough; }
  std::uint32_t logical_block_size() const noexcept override { return limits_.lba_size(); }
  DeviceIdentity identity() const noexcept override { return identity_; }

  void submit(IoContext& ctx, MemberRequest& req) override {
    if (!ctx.big_sqe() || !ctx.big_cqe()) {
      if (!warned_small_ring_.exchange(true, std::memory_order_relaxed)) {
        fmt::print(stderr,
                   "graid: {}: NVMe passthrough needs an IoContext created with big_sqe and "
                   "big_cqe (SQE128/CQE32); requests on this ring fail with EOPNOTSUPP\n",
                   path_);
      }
      ctx.complete_later(req, -EOPNOTSUPP);
      return;
    }
    if (const std::int32_t err = nvme::check_request(limits_, size_, req); err != 0) {
      ctx.complete_later(req, err);
      return;
    }
    nvme::IoOp::acquire().start_on(ctx, file_, limits_, path_, req);
  }

  Status read_sync(std::uint64_t offset, std::span<std::byte> buf) override {
    GRAID_RETURN_IF_ERROR(check_sync("read", offset, buf.data(), buf.size()));
    return run_sync(MemberOp::kRead, offset, buf.data(), buf.size());
  }

  Status write_sync(std::uint64_t offset, std::span<const std::byte> buf) override {
    GRAID_RETURN_IF_ERROR(check_sync("write", offset, buf.data(), buf.size()));
    // The command only reads the buffer; the ioctl's address field is not const.
    return run_sync(MemberOp::kWrite, offset, const_cast<std::byte*>(buf.data()), buf.size());
  }

  Status flush_sync() override { return run_sync(MemberOp::kFlush, 0, nullptr, 0); }

  Status zero_range(std::uint64_t offset, std::uint64_t len) override {
    if (offset > size_ || len > size_ - offset) {
      return make_error(Errc::kOutOfRange, "{}: zero [{}, +{}) beyond its {} bytes", path_, offset,
                        len, size_);
    }
    if (len == 0) return Status::ok();
    const std::uint64_t lba = limits_.lba_size();
    if (offset % lba != 0 || len % lba != 0) {
      return make_error(Errc::kInvalidArgument, "{}: zero [{}, +{}) is not in whole {}-byte blocks",
                        path_, offset, len, lba);
    }
    // Write Zeroes (deallocating where DLFEAT says deallocated blocks read zeroes and DULBE is
    // off); never a plain deallocate, which a controller may skip.
    if (limits_.write_zeroes()) {
      return run_sync(MemberOp::kDiscard, offset, nullptr, len);
    }
    auto zeroes = AlignedBuffer::allocate(kZeroBufferBytes, kSyncBufferAlign);
    if (!zeroes.is_ok()) return zeroes.status();
    for (std::uint64_t done = 0; done < len;) {
      const std::size_t n =
          static_cast<std::size_t>(std::min<std::uint64_t>(len - done, kZeroBufferBytes));
      GRAID_RETURN_IF_ERROR(run_sync(MemberOp::kWrite, offset + done, zeroes->data(), n));
      done += n;
    }
    return Status::ok();
  }

 private:
  Status check_sync(const char* what, std::uint64_t offset, const void* data,
                    std::size_t len) const {
    const std::uint32_t lba = limits_.lba_size();
    if (reinterpret_cast<std::uintptr_t>(data) % kSyncBufferAlign != 0 || len % lba != 0 ||
        offset % lba != 0) {
      return make_error(Errc::kInvalidArgument,
                        "{}: {} of {} bytes at offset {}: buffer must be {}-byte aligned and "
                        "offset/length multiples of the {}-byte LBA",
                        path_, what, len, offset, kSyncBufferAlign, lba);
    }
    if (offset > size_ || len > size_ - offset) {
      return make_error(Errc::kOutOfRange, "{}: {} of {} bytes at offset {} beyond its {} bytes",
                        path_, what, len, offset, size_);
    }
    return Status::ok();
  }

  // One request's commands, one after another, through NVME_IOCTL_IO_CMD, retried as the
  // asynchronous path retries them.
  Status run_sync(MemberOp op, std::uint64_t offset, std::byte* buf, std::uint64_t len) {
    std::uint64_t done = 0;
    do {
      const auto addr = buf != nullptr ? reinterpret_cast<std::uintptr_t>(buf + done) : 0;
      const std::uint32_t n = nvme::chunk_bytes(limits_, op, addr, len - done);
      nvme::DsmRange range;
      const nvme::Command cmd = nvme::encode(limits_, op, offset + done, n, addr, false, range);
      nvme::RetryState retries;
      for (;;) {
        nvme_passthru_cmd pc;
        nvme::to_passthru_cmd(cmd, pc);
        int ret = ::ioctl(file_->fd(), NVME_IOCTL_IO_CMD, &pc);
        if (ret < 0) ret = -errno;
        if (ret == 0) break;
        const nvme::Outcome outcome = nvme::decode_result(ret);
        if (outcome.err == 0) break;  // success with the More bit
        const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
        if (const auto delay = retries.next(outcome, limits_, now)) {
          // Blocking calls block: metadata and background jobs wait here as the ring's
          // requests wait on their timers.
          std::this_thread::sleep_for(std::chrono::nanoseconds(*delay));
          continue;
        }
        const std::string why =
            ret > 0 ? fmt::format("{} (NVMe status {:#x})",
                                  nvme::status_name(static_cast<std::uint32_t>(ret)), ret)
                    : std::string(std::strerror(-ret));
        return make_error(errc_for_result(outcome.err), "{}: NVMe {} of {} bytes at offset {}: {}",
                          path_,
                          op == MemberOp::kRead    ? "read"
                          : op == MemberOp::kWrite ? "write"
                          : op == MemberOp::kFlush ? "flush"
                                                   : "write zeroes",
                          n, offset + done, why);
      }
      done += n;
    } while (done < len);
    return Status::ok();
  }

  std::string path_;
  std::shared_ptr<MemberFile> file_;
  UniqueFd claim_;  // O_EXCL on the namespace's block device (OpenOptions::exclusive)
  nvme::Limits limits_;
  std::uint64_t size_;
  DeviceIdentity identity_;
  std::atomic<bool> warned_small_ring_{false};
};

// Opens the namespace's block device O_EXCL, the claim OpenOptions::exclusive asks for. An empty
// fd where there is no block device (or no node for it): nothing to claim.
Result<UniqueFd> claim_block_device(const nvme::SysfsRoots& roots, const std::string& path,
                                    const std::string& block_name) {
  if (block_name.empty()) return UniqueFd();
  const std::string node = nvme::device_node(roots, true, block_name);
  if (node.empty()) return UniqueFd();
  UniqueFd fd(::open(node.c_str(), O_RDONLY | O_EXCL | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    if (err == EBUSY) {
      return make_error(Errc::kBusy,
                        "{}: its namespace's block device {} is in use (mounted, or held by md or "
                        "another program)",
                        path, node);
    }
    return make_error(errc_for_errno(err), "{}: claim its block device {}: {}", path, node,
                      std::strerror(err));
  }
  return fd;
}

}  // namespace

Result<std::unique_ptr<MemberDevice>> open_nvme_member(const std::string& path,
                                                       const struct stat& st,
                                                       const OpenOptions& options) {
  const nvme::SysfsRoots roots;
  // Decided from sysfs before opening: opening an arbitrary character device can do things (a
  // watchdog starts counting, a tty becomes a controlling terminal).
  const std::string cls = nvme::char_device_class(roots, st.st_rdev);
  if (cls == "nvme") {
    return make_error(Errc::kInvalidArgument,
                      "{} is an NVMe controller; give one of its namespaces: /dev/ngXnY "
                      "(passthrough) or /dev/nvmeXnY (block)",
                      path);
  }
  if (cls != "nvme-generic") {
    return make_error(Errc::kInvalidArgument,
                      "{} is a character device{} but not an NVMe generic namespace device "
                      "(/dev/ngXnY); a member must be a regular file, a block device or /dev/ngXnY",
                      path, cls.empty() ? "" : fmt::format(" (class {})", cls));
  }
  const int raw = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (raw < 0) {
    const int err = errno;
    return make_error(errc_for_errno(err), "open {}: {}", path, std::strerror(err));
  }
  auto file = std::make_shared<MemberFile>(raw, /*buffered=*/false);
  struct stat now {};
  if (::fstat(raw, &now) != 0) {
    return make_error(Errc::kIoError, "fstat {}: {}", path, std::strerror(errno));
  }
  if (!S_ISCHR(now.st_mode) || now.st_rdev != st.st_rdev) {
    return make_error(Errc::kBusy, "{} changed while being opened", path);
  }
  if (options.lock) GRAID_RETURN_IF_ERROR(lock_member_file(raw, path));

  const int nsid = ::ioctl(raw, NVME_IOCTL_ID);
  if (nsid <= 0) {
    return make_error(Errc::kInvalidArgument, "{}: NVME_IOCTL_ID: {}; not an NVMe namespace", path,
                      nsid < 0 ? std::strerror(errno) : "namespace id 0");
  }
  auto page = AlignedBuffer::allocate(nvme::kIdentifyBytes, kSyncBufferAlign);
  if (!page.is_ok()) return page.status();
  GRAID_RETURN_IF_ERROR(
      identify(raw, path, nvme::kCnsNamespace, static_cast<std::uint32_t>(nsid), page->span()));
  auto ns = nvme::parse_identify_namespace(page->span(), path);
  if (!ns.is_ok()) return ns.status();
  ns->dulbe = deallocated_reads_fail(raw, path, static_cast<std::uint32_t>(nsid), *ns);
  GRAID_RETURN_IF_ERROR(identify(raw, path, nvme::kCnsController, 0, page->span()));
  const nvme::ControllerInfo ctrl = nvme::parse_identify_controller(page->span());

  const std::string name = nvme::device_name(roots, false, st.st_rdev);
  const std::string block = name.empty() ? std::string() : nvme::block_sibling(roots, name);
  const nvme::QueueLimits queue =
      block.empty() ? nvme::QueueLimits{} : nvme::read_queue_limits(roots, block);
  const nvme::Limits limits =
      nvme::derive_limits(static_cast<std::uint32_t>(nsid), *ns, ctrl, queue);
  if (ns->blocks > (UINT64_MAX >> limits.lba_shift)) {
    return make_error(Errc::kUnsupported, "{}: {} blocks overflow a byte count", path, ns->blocks);
  }

  UniqueFd claim;
  if (options.exclusive) {
    auto claimed = claim_block_device(roots, path, block);
    if (!claimed.is_ok()) return claimed.status();
    claim = std::move(*claimed);
  }
  DeviceIdentity identity;
  identity.known = true;
  identity.block = false;
  identity.dev = st.st_rdev;
  return std::unique_ptr<MemberDevice>(std::make_unique<NvmeMember>(
      path, std::move(file), std::move(claim), limits, ns->blocks << limits.lba_shift, identity));
}

std::unique_ptr<MemberDevice> make_nvme_member_for_testing(std::string path,
                                                           std::shared_ptr<MemberFile> file,
                                                           const nvme::Limits& limits,
                                                           std::uint64_t size) {
  return std::make_unique<NvmeMember>(std::move(path), std::move(file), UniqueFd(), limits, size,
                                      DeviceIdentity{});
}

Result<std::string> nvme_sibling_path(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return make_error(Errc::kInvalidArgument, "{}: {}", path, std::strerror(errno));
  }
  const nvme::SysfsRoots roots;
  const bool block = S_ISBLK(st.st_mode);
  if (!block && !S_ISCHR(st.st_mode)) {
    return make_error(Errc::kNotFound, "{} is not a device, so it has no NVMe sibling node", path);
  }
  const std::string name = nvme::device_name(roots, block, st.st_rdev);
  std::string other;
  if (block) {
    other = nvme::generic_sibling(roots, name);
  } else if (nvme::char_device_class(roots, st.st_rdev) == "nvme-generic") {
    other = nvme::block_sibling(roots, name);
  }
  const std::string node = other.empty() ? std::string() : nvme::device_node(roots, !block, other);
  if (node.empty()) {
    return make_error(Errc::kNotFound, "{}{} has no NVMe {} device node", path,
                      name.empty() ? "" : fmt::format(" ({})", name),
                      block ? "generic character (/dev/ngXnY)" : "block (/dev/nvmeXnY)");
  }
  return node;
}

}  // namespace graid
