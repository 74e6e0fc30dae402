// RAID0: striping, no redundancy. Data strip d of every stripe is on member d; any failure loses
// data, and background jobs have nothing to do.
#include "level/level_module.h"

namespace graid {
namespace {

class Raid0 final : public LevelModule {
 public:
  RaidLevel level() const noexcept override { return RaidLevel::kRaid0; }
  std::string_view name() const noexcept override { return "raid0"; }
  std::uint32_t min_members() const noexcept override { return 1; }
  Redundancy redundancy() const noexcept override { return Redundancy::kNone; }
  std::uint32_t data_strips(std::uint32_t n) const noexcept override { return n; }
  std::uint32_t failures_tolerated(std::uint32_t /*n*/) const noexcept override { return 0; }
  bool survives(std::uint32_t /*n*/, std::uint64_t failed) const noexcept override {
    return failed == 0;
  }
  std::uint32_t data_member(std::uint32_t /*n*/, std::uint64_t /*stripe*/, std::uint32_t d,
                            std::uint32_t /*copy*/) const noexcept override {
    return d;
  }
  void place(std::uint32_t /*n*/, std::uint32_t member,
             MemberPlace& place) const noexcept override {
    place.role = StripRole::kData;
    place.data_index = member;
  }
  bool can_resync(const Geometry&, std::uint64_t, std::uint64_t) const noexcept override {
    return true;  // nothing to resync
  }
  StripeOutcome process_stripe(StripeTask, const Geometry&, StripeAccess&,
                               std::uint64_t) const override {
    return {};  // no redundancy: always consistent, nothing to write
  }
};

}  // namespace

const LevelModule& raid0_module() noexcept {
  static const Raid0 module;
  return module;
}

}  // namespace graid
