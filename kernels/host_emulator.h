// The GPU kernel bodies run on the CPU, for tests (plain C++, no CUDA).
//
// emulate_batch() walks a KernelBatch exactly as the CUDA kernel does (every tile, every lane of
// the tile, through run_tile_lane()), only one lane at a time. Tests compare its output with the
// `ref` backend, which checks the bodies' indexing and GF arithmetic without a GPU; the device
// tests then only need to show the device runs the same code correctly.
#pragma once

#include <memory>

#include "graid/parity.h"
#include "parity_kernels.h"

namespace graid::kernels {

// Runs every tile and lane of `batch` on this thread, with host GF tables.
void emulate_batch(const KernelBatch& batch, GfMul gf = GfMul::kLogExp) noexcept;

// A ParityBackend named "kernel-host": plans each job (plan_stripe), builds the descriptor over
// the jobs' own memory and runs it through emulate_batch(). Slow (one lane at a time, no
// threads); for tests and as a stand-in device in batcher tests. Thread-safe.
std::unique_ptr<ParityBackend> make_kernel_host_backend(GfMul gf = GfMul::kLogExp);

}  // namespace graid::kernels
