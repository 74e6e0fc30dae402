// The parity engines graidd runs with (--parity, --job-parity-threads): the backend, what the
// foreground path and the background jobs send their parity to, and why; `describe controller`
// shows it.
//   cuda  the GPU backend, fed by the batcher (kernels/batcher.h) as the arrays' AsyncParity:
//         the jobs of every I/O thread and job window become few large launches; the backend
//         itself (absorbing a device failure onto the CPU) redoes a failed batch.
//   cpu   ISA-L inline on each I/O thread (cheapest there: no hand-off), and the jobs' windows on
//         a ParityWorker of --job-parity-threads threads (a job's thread waits for I/O, so its
//         parity can use the other cores: docs/performance.md, "Parity off the job thread").
// A library of its own (graidd_parity) that names the kernels library's symbols but links
// neither: graidd links it with graid_kernels, its test with graid_kernels_fake (the fake CUDA
// runtime), so the batcher path runs in every build.
#pragma once

#include <memory>
#include <string>

#include "graid/array.h"
#include "graid/parity.h"

namespace graid {
class CudaBackend;
class ParityWorker;
namespace kernels {
class Batcher;
class BatcherParity;
class DeviceQueue;
}  // namespace kernels
}  // namespace graid

namespace graid::daemon {

// The parity engine the daemon runs with, for `describe controller`.
struct ParityChoice {
  ParityBackend* backend = nullptr;  // never null
  HostMemoryRegistry* host_memory = nullptr;
  CudaBackend* cuda = nullptr;          // when the backend is the GPU's
  std::string requested;                // auto, cuda, cpu
  std::string reason;                   // why this backend
  std::string gpu;                      // the GPU's name, when one is used
  AsyncParity* async = nullptr;         // the foreground's and jobs' (ArrayOptions::async_parity)
  AsyncParity* job_async = nullptr;     // the jobs' (ArrayOptions::job_parity)
  kernels::Batcher* batcher = nullptr;  // when `async` is the batcher (its stats)
  std::string foreground;               // where the foreground path's parity runs, in words
  std::string jobs;                     // where the background jobs' parity runs
};

struct ParityRequest {
  std::string backend = "auto";  // auto, cuda, cpu
  unsigned job_threads = 2;      // cpu: the jobs' ParityWorker threads; 0: inline
};

// Owns the engines; `choice` points into them (and outlives nothing of them).
struct ParityEngines {
  std::unique_ptr<ParityBackend> cpu;
  std::unique_ptr<CudaBackend> cuda;
  std::unique_ptr<kernels::DeviceQueue> device;
  std::unique_ptr<kernels::Batcher> batcher;
  std::unique_ptr<kernels::BatcherParity> batcher_parity;
  std::unique_ptr<ParityWorker> worker;
  ParityChoice choice;
  ParityEngines();
  ~ParityEngines();  // the batcher before its device and backends
  ParityEngines(const ParityEngines&) = delete;
  ParityEngines& operator=(const ParityEngines&) = delete;
};

Result<std::unique_ptr<ParityEngines>> choose_parity(const ParityRequest& request);

}  // namespace graid::daemon
