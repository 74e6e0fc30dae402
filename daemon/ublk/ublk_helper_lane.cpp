#include "ublk/ublk_helper_lane.h"

namespace graid::ublk {

Result<std::unique_ptr<HelperLane>> HelperLane::create(
    IoContext& ctx, Array& array, std::span<const std::span<std::byte>> regions) {
  auto attached = array.attach(ctx);
  if (!attached.is_ok()) return attached.status();
  std::unique_ptr<HelperLane> lane(new HelperLane(ctx));
  lane->queue_ = std::move(*attached);
  for (const auto& region : regions) {
    if (!ctx.add_buffer_region(region).is_ok()) break;
    lane->registered_.push_back(region);
  }
  return lane;
}

HelperLane::~HelperLane() {
  for (const auto& region : registered_)
    ctx_.remove_buffer_region(region);
}

}  // namespace graid::ublk
