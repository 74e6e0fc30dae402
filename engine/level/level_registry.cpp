// The table of RAID level modules. A new level: its own file defining `<name>_module()`, and one
// line here.
#include <array>
#include <cassert>

#include "level/level_module.h"

namespace graid {

const LevelModule& raid0_module() noexcept;
const LevelModule& raid1_module() noexcept;
const LevelModule& raid5_module() noexcept;
const LevelModule& raid6_module() noexcept;
const LevelModule& raid10_module() noexcept;

namespace {

const std::array<const LevelModule*, 5>& table() noexcept {
  static const std::array<const LevelModule*, 5> modules = {
      &raid0_module(), &raid1_module(), &raid10_module(), &raid5_module(), &raid6_module()};
  return modules;
}

}  // namespace

std::uint32_t LevelModule::parity_member(std::uint32_t /*n*/, std::uint64_t /*stripe*/,
                                         std::uint32_t /*index*/) const noexcept {
  assert(false && "parity_member() of a level without parity");
  return 0;
}

std::span<const LevelModule* const> level_modules() noexcept {
  return table();
}

const LevelModule* find_level_module(std::uint32_t value) noexcept {
  for (const LevelModule* m : table()) {
    if (static_cast<std::uint32_t>(m->level()) == value) return m;
  }
  return nullptr;
}

const LevelModule& level_module(RaidLevel level) noexcept {
  const LevelModule* m = find_level_module(static_cast<std::uint32_t>(level));
  assert(m != nullptr);
  return *m;
}

}  // namespace graid
