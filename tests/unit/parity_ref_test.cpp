// The ref backend against independent formulations (P by plain XOR, Q by Horner's rule with a
// bitwise multiply-by-2), recovery of every failure combination, verify, and StripeJob
// validation (for every backend).

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "graid/parity.h"
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

std::vector<Bytes> snapshot(StripeBuffers& s) {
  std::vector<Bytes> out;
  for (std::uint32_t i = 0; i < s.chunks(); ++i) {
    auto b = s.bytes(i);
    out.emplace_back(b.begin(), b.end());
  }
  return out;
}

// Multiply by g = 2 without tables: shift, and reduce by 0x11d on overflow.
std::uint8_t times_two(std::uint8_t x) {
  return static_cast<std::uint8_t>((x << 1) ^ ((x & 0x80) ? 0x1d : 0));
}

// P and Q computed the second way: Q = (((D(k-1)) * g + D(k-2)) * g + ...) + D0.
void independent_parity(StripeBuffers& s, std::uint32_t k, std::size_t len, Bytes& p, Bytes& q) {
  p.assign(len, std::byte{0});
  q.assign(len, std::byte{0});
  for (std::size_t o = 0; o < len; ++o) {
    std::uint8_t pv = 0;
    std::uint8_t qv = 0;
    for (std::uint32_t i = k; i-- > 0;) {
      const auto d = std::to_integer<std::uint8_t>(s.bytes(i)[o]);
      pv ^= d;
      qv = static_cast<std::uint8_t>(times_two(qv) ^ d);
    }
    p[o] = std::byte{pv};
    q[o] = std::byte{qv};
  }
}

// A stripe with random data and encoded parity; chunks are `len + slack` bytes so the bytes
// after len act as guards.
StripeBuffers encoded_stripe(ParityBackend& backend, ParityScheme scheme, std::uint32_t k,
                             std::size_t len, std::uint64_t seed, std::size_t slack = 0) {
  StripeBuffers s = make_stripe(k + parity_count(scheme), len + slack);
  for (std::uint32_t i = 0; i < s.chunks(); ++i)
    fill_pseudo_random(s.bytes(i), seed * 97 + i);
  StripeJob job = s.job(ParityOp::kEncode, scheme, k, len);
  EXPECT_TRUE(backend.execute({&job, 1}).is_ok());
  return s;
}

TEST(RefBackend, EncodeMatchesXorAndHorner) {
  auto ref = make_ref_backend();
  for (ParityScheme scheme : {ParityScheme::kP, ParityScheme::kPQ}) {
    for (std::uint32_t k : {2u, 3u, 4u, 7u, 16u, 31u}) {
      for (std::size_t len : {1u, 31u, 64u, 100u, 512u, 4109u}) {
        SCOPED_TRACE(testing::Message() << scheme_str(scheme) << " k=" << k << " len=" << len);
        const std::size_t slack = 37;
        StripeBuffers s = encoded_stripe(*ref, scheme, k, len, k * 1000 + len, slack);
        Bytes p;
        Bytes q;
        independent_parity(s, k, len, p, q);
        ASSERT_EQ(0, std::memcmp(p.data(), s.bytes(k).data(), len));
        if (scheme == ParityScheme::kPQ) {
          ASSERT_EQ(0, std::memcmp(q.data(), s.bytes(k + 1).data(), len));
        }
        // The bytes after len were seeded, not written: regenerate and compare.
        for (std::uint32_t c = k; c < s.chunks(); ++c) {
          Bytes guard(len + slack);
          fill_pseudo_random(guard, (k * 1000 + len) * 97 + c);
          ASSERT_EQ(0, std::memcmp(guard.data() + len, s.bytes(c).data() + len, slack)) << c;
        }
      }
    }
  }
}

TEST(RefBackend, KnownSmallStripe) {
  // D0 = 0x01, D1 = 0x80, D2 = 0xff: P = 0x7e, Q = 1*0x01 + 2*0x80 + 4*0xff.
  auto ref = make_ref_backend();
  StripeBuffers s = make_stripe(5, 1);
  s.bytes(0)[0] = std::byte{0x01};
  s.bytes(1)[0] = std::byte{0x80};
  s.bytes(2)[0] = std::byte{0xff};
  StripeJob job = s.job(ParityOp::kEncode, ParityScheme::kPQ, 3, 1);
  ASSERT_TRUE(ref->execute({&job, 1}).is_ok());
  EXPECT_EQ(s.bytes(3)[0], std::byte{0x7e});
  // 2*0x80 = 0x1d; 4*0xff = 2*(2*0xff) = 2*0xe3 = 0xdb; 0x01 ^ 0x1d ^ 0xdb = 0xc7.
  EXPECT_EQ(s.bytes(4)[0], std::byte{0xc7});
}

// Every set of missing chunks the scheme tolerates.
std::vector<std::vector<std::uint8_t>> failure_sets(ParityScheme scheme, std::uint32_t k) {
  const std::uint32_t n = k + parity_count(scheme);
  std::vector<std::vector<std::uint8_t>> sets;
  for (std::uint32_t a = 0; a < n; ++a)
    sets.push_back({static_cast<std::uint8_t>(a)});
  if (scheme == ParityScheme::kPQ) {
    for (std::uint32_t a = 0; a < n; ++a) {
      for (std::uint32_t b = 0; b < n; ++b) {
        if (a != b) sets.push_back({static_cast<std::uint8_t>(a), static_cast<std::uint8_t>(b)});
      }
    }
  }
  return sets;
}

TEST(RefBackend, ReconstructEveryFailureRestoresOriginal) {
  auto ref = make_ref_backend();
  for (ParityScheme scheme : {ParityScheme::kP, ParityScheme::kPQ}) {
    for (std::uint32_t k : {2u, 3u, 4u, 5u, 8u, 13u}) {
      for (std::size_t len : {1u, 67u, 600u}) {
        StripeBuffers s = encoded_stripe(*ref, scheme, k, len, 31 * k + len, 5);
        const std::vector<Bytes> original = snapshot(s);
        for (const auto& missing : failure_sets(scheme, k)) {
          SCOPED_TRACE(testing::Message()
                       << scheme_str(scheme) << " k=" << k << " len=" << len
                       << " missing=" << int{missing[0]} << (missing.size() > 1 ? "," : "")
                       << (missing.size() > 1 ? std::to_string(missing[1]) : ""));
          // Missing chunks hold garbage on entry; it must be ignored.
          for (std::uint8_t m : missing) {
            fill_pseudo_random(s.bytes(m).first(len), 0xbad0 + m);
          }
          StripeJob job = s.job(ParityOp::kReconstruct, scheme, k, len);
          job.missing_count = static_cast<std::uint8_t>(missing.size());
          for (std::size_t i = 0; i < missing.size(); ++i)
            job.missing[i] = missing[i];
          ASSERT_TRUE(ref->execute({&job, 1}).is_ok());
          for (std::uint32_t c = 0; c < s.chunks(); ++c) {
            ASSERT_EQ(0, std::memcmp(original[c].data(), s.bytes(c).data(), original[c].size()))
                << "chunk " << c;
          }
        }
      }
    }
  }
}

TEST(RefBackend, VerifyDetectsASingleFlippedByte) {
  auto ref = make_ref_backend();
  for (ParityScheme scheme : {ParityScheme::kP, ParityScheme::kPQ}) {
    const std::uint32_t k = 6;
    const std::size_t len = 333;
    StripeBuffers s = encoded_stripe(*ref, scheme, k, len, 99);
    StripeJob job = s.job(ParityOp::kVerify, scheme, k, len);
    ASSERT_TRUE(ref->execute({&job, 1}).is_ok());
    EXPECT_TRUE(job.parity_ok);
    for (std::uint32_t c = 0; c < s.chunks(); ++c) {
      for (std::size_t offset : {std::size_t{0}, std::size_t{200}, len - 1}) {
        SCOPED_TRACE(testing::Message()
                     << scheme_str(scheme) << " chunk=" << c << " offset=" << offset);
        s.bytes(c)[offset] ^= std::byte{0x10};
        job.parity_ok = true;
        ASSERT_TRUE(ref->execute({&job, 1}).is_ok());
        EXPECT_FALSE(job.parity_ok);
        s.bytes(c)[offset] ^= std::byte{0x10};
        ASSERT_TRUE(ref->execute({&job, 1}).is_ok());
        EXPECT_TRUE(job.parity_ok);
      }
    }
  }
}

TEST(RefBackend, MixedBatch) {
  auto ref = make_ref_backend();
  StripeBuffers a = make_stripe(5, 100);                                // kPQ k=3 encode
  StripeBuffers b = encoded_stripe(*ref, ParityScheme::kP, 4, 64, 5);   // reconstruct D1
  StripeBuffers c = encoded_stripe(*ref, ParityScheme::kPQ, 2, 40, 6);  // verify
  for (std::uint32_t i = 0; i < 3; ++i)
    fill_pseudo_random(a.bytes(i), 40 + i);
  const Bytes b_d1(b.bytes(1).begin(), b.bytes(1).end());
  fill_pseudo_random(b.bytes(1), 1);
  std::vector<StripeJob> jobs = {a.job(ParityOp::kEncode, ParityScheme::kPQ, 3, 100),
                                 b.job(ParityOp::kReconstruct, ParityScheme::kP, 4, 64),
                                 c.job(ParityOp::kVerify, ParityScheme::kPQ, 2, 40)};
  jobs[1].missing_count = 1;
  jobs[1].missing[0] = 1;
  ASSERT_TRUE(ref->execute(jobs).is_ok());
  EXPECT_TRUE(jobs[2].parity_ok);
  EXPECT_EQ(0, std::memcmp(b_d1.data(), b.bytes(1).data(), 64));
  Bytes p;
  Bytes q;
  independent_parity(a, 3, 100, p, q);
  EXPECT_EQ(0, std::memcmp(p.data(), a.bytes(3).data(), 100));
  EXPECT_EQ(0, std::memcmp(q.data(), a.bytes(4).data(), 100));
}

// ---- validation, for every backend ------------------------------------------------------------

class ParityValidation : public testing::TestWithParam<std::string> {};

struct BadJob {
  const char* what;         // for the failure message
  const char* message_has;  // a word the error must contain
  void (*mutate)(StripeJob&, StripeBuffers&);
};

const BadJob kBadJobs[] = {
    {"k below minimum", "k=1", [](StripeJob& j, StripeBuffers&) { j.k = 1; }},
    {"k above maximum", "k=32", [](StripeJob& j, StripeBuffers&) { j.k = 32; }},
    {"zero len", "len", [](StripeJob& j, StripeBuffers&) { j.len = 0; }},
    {"null chunk", "chunk 2 is null", [](StripeJob& j, StripeBuffers&) { j.chunk[2] = {}; }},
    {"null parity", "chunk 5 is null", [](StripeJob& j, StripeBuffers&) { j.chunk[5] = {}; }},
    {"short chunk", "chunk 1 holds",
     [](StripeJob& j, StripeBuffers& s) { j.chunk[1] = *ChunkView::adopt(s.bytes(1).data(), 10); }},
    {"len beyond chunks", "fewer than len", [](StripeJob& j, StripeBuffers&) { j.len = 4097; }},
    {"reconstruct nothing", "missing_count 0",
     [](StripeJob& j, StripeBuffers&) {
       j.op = ParityOp::kReconstruct;
       j.missing_count = 0;
     }},
    {"three missing", "missing_count 3",
     [](StripeJob& j, StripeBuffers&) {
       j.op = ParityOp::kReconstruct;
       j.missing_count = 3;
     }},
    {"two missing on RAID5", "missing_count 2",
     [](StripeJob& j, StripeBuffers&) {
       j.op = ParityOp::kReconstruct;
       j.scheme = ParityScheme::kP;
       j.missing_count = 2;
       j.missing = {0, 1};
     }},
    {"missing index out of range", "missing[1]=6",
     [](StripeJob& j, StripeBuffers&) {
       j.op = ParityOp::kReconstruct;
       j.missing_count = 2;
       j.missing = {0, 6};
     }},
    {"Q index on RAID5", "missing[0]=5",
     [](StripeJob& j, StripeBuffers&) {
       j.op = ParityOp::kReconstruct;
       j.scheme = ParityScheme::kP;
       j.missing_count = 1;
       j.missing = {5, 0};
     }},
    {"duplicate missing", "twice",
     [](StripeJob& j, StripeBuffers&) {
       j.op = ParityOp::kReconstruct;
       j.missing_count = 2;
       j.missing = {3, 3};
     }},
    {"destination overlaps a source", "overlaps",
     [](StripeJob& j, StripeBuffers&) { j.chunk[4] = j.chunk[0]; }},
    {"unknown op", "operation", [](StripeJob& j, StripeBuffers&) { j.op = ParityOp{7}; }},
    {"unknown scheme", "scheme", [](StripeJob& j, StripeBuffers&) { j.scheme = ParityScheme{9}; }},
};

TEST_P(ParityValidation, InvalidJobFailsBatchWithNothingWritten) {
  Result<std::unique_ptr<ParityBackend>> backend = make_parity_backend(GetParam());
  ASSERT_TRUE(backend.is_ok());
  for (const BadJob& bad : kBadJobs) {
    SCOPED_TRACE(bad.what);
    // Job 0 is valid and would write P/Q; job 1 is bad. Neither may write a byte.
    StripeBuffers good = make_stripe(6, 4096);
    StripeBuffers worse = make_stripe(6, 4096);
    for (std::uint32_t i = 0; i < 6; ++i) {
      fill_pseudo_random(good.bytes(i), i);
      fill_pseudo_random(worse.bytes(i), 10 + i);
    }
    const std::vector<Bytes> good_before = snapshot(good);
    const std::vector<Bytes> worse_before = snapshot(worse);
    std::vector<StripeJob> jobs = {good.job(ParityOp::kEncode, ParityScheme::kPQ, 4, 4096),
                                   worse.job(ParityOp::kEncode, ParityScheme::kPQ, 4, 4096)};
    bad.mutate(jobs[1], worse);
    EXPECT_FALSE(validate_job(jobs[1]).is_ok());
    const Status status = (*backend)->execute(jobs);
    ASSERT_FALSE(status.is_ok());
    EXPECT_EQ(status.code(), Errc::kInvalidArgument);
    EXPECT_NE(status.message().find("job 1"), std::string::npos) << status.message();
    EXPECT_NE(status.message().find(bad.message_has), std::string::npos) << status.message();
    EXPECT_EQ(snapshot(good), good_before);
    EXPECT_EQ(snapshot(worse), worse_before);
  }
}

TEST_P(ParityValidation, ValidShapesPass) {
  StripeBuffers s = make_stripe(33, 64);
  for (ParityScheme scheme : {ParityScheme::kP, ParityScheme::kPQ}) {
    for (std::uint32_t k : {kMinDataChunks, kMaxDataChunks}) {
      StripeJob job = s.job(ParityOp::kReconstruct, scheme, k, 64);
      job.missing_count = static_cast<std::uint8_t>(parity_count(scheme));
      job.missing = {static_cast<std::uint8_t>(k + parity_count(scheme) - 1), 0};
      EXPECT_TRUE(validate_job(job).is_ok()) << validate_job(job).to_string();
    }
  }
  // Sources may alias each other; only writes must not overlap.
  StripeJob shared = s.job(ParityOp::kEncode, ParityScheme::kP, 3, 64);
  shared.chunk[1] = shared.chunk[0];
  EXPECT_TRUE(validate_job(shared).is_ok());
}

TEST_P(ParityValidation, FactoryKnowsTheName) {
  Result<std::unique_ptr<ParityBackend>> backend = make_parity_backend(GetParam());
  ASSERT_TRUE(backend.is_ok());
  EXPECT_EQ((*backend)->name(), GetParam());
  const ParityCaps caps = (*backend)->caps();
  EXPECT_TRUE(caps.raid5 && caps.raid6 && caps.reconstruct && caps.verify);
  EXPECT_TRUE((*backend)->execute({}).is_ok());  // an empty batch is fine
}

INSTANTIATE_TEST_SUITE_P(Backends, ParityValidation, testing::Values("ref", "cpu"));

TEST(ParityFactory, UnknownNameIsNotFound) {
  Result<std::unique_ptr<ParityBackend>> backend = make_parity_backend("gpu-magic");
  ASSERT_FALSE(backend.is_ok());
  EXPECT_EQ(backend.status().code(), Errc::kNotFound);
  EXPECT_NE(backend.status().message().find("gpu-magic"), std::string::npos);
}

}  // namespace
}  // namespace graid
