// --verify: a cheap data check through the array. Writes a known pattern over a region with the
// profile's block size and queue depth, reads it back and counts the blocks that differ. Not the
// engine's correctness test (tests/ has those); a guard against a benchmark that measures an
// engine which has stopped storing data.
#pragma once

#include <cstdint>

#include "array_session.h"
#include "graid/status.h"

namespace graid::bench {

struct VerifyConfig {
  std::uint64_t region_bytes = 0;  // checked from array offset 0; rounded down to whole blocks
  std::uint32_t block_bytes = 4096;
  std::uint32_t queue_depth = 32;
  std::uint64_t seed = 1;  // pattern seed: different runs write different data
};

struct VerifyResult {
  std::uint64_t blocks = 0;
  std::uint64_t mismatched_blocks = 0;
  std::uint64_t first_mismatch_offset = 0;  // meaningful when mismatched_blocks > 0
};

// Runs on the calling thread (its own IoContext and queue). I/O errors fail the check.
Result<VerifyResult> verify_array(ArraySession& session, const VerifyConfig& config);

}  // namespace graid::bench
