// The consistency check as a background job (Array::check) on the job engine's pipeline
// (jobs/window_pipeline.h): every stripe's parity (or mirror copies) compared with its data,
// window by window under stripe locks while I/O goes on, with a checkpoint in the superblocks
// (sb.check_checkpoint) so a stopped or interrupted check resumes, and repair on request.
//
// A window every member is alive in is read in bulk and verified there (parity levels: one
// kVerify batch; mirrors: every copy compared with the first in the window's buffers). A stripe
// that does not match there, and every stripe of a window that could not be read in bulk (a
// member failed in part of it, a read error), is done again on its own with blocking I/O, still
// locked: that path repairs, corrects read errors and reports, as it always has.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "array/stripe_access.h"
#include "jobs/job_pace.h"
#include "jobs/window_pipeline.h"
#include "state/array_state.h"

namespace graid {

namespace {

using Clock = std::chrono::steady_clock;

// Records the check's position (nullopt: none pending).
Status record_check(Array::State& s, std::optional<std::uint64_t> member_offset) {
  MutexLock guard(s.control_mutex);
  if (s.sb.check_checkpoint == member_offset) return Status::ok();
  s.sb.check_checkpoint = member_offset;
  return s.write_superblocks_locked();
}

}  // namespace

std::optional<std::uint64_t> Array::check_progress() const {
  const State& s = *state_;
  const std::uint64_t at = s.check_at.load(std::memory_order_acquire);
  if (at != State::kNoCheck) return std::min(s.data_size, at * s.geometry.strip_bytes());
  MutexLock guard(s.control_mutex);
  return s.sb.check_checkpoint;
}

Result<CheckReport> Array::check(const CheckControl& control) {
  State& s = *state_;
  const Geometry& g = s.geometry;
  CheckReport report;
  if (g.redundancy() == Redundancy::kNone) {
    report.finished = true;
    return report;
  }
  if (s.check_running.exchange(true)) {
    return make_error(Errc::kBusy, "array '{}' is being checked already", s.name);
  }
  struct Running {
    State& s;
    ~Running() {
      s.check_at.store(State::kNoCheck, std::memory_order_release);
      s.check_running.store(false, std::memory_order_release);
    }
  } running{s};
  if (s.init_done.load() != State::kAllInitialised || s.init_running.load()) {
    // Every stripe not yet initialised would be a false mismatch.
    return make_error(Errc::kBusy,
                      "array '{}' is initialising; a check can run once that has finished", s.name);
  }
  if (s.resync_done.load() != State::kAllInitialised || s.resync_running.load()) {
    // Stripes written around the crash would be false mismatches until re-synced.
    return make_error(Errc::kBusy,
                      "array '{}' is re-syncing after an unclean stop; a check can run once "
                      "that has finished",
                      s.name);
  }
  const std::uint64_t strip = g.strip_bytes();
  const std::uint64_t stripes = g.stripes(s.data_size);
  std::optional<std::uint64_t> checkpoint;
  {
    MutexLock guard(s.control_mutex);
    checkpoint = s.sb.check_checkpoint;
  }
  const std::uint64_t from = std::min(stripes, checkpoint.value_or(0) / strip);
  report.from_stripe = from;
  s.check_at.store(from, std::memory_order_release);
  auto access = ArrayStripeAccess::make(s);
  if (!access) return access.status();
  GRAID_RETURN_IF_ERROR(record_check(s, from * strip));
  spdlog::info("graid: array '{}': {} from stripe {} of {}", s.name,
               control.repair ? "check and repair" : "check", from, stripes);
  s.emit(ArrayEventKind::kCheckStarted, std::nullopt,
         fmt::format("{}{}", control.repair ? "check with repair" : "check",
                     from == 0 ? "" : fmt::format(", resumed at stripe {}", from)),
         byte_counts(g, (stripes - from) * strip));
  auto stopped = [&](std::string why) {
    ArrayEventCounts counts = byte_counts(g, report.stripes * strip);
    counts.errors = report.mismatches;
    s.emit(ArrayEventKind::kCheckStopped, std::nullopt, std::move(why), counts);
  };

  // One stripe on its own, with blocking I/O (the stripe locked): checked, repaired on request,
  // counted and reported.
  auto check_stripe = [&](std::uint64_t stripe) -> Status {
    StripeOutcome r =
        process_stripe_failing_members(s, *access, StripeTask::kCheck, stripe, "check");
    std::string repaired;
    if (r.status && r.inconsistent && control.repair) {
      StripeOutcome fixed =
          process_stripe_failing_members(s, *access, StripeTask::kRepair, stripe, "repair");
      if (!fixed.status) r.status = fixed.status;
      if (fixed.status && !fixed.skipped && fixed.inconsistent) {
        ++report.repaired;
        repaired = std::move(fixed.repaired);
      }
    }
    if (!r.status) {
      return make_error(Errc::kIoError, "check of array '{}' failed at stripe {}: {}", s.name,
                        stripe, r.status.message());
    }
    ++report.stripes;
    if (r.skipped) ++report.skipped;
    if (!r.inconsistent) return Status::ok();
    ++report.mismatches;
    if (report.mismatch_stripes.size() < CheckReport::kMaxReportedMismatches) {
      report.mismatch_stripes.push_back(stripe);
      const std::string how = repaired.empty() ? std::string() : "; repaired: " + repaired;
      spdlog::warn("graid: array '{}': stripe {} (member bytes {}..{}) does not match{}", s.name,
                   stripe, stripe * strip, (stripe + 1) * strip, how);
      s.emit(ArrayEventKind::kCheckMismatch, std::nullopt,
             fmt::format("stripe {} (member bytes {}..{}): {}{}", stripe, stripe * strip,
                         (stripe + 1) * strip,
                         g.redundancy() == Redundancy::kParity ? "parity does not match the data"
                                                               : "mirror copies differ",
                         how));
    }
    return Status::ok();
  };

  class CheckPolicy final : public WindowPolicy {
   public:
    CheckPolicy(Array::State& s, decltype(check_stripe)& one) : s_(s), one_(one) {}
    std::uint64_t reads(JobWindow& w) override {
      const std::uint32_t n = s_.geometry.members();
      std::uint64_t alive = 0;
      for (std::uint32_t m = 0; m < n; ++m) {
        if (!s_.dead_at(m, w.first()) && !s_.dead_at(m, w.first() + w.count() - 1))
          alive |= std::uint64_t{1} << m;
      }
      return alive;
    }
    bool prepare(JobWindow& w) override {
      const Geometry& g = s_.geometry;
      if (g.redundancy() != Redundancy::kParity || w.read_mask() != all_members()) return true;
      // Every stripe verified in one batch (kVerify: parity_ok).
      return add_stripe_jobs(g, w, ParityOp::kVerify);
    }
    std::optional<std::uint64_t> compute(JobWindow& w) override {
      const Geometry& g = s_.geometry;
      if (w.read_mask() != all_members()) return std::nullopt;  // a member failed: by strips
      std::vector<std::uint64_t>& odd = mismatched_[w.first()];
      odd.clear();
      if (g.redundancy() == Redundancy::kParity) {
        for (std::size_t i = 0; i < w.jobs.size(); ++i)
          if (!w.jobs[i].parity_ok) odd.push_back(w.first() + i);
        return 0;
      }
      // Mirrors: every copy compared with the first, in the window's buffers.
      for (std::uint64_t stripe = w.first(); stripe < w.first() + w.count(); ++stripe) {
        bool same = true;
        for (std::uint32_t d = 0; d < g.data_strips() && same; ++d) {
          const std::byte* first = w.at(g.data_member(stripe, d, 0), stripe);
          for (std::uint32_t c = 1; c < g.copies() && same; ++c)
            same =
                std::memcmp(first, w.at(g.data_member(stripe, d, c), stripe), g.strip_bytes()) == 0;
        }
        if (!same) odd.push_back(stripe);
      }
      return 0;
    }
    Status fallback(std::uint64_t first, std::uint64_t count) override {
      mismatched_.erase(first);
      for (std::uint64_t stripe = first; stripe < first + count; ++stripe)
        GRAID_RETURN_IF_ERROR(one_(stripe));
      return Status::ok();
    }
    Status retire(std::uint64_t first, std::uint64_t count) override {
      auto it = mismatched_.find(first);
      if (it == mismatched_.end()) return Status::ok();  // done by fallback()
      std::vector<std::uint64_t> odd = std::move(it->second);
      mismatched_.erase(it);
      // Every stripe that matched counts here; the others are done again on their own.
      for (std::uint64_t stripe = first, i = 0; stripe < first + count; ++stripe) {
        if (i < odd.size() && odd[i] == stripe) {
          ++i;
          GRAID_RETURN_IF_ERROR(one_(stripe));
        } else {
          ++matched;
        }
      }
      return Status::ok();
    }
    std::uint64_t matched = 0;

   private:
    std::uint64_t all_members() const noexcept {
      const std::uint32_t n = s_.geometry.members();
      return n == 64 ? ~0ull : (std::uint64_t{1} << n) - 1;
    }
    Array::State& s_;
    decltype(check_stripe)& one_;
    std::map<std::uint64_t, std::vector<std::uint64_t>> mismatched_;
  };

  auto pipeline =
      WindowPipeline::create(s, pipeline_shape(g.members(), strip, control.window_stripes,
                                               control.windows_in_flight, stripes));
  if (!pipeline) return pipeline.status();
  CheckPolicy policy(s, check_stripe);
  JobPace pace(pace_limits(s, control.bytes_per_second, control.speed, control.stop), from * strip);
  Clock::time_point last_checkpoint = Clock::now();
  auto after_retire = [&](std::uint64_t next) -> Status {
    report.stripes += std::exchange(policy.matched, 0);
    s.check_at.store(next, std::memory_order_release);
    if (Clock::now() - last_checkpoint < control.checkpoint_interval || next >= stripes)
      return Status::ok();
    last_checkpoint = Clock::now();
    return record_check(s, next * strip);
  };
  auto run =
      (*pipeline)->run(policy, from, stripes, pace, from * strip, control.stop, after_retire);
  report.stripes += std::exchange(policy.matched, 0);
  if (!run) {
    stopped(fmt::format("failed: {}", run.status().message()));
    return run.status();
  }
  if (!run->finished) {
    Status st = record_check(s, run->next * strip);
    stopped(st ? fmt::format("stopped at stripe {}; it resumes there", run->next)
               : fmt::format("stopped; position not recorded: {}", st.message()));
    if (!st) return st;
    return report;
  }
  GRAID_RETURN_IF_ERROR(record_check(s, std::nullopt));
  report.finished = true;
  spdlog::info("graid: array '{}': check done: {} stripes, {} mismatched, {} repaired, {} skipped",
               s.name, report.stripes, report.mismatches, report.repaired, report.skipped);
  ArrayEventCounts counts = byte_counts(g, report.stripes * strip);
  counts.errors = report.mismatches;
  s.emit(ArrayEventKind::kCheckFinished, std::nullopt,
         fmt::format("{} stripes checked, {} mismatched{}, {} skipped (a member failed)",
                     report.stripes, report.mismatches,
                     control.repair ? fmt::format(", {} repaired", report.repaired) : "",
                     report.skipped),
         counts);
  return report;
}

}  // namespace graid
