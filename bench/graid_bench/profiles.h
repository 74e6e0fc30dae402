// The workload profiles graid-bench runs (DESIGN.md §6): block size, access pattern, read share.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graid/status.h"

namespace graid::bench {

enum class AccessPattern : std::uint8_t {
  kRandom,      // offsets uniform over the span, aligned to the block size
  kSequential,  // each thread walks its own contiguous region, wrapping at its end
};

struct Profile {
  std::string_view name;      // "4k-randwrite"
  std::uint32_t block_bytes;  // bytes per request
  AccessPattern pattern;
  std::uint32_t read_percent;  // 0..100: share of requests that are reads

  bool reads_only() const noexcept { return read_percent == 100; }
  bool writes_only() const noexcept { return read_percent == 0; }
};

// Every profile, in the order `--profile all` runs them.
std::span<const Profile> all_profiles() noexcept;

// Resolves the --profile values: each may be a profile name, a comma-separated list of names, or
// "all". Order is kept and repeats are dropped. An unknown name fails with the list of known ones.
Result<std::vector<Profile>> resolve_profiles(std::span<const std::string> specs);

}  // namespace graid::bench
