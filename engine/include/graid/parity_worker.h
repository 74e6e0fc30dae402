// ParityWorker: an AsyncParity that runs parity batches on a thread of its own, over a
// synchronous ParityBackend (the ISA-L `cpu` backend, in practice). Whoever submits goes on with
// its I/O meanwhile and gets the completion back on its own thread (IoContext::post), so a
// stripe operation's or a job window's parity uses a second core: the CPU counterpart of the GPU
// batcher (kernels/batcher.h), behind the same interface.
//
// Batches start in submission order, whichever thread submitted them, one per worker thread at a
// time (`threads`: two let a job whose window parity outruns one core use both, while its own
// thread only waits for I/O); their completions come in the order they finish. A failing batch
// reports the backend's status; the caller redoes it on its synchronous backend (as with
// any AsyncParity). The worker is stopped and joined by the destructor, after every batch
// submitted has run; their completions are posted to their submitters' contexts, which must
// still be polled (destroy the worker after the arrays and jobs that use it have stopped).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "graid/array.h"
#include "graid/parity.h"
#include "graid/thread_annotations.h"

namespace graid {

class ParityWorker final : public AsyncParity {
 public:
  // `backend` must be safe to call from several threads at once (the cpu and ref backends are).
  explicit ParityWorker(ParityBackend& backend, unsigned threads = 1);
  ~ParityWorker() override;
  ParityWorker(const ParityWorker&) = delete;
  ParityWorker& operator=(const ParityWorker&) = delete;

  std::string_view name() const noexcept override { return "cpu-worker"; }
  void submit(IoContext& ctx, std::span<StripeJob> jobs, ParityCompletion& done) override;

  // Batches run so far (for tests and stats).
  std::uint64_t batches() const noexcept { return batches_.load(std::memory_order_relaxed); }

 private:
  struct Item;
  void loop();

  ParityBackend& backend_;
  Mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Item>> queue_ GUARDED_BY(mutex_);
  bool stop_ GUARDED_BY(mutex_) = false;
  std::atomic<std::uint64_t> batches_{0};
  std::vector<std::thread> threads_;  // last: started once the rest exists
};

}  // namespace graid
