// Printing results: a readable table (default) or a JSON array, one entry per profile.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>

#include "cost_model.h"
#include "profiles.h"
#include "raw_sweep.h"
#include "stats.h"
#include "verify.h"

namespace graid::bench {

// What was run, common to every profile of one invocation.
struct RunSetup {
  std::string level;  // "raid5"
  std::uint32_t members = 0;
  std::uint32_t strip_bytes = 0;
  std::uint64_t member_bytes = 0;
  std::string backend;
  std::string device;  // the GPU parity ran on ("NVIDIA H200, 132 SMs, ..."), empty for the cpu
  std::uint32_t threads = 0;
  std::uint32_t queue_depth = 0;
  std::uint32_t raw_queue_depth = 0;  // --raw-qd; 0: swept per profile
  double seconds = 0;
  double warmup_seconds = 0;
  std::uint32_t rounds = 1;  // raw/array rounds per profile
  std::uint64_t span = 0;    // array bytes covered (0 in raw-only runs)
};

struct ProfileReport {
  Profile profile{};
  MemberCost cost;
  RunFigures raw;                     // member I/Os and member bytes
  std::uint32_t raw_queue_depth = 0;  // member I/Os in flight per thread in the raw run
  std::vector<SweepPoint> raw_sweep;  // the depths probed to choose it (empty with --raw-qd)
  std::vector<double> round_ratios;   // ratio of every round (raw and array alternate)
  std::optional<RunFigures> array;    // absent with --raw-only
  std::optional<VerifyResult> verify;

  // The most array requests per second the members allow: raw member IOPS over member I/Os per
  // array request.
  double limit_iops() const noexcept { return cost.total() > 0 ? raw.iops() / cost.total() : 0; }
  // The most member IOPS any raw run of this profile gave: the rounds' and the sweep's probes.
  double best_raw_iops() const noexcept {
    double best = raw.iops();
    for (const SweepPoint& p : raw_sweep)
      best = std::max(best, p.iops);
    return best;
  }
  std::optional<double> ratio() const noexcept {
    if (!array || limit_iops() <= 0) return std::nullopt;
    return array->iops() / limit_iops();
  }
};

void print_table(std::FILE* out, const RunSetup& setup, std::span<const ProfileReport> reports);
std::string to_json(const RunSetup& setup, std::span<const ProfileReport> reports);

}  // namespace graid::bench
