// GF(2^8) arithmetic (poly 0x11d, g = 2) against independent formulations: a shift-and-add
// multiply, ISA-L's own gf_mul/gf_inv, md's raid6 constants, and the field axioms.

#include "parity/gf256.h"

#include <gtest/gtest.h>
#include <isa-l/erasure_code.h>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

namespace graid {
namespace {

// Carry-less multiply then reduce by 0x11d, bit by bit: shares no tables with gf256.
std::uint8_t slow_mul(std::uint8_t a, std::uint8_t b) {
  unsigned product = 0;
  unsigned x = a;
  for (unsigned bit = 0; bit < 8; ++bit) {
    if (b & (1u << bit)) product ^= x << bit;
  }
  for (int bit = 14; bit >= 8; --bit) {
    if (product & (1u << bit)) product ^= 0x11du << (bit - 8);
  }
  return static_cast<std::uint8_t>(product);
}

TEST(Gf256, MulMatchesShiftAndAddForAllPairs) {
  for (unsigned a = 0; a < 256; ++a) {
    for (unsigned b = 0; b < 256; ++b) {
      ASSERT_EQ(gf256::mul(static_cast<std::uint8_t>(a), static_cast<std::uint8_t>(b)),
                slow_mul(static_cast<std::uint8_t>(a), static_cast<std::uint8_t>(b)))
          << a << " * " << b;
    }
  }
}

TEST(Gf256, MulAndInvMatchIsal) {
  for (unsigned a = 0; a < 256; ++a) {
    const auto ua = static_cast<unsigned char>(a);
    if (a != 0) {
      ASSERT_EQ(gf256::inv(ua), gf_inv(ua)) << a;
    }
    for (unsigned b = 0; b < 256; ++b) {
      const auto ub = static_cast<unsigned char>(b);
      ASSERT_EQ(gf256::mul(ua, ub), gf_mul(ua, ub)) << a << " * " << b;
    }
  }
}

TEST(Gf256, KnownValuesFromMdRaid6Tables) {
  // md's raid6_gfexp begins 01 02 04 08 10 20 40 80 1d 3a 74 e8 cd 87 13 26.
  constexpr std::array<std::uint8_t, 16> kExp = {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80,
                                                 0x1d, 0x3a, 0x74, 0xe8, 0xcd, 0x87, 0x13, 0x26};
  for (unsigned i = 0; i < kExp.size(); ++i)
    EXPECT_EQ(gf256::exp(i), kExp[i]) << "g^" << i;
  EXPECT_EQ(gf256::exp(255), 1);     // the group has order 255
  EXPECT_EQ(gf256::exp(254), 0x8e);  // g^-1
  EXPECT_EQ(gf256::inv(2), 0x8e);    // raid6_gfinv[2]
  EXPECT_EQ(gf256::inv(0x8e), 2);
  EXPECT_EQ(gf256::mul(0x80, 2), 0x1d);  // the reduction step
  EXPECT_EQ(gf256::log(0x1d), 8u);
  EXPECT_EQ(gf256::mul(0x53, 0xca), slow_mul(0x53, 0xca));
}

TEST(Gf256, GeneratorHasFullOrderAndLogInvertsExp) {
  std::array<bool, 256> seen{};
  for (unsigned i = 0; i < 255; ++i) {
    const std::uint8_t x = gf256::exp(i);
    ASSERT_NE(x, 0);
    ASSERT_FALSE(seen[x]) << "g^" << i << " repeats: g is not a generator";
    seen[x] = true;
    ASSERT_EQ(gf256::log(x), i);
  }
  for (unsigned a = 1; a < 256; ++a) {
    EXPECT_EQ(gf256::exp(gf256::log(static_cast<std::uint8_t>(a))), a);
  }
}

TEST(Gf256, FieldAxioms) {
  for (unsigned a = 0; a < 256; ++a) {
    const auto x = static_cast<std::uint8_t>(a);
    ASSERT_EQ(gf256::mul(x, 1), x);
    ASSERT_EQ(gf256::mul(x, 0), 0);
    if (x != 0) {
      ASSERT_EQ(gf256::mul(x, gf256::inv(x)), 1) << a;
      ASSERT_EQ(gf256::div(x, x), 1) << a;
    }
    for (unsigned b = 0; b < 256; ++b) {
      const auto y = static_cast<std::uint8_t>(b);
      ASSERT_EQ(gf256::mul(x, y), gf256::mul(y, x));
      if (y != 0) {
        ASSERT_EQ(gf256::mul(gf256::div(x, y), y), x);
      }
    }
  }
  std::mt19937 rng(20240601);
  for (int i = 0; i < 20000; ++i) {
    const auto a = static_cast<std::uint8_t>(rng());
    const auto b = static_cast<std::uint8_t>(rng());
    const auto c = static_cast<std::uint8_t>(rng());
    ASSERT_EQ(gf256::mul(gf256::mul(a, b), c), gf256::mul(a, gf256::mul(b, c)));
    ASSERT_EQ(gf256::mul(a, b ^ c), gf256::mul(a, b) ^ gf256::mul(a, c));
  }
}

TEST(Gf256, PowMatchesRepeatedMultiplication) {
  for (unsigned a = 0; a < 256; a += 7) {
    std::uint8_t expect = 1;
    for (unsigned n = 0; n < 600; ++n) {
      ASSERT_EQ(gf256::pow(static_cast<std::uint8_t>(a), n), expect) << a << "^" << n;
      expect = gf256::mul(expect, static_cast<std::uint8_t>(a));
    }
  }
  EXPECT_EQ(gf256::pow(2, 8), 0x1d);
}

TEST(Gf256, InvertMatrixGivesIdentityProduct) {
  std::mt19937 rng(7);
  int inverted = 0;
  for (std::size_t n : {1u, 2u, 3u, 5u, 8u, 16u, 31u, 33u}) {
    for (int trial = 0; trial < 4; ++trial) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " trial=" << trial);
      std::vector<std::uint8_t> m(n * n);
      for (auto& x : m)
        x = static_cast<std::uint8_t>(rng());
      std::vector<std::uint8_t> inverse(n * n);
      std::vector<std::uint8_t> product(n * n);
      if (!gf256::invert_matrix(m, inverse, n)) continue;  // a random matrix may be singular
      ++inverted;
      gf256::multiply_matrix(m, inverse, product, n, n, n);
      for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t c = 0; c < n; ++c)
          ASSERT_EQ(product[r * n + c], r == c ? 1 : 0);
      }
      // ISA-L's inversion must agree (it clobbers its input, so give it a copy).
      std::vector<std::uint8_t> copy = m;
      std::vector<std::uint8_t> isal(n * n);
      ASSERT_EQ(gf_invert_matrix(copy.data(), isal.data(), static_cast<int>(n)), 0);
      EXPECT_EQ(isal, inverse);
    }
  }
  EXPECT_GT(inverted, 20);
}

TEST(Gf256, InvertMatrixRejectsSingular) {
  // Two equal rows.
  const std::vector<std::uint8_t> m = {1, 2, 3, 4, 5, 6, 1, 2, 3};
  std::vector<std::uint8_t> out(9);
  EXPECT_FALSE(gf256::invert_matrix(m, out, 3));
  // Row 2 = row 0 + row 1 (XOR: 1 ^ 7, 2 ^ 9, 3 ^ 11) is also singular.
  const std::vector<std::uint8_t> dependent = {1, 2, 3, 7, 9, 11, 6, 11, 8};
  EXPECT_FALSE(gf256::invert_matrix(dependent, out, 3));
  EXPECT_FALSE(gf256::invert_matrix(m, out, 4));  // spans too small
}

TEST(Gf256, Raid6GeneratorSubmatricesAreInvertible) {
  // Any k rows of [I; 1...1; g^0...g^(k-1)] must be invertible, or some 2-failure would be
  // unrecoverable. Check every pair of removed rows for a few k.
  for (std::size_t k : {2u, 3u, 4u, 9u, 17u}) {
    for (std::size_t a = 0; a < k + 2; ++a) {
      for (std::size_t b = a + 1; b < k + 2; ++b) {
        std::vector<std::uint8_t> m;
        for (std::size_t row = 0; row < k + 2; ++row) {
          if (row == a || row == b) continue;
          for (std::size_t c = 0; c < k; ++c) {
            m.push_back(row < k    ? (row == c ? 1 : 0)
                        : row == k ? 1
                                   : gf256::exp(static_cast<unsigned>(c)));
          }
        }
        std::vector<std::uint8_t> out(k * k);
        EXPECT_TRUE(gf256::invert_matrix(m, out, k)) << "k=" << k << " lost " << a << "," << b;
      }
    }
  }
}

}  // namespace
}  // namespace graid
