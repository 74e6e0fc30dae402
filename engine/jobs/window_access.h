// A window's buffers as a level module's background hook (LevelModule::process_stripe) sees
// them: strips read from and written into the window (jobs/window_pipeline.h), for the stripes
// a policy does with the module's own code rather than with one parity batch (mirrors, a check's
// comparisons). A member that was not read for the window reads as an error (the policy then has
// the window done strip by strip); only the job's stale members (its targets) may be written.
#pragma once

#include <cstring>

#include "jobs/window_pipeline.h"
#include "level/level_module.h"
#include "state/array_state.h"

namespace graid {

class WindowStripeAccess final : public StripeAccess {
 public:
  WindowStripeAccess(Array::State& s, JobWindow& w, std::uint64_t stale,
                     std::span<AlignedBuffer> scratch)
      : s_(s), w_(w), stale_(stale), scratch_(scratch) {}
  bool is_failed(std::uint32_t member, std::uint64_t stripe) const noexcept override {
    return !is_stale(member) && s_.dead_at(member, stripe);
  }
  bool is_stale(std::uint32_t member) const noexcept override { return (stale_ >> member) & 1u; }
  Status read_strip(std::uint32_t member, std::uint64_t stripe, std::span<std::byte> buf) override {
    if (((w_.read_mask() >> member) & 1u) == 0)
      return make_error(Errc::kInternal, "member {} was not read for this window", member);
    std::memcpy(buf.data(), w_.at(member, stripe), buf.size());
    return Status::ok();
  }
  Status write_strip(std::uint32_t member, std::uint64_t stripe,
                     std::span<const std::byte> buf) override {
    if (!is_stale(member)) return make_error(Errc::kInternal, "a job writes only its targets");
    std::memcpy(w_.at(member, stripe), buf.data(), buf.size());
    return Status::ok();
  }
  ParityBackend* parity() noexcept override { return s_.parity; }
  std::span<AlignedBuffer> scratch() noexcept override { return scratch_; }

 private:
  Array::State& s_;
  JobWindow& w_;
  std::uint64_t stale_;
  std::span<AlignedBuffer> scratch_;
};

}  // namespace graid
