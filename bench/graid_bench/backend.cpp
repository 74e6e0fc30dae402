#include "backend.h"

#include "kernels/cuda_backend.h"

namespace graid::bench {

Result<std::unique_ptr<ParityBackend>> open_backend(std::string_view name, bool for_batcher) {
  if (name == "cuda") {
    CudaBackendOptions options;
    options.fallback_to_cpu = !for_batcher;
    auto cuda = make_cuda_backend(options);
    if (!cuda.is_ok()) return cuda.status();
    return std::unique_ptr<ParityBackend>(std::move(*cuda));
  }
  return make_parity_backend(name);
}

}  // namespace graid::bench
