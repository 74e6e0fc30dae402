#include "graidd/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace graid::daemon {

Status write_all(int fd, std::string_view text, std::string_view what) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return make_error(Errc::kIoError, "write {}: {}", what, std::strerror(n < 0 ? errno : EIO));
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return Status::ok();
}

Status fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return make_error(Errc::kIoError, "open {}: {}", dir, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return make_error(Errc::kIoError, "fsync {}: {}", dir, std::strerror(err));
  return Status::ok();
}

Status replace_file(const std::string& dir, const std::string& path, std::string_view text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return make_error(Errc::kIoError, "open {}: {}", tmp, std::strerror(errno));
  Status st = write_all(fd, text, tmp);
  if (st && ::fsync(fd) != 0)
    st = make_error(Errc::kIoError, "fsync {}: {}", tmp, std::strerror(errno));
  ::close(fd);
  GRAID_RETURN_IF_ERROR(st);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return make_error(Errc::kIoError, "rename {} to {}: {}", tmp, path, std::strerror(errno));
  return fsync_directory(dir);
}

}  // namespace graid::daemon
