// GF(2^8) arithmetic for RAID6: polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11d), generator g = 2.
//
// This is the field md's raid6 code and ISA-L use, so Q computed here matches both. Internal to
// engine/parity (the ref and cpu backends and their tests); not part of the public API.
//
// Elements are bytes. Addition is XOR. Multiplication goes through log/exp tables built at
// compile time; exp is stored twice over (512 entries) so log(a) + log(b) indexes it without a
// modulo.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace graid::gf256 {

// The field's reduction polynomial, with the x^8 bit.
inline constexpr unsigned kPoly = 0x11d;
// The multiplicative group has this many elements; g^kOrder == 1.
inline constexpr unsigned kOrder = 255;

struct Tables {
  std::array<std::uint8_t, 2 * 256> exp{};  // exp[i] = g^i, for i in [0, 510]
  std::array<std::uint8_t, 256> log{};      // log[g^i] = i; log[0] is unused (0)
};

constexpr Tables make_tables() noexcept {
  Tables t;
  unsigned x = 1;
  for (unsigned i = 0; i < kOrder; ++i) {
    t.exp[i] = static_cast<std::uint8_t>(x);
    t.log[x] = static_cast<std::uint8_t>(i);
    x <<= 1;  // times g = 2
    if (x & 0x100) x ^= kPoly;
  }
  for (unsigned i = kOrder; i < t.exp.size(); ++i)
    t.exp[i] = t.exp[i - kOrder];
  return t;
}

inline constexpr Tables kTables = make_tables();

// g^n for any n (the exponent is reduced modulo 255).
constexpr std::uint8_t exp(unsigned n) noexcept {
  return kTables.exp[n % kOrder];
}

// Discrete log base g. REQUIRES: a != 0.
constexpr unsigned log(std::uint8_t a) noexcept {
  return kTables.log[a];
}

constexpr std::uint8_t mul(std::uint8_t a, std::uint8_t b) noexcept {
  if (a == 0 || b == 0) return 0;
  return kTables.exp[kTables.log[a] + kTables.log[b]];
}

// Multiplicative inverse. 0 has none; inv(0) returns 0 so a caller's bug gives wrong bytes
// rather than undefined behaviour (tests check callers never ask).
constexpr std::uint8_t inv(std::uint8_t a) noexcept {
  if (a == 0) return 0;
  return kTables.exp[kOrder - kTables.log[a]];
}

// a / b. REQUIRES: b != 0.
constexpr std::uint8_t div(std::uint8_t a, std::uint8_t b) noexcept {
  return mul(a, inv(b));
}

// a^n, with a^0 == 1 (also for a == 0).
constexpr std::uint8_t pow(std::uint8_t a, unsigned n) noexcept {
  if (n == 0) return 1;
  if (a == 0) return 0;
  return exp((kTables.log[a] * (n % kOrder)) % kOrder);
}

// Inverts the n x n row-major matrix `in` into `out` by Gauss-Jordan elimination. Returns false
// (and leaves `out` unspecified) when the matrix is singular or the spans are too small.
// O(n^3); meant for the small (k <= 31) matrices of RAID recovery, not for data.
bool invert_matrix(std::span<const std::uint8_t> in, std::span<std::uint8_t> out, std::size_t n);

// out (rows x cols) = a (rows x inner) * b (inner x cols), all row-major. Spans must be large
// enough; used to turn an inverted survivor matrix into recovery coefficients.
void multiply_matrix(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b,
                     std::span<std::uint8_t> out, std::size_t rows, std::size_t inner,
                     std::size_t cols);

}  // namespace graid::gf256
