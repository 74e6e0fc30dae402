#include "graidd/parity_choice.h"

#include <fmt/format.h>

#include "graid/parity_worker.h"
#include "kernels/batcher.h"
#include "kernels/batcher_parity.h"
#include "kernels/cuda_backend.h"

namespace graid::daemon {

ParityEngines::ParityEngines() = default;

ParityEngines::~ParityEngines() {
  batcher_parity.reset();
  batcher.reset();  // flushes and joins its launchers, which use the device and the backends
  device.reset();
  worker.reset();
}

Result<std::unique_ptr<ParityEngines>> choose_parity(const ParityRequest& request) {
  auto p = std::make_unique<ParityEngines>();
  ParityChoice& c = p->choice;
  c.requested = request.backend;
  if (request.backend == "cuda" || request.backend == "auto") {
    CudaBackendOptions o;
    o.fallback_to_cpu = true;  // a GPU that dies mid-run hands its batches to the CPU
    auto cuda = make_cuda_backend(o);
    if (cuda.is_ok()) {
      p->cuda = std::move(*cuda);
      p->cpu = make_cpu_backend();  // the batcher's: jobs too small to launch
      p->device = kernels::make_backend_device_queue(*p->cuda, 2);
      p->batcher = std::make_unique<kernels::Batcher>(*p->device, *p->cpu);
      p->batcher_parity = std::make_unique<kernels::BatcherParity>(*p->batcher);
      c.backend = p->cuda.get();
      c.host_memory = p->cuda.get();
      c.cuda = p->cuda.get();
      c.gpu = p->cuda->device_info().name;
      c.reason = request.backend == "cuda" ? "requested" : "a CUDA GPU is usable";
      c.async = p->batcher_parity.get();
      c.job_async = c.async;
      c.batcher = p->batcher.get();
      c.foreground = "batcher (cuda)";
      c.jobs = "batcher (cuda)";
      return p;
    }
    if (request.backend == "cuda")
      return make_error(Errc::kUnsupported, "--parity cuda: {}", cuda.status().message());
    c.reason = fmt::format("no usable GPU: {}", cuda.status().message());
  } else if (request.backend == "cpu") {
    c.reason = "requested";
  } else {
    return make_error(Errc::kInvalidArgument, "--parity {}: expected auto, cuda or cpu",
                      request.backend);
  }
  p->cpu = make_cpu_backend();
  c.backend = p->cpu.get();
  c.foreground = "inline (cpu)";
  if (request.job_threads > 0) {
    p->worker = std::make_unique<ParityWorker>(*p->cpu, request.job_threads);
    c.job_async = p->worker.get();
    c.jobs = fmt::format("worker (cpu, {} thread{})", request.job_threads,
                         request.job_threads == 1 ? "" : "s");
  } else {
    c.jobs = "inline (cpu)";
  }
  return p;
}

}  // namespace graid::daemon
