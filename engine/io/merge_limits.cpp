#include "io/merge_limits.h"

#include <fmt/format.h>
#include <sys/sysmacros.h>
#include <sys/types.h>

#include <algorithm>
#include <fstream>
#include <optional>

namespace graid {
namespace {

std::optional<std::uint64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  std::uint64_t v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

}  // namespace

MergeLimits block_merge_limits(std::uint64_t rdev, const std::string& sys) {
  const auto d = static_cast<dev_t>(rdev);
  const std::string dir = fmt::format("{}/dev/block/{}:{}", sys, major(d), minor(d));
  MergeLimits limits = kFileMergeLimits;
  for (const char* queue : {"/queue/", "/../queue/"}) {
    const auto kb = read_number(dir + queue + "max_sectors_kb");
    if (!kb) continue;
    if (*kb > 0) {
      limits.max_bytes =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(limits.max_bytes, *kb * 1024));
    }
    if (const auto segs = read_number(dir + queue + "max_segments"); segs && *segs > 0) {
      limits.max_segments =
          static_cast<std::uint16_t>(std::min<std::uint64_t>(limits.max_segments, *segs));
    }
    break;
  }
  return limits;
}

}  // namespace graid
