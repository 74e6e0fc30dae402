// Array-wide counters: member I/O accounting on the queues' threads, the queue registry, and
// the sums Array::stats() returns.
#include "state/array_stats.h"

#include <algorithm>
#include <bit>

#include "queue/array_queue_impl.h"

namespace graid {

namespace {

// REQUIRES: members.size() <= the queue's member count.
void add_queue(QueueStats& totals, std::vector<MemberIoStats>& members, const ArrayQueue::Impl& q) {
  add_counters(totals, q.stats);
  for (std::size_t m = 0; m < members.size(); ++m)
    add_counters(members[m], q.member_io[m]);
}

}  // namespace

std::size_t latency_bucket(std::uint64_t micros) noexcept {
  return std::min<std::size_t>(static_cast<std::size_t>(std::bit_width(micros)),
                               kLatencyBuckets - 1);
}

std::uint64_t MemberIoStats::latency_samples() const noexcept {
  std::uint64_t n = 0;
  for (std::uint64_t b : latency)
    n += b;
  return n;
}

std::uint64_t MemberIoStats::latency_quantile_us(double fraction) const noexcept {
  const std::uint64_t total = latency_samples();
  if (total == 0) return 0;
  const auto wanted = static_cast<std::uint64_t>(fraction * static_cast<double>(total));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kLatencyBuckets; ++i) {
    seen += latency[i];
    if (seen > wanted || seen == total) return std::uint64_t{1} << i;  // bucket i ends at 2^i
  }
  return std::uint64_t{1} << (kLatencyBuckets - 1);
}

void submit_timed(MemberDevice& member, IoContext& ctx, TimedMemberRequest& req) {
  req.submitted_ns = ctx.clock_ns();
  member.submit(ctx, req);
}

void record_member_io(ArrayQueue::Impl& queue, std::uint32_t member, const TimedMemberRequest& req,
                      std::int32_t result) noexcept {
  MemberIoCounters& c = queue.member_io[member];
  const std::int64_t elapsed = std::max<std::int64_t>(queue.ctx.clock_ns() - req.submitted_ns, 0);
  ++c.latency[latency_bucket(static_cast<std::uint64_t>(elapsed) / 1000)];
  const bool failed = result < 0;
  switch (req.op) {
    case MemberOp::kRead:
      ++c.reads;
      if (failed)
        ++c.read_errors;
      else
        c.read_bytes += req.len;
      break;
    case MemberOp::kWrite:
      ++c.writes;
      if (failed)
        ++c.write_errors;
      else
        c.write_bytes += req.len;
      break;
    case MemberOp::kFlush:
      ++c.flushes;
      if (failed) ++c.flush_errors;
      break;
    case MemberOp::kDiscard:
    case MemberOp::kWriteZeroes:  // counted with discards: both zero a range
      ++c.discards;
      if (failed) ++c.discard_errors;
      break;
  }
}

QueueRegistration::QueueRegistration(std::shared_ptr<QueueRegistry> registry,
                                     ArrayQueue::Impl& queue)
    : registry_(std::move(registry)), queue_(queue), members_(queue.array.geometry.members()) {
  MutexLock guard(registry_->mutex);
  registry_->queues.push_back(&queue_);
}

QueueRegistration::~QueueRegistration() {
  QueueRegistry& r = *registry_;
  MutexLock guard(r.mutex);
  std::erase(r.queues, &queue_);
  r.retired_members.resize(members_);
  add_queue(r.retired_totals, r.retired_members, queue_);
}

ArrayStats Array::State::stats() const {
  ArrayStats out;
  {
    MutexLock guard(registry->mutex);
    out.totals = registry->retired_totals;
    out.members = registry->retired_members;
    out.members.resize(geometry.members());
    out.queues_attached = static_cast<std::uint32_t>(registry->queues.size());
    for (const ArrayQueue::Impl* q : registry->queues)
      add_queue(out.totals, out.members, *q);
  }
  out.events_dropped = events.dropped();
  return out;
}

std::pair<std::uint64_t, std::uint64_t> Array::State::foreground_activity() const {
  MutexLock guard(registry->mutex);
  std::uint64_t requests = 0, in_flight = 0;
  for (const ArrayQueue::Impl* q : registry->queues) {
    requests += q->stats.reads + q->stats.writes + q->stats.discards + q->stats.flushes;
    in_flight += q->in_flight;
  }
  return {requests, in_flight};
}

bool Array::State::bare_updates_drained() const {
  MutexLock guard(registry->mutex);
  return std::all_of(registry->queues.begin(), registry->queues.end(), [](const auto* q) {
    return q->bare_updates.load(std::memory_order_seq_cst) == 0;
  });
}

void Array::wait_for_events() const {
  state_->events.wait_delivered();
}

ArrayStats Array::stats() const {
  return state_->stats();
}

std::uint32_t Array::queues_attached() const {
  MutexLock guard(state_->registry->mutex);
  return static_cast<std::uint32_t>(state_->registry->queues.size());
}

}  // namespace graid
