#include "backend.h"

#include "kernels/cuda_backend.h"

namespace graid::bench {

Result<std::unique_ptr<ParityBackend>> open_backend(std::string_view name) {
  if (name == "cuda") {
    auto cuda = make_cuda_backend();
    if (!cuda.is_ok()) return cuda.status();
    return std::unique_ptr<ParityBackend>(std::move(*cuda));
  }
  return make_parity_backend(name);
}

}  // namespace graid::bench
