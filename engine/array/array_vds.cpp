// The VD table: carving virtual drives out of the array's data space and recording them in the
// superblocks.
#include <algorithm>
#include <numeric>
#include <utility>

#include "state/array_state.h"

namespace graid {

VdInfo vd_info(const meta::VdEntry& e) {
  return VdInfo{e.id, e.name, e.start, e.size};
}

namespace {

// Where a VD may start: a 1 MiB boundary that is also a full-stripe boundary, so that the strip
// and stripe hints a frontend gives (ublk's io_opt and chunk sectors) line up with the array's
// stripes. VDs made before this rule keep their place; only new starts follow it.
std::uint64_t vd_start_align(const Geometry& g) {
  return std::lcm(std::uint64_t{1} << 20, g.stripe_data_bytes());
}

// The extents the VDs take, [start, end), in order of start.
std::vector<std::pair<std::uint64_t, std::uint64_t>> used_extents(const meta::Superblock& sb) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> used;
  for (const meta::VdEntry& e : sb.vds)
    if (e.in_use()) used.emplace_back(e.start, e.start + e.size);
  std::sort(used.begin(), used.end());
  return used;
}

}  // namespace

std::uint64_t Array::largest_free_extent() const {
  const State& s = *state_;
  MutexLock guard(s.control_mutex);
  const std::uint64_t align = vd_start_align(s.geometry);
  std::uint64_t best = 0, cursor = 0;
  const auto gap = [&](std::uint64_t end) {
    const std::uint64_t start = (cursor + align - 1) / align * align;
    if (end > start) best = std::max(best, (end - start) / meta::kDataAlign * meta::kDataAlign);
  };
  for (const auto& [start, end] : used_extents(s.sb)) {
    gap(start);
    cursor = std::max(cursor, end);
  }
  gap(s.capacity);
  return best;
}

Result<VdInfo> Array::create_vd(std::string_view name, std::uint64_t size) {
  State& s = *state_;
  MutexLock guard(s.control_mutex);
  if (name.empty() || name.size() > meta::kMaxVdNameLen ||
      name.find('\0') != std::string_view::npos) {
    return make_error(Errc::kInvalidArgument, "VD name '{}' must be 1 to {} bytes", name,
                      meta::kMaxVdNameLen);
  }
  if (size == 0) return make_error(Errc::kInvalidArgument, "VD size must be more than 0");
  const std::uint64_t align = vd_start_align(s.geometry);
  if (size > s.capacity) {
    // Checked before rounding up, which would wrap to 0 for sizes near 2^64.
    return make_error(Errc::kNoSpace, "a VD of {} bytes does not fit in the array's {} bytes", size,
                      s.capacity);
  }
  size = (size + meta::kDataAlign - 1) / meta::kDataAlign * meta::kDataAlign;
  std::uint32_t free_slot = meta::kMaxVds;
  std::uint32_t id = 0;
  for (std::uint32_t i = 0; i < meta::kMaxVds; ++i) {
    const meta::VdEntry& e = s.sb.vds[i];
    if (!e.in_use()) {
      if (free_slot == meta::kMaxVds) free_slot = i;
      continue;
    }
    if (e.name == name) return make_error(Errc::kInvalidArgument, "a VD named '{}' exists", name);
    id = std::max(id, e.id + 1);
  }
  if (free_slot == meta::kMaxVds) {
    return make_error(Errc::kBusy, "the array already has {} VDs, the most it can hold",
                      meta::kMaxVds);
  }
  std::uint64_t candidate = 0;
  for (const auto& [start, end] : used_extents(s.sb)) {
    if (candidate + size <= start) break;
    candidate = std::max(candidate, (end + align - 1) / align * align);
  }
  if (candidate + size > s.capacity || candidate + size < candidate) {
    return make_error(Errc::kNoSpace, "no free extent of {} bytes in the array's {} bytes", size,
                      s.capacity);
  }
  meta::VdEntry& e = s.sb.vds[free_slot];
  e.id = id;
  e.flags = meta::kVdInUse;
  e.start = candidate;
  e.size = size;
  e.name = std::string(name);
  if (Status st = meta::validate(s.sb); !st) {
    e = meta::VdEntry{};
    return st;
  }
  GRAID_RETURN_IF_ERROR(s.write_superblocks_locked());
  return vd_info(e);
}

Status Array::delete_vd(std::uint32_t id) {
  State& s = *state_;
  MutexLock guard(s.control_mutex);
  for (meta::VdEntry& e : s.sb.vds) {
    if (e.in_use() && e.id == id) {
      if (auto users = s.vd_users.find(id); users != s.vd_users.end()) {
        return make_error(Errc::kBusy,
                          "VD {} ('{}') is open ({} handles): stop serving it first; nothing was "
                          "changed",
                          id, e.name, users->second);
      }
      e = meta::VdEntry{};
      return s.write_superblocks_locked();
    }
  }
  return make_error(Errc::kNotFound, "no VD {}", id);
}

Result<VdInfo> Array::resize_vd(std::uint32_t id, std::uint64_t size) {
  State& s = *state_;
  MutexLock guard(s.control_mutex);
  meta::VdEntry* vd = nullptr;
  for (meta::VdEntry& e : s.sb.vds)
    if (e.in_use() && e.id == id) vd = &e;
  if (vd == nullptr) return make_error(Errc::kNotFound, "no VD {}", id);
  if (size > s.capacity) {
    // Checked before rounding up, which would wrap to 0 for sizes near 2^64.
    return make_error(Errc::kNoSpace,
                      "VD {} ('{}') cannot grow to {} bytes: the array holds {} bytes; nothing "
                      "was changed",
                      id, vd->name, size, s.capacity);
  }
  size = (size + meta::kDataAlign - 1) / meta::kDataAlign * meta::kDataAlign;
  if (size < vd->size) {
    return make_error(Errc::kInvalidArgument,
                      "VD {} ('{}') is {} bytes: shrinking it to {} is refused (it would cut off "
                      "data a filesystem may still use); nothing was changed",
                      id, vd->name, vd->size, size);
  }
  if (size == vd->size) return vd_info(*vd);
  // The room after it: up to the next VD's start, or the end of the array.
  std::uint64_t limit = s.capacity;
  std::string what = "the end of the array";
  for (const meta::VdEntry& e : s.sb.vds) {
    if (!e.in_use() || &e == vd || e.start < vd->start) continue;
    if (e.start < limit) {
      limit = e.start;
      what = fmt::format("VD {} ('{}'), which starts there", e.id, e.name);
    }
  }
  if (vd->start + size > limit) {
    return make_error(Errc::kNoSpace,
                      "VD {} ('{}') can grow to at most {} bytes, up to {}; {} bytes do not fit; "
                      "nothing was changed",
                      id, vd->name, limit - vd->start, what, size);
  }
  const std::uint64_t old_size = vd->size;
  vd->size = size;
  Status st = meta::validate(s.sb);
  if (st) st = s.write_superblocks_locked();
  if (!st) {
    vd->size = old_size;
    return make_error(st.code(), "VD {} ('{}') not resized: {}", id, vd->name, st.message());
  }
  return vd_info(*vd);
}

std::vector<VdInfo> Array::vds() const {
  MutexLock guard(state_->control_mutex);
  std::vector<VdInfo> out;
  for (const meta::VdEntry& e : state_->sb.vds) {
    if (e.in_use()) out.push_back(vd_info(e));
  }
  std::sort(out.begin(), out.end(), [](const VdInfo& a, const VdInfo& b) { return a.id < b.id; });
  return out;
}

Result<VdHandle> Array::open_vd(std::uint32_t id) {
  State& s = *state_;
  MutexLock guard(s.control_mutex);
  for (const meta::VdEntry& e : s.sb.vds) {
    if (e.in_use() && e.id == id) {
      ++s.vd_users[id];
      return VdHandle(s, vd_info(e));
    }
  }
  return make_error(Errc::kNotFound, "no VD {}", id);
}

VdHandle::VdHandle(VdHandle&& other) noexcept
    : state_(std::exchange(other.state_, nullptr)), info_(std::move(other.info_)) {}

VdHandle& VdHandle::operator=(VdHandle&& other) noexcept {
  if (this != &other) {
    close();
    state_ = std::exchange(other.state_, nullptr);
    info_ = std::move(other.info_);
  }
  return *this;
}

Status VdHandle::refresh() {
  if (state_ == nullptr) return make_error(Errc::kNotFound, "no VD is open here");
  MutexLock guard(state_->control_mutex);
  for (const meta::VdEntry& e : state_->sb.vds) {
    if (e.in_use() && e.id == info_.id) {
      info_ = vd_info(e);
      return Status::ok();
    }
  }
  return make_error(Errc::kNotFound, "no VD {}", info_.id);  // cannot happen while open
}

VdHandle::~VdHandle() {
  close();
}

void VdHandle::close() noexcept {
  if (state_ == nullptr) return;
  MutexLock guard(state_->control_mutex);
  auto it = state_->vd_users.find(info_.id);
  if (it != state_->vd_users.end() && --it->second == 0) state_->vd_users.erase(it);
  state_ = nullptr;
}

}  // namespace graid
