// What each benchmark thread asks for next: offsets, reads or writes, and data patterns.
//
// Pure and deterministic for a given seed, so the same generators drive the array run, the raw
// baseline and the unit tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "profiles.h"

namespace graid::bench {

// xoshiro256** (Blackman and Vigna): fast, small state, good enough for picking offsets. One per
// thread; never shared.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) noexcept;
  std::uint64_t next() noexcept;
  // Uniform in [0, bound); bound > 0. Lemire's multiply-shift: the bias (bound / 2^64) is far
  // below anything a benchmark can see.
  std::uint64_t below(std::uint64_t bound) noexcept;

 private:
  std::uint64_t s_[4];
};

// A distinct, well-mixed seed for thread `thread` of a run seeded with `seed`.
std::uint64_t thread_seed(std::uint64_t seed, std::uint32_t thread) noexcept;

// The byte range one thread works in.
struct Region {
  std::uint64_t start = 0;
  std::uint64_t bytes = 0;
};

// Random profiles share the whole span; sequential profiles give each of `threads` threads its
// own contiguous, block-aligned slice, so the streams never overlap. REQUIRES: span >= threads *
// block for sequential profiles.
Region thread_region(const Profile& profile, std::uint64_t span, std::uint32_t threads,
                     std::uint32_t thread) noexcept;

// Block-aligned offsets inside a region: uniform for random profiles, a wrapping walk for
// sequential ones. REQUIRES: region.bytes >= block.
class OffsetStream {
 public:
  OffsetStream(AccessPattern pattern, Region region, std::uint32_t block) noexcept;
  std::uint64_t next(Rng& rng) noexcept;

 private:
  AccessPattern pattern_;
  Region region_;
  std::uint32_t block_;
  std::uint64_t blocks_;  // whole blocks in the region
  std::uint64_t cursor_ = 0;
};

// True when the next request should be a read, with probability read_percent / 100.
inline bool next_is_read(Rng& rng, std::uint32_t read_percent) noexcept {
  return read_percent >= 100 || (read_percent > 0 && rng.below(100) < read_percent);
}

// Fills `buf` with random bytes (the data written by the benchmark).
void fill_random(std::span<std::byte> buf, Rng& rng) noexcept;

// The verification pattern: every 8-byte word is a hash of its own array offset and `seed`, so
// a block read from the wrong place, a stale block and a torn block all mismatch.
// REQUIRES: offset and buf.size() are multiples of 8.
void fill_pattern(std::span<std::byte> buf, std::uint64_t offset, std::uint64_t seed) noexcept;
bool matches_pattern(std::span<const std::byte> buf, std::uint64_t offset,
                     std::uint64_t seed) noexcept;

}  // namespace graid::bench
