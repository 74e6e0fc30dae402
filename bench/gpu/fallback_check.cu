// Fallback GPU check, built on the GPU machine with nvcc alone (no fmt, spdlog, GoogleTest,
// Google Benchmark, ISA-L): used by device-check.sh only when the binaries carried from the build
// machine do not run there.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I. bench/gpu/fallback_check.cu -o /tmp/fallback_check
//   /tmp/fallback_check            # prints JSON lines; exit 0 ok, 1 mismatch/error, 77 no GPU
//
// It compiles the real kernel (kernels/parity_kernels.cu, the same bodies as everywhere) and
// checks RAID6 encode, two-data-chunk reconstruct and verify on the device against a byte-wise
// reference written here, then times encode and reconstruct kernels against a device-to-device
// cudaMemcpy in the same run and against the peak memory bandwidth the device properties give.
// The timed working set is at least 256 MiB (as in cuda_bench), well beyond an H200's ~50 MB L2:
// a smaller one would be served from cache on repeated launches, while the copy it is compared
// with is not, and the ratio could pass 1. The descriptor coefficients are derived here the same
// way as in kernels/kernel_batch.cpp (which needs the engine's headers and fmt, absent on that
// machine).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/parity_kernels.cu"

using namespace graid::kernels;

namespace {

#define CHECK(call)                                                                              \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::printf("{\"error\": \"%s at %s:%d\"}\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

constexpr std::uint8_t gexp(unsigned n) {
  return kHostGfTables.exp[n % 255];
}
constexpr std::uint8_t ginv(std::uint8_t a) {
  return kHostGfTables.exp[255 - kHostGfTables.log[a]];
}
std::uint8_t gmul(std::uint8_t a, std::uint8_t b) {
  return gf_mul(kHostGfTables, a, b);
}

enum class Kind { kEncodePQ, kRecDataData, kVerifyPQ };

// chunk c of stripe s at base + (s * chunks + c) * stride
KernelStripe describe(Kind kind, std::uint8_t* base, std::uint32_t s, std::uint32_t k,
                      std::size_t len, std::size_t stride, std::uint32_t x, std::uint32_t y) {
  const std::uint32_t chunks = k + 2;
  auto chunk = [&](std::uint32_t c) { return base + (std::size_t{s} * chunks + c) * stride; };
  KernelStripe d{};
  d.len = len;
  d.k = static_cast<std::uint8_t>(k);
  d.rows = 2;
  d.flags = kNeedQ | kAligned16;
  for (std::uint32_t i = 0; i < k; ++i)
    d.data[i] = chunk(i);
  if (kind == Kind::kRecDataData) {
    const std::uint8_t g_yx = gexp(y - x);
    const std::uint8_t denom = g_yx ^ 1;
    const std::uint8_t a = gmul(g_yx, ginv(denom));
    const std::uint8_t b = gmul(ginv(gexp(x)), ginv(denom));
    d.data[x] = d.data[y] = nullptr;
    d.p_in = chunk(k);
    d.q_in = chunk(k + 1);
    d.out[0] = chunk(x);
    d.out[1] = chunk(y);
    d.coef[0][0] = a;
    d.coef[0][1] = b;
    d.coef[1][0] = a ^ 1;
    d.coef[1][1] = b;
  } else {
    d.out[0] = chunk(k);
    d.out[1] = chunk(k + 1);
    d.coef[0][0] = 1;
    d.coef[1][1] = 1;
    if (kind == Kind::kVerifyPQ) d.flags |= kCompare;
  }
  return d;
}

void reference_pq(const std::vector<std::uint8_t>& h, std::uint32_t s, std::uint32_t k,
                  std::size_t len, std::size_t stride, std::uint8_t* p, std::uint8_t* q) {
  const std::uint32_t chunks = k + 2;
  for (std::size_t o = 0; o < len; ++o) {
    std::uint8_t pp = 0;
    std::uint8_t qq = 0;
    for (std::uint32_t i = 0; i < k; ++i) {
      const std::uint8_t v = h[(std::size_t{s} * chunks + i) * stride + o];
      pp ^= v;
      qq ^= gmul(gexp(i), v);
    }
    p[o] = pp;
    q[o] = qq;
  }
}

struct Batch {
  KernelBatch view{};
  std::uint8_t* dev_desc = nullptr;
};

int upload(const std::vector<KernelStripe>& stripes, Batch& b) {
  const std::uint32_t n = static_cast<std::uint32_t>(stripes.size());
  std::vector<std::uint64_t> tiles(n + 1, 0);
  for (std::uint32_t i = 0; i < n; ++i)
    tiles[i + 1] = tiles[i] + tiles_for(stripes[i].len);
  const std::size_t s_bytes = n * sizeof(KernelStripe);
  const std::size_t t_off = (s_bytes + 255) / 256 * 256;
  const std::size_t f_off = t_off + ((n + 1) * 8 + 255) / 256 * 256;
  if (b.dev_desc != nullptr) CHECK(cudaFree(b.dev_desc));
  CHECK(cudaMalloc(&b.dev_desc, f_off + n * 4));
  CHECK(cudaMemcpy(b.dev_desc, stripes.data(), s_bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b.dev_desc + t_off, tiles.data(), (n + 1) * 8, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(b.dev_desc + f_off, 0, n * 4));
  b.view.stripes = reinterpret_cast<const KernelStripe*>(b.dev_desc);
  b.view.tile_begin = reinterpret_cast<const std::uint64_t*>(b.dev_desc + t_off);
  b.view.mismatch = reinterpret_cast<std::uint32_t*>(b.dev_desc + f_off);
  b.view.stripe_count = n;
  b.view.tile_count = tiles[n];
  return 0;
}

}  // namespace

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("{\"skipped\": \"no CUDA device\"}\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("{\"device\": \"%s\", \"sms\": %d}\n", prop.name, prop.multiProcessorCount);
  int per_sm = 0;
  CHECK(parity_kernel_blocks_per_sm(&per_sm));
  const unsigned max_blocks = static_cast<unsigned>(per_sm * prop.multiProcessorCount);

  // Correctness: 64 stripes, k = 8, 64 KiB + 37 bytes (wide lanes and a byte tail).
  const std::uint32_t k = 8;
  const std::uint32_t n = 64;
  const std::size_t len = 65536 + 37;
  const std::size_t stride = (len + 255) / 256 * 256;
  const std::size_t bytes = std::size_t{n} * (k + 2) * stride;
  std::vector<std::uint8_t> h(bytes);
  std::uint64_t r = 88172645463325252ULL;
  for (auto& v : h) {
    r ^= r << 13;
    r ^= r >> 7;
    r ^= r << 17;
    v = static_cast<std::uint8_t>(r);
  }
  std::uint8_t* d = nullptr;
  CHECK(cudaMalloc(&d, bytes));
  CHECK(cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice));
  Batch b;
  std::vector<KernelStripe> stripes;
  for (std::uint32_t s = 0; s < n; ++s)
    stripes.push_back(describe(Kind::kEncodePQ, d, s, k, len, stride, 0, 0));
  if (upload(stripes, b) != 0) return 1;
  CHECK(launch_parity_batch(b.view, max_blocks, nullptr));
  CHECK(cudaDeviceSynchronize());
  std::vector<std::uint8_t> out(bytes);
  CHECK(cudaMemcpy(out.data(), d, bytes, cudaMemcpyDeviceToHost));
  std::vector<std::uint8_t> p(len);
  std::vector<std::uint8_t> q(len);
  int bad = 0;
  for (std::uint32_t s = 0; s < n; ++s) {
    reference_pq(h, s, k, len, stride, p.data(), q.data());
    const std::size_t base = std::size_t{s} * (k + 2) * stride;
    bad += std::memcmp(out.data() + base + k * stride, p.data(), len) != 0;
    bad += std::memcmp(out.data() + base + (k + 1) * stride, q.data(), len) != 0;
  }
  std::printf("{\"check\": \"encode_pq\", \"mismatching_chunks\": %d}\n", bad);

  // Reconstruct D2 and D5 of every stripe after wiping them on the device.
  const std::vector<std::uint8_t> encoded = out;
  for (std::uint32_t s = 0; s < n; ++s) {
    for (std::uint32_t c : {2u, 5u})
      CHECK(cudaMemset(d + (std::size_t{s} * (k + 2) + c) * stride, 0, len));
  }
  stripes.clear();
  for (std::uint32_t s = 0; s < n; ++s)
    stripes.push_back(describe(Kind::kRecDataData, d, s, k, len, stride, 2, 5));
  if (upload(stripes, b) != 0) return 1;
  CHECK(launch_parity_batch(b.view, max_blocks, nullptr));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(out.data(), d, bytes, cudaMemcpyDeviceToHost));
  int bad_rec = 0;
  for (std::size_t i = 0; i < bytes; ++i)
    bad_rec += out[i] != encoded[i] && (i % stride) < len;
  std::printf("{\"check\": \"reconstruct_2_data\", \"mismatching_bytes\": %d}\n", bad_rec);

  // The same with the table-free constant multiply.
  for (std::uint32_t s = 0; s < n; ++s) {
    for (std::uint32_t c : {2u, 5u})
      CHECK(cudaMemset(d + (std::size_t{s} * (k + 2) + c) * stride, 0, len));
  }
  CHECK(launch_parity_batch(b.view, max_blocks, nullptr, GfMul::kBitSerial));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(out.data(), d, bytes, cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < bytes; ++i)
    bad_rec += out[i] != encoded[i] && (i % stride) < len;
  std::printf("{\"check\": \"reconstruct_2_data_bitserial\", \"mismatching_bytes_total\": %d}\n",
              bad_rec);

  // Verify: clean, then one flipped byte in stripe 7's Q.
  stripes.clear();
  for (std::uint32_t s = 0; s < n; ++s)
    stripes.push_back(describe(Kind::kVerifyPQ, d, s, k, len, stride, 0, 0));
  if (upload(stripes, b) != 0) return 1;
  std::uint8_t flip = encoded[(7 * (k + 2) + k + 1) * stride + 1000] ^ 0x40;
  CHECK(cudaMemcpy(d + (7 * (k + 2) + k + 1) * stride + 1000, &flip, 1, cudaMemcpyHostToDevice));
  CHECK(launch_parity_batch(b.view, max_blocks, nullptr));
  CHECK(cudaDeviceSynchronize());
  std::vector<std::uint32_t> flags(n);
  CHECK(cudaMemcpy(flags.data(), b.view.mismatch, n * 4, cudaMemcpyDeviceToHost));
  int wrong_flags = 0;
  for (std::uint32_t s = 0; s < n; ++s)
    wrong_flags += (flags[s] != 0) != (s == 7);
  std::printf("{\"check\": \"verify_pq\", \"wrong_flags\": %d}\n", wrong_flags);

  // Timing: kernels vs a device-to-device copy, events on the default stream, over 256 MiB of
  // stripes (k = 8, 64 KiB chunks) so that neither fits in L2.
  CHECK(cudaFree(d));
  const std::size_t tlen = 65536;
  const std::uint32_t tn = static_cast<std::uint32_t>(
      ((std::size_t{256} << 20) + (k + 2) * tlen - 1) / ((k + 2) * tlen));
  const std::size_t tbytes = std::size_t{tn} * (k + 2) * tlen;
  CHECK(cudaMalloc(&d, tbytes));
  {
    std::vector<std::uint8_t> fill(tbytes);
    for (auto& v : fill) {
      r ^= r << 13;
      r ^= r >> 7;
      r ^= r << 17;
      v = static_cast<std::uint8_t>(r);
    }
    CHECK(cudaMemcpy(d, fill.data(), tbytes, cudaMemcpyHostToDevice));
  }
  // Peak DRAM bandwidth from the device attributes: 2 transfers per clock x bus width.
  int mem_khz = 0;
  int bus_bits = 0;
  CHECK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0));
  CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0));
  const double peak_gbps = 2.0 * mem_khz * 1e3 * (bus_bits / 8) / 1e9;
  cudaEvent_t t0;
  cudaEvent_t t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  auto time_ms = [&](auto&& op, int iters) -> float {
    op();
    cudaEventRecord(t0);
    for (int i = 0; i < iters; ++i)
      op();
    cudaEventRecord(t1);
    cudaEventSynchronize(t1);
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    return ms / iters;
  };
  std::uint8_t* copy_dst = nullptr;
  CHECK(cudaMalloc(&copy_dst, tbytes));
  const float copy_ms =
      time_ms([&] { cudaMemcpyAsync(copy_dst, d, tbytes, cudaMemcpyDeviceToDevice); }, 20);
  const double copy_gbps = 2.0 * tbytes / (copy_ms / 1e3) / 1e9;
  stripes.clear();
  for (std::uint32_t s = 0; s < tn; ++s)
    stripes.push_back(describe(Kind::kEncodePQ, d, s, k, tlen, tlen, 0, 0));
  if (upload(stripes, b) != 0) return 1;
  const float enc_ms = time_ms([&] { launch_parity_batch(b.view, max_blocks, nullptr); }, 20);
  const double enc_gbps = static_cast<double>(tbytes) / (enc_ms / 1e3) / 1e9;
  stripes.clear();
  for (std::uint32_t s = 0; s < tn; ++s)
    stripes.push_back(describe(Kind::kRecDataData, d, s, k, tlen, tlen, 2, 5));
  if (upload(stripes, b) != 0) return 1;
  const float rec_ms = time_ms([&] { launch_parity_batch(b.view, max_blocks, nullptr); }, 20);
  const double rec_gbps = static_cast<double>(tbytes) / (rec_ms / 1e3) / 1e9;
  const float rec_bs_ms =
      time_ms([&] { launch_parity_batch(b.view, max_blocks, nullptr, GfMul::kBitSerial); }, 20);
  const double rec_bs_gbps = static_cast<double>(tbytes) / (rec_bs_ms / 1e3) / 1e9;
  CHECK(cudaGetLastError());
  std::printf(
      "{\"bench\": \"k8_64K_x%u\", \"working_set_MiB\": %zu, \"peak_GBps\": %.1f, "
      "\"d2d_GBps\": %.1f, \"d2d_ratio_peak\": %.3f, \"enc_pq_GBps\": %.1f, "
      "\"enc_ratio_d2d\": %.3f, \"enc_ratio_peak\": %.3f, \"rec2_GBps\": %.1f, "
      "\"rec2_ratio_d2d\": %.3f, \"rec2_ratio_peak\": %.3f, \"rec2_bitserial_GBps\": %.1f, "
      "\"rec2_bitserial_ratio_d2d\": %.3f, \"rec2_bitserial_ratio_peak\": %.3f}\n",
      tn, tbytes >> 20, peak_gbps, copy_gbps, copy_gbps / peak_gbps, enc_gbps, enc_gbps / copy_gbps,
      enc_gbps / peak_gbps, rec_gbps, rec_gbps / copy_gbps, rec_gbps / peak_gbps, rec_bs_gbps,
      rec_bs_gbps / copy_gbps, rec_bs_gbps / peak_gbps);
  return (bad || bad_rec || wrong_flags) ? 1 : 0;
}
