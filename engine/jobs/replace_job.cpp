// The copy of a hot replace (Array::replace) on the job engine's pipeline
// (jobs/window_pipeline.h): per window, the old member's rows read in one bulk read and written
// to the replacement in one bulk write, several windows in flight; a window whose read or write
// fails is copied strip by strip (a strip the old member cannot read is reconstructed from the
// others). In window order, replace_copied moves past a window while it is still locked, so
// writes to those stripes go to the replacement too from then on. Every checkpoint_interval the
// replacement is flushed and replace_copied recorded (record_replace_checkpoint) while later
// windows go on. The replace's lifecycle (start, give up, swap) is in array/hot_replace.cpp.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "array/hot_replace.h"
#include "jobs/job_pace.h"
#include "jobs/window_pipeline.h"
#include "state/array_state.h"

namespace graid {

namespace {

using Clock = std::chrono::steady_clock;

class ReplacePolicy final : public WindowPolicy {
 public:
  ReplacePolicy(Array::State& s, std::uint32_t member, MemberDevice& target, AlignedBuffer& strip)
      : s_(s), member_(member), target_(target), strip_(strip) {}

  std::uint64_t reads(JobWindow& /*w*/) override { return std::uint64_t{1} << member_; }
  std::optional<std::uint64_t> compute(JobWindow& /*w*/) override {
    return std::uint64_t{1} << member_;  // written from the buffer it was read into
  }
  MemberDevice* device(std::uint32_t m, MemberOp op) override {
    return m == member_ && op == MemberOp::kWrite ? &target_ : nullptr;
  }
  Status fallback(std::uint64_t first, std::uint64_t count) override {
    if (Status st = hot_replace::copy_strips(s_, member_, target_, first, count, strip_.span());
        !st) {
      return make_error(Errc::kIoError, "copy of stripes {}..{}: {}", first, first + count - 1,
                        st.message());
    }
    return Status::ok();
  }
  Status retire(std::uint64_t first, std::uint64_t count) override {
    // Still locked: no write to these stripes is in flight while they start to go to the
    // replacement too.
    GRAID_RETURN_IF_ERROR(usable());
    s_.replace_copied.store(first + count, std::memory_order_release);
    return Status::ok();
  }
  // Why the copy cannot go on, if it cannot: cancelled (kNotFound), or a failure.
  Status usable() const {
    if (s_.replacement.load(std::memory_order_acquire) != &target_)
      return make_error(Errc::kNotFound, "cancelled");
    if (s_.is_failed(member_))
      return make_error(Errc::kIoError, "member {} failed: it is rebuilt instead", member_);
    if (s_.replace_broken.load(std::memory_order_acquire))
      return make_error(Errc::kIoError, "{} failed a write", target_.path());
    if (s_.array_failed()) return make_error(Errc::kIoError, "the array failed");
    return Status::ok();
  }

 private:
  Array::State& s_;
  std::uint32_t member_;
  MemberDevice& target_;
  AlignedBuffer& strip_;
};

}  // namespace

Result<bool> Array::replace(const RebuildControl& control) {
  State& s = *state_;
  std::uint32_t m = State::kNoReplace;
  std::shared_ptr<MemberDevice> keep;  // alive while the copy uses it, even if cancelled
  {
    MutexLock guard(s.control_mutex);
    if (!s.replacement_owner) return true;
    m = s.replace_member.load(std::memory_order_acquire);
    keep = s.replacement_owner;
  }
  MemberDevice* target = keep.get();
  const Geometry& g = s.geometry;
  const std::uint64_t strip = g.strip_bytes();
  const std::uint64_t stripes = g.stripes(s.data_size);
  auto failed = [&](const std::string& why) -> Status {
    hot_replace::give_up(s, m, why);
    return make_error(Errc::kIoError, "hot replace of member {} of array '{}': {}", m, s.name, why);
  };
  auto strip_buf = AlignedBuffer::allocate(strip, 4096);
  // Only the old member's buffers: the windows may be as large as the budget allows for one.
  auto pipeline = strip_buf
                      ? WindowPipeline::create(s,
                                               pipeline_shape(1, strip, control.window_stripes,
                                                              control.windows_in_flight, stripes),
                                               std::uint64_t{1} << m)
                      : Result<std::unique_ptr<WindowPipeline>>(strip_buf.status());
  if (!pipeline) {
    hot_replace::give_up(s, m, "no memory for the copy");
    return pipeline.status();
  }

  const std::string path = target->path();
  const Clock::time_point started = Clock::now();
  spdlog::info("graid: array '{}': copying member {} to {}", s.name, m, path);
  const std::uint64_t resumed_at = s.replace_copied.load(std::memory_order_acquire);
  // The rate counts from where the copy resumes.
  JobPace pace(pace_limits(s, control.bytes_per_second, control.speed, control.stop),
               resumed_at * strip);
  if (resumed_at > 0) {
    spdlog::info("graid: array '{}': the copy of member {} resumes at its checkpoint ({} MiB)",
                 s.name, m, (resumed_at * strip) >> 20);
  }
  ReplacePolicy policy(s, m, *target, *strip_buf);
  Clock::time_point last_checkpoint = started;
  auto after_retire = [&](std::uint64_t next) -> Status {
    if (Clock::now() - last_checkpoint < control.checkpoint_interval || next >= stripes)
      return Status::ok();
    last_checkpoint = Clock::now();
    return s.record_replace_checkpoint();
  };
  Status ready = policy.usable();
  if (ready.code() == Errc::kNotFound) return false;
  if (!ready) return failed(ready.message());
  auto run = (*pipeline)->run(policy, resumed_at, stripes, pace, resumed_at * strip, control.stop,
                              after_retire);
  if (!run) {
    if (run.status().code() == Errc::kNotFound) return false;  // cancelled
    return failed(run.status().message());
  }
  if (!run->finished) {
    if (Status st = s.record_replace_checkpoint(); !st) return failed(st.message());
    spdlog::info("graid: array '{}': copy of member {} stopped at {} MiB; it resumes there", s.name,
                 m, (s.replace_copied.load() * strip) >> 20);
    return false;
  }
  std::string old_path;
  if (Status st = hot_replace::swap_in(s, m, old_path); !st) {
    if (st.code() == Errc::kNotFound) return false;
    hot_replace::give_up(s, m, st.message());
    return make_error(Errc::kIoError, "hot replace of member {} of array '{}': {}", m, s.name,
                      st.message());
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  spdlog::info("graid: array '{}': member {} is now {} (was {}): {} MiB copied in {:.1f} s", s.name,
               m, path, old_path, s.data_size >> 20, seconds);
  s.emit(ArrayEventKind::kReplaceFinished, m,
         fmt::format("{} took the role of {} ({:.1f} s)", path, old_path, seconds),
         byte_counts(g, s.data_size));
  return true;
}

}  // namespace graid
