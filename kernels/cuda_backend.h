// The `cuda` parity backend, seen from plain C++ (no CUDA header; compiles without nvcc).
//
// In a build without CUDA (GRAID_WITH_CUDA=OFF) every function here still exists and says
// "built without CUDA". In a build with CUDA, the runtime is linked statically, so the binary runs
// on a machine with no GPU or driver: make_cuda_backend() then returns "no CUDA device: <reason>"
// and callers use the cpu backend (make_preferred_parity_backend() does that and logs it once).
//
// How a batch runs (cuda_backend.cpp):
//   1. validate every job; plan each one (kernel_batch.h: inputs, outputs, GF coefficients);
//   2. lay the batch out in a device arena: descriptors, tile prefix, verify flags, one region
//      per chunk read or written;
//   3. host-to-device copies on one of a few streams: straight from the caller's memory when it
//      was registered (add_region: pinned once, DMA without a CPU copy), else through a
//      pinned staging buffer (one CPU memcpy per chunk);
//   4. one kernel launch for the whole batch; device-to-host copies of the outputs and flags;
//   5. wait on the stream (blocking sync, not spinning: host CPU per GB is a target).
// With Transfer::kMapped and all of a batch's chunks registered, steps 2-4 copy nothing: the
// kernel reads and writes the registered host memory over the bus (zero-copy); which is faster is
// for the benchmark to say.
//
// Errors: every CUDA call is checked. Out of device memory fails only that batch over to the cpu
// backend. Any other CUDA error is treated as sticky: the backend marks itself dead (logged once),
// the batch is redone on the cpu backend, and every later batch goes straight to the cpu. So
// execute() keeps ParityBackend's contract (complete, correct outputs) through a device failure.
// With fallback_to_cpu = false a device error is returned instead (the batcher does its own
// failover).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graid/host_memory.h"
#include "graid/parity.h"
#include "graid/status.h"
#include "kernels/parity_kernels.h"

namespace graid {

// What the daemon shows for `describe controller`.
struct CudaDeviceInfo {
  int ordinal = -1;
  std::string name;        // "NVIDIA H200"
  std::string pci_bus_id;  // "0000:19:00.0"
  std::size_t total_memory = 0;
  int sm_count = 0;
  int compute_major = 0;
  int compute_minor = 0;
  int driver_version = 0;   // CUDA driver API version, e.g. 13000
  int runtime_version = 0;  // the (static) runtime linked in
  int memory_bus_bits = 0;
  int memory_clock_khz = 0;
  bool can_map_host_memory = false;
  bool host_pointer_for_registered_mem = false;  // registered host memory has the same address

  // 2 x clock x bus width (DDR), in GB/s; 0 when the device does not report it.
  double peak_memory_gbps() const noexcept {
    return 2.0 * memory_clock_khz * 1e3 * (memory_bus_bits / 8.0) / 1e9;
  }
};

// True when this binary contains the CUDA backend (built with GRAID_WITH_CUDA).
bool cuda_backend_compiled() noexcept;

// Every visible CUDA device. kUnsupported "built without CUDA" or "no CUDA device: <reason>"
// when there is none (no driver, no device, driver too old).
Result<std::vector<CudaDeviceInfo>> cuda_devices();

struct CudaBackendOptions {
  enum class Transfer : std::uint8_t { kCopy, kMapped };

  int device = 0;
  unsigned streams = 4;  // concurrent execute() calls that can each have a batch on the device
  Transfer transfer = Transfer::kCopy;
  // Wait for the device by sleeping (cudaDeviceScheduleBlockingSync) rather than spinning: costs
  // a few microseconds of latency, saves a host core per waiting thread.
  bool blocking_sync = true;
  bool fallback_to_cpu = true;
  // How the kernel multiplies by reconstruct's constants (see parity_kernels.h); identical bytes
  // either way, speed measured by cuda_bench (kernel/rec2 vs kernel/rec2_bitserial).
  kernels::GfMul gf_mul = kernels::GfMul::kLogExp;
  // Issue each direction's copies of a batch with one cudaMemcpyBatchAsync (after merging chunks
  // that neighbour in host memory) rather than one cudaMemcpyAsync per chunk: a 64 KiB copy call
  // costs the host about as long as the copy itself takes on the link.
  bool batched_copies = true;
  // Largest device arena one stream may hold; a bigger batch is run in pieces.
  std::size_t max_arena_bytes = std::size_t{512} << 20;
  // Batches bigger than this go in pieces of about this size, alternating between two streams
  // when a second one is free, so results of one piece travel back while the next one's inputs
  // go out. Each piece costs a launch, two copy calls and a wait.
  std::size_t pipeline_piece_bytes = std::size_t{16} << 20;
  // Test seam: called before each checked CUDA step with its name ("h2d", "launch", "d2h",
  // "sync", ...); returning true makes that step fail with a sticky error, as if the device had
  // died there.
  std::function<bool(std::string_view step)> fault_hook;
};

struct CudaBackendStats {
  std::uint64_t device_batches = 0;  // execute() calls served by the device
  std::uint64_t launches = 0;        // pieces run on the device (a batch may be several)
  std::uint64_t device_jobs = 0;
  std::uint64_t cpu_batches = 0;  // run on the cpu backend (dead device or failover)
  std::uint64_t cpu_jobs = 0;
  std::uint64_t bytes_to_device = 0;
  std::uint64_t bytes_from_device = 0;
  std::uint64_t staged_bytes = 0;  // bytes the CPU copied through pinned staging
  std::uint64_t copy_calls = 0;    // host<->device copy API calls (a batched call counts once)
};

// As a HostMemoryRegistry (ArrayOptions::host_memory), add_region() pins caller memory once
// (cudaHostRegister, mapped), e.g. a slab of the engine's staging buffers, so chunks inside it
// move by DMA without a staging copy; remove_region() unpins it. Regions may not overlap. Memory
// still registered when the backend is destroyed is unregistered then, so it must stay alive
// until remove_region() or the backend's destruction.
class CudaBackend : public ParityBackend, public HostMemoryRegistry {
 public:
  // True once a sticky CUDA error has sent the backend to the cpu for good.
  virtual bool dead() const noexcept = 0;
  virtual const CudaDeviceInfo& device_info() const noexcept = 0;
  virtual CudaBackendStats stats() const noexcept = 0;
};

// The cuda backend on options.device. Fails with kUnsupported ("built without CUDA", "no CUDA
// device: ...") or the CUDA error that stopped start-up.
Result<std::unique_ptr<CudaBackend>> make_cuda_backend(CudaBackendOptions options = {});

// `cuda` when it starts, else `cpu`; says which and why in the log, once per process.
std::unique_ptr<ParityBackend> make_preferred_parity_backend(CudaBackendOptions options = {});

}  // namespace graid
