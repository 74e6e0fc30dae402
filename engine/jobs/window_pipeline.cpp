#include "jobs/window_pipeline.h"

#include <algorithm>
#include <deque>

#include "stripe/stripe_range_lock.h"

namespace graid {

struct WindowPipeline::Slot {
  enum class Phase : std::uint8_t { kFree, kReading, kComputing, kWriting, kDone };
  struct Req final : MemberRequest {
    Slot* slot = nullptr;
    void on_done(std::int32_t res) override {
      if (res < 0 || static_cast<std::uint32_t>(res) != len) slot->failed = true;
      --slot->pending;
    }
  };
  // The window's parity jobs on an AsyncParity: counted in `pending` until done.
  struct ParityDone final : ParityCompletion {
    Slot* slot = nullptr;
    Status status;
    void parity_done(Status st) override {
      status = std::move(st);
      --slot->pending;
    }
  };
  explicit Slot(StripeLockTable& table) : lock(table) { parity.slot = this; }
  ParityDone parity;
  Phase phase = Phase::kFree;
  bool failed = false;        // a bulk read or write of the window failed
  std::uint32_t pending = 0;  // its requests in flight
  std::vector<AlignedBuffer> bufs;
  std::vector<Req> reqs;
  std::vector<Req> strip_reqs;  // grown while none of them is in flight
  JobWindow window;
  StripeRangeLock lock;
};

bool add_stripe_jobs(const Geometry& g, JobWindow& w, ParityOp op) {
  const std::uint32_t chunks = g.data_strips() + g.parity_strips();
  for (std::uint64_t stripe = w.first(); stripe < w.first() + w.count(); ++stripe) {
    StripeJob job;
    job.op = op;
    job.scheme = g.parity_scheme();
    job.k = g.data_strips();
    job.len = g.strip_bytes();
    for (std::uint32_t c = 0; c < chunks; ++c) {
      auto view = ChunkView::adopt(w.at(g.chunk_member(stripe, c), stripe), g.strip_bytes());
      if (!view) return false;
      job.chunk[c] = *view;
    }
    w.jobs.push_back(job);
  }
  return true;
}

PipelineShape pipeline_shape(std::uint32_t members, std::uint64_t strip,
                             std::uint64_t window_stripes, std::uint32_t depth,
                             std::uint64_t stripes) {
  PipelineShape shape;
  shape.depth = std::max<std::uint32_t>(depth, 1);
  const std::uint64_t per_window = std::clamp<std::uint64_t>(
      kPipelineBufferBudget / (std::uint64_t{shape.depth} * std::max(members, 1u) * strip), 1,
      std::max<std::uint64_t>((stripes + shape.depth - 1) / shape.depth, 1));
  shape.window_stripes = window_stripes != 0
                             ? window_stripes
                             : std::clamp<std::uint64_t>((4ull << 20) / strip, 1, per_window);
  shape.busy_window_stripes = std::min(shape.window_stripes, kBusyWindowStripes);
  return shape;
}

WindowPipeline::WindowPipeline(Array::State& s, PipelineShape shape) : s_(s), shape_(shape) {}
WindowPipeline::~WindowPipeline() = default;

Result<std::unique_ptr<WindowPipeline>> WindowPipeline::create(Array::State& s, PipelineShape shape,
                                                               std::uint64_t buffers) {
  const Geometry& g = s.geometry;
  auto p = std::make_unique<WindowPipeline>(s, shape);
  const std::uint64_t bytes = shape.window_stripes * g.strip_bytes();
  if (bytes > (1ull << 30)) return make_error(Errc::kInvalidArgument, "job window too large");
  for (std::uint32_t i = 0; i < shape.depth; ++i) {
    auto slot = std::make_unique<Slot>(s.locks);
    slot->reqs = std::vector<Slot::Req>(g.members());
    for (std::uint32_t m = 0; m < g.members(); ++m) {
      auto buf = AlignedBuffer::allocate(((buffers >> m) & 1u) != 0 ? bytes : 0, 4096);
      if (!buf) return buf.status();
      slot->bufs.push_back(std::move(*buf));
      slot->reqs[m].slot = slot.get();
    }
    for (AlignedBuffer& b : slot->bufs)
      slot->window.bufs_.push_back(&b);
    slot->window.buffer_of_.resize(g.members());
    slot->window.strip_ = g.strip_bytes();
    p->slots_.push_back(std::move(slot));
  }
  // Without a ring the policy's fallback does every window (a kernel without io_uring).
  auto ctx = IoContext::create(member_ring_options(2 * shape.depth * g.members() + 8));
  if (ctx) p->ctx_ = std::move(*ctx);
  return p;
}

void WindowPipeline::submit(WindowPolicy& policy, Slot& slot, std::uint64_t mask, MemberOp op) {
  const std::uint64_t strip = s_.geometry.strip_bytes();
  for (std::uint32_t m = 0; m < s_.geometry.members(); ++m) {
    if (((mask >> m) & 1u) == 0) continue;
    Slot::Req& r = slot.reqs[m];
    r.op = op;
    r.offset = s_.device_offset(slot.window.first_ * strip);
    r.buf = slot.window.at(m, slot.window.first_);
    r.len = static_cast<std::uint32_t>(slot.window.count_ * strip);
    r.fua = false;
    ++slot.pending;
    MemberDevice* dev = policy.device(m, op);
    (dev != nullptr ? *dev : *s_.members[m]).submit(*ctx_, r);
  }
}

void WindowPipeline::submit_strips(WindowPolicy& policy, Slot& slot) {
  auto& writes = slot.window.strip_writes_;
  if (writes.empty()) return;
  std::sort(writes.begin(), writes.end());
  writes.erase(std::unique(writes.begin(), writes.end()), writes.end());
  const std::uint64_t strip = s_.geometry.strip_bytes();
  // Runs of consecutive stripes of one member: [begin, end) of `writes` each.
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  for (std::size_t i = 0; i < writes.size(); ++i) {
    if (i > 0 && writes[i].first == writes[i - 1].first &&
        writes[i].second == writes[i - 1].second + 1) {
      runs.back().second = i + 1;
    } else {
      runs.push_back({i, i + 1});
    }
  }
  if (slot.strip_reqs.size() < runs.size()) {
    slot.strip_reqs = std::vector<Slot::Req>(runs.size());
    for (Slot::Req& r : slot.strip_reqs)
      r.slot = &slot;
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto [m, stripe] = writes[runs[i].first];
    Slot::Req& r = slot.strip_reqs[i];
    r.op = MemberOp::kWrite;
    r.offset = s_.device_offset(stripe * strip);
    r.buf = slot.window.at(m, stripe);
    r.len = static_cast<std::uint32_t>((runs[i].second - runs[i].first) * strip);
    r.fua = false;
    ++slot.pending;
    MemberDevice* dev = policy.device(m, MemberOp::kWrite);
    (dev != nullptr ? *dev : *s_.members[m]).submit(*ctx_, r);
  }
}

bool WindowPipeline::waiting(const std::deque<Slot*>& order) {
  return std::any_of(order.begin(), order.end(), [](const Slot* s) { return s->pending != 0; });
}

Status WindowPipeline::advance(WindowPolicy& policy, Slot& slot) {
  using Phase = Slot::Phase;
  if (slot.pending != 0) return Status::ok();
  JobWindow& w = slot.window;
  auto by_strips = [&]() -> Status {
    slot.phase = Phase::kDone;
    return policy.fallback(w.first_, w.count_);
  };
  if (slot.phase == Phase::kReading) {
    if (slot.failed) return by_strips();
    w.jobs.clear();
    if (!policy.prepare(w)) return by_strips();
    slot.phase = Phase::kComputing;
    slot.parity.status = Status::ok();
    if (!w.jobs.empty()) {
      if (s_.job_parity != nullptr) {
        ++slot.pending;
        s_.job_parity->submit(*ctx_, w.jobs, slot.parity);
        return Status::ok();
      }
      slot.parity.status = s_.parity != nullptr ? s_.parity->execute(w.jobs)
                                                : make_error(Errc::kInternal, "no parity backend");
    }
  }
  if (slot.phase == Phase::kComputing) {
    if (!slot.parity.status.is_ok() && s_.job_parity != nullptr && s_.parity != nullptr) {
      // A failed asynchronous batch leaves its outputs unspecified: redone here, as the
      // foreground path redoes one (ArrayQueue::Impl::finish_parity_batch).
      slot.parity.status = s_.parity->execute(w.jobs);
    }
    if (!slot.parity.status.is_ok()) return by_strips();
    const std::optional<std::uint64_t> writes = policy.compute(w);
    if (!writes) return by_strips();
    slot.phase = Phase::kWriting;
    if (*writes != 0) submit(policy, slot, *writes, MemberOp::kWrite);
    submit_strips(policy, slot);
    if (slot.pending != 0) return Status::ok();
  }
  if (slot.phase == Phase::kWriting) {
    if (slot.failed) return by_strips();
    slot.phase = Phase::kDone;
  }
  return Status::ok();
}

Result<WindowPipeline::Run> WindowPipeline::run(
    WindowPolicy& policy, std::uint64_t from, std::uint64_t end, JobPace& pace,
    std::uint64_t paced_from, const std::atomic<bool>* stop,
    const std::function<Status(std::uint64_t next)>& after_retire) {
  using Phase = Slot::Phase;
  const Geometry& g = s_.geometry;
  const std::uint64_t strip = g.strip_bytes();
  std::deque<Slot*> order;  // windows issued and not retired, in stripe order
  Status failed;
  bool stopping = false;
  std::uint64_t next = from;
  Run out;
  out.next = from;
  auto free_slot = [&]() -> Slot* {
    for (auto& slot : slots_)
      if (slot->phase == Phase::kFree) return slot.get();
    return nullptr;
  };
  while (true) {
    // Windows whose I/O is done move on.
    for (Slot* slot : order) {
      if (failed.is_ok() && slot->phase != Phase::kDone) {
        if (Status st = advance(policy, *slot); !st) failed = st;
      }
    }
    // Retire the done prefix, in order.
    while (failed.is_ok() && !order.empty() && order.front()->phase == Phase::kDone) {
      Slot& slot = *order.front();
      Status st = policy.retire(slot.window.first_, slot.window.count_);
      const std::uint64_t after = slot.window.first_ + slot.window.count_;
      slot.lock.unlock();
      slot.phase = Phase::kFree;
      order.pop_front();
      if (!st) {
        failed = st;
        break;
      }
      out.next = after;
      if (after_retire) {
        if (Status cp = after_retire(after); !cp) failed = cp;
      }
    }
    if (!failed.is_ok()) break;
    if (!stopping && stop != nullptr && stop->load(std::memory_order_acquire)) stopping = true;
    // The pace is asked (and the array's activity sampled) only when a window could be issued.
    if (!stopping && next < end && order.size() < shape_.depth) {
      const JobPace::Step step = pace.next(paced_from + (next - from) * strip);
      const std::uint32_t depth = step.busy ? 1 : shape_.depth;
      const std::uint64_t window = step.busy ? shape_.busy_window_stripes : shape_.window_stripes;
      if (order.size() < depth) {
        if (step.wait) {
          if (order.empty()) {
            pace.sleep_until(step.not_before);  // holding no window
            continue;
          }
        } else if (Slot* slot = free_slot(); slot != nullptr) {
          const std::uint64_t count = std::clamp<std::uint64_t>(
              policy.clip(next, std::min(window, end - next)), 1, std::min(window, end - next));
          slot->lock.lock(next, count);
          JobWindow& w = slot->window;
          w.first_ = next;
          w.count_ = count;
          w.read_mask_ = 0;
          w.note = 0;
          w.strip_writes_.clear();
          for (std::uint32_t m = 0; m < g.members(); ++m)
            w.buffer_of_[m] = m;
          slot->failed = false;
          slot->pending = 0;
          order.push_back(slot);
          next += count;
          if (ctx_ == nullptr) {
            slot->phase = Phase::kDone;
            if (!policy.skip(w.first_, count)) {
              if (Status st = policy.fallback(w.first_, count); !st) failed = st;
            }
          } else if (policy.skip(w.first_, count)) {
            slot->phase = Phase::kDone;
          } else {
            slot->phase = Phase::kReading;
            w.read_mask_ = policy.reads(w);
            submit(policy, *slot, w.read_mask_, MemberOp::kRead);
          }
          continue;
        }
      }
    }
    if (order.empty()) {
      if (stopping || next >= end) break;
      continue;
    }
    // Wait for a completion (a request a member holds back completes through a task posted to
    // this ring, which wakes the wait as a completion does).
    if (waiting(order)) ctx_->poll(true);
  }
  // Nothing may be in flight, nor any window held, when the run returns.
  while (ctx_ != nullptr && (ctx_->in_flight() > 0 || waiting(order)))
    ctx_->poll(true);
  for (Slot* slot : order) {
    slot->lock.unlock();
    slot->phase = Phase::kFree;
  }
  if (!failed.is_ok()) return failed;
  out.finished = out.next >= end;
  return out;
}

}  // namespace graid
