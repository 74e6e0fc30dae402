#include "io/nvme_sysfs.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <system_error>

namespace graid::nvme {
namespace {

namespace fs = std::filesystem;

std::string dev_link(const SysfsRoots& roots, bool block, std::uint64_t rdev) {
  const auto d = static_cast<dev_t>(rdev);
  return fmt::format("{}/dev/{}/{}:{}", roots.sys, block ? "block" : "char", major(d), minor(d));
}

std::string class_dir(const SysfsRoots& roots, bool block, const std::string& name) {
  return fmt::format("{}/class/{}/{}", roots.sys, block ? "block" : "nvme-generic", name);
}

std::string link_basename(const std::string& link) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(link, ec);
  if (ec) return {};
  return target.filename().string();
}

std::optional<std::string> read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::optional<std::uint64_t> read_number(const std::string& path) {
  const auto line = read_line(path);
  if (!line || line->empty()) return std::nullopt;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(line->c_str(), &end, 10);
  if (end == line->c_str()) return std::nullopt;
  return v;
}

// Both names link to the same parent device, or sysfs cannot say (then the names decide).
bool same_parent(const SysfsRoots& roots, const std::string& ng_name,
                 const std::string& block_name) {
  const std::string a = parent_device_dir(roots, false, ng_name);
  const std::string b = parent_device_dir(roots, true, block_name);
  return a.empty() || b.empty() || a == b;
}

std::string sibling(const SysfsRoots& roots, const std::string& name, const std::regex& pattern,
                    const char* prefix, bool to_block) {
  std::smatch m;
  if (!std::regex_match(name, m, pattern)) return {};
  const std::string other = fmt::format("{}{}n{}", prefix, m[1].str(), m[2].str());
  std::error_code ec;
  if (!fs::exists(class_dir(roots, to_block, other), ec)) return {};
  const bool paired = to_block ? same_parent(roots, name, other) : same_parent(roots, other, name);
  return paired ? other : std::string();
}

}  // namespace

std::string char_device_class(const SysfsRoots& roots, std::uint64_t rdev) {
  return link_basename(dev_link(roots, false, rdev) + "/subsystem");
}

std::string device_name(const SysfsRoots& roots, bool block, std::uint64_t rdev) {
  return link_basename(dev_link(roots, block, rdev));
}

std::string block_sibling(const SysfsRoots& roots, const std::string& ng_name) {
  static const std::regex kGeneric("ng([0-9]+)n([0-9]+)");
  return sibling(roots, ng_name, kGeneric, "nvme", true);
}

std::string generic_sibling(const SysfsRoots& roots, const std::string& block_name) {
  static const std::regex kBlock("nvme([0-9]+)n([0-9]+)");
  return sibling(roots, block_name, kBlock, "ng", false);
}

std::optional<std::uint64_t> sysfs_devnum(const SysfsRoots& roots, bool block,
                                          const std::string& name) {
  const auto line = read_line(class_dir(roots, block, name) + "/dev");
  if (!line) return std::nullopt;
  unsigned maj = 0, min = 0;
  if (std::sscanf(line->c_str(), "%u:%u", &maj, &min) != 2) return std::nullopt;
  return static_cast<std::uint64_t>(makedev(maj, min));
}

std::string device_node(const SysfsRoots& roots, bool block, const std::string& name) {
  const auto devnum = sysfs_devnum(roots, block, name);
  if (!devnum) return {};
  const std::string node = roots.dev + "/" + name;
  struct stat st {};
  if (::stat(node.c_str(), &st) != 0) return {};
  if ((block ? !S_ISBLK(st.st_mode) : !S_ISCHR(st.st_mode)) || st.st_rdev != *devnum) return {};
  return node;
}

QueueLimits read_queue_limits(const SysfsRoots& roots, const std::string& block_name) {
  const std::string q = class_dir(roots, true, block_name) + "/queue/";
  QueueLimits limits;
  if (auto v = read_number(q + "max_hw_sectors_kb")) {
    limits.max_hw_sectors_kb = static_cast<std::uint32_t>(std::min<std::uint64_t>(*v, 1U << 20));
  }
  if (auto v = read_number(q + "max_segments")) {
    limits.max_segments = static_cast<std::uint32_t>(std::min<std::uint64_t>(*v, 1U << 16));
  }
  limits.write_zeroes_max_bytes = read_number(q + "write_zeroes_max_bytes");
  return limits;
}

std::string parent_device_dir(const SysfsRoots& roots, bool block, const std::string& name) {
  std::error_code ec;
  const fs::path dir = fs::canonical(class_dir(roots, block, name) + "/device", ec);
  return ec ? std::string() : dir.string();
}

}  // namespace graid::nvme
