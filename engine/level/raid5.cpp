// RAID5: n-1 data strips and one parity strip (P = XOR of the data) per stripe, left-symmetric
// (parity_layout.h); survives any one failure.
#include "level/parity_layout.h"

namespace graid {
namespace {

class Raid5 final : public LeftSymmetricParityLevel<1> {
 public:
  RaidLevel level() const noexcept override { return RaidLevel::kRaid5; }
  std::string_view name() const noexcept override { return "raid5"; }
  std::uint32_t min_members() const noexcept override { return 3; }
};

}  // namespace

const LevelModule& raid5_module() noexcept {
  static const Raid5 module;
  return module;
}

}  // namespace graid
