#include "parity/gf256.h"

#include <utility>
#include <vector>

namespace graid::gf256 {

bool invert_matrix(std::span<const std::uint8_t> in, std::span<std::uint8_t> out, std::size_t n) {
  if (n == 0 || in.size() < n * n || out.size() < n * n) return false;
  // Work on a copy so `in` stays const; the matrices are at most 33x33, so this is cheap and off
  // the data path.
  std::vector<std::uint8_t> m(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n * n));
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t c = 0; c < n; ++c)
      out[r * n + c] = r == c ? 1 : 0;
  }
  for (std::size_t col = 0; col < n; ++col) {
    // Find a pivot: any non-zero entry at or below the diagonal (no numerical concerns in a
    // finite field, so the first one will do).
    std::size_t pivot = col;
    while (pivot < n && m[pivot * n + col] == 0)
      ++pivot;
    if (pivot == n) return false;
    if (pivot != col) {
      for (std::size_t c = 0; c < n; ++c) {
        std::swap(m[pivot * n + c], m[col * n + c]);
        std::swap(out[pivot * n + c], out[col * n + c]);
      }
    }
    const std::uint8_t scale = inv(m[col * n + col]);
    for (std::size_t c = 0; c < n; ++c) {
      m[col * n + c] = mul(m[col * n + c], scale);
      out[col * n + c] = mul(out[col * n + c], scale);
    }
    for (std::size_t r = 0; r < n; ++r) {
      const std::uint8_t factor = m[r * n + col];
      if (r == col || factor == 0) continue;
      for (std::size_t c = 0; c < n; ++c) {
        m[r * n + c] ^= mul(factor, m[col * n + c]);
        out[r * n + c] ^= mul(factor, out[col * n + c]);
      }
    }
  }
  return true;
}

void multiply_matrix(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b,
                     std::span<std::uint8_t> out, std::size_t rows, std::size_t inner,
                     std::size_t cols) {
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      std::uint8_t sum = 0;
      for (std::size_t i = 0; i < inner; ++i)
        sum ^= mul(a[r * inner + i], b[i * cols + c]);
      out[r * cols + c] = sum;
    }
  }
}

}  // namespace graid::gf256
