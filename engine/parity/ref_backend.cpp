// The reference parity backend: the textbook RAID5/RAID6 formulas, one byte at a time.
//
// Written to be read and trusted, not to be fast: it is the oracle the cpu and cuda backends are
// tested against. The recovery cases follow H. Peter Anvin, "The mathematics of RAID-6" (the
// document behind md's raid6 recovery code).

#include <algorithm>
#include <cstdint>
#include <memory>

#include "graid/parity.h"
#include "parity/gf256.h"
#include "parity/parity_internal.h"

namespace graid {
namespace {

using gf256::mul;

std::uint8_t byte_at(const StripeJob& job, std::uint32_t chunk, std::size_t offset) {
  return std::to_integer<std::uint8_t>(job.chunk[chunk].data()[offset]);
}

void set_byte(const StripeJob& job, std::uint32_t chunk, std::size_t offset, std::uint8_t value) {
  job.chunk[chunk].data()[offset] = std::byte{value};
}

// P and Q of the data bytes at `offset`, treating the data chunks in `skip` as zero.
struct Syndromes {
  std::uint8_t p = 0;
  std::uint8_t q = 0;
};

Syndromes syndromes(const StripeJob& job, std::size_t offset, std::uint32_t skip_a = UINT32_MAX,
                    std::uint32_t skip_b = UINT32_MAX) {
  Syndromes s;
  for (std::uint32_t i = 0; i < job.k; ++i) {
    if (i == skip_a || i == skip_b) continue;
    const std::uint8_t d = byte_at(job, i, offset);
    s.p ^= d;
    s.q ^= mul(gf256::exp(i), d);  // Q = sum of g^i * D_i
  }
  return s;
}

void encode(const StripeJob& job) {
  for (std::size_t b = 0; b < job.len; ++b) {
    const Syndromes s = syndromes(job, b);
    set_byte(job, job.k, b, s.p);
    if (job.scheme == ParityScheme::kPQ) set_byte(job, job.k + 1, b, s.q);
  }
}

bool verify(const StripeJob& job) {
  for (std::size_t b = 0; b < job.len; ++b) {
    const Syndromes s = syndromes(job, b);
    if (s.p != byte_at(job, job.k, b)) return false;
    if (job.scheme == ParityScheme::kPQ && s.q != byte_at(job, job.k + 1, b)) return false;
  }
  return true;
}

// RAID5, or RAID6 with a data chunk or P missing and P usable: the missing chunk is the XOR of
// all the other chunks of the P equation (D0..Dk-1, P).
void reconstruct_by_xor(const StripeJob& job, std::uint32_t missing) {
  for (std::size_t b = 0; b < job.len; ++b) {
    std::uint8_t x = 0;
    for (std::uint32_t i = 0; i <= job.k; ++i) {
      if (i != missing) x ^= byte_at(job, i, b);
    }
    set_byte(job, missing, b, x);
  }
}

// RAID6 with two chunks missing, a < b. The four cases of Anvin's paper.
void reconstruct_two(const StripeJob& job, std::uint32_t a, std::uint32_t b) {
  const std::uint32_t p = job.k;
  const std::uint32_t q = job.k + 1;
  if (a == p && b == q) {  // both parities: re-encode
    encode(job);
    return;
  }
  if (b == q) {  // data a and Q: a from P, then Q
    for (std::size_t o = 0; o < job.len; ++o) {
      const Syndromes s = syndromes(job, o, a);
      const std::uint8_t da = s.p ^ byte_at(job, p, o);
      set_byte(job, a, o, da);
      set_byte(job, q, o, s.q ^ mul(gf256::exp(a), da));
    }
    return;
  }
  if (b == p) {  // data a and P: D_a = (Q + Q_a) * g^-a, then P
    const std::uint8_t g_minus_a = gf256::inv(gf256::exp(a));
    for (std::size_t o = 0; o < job.len; ++o) {
      const Syndromes s = syndromes(job, o, a);
      const std::uint8_t da = mul(s.q ^ byte_at(job, q, o), g_minus_a);
      set_byte(job, a, o, da);
      set_byte(job, p, o, s.p ^ da);
    }
    return;
  }
  // Two data chunks x = a < y = b:
  //   Pxy = P + sum_{i != x,y} D_i,  Qxy = Q + sum_{i != x,y} g^i D_i
  //   Dx  = A * Pxy + B * Qxy,   A = g^(y-x) / (g^(y-x) + 1),  B = g^(-x) / (g^(y-x) + 1)
  //   Dy  = Pxy + Dx
  const std::uint8_t g_yx = gf256::exp(b - a);
  const std::uint8_t denom = g_yx ^ 1;  // non-zero: g^(y-x) != 1 for 0 < y-x < 255
  const std::uint8_t coef_a = gf256::div(g_yx, denom);
  const std::uint8_t coef_b = gf256::div(gf256::inv(gf256::exp(a)), denom);
  for (std::size_t o = 0; o < job.len; ++o) {
    const Syndromes s = syndromes(job, o, a, b);
    const std::uint8_t pxy = byte_at(job, p, o) ^ s.p;
    const std::uint8_t qxy = byte_at(job, q, o) ^ s.q;
    const std::uint8_t dx = mul(coef_a, pxy) ^ mul(coef_b, qxy);
    set_byte(job, a, o, dx);
    set_byte(job, b, o, pxy ^ dx);
  }
}

void reconstruct(const StripeJob& job) {
  if (job.missing_count == 1) {
    const std::uint32_t m = job.missing[0];
    if (m == job.k + 1) {
      // Q alone: recompute it from the data (P is left untouched).
      for (std::size_t o = 0; o < job.len; ++o)
        set_byte(job, m, o, syndromes(job, o).q);
    } else {
      reconstruct_by_xor(job, m);
    }
    return;
  }
  const std::uint32_t a = std::min(job.missing[0], job.missing[1]);
  const std::uint32_t b = std::max(job.missing[0], job.missing[1]);
  reconstruct_two(job, a, b);
}

class RefBackend final : public ParityBackend {
 public:
  std::string_view name() const noexcept override { return "ref"; }
  ParityCaps caps() const noexcept override {
    return ParityCaps{.raid5 = true, .raid6 = true, .reconstruct = true, .verify = true};
  }

  Status execute(std::span<StripeJob> jobs) override {
    GRAID_RETURN_IF_ERROR(parity_detail::validate_batch(jobs));
    for (StripeJob& job : jobs) {
      switch (job.op) {
        case ParityOp::kEncode:
          encode(job);
          break;
        case ParityOp::kReconstruct:
          reconstruct(job);
          break;
        case ParityOp::kVerify:
          job.parity_ok = verify(job);
          break;
      }
    }
    return Status::ok();
  }
};

}  // namespace

std::unique_ptr<ParityBackend> make_ref_backend() {
  return std::make_unique<RefBackend>();
}

}  // namespace graid
