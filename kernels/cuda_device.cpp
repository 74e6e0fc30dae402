// Finding CUDA devices and describing them (what `describe controller` will show), and turning
// CUDA errors into Status values.

#include <cuda_runtime_api.h>

#include <utility>
#include <vector>

#include "cuda_backend.h"
#include "cuda_util.h"

namespace graid {

namespace kernels {

Result<CudaDeviceInfo> query_device_info(int ordinal) {
  cudaDeviceProp prop{};
  cudaError_t e = cudaGetDeviceProperties(&prop, ordinal);
  if (e != cudaSuccess) return cuda_status(e, "cudaGetDeviceProperties");
  CudaDeviceInfo info;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.total_memory = prop.totalGlobalMem;
  info.sm_count = prop.multiProcessorCount;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.can_map_host_memory = prop.canMapHostMemory != 0;
  int value = 0;
  if (cudaDeviceGetAttribute(&value, cudaDevAttrMemoryClockRate, ordinal) == cudaSuccess)
    info.memory_clock_khz = value;
  if (cudaDeviceGetAttribute(&value, cudaDevAttrGlobalMemoryBusWidth, ordinal) == cudaSuccess)
    info.memory_bus_bits = value;
  if (cudaDeviceGetAttribute(&value, cudaDevAttrCanUseHostPointerForRegisteredMem, ordinal) ==
      cudaSuccess)
    info.host_pointer_for_registered_mem = value != 0;
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) == cudaSuccess) info.pci_bus_id = bus;
  (void)cudaDriverGetVersion(&info.driver_version);
  (void)cudaRuntimeGetVersion(&info.runtime_version);
  return info;
}

Status cuda_status(cudaError_t e, std::string_view what) {
  return make_error(Errc::kIoError, "CUDA {} failed: {} ({})", what, cudaGetErrorName(e),
                    cudaGetErrorString(e));
}

Result<int> cuda_device_count() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    // No driver (libcuda.so absent), driver older than this runtime, no device node...: all
    // mean "no GPU here", not a bug. The runtime reports a missing driver as an insufficient
    // one; say both.
    if (e == cudaErrorInsufficientDriver) {
      int runtime = 0;
      (void)cudaRuntimeGetVersion(&runtime);
      return make_error(Errc::kUnsupported,
                        "no CUDA device: no NVIDIA driver, or one older than CUDA {}.{} ({})",
                        runtime / 1000, runtime % 1000 / 10, cudaGetErrorName(e));
    }
    return make_error(Errc::kUnsupported, "no CUDA device: {} ({})", cudaGetErrorName(e),
                      cudaGetErrorString(e));
  }
  if (count == 0) return Status(Errc::kUnsupported, "no CUDA device: none visible");
  return count;
}

}  // namespace kernels

Result<std::vector<CudaDeviceInfo>> cuda_devices() {
  Result<int> count = kernels::cuda_device_count();
  if (!count.is_ok()) return count.status();
  std::vector<CudaDeviceInfo> out;
  for (int d = 0; d < *count; ++d) {
    Result<CudaDeviceInfo> info = kernels::query_device_info(d);
    if (!info.is_ok()) return info.status();
    out.push_back(std::move(info).value());
  }
  return out;
}

}  // namespace graid
