// An array shape for parameterized randomized tests (array_model_test, array_stream_test): level,
// member count, strip and how many members fail during the run; and the shape's name for
// GoogleTest ("raid6_n5_strip4k_fail2"), and the seed a test derives from it.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "graid/array.h"

namespace graid::testing {

struct Shape {
  RaidLevel level;
  std::uint32_t members;
  std::uint32_t strip;
  std::uint32_t failures;  // members to fail during the run
};

inline std::string shape_name(const ::testing::TestParamInfo<Shape>& info) {
  const Shape& s = info.param;
  return fmt::format("{}_n{}_strip{}k_fail{}", raid_level_name(s.level), s.members, s.strip / 1024,
                     s.failures);
}

// `base` mixed with the shape, and with GRAID_MODEL_SEED=<n> when set (stress runs explore other
// seeds; failures print the seed used).
inline std::uint64_t shape_seed(std::uint64_t base, const Shape& s) {
  std::uint64_t seed =
      base ^ (static_cast<std::uint64_t>(s.level) << 32) ^ (s.members << 16) ^ s.strip ^ s.failures;
  if (const char* extra = std::getenv("GRAID_MODEL_SEED"))
    seed ^= std::strtoull(extra, nullptr, 0) * 0x9E3779B97F4A7C15ull;
  return seed;
}

}  // namespace graid::testing
