#include "kernel_batch.h"

#include <algorithm>

namespace graid::kernels {
namespace {

constexpr std::uint8_t gf_exp(unsigned n) {
  return kHostGfTables.exp[n % 255];
}
constexpr std::uint8_t gf_inv(std::uint8_t a) {  // REQUIRES: a != 0
  return kHostGfTables.exp[255 - kHostGfTables.log[a]];
}
constexpr std::uint8_t gf_div(std::uint8_t a, std::uint8_t b) {  // REQUIRES: b != 0
  return gf_mul(kHostGfTables, a, gf_inv(b));
}

void set_row(StripePlan& plan, unsigned r, std::uint32_t chunk, std::uint8_t cp, std::uint8_t cq) {
  plan.out[r] = static_cast<std::uint8_t>(chunk);
  plan.coef[r][0] = cp;
  plan.coef[r][1] = cq;
}

std::uint32_t all_data(std::uint32_t k) {
  return k >= 32 ? ~0u : (1u << k) - 1;
}

}  // namespace

StripePlan plan_stripe(const StripeJob& job) noexcept {
  StripePlan plan;
  plan.len = job.len;
  plan.k = static_cast<std::uint8_t>(job.k);
  const std::uint32_t p = job.k;
  const std::uint32_t q = job.k + 1;
  const bool pq = job.scheme == ParityScheme::kPQ;
  plan.data_in = all_data(job.k);

  // Encode and verify (and reconstructing exactly the parities) compute P and Q of the data.
  auto parities_of_data = [&] {
    plan.rows = pq ? 2 : 1;
    set_row(plan, 0, p, 1, 0);
    if (pq) set_row(plan, 1, q, 0, 1);
  };

  if (job.op == ParityOp::kEncode) {
    parities_of_data();
  } else if (job.op == ParityOp::kVerify) {
    parities_of_data();
    plan.flags |= kCompare;
  } else if (job.missing_count == 1) {
    const std::uint32_t m = job.missing[0];
    plan.rows = 1;
    if (m == q) {
      set_row(plan, 0, q, 0, 1);  // Q alone: re-derive it from the data; P untouched
    } else if (m == p) {
      set_row(plan, 0, p, 1, 0);  // P alone: XOR of the data
    } else {
      plan.data_in &= ~(1u << m);  // a data chunk: XOR of the other data and P
      plan.p_in = true;
      set_row(plan, 0, m, 1, 0);
    }
  } else {
    const std::uint32_t a = std::min(job.missing[0], job.missing[1]);
    const std::uint32_t b = std::max(job.missing[0], job.missing[1]);
    plan.rows = 2;
    if (a == p) {  // P and Q: encode
      parities_of_data();
    } else if (b == q) {
      // D_a and Q: S_P = P ^ sum_{i!=a} D_i = D_a;  S_Q = sum_{i!=a} g^i D_i
      //   D_a = S_P,  Q = g^a * S_P ^ S_Q
      plan.data_in &= ~(1u << a);
      plan.p_in = true;
      set_row(plan, 0, a, 1, 0);
      set_row(plan, 1, q, gf_exp(a), 1);
    } else if (b == p) {
      // D_a and P: S_Q = Q ^ sum_{i!=a} g^i D_i = g^a D_a;  S_P = sum_{i!=a} D_i
      //   D_a = g^-a * S_Q,  P = S_P ^ D_a = S_P ^ g^-a * S_Q
      const std::uint8_t g_minus_a = gf_inv(gf_exp(a));
      plan.data_in &= ~(1u << a);
      plan.q_in = true;
      set_row(plan, 0, a, 0, g_minus_a);
      set_row(plan, 1, p, 1, g_minus_a);
    } else {
      // D_x and D_y, x = a < y = b: S_P = Pxy, S_Q = Qxy (Anvin §4)
      //   D_x = A * Pxy ^ B * Qxy,  A = g^(y-x) / (g^(y-x) ^ 1),  B = g^-x / (g^(y-x) ^ 1)
      //   D_y = Pxy ^ D_x = (A ^ 1) * Pxy ^ B * Qxy
      const std::uint8_t g_yx = gf_exp(b - a);
      const std::uint8_t denom = g_yx ^ 1;  // non-zero: g^(y-x) != 1 for 0 < y-x < 255
      const std::uint8_t coef_a = gf_div(g_yx, denom);
      const std::uint8_t coef_b = gf_div(gf_inv(gf_exp(a)), denom);
      plan.data_in &= ~((1u << a) | (1u << b));
      plan.p_in = true;
      plan.q_in = true;
      set_row(plan, 0, a, coef_a, coef_b);
      set_row(plan, 1, b, coef_a ^ 1, coef_b);
    }
  }

  for (std::uint32_t r = 0; r < plan.rows; ++r) {
    if (plan.coef[r][1] != 0) plan.flags |= kNeedQ;
  }
  plan.read_mask = plan.data_in;
  if (plan.p_in) plan.read_mask |= std::uint64_t{1} << p;
  if (plan.q_in) plan.read_mask |= std::uint64_t{1} << q;
  if (plan.flags & kCompare) {
    for (std::uint32_t r = 0; r < plan.rows; ++r)
      plan.read_mask |= std::uint64_t{1} << plan.out[r];
  }
  return plan;
}

ChunkAddrs host_addrs(const StripeJob& job) noexcept {
  ChunkAddrs addrs{};
  for (std::uint32_t c = 0; c < job.chunk_count(); ++c)
    addrs[c] = reinterpret_cast<std::uint8_t*>(job.chunk[c].data());
  return addrs;
}

KernelStripe materialize(const StripePlan& plan, const ChunkAddrs& addrs) noexcept {
  KernelStripe s{};
  s.len = plan.len;
  s.k = plan.k;
  s.rows = plan.rows;
  s.flags = plan.flags;
  bool aligned = true;
  auto note = [&aligned](const void* ptr) {
    aligned = aligned && (reinterpret_cast<std::uintptr_t>(ptr) % kLaneBytes) == 0;
  };
  for (std::uint32_t i = 0; i < plan.k; ++i) {
    if ((plan.data_in >> i) & 1u) {
      s.data[i] = addrs[i];
      note(addrs[i]);
    }
  }
  if (plan.p_in) {
    s.p_in = addrs[plan.k];
    note(s.p_in);
  }
  if (plan.q_in) {
    s.q_in = addrs[plan.k + 1u];
    note(s.q_in);
  }
  for (std::uint32_t r = 0; r < plan.rows; ++r) {
    s.out[r] = addrs[plan.out[r]];
    note(s.out[r]);
    s.coef[r][0] = plan.coef[r][0];
    s.coef[r][1] = plan.coef[r][1];
    make_nibble_table(s.coef[r][0], s.nibble[r][0]);
    make_nibble_table(s.coef[r][1], s.nibble[r][1]);
  }
  if (aligned) s.flags |= kAligned16;
  return s;
}

void KernelBatchBuilder::clear() noexcept {
  stripes_.clear();
  tile_begin_.assign(1, 0);
  mismatch_.clear();
}

void KernelBatchBuilder::add(const KernelStripe& stripe) {
  stripes_.push_back(stripe);
  tile_begin_.push_back(tile_begin_.back() + tiles_for(stripe.len));
  mismatch_.push_back(0);
}

KernelBatch KernelBatchBuilder::view() noexcept {
  KernelBatch b;
  b.stripes = stripes_.data();
  b.tile_begin = tile_begin_.data();
  b.mismatch = mismatch_.data();
  b.stripe_count = size();
  b.tile_count = tile_count();
  return b;
}

Status validate_jobs(std::span<const StripeJob> jobs) {
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    Status status = validate_job(jobs[i]);
    if (!status.is_ok()) {
      return make_error(status.code(), "job {} (k={} len={}): {}", i, jobs[i].k, jobs[i].len,
                        status.message());
    }
  }
  return Status::ok();
}

}  // namespace graid::kernels
