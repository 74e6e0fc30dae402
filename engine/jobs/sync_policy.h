// Making windows consistent, as the initialisation and the re-sync after an unclean stop do, as
// a window policy of the job engine (jobs/window_pipeline.h), md's resync: parity levels read
// every member's rows of the window, compute the parity of every stripe in one parity batch and
// write only the parity strips (one write per strip, a member's consecutive strips as one);
// mirrors read the first copy of each strip straight into the buffer the other copies are
// written from (or, where the copies' places vary within the window, read every member and copy
// in the buffers). A window with a member failed in part of it, or whose bulk I/O failed, is done
// strip by strip by the level module (a stripe missing a data strip cannot be made consistent:
// it is counted, not written).
#pragma once

#include <functional>

#include "array/stripe_access.h"
#include "jobs/window_pipeline.h"
#include "state/array_state.h"

namespace graid {

class SyncPolicy final : public WindowPolicy {
 public:
  // `what`: the job's name in logs and errors. `stop_on_failure`: a member failing ends the run
  // (the initialisation waits for the array to be optimal again) instead of being worked around.
  // `on_retire(first, count)`: the window is consistent (called under its lock, in order).
  SyncPolicy(Array::State& s, ArrayStripeAccess& access, const char* what, bool stop_on_failure,
             std::function<Status(std::uint64_t first, std::uint64_t count)> on_retire)
      : s_(s),
        access_(access),
        what_(what),
        stop_on_failure_(stop_on_failure),
        on_retire_(std::move(on_retire)) {}

  std::uint64_t reads(JobWindow& w) override;
  bool prepare(JobWindow& w) override;
  std::optional<std::uint64_t> compute(JobWindow& w) override;
  Status fallback(std::uint64_t first, std::uint64_t count) override;
  Status retire(std::uint64_t first, std::uint64_t count) override;

  std::uint64_t passed() const noexcept { return passed_; }      // stripes retired
  std::uint64_t unsynced() const noexcept { return unsynced_; }  // could not be made consistent
  std::uint64_t next() const noexcept { return next_; }          // the first stripe not retired
  void start_at(std::uint64_t stripe) noexcept { next_ = stripe; }
  // The run ended because a member failed (stop_on_failure).
  bool member_lost() const noexcept { return member_lost_; }

 private:
  bool any_dead(const JobWindow& w) const;
  Status member_failed();

  Array::State& s_;
  ArrayStripeAccess& access_;
  const char* what_;
  bool stop_on_failure_;
  std::function<Status(std::uint64_t, std::uint64_t)> on_retire_;
  std::uint64_t passed_ = 0, unsynced_ = 0, next_ = 0;
  bool member_lost_ = false;
};

}  // namespace graid
