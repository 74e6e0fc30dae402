// Memory registered in one thread's ring for fixed-buffer member I/O (READ_FIXED/WRITE_FIXED),
// withdrawn again when this goes: a ublk queue's tag buffers, in its own thread's ring and in its
// helper lane's; or, with zero copy, the slots the driver puts the requests' pages in. Create and
// destroy it on the ring's thread, and before the memory is freed.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "graid/member.h"

namespace graid::ublk {

class RingRegions {
 public:
  RingRegions() = default;
  // Registers the regions in turn. The first refusal (no slot left, RLIMIT_MEMLOCK) leaves it and
  // the rest unregistered: their I/O still works, pinning pages per request.
  RingRegions(IoContext& ctx, std::span<const std::span<std::byte>> regions) : ctx_(&ctx) {
    for (const auto& region : regions) {
      if (!ctx.add_buffer_region(region).is_ok()) break;
      registered_.push_back(region);
    }
  }
  // Zero copy: a slot of the ring's table for each window, for buffers the kernel registers
  // there itself (IoContext::add_kernel_buffer_slot); all or none. `slots` gets their indices.
  static Result<RingRegions> kernel_slots(IoContext& ctx,
                                          std::span<const std::span<std::byte>> windows,
                                          std::vector<std::uint16_t>& slots) {
    RingRegions r;
    r.ctx_ = &ctx;
    slots.clear();
    for (const auto& window : windows) {
      auto slot = ctx.add_kernel_buffer_slot(window);
      if (!slot.is_ok()) return slot.status();  // r withdraws those taken
      r.registered_.push_back(window);
      slots.push_back(*slot);
    }
    return r;
  }
  ~RingRegions() { withdraw(); }
  RingRegions(RingRegions&& o) noexcept
      : ctx_(std::exchange(o.ctx_, nullptr)), registered_(std::exchange(o.registered_, {})) {}
  RingRegions& operator=(RingRegions&& o) noexcept {
    if (this != &o) {
      withdraw();
      ctx_ = std::exchange(o.ctx_, nullptr);
      registered_ = std::exchange(o.registered_, {});
    }
    return *this;
  }
  RingRegions(const RingRegions&) = delete;
  RingRegions& operator=(const RingRegions&) = delete;

  // The regions the ring accepted.
  std::span<const std::span<std::byte>> regions() const noexcept { return registered_; }

 private:
  void withdraw() noexcept {
    for (const auto& region : registered_)
      ctx_->remove_buffer_region(region);
    registered_.clear();
  }

  IoContext* ctx_ = nullptr;
  std::vector<std::span<std::byte>> registered_;
};

}  // namespace graid::ublk
