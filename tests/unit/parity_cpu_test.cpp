// The cpu (ISA-L) backend against ISA-L called directly and against the ref backend, byte for
// byte: every k, lengths that are and are not multiples of 32/64, every RAID5/RAID6 failure
// combination (sampled deterministically for large k), verify, mixed batches and concurrent
// callers.

#include <gtest/gtest.h>
#include <isa-l/raid.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "graid/parity.h"
#include "parity/cpu_kernels.h"
#include "parity/kernel_selector.h"
#include "parity/stripe_buffers.h"
#include "parity_test_util.h"

namespace graid {
namespace {

using parity_testing::fill_pseudo_random;
using parity_testing::StripeBuffers;

using parity_testing::Bytes;
using parity_testing::make_stripe;
using parity_testing::parity_count;
using parity_testing::scheme_str;

StripeBuffers random_stripe(std::uint32_t chunks, std::size_t size, std::uint64_t seed) {
  StripeBuffers s = make_stripe(chunks, size);
  for (std::uint32_t i = 0; i < chunks; ++i)
    fill_pseudo_random(s.bytes(i), seed * 131 + i);
  return s;
}

std::vector<Bytes> snapshot(StripeBuffers& s) {
  std::vector<Bytes> out;
  for (std::uint32_t i = 0; i < s.chunks(); ++i) {
    auto b = s.bytes(i);
    out.emplace_back(b.begin(), b.end());
  }
  return out;
}

// Copies every byte (data, parity and the slack after len) of `from` into `to`.
void copy_stripe(StripeBuffers& from, StripeBuffers& to) {
  for (std::uint32_t i = 0; i < from.chunks(); ++i) {
    std::memcpy(to.bytes(i).data(), from.bytes(i).data(), from.chunk_size());
  }
}

void expect_same(StripeBuffers& a, StripeBuffers& b) {
  for (std::uint32_t i = 0; i < a.chunks(); ++i) {
    ASSERT_EQ(0, std::memcmp(a.bytes(i).data(), b.bytes(i).data(), a.chunk_size()))
        << "chunk " << i << " differs";
  }
}

Status run(ParityBackend& backend, StripeJob& job) {
  return backend.execute({&job, 1});
}

TEST(CpuBackend, EncodeMatchesRawIsalForEveryK) {
  auto cpu = make_cpu_backend();
  for (std::uint32_t k = kMinDataChunks; k <= kMaxDataChunks; ++k) {
    // Multiples of 32 (ISA-L's pq_gen needs that) incl. 544 and 4192, which are not of 64.
    std::vector<std::size_t> lens = {32, 512, 544, 4192, 65536};
    if (k == 4 || k == 16 || k == 31) lens.push_back(std::size_t{1} << 20);
    for (ParityScheme scheme : {ParityScheme::kP, ParityScheme::kPQ}) {
      for (std::size_t len : lens) {
        SCOPED_TRACE(testing::Message() << scheme_str(scheme) << " k=" << k << " len=" << len);
        const std::uint32_t chunks = k + parity_count(scheme);
        StripeBuffers ours = random_stripe(chunks, len + 64, k * 7919 + len);
        StripeBuffers theirs = make_stripe(chunks, len + 64);
        copy_stripe(ours, theirs);
        StripeJob job = ours.job(ParityOp::kEncode, scheme, k, len);
        ASSERT_TRUE(run(*cpu, job).is_ok());
        std::vector<void*> v(chunks);
        for (std::uint32_t c = 0; c < chunks; ++c)
          v[c] = theirs.bytes(c).data();
        const int rc = scheme == ParityScheme::kPQ
                           ? pq_gen(static_cast<int>(chunks), static_cast<int>(len), v.data())
                           : xor_gen(static_cast<int>(chunks), static_cast<int>(len), v.data());
        ASSERT_EQ(rc, 0);
        expect_same(ours, theirs);
      }
    }
  }
}

// Every P+Q kernel the backend may choose gives ISA-L's pq_gen bytes, so the choice changes
// speed only. The list always has ISA-L's own dispatch and the portable kernel.
TEST(CpuBackend, EveryPqKernelItMayChooseMatchesPqGen) {
  const auto kernels = parity_detail::pq_kernels();
  ASSERT_GE(kernels.size(), 2u);
  EXPECT_EQ(kernels.front().name, "isa-l");
  EXPECT_EQ(kernels.back().name, "base");
  for (const parity_detail::PqKernel& kernel : kernels) {
    for (std::uint32_t k : {2u, 3u, 4u, 7u, 16u, 31u}) {
      for (std::size_t len : {std::size_t{32}, std::size_t{4096}, std::size_t{65536 + 96}}) {
        SCOPED_TRACE(testing::Message() << kernel.name << " k=" << k << " len=" << len);
        const std::uint32_t chunks = k + 2;
        StripeBuffers ours = random_stripe(chunks, len, k * 104729 + len);
        StripeBuffers theirs = make_stripe(chunks, len);
        copy_stripe(ours, theirs);
        std::vector<void*> a(chunks), b(chunks);
        for (std::uint32_t c = 0; c < chunks; ++c) {
          a[c] = ours.bytes(c).data();
          b[c] = theirs.bytes(c).data();
        }
        ASSERT_EQ(kernel.gen(static_cast<int>(chunks), static_cast<int>(len), a.data()), 0);
        ASSERT_EQ(pq_gen(static_cast<int>(chunks), static_cast<int>(len), b.data()), 0);
        expect_same(ours, theirs);
      }
    }
  }
}

// The selector times each candidate for a round, then serves the cheapest per byte untimed for
// kExploitCalls calls, then looks again, so a change in costs changes the choice.
TEST(KernelSelectorTest, ServesTheCheapestPerByteAndLooksAgain) {
  KernelSelector sel(3);
  // ns per byte: candidate 0 costs 4, 1 costs 1, 2 costs 2 (bytes vary per call).
  const std::uint64_t cost[3] = {4, 1, 2};
  auto explore_round = [&](const std::uint64_t(&c)[3]) {
    for (std::uint32_t i = 0; i < 3; ++i) {
      for (std::uint32_t n = 0; n < KernelSelector::kExploreCalls; ++n) {
        const KernelSelector::Pick p = sel.next();
        ASSERT_TRUE(p.timed);
        ASSERT_EQ(p.index, i);
        const std::uint64_t bytes = 4096 * (n + 1);
        sel.record(p.index, c[i] * bytes, bytes);
      }
    }
  };
  EXPECT_EQ(sel.best(), 0u) << "candidate 0 until a round ends";
  explore_round(cost);
  EXPECT_EQ(sel.decisions(), 1u);
  EXPECT_EQ(sel.best(), 1u);
  for (std::uint32_t n = 0; n < KernelSelector::kExploitCalls; ++n) {
    const KernelSelector::Pick p = sel.next();
    ASSERT_FALSE(p.timed);
    ASSERT_EQ(p.index, 1u);
  }
  // A report nobody asked for (an untimed call) changes nothing.
  sel.record(1, 1, 1000000);
  const std::uint64_t changed[3] = {3, 5, 2};
  explore_round(changed);
  EXPECT_EQ(sel.decisions(), 2u);
  EXPECT_EQ(sel.best(), 2u);
}

// The backend's encodes stay right while its selector explores and decides (more calls than a
// round of timed calls over every kernel).
TEST(CpuBackend, PqEncodeIsRightThroughSelectorRounds) {
  auto cpu = make_cpu_backend();
  auto ref = make_ref_backend();
  const auto calls = 3 * KernelSelector::kExploreCalls * parity_detail::pq_kernels().size();
  for (std::size_t i = 0; i < calls; ++i) {
    const std::uint32_t k = 3 + static_cast<std::uint32_t>(i % 5);
    const std::size_t len = 4096 + 32 * (i % 3);
    StripeBuffers ours = random_stripe(k + 2, len, 7000 + i);
    StripeBuffers theirs = make_stripe(k + 2, len);
    copy_stripe(ours, theirs);
    StripeJob a = ours.job(ParityOp::kEncode, ParityScheme::kPQ, k, len);
    StripeJob b = theirs.job(ParityOp::kEncode, ParityScheme::kPQ, k, len);
    ASSERT_TRUE(run(*cpu, a).is_ok());
    ASSERT_TRUE(run(*ref, b).is_ok());
    SCOPED_TRACE(testing::Message()
                 << "call " << i << " kernel " << parity_detail::current_pq_kernel());
    expect_same(ours, theirs);
  }
  const auto name = parity_detail::current_pq_kernel();
  const auto kernels = parity_detail::pq_kernels();
  EXPECT_TRUE(std::any_of(kernels.begin(), kernels.end(),
                          [&](const parity_detail::PqKernel& k) { return k.name == name; }));
}

TEST(CpuBackend, EncodeMatchesRefForAnyLength) {
  auto cpu = make_cpu_backend();
  auto ref = make_ref_backend();
  for (std::uint32_t k = kMinDataChunks; k <= kMaxDataChunks; ++k) {
    std::vector<std::size_t> lens = {1, 31, 33, 100, 1000, 4113};
    if (k % 7 == 3) lens.push_back(65536 + 63);
    if (k == 5) lens.push_back((std::size_t{1} << 20) - 1);
    for (ParityScheme scheme : {ParityScheme::kP, ParityScheme::kPQ}) {
      for (std::size_t len : lens) {
        SCOPED_TRACE(testing::Message() << scheme_str(scheme) << " k=" << k << " len=" << len);
        const std::uint32_t chunks = k + parity_count(scheme);
        // 29 bytes of slack after len: the tail code must not spill into them.
        StripeBuffers ours = random_stripe(chunks, len + 29, k * 104729 + len);
        StripeBuffers theirs = make_stripe(chunks, len + 29);
        copy_stripe(ours, theirs);
        StripeJob a = ours.job(ParityOp::kEncode, scheme, k, len);
        StripeJob b = theirs.job(ParityOp::kEncode, scheme, k, len);
        ASSERT_TRUE(run(*cpu, a).is_ok());
        ASSERT_TRUE(run(*ref, b).is_ok());
        expect_same(ours, theirs);
      }
    }
  }
}

// The (sorted) failure sets to try for a stripe: all of them up to k = 16, a deterministic
// sample that still covers every chunk and both parities beyond.
std::vector<std::array<std::uint8_t, 2>> failure_pairs(std::uint32_t k) {
  const std::uint32_t n = k + 2;
  std::vector<std::array<std::uint8_t, 2>> pairs;
  for (std::uint32_t a = 0; a < n; ++a) {
    for (std::uint32_t b = a + 1; b < n; ++b) {
      const bool keep =
          k <= 16 || a >= k || b >= k || a == 0 || b == k - 1 || (a * 7 + b * 3) % 13 == 0;
      if (keep) pairs.push_back({static_cast<std::uint8_t>(a), static_cast<std::uint8_t>(b)});
    }
  }
  return pairs;
}

void check_reconstruct(ParityBackend& backend, StripeBuffers& s, const std::vector<Bytes>& good,
                       ParityScheme scheme, std::uint32_t k, std::size_t len,
                       std::initializer_list<std::uint8_t> missing) {
  for (std::uint8_t m : missing)
    fill_pseudo_random(s.bytes(m).first(len), 0xdead + m);
  StripeJob job = s.job(ParityOp::kReconstruct, scheme, k, len);
  job.missing_count = static_cast<std::uint8_t>(missing.size());
  std::copy(missing.begin(), missing.end(), job.missing.begin());
  const Status status = run(backend, job);
  ASSERT_TRUE(status.is_ok()) << status.to_string();
  // Every chunk, missing or not, byte for byte incl. the slack after len: the missing ones are
  // restored and nothing else was written.
  for (std::uint32_t c = 0; c < s.chunks(); ++c) {
    ASSERT_EQ(0, std::memcmp(good[c].data(), s.bytes(c).data(), good[c].size())) << "chunk " << c;
  }
}

TEST(CpuBackend, Raid5ReconstructsEveryChunk) {
  auto cpu = make_cpu_backend();
  for (std::uint32_t k : {2u, 3u, 5u, 8u, 16u, 31u}) {
    for (std::size_t len : {1u, 1000u, 4096u, 65536u + 5}) {
      StripeBuffers s = random_stripe(k + 1, len + 7, k + len);
      StripeJob encode = s.job(ParityOp::kEncode, ParityScheme::kP, k, len);
      ASSERT_TRUE(run(*cpu, encode).is_ok());
      const std::vector<Bytes> good = snapshot(s);
      for (std::uint8_t m = 0; m <= k; ++m) {
        SCOPED_TRACE(testing::Message() << "P k=" << k << " len=" << len << " missing=" << int{m});
        check_reconstruct(*cpu, s, good, ParityScheme::kP, k, len, {m});
      }
    }
  }
}

TEST(CpuBackend, Raid6ReconstructsEveryFailureCombination) {
  auto cpu = make_cpu_backend();
  for (std::uint32_t k : {2u, 3u, 4u, 7u, 8u, 16u, 31u}) {
    for (std::size_t len : {1000u, 4096u, 65536u + 5}) {
      if (k == 31 && len < 4096) continue;
      StripeBuffers s = random_stripe(k + 2, len + 7, 3 * k + len);
      StripeJob encode = s.job(ParityOp::kEncode, ParityScheme::kPQ, k, len);
      ASSERT_TRUE(run(*cpu, encode).is_ok());
      const std::vector<Bytes> good = snapshot(s);
      for (std::uint8_t m = 0; m < k + 2; ++m) {
        SCOPED_TRACE(testing::Message() << "PQ k=" << k << " len=" << len << " missing=" << int{m});
        check_reconstruct(*cpu, s, good, ParityScheme::kPQ, k, len, {m});
      }
      for (const auto& [a, b] : failure_pairs(k)) {
        SCOPED_TRACE(testing::Message()
                     << "PQ k=" << k << " len=" << len << " missing=" << int{a} << "," << int{b});
        check_reconstruct(*cpu, s, good, ParityScheme::kPQ, k, len, {a, b});
        if ((a + b) % 5 == 0) {  // the order of `missing` must not matter
          check_reconstruct(*cpu, s, good, ParityScheme::kPQ, k, len, {b, a});
        }
      }
    }
  }
}

TEST(CpuBackend, VerifyDetectsASingleFlippedByte) {
  auto cpu = make_cpu_backend();
  auto ref = make_ref_backend();
  for (ParityScheme scheme : {ParityScheme::kP, ParityScheme::kPQ}) {
    for (std::uint32_t k : {3u, 16u}) {
      for (std::size_t len : {4096u, 1000u, 31u}) {
        StripeBuffers s = random_stripe(k + parity_count(scheme), len, k * len);
        StripeJob encode = s.job(ParityOp::kEncode, scheme, k, len);
        ASSERT_TRUE(run(*cpu, encode).is_ok());
        StripeJob verify = s.job(ParityOp::kVerify, scheme, k, len);
        ASSERT_TRUE(run(*cpu, verify).is_ok());
        EXPECT_TRUE(verify.parity_ok);
        const std::size_t prefix = len & ~std::size_t{31};
        // Offsets in the ISA-L part and in the portable tail.
        std::vector<std::size_t> offsets = {0, len / 2, len - 1};
        if (prefix > 0 && prefix < len) offsets.push_back(prefix - 1), offsets.push_back(prefix);
        for (std::uint32_t c = 0; c < s.chunks(); ++c) {
          for (std::size_t offset : offsets) {
            SCOPED_TRACE(testing::Message() << scheme_str(scheme) << " k=" << k << " len=" << len
                                            << " chunk=" << c << " offset=" << offset);
            s.bytes(c)[offset] ^= std::byte{0x01};
            verify.parity_ok = true;
            ASSERT_TRUE(run(*cpu, verify).is_ok());
            EXPECT_FALSE(verify.parity_ok);
            StripeJob ref_verify = verify;
            ASSERT_TRUE(run(*ref, ref_verify).is_ok());
            EXPECT_FALSE(ref_verify.parity_ok);
            s.bytes(c)[offset] ^= std::byte{0x01};
            ASSERT_TRUE(run(*cpu, verify).is_ok());
            EXPECT_TRUE(verify.parity_ok);
          }
        }
      }
    }
  }
}

// A batch mixing schemes, k, lengths and operations gives exactly what ref gives.
TEST(CpuBackend, MixedBatchMatchesRef) {
  auto cpu = make_cpu_backend();
  auto ref = make_ref_backend();
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE(testing::Message() << "seed=" << seed);
    std::mt19937_64 rng(seed);
    std::vector<StripeBuffers> ours;
    std::vector<StripeBuffers> theirs;
    std::vector<StripeJob> ours_jobs;
    std::vector<StripeJob> theirs_jobs;
    const std::size_t kJobs = 24;
    ours.reserve(kJobs);
    theirs.reserve(kJobs);
    for (std::size_t i = 0; i < kJobs; ++i) {
      const auto scheme = rng() % 2 ? ParityScheme::kPQ : ParityScheme::kP;
      const auto k = static_cast<std::uint32_t>(kMinDataChunks + rng() % 30);
      const std::size_t len = 1 + rng() % 9000;
      const auto op = static_cast<ParityOp>(rng() % 3);
      const std::uint32_t chunks = k + parity_count(scheme);
      ours.push_back(random_stripe(chunks, len, seed * 1000 + i));
      theirs.push_back(make_stripe(chunks, len));
      if (op != ParityOp::kEncode && rng() % 4 != 0) {
        // Consistent parity first, so verify sees both outcomes and reconstruct is checkable.
        StripeJob encode = ours.back().job(ParityOp::kEncode, scheme, k, len);
        ASSERT_TRUE(run(*ref, encode).is_ok());
        if (op == ParityOp::kVerify && rng() % 2) {
          ours.back().bytes(static_cast<std::uint32_t>(rng() % chunks))[rng() % len] ^=
              std::byte{0x80};
        }
      }
      copy_stripe(ours.back(), theirs.back());
      StripeJob job = ours.back().job(op, scheme, k, len);
      if (op == ParityOp::kReconstruct) {
        job.missing_count = static_cast<std::uint8_t>(1 + rng() % parity_count(scheme));
        job.missing[0] = static_cast<std::uint8_t>(rng() % chunks);
        job.missing[1] =
            static_cast<std::uint8_t>((job.missing[0] + 1 + rng() % (chunks - 1)) % chunks);
      }
      ours_jobs.push_back(job);
      StripeJob twin = job;
      for (std::uint32_t c = 0; c < chunks; ++c)
        twin.chunk[c] = theirs.back().view(c);
      theirs_jobs.push_back(twin);
    }
    ASSERT_TRUE(cpu->execute(ours_jobs).is_ok());
    ASSERT_TRUE(ref->execute(theirs_jobs).is_ok());
    for (std::size_t i = 0; i < kJobs; ++i) {
      SCOPED_TRACE(testing::Message()
                   << "job " << i << " k=" << ours_jobs[i].k << " len=" << ours_jobs[i].len);
      EXPECT_EQ(ours_jobs[i].parity_ok, theirs_jobs[i].parity_ok);
      expect_same(ours[i], theirs[i]);
    }
  }
}

// execute() is called from several threads at once (per-thread decode plans, no shared scratch).
TEST(CpuBackend, ConcurrentCallersGetCorrectResults) {
  auto cpu = make_cpu_backend();
  constexpr int kThreads = 4;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::uint32_t k = 5 + 3 * static_cast<std::uint32_t>(t);
      const std::size_t len = 8192 + 32 * static_cast<std::size_t>(t) + 3;
      StripeBuffers s = random_stripe(k + 2, len, 500 + static_cast<std::uint64_t>(t));
      StripeJob encode = s.job(ParityOp::kEncode, ParityScheme::kPQ, k, len);
      if (!run(*cpu, encode).is_ok()) ++failures[t];
      const std::vector<Bytes> good = snapshot(s);
      for (int round = 0; round < 20; ++round) {
        for (const auto& [a, b] : failure_pairs(k)) {
          fill_pseudo_random(s.bytes(a), static_cast<std::uint64_t>(round));
          fill_pseudo_random(s.bytes(b), static_cast<std::uint64_t>(round) + 1);
          StripeJob job = s.job(ParityOp::kReconstruct, ParityScheme::kPQ, k, len);
          job.missing_count = 2;
          job.missing = {a, b};
          if (!run(*cpu, job).is_ok()) ++failures[t];
          if (snapshot(s) != good) ++failures[t];
        }
      }
    });
  }
  for (std::thread& th : threads)
    th.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(failures[t], 0) << "thread " << t;
}

// Many jobs of one shape in a batch (a rebuild) and jobs that share read-only sources.
TEST(CpuBackend, RebuildBatchWithSharedSources) {
  auto cpu = make_cpu_backend();
  const std::uint32_t k = 10;
  const std::size_t len = 4096 + 100;
  std::vector<StripeBuffers> stripes;
  std::vector<std::vector<Bytes>> good;
  std::vector<StripeJob> jobs;
  for (int i = 0; i < 16; ++i) {
    stripes.push_back(random_stripe(k + 2, len, 900 + static_cast<std::uint64_t>(i)));
    StripeJob encode = stripes.back().job(ParityOp::kEncode, ParityScheme::kPQ, k, len);
    ASSERT_TRUE(run(*cpu, encode).is_ok());
    good.push_back(snapshot(stripes.back()));
  }
  for (auto& s : stripes) {
    fill_pseudo_random(s.bytes(2), 1);
    fill_pseudo_random(s.bytes(7), 2);
    StripeJob job = s.job(ParityOp::kReconstruct, ParityScheme::kPQ, k, len);
    job.missing_count = 2;
    job.missing = {7, 2};
    jobs.push_back(job);
  }
  ASSERT_TRUE(cpu->execute(jobs).is_ok());
  for (std::size_t i = 0; i < stripes.size(); ++i)
    EXPECT_EQ(snapshot(stripes[i]), good[i]) << i;

  // Two encode jobs reading the same data chunks, writing different parity.
  StripeBuffers data = random_stripe(k + 2, len, 77);
  StripeBuffers other = make_stripe(k + 2, len);
  StripeJob first = data.job(ParityOp::kEncode, ParityScheme::kPQ, k, len);
  StripeJob second = first;
  second.chunk[k] = other.view(k);
  second.chunk[k + 1] = other.view(k + 1);
  std::vector<StripeJob> pair = {first, second};
  ASSERT_TRUE(cpu->execute(pair).is_ok());
  EXPECT_EQ(0, std::memcmp(data.bytes(k).data(), other.bytes(k).data(), len));
  EXPECT_EQ(0, std::memcmp(data.bytes(k + 1).data(), other.bytes(k + 1).data(), len));
}

}  // namespace
}  // namespace graid
