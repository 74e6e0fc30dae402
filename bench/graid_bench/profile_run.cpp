#include "profile_run.h"

#include <algorithm>
#include <cmath>

#include "array_run.h"
#include "options.h"
#include "raw_baseline.h"
#include "raw_sweep.h"

namespace graid::bench {

Result<ProfileReport> measure_profile(const MeasureConfig& config, const Profile& profile,
                                      const MemberCost& cost) {
  ProfileReport best;
  best.profile = profile;
  best.cost = cost;
  RawConfig raw;
  raw.paths = config.paths;
  raw.member_offset = config.raw_offset;
  raw.member_bytes = config.raw_bytes;
  raw.cost = cost;
  raw.pattern = profile.pattern;
  // Unless a depth is given, the raw run keeps as many member I/Os in flight as the array run
  // does: queue_depth requests, each issuing its member I/Os of one phase (reads, then writes) at
  // once. Fewer would understate what the members allow.
  const auto per_phase =
      static_cast<std::uint32_t>(std::ceil(std::max({cost.reads, cost.writes, 1.0})));
  const std::uint32_t array_depth =
      std::min<std::uint32_t>(config.queue_depth * per_phase, kMaxQueueDepth);
  TimedRunConfig timing = config.timing;
  timing.seconds = config.timing.seconds / config.rounds;
  raw.seed = config.seed;
  if (!config.raw) {
    raw.queue_depth = 0;
  } else if (config.raw_queue_depth != 0) {
    raw.queue_depth = config.raw_queue_depth;
  } else {
    // The members at saturation (raw_sweep.h): short probes around that depth, best of.
    RawConfig probe = raw;
    probe.timing = {timing.threads, std::min(timing.warmup_seconds, 0.1),
                    std::min(timing.seconds / 4, 0.5)};
    const auto depths = sweep_queue_depths(array_depth, kMaxQueueDepth);
    auto sweep = sweep_raw(depths, [&](std::uint32_t qd) -> Result<double> {
      probe.queue_depth = qd;
      auto figures = run_raw_baseline(probe);
      if (!figures.is_ok()) return figures.status();
      return figures->iops();
    });
    if (!sweep.is_ok()) return sweep.status();
    // The deepest probe was the best: the members may give more deeper still, and a limit the
    // array can beat is no limit. Go on doubling while it helps.
    while (sweep->best_queue_depth == sweep->points.back().queue_depth &&
           sweep->best_queue_depth < kMaxQueueDepth) {
      const std::uint32_t deeper = std::min(sweep->best_queue_depth * 2, kMaxQueueDepth);
      probe.queue_depth = deeper;
      auto figures = run_raw_baseline(probe);
      if (!figures.is_ok()) return figures.status();
      sweep->points.push_back({deeper, figures->iops()});
      const double best_iops =
          std::max_element(sweep->points.begin(), sweep->points.end(),
                           [](const SweepPoint& a, const SweepPoint& b) { return a.iops < b.iops; })
              ->iops;
      if (figures->iops() >= best_iops) sweep->best_queue_depth = deeper;
    }
    raw.queue_depth = sweep->best_queue_depth;
    best.raw_sweep = sweep->points;
  }
  best.raw_queue_depth = raw.queue_depth;
  raw.timing = timing;

  std::vector<ProfileReport> rounds;
  for (std::uint32_t round = 0; round < config.rounds; ++round) {
    ProfileReport r = best;
    raw.seed = config.seed + round;
    if (config.raw) {
      auto figures = run_raw_baseline(raw);
      if (!figures.is_ok()) return figures.status();
      r.raw = *figures;
    }
    if (config.session != nullptr) {
      ArrayRunConfig run{profile, config.span, config.queue_depth, timing, config.seed + round};
      run.target_iops = config.target_iops;
      auto array_figures = run_array_workload(*config.session, run);
      if (!array_figures.is_ok()) {
        return make_error(array_figures.status().code(), "{}: {}", profile.name,
                          array_figures.status().message());
      }
      r.array = *array_figures;
    }
    rounds.push_back(r);
  }
  // Report the round with the median ratio (raw only: the median raw IOPS), and every round's
  // ratio.
  std::sort(rounds.begin(), rounds.end(), [](const ProfileReport& a, const ProfileReport& b) {
    return a.ratio() ? a.ratio().value_or(0) < b.ratio().value_or(0) : a.raw.iops() < b.raw.iops();
  });
  if (config.session != nullptr && config.session->parity_device_failed()) {
    return make_error(Errc::kIoError,
                      "{}: the parity device ({}) failed during the run and parity went to the "
                      "cpu (see the log); no figure of this run is the device's",
                      profile.name, config.session->backend_name());
  }
  ProfileReport r = rounds[rounds.size() / 2];
  for (const ProfileReport& each : rounds) {
    if (each.ratio()) r.round_ratios.push_back(*each.ratio());
  }
  return r;
}

}  // namespace graid::bench
