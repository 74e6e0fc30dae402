#include "graidd/ublk_owner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "graidd/durable_file.h"

namespace graid::daemon {

namespace {

constexpr std::uint64_t kMagic = 0x6ad;          // 12 bits
constexpr std::uint64_t kLegacyMagic = 0x4752;   // "GR", 16 bits: the previous build's
constexpr std::uint64_t kDgMask = 0x3fff;        // 14 bits
constexpr std::uint64_t kVdMask = 0x3f;          // 6 bits
constexpr std::uint64_t kLegacyIdMask = 0xffff;  // 16 bits each
constexpr const char* kInstanceFile = "instance-id";

}  // namespace

Result<std::uint32_t> load_or_make_instance_id(const std::string& state_dir) {
  const std::string path = state_dir + "/" + kInstanceFile;
  {
    std::ifstream in(path);
    if (in) {
      std::string text;
      std::getline(in, text);
      std::uint32_t id = 0;
      const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), id, 16);
      if (err != std::errc() || end != text.data() + text.size() || text.size() != 8)
        return make_error(Errc::kCorrupt, "{} does not hold an instance id (8 hex digits)", path);
      return id;
    }
  }
  std::uint32_t id = 0;
  if (::getrandom(&id, sizeof id, 0) != static_cast<ssize_t>(sizeof id))
    return make_error(Errc::kIoError, "getrandom: {}", std::strerror(errno));
  GRAID_RETURN_IF_ERROR(replace_file(state_dir, path, fmt::format("{:08x}\n", id)));
  return id;
}

std::uint16_t state_dir_tag(const std::string& state_dir) {
  std::error_code ec;
  std::string path = std::filesystem::canonical(state_dir, ec).string();
  if (ec) path = state_dir;
  // FNV-1a, folded to 16 bits.
  std::uint32_t h = 2166136261u;
  for (const unsigned char c : path) {
    h ^= c;
    h *= 16777619u;
  }
  return static_cast<std::uint16_t>((h >> 16) ^ (h & 0xffff));
}

std::uint64_t ublk_owner_flags(std::uint32_t instance, UblkOwner owner) {
  const std::uint64_t dg = owner.dg_id <= kMaxTaggedDg ? owner.dg_id : kDgMask;
  const std::uint64_t vd = owner.vd_id <= kMaxTaggedVd ? owner.vd_id : kVdMask;
  return kMagic << 52 | std::uint64_t{instance} << 20 | dg << 6 | vd;
}

std::optional<UblkOwner> ublk_owner_of(std::uint64_t flags, std::uint32_t instance,
                                       std::uint16_t legacy_instance) {
  if (flags >> 52 == kMagic) {
    if (((flags >> 20) & 0xffffffff) != instance) return std::nullopt;
    const UblkOwner o{static_cast<std::uint32_t>((flags >> 6) & kDgMask),
                      static_cast<std::uint32_t>(flags & kVdMask)};
    if (o.dg_id == kDgMask || o.vd_id == kVdMask) return std::nullopt;
    return o;
  }
  if (flags >> 48 == kLegacyMagic) {
    if (((flags >> 32) & 0xffff) != legacy_instance) return std::nullopt;
    const UblkOwner o{static_cast<std::uint32_t>((flags >> 16) & kLegacyIdMask),
                      static_cast<std::uint32_t>(flags & kLegacyIdMask)};
    if (o.dg_id == kLegacyIdMask || o.vd_id == kLegacyIdMask) return std::nullopt;
    return o;
  }
  return std::nullopt;
}

Status ublk_device_may_be_ours(const ublk::DevInfo& info, uid_t euid) {
  if ((info.flags & ublk::kFlagUnprivileged) != 0)
    return make_error(Errc::kBusy, "it is an unprivileged device (uid {}'s)", info.owner_uid);
  if (info.owner_uid != euid)
    return make_error(Errc::kBusy, "uid {} made it, not graidd's uid {}", info.owner_uid, euid);
  return Status::ok();
}

std::vector<std::uint32_t> list_ublk_devices(const std::string& sys_root) {
  std::vector<std::uint32_t> ids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(sys_root + "/class/ublk-char", ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("ublkc")) continue;
    std::uint32_t id = 0;
    const char* first = name.data() + 5;
    const char* last = name.data() + name.size();
    auto [end, err] = std::from_chars(first, last, id);
    if (err == std::errc() && end == last && first != last) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace graid::daemon
