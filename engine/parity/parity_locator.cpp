// Locating a stripe's one bad strip from its parity deltas (graid/parity.h,
// locate_parity_mismatch): the consistency check's repair uses it to fix the strip that is wrong
// instead of rewriting parity from corrupt data.
#include <algorithm>

#include "graid/parity.h"
#include "parity/gf256.h"

namespace graid {

std::uint8_t parity_coefficient(ParityScheme scheme, std::uint32_t j, std::uint32_t d) noexcept {
  if (j == 0) return 1;
  if (j == 1 && scheme == ParityScheme::kPQ) return gf256::exp(d);
  return 0;
}

ParityMismatch locate_parity_mismatch(ParityScheme scheme, std::uint32_t k,
                                      std::span<const ChunkView> deltas, std::size_t len) {
  using Kind = ParityMismatch::Kind;
  ParityMismatch out;
  const auto m = static_cast<std::uint32_t>(deltas.size());
  auto nonzero = [&](std::uint32_t j) {
    const std::byte* p = deltas[j].data();
    return std::any_of(p, p + len, [](std::byte b) { return b != std::byte{0}; });
  };
  for (std::uint32_t j = 0; j < m; ++j)
    out.parity_mask |= nonzero(j) ? 1u << j : 0u;
  if (out.parity_mask == 0) return out;
  if ((out.parity_mask & 1u) == 0 || out.parity_mask == 1u) {
    // P agrees (a data error always shows in P), or only P differs: the parity strips that
    // differ are the bad ones. With one parity strip only P differs either way: unknown.
    out.kind = m >= 2 ? Kind::kParity : Kind::kUnknown;
    return out;
  }
  // A data strip z: every delta j is a_j(z) times delta 0. The first byte where delta 0 is not
  // zero picks the only candidate (a_1 is one to one over the data indices), the rest checks it.
  const std::byte* p = deltas[0].data();
  const auto first = static_cast<std::size_t>(
      std::find_if(p, p + len, [](std::byte b) { return b != std::byte{0}; }) - p);
  const auto e0 = static_cast<std::uint8_t>(p[first]);
  const auto d1 = static_cast<std::uint8_t>(deltas[1].data()[first]);
  std::uint32_t z = k;
  for (std::uint32_t d = 0; d < k && z == k; ++d)
    if (gf256::mul(parity_coefficient(scheme, 1, d), e0) == d1) z = d;
  out.kind = Kind::kUnknown;
  if (z == k) return out;
  for (std::uint32_t j = 1; j < m; ++j) {
    const std::uint8_t a = parity_coefficient(scheme, j, z);
    const std::byte* q = deltas[j].data();
    for (std::size_t i = 0; i < len; ++i) {
      if (gf256::mul(a, static_cast<std::uint8_t>(p[i])) != static_cast<std::uint8_t>(q[i])) {
        return out;
      }
    }
  }
  out.kind = Kind::kData;
  out.data_index = z;
  out.parity_mask = 0;
  return out;
}

}  // namespace graid
