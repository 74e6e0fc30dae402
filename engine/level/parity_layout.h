// The parity layout RAID5 and RAID6 share: left-symmetric, as md (ALGORITHM_LEFT_SYMMETRIC), with
// Q right after P on RAID6. For stripe s of n members: P on p = n-1 - (s mod n), parity strip i
// on (p + i) mod n, data strip d on (p + parity + d) mod n. See graid/geometry.h for pictures.
#pragma once

#include "level/level_module.h"

namespace graid {

// A parity level with `kParity` parity strips per stripe (1: P, 2: P and Q).
template <std::uint32_t kParity>
class LeftSymmetricParityLevel : public LevelModule {
 public:
  Redundancy redundancy() const noexcept final { return Redundancy::kParity; }
  std::uint32_t data_strips(std::uint32_t n) const noexcept final { return n - kParity; }
  std::uint32_t parity_strips() const noexcept final { return kParity; }
  std::uint32_t failures_tolerated(std::uint32_t /*n*/) const noexcept final { return kParity; }
  bool survives(std::uint32_t /*n*/, std::uint64_t failed) const noexcept final {
    return static_cast<std::uint32_t>(std::popcount(failed)) <= kParity;
  }

  std::uint32_t data_member(std::uint32_t n, std::uint64_t stripe, std::uint32_t d,
                            std::uint32_t /*copy*/) const noexcept final {
    return (p_member(n, stripe) + kParity + d) % n;
  }
  std::uint32_t parity_member(std::uint32_t n, std::uint64_t stripe,
                              std::uint32_t index) const noexcept final {
    return (p_member(n, stripe) + index) % n;
  }
  void place(std::uint32_t n, std::uint32_t member, MemberPlace& place) const noexcept final {
    // Distance of this member after P, going up and wrapping: 0 is P, 1 is Q on RAID6.
    const std::uint32_t after_p = (member + n - p_member(n, place.stripe)) % n;
    if (after_p < kParity) {
      place.role = after_p == 0 ? StripRole::kP : StripRole::kQ;
      return;
    }
    place.role = StripRole::kData;
    place.data_index = after_p - kParity;
  }

  bool can_resync(const Geometry& g, std::uint64_t stripe,
                  std::uint64_t failed) const noexcept final {
    return can_resync_parity_stripe(g, stripe, failed);
  }
  StripeOutcome process_stripe(StripeTask task, const Geometry& g, StripeAccess& access,
                               std::uint64_t stripe) const final {
    return process_parity_stripe(task, g, access, stripe);
  }

 private:
  static std::uint32_t p_member(std::uint32_t n, std::uint64_t stripe) noexcept {
    return n - 1 - static_cast<std::uint32_t>(stripe % n);
  }
};

}  // namespace graid
