// Parity micro benchmarks: graid's cpu backend against ISA-L called directly on the same buffers.
//
//   /tmp/build-parity/bench/micro/parity_bench                 # full run, ~1-2 minutes
//   parity_bench --benchmark_filter='enc_pq/.*/k:8/'            # a subset
//
// By default (see main) each of the 111 benchmarks runs 3 randomly interleaved repetitions of
// 0.1 s and the ratio table uses medians: a full run takes about a minute plus ~3 s to pre-fault
// the pool. Override with the usual --benchmark_* flags.
//
// Cases: RAID5 encode (P), RAID6 encode (P+Q) and RAID6 2-failure reconstruct (two data chunks
// lost), k = 4, 8, 16, chunks of 4 KiB, 64 KiB and 1 MiB, each
//   warm  the same stripe every iteration (in L2/LLC: the compute-bound figure), and
//   cold  rotating over stripes in a 1 GiB pool, far larger than the 32 MiB LLC (data from DRAM).
// Each graid_cpu benchmark has an isal_direct twin on identical buffers (the reconstruct twin
// uses decode tables prepared outside the timed loop, i.e. the best case for ISA-L). The ref
// backend runs a few shapes as a reference point. Throughput counts bytes read + written.
// At exit a table prints ratio = graid_cpu GB/s / isal_direct GB/s per case (target >= 0.90).
//
// The pool is pre-faulted (first touch costs ~2.4 s/GiB on the build VMs) and coloured: chunk i
// of a stripe starts 64 B * i past a 64 B-aligned boundary so k+2 streams do not alias in L1
// (DESIGN.md §5).

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graid/buffer.h"
#include "graid/parity.h"
#include "parity/stripe_buffers.h"

namespace graid {
namespace {

constexpr std::size_t kPoolBytes = std::size_t{1} << 30;

enum class Op { kEncodeP, kEncodePQ, kRecover2 };
enum class Impl { kGraidCpu, kIsalDirect, kGraidRef };

const char* op_name(Op op) {
  switch (op) {
    case Op::kEncodeP:
      return "enc_p";
    case Op::kEncodePQ:
      return "enc_pq";
    case Op::kRecover2:
      return "rec2_pq";
  }
  return "?";
}
const char* impl_name(Impl impl) {
  switch (impl) {
    case Impl::kGraidCpu:
      return "graid_cpu";
    case Impl::kIsalDirect:
      return "isal_direct";
    case Impl::kGraidRef:
      return "graid_ref";
  }
  return "?";
}

// One pre-faulted, pseudo-random 1 GiB pool shared by every benchmark.
AlignedBuffer& pool() {
  static AlignedBuffer buffer = [] {
    Result<AlignedBuffer> b = AlignedBuffer::allocate(kPoolBytes);  // zero-filled: pre-faulted
    if (!b.is_ok()) {
      fmt::print(stderr, "parity_bench: {}\n", b.status().to_string());
      std::abort();
    }
    // Random contents (GF multiplies by table lookup are data-independent, but keep it honest).
    constexpr std::size_t kPattern = std::size_t{16} << 20;
    parity_testing::fill_pseudo_random(b->span().first(kPattern), 12345);
    for (std::size_t off = kPattern; off < kPoolBytes; off += kPattern) {
      std::memcpy(b->data() + off, b->data(), std::min(kPattern, kPoolBytes - off));
    }
    return std::move(b).value();
  }();
  return buffer;
}

struct Case {
  Op op;
  Impl impl;
  std::uint32_t k;
  std::size_t chunk;
  bool cold;
};

std::string case_key(const Case& c) {
  return fmt::format("{}/k:{}/{}{}/{}", op_name(c.op), c.k,
                     c.chunk >= (1u << 20) ? c.chunk >> 20 : c.chunk >> 10,
                     c.chunk >= (1u << 20) ? "M" : "K", c.cold ? "cold" : "warm");
}

std::string bench_name(const Case& c) {
  return fmt::format("{}/{}", case_key(c), impl_name(c.impl));
}

// Decode tables for "D0 and D1 lost" from the k survivors D2..D(k-1), P, Q, built the way an
// ISA-L user would: invert the survivor rows of [I; 1; g^j], keep the rows of the lost chunks.
std::vector<unsigned char> isal_recover_tables(std::uint32_t k) {
  const int n = static_cast<int>(k);
  std::vector<unsigned char> survivors(k * k);
  std::vector<unsigned char> inverse(k * k);
  for (std::uint32_t r = 0; r < k; ++r) {
    const std::uint32_t row = r + 2;  // chunk index: D2.., then P (= k), Q (= k + 1)
    for (std::uint32_t c = 0; c < k; ++c) {
      unsigned char v = 0;
      if (row < k) v = row == c ? 1 : 0;
      if (row == k) v = 1;
      if (row == k + 1) {
        v = 1;
        for (std::uint32_t e = 0; e < c; ++e)
          v = gf_mul(v, 2);
      }
      survivors[r * k + c] = v;
    }
  }
  if (gf_invert_matrix(survivors.data(), inverse.data(), n) != 0) std::abort();
  // The lost rows are unit rows e0, e1, so their coefficients are rows 0 and 1 of the inverse.
  std::vector<unsigned char> coefs(inverse.begin(), inverse.begin() + 2 * n);
  std::vector<unsigned char> tables(32 * k * 2);
  ec_init_tables(n, 2, coefs.data(), tables.data());
  return tables;
}

void run_case(benchmark::State& state, Case c) {
  AlignedBuffer& buffer = pool();
  const std::uint32_t chunks = c.k + 2;
  const std::size_t footprint = parity_testing::stripe_footprint(chunks, c.chunk);
  const std::size_t stride =
      parity_testing::round_up(c.chunk, kChunkAlign) + parity_testing::kColour;
  const std::size_t slots = c.cold ? kPoolBytes / footprint : 1;
  const auto parity = c.op == Op::kEncodeP ? 1u : 2u;

  std::unique_ptr<ParityBackend> backend =
      c.impl == Impl::kGraidRef ? make_ref_backend() : make_cpu_backend();
  const std::vector<unsigned char> tables =
      c.op == Op::kRecover2 ? isal_recover_tables(c.k) : std::vector<unsigned char>{};
  const int len = static_cast<int>(c.chunk);

  StripeJob job;
  job.k = c.k;
  job.len = c.chunk;
  job.scheme = c.op == Op::kEncodeP ? ParityScheme::kP : ParityScheme::kPQ;
  job.op = c.op == Op::kRecover2 ? ParityOp::kReconstruct : ParityOp::kEncode;
  if (c.op == Op::kRecover2) {
    job.missing = {0, 1};
    job.missing_count = 2;
  }
  std::size_t slot = 0;
  for (auto _ : state) {
    const std::size_t base = slot * footprint;
    slot = slot + 1 == slots ? 0 : slot + 1;
    if (c.impl == Impl::kIsalDirect) {
      std::array<void*, kMaxStripeChunks> v{};
      for (std::uint32_t i = 0; i < chunks; ++i)
        v[i] = buffer.data() + base + i * stride;
      switch (c.op) {
        case Op::kEncodeP:
          benchmark::DoNotOptimize(xor_gen(static_cast<int>(c.k + 1), len, v.data()));
          break;
        case Op::kEncodePQ:
          benchmark::DoNotOptimize(pq_gen(static_cast<int>(c.k + 2), len, v.data()));
          break;
        case Op::kRecover2: {
          std::array<unsigned char*, kMaxStripeChunks> src{};
          std::array<unsigned char*, 2> dst{};
          for (std::uint32_t i = 0; i < c.k; ++i)
            src[i] = static_cast<unsigned char*>(v[i + 2]);
          dst[0] = static_cast<unsigned char*>(v[0]);
          dst[1] = static_cast<unsigned char*>(v[1]);
          ec_encode_data(len, static_cast<int>(c.k), 2, const_cast<unsigned char*>(tables.data()),
                         src.data(), dst.data());
          break;
        }
      }
    } else {
      // As the engine does (its parity batch keeps its job descriptors) and as the ISA-L twin
      // fills its pointer array: only the chunks are set per call.
      for (std::uint32_t i = 0; i < c.k + parity; ++i) {
        job.chunk[i] = buffer.view(base + i * stride, c.chunk);
      }
      const Status status = backend->execute({&job, 1});
      if (!status.is_ok()) {
        state.SkipWithError(status.to_string().c_str());
        break;
      }
    }
    benchmark::ClobberMemory();
  }
  // Bytes read + written: encode reads k and writes 1-2; reconstruct reads k and writes 2.
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>((c.k + parity) * c.chunk));
}

// Prints the usual console output, then a graid_cpu / isal_direct table.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  // Colour only on a terminal, so a saved log stays readable.
  RatioReporter() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_ColorTabular : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      const auto it = run.counters.find("bytes_per_second");
      if (it == run.counters.end()) continue;
      std::string name = run.run_name.str();
      if (const auto cut = name.find("/real_time"); cut != std::string::npos) name.resize(cut);
      if (run.run_type == Run::RT_Iteration) samples_[name].push_back(it->second.value);
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name == "median") {
        medians_[name] = it->second.value;
      }
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    auto& out = GetOutputStream();
    out << "\nratio = graid_cpu / isal_direct (throughput, bytes read+written; target >= 0.90)\n";
    out << fmt::format("{:<26} {:>12} {:>12} {:>8}\n", "case", "graid GB/s", "isal GB/s", "ratio");
    // Repetitions (the default) report a median; a single run reports its one sample.
    std::map<std::string, double> rates_ = medians_;
    for (auto& [name, values] : samples_) {
      if (rates_.contains(name) || values.empty()) continue;
      std::sort(values.begin(), values.end());
      rates_[name] = values[values.size() / 2];
    }
    double worst = 1e9;
    for (const auto& [name, rate] : rates_) {
      const std::string suffix = "/graid_cpu";
      if (!name.ends_with(suffix)) continue;
      const std::string key = name.substr(0, name.size() - suffix.size());
      const auto twin = rates_.find(key + "/isal_direct");
      if (twin == rates_.end() || twin->second <= 0) continue;
      const double ratio = rate / twin->second;
      worst = std::min(worst, ratio);
      out << fmt::format("{:<26} {:>12.2f} {:>12.2f} {:>8.3f}{}\n", key, rate / 1e9,
                         twin->second / 1e9, ratio, ratio < 0.9 ? "  <" : "");
    }
    if (worst < 1e9) out << fmt::format("worst ratio: {:.3f}\n", worst);
    for (const auto& [name, rate] : rates_) {
      if (name.ends_with("/graid_ref")) {
        out << fmt::format("{:<38} {:>8.3f} GB/s\n", name, rate / 1e9);
      }
    }
  }

 private:
  std::map<std::string, std::vector<double>> samples_;
  std::map<std::string, double> medians_;
};

void register_all() {
  for (Op op : {Op::kEncodeP, Op::kEncodePQ, Op::kRecover2}) {
    for (bool cold : {false, true}) {
      for (std::uint32_t k : {4u, 8u, 16u}) {
        for (std::size_t chunk :
             {std::size_t{4} << 10, std::size_t{64} << 10, std::size_t{1} << 20}) {
          // Twins back to back, so drift on a shared machine hits both alike.
          for (Impl impl : {Impl::kGraidCpu, Impl::kIsalDirect}) {
            const Case c{op, impl, k, chunk, cold};
            benchmark::RegisterBenchmark(bench_name(c).c_str(), run_case, c)->UseRealTime();
          }
        }
      }
    }
    const Case ref{op, Impl::kGraidRef, 8, std::size_t{64} << 10, false};
    benchmark::RegisterBenchmark(bench_name(ref).c_str(), run_case, ref)->UseRealTime();
  }
}

}  // namespace
}  // namespace graid

int main(int argc, char** argv) {
  // Defaults for a full run in under three minutes that survives a noisy shared VM: 3 randomly
  // interleaved repetitions of 0.1 s, reporting medians. Any flag given on the command line wins.
  std::vector<std::string> defaults = {"--benchmark_min_time=0.1", "--benchmark_repetitions=3",
                                       "--benchmark_enable_random_interleaving=true",
                                       "--benchmark_display_aggregates_only=true"};
  std::vector<char*> args(argv, argv + argc);
  for (std::string& flag : defaults) {
    const std::string key = flag.substr(0, flag.find('='));
    const bool given = std::any_of(args.begin(), args.end(), [&key](const char* a) {
      return std::string_view(a).starts_with(key);
    });
    if (!given) args.push_back(flag.data());
  }
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  graid::register_all();
  (void)graid::pool();  // pre-fault before any timing
  graid::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
