#include "graidd/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace graid::daemon {

bool sd_notify(std::string_view state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return true;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::size_t len = std::strlen(path);
  if (len >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, path, len);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // the abstract namespace
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const auto addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  const ssize_t n = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                             reinterpret_cast<const sockaddr*>(&addr), addr_len);
  ::close(fd);
  return n == static_cast<ssize_t>(state.size());
}

std::optional<std::chrono::milliseconds> watchdog_interval() {
  const char* usec = std::getenv("WATCHDOG_USEC");
  if (usec == nullptr || usec[0] == '\0') return std::nullopt;
  if (const char* pid = std::getenv("WATCHDOG_PID"); pid != nullptr && pid[0] != '\0') {
    long long p = 0;
    const auto [end, err] = std::from_chars(pid, pid + std::strlen(pid), p);
    if (err != std::errc() || *end != '\0' || p != ::getpid()) return std::nullopt;
  }
  unsigned long long us = 0;
  const auto [end, err] = std::from_chars(usec, usec + std::strlen(usec), us);
  if (err != std::errc() || *end != '\0' || us < 2000) return std::nullopt;
  return std::chrono::milliseconds(us / 1000);
}

void drain_eventfd(int fd) {
  std::uint64_t count = 0;
  (void)!::read(fd, &count, sizeof count);
}

}  // namespace graid::daemon
