// Stripe-shaped test and benchmark memory for the parity backends (engine/parity, tests, bench).
//
// Lays a stripe's chunks out in one AlignedBuffer with each chunk's start "coloured": chunk i
// begins at i * (chunk stride) where the stride is the chunk size rounded up to 64 B plus 64 B.
// Page-aligned chunks alias in L1 once more than ~12 are read together (DESIGN.md §5: +40 %
// xor_gen throughput at k=23 from a 64 B offset), so tests and benchmarks use the layout a
// buffer pool should use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "graid/buffer.h"
#include "graid/parity.h"
#include "graid/status.h"

namespace graid::parity_testing {

inline constexpr std::size_t kColour = kChunkAlign;

constexpr std::size_t round_up(std::size_t n, std::size_t align) noexcept {
  return (n + align - 1) / align * align;
}

// Bytes one stripe of `chunks` chunks of `chunk_size` bytes takes in the coloured layout.
constexpr std::size_t stripe_footprint(std::uint32_t chunks, std::size_t chunk_size) noexcept {
  return chunks * (round_up(chunk_size, kChunkAlign) + kColour);
}

// Deterministic pseudo-random bytes (splitmix64), so a failing seed reproduces.
inline void fill_pseudo_random(std::span<std::byte> out, std::uint64_t seed) noexcept {
  std::uint64_t state = seed;
  auto next = [&state]() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  std::size_t i = 0;
  while (i < out.size()) {
    std::uint64_t word = next();
    for (int b = 0; b < 8 && i < out.size(); ++b, ++i) {
      out[i] = static_cast<std::byte>(word & 0xff);
      word >>= 8;
    }
  }
}

class StripeBuffers {
 public:
  // `chunks` chunks of `chunk_size` bytes each, zero-filled (and so pre-faulted).
  static Result<StripeBuffers> make(std::uint32_t chunks, std::size_t chunk_size) {
    Result<AlignedBuffer> buffer = AlignedBuffer::allocate(stripe_footprint(chunks, chunk_size));
    if (!buffer.is_ok()) return buffer.status();
    StripeBuffers s;
    s.buffer_ = std::move(buffer).value();
    s.chunks_ = chunks;
    s.chunk_size_ = chunk_size;
    s.stride_ = round_up(chunk_size, kChunkAlign) + kColour;
    return s;
  }

  std::uint32_t chunks() const noexcept { return chunks_; }
  std::size_t chunk_size() const noexcept { return chunk_size_; }
  ChunkView view(std::uint32_t i) noexcept { return buffer_.view(i * stride_, chunk_size_); }
  std::span<std::byte> bytes(std::uint32_t i) noexcept { return view(i).span(); }

  // A job over these chunks (chunk i of the job is chunk i here).
  StripeJob job(ParityOp op, ParityScheme scheme, std::uint32_t k, std::size_t len) noexcept {
    StripeJob j;
    j.op = op;
    j.scheme = scheme;
    j.k = k;
    j.len = len;
    for (std::uint32_t i = 0; i < chunks_ && i < j.chunk.size(); ++i)
      j.chunk[i] = view(i);
    return j;
  }

 private:
  AlignedBuffer buffer_;
  std::uint32_t chunks_ = 0;
  std::size_t chunk_size_ = 0;
  std::size_t stride_ = 0;
};

}  // namespace graid::parity_testing
