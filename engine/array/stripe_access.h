// The array's members as a level module's background hook (LevelModule::process_stripe) sees
// them: blocking strip reads and writes at the data area, which members are dead in a stripe,
// the parity backend, one scratch strip per member. For resync, check and rebuild.
#pragma once

#include <cerrno>
#include <cstdint>
#include <string_view>
#include <vector>

#include "array/array_state.h"
#include "level/level_module.h"

namespace graid {

class ArrayStripeAccess final : public StripeAccess {
 public:
  // `stale`: the member a rebuild writes (kRebuild), or none (~0u).
  static Result<ArrayStripeAccess> make(Array::State& s, std::uint32_t stale = ~0u) {
    ArrayStripeAccess a(s, stale);
    for (std::uint32_t i = 0; i < s.geometry.members(); ++i) {
      auto buf = AlignedBuffer::allocate(s.geometry.strip_bytes(), 4096);
      if (!buf) return buf.status();
      a.scratch_.push_back(std::move(*buf));
    }
    return a;
  }
  bool is_failed(std::uint32_t member, std::uint64_t stripe) const noexcept override {
    return member != stale_ && s_->dead_at(member, stripe);
  }
  bool is_stale(std::uint32_t member) const noexcept override { return member == stale_; }
  Status read_strip(std::uint32_t member, std::uint64_t stripe, std::span<std::byte> buf) override {
    return s_->members[member]->read_sync(at(stripe), buf);
  }
  // Also to the member's hot replacement, when one has been copied past `stripe`.
  Status write_strip(std::uint32_t member, std::uint64_t stripe,
                     std::span<const std::byte> buf) override {
    MemberDevice* copy = s_->hold_replacement(member, stripe, at(stripe));
    const std::shared_ptr<MemberDevice>& device = s_->members[member];
    if (copy == device.get()) {
      s_->release_replacement();
      copy = nullptr;
    }
    Status st = device->write_sync(at(stripe), buf);
    if (copy != nullptr) {
      if (Status c = copy->write_sync(at(stripe), buf); !c) s_->replacement_failed("write", -EIO);
      s_->release_replacement();
    }
    return st;
  }
  ParityBackend* parity() noexcept override { return s_->parity; }
  std::span<AlignedBuffer> scratch() noexcept override { return scratch_; }

 private:
  ArrayStripeAccess(Array::State& s, std::uint32_t stale) : s_(&s), stale_(stale) {}
  std::uint64_t at(std::uint64_t stripe) const noexcept {
    return s_->device_offset(stripe * s_->geometry.strip_bytes());
  }
  Array::State* s_;
  std::uint32_t stale_;
  std::vector<AlignedBuffer> scratch_;
};

// Processes `stripe` with `task` (the stripe locked by the caller). A member whose read or write
// fails with an I/O error is failed, as under I/O, and the stripe done again without it while the
// array survives (bounded: each round fails one more member); not after the stale member (the one
// a rebuild writes) failed, which leaves nothing to do it for. `job` names the job in the
// failure's reason ("re-sync", "check"). The last outcome is returned.
StripeOutcome process_stripe_failing_members(Array::State& s, StripeAccess& access, StripeTask task,
                                             std::uint64_t stripe, std::string_view job);

}  // namespace graid
