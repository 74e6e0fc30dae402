// A ublk queue served with BATCH_IO (7.0+): instead of a FETCH_REQ / COMMIT_AND_FETCH_REQ ring
// command per tag, three per-queue commands carry arrays (docs/ublk.md, "Batched commands"):
//
//   PREP_IO_CMDS    once, at start: every tag of the queue handed to the driver;
//   FETCH_IO_CMDS   multishot: each completion names the tags that now carry a request (2 bytes
//                   each, in a buffer the kernel picks from a provided-buffer ring);
//   COMMIT_IO_CMDS  the results of every request a poll pass finished, in one command, which
//                   also hands their tags back to the driver.
//
// BatchQueueTransport is UblkQueue's QueueTransport in this mode: UblkQueue still fetches and
// commits a tag at a time, and the transport gathers those into PREP and COMMIT elements, sent
// at the end of the thread's poll pass (IoContext::before_submit), and turns each tag the fetch
// delivers into UblkQueue::fetch_done(tag, 0). The commands themselves go through a BatchDriver:
// the kernel's (ublk_kernel_batch.h), or a fake one in tests.
//
// Tag ownership, as the driver sees it: a tag is the driver's from the moment its PREP or COMMIT
// element is sent (the multishot fetch may deliver it again before that command's completion
// arrives) until the fetch delivers it. When the fetch ends with -ENODEV (STOP_DEV, QUIESCE_DEV)
// no tag will be delivered again: once no command of the queue is in flight (so the queue may be
// destroyed), every tag the driver holds is answered -ENODEV, as the per-tag protocol aborts each
// fetch; a tag being served is answered -ENODEV after its commit completes. A PREP or COMMIT the
// driver refuses (wholly, or from some element on) fails the tags it did not take with that
// error. A fetch that ends for want of a buffer (-ENOBUFS) is armed again.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "graid/member.h"
#include "ublk/ublk_queue.h"
#include "ublk/ublk_uapi.h"

namespace graid::ublk {

class BatchQueueTransport;

// The driver's side of a BATCH_IO queue. Completions come later, on the queue's thread, through
// the BatchQueueTransport it is bound to (never inline from these calls).
class BatchDriver {
 public:
  virtual ~BatchDriver() = default;
  virtual void bind(BatchQueueTransport& transport, UblkQueue& queue) = 0;
  // PREP_IO_CMDS (`commit` false) or COMMIT_IO_CMDS: `nr` elements of `elem_bytes` each at
  // `elems` (valid until the completion), with BatchIoCmd `flags`. Completes through
  // BatchQueueTransport::sent(cookie, res): PREP 0 or -errno; COMMIT the element bytes the driver
  // took (all, or those before the one it refused) or -errno.
  virtual void send(bool commit, std::span<const std::byte> elems, std::uint16_t nr,
                    std::uint8_t elem_bytes, std::uint16_t flags, std::uint32_t cookie) = 0;
  // FETCH_IO_CMDS: delivers through BatchQueueTransport::fetched(tags) until it ends through
  // fetch_ended(res).
  virtual void arm_fetch() = 0;
  // As QueueTransport's.
  virtual IoDesc desc(std::uint16_t tag) const = 0;
  virtual void copy(std::uint16_t tag, bool to_request, std::byte* buf, std::uint32_t len) = 0;
};

class BatchQueueTransport final : public QueueTransport {
 public:
  // `depth` tags (the queue's); `path` decides the elements: copy mode carries each tag's buffer
  // (kBatchFHasBufAddr, 16-byte elements), zero copy its ring slot (buf_index, with the
  // registration fallback); USER_COPY neither (8 bytes).
  BatchQueueTransport(IoContext& ctx, std::unique_ptr<BatchDriver> driver, std::uint16_t depth,
                      DataPath path);
  ~BatchQueueTransport() override;

  void fetch(std::uint16_t tag, bool commit, std::int32_t result, std::byte* buf,
             std::int32_t buf_slot) override;
  void copy(std::uint16_t tag, bool to_request, std::byte* buf, std::uint32_t len) override {
    driver_->copy(tag, to_request, buf, len);
  }
  IoDesc desc(std::uint16_t tag) const override { return driver_->desc(tag); }
  void bind(UblkQueue& queue) override;
  bool sending() const override { return sends_in_flight_ > 0 || flush_scheduled_; }

  // From the driver.
  void sent(std::uint32_t cookie, std::int32_t res);
  void fetched(std::span<const std::uint16_t> tags);
  void fetch_ended(std::int32_t res);

  std::uint8_t elem_bytes() const noexcept { return elem_bytes_; }
  std::uint16_t elem_flags() const noexcept { return elem_flags_; }
  // Commands sent and not yet answered (PREP, COMMIT, the armed fetch).
  std::uint32_t in_flight() const noexcept {
    return static_cast<std::uint32_t>(sends_in_flight_) + (fetch_armed_ ? 1 : 0);
  }
  struct Counters {
    std::uint64_t preps = 0, commits = 0;  // commands sent
    std::uint64_t committed = 0;           // elements in them
    std::uint64_t fetch_cqes = 0, fetched = 0, fetch_arms = 0;
  };
  const Counters& counters() const noexcept { return counters_; }

 private:
  enum class TagState : std::uint8_t { kNew, kDriver, kServer, kDone };
  struct Batch {  // one PREP or COMMIT being gathered or in flight
    bool commit = false;
    bool in_flight = false;
    std::vector<std::byte> elems;
    std::vector<std::uint16_t> tags;
  };
  class Flush;
  void schedule_flush();
  void flush();
  void append(Batch& b, std::uint16_t tag, std::int32_t result, std::byte* buf,
              std::int32_t buf_slot);
  Batch& open_batch(bool commit);
  // Answers `tag` with `res` (it is finished); never twice.
  void finish_tag(std::uint16_t tag, std::int32_t res);
  // After the fetch ended for good: answers every tag the driver holds, once nothing is in flight.
  void finish_if_stopped();

  IoContext& ctx_;
  std::unique_ptr<BatchDriver> driver_;
  UblkQueue* queue_ = nullptr;
  std::uint8_t elem_bytes_ = 8;
  std::uint16_t elem_flags_ = 0;
  std::vector<TagState> state_;
  std::vector<std::unique_ptr<Batch>> batches_;  // by cookie; reused once answered
  int open_prep_ = -1, open_commit_ = -1;        // the batches being gathered
  std::uint32_t sends_in_flight_ = 0;
  bool prepped_ = false;  // every PREP answered ok: the fetch may be armed
  bool fetch_armed_ = false;
  bool stopped_ = false;  // the fetch ended with -ENODEV (or the driver refused the queue)
  std::int32_t stop_res_ = 0;
  std::unique_ptr<Flush> flush_;
  bool flush_scheduled_ = false;
  Counters counters_;
};

}  // namespace graid::ublk
