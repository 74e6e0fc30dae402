// RAID6: n-2 data strips, P (XOR) and Q (Reed-Solomon over GF(2^8), g = 2) per stripe,
// left-symmetric with Q after P (parity_layout.h); survives any two failures.
#include "level/parity_layout.h"

namespace graid {
namespace {

class Raid6 final : public LeftSymmetricParityLevel<2> {
 public:
  RaidLevel level() const noexcept override { return RaidLevel::kRaid6; }
  std::string_view name() const noexcept override { return "raid6"; }
  std::uint32_t min_members() const noexcept override { return 4; }
};

}  // namespace

const LevelModule& raid6_module() noexcept {
  static const Raid6 module;
  return module;
}

}  // namespace graid
