#include "workload.h"

#include <bit>
#include <cstring>

namespace graid::bench {

namespace {

std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// -Wpedantic rejects __int128 unless marked as the GNU extension it is.
__extension__ typedef unsigned __int128 Uint128;

std::uint64_t pattern_word(std::uint64_t offset, std::uint64_t seed) noexcept {
  std::uint64_t state = offset ^ (seed * 0xd1342543de82ef95ULL);
  return splitmix64(state);
}

}  // namespace

Rng::Rng(std::uint64_t seed) noexcept {
  std::uint64_t state = seed;
  for (std::uint64_t& word : s_)
    word = splitmix64(state);
}

std::uint64_t Rng::next() noexcept {
  const std::uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = std::rotl(s_[3], 45);
  return result;
}

std::uint64_t Rng::below(std::uint64_t bound) noexcept {
  return static_cast<std::uint64_t>((static_cast<Uint128>(next()) * bound) >> 64);
}

std::uint64_t thread_seed(std::uint64_t seed, std::uint32_t thread) noexcept {
  std::uint64_t state = seed ^ (std::uint64_t{thread} << 32 | thread);
  return splitmix64(state);
}

Region thread_region(const Profile& profile, std::uint64_t span, std::uint32_t threads,
                     std::uint32_t thread) noexcept {
  const std::uint64_t block = profile.block_bytes;
  const std::uint64_t blocks = span / block;
  if (profile.pattern == AccessPattern::kRandom || threads <= 1) return Region{0, blocks * block};
  const std::uint64_t per_thread = blocks / threads;
  return Region{per_thread * thread * block, per_thread * block};
}

OffsetStream::OffsetStream(AccessPattern pattern, Region region, std::uint32_t block) noexcept
    : pattern_(pattern), region_(region), block_(block), blocks_(region.bytes / block) {}

std::uint64_t OffsetStream::next(Rng& rng) noexcept {
  std::uint64_t index = 0;
  if (pattern_ == AccessPattern::kRandom) {
    index = rng.below(blocks_);
  } else {
    index = cursor_;
    cursor_ = cursor_ + 1 == blocks_ ? 0 : cursor_ + 1;
  }
  return region_.start + index * block_;
}

void fill_random(std::span<std::byte> buf, Rng& rng) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= buf.size(); i += 8) {
    const std::uint64_t word = rng.next();
    std::memcpy(buf.data() + i, &word, 8);
  }
  if (i < buf.size()) {
    const std::uint64_t word = rng.next();
    std::memcpy(buf.data() + i, &word, buf.size() - i);
  }
}

void fill_pattern(std::span<std::byte> buf, std::uint64_t offset, std::uint64_t seed) noexcept {
  for (std::size_t i = 0; i + 8 <= buf.size(); i += 8) {
    const std::uint64_t word = pattern_word(offset + i, seed);
    std::memcpy(buf.data() + i, &word, 8);
  }
}

bool matches_pattern(std::span<const std::byte> buf, std::uint64_t offset,
                     std::uint64_t seed) noexcept {
  for (std::size_t i = 0; i + 8 <= buf.size(); i += 8) {
    const std::uint64_t want = pattern_word(offset + i, seed);
    if (std::memcmp(buf.data() + i, &want, 8) != 0) return false;
  }
  return true;
}

}  // namespace graid::bench
