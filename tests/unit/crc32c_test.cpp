// CRC-32C wrapper around ISA-L, checked against the standard check value and an independent
// bitwise implementation (so a convention slip in the ISA-L seed/inversion cannot hide).
#include "meta/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

namespace graid::meta {
namespace {

// The textbook reflected CRC-32C, one bit at a time: poly 0x82F63B78, init ~0, final xor ~0.
std::uint32_t bitwise_crc32c(std::span<const std::byte> data) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const std::byte b : data) {
    crc ^= std::to_integer<std::uint32_t>(b);
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::span<const std::byte> as_bytes(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

std::vector<std::byte> random_bytes(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::byte> out(n);
  for (auto& b : out)
    b = static_cast<std::byte>(rng() & 0xff);
  return out;
}

TEST(Crc32c, CheckValue) {
  EXPECT_EQ(crc32c(as_bytes("123456789")), 0xE3069283u);
  EXPECT_EQ(bitwise_crc32c(as_bytes("123456789")), 0xE3069283u);
}

TEST(Crc32c, EmptyIsZero) {
  EXPECT_EQ(crc32c({}), 0u);
  EXPECT_EQ(crc32c_extend(0x12345678u, {}), 0x12345678u);
}

// Known vectors from RFC 3720 (iSCSI), appendix B.4.
TEST(Crc32c, Rfc3720Vectors) {
  std::vector<std::byte> zeros(32, std::byte{0});
  std::vector<std::byte> ones(32, std::byte{0xff});
  std::vector<std::byte> incrementing(32);
  std::vector<std::byte> decrementing(32);
  for (std::size_t i = 0; i < 32; ++i) {
    incrementing[i] = static_cast<std::byte>(i);
    decrementing[i] = static_cast<std::byte>(31 - i);
  }
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(incrementing), 0x46DD794Eu);
  EXPECT_EQ(crc32c(decrementing), 0x113FDB5Cu);
}

TEST(Crc32c, MatchesBitwiseOnManyLengthsAndAlignments) {
  std::mt19937_64 rng(42);
  const std::vector<std::byte> data = random_bytes(9000, rng);
  for (std::size_t len = 0; len <= 300; ++len) {
    for (std::size_t misalign = 0; misalign < 8; ++misalign) {
      const auto piece = std::span(data).subspan(misalign, len);
      ASSERT_EQ(crc32c(piece), bitwise_crc32c(piece)) << "len " << len << " offset " << misalign;
    }
  }
  for (const std::size_t len : {1023u, 1024u, 4095u, 4096u, 4097u, 8191u, 8999u}) {
    const auto piece = std::span(data).subspan(1, len);
    ASSERT_EQ(crc32c(piece), bitwise_crc32c(piece)) << "len " << len;
  }
}

TEST(Crc32c, ExtendChainsAtEverySplit) {
  std::mt19937_64 rng(7);
  const std::vector<std::byte> data = random_bytes(600, rng);
  const std::uint32_t whole = crc32c(data);
  for (std::size_t split = 0; split <= data.size(); ++split) {
    const auto head = std::span(data).first(split);
    const auto tail = std::span(data).subspan(split);
    ASSERT_EQ(crc32c_extend(crc32c(head), tail), whole) << "split " << split;
  }
}

TEST(Crc32c, DetectsEverySingleBitFlip) {
  std::mt19937_64 rng(3);
  std::vector<std::byte> data = random_bytes(256, rng);
  const std::uint32_t original = crc32c(data);
  for (std::size_t bit = 0; bit < data.size() * 8; ++bit) {
    data[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    ASSERT_NE(crc32c(data), original) << "bit " << bit;
    data[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
  }
}

}  // namespace
}  // namespace graid::meta
