// GateMember: a MemberDevice wrapper whose blocking metadata I/O (write_sync, flush_sync) waits
// at a MetadataGate: how tests make a member hang inside a metadata write, and prove that an
// update's writes to several members are in flight together. Reads and async data I/O pass
// straight through.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>

#include "forwarding_member.h"
#include "graid/member.h"

namespace graid::testing {

// Shared by the members it holds (and kept alive by them: a hung call may return after the test
// let go of everything else).
class MetadataGate {
 public:
  // From now on, calls that `selects` (a write at `offset`, or a flush with offset ~0) wait
  // until open() is called, until `release_at` calls are waiting at once (then all go on: a
  // latch), or until each has waited `max_wait` (so a test of code that never gets there still
  // ends). Replaces an earlier arm().
  void arm(std::function<bool(std::uint64_t offset)> selects,
           std::size_t release_at = std::numeric_limits<std::size_t>::max(),
           std::chrono::milliseconds max_wait = std::chrono::seconds(20)) {
    std::lock_guard lock(mutex_);
    selects_ = std::move(selects);
    release_at_ = release_at;
    max_wait_ = max_wait;
    open_ = false;
  }
  // Lets every waiting and later call through.
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }
  // Waits until `n` calls are waiting at once; false after `timeout`.
  bool wait_for_held(std::size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return held_ >= n; });
  }
  std::size_t held() {
    std::lock_guard lock(mutex_);
    return held_;
  }
  // Most calls waiting at once so far.
  std::size_t max_held() {
    std::lock_guard lock(mutex_);
    return max_held_;
  }
  // Calls that waited and have since returned from the device below: false after `timeout`.
  bool wait_for_returned(std::size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return returned_ >= n; });
  }

  // Called by GateMember before a write (offset) or flush (~0). True if the call waited: the
  // member then reports returned() once the device below has answered.
  bool pass(std::uint64_t offset) {
    std::unique_lock lock(mutex_);
    if (open_ || !selects_ || !selects_(offset)) return false;
    ++held_;
    max_held_ = std::max(max_held_, held_);
    if (held_ >= release_at_) open_ = true;
    cv_.notify_all();
    cv_.wait_for(lock, max_wait_, [&] { return open_; });
    --held_;
    cv_.notify_all();
    return true;
  }
  void returned() {
    std::lock_guard lock(mutex_);
    ++returned_;
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<bool(std::uint64_t)> selects_;  // GUARDED_BY(mutex_); empty: nothing waits
  std::size_t release_at_ = 0;
  std::chrono::milliseconds max_wait_{0};
  bool open_ = true;
  std::size_t held_ = 0;
  std::size_t max_held_ = 0;
  std::size_t returned_ = 0;
};

inline constexpr std::uint64_t kFlushOffset = ~std::uint64_t{0};

class GateMember final : public ForwardingMember {
 public:
  GateMember(std::unique_ptr<MemberDevice> inner, std::shared_ptr<MetadataGate> gate)
      : ForwardingMember(std::move(inner)), gate_(std::move(gate)) {}

  Status write_sync(std::uint64_t offset, std::span<const std::byte> buf) override {
    const bool held = gate_->pass(offset);
    Status s = inner().write_sync(offset, buf);
    if (held) gate_->returned();
    return s;
  }
  Status flush_sync() override {
    const bool held = gate_->pass(kFlushOffset);
    Status s = inner().flush_sync();
    if (held) gate_->returned();
    return s;
  }

 private:
  std::shared_ptr<MetadataGate> gate_;
};

}  // namespace graid::testing
