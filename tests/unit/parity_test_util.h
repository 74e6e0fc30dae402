// Helpers shared by the parity backend tests (ref and cpu).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "graid/parity.h"
#include "parity/stripe_buffers.h"

namespace graid::parity_testing {

using Bytes = std::vector<std::byte>;

inline std::uint32_t parity_count(ParityScheme scheme) {
  return scheme == ParityScheme::kPQ ? 2 : 1;
}

inline const char* scheme_str(ParityScheme scheme) {
  return scheme == ParityScheme::kPQ ? "PQ" : "P";
}

// A stripe of `chunks` coloured buffers of `size` bytes; a failed allocation fails the test.
inline StripeBuffers make_stripe(std::uint32_t chunks, std::size_t size) {
  Result<StripeBuffers> s = StripeBuffers::make(chunks, size);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return std::move(s).value();
}

}  // namespace graid::parity_testing
