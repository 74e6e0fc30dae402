#include "jobs/job_pace.h"

namespace graid {

PaceLimits pace_limits(const Array::State& s, std::uint64_t fixed_max,
                       std::function<JobSpeed()> speed, const std::atomic<bool>* stop) {
  PaceLimits limits{fixed_max, std::move(speed), {}, stop};
  limits.busy = [&s, seen = s.foreground_activity().first]() mutable {
    const auto [requests, in_flight] = s.foreground_activity();
    const bool busy = requests != seen || in_flight != 0;
    seen = requests;
    return busy;
  };
  return limits;
}

}  // namespace graid
