// Parity backends: the math of RAID5/6, for batches of stripes.
//
// A stripe job names the chunks of one stripe in data-index order, then its parity:
//
//        chunk[0]  chunk[1]  ...  chunk[k-1]   chunk[k]   chunk[k+1]
//       +--------+--------+-----+----------+ +--------+ +--------+
//       |   D0   |   D1   | ... |  D(k-1)  | |   P    | |   Q    |   (Q only for kPQ)
//       +--------+--------+-----+----------+ +--------+ +--------+
//        <- len -> each, every pointer kChunkAlign-aligned (ChunkView)
//
//   P = D0 ^ D1 ^ ... ^ D(k-1)
//   Q = g^0*D0 ^ g^1*D1 ^ ... ^ g^(k-1)*D(k-1)     in GF(2^8), poly 0x11d, g = 2 (md, ISA-L)
//
// Operations on a job:
//   kEncode       read D0..D(k-1), write P (and Q).
//   kReconstruct  rebuild the chunks listed in `missing` (1 for kP, 1 or 2 for kPQ; any mix of
//                 data, P and Q) from the others. Contents of missing chunks on entry are ignored
//                 and overwritten; no other chunk is written.
//   kVerify       read everything, write nothing; set `parity_ok` to whether P (and Q) match.
//
// Aliasing: chunks of one job must not overlap each other. Different jobs in a batch may share
// source chunks (read-only) but not destinations.
//
// A backend processes a whole batch per call; jobs in a batch may differ in scheme, k, length
// and operation. execute() is synchronous and thread-safe (callers on several threads may call it
// at once); an asynchronous batcher for the GPU sits above this interface.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "graid/buffer.h"
#include "graid/status.h"

namespace graid {

enum class ParityScheme : std::uint8_t {
  kP,   // RAID5: one XOR parity
  kPQ,  // RAID6: P and Reed-Solomon Q
};

enum class ParityOp : std::uint8_t { kEncode, kReconstruct, kVerify };

inline constexpr std::uint32_t kMinDataChunks = 2;
inline constexpr std::uint32_t kMaxDataChunks = 31;
inline constexpr std::uint32_t kMaxStripeChunks = kMaxDataChunks + 2;

struct StripeJob {
  ParityOp op = ParityOp::kEncode;
  ParityScheme scheme = ParityScheme::kP;
  std::uint32_t k = 0;  // data chunks, kMinDataChunks..kMaxDataChunks
  std::size_t len = 0;  // bytes in every chunk, > 0; each chunk[i].size() must be >= len
  // chunk[0..k-1] data, chunk[k] P, chunk[k+1] Q (kPQ only).
  std::array<ChunkView, kMaxStripeChunks> chunk{};
  // For kReconstruct: indices into chunk[] of the chunks to rebuild, in any order.
  std::array<std::uint8_t, 2> missing{};
  std::uint8_t missing_count = 0;
  // Output of kVerify.
  bool parity_ok = false;

  std::uint32_t parity_count() const noexcept { return scheme == ParityScheme::kPQ ? 2 : 1; }
  std::uint32_t chunk_count() const noexcept { return k + parity_count(); }
};

// Checks one job's shape (k, len, chunk sizes, missing indices) without touching its data.
// Backends call this first for every job; a failing job fails the batch before any writes.
Status validate_job(const StripeJob& job);

// What a backend can do; lets callers route work (e.g. tiny jobs to the CPU).
struct ParityCaps {
  bool raid5 = false;
  bool raid6 = false;
  bool reconstruct = false;
  bool verify = false;
  bool asynchronous = false;  // true when work is queued to a device (GPU) rather than done inline
};

class ParityBackend {
 public:
  virtual ~ParityBackend() = default;

  // Short stable name: "ref", "cpu", "cuda".
  virtual std::string_view name() const noexcept = 0;
  virtual ParityCaps caps() const noexcept = 0;

  // Runs every job of the batch. On an invalid job nothing is written and the Status names the
  // job and what is wrong with it. On success every job's outputs are complete.
  virtual Status execute(std::span<StripeJob> jobs) = 0;
};

// Portable reference implementation: plain C++, byte at a time, readable over fast. The oracle
// every other backend is tested against.
std::unique_ptr<ParityBackend> make_ref_backend();

// ISA-L implementation (xor_gen, pq_gen, ec_encode_data with GF tables for recovery), using the
// SIMD code ISA-L selects at run time for this CPU.
std::unique_ptr<ParityBackend> make_cpu_backend();

// Where a stripe's one bad strip is, found from its parity (md's raid6check): `deltas[j]` is
// stored parity strip j XOR the parity recomputed from the stored data (j = 0: P, 1: Q), `len`
// bytes each. A single bad data strip z with error e gives deltas[j] = a_j(z) * e, where a_j(z) is
// data strip z's coefficient in parity j (1 for P, g^z for Q), so z is the one index for which
// every delta is that multiple of deltas[0] at every byte; a bad parity strip shows in its own
// delta only. Written for any number of parity strips (more codes extend
// parity_coefficient()); with one parity strip a bad data strip cannot be told from a bad P.
struct ParityMismatch {
  enum class Kind : std::uint8_t {
    kNone,     // every delta is zero: the stripe is consistent
    kParity,   // only parity strips differ (`parity_mask`, bit j: parity strip j)
    kData,     // data strip `data_index` is the one bad strip
    kUnknown,  // more than one strip differs, or a data strip and P cannot be told apart
  };
  Kind kind = Kind::kNone;
  std::uint32_t parity_mask = 0;
  std::uint32_t data_index = 0;
};
// Data strip `d`'s coefficient in parity strip `j` of `scheme` (P: 1; Q: g^d).
std::uint8_t parity_coefficient(ParityScheme scheme, std::uint32_t j, std::uint32_t d) noexcept;
ParityMismatch locate_parity_mismatch(ParityScheme scheme, std::uint32_t k,
                                      std::span<const ChunkView> deltas, std::size_t len);

// The backend named `name` ("ref", "cpu"); kNotFound for other names.
Result<std::unique_ptr<ParityBackend>> make_parity_backend(std::string_view name);

}  // namespace graid
