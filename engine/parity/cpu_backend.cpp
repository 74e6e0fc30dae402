// The cpu parity backend: ISA-L's SIMD kernels, selected at run time for this CPU.
//
//   encode        xor_gen (P) / P+Q by the kernel the thread's KernelSelector measures fastest
//                 among ISA-L's pq_gen variants (parity/kernel_selector.h)
//   verify        xor_check / pq_check (one read pass, nothing written, no scratch)
//   reconstruct   one chunk of the P equation (any data chunk or P) -> xor_gen over the others;
//                 P+Q -> pq_gen; anything else (Q alone, data+P, data+Q, data+data) -> decode
//                 coefficients from the inverted survivor matrix, then ec_encode_data.
//
// ISA-L's pq_gen needs len to be a multiple of 32 (and xor_gen/pq_check are only documented for
// aligned lengths), so every kernel runs over the largest 32-byte multiple of len and the last
// 0..31 bytes are finished by portable code with the same coefficients. ISA-L takes `int`
// lengths, so jobs over 1 GiB run in 1 GiB pieces.

#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "graid/parity.h"
#include "parity/cpu_kernels.h"
#include "parity/gf256.h"
#include "parity/kernel_selector.h"
#include "parity/parity_internal.h"

namespace graid {

namespace parity_detail {

std::span<const PqKernel> pq_kernels() {
  static const std::vector<PqKernel> kernels = [] {
    std::vector<PqKernel> k{{"isa-l", pq_gen}};
    // __builtin_cpu_supports checks that the OS saves the YMM state too (XGETBV).
    if (__builtin_cpu_supports("avx2")) k.push_back({"avx2", pq_gen_avx2});
    if (__builtin_cpu_supports("avx")) k.push_back({"avx", pq_gen_avx});
    if (__builtin_cpu_supports("sse4.1")) k.push_back({"sse", pq_gen_sse});
    k.push_back({"base", pq_gen_base});
    return k;
  }();
  return kernels;
}

namespace {
thread_local KernelSelector t_pq_selector(static_cast<std::uint32_t>(pq_kernels().size()));
}  // namespace

std::string_view current_pq_kernel() {
  return pq_kernels()[t_pq_selector.best()].name;
}

}  // namespace parity_detail

namespace {

using parity_detail::t_pq_selector;

constexpr std::size_t kIsalLenMultiple = 32;
constexpr std::size_t kIsalMaxPiece = std::size_t{1} << 30;  // fits ISA-L's int len

// Coefficient rows of the encode equations over D0..D(k-1): P (all ones) and Q (g^i).
constexpr std::array<std::uint8_t, kMaxDataChunks> make_ones() {
  std::array<std::uint8_t, kMaxDataChunks> row{};
  row.fill(1);
  return row;
}
constexpr std::array<std::uint8_t, kMaxDataChunks> make_q_row() {
  std::array<std::uint8_t, kMaxDataChunks> row{};
  for (std::size_t i = 0; i < row.size(); ++i)
    row[i] = gf256::exp(static_cast<unsigned>(i));
  return row;
}
constexpr std::array<std::uint8_t, kMaxDataChunks> kOnesRow = make_ones();
constexpr std::array<std::uint8_t, kMaxDataChunks> kQRow = make_q_row();

std::uint8_t* bytes(const ChunkView& chunk) noexcept {
  return reinterpret_cast<std::uint8_t*>(chunk.data());
}

// v[0..vects) = the job's chunks, `offset` bytes in.
void fill_vectors(const StripeJob& job, std::size_t offset, int vects,
                  std::array<void*, kMaxStripeChunks>& v) noexcept {
  for (int c = 0; c < vects; ++c)
    v[c] = bytes(job.chunk[c]) + offset;
}

// Calls run(offset, n) for consecutive pieces covering [0, prefix), each at most kIsalMaxPiece
// bytes (a multiple of 32). Stops at the first piece whose kernel reports failure.
template <typename Run>
bool for_each_piece(std::size_t prefix, Run&& run) {
  for (std::size_t offset = 0; offset < prefix; offset += kIsalMaxPiece) {
    const std::size_t n = std::min(kIsalMaxPiece, prefix - offset);
    if (!run(offset, static_cast<int>(n))) return false;
  }
  return true;
}

// Portable GF dot products for the bytes [from, to): dst[r][o] = sum_j rows[r][j] * src[j][o].
// Only ever runs on the < 32-byte tail that ISA-L does not cover.
void portable_dot(std::span<const std::uint8_t* const> rows, std::span<std::uint8_t* const> src,
                  std::span<std::uint8_t* const> dst, std::size_t from, std::size_t to) {
  for (std::size_t o = from; o < to; ++o) {
    for (std::size_t r = 0; r < rows.size(); ++r) {
      std::uint8_t acc = 0;
      for (std::size_t j = 0; j < src.size(); ++j)
        acc ^= gf256::mul(rows[r][j], src[j][o]);
      dst[r][o] = acc;
    }
  }
}

// ---- encode -------------------------------------------------------------------------------

Status encode(const StripeJob& job) {
  const bool pq = job.scheme == ParityScheme::kPQ;
  const int vects = static_cast<int>(job.chunk_count());
  const std::size_t prefix = job.len & ~(kIsalLenMultiple - 1);
  KernelSelector::Pick pick;
  auto gen = xor_gen;
  if (pq) {
    pick = t_pq_selector.next();
    gen = parity_detail::pq_kernels()[pick.index].gen;
  }
  const auto started =
      pick.timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  // Only the chunks in use are filled: a 4 KiB job feels every cycle spent around the kernel.
  std::array<void*, kMaxStripeChunks> v;  // NOLINT(cppcoreguidelines-pro-type-member-init)
  bool ok = true;
  if (prefix == job.len && prefix <= kIsalMaxPiece) {
    fill_vectors(job, 0, vects, v);  // the usual job: one call, no pieces, no tail
    ok = gen(vects, static_cast<int>(prefix), v.data()) == 0;
  } else {
    ok = for_each_piece(prefix, [&](std::size_t offset, int n) {
      fill_vectors(job, offset, vects, v);
      return gen(vects, n, v.data()) == 0;
    });
  }
  if (!ok) return make_error(Errc::kInternal, "ISA-L {} failed", pq ? "pq_gen" : "xor_gen");
  if (pick.timed && prefix > 0) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - started)
                        .count();
    t_pq_selector.record(pick.index, static_cast<std::uint64_t>(ns), prefix * job.k);
  }
  if (prefix < job.len) {
    std::array<std::uint8_t*, kMaxStripeChunks> chunks{};
    for (std::uint32_t c = 0; c < job.chunk_count(); ++c)
      chunks[c] = bytes(job.chunk[c]);
    const std::array<const std::uint8_t*, 2> rows{kOnesRow.data(), kQRow.data()};
    portable_dot(std::span(rows).first(job.parity_count()), std::span(chunks).first(job.k),
                 std::span(chunks).subspan(job.k, job.parity_count()), prefix, job.len);
  }
  return Status::ok();
}

// ---- verify -------------------------------------------------------------------------------

bool verify(const StripeJob& job) {
  const bool pq = job.scheme == ParityScheme::kPQ;
  const int vects = static_cast<int>(job.chunk_count());
  const std::size_t prefix = job.len & ~(kIsalLenMultiple - 1);
  // xor_check / pq_check return non-zero on a mismatch (or on an argument they refuse, which
  // validate_job has ruled out).
  std::array<void*, kMaxStripeChunks> v;  // NOLINT(cppcoreguidelines-pro-type-member-init)
  const bool prefix_ok = for_each_piece(prefix, [&](std::size_t offset, int n) {
    fill_vectors(job, offset, vects, v);
    return (pq ? pq_check(vects, n, v.data()) : xor_check(vects, n, v.data())) == 0;
  });
  if (!prefix_ok) return false;
  if (prefix == job.len) return true;

  // Recompute the tail's parity into a small stack buffer and compare.
  const std::size_t tail = job.len - prefix;
  std::array<std::array<std::uint8_t, kIsalLenMultiple>, 2> expect{};
  std::array<std::uint8_t*, kMaxDataChunks> data{};
  for (std::uint32_t c = 0; c < job.k; ++c)
    data[c] = bytes(job.chunk[c]) + prefix;
  const std::array<const std::uint8_t*, 2> rows{kOnesRow.data(), kQRow.data()};
  const std::array<std::uint8_t*, 2> dst{expect[0].data(), expect[1].data()};
  portable_dot(std::span(rows).first(job.parity_count()), std::span(data).first(job.k),
               std::span(dst).first(job.parity_count()), 0, tail);
  for (std::uint32_t r = 0; r < job.parity_count(); ++r) {
    if (std::memcmp(expect[r].data(), bytes(job.chunk[job.k + r]) + prefix, tail) != 0) {
      return false;
    }
  }
  return true;
}

// ---- reconstruct --------------------------------------------------------------------------

// Everything ec_encode_data needs to rebuild one missing set of a RAID6 stripe shape: which
// chunks to read, the coefficient rows over them, and ISA-L's expanded tables.
struct DecodePlan {
  std::uint32_t k = 0;  // 0: unused slot
  std::uint8_t rows = 0;
  std::array<std::uint8_t, 2> missing{};  // sorted
  std::array<std::uint8_t, kMaxDataChunks> sources{};
  std::array<std::uint8_t, 2 * kMaxDataChunks> coefs{};  // rows x k, row-major
  std::array<unsigned char, 32 * kMaxDataChunks * 2> tables{};
};

// Builds the plan from the (k+2) x k generator matrix
//     rows 0..k-1: identity (the data chunks), row k: all ones (P), row k+1: g^j (Q).
// The first k surviving rows S give survivors = S * D, so D = S^-1 * survivors and each missing
// row G[m] gives its chunk as (G[m] * S^-1) * survivors.
Status build_plan(std::uint32_t k, std::uint8_t rows, std::array<std::uint8_t, 2> missing,
                  DecodePlan& plan) {
  auto generator = [k](std::uint32_t row, std::uint32_t col) -> std::uint8_t {
    if (row < k) return row == col ? 1 : 0;
    if (row == k) return 1;
    return gf256::exp(col);
  };
  plan.k = k;
  plan.rows = rows;
  plan.missing = missing;
  std::uint32_t found = 0;
  for (std::uint32_t c = 0; c < k + 2 && found < k; ++c) {
    const bool is_missing = c == missing[0] || (rows == 2 && c == missing[1]);
    if (!is_missing) plan.sources[found++] = static_cast<std::uint8_t>(c);
  }
  std::array<unsigned char, kMaxDataChunks * kMaxDataChunks> survivors{};
  std::array<unsigned char, kMaxDataChunks * kMaxDataChunks> inverse{};
  for (std::uint32_t r = 0; r < k; ++r) {
    for (std::uint32_t c = 0; c < k; ++c)
      survivors[r * k + c] = generator(plan.sources[r], c);
  }
  if (gf_invert_matrix(survivors.data(), inverse.data(), static_cast<int>(k)) != 0) {
    return make_error(Errc::kInternal, "survivor matrix for k={} missing {},{} is singular", k,
                      missing[0], missing[1]);
  }
  for (std::uint32_t r = 0; r < rows; ++r) {
    for (std::uint32_t c = 0; c < k; ++c) {
      std::uint8_t sum = 0;
      for (std::uint32_t j = 0; j < k; ++j) {
        sum ^= gf256::mul(generator(missing[r], j), inverse[j * k + c]);
      }
      plan.coefs[r * k + c] = sum;
    }
  }
  ec_init_tables(static_cast<int>(k), rows, plan.coefs.data(), plan.tables.data());
  return Status::ok();
}

// A few recent plans per thread. A rebuild or degraded read hits the same (k, missing set) for
// every stripe, so the O(k^3) inversion and table expansion are paid once, not per stripe or
// per execute() call. Per thread, so concurrent execute() calls share nothing.
class PlanCache {
 public:
  Result<const DecodePlan*> get(std::uint32_t k, std::uint8_t rows,
                                std::array<std::uint8_t, 2> missing) {
    for (const DecodePlan& plan : plans_) {
      if (plan.k == k && plan.rows == rows && plan.missing == missing) return &plan;
    }
    DecodePlan& slot = plans_[next_];
    next_ = (next_ + 1) % plans_.size();
    Status status = build_plan(k, rows, missing, slot);
    if (!status.is_ok()) {
      slot.k = 0;
      return status;
    }
    return &slot;
  }

 private:
  std::array<DecodePlan, 8> plans_{};
  std::size_t next_ = 0;
};

thread_local PlanCache t_plan_cache;

// Rebuilds chunk `missing` of the P equation (D0..D(k-1), P) as the XOR of the others.
Status reconstruct_by_xor(const StripeJob& job, std::uint32_t missing) {
  std::array<std::uint8_t*, kMaxStripeChunks> src{};
  std::uint32_t n = 0;
  for (std::uint32_t c = 0; c <= job.k; ++c) {
    if (c != missing) src[n++] = bytes(job.chunk[c]);
  }
  std::uint8_t* const dst = bytes(job.chunk[missing]);
  const std::size_t prefix = job.len & ~(kIsalLenMultiple - 1);
  const bool ok = for_each_piece(prefix, [&](std::size_t offset, int len) {
    std::array<void*, kMaxStripeChunks> v{};
    for (std::uint32_t j = 0; j < n; ++j)
      v[j] = src[j] + offset;
    v[n] = dst + offset;
    return xor_gen(static_cast<int>(n + 1), len, v.data()) == 0;
  });
  if (!ok) return make_error(Errc::kInternal, "ISA-L xor_gen failed");
  const std::array<const std::uint8_t*, 1> rows{kOnesRow.data()};
  const std::array<std::uint8_t*, 1> dsts{dst};
  portable_dot(rows, std::span(src).first(n), dsts, prefix, job.len);
  return Status::ok();
}

Status reconstruct_by_plan(const StripeJob& job) {
  std::array<std::uint8_t, 2> missing{job.missing[0], 0};
  if (job.missing_count == 2) {
    missing = {std::min(job.missing[0], job.missing[1]), std::max(job.missing[0], job.missing[1])};
  }
  Result<const DecodePlan*> found = t_plan_cache.get(job.k, job.missing_count, missing);
  if (!found.is_ok()) return found.status();
  const DecodePlan& plan = **found;

  std::array<unsigned char*, kMaxDataChunks> src{};
  for (std::uint32_t j = 0; j < job.k; ++j)
    src[j] = bytes(job.chunk[plan.sources[j]]);
  std::array<unsigned char*, 2> dst{bytes(job.chunk[missing[0]]), nullptr};
  if (plan.rows == 2) dst[1] = bytes(job.chunk[missing[1]]);

  const std::size_t prefix = job.len & ~(kIsalLenMultiple - 1);
  (void)for_each_piece(prefix, [&](std::size_t offset, int len) {
    std::array<unsigned char*, kMaxDataChunks> s{};
    std::array<unsigned char*, 2> d{};
    for (std::uint32_t j = 0; j < job.k; ++j)
      s[j] = src[j] + offset;
    for (std::uint32_t r = 0; r < plan.rows; ++r)
      d[r] = dst[r] + offset;
    // ec_encode_data reports nothing; its inputs are checked above.
    ec_encode_data(len, static_cast<int>(job.k), plan.rows,
                   const_cast<unsigned char*>(plan.tables.data()), s.data(), d.data());
    return true;
  });
  const std::array<const std::uint8_t*, 2> rows{plan.coefs.data(), plan.coefs.data() + job.k};
  portable_dot(std::span(rows).first(plan.rows), std::span(src).first(job.k),
               std::span(dst).first(plan.rows), prefix, job.len);
  return Status::ok();
}

Status reconstruct(const StripeJob& job) {
  const std::uint32_t p = job.k;
  const std::uint32_t q = job.k + 1;
  if (job.missing_count == 1 && job.missing[0] <= p) {
    return reconstruct_by_xor(job, job.missing[0]);
  }
  if (job.missing_count == 2 && std::min(job.missing[0], job.missing[1]) == p &&
      std::max(job.missing[0], job.missing[1]) == q) {
    return encode(job);  // both parities: pq_gen writes exactly the two missing chunks
  }
  return reconstruct_by_plan(job);
}

class CpuBackend final : public ParityBackend {
 public:
  std::string_view name() const noexcept override { return "cpu"; }
  ParityCaps caps() const noexcept override {
    return ParityCaps{.raid5 = true, .raid6 = true, .reconstruct = true, .verify = true};
  }

  Status execute(std::span<StripeJob> jobs) override {
    GRAID_RETURN_IF_ERROR(parity_detail::validate_batch(jobs));
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      StripeJob& job = jobs[i];
      Status status;
      switch (job.op) {
        case ParityOp::kEncode:
          status = encode(job);
          break;
        case ParityOp::kReconstruct:
          status = reconstruct(job);
          break;
        case ParityOp::kVerify:
          job.parity_ok = verify(job);
          break;
      }
      if (!status.is_ok()) {
        return make_error(status.code(), "job {}: {}", i, status.message());
      }
    }
    return Status::ok();
  }
};

}  // namespace

std::unique_ptr<ParityBackend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace graid
