// A HostMemoryRegistry for tests: records what the engine announces and withdraws, refuses on
// demand, and answers whether a pointer lies in a registered region.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>

#include "graid/host_memory.h"

namespace graid::testing {

class RecordingRegistry final : public HostMemoryRegistry {
 public:
  Status add_region(std::span<std::byte> region) override {
    std::lock_guard lock(mu_);
    ++add_calls_;
    if (refuse_) return Status(Errc::kUnsupported, "refused by the test");
    const auto b = reinterpret_cast<std::uintptr_t>(region.data());
    for (const auto& [begin, end] : live_) {
      if (b < end && begin < b + region.size()) {
        errors_ += "overlapping region announced; ";
        return Status(Errc::kInvalidArgument, "overlap");
      }
    }
    live_[b] = b + region.size();
    ++added_;
    bytes_ += region.size();
    return Status::ok();
  }

  void remove_region(std::span<std::byte> region) noexcept override {
    std::lock_guard lock(mu_);
    const auto b = reinterpret_cast<std::uintptr_t>(region.data());
    auto it = live_.find(b);
    if (it == live_.end() || it->second != b + region.size()) {
      errors_ += "removal of a region that was not registered; ";
      return;
    }
    live_.erase(it);
    ++removed_;
  }

  // True when [p, p + len) lies inside one live region.
  bool covers(const void* p, std::size_t len) const {
    std::lock_guard lock(mu_);
    const auto b = reinterpret_cast<std::uintptr_t>(p);
    auto it = live_.upper_bound(b);
    if (it == live_.begin()) return false;
    --it;
    return b >= it->first && b + len <= it->second;
  }

  void set_refuse(bool refuse) {
    std::lock_guard lock(mu_);
    refuse_ = refuse;
  }
  std::size_t add_calls() const { return locked(add_calls_); }
  std::size_t added() const { return locked(added_); }
  std::size_t removed() const { return locked(removed_); }
  std::size_t live() const {
    std::lock_guard lock(mu_);
    return live_.size();
  }
  std::size_t bytes_added() const { return locked(bytes_); }
  std::string errors() const {
    std::lock_guard lock(mu_);
    return errors_;
  }

 private:
  std::size_t locked(const std::size_t& v) const {
    std::lock_guard lock(mu_);
    return v;
  }

  mutable std::mutex mu_;
  std::map<std::uintptr_t, std::uintptr_t> live_;  // begin -> end
  std::size_t add_calls_ = 0;
  std::size_t added_ = 0;
  std::size_t removed_ = 0;
  std::size_t bytes_ = 0;
  bool refuse_ = false;
  std::string errors_;
};

}  // namespace graid::testing
