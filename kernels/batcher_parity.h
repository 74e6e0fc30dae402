// The batcher as the engine's asynchronous parity engine (graid::AsyncParity).
//
// Each ArrayQueue hands its thread's parity batch to submit(); every stripe job becomes one
// BatchedJob, so jobs from all threads meet in the Batcher and leave as few, large device
// launches (or run on the CPU when small, or when the device died). Completions come back to the
// submitting thread: each thread gets a CompletionQueue whose notify posts a drain task to the
// thread's IoContext, and when the last job of a batch has completed, the queue's
// ParityCompletion runs there. Plain C++: no CUDA header.
#pragma once

#include <memory>
#include <unordered_map>

#include "graid/array.h"
#include "graid/thread_annotations.h"
#include "kernels/batcher.h"

namespace graid::kernels {

class BatcherParity final : public AsyncParity {
 public:
  // `batcher` must outlive this object; this object must outlive the arrays using it.
  explicit BatcherParity(Batcher& batcher);
  ~BatcherParity() override;
  BatcherParity(const BatcherParity&) = delete;
  BatcherParity& operator=(const BatcherParity&) = delete;

  std::string_view name() const noexcept override { return "batcher"; }
  // REQUIRES: `jobs` is not empty (the engine never submits an empty batch).
  void submit(IoContext& ctx, std::span<StripeJob> jobs, ParityCompletion& done) override;

 private:
  struct ThreadState;
  struct Group;
  ThreadState& state_for(IoContext& ctx) EXCLUDES(mu_);

  Batcher& batcher_;
  Mutex mu_;
  std::unordered_map<IoContext*, std::unique_ptr<ThreadState>> threads_ GUARDED_BY(mu_);
};

}  // namespace graid::kernels
