// The cuda backend's entry points in a build without CUDA (GRAID_WITH_CUDA=OFF): each reports that
// the backend is not in this binary, so callers take the cpu path exactly as they would on a
// machine without a GPU.

#include <spdlog/spdlog.h>

#include <mutex>

#include "kernels/cuda_backend.h"

namespace graid {

bool cuda_backend_compiled() noexcept {
  return false;
}

Result<std::vector<CudaDeviceInfo>> cuda_devices() {
  return Status(Errc::kUnsupported, "built without CUDA");
}

Result<std::unique_ptr<CudaBackend>> make_cuda_backend(CudaBackendOptions /*options*/) {
  return Status(Errc::kUnsupported, "built without CUDA");
}

std::unique_ptr<ParityBackend> make_preferred_parity_backend(CudaBackendOptions /*options*/) {
  static std::once_flag logged;
  std::call_once(logged, [] {
    spdlog::info("graid: parity on the cpu backend (cuda backend: built without CUDA)");
  });
  return make_cpu_backend();
}

}  // namespace graid
