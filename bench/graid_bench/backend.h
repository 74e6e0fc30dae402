// The parity backend graid-bench runs with: a name from --backend, resolved across the engine's
// backends (cpu, ref) and the cuda backend in kernels/.
#pragma once

#include <memory>
#include <string_view>

#include "graid/parity.h"

namespace graid::bench {

// "cpu", "ref" or "cuda". For cuda without a usable GPU the error says why ("no CUDA device:
// ...", "built without CUDA"); graid-bench does not silently measure the CPU instead.
// `for_batcher`: the backend serves as the Batcher's device, so the cuda backend reports a device
// failure instead of absorbing it (the Batcher does the failover).
Result<std::unique_ptr<ParityBackend>> open_backend(std::string_view name,
                                                    bool for_batcher = false);

}  // namespace graid::bench
