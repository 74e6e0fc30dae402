// RAID10, "near-2" as md's default: n/2 data strips per stripe, data strip d on members 2d and
// 2d+1 (mirror pairs (0,1), (2,3), ...). Survives any one failure, and more while no pair loses
// both members.
#include "level/level_module.h"

namespace graid {
namespace {

class Raid10 final : public MirrorLevel {
 public:
  RaidLevel level() const noexcept override { return RaidLevel::kRaid10; }
  std::string_view name() const noexcept override { return "raid10"; }
  std::uint32_t min_members() const noexcept override { return 4; }
  bool even_members() const noexcept override { return true; }
  std::uint32_t data_strips(std::uint32_t n) const noexcept override { return n / 2; }
  std::uint32_t copies(std::uint32_t /*n*/) const noexcept override { return 2; }
  std::uint32_t failures_tolerated(std::uint32_t /*n*/) const noexcept override { return 1; }
  bool survives(std::uint32_t n, std::uint64_t failed) const noexcept override {
    for (std::uint32_t i = 0; i + 1 < n; i += 2) {
      if ((failed >> i & 3u) == 3u) return false;
    }
    return true;
  }
  std::uint32_t data_member(std::uint32_t /*n*/, std::uint64_t /*stripe*/, std::uint32_t d,
                            std::uint32_t copy) const noexcept override {
    return 2 * d + copy;
  }
  void place(std::uint32_t /*n*/, std::uint32_t member,
             MemberPlace& place) const noexcept override {
    place.role = StripRole::kData;
    place.data_index = member / 2;
    place.copy = member % 2;
  }
};

}  // namespace

const LevelModule& raid10_module() noexcept {
  static const Raid10 module;
  return module;
}

}  // namespace graid
