// Counters of a running array: what each queue and each member did, cheap enough for the I/O
// path, readable from any thread (Array::stats()). Internal to engine/array and engine/stripe.
//
// Every counter has one writer, the queue's own thread, which updates it with a relaxed load and
// store (a plain add, no locked instruction); readers on other threads load it relaxed. Queues
// register with their array when attached and, when destroyed, fold their counts into the
// array's retired totals, so totals never go backwards.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "graid/array.h"
#include "state/queue_registry.h"

namespace graid {

// A counter with a single writer thread and any number of reader threads.
template <typename T>
class SingleWriterCounter {
 public:
  SingleWriterCounter& operator++() noexcept { return *this += 1; }
  SingleWriterCounter& operator--() noexcept {
    value_.store(value_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    return *this;
  }
  SingleWriterCounter& operator+=(T n) noexcept {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    return *this;
  }
  T load() const noexcept { return value_.load(std::memory_order_relaxed); }
  operator T() const noexcept { return load(); }  // NOLINT: reads like the plain integer it was

 private:
  std::atomic<T> value_{0};
};

using Counter = SingleWriterCounter<std::uint64_t>;
using QueueCounters = BasicQueueStats<Counter>;
using MemberIoCounters = BasicMemberIoStats<Counter>;

// A member request whose latency and outcome are counted: submitted with submit_timed(), and its
// on_done starts with record_member_io().
class TimedMemberRequest : public MemberRequest {
 public:
  std::int64_t submitted_ns = 0;  // IoContext::clock_ns() at submission
};

// Makes `req` a flush (no data, no offset, no FUA).
inline void set_flush(MemberRequest& req) noexcept {
  req.op = MemberOp::kFlush;
  req.offset = 0;
  req.buf = nullptr;
  req.len = 0;
  req.fua = false;
}

// Stamps `req` with ctx.clock_ns() (read twice per poll pass, not per request) and submits it
// to `member` through `ctx`.
void submit_timed(MemberDevice& member, IoContext& ctx, TimedMemberRequest& req);

// Counts a member I/O that completed with `result` on `queue`'s thread.
void record_member_io(ArrayQueue::Impl& queue, std::uint32_t member, const TimedMemberRequest& req,
                      std::int32_t result) noexcept;

// Adds `counters` (relaxed loads) to the snapshot `into`.
template <typename Snapshot, typename Counters>
void add_counters(Snapshot& into, const Counters& counters) {
  into.zip(counters, [](std::uint64_t& sum, const auto& c) { sum += c; });
}

// A queue's entry in its array's registry: registers on construction; on destruction folds the
// queue's counts into the array's retired totals and unregisters. A member of
// ArrayQueue::Impl, declared after the counters it reads.
class QueueRegistration {
 public:
  QueueRegistration(std::shared_ptr<QueueRegistry> registry, ArrayQueue::Impl& queue);
  ~QueueRegistration();
  QueueRegistration(const QueueRegistration&) = delete;
  QueueRegistration& operator=(const QueueRegistration&) = delete;

 private:
  std::shared_ptr<QueueRegistry> registry_;
  ArrayQueue::Impl& queue_;
  std::uint32_t members_;  // the array's, read while it is surely alive
};

}  // namespace graid
