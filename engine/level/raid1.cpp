// RAID1: every member holds every byte at the same offset (one data strip, n copies); survives
// while one member is left.
#include "level/level_module.h"

namespace graid {
namespace {

class Raid1 final : public MirrorLevel {
 public:
  RaidLevel level() const noexcept override { return RaidLevel::kRaid1; }
  std::string_view name() const noexcept override { return "raid1"; }
  std::uint32_t min_members() const noexcept override { return 2; }
  std::uint32_t data_strips(std::uint32_t /*n*/) const noexcept override { return 1; }
  std::uint32_t copies(std::uint32_t n) const noexcept override { return n; }
  std::uint32_t failures_tolerated(std::uint32_t n) const noexcept override { return n - 1; }
  bool survives(std::uint32_t n, std::uint64_t failed) const noexcept override {
    return static_cast<std::uint32_t>(std::popcount(failed)) < n;
  }
  std::uint32_t data_member(std::uint32_t /*n*/, std::uint64_t /*stripe*/, std::uint32_t /*d*/,
                            std::uint32_t copy) const noexcept override {
    return copy;
  }
  void place(std::uint32_t /*n*/, std::uint32_t member,
             MemberPlace& place) const noexcept override {
    place.role = StripRole::kData;
    place.data_index = 0;
    place.copy = member;
  }
};

}  // namespace

const LevelModule& raid1_module() noexcept {
  static const Raid1 module;
  return module;
}

}  // namespace graid
