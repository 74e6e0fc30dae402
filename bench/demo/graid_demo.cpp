// graid-demo: what graid can do so far, end to end on the CPU.
//
// Builds a RAID5 and a RAID6 array in memory (members are plain buffers), writes random data
// through the geometry, encodes parity with the cpu backend (ISA-L), fails members, rebuilds
// them, and checks every byte against what was written -- and the rebuilt parity against the
// ref backend. Later issues grow this into the real demo (file-backed members, the engine,
// graid-bench).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "graid/buffer.h"
#include "graid/geometry.h"
#include "graid/parity.h"

namespace {

using graid::AlignedBuffer;
using graid::Geometry;
using graid::ParityBackend;
using graid::RaidLevel;
using graid::StripeJob;
using graid::StripRole;

struct Array {
  Geometry geometry;
  std::uint64_t member_bytes;
  std::vector<AlignedBuffer> members;
};

std::string picture(const Geometry& g, std::uint64_t stripe) {
  std::string out;
  for (std::uint32_t m = 0; m < g.members(); ++m) {
    const auto place = g.place(m, stripe * g.strip_bytes());
    std::string cell = place.role == StripRole::kP   ? "P"
                       : place.role == StripRole::kQ ? "Q"
                                                     : "D" + std::to_string(place.data_index);
    out += cell + std::string(4 - cell.size(), ' ');
  }
  return out;
}

// Chunk views of one stripe, data first in data-index order, then P (and Q).
StripeJob stripe_job(Array& a, std::uint64_t stripe, graid::ParityOp op) {
  const Geometry& g = a.geometry;
  StripeJob job;
  job.op = op;
  job.scheme = g.parity_strips() == 2 ? graid::ParityScheme::kPQ : graid::ParityScheme::kP;
  job.k = g.data_strips();
  job.len = g.strip_bytes();
  const std::uint64_t off = stripe * g.strip_bytes();
  for (std::uint32_t d = 0; d < job.k; ++d) {
    job.chunk[d] = a.members[g.data_member(stripe, d)].view(off, g.strip_bytes());
  }
  job.chunk[job.k] = a.members[g.p_member(stripe)].view(off, g.strip_bytes());
  if (g.parity_strips() == 2) {
    job.chunk[job.k + 1] = a.members[g.q_member(stripe)].view(off, g.strip_bytes());
  }
  return job;
}

// Index in a stripe job's chunk[] of what `member` holds in `stripe`.
std::uint8_t chunk_index_of(const Geometry& g, std::uint64_t stripe, std::uint32_t member) {
  const auto place = g.place(member, stripe * g.strip_bytes());
  switch (place.role) {
    case StripRole::kP:
      return static_cast<std::uint8_t>(g.data_strips());
    case StripRole::kQ:
      return static_cast<std::uint8_t>(g.data_strips() + 1);
    case StripRole::kData:
      break;
  }
  return static_cast<std::uint8_t>(place.data_index);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool run(RaidLevel level, std::uint32_t n, std::uint32_t strip, std::uint64_t member_bytes,
         ParityBackend& cpu, ParityBackend& ref) {
  auto geometry = Geometry::make(level, n, strip);
  if (!geometry) {
    std::fprintf(stderr, "geometry: %s\n", geometry.status().to_string().c_str());
    return false;
  }
  Array a{*geometry, member_bytes, {}};
  for (std::uint32_t m = 0; m < n; ++m) {
    auto buf = AlignedBuffer::allocate(member_bytes);
    if (!buf) return false;
    a.members.push_back(std::move(*buf));
  }
  const Geometry& g = a.geometry;
  const std::uint64_t stripes = g.stripes(member_bytes);
  const std::uint64_t capacity = g.data_capacity(member_bytes);
  std::printf("\n== %s: %u members x %llu MiB, strip %u KiB -> %llu MiB of data in %llu stripes\n",
              std::string(graid::raid_level_name(level)).c_str(), n,
              static_cast<unsigned long long>(member_bytes >> 20), strip / 1024,
              static_cast<unsigned long long>(capacity >> 20),
              static_cast<unsigned long long>(stripes));
  std::printf("   layout (member 0..%u):\n", n - 1);
  for (std::uint64_t s = 0; s < std::min<std::uint64_t>(stripes, n); ++s) {
    std::printf("     stripe %-3llu %s\n", static_cast<unsigned long long>(s),
                picture(g, s).c_str());
  }

  // Write random data through the geometry, keeping a model copy of the array's contents.
  std::vector<std::uint8_t> model(capacity);
  std::mt19937_64 rng(20261129);
  for (auto& b : model)
    b = static_cast<std::uint8_t>(rng());
  for (std::uint64_t off = 0; off < capacity; off += strip) {
    const auto loc = g.locate(off);
    std::memcpy(a.members[loc.member].data() + loc.member_offset, model.data() + off, strip);
  }

  // Encode every stripe in one batch per 64 stripes.
  auto t0 = std::chrono::steady_clock::now();
  std::vector<StripeJob> batch;
  auto flush = [&](ParityBackend& backend) {
    graid::Status st = backend.execute(batch);
    batch.clear();
    if (!st)
      std::fprintf(stderr, "%s: %s\n", std::string(backend.name()).c_str(), st.to_string().c_str());
    return st.is_ok();
  };
  for (std::uint64_t s = 0; s < stripes; ++s) {
    batch.push_back(stripe_job(a, s, graid::ParityOp::kEncode));
    if (batch.size() == 64 && !flush(cpu)) return false;
  }
  if (!batch.empty() && !flush(cpu)) return false;
  const double enc_s = seconds_since(t0);
  std::printf("   encoded %llu stripes on '%s' in %.1f ms (%.2f GB/s of data)\n",
              static_cast<unsigned long long>(stripes), std::string(cpu.name()).c_str(),
              enc_s * 1e3, static_cast<double>(capacity) / enc_s / 1e9);

  // Fail members: wipe them (as if replaced by blank drives).
  std::vector<std::uint32_t> failed = {1};
  if (g.parity_strips() == 2) failed.push_back(n - 2);
  for (std::uint32_t m : failed)
    std::memset(a.members[m].data(), 0xEE, member_bytes);
  std::printf("   failed member(s):");
  for (std::uint32_t m : failed)
    std::printf(" %u", m);
  std::printf(" (contents destroyed)\n");

  // Rebuild every stripe of the failed members.
  t0 = std::chrono::steady_clock::now();
  for (std::uint64_t s = 0; s < stripes; ++s) {
    StripeJob job = stripe_job(a, s, graid::ParityOp::kReconstruct);
    for (std::uint32_t m : failed)
      job.missing[job.missing_count++] = chunk_index_of(g, s, m);
    batch.push_back(job);
    if (batch.size() == 64 && !flush(cpu)) return false;
  }
  if (!batch.empty() && !flush(cpu)) return false;
  const double rec_s = seconds_since(t0);
  std::printf("   rebuilt %zu member(s) in %.1f ms (%.2f GB/s rebuilt)\n", failed.size(),
              rec_s * 1e3, static_cast<double>(failed.size() * member_bytes) / rec_s / 1e9);

  // Check every data byte against the model, and every stripe's parity with both backends.
  std::uint64_t bad_bytes = 0;
  for (std::uint64_t off = 0; off < capacity; off += strip) {
    const auto loc = g.locate(off);
    if (std::memcmp(a.members[loc.member].data() + loc.member_offset, model.data() + off, strip)) {
      ++bad_bytes;
    }
  }
  std::uint64_t bad_parity = 0;
  for (ParityBackend* backend : {&cpu, &ref}) {
    for (std::uint64_t s = 0; s < stripes; ++s) {
      StripeJob job = stripe_job(a, s, graid::ParityOp::kVerify);
      if (!backend->execute(std::span(&job, 1)) || !job.parity_ok) ++bad_parity;
    }
  }
  std::printf(
      "   verify: %s data strips differ from what was written, %llu parity mismatches "
      "(checked with 'cpu' and 'ref')\n",
      bad_bytes == 0 ? "no" : std::to_string(bad_bytes).c_str(),
      static_cast<unsigned long long>(bad_parity));
  return bad_bytes == 0 && bad_parity == 0;
}

}  // namespace

int main() {
  auto cpu = graid::make_parity_backend("cpu");
  auto ref = graid::make_parity_backend("ref");
  if (!cpu || !ref) {
    std::fprintf(stderr, "cannot create parity backends\n");
    return 1;
  }
  std::printf("graid demo: RAID layouts in memory, parity on the CPU (ISA-L), member failures\n");
  bool ok = run(RaidLevel::kRaid5, 5, 64 * 1024, 32ull << 20, **cpu, **ref);
  ok = run(RaidLevel::kRaid6, 6, 64 * 1024, 32ull << 20, **cpu, **ref) && ok;
  std::printf("\n%s\n",
              ok ? "demo OK: every byte rebuilt and verified" : "demo FAILED: see the lines above");
  return ok ? 0 : 1;
}
