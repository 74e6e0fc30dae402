// A second I/O thread's share of one ublk queue's requests.
//
// The kernel hands a ublk queue's requests to the one thread that fetched them, and a single
// application thread submits to one queue only (the queue of the CPU it runs on): with one fio
// job, one I/O thread does all of the RAID work while the others idle. A HelperLane is an
// ArrayQueue on another I/O thread that the queue's thread may hand requests to:
//
//   queue's thread                     helper's thread
//   request delivered ─► post ───────► ArrayQueue::submit ─► member I/O ... on_complete
//   commit + fetch    ◄─────────────── post ◄───────────────────────────────────┘
//
// Fetches and commits stay on the queue's thread (the driver wants them from the thread that
// fetched); only the RAID work moves. Which requests move is UblkQueue's choice (ublk_queue.h).
#pragma once

#include <memory>
#include <span>

#include "graid/array.h"
#include "graid/member.h"
#include "graid/status.h"
#include "ublk/ring_regions.h"

namespace graid::ublk {

class HelperLane {
 public:
  // On the thread owning `ctx`: attaches an ArrayQueue of `array` there and registers `regions`
  // (the queue's tag buffers, for fixed-buffer member I/O; a refusal leaves the rest
  // unregistered, which only costs speed).
  static Result<std::unique_ptr<HelperLane>> create(IoContext& ctx, Array& array,
                                                    std::span<const std::span<std::byte>> regions);
  // On the helper's thread, with nothing in flight. Unregisters the regions, so call it before
  // the queue's buffers are freed.
  ~HelperLane() = default;
  HelperLane(const HelperLane&) = delete;
  HelperLane& operator=(const HelperLane&) = delete;

  IoContext& context() noexcept { return queue_->context(); }
  ArrayQueue& queue() noexcept { return *queue_; }

 private:
  HelperLane() = default;
  std::unique_ptr<ArrayQueue> queue_;
  RingRegions registered_;
};

}  // namespace graid::ublk
