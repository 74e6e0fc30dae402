#include "ublk/ublk_helper_lane.h"

namespace graid::ublk {

Result<std::unique_ptr<HelperLane>> HelperLane::create(
    IoContext& ctx, Array& array, std::span<const std::span<std::byte>> regions) {
  auto attached = array.attach(ctx);
  if (!attached.is_ok()) return attached.status();
  std::unique_ptr<HelperLane> lane(new HelperLane());
  lane->queue_ = std::move(*attached);
  lane->registered_ = RingRegions(ctx, regions);
  return lane;
}

}  // namespace graid::ublk
