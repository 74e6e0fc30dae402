#include "member_files.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "graid/buffer.h"
#include "interrupt.h"
#include "units.h"

namespace graid::bench {

namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

Status check_directory(const std::string& dir, std::uint64_t needed) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return make_error(Errc::kInvalidArgument, "--dir {}: {}", dir, errno_text(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return make_error(Errc::kInvalidArgument, "--dir {}: not a directory", dir);
  }
  // Probe with a real O_DIRECT file: access(W_OK) says nothing about O_DIRECT support, and both
  // the raw baseline and the members need it.
  const std::string probe = dir + "/.graid-bench-probe-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_RDWR | O_CREAT | O_EXCL | O_DIRECT, 0600);
  if (fd < 0) {
    const int err = errno;
    if (err == EINVAL) {
      return make_error(Errc::kUnsupported,
                        "--dir {}: the filesystem refuses O_DIRECT; use a tmpfs (e.g. /dev/shm) "
                        "or a local filesystem such as ext4 or xfs",
                        dir);
    }
    return make_error(Errc::kInvalidArgument, "--dir {}: cannot create files there: {}", dir,
                      errno_text(err));
  }
  ::close(fd);
  ::unlink(probe.c_str());

  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) == 0) {
    const std::uint64_t avail = std::uint64_t{vfs.f_bavail} * vfs.f_frsize;
    if (avail < needed) {
      return make_error(Errc::kNoSpace,
                        "--dir {}: the members need {} but only {} is free; lower "
                        "--member-size or --members",
                        dir, format_bytes(needed), format_bytes(avail));
    }
  }
  return Status::ok();
}

bool is_tmpfs(int fd) {
  struct statfs fs {};
  return ::fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

// Makes every byte of the file real and zero. On tmpfs fallocate allocates (zeroed) pages, which
// is all we want and much cheaper than writing; elsewhere fallocate only reserves unwritten
// extents that read back as holes without touching the disk, so zeros are written for real.
Status allocate_zeroed(int fd, const std::string& path, std::uint64_t size) {
  if (is_tmpfs(fd) && ::fallocate(fd, 0, 0, static_cast<off_t>(size)) == 0) return Status::ok();
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  auto zeros = AlignedBuffer::allocate(kChunk, 4096);
  if (!zeros.is_ok()) return zeros.status();
  for (std::uint64_t off = 0; off < size;) {
    if (interrupted()) return make_error(Errc::kBusy, "interrupted while writing {}", path);
    const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, size - off));
    const ssize_t n = ::pwrite(fd, zeros->data(), len, static_cast<off_t>(off));
    if (n <= 0) {
      return make_error(Errc::kIoError, "{}: writing zeros at {}: {}", path, off,
                        n < 0 ? errno_text(errno) : "no progress");
    }
    off += static_cast<std::uint64_t>(n);
  }
  return Status::ok();
}

Result<std::uint64_t> device_size(const std::string& path) {
  const int raw = ::open(path.c_str(), O_RDWR | O_DIRECT);
  if (raw < 0) {
    return make_error(Errc::kInvalidArgument, "--member {}: cannot open with O_DIRECT: {}", path,
                      errno_text(errno));
  }
  Fd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return make_error(Errc::kIoError, "--member {}: {}", path, errno_text(errno));
  }
  if (S_ISREG(st.st_mode)) return static_cast<std::uint64_t>(st.st_size);
  if (S_ISBLK(st.st_mode)) {
    std::uint64_t bytes = 0;
    if (::ioctl(fd.get(), BLKGETSIZE64, &bytes) != 0) {
      return make_error(Errc::kIoError, "--member {}: cannot read the device size: {}", path,
                        errno_text(errno));
    }
    return bytes;
  }
  return make_error(Errc::kInvalidArgument, "--member {}: not a regular file or block device",
                    path);
}

}  // namespace

Result<MemberSet> MemberSet::create_in_dir(const std::string& dir, std::uint32_t count,
                                           std::uint64_t size, bool keep) {
  GRAID_RETURN_IF_ERROR(check_directory(dir, size * count));
  MemberSet set;  // removes what it created if we fail half-way, --keep or not
  set.member_bytes_ = size;
  for (std::uint32_t i = 0; i < count; ++i) {
    std::string path = dir + "/member-" + std::to_string(i) + ".img";
    const int raw = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (raw < 0) {
      const int err = errno;
      if (err == EEXIST) {
        return make_error(Errc::kBusy,
                          "{} already exists (left by a run with --keep?); remove it, or pass the "
                          "files with --member",
                          path);
      }
      return make_error(Errc::kIoError, "cannot create {}: {}", path, errno_text(err));
    }
    Fd fd(raw);
    set.created_.push_back(path);  // from here on the set removes it, whatever happens next
    if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
      return make_error(Errc::kIoError, "{}: cannot size to {} bytes: {}", path, size,
                        errno_text(errno));
    }
    GRAID_RETURN_IF_ERROR(allocate_zeroed(fd.get(), path, size));
    set.paths_.push_back(std::move(path));
  }
  set.keep_ = keep;
  return set;
}

Result<MemberSet> MemberSet::use_existing(const std::vector<std::string>& paths,
                                          std::uint64_t size) {
  MemberSet set;
  std::uint64_t smallest = ~std::uint64_t{0};
  for (const std::string& path : paths) {
    auto bytes = device_size(path);
    if (!bytes.is_ok()) return bytes.status();
    if (size > *bytes) {
      return make_error(Errc::kNoSpace, "--member {}: holds {} bytes, less than --member-size {}",
                        path, *bytes, format_size(size));
    }
    smallest = std::min(smallest, *bytes);
    set.paths_.push_back(path);
  }
  set.member_bytes_ = size > 0 ? size : smallest;
  return set;
}

MemberSet::MemberSet(MemberSet&& other) noexcept
    : paths_(std::move(other.paths_)),
      created_(std::exchange(other.created_, {})),
      member_bytes_(other.member_bytes_),
      keep_(other.keep_) {}

MemberSet& MemberSet::operator=(MemberSet&& other) noexcept {
  if (this != &other) {
    remove_created();
    paths_ = std::move(other.paths_);
    created_ = std::exchange(other.created_, {});
    member_bytes_ = other.member_bytes_;
    keep_ = other.keep_;
  }
  return *this;
}

MemberSet::~MemberSet() {
  remove_created();
}

void MemberSet::remove_created() noexcept {
  if (!keep_) {
    for (const std::string& path : created_)
      ::unlink(path.c_str());
  }
  created_.clear();
}

}  // namespace graid::bench
