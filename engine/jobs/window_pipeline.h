// The job engine's pipeline: a background job (rebuild, check, ...) as a run of windows of
// stripes, several in flight at once on one io_uring, each locked from its first read to its
// last write, as md's md_do_sync() with its per-level sync_request() and SPDK's
// raid_bdev_process. A job is a WindowPolicy: what it reads of a window, what it computes in the
// window's buffers, what it writes, what it records once the window is done.
//
//   issue      lock the next window (ascending, as every range lock), ask the policy whether
//              it can be skipped, else submit the bulk reads it names (one per member, the
//              window's rows of that member)
//   parity     when a window's reads are done: the parity jobs the policy names (prepare())
//              run, on the array's AsyncParity when it has one (a worker thread, the GPU
//              batcher: the job's thread goes on with other windows' I/O), else inline
//   compute    the policy works in its buffers with the jobs' results and names the members to
//              write; the writes are submitted (later windows' reads go on meanwhile)
//   fallback   a bulk read or write that failed, or a window the policy cannot do in bulk: the
//              policy redoes it strip by strip with blocking I/O, which finds the member at fault
//   retire     strictly in window order, once its writes are done: the policy records it
//              (rebuilt[m] moves past it, a check counts it), the lock is dropped, and the
//              caller's after_retire() may record a checkpoint while later windows go on
//
// Pacing (JobPace): while the array is idle up to `depth` windows of `window_stripes` are in
// flight, at up to the speed's maximum; while applications' requests run and the job yields, one
// window of at most `busy_window_stripes` at a time, at its minimum, and any sleep the pace asks
// for is taken with no window held. Stopping: no new window, those in flight retired, then the
// run returns. An error ends the run after every I/O in flight completed and every window was
// unlocked; windows after the failing one are not retired.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "jobs/job_pace.h"
#include "state/array_state.h"

namespace graid {

// One window as a policy sees it: stripes [first, first + count) and a buffer per member
// holding its rows of the window (strip `stripe` of member m at at(m, stripe)).
class JobWindow {
 public:
  std::uint64_t first() const noexcept { return first_; }
  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t strip() const noexcept { return strip_; }
  // Member m's strip of `stripe` in the window's buffers (m's own buffer, or the one set by
  // share_buffer()).
  std::byte* at(std::uint32_t m, std::uint64_t stripe) noexcept {
    return bufs_[buffer_of_[m]]->data() + (stripe - first_) * strip_;
  }
  // Member m's bulk read lands in, and its bulk write goes from, member `owner`'s buffer: a
  // mirror's source read straight into the buffer its copies are written from. Reset for every
  // window.
  void share_buffer(std::uint32_t m, std::uint32_t owner) noexcept { buffer_of_[m] = owner; }
  // The members read in bulk for this window (what reads() returned).
  std::uint64_t read_mask() const noexcept { return read_mask_; }
  // Member m's strip of `stripe` is written on its own from at(m, stripe) once compute() returns
  // (with the bulk writes it names): for a job that writes only some of a member's rows, as a
  // re-sync writes parity. Strips of one member in consecutive stripes go as one write.
  void write_strip(std::uint32_t m, std::uint64_t stripe) { strip_writes_.push_back({m, stripe}); }
  // The policy's own note on this window, reset to 0 for every window.
  std::uint64_t note = 0;
  // The window's parity work, named by WindowPolicy::prepare() and run before compute(), which
  // finds its outputs (kVerify: parity_ok) here. Cleared for every window.
  std::vector<StripeJob> jobs;

 private:
  friend class WindowPipeline;
  std::uint64_t first_ = 0, count_ = 0, strip_ = 0, read_mask_ = 0;
  std::vector<AlignedBuffer*> bufs_;
  std::vector<std::uint32_t> buffer_of_;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> strip_writes_;
};

// Adds to w.jobs one `op` job per stripe of the window (kEncode or kVerify) over every chunk in
// the window's buffers. False when a buffer cannot be a chunk (then do the window by strips).
bool add_stripe_jobs(const Geometry& g, JobWindow& w, ParityOp op);

class WindowPolicy {
 public:
  virtual ~WindowPolicy() = default;
  // Under the window's lock, before any I/O: true when nothing needs doing in it (it is
  // retired in turn without I/O).
  virtual bool skip(std::uint64_t /*first*/, std::uint64_t /*count*/) { return false; }
  // Before a window is locked: how many of the `count` stripes from `first` it takes (at least
  // one), so that a window does not straddle what skip() decides on (a bitmap region).
  virtual std::uint64_t clip(std::uint64_t /*first*/, std::uint64_t count) { return count; }
  // The members read in bulk over the window (bit m: member m); may share_buffer().
  virtual std::uint64_t reads(JobWindow& w) = 0;
  // The reads are done: the parity jobs over the window's buffers to run before compute(), put
  // in w.jobs (none: nothing to run). False: have the window done strip by strip (fallback).
  virtual bool prepare(JobWindow& /*w*/) { return true; }
  // The jobs ran: work in the window's buffers. Returns the members to write in bulk (bit m),
  // besides any strips named with w.write_strip(), or nullopt to have the window done strip by
  // strip (fallback).
  virtual std::optional<std::uint64_t> compute(JobWindow& w) = 0;
  // Stripes [first, +count) strip by strip with blocking I/O, the window locked.
  virtual Status fallback(std::uint64_t first, std::uint64_t count) = 0;
  // The window is done (in window order, still locked): record it.
  virtual Status retire(std::uint64_t first, std::uint64_t count) = 0;
  // The device member m's bulk `op` goes to; null: the member's own (a hot replace writes its
  // copy to the replacement).
  virtual MemberDevice* device(std::uint32_t /*m*/, MemberOp /*op*/) { return nullptr; }
};

// How a pipeline runs.
struct PipelineShape {
  std::uint64_t window_stripes = 16;      // per window while idle
  std::uint64_t busy_window_stripes = 4;  // per window while the job yields
  std::uint32_t depth = 4;                // windows in flight while idle
};

// The shape for `members` members of `strip` bytes and a job over `stripes` stripes:
// `window_stripes` (0: about 4 MiB per member, at most kPipelineBufferBudget of buffers in all,
// and no more than `depth` windows cover the whole job) and `depth`.
PipelineShape pipeline_shape(std::uint32_t members, std::uint64_t strip,
                             std::uint64_t window_stripes, std::uint32_t depth,
                             std::uint64_t stripes);
inline constexpr std::uint64_t kPipelineBufferBudget = 96ull << 20;

class WindowPipeline {
 public:
  // What a run did.
  struct Run {
    bool finished = false;   // every window retired; false: stopped
    std::uint64_t next = 0;  // the first stripe not retired
  };

  // Buffers for `shape` and a ring of its own; without a ring (io_uring not available) every
  // window is done by the policy's fallback.
  // `buffers`: the members whose buffers the policy uses (bit m), the others get none.
  static Result<std::unique_ptr<WindowPipeline>> create(Array::State& s, PipelineShape shape,
                                                        std::uint64_t buffers = ~0ull);
  ~WindowPipeline();

  // Windows over stripes [from, end) until done, stopped (`stop`), or failed. `pace` is asked
  // with member bytes issued since `from` (plus its starting point). `after_retire(next)` runs
  // after each retired window, no lock of it held (later windows may be in flight); an error
  // from it ends the run.
  Result<Run> run(WindowPolicy& policy, std::uint64_t from, std::uint64_t end, JobPace& pace,
                  std::uint64_t paced_from, const std::atomic<bool>* stop,
                  const std::function<Status(std::uint64_t next)>& after_retire);

  const PipelineShape& shape() const noexcept { return shape_; }
  bool bulk() const noexcept { return ctx_ != nullptr; }

  struct Slot;
  WindowPipeline(Array::State& s, PipelineShape shape);

 private:
  void submit(WindowPolicy& policy, Slot& slot, std::uint64_t mask, MemberOp op);
  // The strips the policy named with write_strip(), runs of one member's strips merged.
  void submit_strips(WindowPolicy& policy, Slot& slot);
  // Drives a slot whose I/O is done: compute and write, or fall back. False: the policy failed.
  Status advance(WindowPolicy& policy, Slot& slot);
  // Whether a window issued has requests in flight.
  static bool waiting(const std::deque<Slot*>& order);

  Array::State& s_;
  PipelineShape shape_;
  std::unique_ptr<IoContext> ctx_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace graid
