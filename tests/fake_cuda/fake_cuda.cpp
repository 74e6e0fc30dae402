// The fake CUDA runtime: host memory stands in for the device, the host emulator for the kernel.
// See cuda_runtime_api.h beside this for what is checked.

#include "fake_cuda.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda_launch.h"
#include "kernels/host_emulator.h"

struct FakeCudaStream {
  int id = 0;
  bool blocking = true;  // false: cudaStreamNonBlocking (no implicit sync with the legacy stream)
};
struct FakeCudaEvent {
  std::chrono::steady_clock::time_point at{};  // when recorded (work runs at call time)
  FakeCudaStream* stream = nullptr;            // where it was last recorded
};

namespace graid::fake_cuda {
namespace {

struct Block {
  std::uintptr_t end = 0;
  std::unique_ptr<std::byte[]> owned;  // device and pinned blocks; null for registrations
};

// GRAID_FAKE_CUDA_FAIL_LAUNCH=N in the environment: the Nth launch fails as a kernel fault
// would (for whole programs, e.g. graid-bench-fakecuda, that tests cannot reach through knobs).
std::size_t fail_launch_from_env() {
  const char* v = std::getenv("GRAID_FAKE_CUDA_FAIL_LAUNCH");
  return v == nullptr ? 0 : static_cast<std::size_t>(std::strtoull(v, nullptr, 10));
}

// A write to device memory that the device may still be doing: issued on `stream` (null: the
// legacy default stream) and not yet waited for. The fake does every copy at call time, so it
// tracks stream order instead: a later read on a stream not ordered after `stream` is a race on a
// real device (a plain cudaMemcpy from pageable memory or a cudaMemset returns before the device
// has written, and a non-blocking stream does not wait for the legacy stream).
struct PendingWrite {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  FakeCudaStream* stream = nullptr;
};

struct State {
  std::mutex mu;
  std::vector<PendingWrite> pending;
  Knobs knobs;
  std::size_t fail_launch = fail_launch_from_env();
  Counters counters;
  std::string violations;
  std::size_t device_bytes = 0;
  std::map<std::uintptr_t, Block> device;      // begin -> block
  std::map<std::uintptr_t, Block> pinned;      // cudaMallocHost
  std::map<std::uintptr_t, Block> registered;  // cudaHostRegister
  std::map<FakeCudaStream*, std::unique_ptr<FakeCudaStream>> streams;
  std::map<FakeCudaEvent*, std::unique_ptr<FakeCudaEvent>> events;
};

State& state() {
  static State s;
  return s;
}

std::uintptr_t addr(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

// The block of `m` holding [p, p + n), or null. REQUIRES: mu held.
const Block* find(const std::map<std::uintptr_t, Block>& m, const void* p, std::size_t n) {
  const std::uintptr_t b = addr(p);
  auto it = m.upper_bound(b);
  if (it == m.begin()) return nullptr;
  --it;
  return (b >= it->first && b + n <= it->second.end) ? &it->second : nullptr;
}

bool overlaps_any(const std::map<std::uintptr_t, Block>& m, std::uintptr_t b, std::uintptr_t e) {
  for (const auto& [begin, block] : m) {
    if (b < block.end && begin < e) return true;
  }
  return false;
}

void violation(State& s, const std::string& what) {
  s.violations += what;
  s.violations += "; ";
}

// Allocates `size` bytes aligned to 256 (as cudaMalloc) filled with a poison pattern, so bytes the
// backend forgot to copy in show up as garbage rather than as zeros.
std::unique_ptr<std::byte[]> poisoned(std::size_t size, std::uintptr_t& begin) {
  auto mem = std::make_unique<std::byte[]>(size + 256);
  begin = (addr(mem.get()) + 255) & ~std::uintptr_t{255};
  std::memset(reinterpret_cast<void*>(begin), 0xa5, size);
  return mem;
}

// Checks one copy and says which way it goes: true when it is legal for `kind` (H2D: destination
// inside one device block, source not device memory; D2H the other way round). REQUIRES: mu held.
bool check_copy(State& s, void* dst, const void* src, std::size_t n, cudaMemcpyKind kind) {
  const bool dst_dev = find(s.device, dst, n) != nullptr;
  const bool src_dev = find(s.device, src, n) != nullptr;
  const bool src_touches_dev = find(s.device, src, 1) != nullptr;
  const bool dst_touches_dev = find(s.device, dst, 1) != nullptr;
  if (kind == cudaMemcpyHostToDevice) {
    if (!dst_dev) violation(s, "H2D destination not inside one device allocation");
    if (src_touches_dev) violation(s, "H2D source is device memory");
    return dst_dev && !src_touches_dev;
  }
  if (kind == cudaMemcpyDeviceToHost) {
    if (!src_dev) violation(s, "D2H source not inside one device allocation");
    if (dst_touches_dev) violation(s, "D2H destination is device memory");
    return src_dev && !dst_touches_dev;
  }
  if (kind == cudaMemcpyDeviceToDevice) {
    if (!src_dev || !dst_dev) violation(s, "D2D copy not inside device allocations");
    return src_dev && dst_dev;
  }
  violation(s, "unexpected copy kind");
  return false;
}

// Whether work on `reader` is ordered after earlier work on `writer` without an explicit wait:
// the same stream, or the legacy default stream (null) and a blocking stream, which synchronise
// with each other implicitly.
bool ordered(const FakeCudaStream* writer, const FakeCudaStream* reader) {
  if (writer == reader) return true;
  if (writer == nullptr) return reader->blocking;
  return reader == nullptr && writer->blocking;
}

// Notes a write of [p, p + n) of device memory on `stream`. REQUIRES: mu held.
void note_write(State& s, const void* p, std::size_t n, FakeCudaStream* stream) {
  if (n == 0 || find(s.device, p, 1) == nullptr) return;
  s.pending.push_back({addr(p), addr(p) + n, stream});
}

// Checks that a read of [p, p + n) on `stream` is ordered after every pending write to it.
// REQUIRES: mu held.
void check_read(State& s, const void* p, std::size_t n, const FakeCudaStream* stream,
                const char* what) {
  if (s.pending.empty() || find(s.device, p, 1) == nullptr)
    return;  // only device memory is tracked
  const std::uintptr_t b = addr(p);
  for (const PendingWrite& w : s.pending) {
    if (b < w.end && w.begin < b + n && !ordered(w.stream, stream)) {
      violation(s, std::string(what) +
                       " reads device memory written on another stream that it does not wait for");
      return;
    }
  }
}

// The writes a wait for `stream` completes (null: the legacy stream, which also waits for the
// blocking streams). REQUIRES: mu held.
void waited_for(State& s, const FakeCudaStream* stream) {
  std::erase_if(s.pending, [&](const PendingWrite& w) {
    return w.stream == stream || (stream == nullptr && w.stream != nullptr && w.stream->blocking);
  });
}

// Memory the kernel may touch: device blocks, or registered (mapped) host memory.
bool device_visible(State& s, const void* p, std::size_t n) {
  return find(s.device, p, n) != nullptr || find(s.registered, p, n) != nullptr;
}

}  // namespace

void set_knobs(const Knobs& knobs) {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.knobs = knobs;
}

Counters counters() {
  State& s = state();
  std::lock_guard lock(s.mu);
  Counters c = s.counters;
  c.registered = s.registered.size();
  c.device_allocs = s.device.size();
  c.pinned_allocs = s.pinned.size();
  return c;
}

std::string take_violations() {
  State& s = state();
  std::lock_guard lock(s.mu);
  return std::exchange(s.violations, std::string());
}

}  // namespace graid::fake_cuda

using graid::fake_cuda::state;
using graid::fake_cuda::State;

namespace {

// The runtime's per-thread "last error": every failing call sets it, cudaGetLastError() returns
// and clears it. A kernel launch reports its own failure only there, so code that reads it after
// a launch also sees any earlier unchecked failure of this thread, as on a real device.
thread_local cudaError_t t_last_error = cudaSuccess;

cudaError_t fail(cudaError_t e) {
  t_last_error = e;
  return e;
}

}  // namespace

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInsufficientDriver:
      return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorSetOnActiveProcess:
      return "cudaErrorSetOnActiveProcess";
    case cudaErrorHostMemoryAlreadyRegistered:
      return "cudaErrorHostMemoryAlreadyRegistered";
    case cudaErrorHostMemoryNotRegistered:
      return "cudaErrorHostMemoryNotRegistered";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported:
      return "cudaErrorNotSupported";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "fake CUDA runtime error";
}

cudaError_t cudaGetLastError() {
  return std::exchange(t_last_error, cudaSuccess);
}

cudaError_t cudaPeekAtLastError() {
  return t_last_error;
}

cudaError_t cudaGetDeviceCount(int* count) {
  State& s = state();
  std::lock_guard lock(s.mu);
  *count = s.knobs.devices;
  return s.knobs.devices > 0 ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (device < 0 || device >= s.knobs.devices) return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "graid fake GPU %d", device);
  prop->totalGlobalMem = s.knobs.device_memory;
  prop->multiProcessorCount = 4;
  prop->major = 9;
  prop->minor = 0;
  prop->canMapHostMemory = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int /*device*/) {
  switch (attr) {
    case cudaDevAttrMemoryClockRate:
      *value = 1000000;
      return cudaSuccess;
    case cudaDevAttrGlobalMemoryBusWidth:
      *value = 1024;
      return cudaSuccess;
    case cudaDevAttrCanUseHostPointerForRegisteredMem:
      *value = 1;
      return cudaSuccess;
  }
  return fail(cudaErrorInvalidValue);
}

cudaError_t cudaDeviceGetPCIBusId(char* bus, int len, int device) {
  std::snprintf(bus, static_cast<std::size_t>(len), "0000:f%d:00.0", device);
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return device >= 0 && device < s.knobs.devices ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

cudaError_t cudaSetDeviceFlags(unsigned /*flags*/) {
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, std::size_t size) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.device_bytes + size > s.knobs.device_memory) return fail(cudaErrorMemoryAllocation);
  std::uintptr_t begin = 0;
  graid::fake_cuda::Block block;
  block.owned = graid::fake_cuda::poisoned(size, begin);
  block.end = begin + size;
  s.device_bytes += size;
  s.device[begin] = std::move(block);
  *p = reinterpret_cast<void*>(begin);
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;  // the context-creation idiom
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.device.find(graid::fake_cuda::addr(p));
  if (it == s.device.end()) {
    graid::fake_cuda::violation(s, "cudaFree of an unknown pointer");
    return fail(cudaErrorInvalidValue);
  }
  s.device_bytes -= it->second.end - it->first;
  s.device.erase(it);
  s.pending.clear();  // cudaFree waits for the whole device
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, std::size_t size) {
  State& s = state();
  std::lock_guard lock(s.mu);
  std::uintptr_t begin = 0;
  graid::fake_cuda::Block block;
  block.owned = graid::fake_cuda::poisoned(size, begin);
  block.end = begin + size;
  s.pinned[begin] = std::move(block);
  *p = reinterpret_cast<void*>(begin);
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* p) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.pinned.erase(graid::fake_cuda::addr(p)) == 0) {
    graid::fake_cuda::violation(s, "cudaFreeHost of an unknown pointer");
    return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaHostRegister(void* p, std::size_t size, unsigned /*flags*/) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.knobs.refuse_host_register) return fail(cudaErrorNotSupported);
  const std::uintptr_t b = graid::fake_cuda::addr(p);
  if (p == nullptr || size == 0) return fail(cudaErrorInvalidValue);
  if (graid::fake_cuda::overlaps_any(s.registered, b, b + size)) {
    return fail(cudaErrorHostMemoryAlreadyRegistered);
  }
  s.registered[b] = graid::fake_cuda::Block{b + size, nullptr};
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void* p) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.registered.erase(graid::fake_cuda::addr(p)) == 0) {
    graid::fake_cuda::violation(s, "cudaHostUnregister of memory that is not registered");
    return fail(cudaErrorHostMemoryNotRegistered);
  }
  return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned /*flags*/) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (graid::fake_cuda::find(s.registered, host, 1) == nullptr) return fail(cudaErrorInvalidValue);
  *device = host;  // as on devices with cudaDevAttrCanUseHostPointerForRegisteredMem
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* out, unsigned flags) {
  State& s = state();
  std::lock_guard lock(s.mu);
  auto stream = std::make_unique<FakeCudaStream>();
  stream->blocking = (flags & cudaStreamNonBlocking) == 0;
  stream->id = static_cast<int>(s.streams.size());
  *out = stream.get();
  s.streams[stream.get()] = std::move(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* out) {
  return cudaStreamCreateWithFlags(out, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  State& s = state();
  std::lock_guard lock(s.mu);
  std::erase_if(s.pending, [&](const auto& w) { return w.stream == stream; });
  return s.streams.erase(stream) == 1 ? cudaSuccess : fail(cudaErrorInvalidValue);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  State& s = state();
  std::lock_guard lock(s.mu);
  graid::fake_cuda::waited_for(s, stream);  // the work itself ran at call time
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.pending.clear();
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* out) {
  State& s = state();
  std::lock_guard lock(s.mu);
  auto event = std::make_unique<FakeCudaEvent>();
  *out = event.get();
  s.events[event.get()] = std::move(event);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.events.erase(event) == 1 ? cudaSuccess : fail(cudaErrorInvalidValue);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  State& s = state();
  {
    std::lock_guard lock(s.mu);
    ++s.counters.copy_calls;
    if (!graid::fake_cuda::check_copy(s, dst, src, n, kind)) return fail(cudaErrorIllegalAddress);
    ++s.counters.copies;
    graid::fake_cuda::check_read(s, src, n, stream, "a copy");
    graid::fake_cuda::note_write(s, dst, n, stream);
  }
  std::memcpy(dst, src, n);
  return cudaSuccess;
}

// On the legacy stream. To the device from pageable memory it returns once the source is staged,
// before the device has written (a pending write); from pinned memory, and back to the host, it
// returns when the copy is done (and waits for the legacy stream first).
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind) {
  const cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, nullptr);
  State& s = state();
  std::lock_guard lock(s.mu);
  if (kind != cudaMemcpyHostToDevice || graid::fake_cuda::find(s.pinned, src, n) != nullptr) {
    graid::fake_cuda::waited_for(s, nullptr);
  }
  return e;
}

cudaError_t cudaMemsetAsync(void* p, int value, std::size_t n, cudaStream_t stream) {
  State& s = state();
  {
    std::lock_guard lock(s.mu);
    if (graid::fake_cuda::find(s.device, p, n) == nullptr) {
      graid::fake_cuda::violation(s, "memset outside device memory");
      return fail(cudaErrorIllegalAddress);
    }
    graid::fake_cuda::note_write(s, p, n, stream);
  }
  std::memset(p, value, n);
  return cudaSuccess;
}

// Asynchronous to the host for device memory: a pending write on the legacy stream.
cudaError_t cudaMemset(void* p, int value, std::size_t n) {
  return cudaMemsetAsync(p, value, n, nullptr);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  event->at = std::chrono::steady_clock::now();
  event->stream = stream;
  return cudaSuccess;
}

// Approximately: as if the event were the last work of its stream.
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  State& s = state();
  std::lock_guard lock(s.mu);
  graid::fake_cuda::waited_for(s, event->stream);
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}

cudaError_t cudaMemcpyBatchAsync(void* const* dsts, const void* const* srcs,
                                 const std::size_t* sizes, std::size_t count,
                                 cudaMemcpyAttributes* attrs, std::size_t* attrs_idxs,
                                 std::size_t num_attrs, cudaStream_t stream) {
  State& s = state();
  {
    std::lock_guard lock(s.mu);
    if (!s.knobs.batch_copy_supported) return fail(cudaErrorNotSupported);
    // The real API's rules (cuda_runtime_api.h): attrsIdxs[0] == 0, increasing, < count,
    // numAttrs <= count, and every attribute's srcAccessOrder valid.
    if (count == 0 || num_attrs == 0 || num_attrs > count || attrs == nullptr ||
        attrs_idxs == nullptr || attrs_idxs[0] != 0) {
      return fail(cudaErrorInvalidValue);
    }
    for (std::size_t i = 0; i < num_attrs; ++i) {
      if (i > 0 && attrs_idxs[i] <= attrs_idxs[i - 1]) return fail(cudaErrorInvalidValue);
      if (attrs_idxs[i] >= count) return fail(cudaErrorInvalidValue);
      if (attrs[i].srcAccessOrder == cudaMemcpySrcAccessOrderInvalid)
        return fail(cudaErrorInvalidValue);
    }
    ++s.counters.copy_calls;
    ++s.counters.batch_calls;
    for (std::size_t i = 0; i < count; ++i) {
      const bool to_device = graid::fake_cuda::find(s.device, dsts[i], 1) != nullptr;
      const cudaMemcpyKind kind = to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
      if (!graid::fake_cuda::check_copy(s, dsts[i], srcs[i], sizes[i], kind)) {
        return fail(cudaErrorIllegalAddress);
      }
      graid::fake_cuda::check_read(s, srcs[i], sizes[i], stream, "a batched copy");
      graid::fake_cuda::note_write(s, dsts[i], sizes[i], stream);
    }
    s.counters.copies += count;
  }
  for (std::size_t i = 0; i < count; ++i)
    std::memcpy(dsts[i], srcs[i], sizes[i]);
  return cudaSuccess;
}

namespace graid::kernels {

// The kernel launch: a refused or faulting launch sets the thread's last error and returns nothing,
// as `kernel<<<...>>>` does (the fake runs the kernel at launch time, so a fault shows here).
void enqueue_parity_kernel(const KernelBatch& batch, unsigned blocks, cudaStream_t stream,
                           GfMul gf) noexcept {
  State& s = state();
  {
    std::lock_guard lock(s.mu);
    ++s.counters.launches;
    if (blocks == 0 || batch.tile_count == 0) return (void)fail(cudaErrorInvalidValue);
    if (s.fail_launch != 0 && s.counters.launches == s.fail_launch)
      return (void)fail(cudaErrorLaunchFailure);
    const std::size_t n = batch.stripe_count;
    // The descriptor arrays must be in device memory, then every pointer a lane dereferences.
    if (graid::fake_cuda::find(s.device, batch.stripes, n * sizeof(KernelStripe)) == nullptr ||
        graid::fake_cuda::find(s.device, batch.tile_begin, (n + 1) * sizeof(std::uint64_t)) ==
            nullptr ||
        graid::fake_cuda::find(s.device, batch.mismatch, n * sizeof(std::uint32_t)) == nullptr) {
      graid::fake_cuda::violation(s, "launch: descriptor arrays not in device memory");
      return (void)fail(cudaErrorIllegalAddress);
    }
    using graid::fake_cuda::check_read;
    check_read(s, batch.stripes, n * sizeof(KernelStripe), stream, "launch (descriptors)");
    check_read(s, batch.tile_begin, (n + 1) * sizeof(std::uint64_t), stream, "launch (tiles)");
    check_read(s, batch.mismatch, n * sizeof(std::uint32_t), stream, "launch (verify flags)");
    for (std::size_t i = 0; i < n; ++i) {
      const KernelStripe& st = batch.stripes[i];
      bool ok = true;
      for (std::uint32_t d = 0; d < st.k; ++d) {
        if (st.data[d] != nullptr)
          ok = ok && graid::fake_cuda::device_visible(s, st.data[d], st.len);
      }
      if (st.p_in != nullptr) ok = ok && graid::fake_cuda::device_visible(s, st.p_in, st.len);
      if (st.q_in != nullptr) ok = ok && graid::fake_cuda::device_visible(s, st.q_in, st.len);
      for (std::uint32_t r = 0; r < st.rows; ++r)
        ok = ok && graid::fake_cuda::device_visible(s, st.out[r], st.len);
      if (!ok) {
        graid::fake_cuda::violation(s, "launch: a stripe points at memory the device cannot see");
        return (void)fail(cudaErrorIllegalAddress);
      }
      for (std::uint32_t d = 0; d < st.k; ++d) {
        if (st.data[d] != nullptr) check_read(s, st.data[d], st.len, stream, "launch (data)");
      }
      if (st.p_in != nullptr) check_read(s, st.p_in, st.len, stream, "launch (P)");
      if (st.q_in != nullptr) check_read(s, st.q_in, st.len, stream, "launch (Q)");
      for (std::uint32_t r = 0; r < st.rows; ++r)
        graid::fake_cuda::note_write(s, st.out[r], st.len, stream);
    }
    graid::fake_cuda::note_write(s, batch.mismatch, n * sizeof(std::uint32_t), stream);
  }
  emulate_batch(batch, gf);
}

cudaError_t parity_kernel_blocks_per_sm(int* blocks, GfMul /*gf*/) noexcept {
  *blocks = 2;
  return cudaSuccess;
}

}  // namespace graid::kernels
