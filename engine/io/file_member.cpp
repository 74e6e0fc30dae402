// Members backed by a regular file or a block device, opened O_DIRECT: open_member() and the
// MemberDevice that forwards asynchronous I/O to the thread's IoContext.
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "graid/member.h"
#include "io/member_open.h"
#include "io/merge_limits.h"

namespace graid {

Errc errc_for_errno(int err) {
  switch (err) {
    case ENOENT:
    case ENXIO:
    case ENODEV:
      return Errc::kNotFound;
    case EBUSY:
    case ETXTBSY:
      return Errc::kBusy;
    case ENOSPC:
    case EFBIG:
      return Errc::kNoSpace;
    case EINVAL:
    case EACCES:
    case EPERM:
    case EROFS:
    case EISDIR:
      return Errc::kInvalidArgument;
    default:
      return Errc::kIoError;
  }
}

// Takes the exclusive advisory lock of OpenOptions::lock on `fd` without waiting for it.
Status lock_member_file(int fd, const std::string& path) {
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return Status::ok();
    const int err = errno;
    if (err == EINTR) continue;
    if (err == EWOULDBLOCK) {
      return make_error(Errc::kBusy, "{} is in use (locked by another process)", path);
    }
    if (err == EOPNOTSUPP || err == ENOSYS) {
      return make_error(Errc::kUnsupported,
                        "{}: its filesystem cannot lock files ({}); open it without locking", path,
                        std::strerror(err));
    }
    return make_error(errc_for_errno(err), "lock {}: {}", path, std::strerror(err));
  }
}

namespace {

constexpr std::uint64_t kSector = 512;
// read_sync/write_sync buffers: the largest logical block size O_DIRECT may demand.
constexpr std::uintptr_t kSyncBufferAlign = 4096;

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

class FileMember final : public MemberDevice {
 public:
  FileMember(std::string path, std::uint64_t size, std::shared_ptr<MemberFile> file,
             DeviceIdentity identity, std::uint32_t logical_block)
      : path_(std::move(path)),
        size_(size),
        file_(std::move(file)),
        identity_(identity),
        logical_block_(logical_block) {}

  const std::string& path() const noexcept override { return path_; }
  std::uint64_t size() const noexcept override { return size_; }
  bool direct_io() const noexcept override { return !file_->buffered(); }
  DeviceIdentity identity() const noexcept override { return identity_; }
  std::uint32_t logical_block_size() const noexcept override { return logical_block_; }

  bool reads_zeroes(std::uint64_t offset, std::uint64_t len) override {
    if (identity_.block || len == 0 || offset > size_ || len > size_ - offset) return false;
    // SEEK_DATA finds the first data at or after `offset`; ENXIO means there is none before the
    // end of the file. Filesystems without hole support report all data, which is safe.
    const off_t data = ::lseek(file_->fd(), static_cast<off_t>(offset), SEEK_DATA);
    if (data < 0) return errno == ENXIO;
    return static_cast<std::uint64_t>(data) >= offset + len;
  }

  Status zero_range(std::uint64_t offset, std::uint64_t len) override {
    if (offset > size_ || len > size_ - offset) {
      return make_error(Errc::kOutOfRange, "{}: zero [{}, +{}) beyond its {} bytes", path_, offset,
                        len, size_);
    }
    if (len == 0) return Status::ok();
    if (identity_.block) {
      std::uint64_t range[2] = {offset, len};
      if (::ioctl(file_->fd(), BLKZEROOUT, range) != 0) {
        const int err = errno;
        return make_error(
            err == EOPNOTSUPP || err == ENOTTY ? Errc::kUnsupported : errc_for_errno(err),
            "{}: BLKZEROOUT [{}, +{}): {}", path_, offset, len, std::strerror(err));
      }
      return Status::ok();
    }
    if (::fallocate(file_->fd(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    static_cast<off_t>(offset), static_cast<off_t>(len)) != 0) {
      const int err = errno;
      return make_error(err == EOPNOTSUPP ? Errc::kUnsupported : errc_for_errno(err),
                        "{}: punch hole [{}, +{}): {}", path_, offset, len, std::strerror(err));
    }
    return Status::ok();
  }

  void submit(IoContext& ctx, MemberRequest& req) override {
    if (const std::int32_t err = check(req); err != 0) {
      ctx.complete_later(req, err);
      return;
    }
    ctx.submit_io(file_, req);
  }

  Status read_sync(std::uint64_t offset, std::span<std::byte> buf) override {
    GRAID_RETURN_IF_ERROR(check_sync("read", offset, buf.data(), buf.size()));
    std::size_t done = 0;
    while (done < buf.size()) {
      const ssize_t got = ::pread(file_->fd(), buf.data() + done, buf.size() - done,
                                  static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return io_error("read", offset + done, buf.size() - done, errno);
      if (got == 0) {
        return make_error(Errc::kIoError, "{}: read at offset {}: unexpected end of file", path_,
                          offset + done);
      }
      done += static_cast<std::size_t>(got);
    }
    return Status::ok();
  }

  Status write_sync(std::uint64_t offset, std::span<const std::byte> buf) override {
    GRAID_RETURN_IF_ERROR(check_sync("write", offset, buf.data(), buf.size()));
    std::size_t done = 0;
    while (done < buf.size()) {
      const ssize_t put = ::pwrite(file_->fd(), buf.data() + done, buf.size() - done,
                                   static_cast<off_t>(offset + done));
      if (put < 0 && errno == EINTR) continue;
      if (put < 0) return io_error("write", offset + done, buf.size() - done, errno);
      if (put == 0) {
        return make_error(Errc::kIoError, "{}: write at offset {} made no progress", path_,
                          offset + done);
      }
      done += static_cast<std::size_t>(put);
    }
    return Status::ok();
  }

  Status flush_sync() override {
    // O_DIRECT bypasses the page cache but not the device's write cache or file metadata, so it
    // still needs fdatasync; a buffered member needs the full fsync.
    for (;;) {
      const int ret = file_->buffered() ? ::fsync(file_->fd()) : ::fdatasync(file_->fd());
      if (ret == 0) return Status::ok();
      if (errno != EINTR) {
        return make_error(errc_for_errno(errno), "{}: flush: {}", path_, std::strerror(errno));
      }
    }
  }

 private:
  // -errno for a request that must not reach the kernel, 0 for one that may.
  std::int32_t check(const MemberRequest& req) const noexcept {
    if (req.op == MemberOp::kFlush) return 0;
    if (req.len == 0 || req.len % kSector != 0 || req.offset % kSector != 0) return -EINVAL;
    const bool zeroes = req.op == MemberOp::kDiscard || req.op == MemberOp::kWriteZeroes;
    if (!zeroes && req.buf == nullptr) return -EINVAL;
    if (req.offset > size_ || req.len > size_ - req.offset) return -ERANGE;
    return 0;
  }

  Status check_sync(const char* what, std::uint64_t offset, const void* data,
                    std::size_t len) const {
    if (reinterpret_cast<std::uintptr_t>(data) % kSyncBufferAlign != 0 || len % kSector != 0 ||
        offset % kSector != 0) {
      return make_error(Errc::kInvalidArgument,
                        "{}: {} of {} bytes at offset {}: buffer must be {}-byte aligned and "
                        "offset/length multiples of {}",
                        path_, what, len, offset, kSyncBufferAlign, kSector);
    }
    if (offset > size_ || len > size_ - offset) {
      return make_error(Errc::kOutOfRange, "{}: {} of {} bytes at offset {} beyond its {} bytes",
                        path_, what, len, offset, size_);
    }
    return Status::ok();
  }

  Status io_error(const char* what, std::uint64_t offset, std::size_t len, int err) const {
    return make_error(errc_for_errno(err) == Errc::kNoSpace ? Errc::kNoSpace : Errc::kIoError,
                      "{}: {} of {} bytes at offset {}: {}", path_, what, len, offset,
                      std::strerror(err));
  }

  std::string path_;
  std::uint64_t size_;
  std::shared_ptr<MemberFile> file_;
  DeviceIdentity identity_;
  std::uint32_t logical_block_;
};

// The device's logical block size (see MemberDevice::logical_block_size).
std::uint32_t logical_block_of(int fd, bool is_block) {
  if (is_block) {
    int bytes = 0;
    if (::ioctl(fd, BLKSSZGET, &bytes) == 0 && bytes >= static_cast<int>(kSector)) {
      return static_cast<std::uint32_t>(bytes);
    }
    return kSector;
  }
#ifdef STATX_DIOALIGN
  struct statx sx {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
      (sx.stx_mask & STATX_DIOALIGN) != 0 && sx.stx_dio_offset_align > kSector) {
    return sx.stx_dio_offset_align;
  }
#endif
  return kSector;
}

// Creates `path` with `size` bytes (sparse) unless it exists; losing a race to another creator
// is fine, the caller then opens what is there.
Status create_file(const std::string& path, std::uint64_t size) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return Status::ok();
    return make_error(errc_for_errno(errno), "create {}: {}", path, std::strerror(errno));
  }
  const MemberFile guard(fd, true);  // closes fd on every path
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    return make_error(errc_for_errno(err), "create {}: set size {}: {}", path, size,
                      std::strerror(err));
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<MemberDevice>> open_member(const std::string& path,
                                                  const OpenOptions& options) {
  if (options.create && options.create_size == 0) {
    return make_error(Errc::kInvalidArgument, "create {}: a size is required", path);
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err != ENOENT || !options.create) {
      return make_error(errc_for_errno(err), "{}: {}", path, std::strerror(err));
    }
    GRAID_RETURN_IF_ERROR(create_file(path, options.create_size));
    if (::stat(path.c_str(), &st) != 0) {
      return make_error(errc_for_errno(errno), "{}: {}", path, std::strerror(errno));
    }
  }
  if (S_ISCHR(st.st_mode)) return open_nvme_member(path, st, options);
  const bool is_block = S_ISBLK(st.st_mode);
  if (!is_block && !S_ISREG(st.st_mode)) {
    return make_error(Errc::kInvalidArgument,
                      "{} is {}; a member must be a regular file, a block device or an NVMe "
                      "generic device (/dev/ngXnY)",
                      path, file_kind(st.st_mode));
  }
  const bool grow =
      options.create && !is_block && static_cast<std::uint64_t>(st.st_size) < options.create_size;
  if (options.create && !is_block && static_cast<std::uint64_t>(st.st_size) > options.create_size) {
    return make_error(Errc::kInvalidArgument,
                      "{} exists with {} bytes, more than the {} requested; refusing to shrink it",
                      path, st.st_size, options.create_size);
  }

  int flags = O_RDWR | O_CLOEXEC;
  if (is_block && options.exclusive) flags |= O_EXCL;  // on a block device: an exclusive claim
  bool buffered = !options.direct;
  int fd = ::open(path.c_str(), flags | (buffered ? 0 : O_DIRECT));
  if (fd < 0 && errno == EINVAL && !buffered) {
    // The filesystem has no direct I/O (ramfs, some FUSE and network filesystems).
    fd = ::open(path.c_str(), flags);
    if (fd >= 0) {
      buffered = true;
      fmt::print(stderr,
                 "graid: warning: {}: O_DIRECT refused by its filesystem; using buffered I/O "
                 "(flushes are fsync)\n",
                 path);
    }
  }
  if (fd < 0) {
    const int err = errno;
    if (err == EBUSY && is_block) {
      return make_error(Errc::kBusy,
                        "{}: device in use (mounted, or held by md or another program): {}", path,
                        std::strerror(err));
    }
    return make_error(errc_for_errno(err), "open {}: {}", path, std::strerror(err));
  }
  auto file = std::make_shared<MemberFile>(fd, buffered);

  // fstat the open fd: the path may have been swapped between stat() and open().
  if (::fstat(fd, &st) != 0) {
    return make_error(Errc::kIoError, "fstat {}: {}", path, std::strerror(errno));
  }
  if (S_ISBLK(st.st_mode) != is_block || (!is_block && !S_ISREG(st.st_mode))) {
    return make_error(Errc::kBusy, "{} changed type while being opened", path);
  }
  // Before growing the file: a file someone else holds is not touched.
  if (options.lock && !is_block) GRAID_RETURN_IF_ERROR(lock_member_file(fd, path));
  std::uint64_t size = 0;
  if (is_block) {
    if (::ioctl(fd, BLKGETSIZE64, &size) != 0) {
      return make_error(Errc::kIoError, "{}: BLKGETSIZE64: {}", path, std::strerror(errno));
    }
  } else {
    if (grow) {
      if (::ftruncate(fd, static_cast<off_t>(options.create_size)) != 0) {
        return make_error(errc_for_errno(errno), "{}: grow to {} bytes: {}", path,
                          options.create_size, std::strerror(errno));
      }
      st.st_size = static_cast<off_t>(options.create_size);
    }
    size = static_cast<std::uint64_t>(st.st_size);
  }
  if (size == 0) return make_error(Errc::kInvalidArgument, "{} is empty (0 bytes)", path);
  // A trailing partial sector cannot be read with O_DIRECT; it is not part of the member.
  if (size < kSector) {
    return make_error(Errc::kInvalidArgument, "{} holds only {} bytes; a member needs at least {}",
                      path, size, kSector);
  }
  size -= size % kSector;
  DeviceIdentity identity;
  identity.known = true;
  identity.block = is_block;
  identity.dev = is_block ? st.st_rdev : st.st_dev;
  identity.ino = is_block ? 0 : st.st_ino;
  const std::uint32_t logical_block = buffered ? kSector : logical_block_of(fd, is_block);
  const MergeLimits merge = is_block ? block_merge_limits(st.st_rdev) : kFileMergeLimits;
  file->set_merge_limits(merge.max_bytes, merge.max_segments);
  return std::unique_ptr<MemberDevice>(
      std::make_unique<FileMember>(path, size, std::move(file), identity, logical_block));
}

}  // namespace graid
