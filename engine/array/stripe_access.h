// The array's members as a level module's background hook (LevelModule::process_stripe) sees
// them: blocking strip reads and writes at the data area, which members are dead in a stripe,
// the parity backend, one scratch strip per member. For resync, check and rebuild.
#pragma once

#include <cerrno>
#include <cstdint>
#include <string_view>
#include <vector>

#include "level/level_module.h"
#include "state/array_state.h"

namespace graid {

class ArrayStripeAccess final : public StripeAccess {
 public:
  // `stale`: the member a rebuild writes (kRebuild), or none (~0u).
  static Result<ArrayStripeAccess> make(Array::State& s, std::uint32_t stale = ~0u) {
    ArrayStripeAccess a(s, stale < 64 ? std::uint64_t{1} << stale : 0);
    for (std::uint32_t i = 0; i < s.geometry.members(); ++i) {
      auto buf = AlignedBuffer::allocate(s.geometry.strip_bytes(), 4096);
      if (!buf) return buf.status();
      a.scratch_.push_back(std::move(*buf));
    }
    return a;
  }
  bool is_failed(std::uint32_t member, std::uint64_t stripe) const noexcept override {
    return !is_stale(member) && s_->dead_at(member, stripe);
  }
  bool is_stale(std::uint32_t member) const noexcept override { return (stale_ >> member) & 1u; }
  // Members written, not read, from now on (bit m: member m): a job making one that could not
  // be read whole again (consistency.cpp).
  std::uint64_t stale_mask() const noexcept { return stale_; }
  void set_stale_mask(std::uint64_t mask) noexcept { stale_ = mask; }
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
  ArrayStripeAccess(Array::State& s, std::uint64_t stale) : s_(&s), stale_(stale) {}
  std::uint64_t at(std::uint64_t stripe) const noexcept {
    return s_->device_offset(stripe * s_->geometry.strip_bytes());
  }
  Array::State* s_;
  std::uint64_t stale_;
  std::vector<AlignedBuffer> scratch_;
};

// Processes `stripe` with `task` (the stripe locked by the caller). A member whose read fails is
// handled as the foreground path handles a media error: its strip is reconstructed from the
// others (the stale members' too, in a rebuild) and rewritten in place, counted against the
// member's read-error limit; where redundancy cannot make it up, the blocks it cannot read are
// recorded lost (Array::State::add_lost_ranges) with the data strips of the stale members at the
// same rows, zeroed, and the stripe done again over the zeroes, so it stays consistent. A member
// whose write fails, that is past its read-error limit, or whose lost blocks do not fit the list
// is failed, as under I/O, and the stripe done again without it while the array survives
// (bounded: each round fails one more member); not after a stale member (one a rebuild writes)
// failed, which leaves nothing to do it for. `job` names the job in the failure's reason
// ("re-sync", "check"). The last outcome is returned.
StripeOutcome process_stripe_failing_members(Array::State& s, ArrayStripeAccess& access,
                                             StripeTask task, std::uint64_t stripe,
                                             std::string_view job);

}  // namespace graid
