#include "graidd/ublk_owner.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <system_error>

namespace graid::daemon {

namespace {

constexpr std::uint64_t kMagic = 0x4752;  // "GR"

}  // namespace

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

std::uint64_t ublk_owner_flags(std::uint16_t instance, UblkOwner owner) {
  const std::uint64_t dg = std::min<std::uint32_t>(owner.dg_id, kUnrecordedId);
  const std::uint64_t vd = std::min<std::uint32_t>(owner.vd_id, kUnrecordedId);
  return kMagic << 48 | std::uint64_t{instance} << 32 | dg << 16 | vd;
}

std::optional<UblkOwner> ublk_owner_of(std::uint64_t flags, std::uint16_t instance) {
  if (flags >> 48 != kMagic || ((flags >> 32) & 0xffff) != instance) return std::nullopt;
  UblkOwner o{static_cast<std::uint32_t>((flags >> 16) & 0xffff),
              static_cast<std::uint32_t>(flags & 0xffff)};
  if (o.dg_id == kUnrecordedId || o.vd_id == kUnrecordedId) return std::nullopt;
  return o;
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
