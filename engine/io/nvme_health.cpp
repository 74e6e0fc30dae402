// The SMART / Health Information log (NVMe base specification, Get Log Page, log identifier
// 02h): decoding, and reading it through NVME_IOCTL_ADMIN_CMD (graid/member.h).
#include <fcntl.h>
#include <linux/nvme_ioctl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "graid/member.h"
#include "io/nvme_command.h"

namespace graid {

namespace {

constexpr std::uint8_t kAdminGetLogPage = 0x02;
constexpr std::uint32_t kLogSmartHealth = 0x02;
constexpr std::uint32_t kAllNamespaces = 0xffffffff;

std::uint16_t le16(std::span<const std::byte> p, std::size_t at) {
  return static_cast<std::uint16_t>(std::to_integer<unsigned>(p[at]) |
                                    std::to_integer<unsigned>(p[at + 1]) << 8);
}

// A 128-bit little-endian counter, saturated to 64 bits.
std::uint64_t le128(std::span<const std::byte> p, std::size_t at) {
  for (std::size_t i = 8; i < 16; ++i)
    if (p[at + i] != std::byte{0}) return ~std::uint64_t{0};
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i)
    v |= std::uint64_t{std::to_integer<std::uint8_t>(p[at + i])} << (8 * i);
  return v;
}

}  // namespace

Result<NvmeHealth> parse_nvme_smart_log(std::span<const std::byte> page) {
  if (page.size() < kNvmeSmartLogBytes)
    return make_error(Errc::kInvalidArgument, "a SMART log is 512 bytes, not {}", page.size());
  NvmeHealth h;
  h.critical_warning = std::to_integer<std::uint8_t>(page[0]);
  h.temperature_kelvin = le16(page, 1);
  h.available_spare = std::to_integer<std::uint8_t>(page[3]);
  h.available_spare_threshold = std::to_integer<std::uint8_t>(page[4]);
  h.percentage_used = std::to_integer<std::uint8_t>(page[5]);
  h.data_units_read = le128(page, 32);
  h.data_units_written = le128(page, 48);
  h.power_cycles = le128(page, 112);
  h.power_on_hours = le128(page, 128);
  h.unsafe_shutdowns = le128(page, 144);
  h.media_errors = le128(page, 160);
  h.error_log_entries = le128(page, 176);
  return h;
}

std::string nvme_critical_warning_text(std::uint8_t bits) {
  static constexpr std::array<const char*, 8> kBits = {"available spare below threshold",
                                                       "temperature past a threshold",
                                                       "NVM subsystem reliability degraded",
                                                       "media placed in read-only mode",
                                                       "volatile memory backup failed",
                                                       "persistent memory region read-only",
                                                       "reserved bit 6",
                                                       "reserved bit 7"};
  std::string out;
  for (unsigned i = 0; i < 8; ++i) {
    if ((bits & (1U << i)) == 0) continue;
    if (!out.empty()) out += ", ";
    out += kBits[i];
  }
  return out.empty() ? "none" : out;
}

Result<NvmeHealth> read_nvme_health(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return make_error(errno == ENOENT ? Errc::kNotFound : Errc::kIoError, "{}: {}", path,
                      std::strerror(errno));
  std::array<std::byte, kNvmeSmartLogBytes> page{};
  nvme_admin_cmd cmd{};
  cmd.opcode = kAdminGetLogPage;
  cmd.nsid = kAllNamespaces;
  cmd.addr = reinterpret_cast<std::uintptr_t>(page.data());
  cmd.data_len = static_cast<std::uint32_t>(page.size());
  // NUMDL (bits 31:16): dwords to transfer, 0's based; LID (bits 7:0).
  cmd.cdw10 = kLogSmartHealth | ((kNvmeSmartLogBytes / 4 - 1) << 16);
  const int ret = ::ioctl(fd, NVME_IOCTL_ADMIN_CMD, &cmd);
  const int err = errno;
  ::close(fd);
  if (ret > 0)
    return make_error(Errc::kIoError, "{}: Get Log Page (SMART) failed: {} (NVMe status {:#x})",
                      path, nvme::status_name(static_cast<std::uint32_t>(ret)), ret);
  if (ret < 0) {
    if (err == ENOTTY || err == EINVAL)
      return make_error(Errc::kUnsupported, "{}: not an NVMe device", path);
    return make_error(Errc::kIoError, "{}: Get Log Page (SMART): {}{}", path, std::strerror(err),
                      err == EACCES || err == EPERM ? " (NVMe admin commands need root)" : "");
  }
  return parse_nvme_smart_log(page);
}

}  // namespace graid
