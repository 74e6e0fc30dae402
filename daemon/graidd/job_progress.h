// How far a DG's background job (rebuild, check) has got, and how fast: what describe dg shows.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace graid::daemon {

struct JobProgress {
  double percent = 0;
  double bytes_per_second = 0;        // since the run started
  std::optional<double> eta_seconds;  // at that rate
};

// `done` of `total` member bytes, `started_offset` of them done when the run began at
// `started_at`.
inline JobProgress job_progress(std::uint64_t total, std::uint64_t done,
                                std::uint64_t started_offset,
                                std::chrono::steady_clock::time_point started_at) {
  JobProgress p;
  p.percent = total == 0 ? 100.0 : 100.0 * static_cast<double>(done) / static_cast<double>(total);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at).count();
  if (elapsed > 0 && done > started_offset) {
    p.bytes_per_second = static_cast<double>(done - started_offset) / elapsed;
    p.eta_seconds = static_cast<double>(total - done) / p.bytes_per_second;
  }
  return p;
}

}  // namespace graid::daemon
