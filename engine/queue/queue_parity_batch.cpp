// Parity batching: the stripe operations of one thread whose parity jobs get ready in the same
// poll share one ParityBackend::execute() (one GPU launch); with an asynchronous backend one
// batch per thread is in flight and the next one grows meanwhile.
#include <spdlog/spdlog.h>

#include <cstring>

#include "queue/array_queue_impl.h"

namespace graid {

void ArrayQueue::Impl::queue_parity(StripeOp& op) {
  parity_waiting.push_back(&op);
  if (parity_scheduled) return;
  parity_scheduled = true;
  ctx.defer(parity_task);
}

void ArrayQueue::Impl::run_parity_batch() {
  parity_scheduled = false;
  if (parity_busy || parity_waiting.empty()) return;  // the batch in flight restarts us
  parity_running.clear();
  parity_running.swap(parity_waiting);
  parity_batch.clear();
  for (StripeOp* op : parity_running) {
    parity_batch.insert(parity_batch.end(), op->parity_jobs().begin(), op->parity_jobs().end());
  }
  ++stats.parity_batches;
  stats.parity_jobs += parity_batch.size();
  if (array.async_parity != nullptr) {
    parity_busy = true;
    array.async_parity->submit(ctx, parity_batch, parity_done_cb);
    return;
  }
  finish_parity_batch(array.parity->execute(parity_batch));
}

void ArrayQueue::Impl::finish_parity_batch(Status batch) {
  parity_busy = false;
  std::vector<StripeOp*> done;
  done.swap(parity_running);
  if (!batch.is_ok()) ++stats.parity_batch_failures;
  for (StripeOp* op : done) {
    if (batch.is_ok()) {
      op->parity_done(Status::ok());
    } else {
      // The batch failed (a bad job fails a batch before anything is written; a device fails
      // whole batches): redo each operation on its own on the synchronous backend, so one bad
      // job fails only its operation and a dead device costs no write.
      op->parity_done(array.parity->execute(op->parity_jobs()));
    }
  }
  parity_running.swap(done);  // keep the capacity
  parity_running.clear();
  if (!parity_waiting.empty() && !parity_scheduled) {
    parity_scheduled = true;
    ctx.defer(parity_task);
  }
}

}  // namespace graid
