// The GPU parity kernels' batch descriptor and bodies, in plain C++.
//
// No CUDA header here: this file compiles with g++ (the host emulator and its CI tests) and with
// nvcc (kernels/parity_kernels.cu), and both run the very same bodies. GRAID_HD marks a function
// as __host__ __device__ under nvcc and is empty otherwise.
//
// One launch serves a whole batch of stripes of different shapes (like CUB's
// DeviceMemcpy::Batched): the batch is an array of KernelStripe descriptors plus a prefix sum of
// their tile counts. Work is cut into tiles of kTileBytes (one thread block's worth: kTileLanes
// threads x kLaneBytes); a tile belongs to one stripe, a lane is 16 bytes of that stripe.
//
//   tile_begin:  0        3   4              9          (tile_begin[s] = first tile of stripe s)
//   stripes:     [ s0: 3 tiles ][s1][ s2: 5 tiles     ] ...
//   tile t -> stripe s with tile_begin[s] <= t < tile_begin[s+1]; offset = (t - tile_begin[s]) *
//   kTileBytes + lane * kLaneBytes; width = min(kLaneBytes, len - offset).
//
// Every operation (encode, reconstruct any 1 or 2 chunks, verify) is the same computation over a
// stripe, so one body serves all of them:
//
//   S_P = p_in ^ XOR of data[i]               (over the data chunks that are inputs)
//   S_Q = q_in ^ sum of g^i * data[i]         (Horner: S_Q = (..(D(k-1)*g ^ D(k-2))*g ..) ^ D0)
//   row r (r < rows):  value = coef[r][0] * S_P  ^  coef[r][1] * S_Q
//                      written to out[r], or (kCompare) compared with out[r]
//
// A missing data chunk is a null data[i] (it still takes its *g step in Horner, contributing 0).
// The host picks inputs and the two coefficients per row for each failure pattern, following
// H. P. Anvin, "The mathematics of RAID-6" (see kernel_batch.cpp); the body does no
// per-stripe algebra, only XORs, multiplies by g (bitwise, four bytes at a time, no table) and at
// most two multiplies by an arbitrary constant per output byte (log/exp tables, or table-free
// bit-serial: GfMul).
//
// Aliasing: outputs must not overlap any input or each other; inputs may alias each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GRAID_HD __host__ __device__
#else
#define GRAID_HD
#endif

namespace graid::kernels {

inline constexpr std::uint32_t kMaxKernelData = 31;  // = graid::kMaxDataChunks
inline constexpr std::uint32_t kLaneBytes = 16;      // one uint4 load per source per thread
inline constexpr std::uint32_t kTileLanes = 256;     // threads per block
inline constexpr std::uint32_t kTileBytes = kLaneBytes * kTileLanes;

// ---- GF(2^8), poly 0x11d, g = 2 -----------------------------------------------------------

// 768 bytes: copied into shared memory by each block, used by reference on the host.
struct GfTables {
  std::uint8_t exp[512];  // exp[i] = g^i for i in [0, 510]: log a + log b needs no modulo
  std::uint8_t log[256];  // log[g^i] = i; log[0] unused
};

GRAID_HD constexpr GfTables make_gf_tables() {
  GfTables t{};
  unsigned x = 1;
  for (unsigned i = 0; i < 255; ++i) {
    t.exp[i] = static_cast<std::uint8_t>(x);
    t.exp[i + 255] = static_cast<std::uint8_t>(x);
    t.log[x] = static_cast<std::uint8_t>(i);
    x <<= 1;
    if (x & 0x100) x ^= 0x11d;
  }
  t.exp[510] = t.exp[0];
  return t;
}

// The host's copy (the device has its own in constant memory, see parity_kernels.cu).
inline constexpr GfTables kHostGfTables = make_gf_tables();

GRAID_HD constexpr std::uint8_t gf_mul(const GfTables& t, std::uint8_t a, std::uint8_t b) {
  return (a == 0 || b == 0) ? 0 : t.exp[t.log[a] + t.log[b]];
}

// Multiplies the four bytes of `v` by g: shift each byte left, reduce bytes whose top bit fell
// out by 0x1d. The classic SWAR step of md's raid6 integer code; no table, no branch.
GRAID_HD constexpr std::uint32_t gf_mul2_x4(std::uint32_t v) {
  const std::uint32_t high = (v >> 7) & 0x01010101u;
  return ((v & 0x7f7f7f7fu) << 1) ^ (high * 0x1du);
}

GRAID_HD constexpr std::uint8_t gf_mul2(std::uint8_t v) {
  return static_cast<std::uint8_t>(gf_mul2_x4(v));
}

// Multiplies the four bytes of `v` by the constant c, whose log is log_c. c == 0 and c == 1 are
// the common coefficients and skip the tables.
GRAID_HD inline std::uint32_t gf_mul_x4(const GfTables& t, std::uint32_t v, std::uint8_t c,
                                        unsigned log_c) {
  if (c == 0) return 0;
  if (c == 1) return v;
  std::uint32_t r = 0;
  for (unsigned s = 0; s < 32; s += 8) {
    const unsigned b = (v >> s) & 0xffu;
    if (b != 0) r |= static_cast<std::uint32_t>(t.exp[t.log[b] + log_c]) << s;
  }
  return r;
}

// Multiplies the four bytes of `v` by the constant c without a table: the bits of c select which
// of v, v*g, v*g^2, .. v*g^7 to XOR in. c is the same for every lane of a stripe, so the branch
// does not diverge on a GPU; the cost is 8 SWAR doublings instead of 8 table lookups.
GRAID_HD constexpr std::uint32_t gf_mul_x4_bitserial(std::uint32_t v, std::uint8_t c) {
  if (c == 0) return 0;
  if (c == 1) return v;
  std::uint32_t r = 0;
  for (unsigned bit = 0; bit < 8; ++bit) {
    if ((c >> bit) & 1u) r ^= v;
    v = gf_mul2_x4(v);
  }
  return r;
}

// The 16-entry nibble tables of a constant c, 4 entries to a word (entry n in byte n % 4 of word
// n / 4): words 0-3 hold c * n, words 4-7 hold c * (n << 4), for n = 0..15. Then c * x =
// lo[x & 15] ^ hi[x >> 4]. The host puts them in each stripe's descriptor (kernel_batch.cpp).
GRAID_HD constexpr void make_nibble_table(std::uint8_t c, std::uint32_t out[8]) {
  for (unsigned w = 0; w < 8; ++w) {
    std::uint32_t word = 0;
    for (unsigned b = 0; b < 4; ++b) {
      const unsigned n = (w % 4) * 4 + b;
      const std::uint8_t x = static_cast<std::uint8_t>(w < 4 ? n : n << 4);
      word |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(gf_mul_x4_bitserial(x, c)))
              << (8 * b);
    }
    out[w] = word;
  }
}

// PTX prmt (__byte_perm) in its default mode, for selectors 0-7: byte i of the result is byte
// (s >> 4i) & 7 of the 8 bytes y:x (x the low four).
GRAID_HD inline std::uint32_t byte_perm(std::uint32_t x, std::uint32_t y, std::uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, y, s);
#else
  const std::uint64_t both = (static_cast<std::uint64_t>(y) << 32) | x;
  std::uint32_t r = 0;
  for (unsigned i = 0; i < 4; ++i)
    r |= static_cast<std::uint32_t>((both >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return r;
#endif
}

// Looks up the four nibbles of `n` (one per byte, 0..15) in the 16-entry table t[0..3]: two byte
// permutes (entries 0-7 and 8-15) and a per-byte select on bit 3.
GRAID_HD inline std::uint32_t nibble_lookup_x4(const std::uint32_t* t, std::uint32_t n) {
  const std::uint32_t low3 = n & 0x07070707u;
  const std::uint32_t spread = low3 | (low3 >> 4);
  const std::uint32_t sel = (spread & 0xffu) | ((spread >> 8) & 0xff00u);
  const std::uint32_t from_low = byte_perm(t[0], t[1], sel);
  const std::uint32_t from_high = byte_perm(t[2], t[3], sel);
  const std::uint32_t high = ((n >> 3) & 0x01010101u) * 0xffu;
  return (from_low & ~high) | (from_high & high);
}

// Multiplies the four bytes of `v` by the constant whose nibble tables are `t` (make_nibble_table):
// no shared-memory byte lookups (no bank conflicts), 4 byte permutes and a few logic operations.
GRAID_HD inline std::uint32_t gf_mul_x4_nibble(const std::uint32_t* t, std::uint32_t v) {
  return nibble_lookup_x4(t, v & 0x0f0f0f0fu) ^ nibble_lookup_x4(t + 4, (v >> 4) & 0x0f0f0f0fu);
}

// How the bodies multiply by reconstruct's arbitrary constants (encode and verify multiply only by
// 0, 1 and g, which need none). All give identical bytes; which is faster on a GPU is for
// cuda_bench to measure (kernel/rec2 vs kernel/rec2_bitserial vs kernel/rec2_nibble).
enum class GfMul : std::uint8_t {
  kLogExp,     // log/exp tables (in shared memory on the GPU): two lookups per byte
  kBitSerial,  // no table: gf_mul_x4_bitserial
  kNibble,     // the stripe's nibble tables (in its descriptor) with byte permutes
};

// `nib`: c's nibble tables, read only with GfMul::kNibble.
template <GfMul M>
GRAID_HD inline std::uint32_t gf_mul_word(const GfTables& t, std::uint32_t v, std::uint8_t c,
                                          unsigned log_c, const std::uint32_t* nib) {
  if constexpr (M == GfMul::kBitSerial) {
    return gf_mul_x4_bitserial(v, c);
  } else if constexpr (M == GfMul::kNibble) {
    if (c == 0) return 0;
    if (c == 1) return v;
    return gf_mul_x4_nibble(nib, v);
  } else {
    return gf_mul_x4(t, v, c, log_c);
  }
}

template <GfMul M>
GRAID_HD inline std::uint8_t gf_mul_byte(const GfTables& t, std::uint8_t c, std::uint8_t v,
                                         const std::uint32_t* nib) {
  if constexpr (M == GfMul::kBitSerial) {
    return static_cast<std::uint8_t>(gf_mul_x4_bitserial(v, c));
  } else if constexpr (M == GfMul::kNibble) {
    return static_cast<std::uint8_t>(gf_mul_x4_nibble(nib, v));
  } else {
    return gf_mul(t, c, v);
  }
}

// ---- the batch descriptor ------------------------------------------------------------------

enum KernelStripeFlags : std::uint8_t {
  kNeedQ = 1,      // some row uses S_Q: run Horner over the data
  kCompare = 2,    // verify: compare rows with out[r] instead of writing them
  kAligned16 = 4,  // every pointer is 16-byte aligned, so full lanes may use wide loads
};

// One stripe of a batch. The host fills it (kernel_batch.cpp); trivially copyable, copied to the
// device as is. Pointers are in the address space of whoever runs the body (device pointers for
// the GPU, host pointers for the emulator).
struct KernelStripe {
  const std::uint8_t* data[kMaxKernelData];  // D0..D(k-1); null where D(i) is not an input
  const std::uint8_t* p_in;                  // stored P folded into S_P, or null
  const std::uint8_t* q_in;                  // stored Q folded into S_Q, or null
  std::uint8_t* out[2];                      // rows' destinations (or comparands for kCompare)
  std::uint64_t len;                         // bytes per chunk
  std::uint8_t k;                            // data chunks, 2..31
  std::uint8_t rows;                         // 1 or 2
  std::uint8_t flags;                        // KernelStripeFlags
  std::uint8_t coef[2][2];                   // row r = coef[r][0] * S_P ^ coef[r][1] * S_Q
  std::uint32_t nibble[2][2][8];             // make_nibble_table(coef[r][j]), for GfMul::kNibble
};

// What one launch processes. `mismatch[s]` is set to 1 when a kCompare stripe s differs (the
// host zeroes it first); never cleared by the body, so concurrent lanes may all set it.
struct KernelBatch {
  const KernelStripe* stripes = nullptr;
  const std::uint64_t* tile_begin = nullptr;  // stripe_count + 1 entries, tile_begin[0] == 0
  std::uint32_t* mismatch = nullptr;          // stripe_count entries
  std::uint32_t stripe_count = 0;
  std::uint64_t tile_count = 0;  // == tile_begin[stripe_count]
};

GRAID_HD constexpr std::uint64_t tiles_for(std::uint64_t len) {
  return (len + kTileBytes - 1) / kTileBytes;
}

// ---- the bodies ----------------------------------------------------------------------------

struct Lane16 {
  std::uint32_t w[4];
};

// Loads and stores of a lane. On the GPU each chunk byte is read or written once per launch, so
// the loads and stores are streaming (__ldcs/__stcs: evict-first, they do not push what other
// lanes still need out of L2); a hint only, the bytes are the same.
GRAID_HD inline Lane16 load_lane16(const std::uint8_t* p) {
#if defined(__CUDA_ARCH__)
  const uint4 v = __ldcs(reinterpret_cast<const uint4*>(p));  // one 128-bit load; 16-aligned
  return Lane16{{v.x, v.y, v.z, v.w}};
#else
  Lane16 r;
  std::memcpy(r.w, p, sizeof r.w);
  return r;
#endif
}

// The lane of `p`, or zeros for a chunk that is not an input (XOR leaves the sums alone, so a
// missing chunk costs no branch between the loads of a group).
GRAID_HD inline Lane16 load_lane16_or_zero(const std::uint8_t* p, std::uint64_t offset) {
  return p != nullptr ? load_lane16(p + offset) : Lane16{{0, 0, 0, 0}};
}

GRAID_HD inline void store_lane16(std::uint8_t* p, const Lane16& v) {
#if defined(__CUDA_ARCH__)
  __stcs(reinterpret_cast<uint4*>(p), make_uint4(v.w[0], v.w[1], v.w[2], v.w[3]));
#else
  std::memcpy(p, v.w, sizeof v.w);
#endif
}

// Data chunks whose loads a lane issues together before combining any of them: with one 16-byte
// load per source behind its own pointer load and null check, a thread had 1-2 loads in flight,
// too few bytes in flight per SM for HBM. Four keeps the register count moderate (measured with
// nvcc -Xptxas -v, docs/performance.md).
inline constexpr int kLoadsInFlight = 4;

// One Horner step of the lane sums with data chunk `d`: S_P ^= d; S_Q = S_Q * g ^ d.
GRAID_HD inline void horner_step(Lane16& sp, Lane16& sq, const Lane16& d, bool need_q) {
  for (int w = 0; w < 4; ++w) {
    sp.w[w] ^= d.w[w];
    if (need_q) sq.w[w] = gf_mul2_x4(sq.w[w]) ^ d.w[w];
  }
}

// 16 bytes at `offset` of stripe `s`, every pointer 16-byte aligned (kAligned16) and the lane
// wholly inside len.
template <GfMul M>
GRAID_HD inline void run_lane16(const KernelStripe& s, const GfTables& t, std::uint64_t offset,
                                std::uint32_t* mismatch) {
  const bool need_q = (s.flags & kNeedQ) != 0;
  // Stored P and Q first: their loads are in flight with the first group's.
  const Lane16 p_in = load_lane16_or_zero(s.p_in, offset);
  const Lane16 q_in = load_lane16_or_zero(s.q_in, offset);
  Lane16 sp{{0, 0, 0, 0}};
  Lane16 sq{{0, 0, 0, 0}};
  // Horner from D(k-1) down to D0, kLoadsInFlight chunks at a time: every load of a group is
  // issued before the first is combined.
  int i = static_cast<int>(s.k) - 1;
  for (; i >= kLoadsInFlight - 1; i -= kLoadsInFlight) {
    Lane16 d[kLoadsInFlight];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < kLoadsInFlight; ++j)
      d[j] = load_lane16_or_zero(s.data[i - j], offset);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < kLoadsInFlight; ++j)
      horner_step(sp, sq, d[j], need_q);
  }
  for (; i >= 0; --i)
    horner_step(sp, sq, load_lane16_or_zero(s.data[i], offset), need_q);
  for (int w = 0; w < 4; ++w) {
    sp.w[w] ^= p_in.w[w];
    sq.w[w] ^= q_in.w[w];
  }
  for (unsigned r = 0; r < s.rows; ++r) {
    const std::uint8_t cp = s.coef[r][0];
    const std::uint8_t cq = s.coef[r][1];
    const unsigned log_p = t.log[cp];
    const unsigned log_q = t.log[cq];
    Lane16 v;
    for (int w = 0; w < 4; ++w) {
      v.w[w] = gf_mul_word<M>(t, sp.w[w], cp, log_p, s.nibble[r][0]) ^
               gf_mul_word<M>(t, sq.w[w], cq, log_q, s.nibble[r][1]);
    }
    if (s.flags & kCompare) {
      const Lane16 have = load_lane16(s.out[r] + offset);
      for (int w = 0; w < 4; ++w) {
        if (have.w[w] != v.w[w]) *mismatch = 1;
      }
    } else {
      store_lane16(s.out[r] + offset, v);
    }
  }
}

// `width` (<= kLaneBytes) bytes at `offset`, one byte at a time: the tail of a length that is
// not a multiple of 16, or pointers that are not 16-byte aligned.
template <GfMul M>
GRAID_HD inline void run_lane_bytes(const KernelStripe& s, const GfTables& t, std::uint64_t offset,
                                    std::uint32_t width, std::uint32_t* mismatch) {
  const bool need_q = (s.flags & kNeedQ) != 0;
  for (std::uint64_t o = offset; o < offset + width; ++o) {
    std::uint8_t sp = 0;
    std::uint8_t sq = 0;
    for (int i = static_cast<int>(s.k) - 1; i >= 0; --i) {
      if (need_q) sq = gf_mul2(sq);
      if (s.data[i] == nullptr) continue;
      const std::uint8_t d = s.data[i][o];
      sp ^= d;
      if (need_q) sq ^= d;
    }
    if (s.p_in != nullptr) sp ^= s.p_in[o];
    if (s.q_in != nullptr) sq ^= s.q_in[o];
    for (unsigned r = 0; r < s.rows; ++r) {
      const std::uint8_t v =
          static_cast<std::uint8_t>(gf_mul_byte<M>(t, s.coef[r][0], sp, s.nibble[r][0]) ^
                                    gf_mul_byte<M>(t, s.coef[r][1], sq, s.nibble[r][1]));
      if (s.flags & kCompare) {
        if (s.out[r][o] != v) *mismatch = 1;
      } else {
        s.out[r][o] = v;
      }
    }
  }
}

// The body over (stripe, byte offset, width): wide loads where the lane is full and aligned,
// bytes otherwise.
template <GfMul M>
GRAID_HD inline void run_lane(const KernelStripe& s, const GfTables& t, std::uint64_t offset,
                              std::uint32_t width, std::uint32_t* mismatch) {
  if (width == kLaneBytes && (s.flags & kAligned16)) {
    run_lane16<M>(s, t, offset, mismatch);
  } else {
    run_lane_bytes<M>(s, t, offset, width, mismatch);
  }
}

// The stripe that owns `tile`: the last s with tile_begin[s] <= tile (binary search; all lanes
// of a tile take the same path).
GRAID_HD inline std::uint32_t stripe_of_tile(const KernelBatch& b, std::uint64_t tile) {
  std::uint32_t lo = 0;
  std::uint32_t hi = b.stripe_count;  // invariant: tile_begin[lo] <= tile < tile_begin[hi]
  while (hi - lo > 1) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (b.tile_begin[mid] <= tile) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// What thread `lane` (< kTileLanes) does for tile `tile_in_stripe` of `stripe` (wherever the
// descriptor was read from: the GPU kernel copies it into shared memory once per block and tile).
template <GfMul M>
GRAID_HD inline void run_stripe_lane(const KernelStripe& stripe, const GfTables& t,
                                     std::uint64_t tile_in_stripe, std::uint32_t lane,
                                     std::uint32_t* mismatch) {
  const std::uint64_t offset =
      tile_in_stripe * kTileBytes + static_cast<std::uint64_t>(lane) * kLaneBytes;
  if (offset >= stripe.len) return;
  const std::uint64_t left = stripe.len - offset;
  const std::uint32_t width = left < kLaneBytes ? static_cast<std::uint32_t>(left) : kLaneBytes;
  run_lane<M>(stripe, t, offset, width, mismatch);
}

// What thread `lane` (< kTileLanes) of the block working on `tile` does. REQUIRES: tile <
// b.tile_count. `t` is only read with GfMul::kLogExp.
template <GfMul M = GfMul::kLogExp>
GRAID_HD inline void run_tile_lane(const KernelBatch& b, const GfTables& t, std::uint64_t tile,
                                   std::uint32_t lane) {
  const std::uint32_t s = stripe_of_tile(b, tile);
  run_stripe_lane<M>(b.stripes[s], t, tile - b.tile_begin[s], lane, &b.mismatch[s]);
}

}  // namespace graid::kernels
