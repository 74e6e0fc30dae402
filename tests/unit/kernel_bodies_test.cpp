// The GPU kernel bodies (kernels/parity_kernels.h), run on the host by the emulator, against the
// `ref` backend byte for byte: every k, lengths on and off the 16-byte lane and 4 KiB tile
// boundaries, every RAID5 failure and every RAID6 failure pair for several k, verify, mixed-shape
// batches, and the byte path for unaligned pointers. No GPU or nvcc needed: this is the CI half of
// the GPU backend's correctness; the device tests only have to show the device runs these bodies.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "graid/parity.h"
#include "kernels/cuda_backend.h"
#include "kernels/host_emulator.h"
#include "kernels/kernel_batch.h"
#include "kernels/parity_kernels.h"
#include "parity/gf256.h"
#include "parity/stripe_buffers.h"

namespace graid::kernels {
namespace {

using parity_testing::fill_pseudo_random;
using parity_testing::StripeBuffers;

// Chunks get this many bytes past len, so a write beyond len would show.
constexpr std::size_t kSlack = 48;

std::uint32_t parity_count(ParityScheme scheme) {
  return scheme == ParityScheme::kPQ ? 2 : 1;
}

StripeBuffers random_stripe(std::uint32_t chunks, std::size_t size, std::uint64_t seed) {
  Result<StripeBuffers> made = StripeBuffers::make(chunks, size);
  EXPECT_TRUE(made.is_ok()) << made.status().to_string();
  StripeBuffers s = std::move(made).value();
  for (std::uint32_t i = 0; i < chunks; ++i)
    fill_pseudo_random(s.bytes(i), seed * 977 + i);
  return s;
}

void copy_stripe(StripeBuffers& from, StripeBuffers& to) {
  for (std::uint32_t i = 0; i < from.chunks(); ++i)
    std::memcpy(to.bytes(i).data(), from.bytes(i).data(), from.chunk_size());
}

// Every byte of every chunk (slack included) equal; names the first difference.
::testing::AssertionResult same_stripes(StripeBuffers& a, StripeBuffers& b) {
  for (std::uint32_t c = 0; c < a.chunks(); ++c) {
    auto x = a.bytes(c);
    auto y = b.bytes(c);
    for (std::size_t o = 0; o < x.size(); ++o) {
      if (x[o] != y[o]) {
        return ::testing::AssertionFailure()
               << "chunk " << c << " byte " << o << ": kernel " << std::to_integer<int>(x[o])
               << " ref " << std::to_integer<int>(y[o]);
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// One stripe twice: `kern` for the host-run kernel bodies, `ref` for the reference backend.
struct Twin {
  StripeBuffers kern;
  StripeBuffers ref;
  StripeJob kern_job;
  StripeJob ref_job;

  Twin(ParityOp op, ParityScheme scheme, std::uint32_t k, std::size_t len, std::uint64_t seed)
      : kern(random_stripe(k + parity_count(scheme), len + kSlack, seed)),
        ref(random_stripe(k + parity_count(scheme), len + kSlack, seed)) {
    kern_job = kern.job(op, scheme, k, len);
    ref_job = ref.job(op, scheme, k, len);
  }
  void set_missing(std::initializer_list<std::uint8_t> missing) {
    for (StripeJob* j : {&kern_job, &ref_job}) {
      j->missing_count = static_cast<std::uint8_t>(missing.size());
      std::copy(missing.begin(), missing.end(), j->missing.begin());
    }
  }
};

// Encodes `s`'s parity with ref (so reconstruct and verify start from a consistent stripe).
void encode_with_ref(StripeBuffers& s, ParityScheme scheme, std::uint32_t k, std::size_t len) {
  StripeJob job = s.job(ParityOp::kEncode, scheme, k, len);
  ASSERT_TRUE(make_ref_backend()->execute(std::span(&job, 1)).is_ok());
}

// Every body test runs with both ways of multiplying by a constant (GfMul).
class KernelBodies : public ::testing::TestWithParam<GfMul> {
 protected:
  std::unique_ptr<ParityBackend> kern_ = make_kernel_host_backend(GetParam());
  std::unique_ptr<ParityBackend> ref_ = make_ref_backend();

  // Runs the twin's job on both backends and compares every byte and parity_ok.
  void run_and_compare(Twin& t, const std::string& what) {
    ASSERT_TRUE(kern_->execute(std::span(&t.kern_job, 1)).is_ok()) << what;
    ASSERT_TRUE(ref_->execute(std::span(&t.ref_job, 1)).is_ok()) << what;
    EXPECT_TRUE(same_stripes(t.kern, t.ref)) << what;
    EXPECT_EQ(t.kern_job.parity_ok, t.ref_job.parity_ok) << what;
  }

  // Encodes both stripes, scribbles over the missing chunks (the same garbage in both), runs
  // the reconstruct on both and compares; also checks the rebuilt chunks equal the originals.
  void reconstruct_case(ParityScheme scheme, std::uint32_t k, std::size_t len,
                        std::initializer_list<std::uint8_t> missing, std::uint64_t seed);
};

// ---- GF arithmetic ---------------------------------------------------------------------------

TEST(KernelGf, TablesMatchTheEngineField) {
  for (unsigned i = 0; i < 510; ++i)
    ASSERT_EQ(kHostGfTables.exp[i], gf256::exp(i)) << i;
  for (unsigned a = 1; a < 256; ++a)
    ASSERT_EQ(kHostGfTables.log[a], gf256::log(static_cast<std::uint8_t>(a))) << a;
}

// Whether `mul` (the four bytes of a word times the constant c) matches the engine's byte
// multiply for every byte value. Four different bytes per word, so a mix-up between byte lanes
// shows; `salt` varies the other three bytes between the forms checked.
template <typename Mul>
::testing::AssertionResult word_multiply_matches(std::uint8_t c, Mul&& mul, unsigned salt) {
  for (unsigned a = 0; a < 256; ++a) {
    const std::uint32_t v = a | (((a ^ salt) & 0xffu) << 8) | (((a * (salt | 1u)) & 0xffu) << 16) |
                            (((a + salt) & 0xffu) << 24);
    const std::uint32_t got = mul(v);
    for (unsigned b = 0; b < 4; ++b) {
      const auto byte = static_cast<std::uint8_t>(v >> (8 * b));
      if (static_cast<std::uint8_t>(got >> (8 * b)) != gf256::mul(c, byte)) {
        return ::testing::AssertionFailure() << "c=" << unsigned{c} << " a=" << a << " lane " << b;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(KernelGf, WordMultipliesMatchByteMultiplies) {
  for (unsigned c = 0; c < 256; ++c) {
    const auto cc = static_cast<std::uint8_t>(c);
    const unsigned log_c = kHostGfTables.log[cc];
    ASSERT_TRUE(word_multiply_matches(
        cc, [&](std::uint32_t v) { return gf_mul_x4(kHostGfTables, v, cc, log_c); }, 0x5a))
        << "log/exp";
    ASSERT_TRUE(word_multiply_matches(
        cc, [&](std::uint32_t v) { return gf_mul_x4_bitserial(v, cc); }, 0xa5))
        << "bit-serial";
    std::uint32_t nib[8];
    make_nibble_table(cc, nib);
    ASSERT_TRUE(word_multiply_matches(
        cc, [&](std::uint32_t v) { return gf_mul_x4_nibble(nib, v); }, 0x3c))
        << "nibble";
    const auto x = static_cast<std::uint8_t>(c);
    ASSERT_EQ(gf_mul2(x), gf256::mul(2, x)) << c;
    ASSERT_EQ(gf_mul(kHostGfTables, x, 0x8e), gf256::mul(x, 0x8e)) << c;
  }
  const std::uint32_t v = 0x80ff0140u;
  std::uint32_t expect = 0;
  for (unsigned b = 0; b < 4; ++b)
    expect |= std::uint32_t{gf256::mul(2, static_cast<std::uint8_t>(v >> (8 * b)))} << (8 * b);
  EXPECT_EQ(gf_mul2_x4(v), expect);
}

// ---- encode ----------------------------------------------------------------------------------

const std::vector<std::size_t>& lengths() {
  // 1-byte and sub-lane stripes, lane (16) and cache-line (64) boundaries +-1, a tile (4096)
  // and a bit, several tiles with a ragged end.
  static const std::vector<std::size_t> l{1,   7,   15,   16,   17,   63,   64,    65,
                                          100, 255, 4095, 4096, 4097, 5000, 12345, 16384 + 48};
  return l;
}

TEST_P(KernelBodies, EncodeEveryKAndLength) {
  for (ParityScheme scheme : {ParityScheme::kP, ParityScheme::kPQ}) {
    for (std::uint32_t k = kMinDataChunks; k <= kMaxDataChunks; ++k) {
      for (std::size_t len : lengths()) {
        if (k > 8 && len > 5000 && k % 5 != 0) continue;  // big k x big len: sampled
        Twin t(ParityOp::kEncode, scheme, k, len, k * 1000 + len);
        run_and_compare(t, fmt::format("encode {} k={} len={}",
                                       scheme == ParityScheme::kPQ ? "PQ" : "P", k, len));
      }
    }
  }
}

// ---- reconstruct -----------------------------------------------------------------------------

void KernelBodies::reconstruct_case(ParityScheme scheme, std::uint32_t k, std::size_t len,
                                    std::initializer_list<std::uint8_t> missing,
                                    std::uint64_t seed) {
  Twin t(ParityOp::kReconstruct, scheme, k, len, seed);
  encode_with_ref(t.kern, scheme, k, len);
  copy_stripe(t.kern, t.ref);
  Result<StripeBuffers> original_made = StripeBuffers::make(t.kern.chunks(), t.kern.chunk_size());
  ASSERT_TRUE(original_made.is_ok());
  StripeBuffers original = std::move(original_made).value();
  copy_stripe(t.kern, original);
  for (std::uint8_t m : missing) {
    fill_pseudo_random(t.kern.bytes(m).first(len), seed ^ 0xdead);
    fill_pseudo_random(t.ref.bytes(m).first(len), seed ^ 0xdead);
  }
  t.set_missing(missing);
  std::string what = fmt::format("reconstruct k={} len={} missing", k, len);
  for (std::uint8_t m : missing)
    what += fmt::format(" {}", m);
  run_and_compare(t, what);
  EXPECT_TRUE(same_stripes(t.kern, original)) << what << " (against the original stripe)";
}

TEST_P(KernelBodies, Raid5EveryFailure) {
  for (std::uint32_t k : {2u, 3u, 5u, 8u, 16u, 31u}) {
    for (std::size_t len : {std::size_t{1}, std::size_t{33}, std::size_t{4096 + 17}}) {
      for (std::uint32_t m = 0; m <= k; ++m) {
        reconstruct_case(ParityScheme::kP, k, len, {static_cast<std::uint8_t>(m)},
                         k * 131 + m + len);
      }
    }
  }
}

TEST_P(KernelBodies, Raid6EverySingleFailure) {
  for (std::uint32_t k : {2u, 4u, 9u, 31u}) {
    for (std::uint32_t m = 0; m < k + 2; ++m) {
      reconstruct_case(ParityScheme::kPQ, k, 4096 + 70, {static_cast<std::uint8_t>(m)}, k * 17 + m);
    }
  }
}

TEST_P(KernelBodies, Raid6EveryFailurePair) {
  // All four kinds of pair (data/data, data/P, data/Q, P/Q), both orders of `missing`.
  for (std::uint32_t k : {2u, 3u, 4u, 7u, 12u, 31u}) {
    const std::size_t len = k >= 12 ? 161 : 4096 + 33;  // k=31 has 528 pairs: keep them short
    for (std::uint32_t a = 0; a < k + 2; ++a) {
      for (std::uint32_t b = a + 1; b < k + 2; ++b) {
        const bool swap = ((a + b) & 1) != 0;
        const auto x = static_cast<std::uint8_t>(swap ? b : a);
        const auto y = static_cast<std::uint8_t>(swap ? a : b);
        reconstruct_case(ParityScheme::kPQ, k, len, {x, y}, k * 1009 + a * 37 + b);
      }
    }
  }
}

TEST_P(KernelBodies, Raid6PairsAtLaneAndTileEdges) {
  for (std::size_t len : {std::size_t{16}, std::size_t{17}, std::size_t{4095}, std::size_t{8192},
                          std::size_t{8192 + 15}}) {
    reconstruct_case(ParityScheme::kPQ, 6, len, {1, 4}, len);
    reconstruct_case(ParityScheme::kPQ, 6, len, {2, 6}, len);
    reconstruct_case(ParityScheme::kPQ, 6, len, {7, 0}, len);
  }
}

// ---- verify ----------------------------------------------------------------------------------

TEST_P(KernelBodies, VerifyDetectsEveryCorruptionPlace) {
  for (ParityScheme scheme : {ParityScheme::kP, ParityScheme::kPQ}) {
    for (std::uint32_t k : {2u, 5u, 31u}) {
      const std::size_t len = 4096 + 37;  // wide lanes and a byte tail
      // Clean stripe: ok on both.
      {
        Twin t(ParityOp::kVerify, scheme, k, len, k);
        encode_with_ref(t.kern, scheme, k, len);
        copy_stripe(t.kern, t.ref);
        run_and_compare(t, "verify clean");
        EXPECT_TRUE(t.kern_job.parity_ok);
      }
      // One flipped bit in each chunk, in a wide lane, in the tail, at the first and last byte.
      for (std::uint32_t c = 0; c < k + parity_count(scheme); ++c) {
        for (std::size_t at : {std::size_t{0}, std::size_t{1000}, len - 20, len - 1}) {
          Twin t(ParityOp::kVerify, scheme, k, len, k + c);
          encode_with_ref(t.kern, scheme, k, len);
          t.kern.bytes(c)[at] ^= std::byte{0x10};
          copy_stripe(t.kern, t.ref);
          run_and_compare(t, fmt::format("verify corrupt chunk {} at {}", c, at));
          EXPECT_FALSE(t.kern_job.parity_ok) << "chunk " << c << " byte " << at;
        }
      }
      // A change past len is not part of the stripe: still ok.
      {
        Twin t(ParityOp::kVerify, scheme, k, len, 99);
        encode_with_ref(t.kern, scheme, k, len);
        t.kern.bytes(k)[len] ^= std::byte{1};
        copy_stripe(t.kern, t.ref);
        run_and_compare(t, "verify change past len");
        EXPECT_TRUE(t.kern_job.parity_ok);
      }
    }
  }
}

// ---- batches ---------------------------------------------------------------------------------

struct RandomJob {
  ParityOp op;
  ParityScheme scheme;
  std::uint32_t k;
  std::size_t len;
  std::uint8_t missing_count = 0;
  std::array<std::uint8_t, 2> missing{};
  bool corrupt = false;  // verify: flip a byte first
};

RandomJob random_job(std::mt19937_64& rng) {
  RandomJob j{};
  j.scheme = rng() % 2 ? ParityScheme::kPQ : ParityScheme::kP;
  j.k = 2 + static_cast<std::uint32_t>(rng() % 30);
  static const std::size_t lens[] = {1, 15, 16, 64, 100, 512, 4096, 4097, 8192, 9000, 65536 + 3};
  j.len = lens[rng() % std::size(lens)];
  switch (rng() % 3) {
    case 0:
      j.op = ParityOp::kEncode;
      break;
    case 1: {
      j.op = ParityOp::kReconstruct;
      const std::uint32_t chunks = j.k + parity_count(j.scheme);
      j.missing_count = j.scheme == ParityScheme::kPQ ? 1 + rng() % 2 : 1;
      j.missing[0] = static_cast<std::uint8_t>(rng() % chunks);
      do {
        j.missing[1] = static_cast<std::uint8_t>(rng() % chunks);
      } while (j.missing_count == 2 && j.missing[1] == j.missing[0]);
      break;
    }
    default:
      j.op = ParityOp::kVerify;
      j.corrupt = rng() % 2;
      break;
  }
  return j;
}

TEST_P(KernelBodies, MixedShapeBatchesInOneLaunch) {
  std::mt19937_64 rng(4242);
  for (int round = 0; round < 6; ++round) {
    const int n = 1 + static_cast<int>(rng() % 40);
    std::vector<std::unique_ptr<Twin>> twins;
    std::vector<StripeJob> kern_jobs;
    std::vector<StripeJob> ref_jobs;
    for (int i = 0; i < n; ++i) {
      const RandomJob r = random_job(rng);
      auto t = std::make_unique<Twin>(r.op, r.scheme, r.k, r.len, round * 100 + i);
      if (r.op != ParityOp::kEncode) {
        encode_with_ref(t->kern, r.scheme, r.k, r.len);
        if (r.corrupt)
          t->kern.bytes(static_cast<std::uint32_t>(rng() % r.k))[r.len / 2] ^= std::byte{4};
        copy_stripe(t->kern, t->ref);
      }
      if (r.op == ParityOp::kReconstruct) {
        t->kern_job.missing_count = t->ref_job.missing_count = r.missing_count;
        t->kern_job.missing = t->ref_job.missing = r.missing;
      }
      kern_jobs.push_back(t->kern_job);
      ref_jobs.push_back(t->ref_job);
      twins.push_back(std::move(t));
    }
    ASSERT_TRUE(kern_->execute(kern_jobs).is_ok());
    ASSERT_TRUE(ref_->execute(ref_jobs).is_ok());
    for (int i = 0; i < n; ++i) {
      EXPECT_TRUE(same_stripes(twins[i]->kern, twins[i]->ref)) << "round " << round << " job " << i;
      EXPECT_EQ(kern_jobs[i].parity_ok, ref_jobs[i].parity_ok) << "round " << round << " job " << i;
    }
  }
}

TEST_P(KernelBodies, BatchJobsMayShareSourceChunks) {
  // Two encodes reading the same data chunks (e.g. one zero page), writing different parity.
  Result<StripeBuffers> made = StripeBuffers::make(8, 4096 + 16);
  ASSERT_TRUE(made.is_ok());
  StripeBuffers s = std::move(made).value();
  for (std::uint32_t i = 0; i < 8; ++i)
    fill_pseudo_random(s.bytes(i), 70 + i);
  StripeJob a = s.job(ParityOp::kEncode, ParityScheme::kPQ, 4, 4096 + 16);  // D0..D3, P=4, Q=5
  StripeJob b = a;
  b.chunk[4] = s.view(6);
  b.chunk[5] = s.view(7);
  std::vector<StripeJob> jobs{a, b};
  ASSERT_TRUE(kern_->execute(jobs).is_ok());
  for (std::size_t o = 0; o < 4096 + 16; ++o) {
    ASSERT_EQ(s.bytes(4)[o], s.bytes(6)[o]) << o;
    ASSERT_EQ(s.bytes(5)[o], s.bytes(7)[o]) << o;
  }
  StripeJob check = s.job(ParityOp::kVerify, ParityScheme::kPQ, 4, 4096 + 16);
  ASSERT_TRUE(ref_->execute(std::span(&check, 1)).is_ok());
  EXPECT_TRUE(check.parity_ok);
}

TEST_P(KernelBodies, InvalidJobFailsTheBatchBeforeAnyWrite) {
  Twin good(ParityOp::kEncode, ParityScheme::kP, 4, 256, 1);
  Twin bad(ParityOp::kEncode, ParityScheme::kP, 4, 256, 2);
  bad.kern_job.k = 1;
  const std::vector<std::byte> parity_before(good.kern.bytes(4).begin(), good.kern.bytes(4).end());
  std::vector<StripeJob> jobs{good.kern_job, bad.kern_job};
  const Status st = kern_->execute(jobs);
  EXPECT_EQ(st.code(), Errc::kInvalidArgument);
  EXPECT_NE(st.message().find("job 1"), std::string::npos) << st.message();
  EXPECT_TRUE(std::equal(parity_before.begin(), parity_before.end(), good.kern.bytes(4).begin()));
}

// ---- descriptor and indexing -----------------------------------------------------------------

std::string gf_name(const ::testing::TestParamInfo<GfMul>& p) {
  return p.param == GfMul::kLogExp      ? "LogExp"
         : p.param == GfMul::kBitSerial ? "BitSerial"
                                        : "Nibble";
}
INSTANTIATE_TEST_SUITE_P(Gf, KernelBodies,
                         ::testing::Values(GfMul::kLogExp, GfMul::kBitSerial, GfMul::kNibble),
                         gf_name);

TEST(KernelDescriptor, TilesMapToTheirStripes) {
  KernelBatchBuilder builder;
  const std::vector<std::uint64_t> lens{1, kTileBytes, kTileBytes + 1, 3 * kTileBytes, 17};
  for (std::uint64_t len : lens) {
    KernelStripe s{};
    s.len = len;
    builder.add(s);
  }
  ASSERT_EQ(builder.tile_count(), 1u + 1u + 2u + 3u + 1u);
  const KernelBatch b = builder.view();
  const std::vector<std::uint32_t> expect{0, 1, 2, 2, 3, 3, 3, 4};
  for (std::uint64_t t = 0; t < b.tile_count; ++t)
    EXPECT_EQ(stripe_of_tile(b, t), expect[t]) << "tile " << t;
}

TEST(KernelDescriptor, PlansReadOnlyWhatTheyNeed) {
  Twin t(ParityOp::kReconstruct, ParityScheme::kPQ, 6, 64, 1);
  t.set_missing({2, 7});  // D2 and Q: reads the other data and P, not Q
  const StripePlan plan = plan_stripe(t.kern_job);
  EXPECT_EQ(plan.rows, 2);
  for (std::uint32_t c = 0; c < 8; ++c) {
    const bool should_read = c != 2 && c != 7;
    EXPECT_EQ(plan.reads(c), should_read) << c;
    EXPECT_EQ(plan.writes(c), c == 2 || c == 7) << c;
  }
  const KernelStripe s = materialize(plan, host_addrs(t.kern_job));
  EXPECT_TRUE(s.flags & kAligned16);
  EXPECT_TRUE(s.flags & kNeedQ);
  EXPECT_EQ(s.q_in, nullptr);

  Twin v(ParityOp::kVerify, ParityScheme::kP, 3, 64, 1);
  const StripePlan vp = plan_stripe(v.kern_job);
  EXPECT_TRUE(vp.flags & kCompare);
  EXPECT_FALSE(vp.flags & kNeedQ);  // RAID5 verify never runs the Q arithmetic
  for (std::uint32_t c = 0; c < 4; ++c) {
    EXPECT_TRUE(vp.reads(c)) << c;
    EXPECT_FALSE(vp.writes(c)) << c;
  }
}

TEST(KernelDescriptor, UnalignedPointersTakeTheBytePath) {
  // The engine's chunks are 64-byte aligned, but the descriptor does not rely on it: shift every
  // chunk by 3 bytes and the same job must give the same bytes through run_lane_bytes.
  constexpr std::uint32_t k = 5;
  constexpr std::size_t len = 300;
  StripeBuffers shifted = random_stripe(k + 2, len + 16, 5);
  StripeBuffers ref = random_stripe(k + 2, len + 16, 6);
  for (std::uint32_t c = 0; c < k; ++c)
    std::memcpy(ref.bytes(c).data(), shifted.bytes(c).data() + 3, len);
  StripeJob job = ref.job(ParityOp::kEncode, ParityScheme::kPQ, k, len);
  ASSERT_TRUE(make_ref_backend()->execute(std::span(&job, 1)).is_ok());

  ChunkAddrs addrs{};
  for (std::uint32_t c = 0; c < k + 2; ++c)
    addrs[c] = reinterpret_cast<std::uint8_t*>(shifted.bytes(c).data()) + 3;
  const KernelStripe s = materialize(plan_stripe(job), addrs);
  EXPECT_FALSE(s.flags & kAligned16);
  KernelBatchBuilder builder;
  builder.add(s);
  emulate_batch(builder.view());
  for (std::uint32_t c = k; c < k + 2; ++c) {
    EXPECT_EQ(std::memcmp(shifted.bytes(c).data() + 3, ref.bytes(c).data(), len), 0) << c;
  }
}

TEST(KernelBuild, CudaEntryPointsAnswerWithAValue) {
  // In every build: either the backend is compiled in, or it says so; never a crash. (With CUDA
  // on a machine without a GPU, cuda_backend_test checks the "no CUDA device" answer.)
  if (!cuda_backend_compiled()) {
    Result<std::unique_ptr<CudaBackend>> b = make_cuda_backend();
    ASSERT_FALSE(b.is_ok());
    EXPECT_EQ(b.status().code(), Errc::kUnsupported);
    EXPECT_EQ(b.status().message(), "built without CUDA");
    EXPECT_FALSE(cuda_devices().is_ok());
  }
  std::unique_ptr<ParityBackend> preferred = make_preferred_parity_backend();
  ASSERT_NE(preferred, nullptr);
  EXPECT_TRUE(preferred->name() == "cuda" || preferred->name() == "cpu") << preferred->name();
}

}  // namespace
}  // namespace graid::kernels
