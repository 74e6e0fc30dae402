// RAII owners for CUDA resources and small helpers (kernels/ only; includes the CUDA runtime API).
//
// Destructors ignore errors on purpose: after a sticky error every CUDA call fails, and freeing
// must still not throw, abort or leak the handle's bookkeeping on our side.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string_view>
#include <utility>

#include "cuda_backend.h"
#include "graid/status.h"

namespace graid::kernels {

// "CUDA <what> failed: <name> (<description>)" as kIoError.
Status cuda_status(cudaError_t e, std::string_view what);
// Visible devices, or kUnsupported "no CUDA device: <reason>".
Result<int> cuda_device_count();
Result<CudaDeviceInfo> query_device_info(int ordinal);

class CudaStream {
 public:
  CudaStream() = default;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream() {
    if (s_ != nullptr) (void)cudaStreamDestroy(s_);
  }
  // Non-blocking: the stream never waits on the legacy default stream other libraries may use.
  cudaError_t create() { return cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking); }
  cudaStream_t get() const noexcept { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class CudaEvent {
 public:
  CudaEvent() = default;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  ~CudaEvent() {
    if (e_ != nullptr) (void)cudaEventDestroy(e_);
  }
  cudaError_t create() { return cudaEventCreate(&e_); }
  cudaEvent_t get() const noexcept { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// Device memory (cudaMalloc) or pinned host memory (cudaMallocHost), freed on destruction.
template <bool kPinnedHost>
class CudaMemory {
 public:
  CudaMemory() = default;
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;
  CudaMemory(CudaMemory&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  ~CudaMemory() { reset(); }

  cudaError_t allocate(std::size_t size) {
    reset();
    void* p = nullptr;
    const cudaError_t e = kPinnedHost ? cudaMallocHost(&p, size) : cudaMalloc(&p, size);
    if (e == cudaSuccess) {
      p_ = static_cast<std::byte*>(p);
      size_ = size;
    }
    return e;
  }
  void reset() noexcept {
    if (p_ != nullptr) {
      if (kPinnedHost) {
        (void)cudaFreeHost(p_);
      } else {
        (void)cudaFree(p_);
      }
    }
    p_ = nullptr;
    size_ = 0;
  }
  std::byte* get() const noexcept { return p_; }
  std::size_t size() const noexcept { return size_; }

 private:
  std::byte* p_ = nullptr;
  std::size_t size_ = 0;
};

using CudaDeviceMemory = CudaMemory<false>;
using CudaPinnedMemory = CudaMemory<true>;

}  // namespace graid::kernels
