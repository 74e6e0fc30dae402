// Knobs and counters of the fake CUDA runtime (tests/fake_cuda/cuda_runtime_api.h).
#pragma once

#include <cstddef>
#include <string>

namespace graid::fake_cuda {

struct Knobs {
  int devices = 1;                   // 0: cudaGetDeviceCount says cudaErrorNoDevice
  bool batch_copy_supported = true;  // false: cudaMemcpyBatchAsync -> cudaErrorNotSupported
  std::size_t device_memory = std::size_t{4} << 30;  // cudaMalloc beyond this in total: OOM
  bool refuse_host_register = false;  // true: cudaHostRegister -> cudaErrorNotSupported
};

struct Counters {
  std::size_t copies = 0;       // individual copies done (a batch counts each of its copies)
  std::size_t copy_calls = 0;   // cudaMemcpyAsync + cudaMemcpyBatchAsync calls
  std::size_t batch_calls = 0;  // cudaMemcpyBatchAsync calls that copied
  std::size_t launches = 0;
  std::size_t registered = 0;     // regions registered now
  std::size_t device_allocs = 0;  // live cudaMalloc blocks
  std::size_t pinned_allocs = 0;  // live cudaMallocHost blocks
};

// Replaces the knobs (thread-safe; takes effect for later calls).
void set_knobs(const Knobs& knobs);
Counters counters();
// Every misuse the fake caught since the last call (a copy outside any allocation, a launch
// reading memory the device could not see, unregistering what was not registered...), then
// cleared. Tests assert it is empty.
std::string take_violations();

}  // namespace graid::fake_cuda
