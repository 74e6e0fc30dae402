#include "graidd/block_device_users.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace graid::daemon {
namespace {

namespace fs = std::filesystem;

// How many processes an answer names before "and N more".
constexpr std::size_t kMaxProcessesNamed = 8;

// The same file as `target`: a device node by type and number, anything else by inode.
bool same_file(const struct stat& a, const struct stat& target) {
  const auto type = target.st_mode & S_IFMT;
  if ((a.st_mode & S_IFMT) != type) return false;
  if (type == S_IFBLK || type == S_IFCHR) return a.st_rdev == target.st_rdev;
  return a.st_dev == target.st_dev && a.st_ino == target.st_ino;
}

// mountinfo and /proc/swaps write a space, tab, newline or backslash in a path as \ooo.
std::string unescape_octal(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
        s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

struct Mount {
  std::string point, fstype;
};

// mountinfo: "36 35 98:0 /root /mnt/point rw,noatime master:1 - ext4 /dev/x rw" (proc(5)).
std::vector<Mount> mounts_of(const struct stat& target, const DeviceUsersRoots& roots) {
  std::vector<Mount> out;
  if ((target.st_mode & S_IFMT) != S_IFBLK) return out;
  std::ifstream in(roots.proc + "/self/mountinfo");
  const std::string want = fmt::format("{}:{}", major(target.st_rdev), minor(target.st_rdev));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    if (!(fields >> id >> parent >> dev >> root >> point) || dev != want) continue;
    std::string word, fstype;
    while (fields >> word && word != "-") {
    }
    fields >> fstype;
    out.push_back({unescape_octal(point), fstype});
  }
  return out;
}

void find_mounts(const struct stat& target, const DeviceUsersRoots& roots,
                 std::vector<std::string>& out) {
  for (const Mount& m : mounts_of(target, roots))
    out.push_back(fmt::format("mounted at {}{}", m.point,
                              m.fstype.empty() ? "" : fmt::format(" ({})", m.fstype)));
}

// /proc/swaps: "Filename Type Size Used Priority", then one line per swap area.
void find_swap(const struct stat& target, const DeviceUsersRoots& roots,
               std::vector<std::string>& out) {
  std::ifstream in(roots.proc + "/swaps");
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    if (!(fields >> name)) continue;
    struct stat st {};
    if (::stat(unescape_octal(name).c_str(), &st) == 0 && same_file(st, target))
      out.push_back("used as swap");
  }
}

// /sys/dev/block/M:m/holders/: the devices stacked on it (device-mapper, md).
void find_holders(const struct stat& target, const DeviceUsersRoots& roots,
                  std::vector<std::string>& out) {
  if ((target.st_mode & S_IFMT) != S_IFBLK) return;
  const fs::path dir = fmt::format("{}/dev/block/{}:{}/holders", roots.sys, major(target.st_rdev),
                                   minor(target.st_rdev));
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(fmt::format("held by {}", it->path().filename().string()));
}

// Every /proc/<pid>/fd/<n> that is the device (stat follows the link to the open file).
void find_processes(const struct stat& target, const DeviceUsersRoots& roots,
                    std::vector<std::string>& out) {
  std::error_code ec;
  std::size_t found = 0;
  for (fs::directory_iterator p(roots.proc, ec), end; !ec && p != end; p.increment(ec)) {
    const std::string pid = p->path().filename().string();
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    bool open = false;
    std::error_code fd_ec;
    for (fs::directory_iterator f(p->path() / "fd", fd_ec); !fd_ec && f != end && !open;
         f.increment(fd_ec)) {
      struct stat st {};
      open = ::stat(f->path().c_str(), &st) == 0 && same_file(st, target);
    }
    if (!open) continue;
    if (++found > kMaxProcessesNamed) continue;
    std::string comm;
    std::ifstream(p->path() / "comm") >> comm;
    out.push_back(comm.empty() ? fmt::format("open in pid {}", pid)
                               : fmt::format("open in pid {} ({})", pid, comm));
  }
  if (found > kMaxProcessesNamed)
    out.push_back(fmt::format("and open in {} more processes", found - kMaxProcessesNamed));
}

}  // namespace

Result<std::vector<std::string>> block_device_users(const std::string& path,
                                                    const DeviceUsersRoots& roots) {
  struct stat target {};
  if (::stat(path.c_str(), &target) != 0)
    return make_error(Errc::kNotFound, "cannot look at {}: {}", path, std::strerror(errno));
  return device_users(target, path, roots);
}

Status sync_block_device(const std::string& path, bool mounts, const DeviceUsersRoots& roots) {
  Status first;
  auto note = [&](std::string_view step, const std::string& what) {
    const int err = errno;
    if (first) first = make_error(Errc::kIoError, "{} {}: {}", step, what, std::strerror(err));
  };
  if (mounts) {
    struct stat target {};
    const auto mounted =
        ::stat(path.c_str(), &target) == 0 ? mounts_of(target, roots) : std::vector<Mount>{};
    for (const Mount& m : mounted) {
      const int fd = ::open(m.point.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0 || ::syncfs(fd) != 0) note("syncfs", m.point);
      if (fd >= 0) ::close(fd);
    }
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) note("fsync", path);
  if (fd >= 0) ::close(fd);
  return first;
}

std::vector<std::string> device_users(const struct stat& target, const std::string& path,
                                      const DeviceUsersRoots& roots) {
  std::vector<std::string> users;
  find_mounts(target, roots, users);
  find_swap(target, roots, users);
  find_holders(target, roots, users);
  find_processes(target, roots, users);
  // A claim nobody above explains (a mount in another namespace, a holder sysfs did not list).
  if (users.empty() && roots.exclusive_probe && (target.st_mode & S_IFMT) == S_IFBLK) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_EXCL | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
      ::close(fd);
    } else if (errno == EBUSY) {
      users.push_back("claimed exclusively (a mount or a holder graidd cannot see)");
    }
  }
  return users;
}

}  // namespace graid::daemon
