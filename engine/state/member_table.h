// The devices in an array's roles, read by I/O threads without a lock while the control path may
// put a new device into a failed role (a spare or a replacement taking it over for a rebuild).
//
// Each role points at a shared_ptr that is never modified once published: set() stores the new
// device in a new cell and swaps the role's pointer to it, and the cell it replaced stays alive
// (and so does its device) until the table is destroyed. A reader that loaded the old cell keeps
// using a valid object: its request on a failed device fails or completes as it would have. So
// operator[] hands out a reference that stays valid, and any number of threads may copy the
// shared_ptr it names.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "graid/member.h"
#include "graid/thread_annotations.h"

namespace graid {

class MemberTable {
 public:
  MemberTable() = default;
  MemberTable(const MemberTable&) = delete;
  MemberTable& operator=(const MemberTable&) = delete;

  // Sizing, before the table is shared: `n` roles, all empty.
  void resize(std::uint32_t n) {
    roles_ = std::make_unique<std::atomic<const Cell*>[]>(n);
    size_ = n;
    for (std::uint32_t m = 0; m < n; ++m)
      roles_[m].store(&empty_, std::memory_order_relaxed);
  }
  // Sizing and filling, before the table is shared.
  void assign(std::vector<std::unique_ptr<MemberDevice>> devices) {
    resize(static_cast<std::uint32_t>(devices.size()));
    for (std::uint32_t m = 0; m < size_; ++m)
      set(m, std::move(devices[m]));
  }

  std::uint32_t size() const noexcept { return size_; }

  // Role `m`'s device (null when it has none). REQUIRES: m < size().
  const std::shared_ptr<MemberDevice>& operator[](std::uint32_t m) const noexcept {
    return *roles_[m].load(std::memory_order_acquire);
  }

  // Puts `device` into role `m`; the device it held before stays open until the table goes.
  void set(std::uint32_t m, std::shared_ptr<MemberDevice> device) EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    cells_.push_back(std::move(device));
    roles_[m].store(&cells_.back(), std::memory_order_release);
  }

  // Every role's device now, by role.
  std::vector<std::shared_ptr<MemberDevice>> snapshot() const {
    std::vector<std::shared_ptr<MemberDevice>> out;
    out.reserve(size_);
    for (std::uint32_t m = 0; m < size_; ++m)
      out.push_back((*this)[m]);
    return out;
  }

 private:
  using Cell = std::shared_ptr<MemberDevice>;
  const Cell empty_;
  std::unique_ptr<std::atomic<const Cell*>[]> roles_;
  std::uint32_t size_ = 0;
  Mutex mutex_;
  std::list<Cell> cells_ GUARDED_BY(mutex_);  // a list: cells never move
};

}  // namespace graid
