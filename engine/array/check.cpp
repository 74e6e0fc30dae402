// The consistency check as a background job (Array::check): every stripe's parity (or mirror
// copies) compared with its data, window by window under stripe locks while I/O goes on, with a
// checkpoint in the superblocks (sb.check_checkpoint) so a stopped or interrupted check resumes,
// and repair on request.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "array/array_state.h"
#include "array/background_pace.h"
#include "array/stripe_access.h"
#include "stripe/stripe_range_lock.h"

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

  const std::uint64_t window = std::max<std::uint64_t>(control.window_stripes, 1);
  BackgroundPace pace(
      s.pace_limits(control.bytes_per_second, control.rate, control.share, control.stop),
      from * strip);
  Clock::time_point last_checkpoint = Clock::now();
  StripeRangeLock lock(s.locks);
  for (std::uint64_t first = from; first < stripes;) {
    if (control.stop != nullptr && control.stop->load(std::memory_order_acquire)) {
      Status st = record_check(s, first * strip);
      stopped(st ? fmt::format("stopped at stripe {}; it resumes there", first)
                 : fmt::format("stopped; position not recorded: {}", st.message()));
      if (!st) return st;
      return report;
    }
    const std::uint64_t count = std::min(window, stripes - first);
    lock.lock(first, count);
    for (std::uint64_t stripe = first; stripe < first + count; ++stripe) {
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
        lock.unlock();
        stopped(fmt::format("failed at stripe {}: {}", stripe, r.status.message()));
        return make_error(Errc::kIoError, "check of array '{}' failed at stripe {}: {}", s.name,
                          stripe, r.status.message());
      }
      ++report.stripes;
      if (r.skipped) ++report.skipped;
      if (!r.inconsistent) continue;
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
    }
    lock.unlock();
    first += count;
    s.check_at.store(first, std::memory_order_release);
    if (Clock::now() - last_checkpoint >= control.checkpoint_interval && first < stripes) {
      GRAID_RETURN_IF_ERROR(record_check(s, first * strip));
      last_checkpoint = Clock::now();
    }
    pace.after(first * strip);
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
