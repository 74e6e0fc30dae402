// Array lifecycle: create, assemble, member failure, clean stop, attaching queues.
#include "graid/array.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "array/array_queue_impl.h"
#include "array/consistency.h"

namespace graid {

std::string_view array_health_name(ArrayHealth health) noexcept {
  switch (health) {
    case ArrayHealth::kOptimal:
      return "optimal";
    case ArrayHealth::kDegraded:
      return "degraded";
    case ArrayHealth::kFailed:
      return "failed";
  }
  return "unknown";
}

namespace {

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

Result<meta::Superblock> read_superblock(MemberDevice& m) {
  auto buf = AlignedBuffer::allocate(meta::kSuperblockSize, 4096);
  if (!buf) return buf.status();
  GRAID_RETURN_IF_ERROR(m.read_sync(meta::kSuperblockOffset, buf->span()));
  return meta::decode(buf->span());
}

meta::ArrayUuidBytes uuid_bytes(const meta::Uuid& u) {
  return u.bytes;
}

std::vector<MemberDevice*> live_pointers(const Array::State& s) {
  std::vector<MemberDevice*> out;
  for (std::uint32_t m = 0; m < s.members.size(); ++m) {
    out.push_back(s.is_failed(m) ? nullptr : s.members[m].get());
  }
  return out;
}

}  // namespace

bool Array::State::mirrors_survive() const noexcept {
  const std::uint32_t n = geometry.members();
  switch (geometry.level()) {
    case RaidLevel::kRaid1:
      return failed_count.load() < n;
    case RaidLevel::kRaid10:
      for (std::uint32_t i = 0; i + 1 < n; i += 2) {
        if (is_failed(i) && is_failed(i + 1)) return false;
      }
      return true;
    default:
      return false;
  }
}

Status Array::State::write_superblocks_locked() {
  // A member that cannot take its superblock has failed too; record that on the others.
  for (std::uint32_t round = 0; round <= geometry.members(); ++round) {
    ++sb.events;
    sb.utime_ns = now_ns();
    auto buf = AlignedBuffer::allocate(meta::kSuperblockSize, 4096);
    if (!buf) return buf.status();
    std::vector<std::uint32_t> newly_failed;
    for (std::uint32_t m = 0; m < members.size(); ++m) {
      if (is_failed(m) || !members[m]) continue;
      meta::Superblock copy = sb;
      copy.member_index = m;
      copy.member_uuid = sb.members[m].uuid;
      GRAID_RETURN_IF_ERROR(meta::encode(copy, buf->span()));
      Status st = members[m]->write_sync(meta::kSuperblockOffset, buf->span());
      if (st) st = members[m]->flush_sync();
      if (!st) {
        spdlog::error("graid: member {} ({}) failed writing its superblock: {}", m,
                      members[m]->path(), st.to_string());
        newly_failed.push_back(m);
      }
    }
    if (newly_failed.empty()) return Status::ok();
    for (std::uint32_t m : newly_failed) {
      failed[m].store(1, std::memory_order_release);
      failed_count.fetch_add(1);
      sb.members[m].state = meta::MemberState::kFailed;
      if (bitmap) bitmap->drop_member(m);
    }
    if (array_failed()) {
      return make_error(Errc::kIoError, "array failed while writing superblocks");
    }
  }
  return make_error(Errc::kIoError, "superblock update did not settle");
}

Status Array::State::fail_member(std::uint32_t member, std::string_view reason) {
  std::lock_guard guard(control_mutex);
  if (member >= members.size()) {
    return make_error(Errc::kOutOfRange, "no member {} (array has {})", member, members.size());
  }
  if (is_failed(member)) return Status::ok();
  failed[member].store(1, std::memory_order_release);
  failed_count.fetch_add(1);
  sb.members[member].state = meta::MemberState::kFailed;
  if (bitmap) bitmap->drop_member(member);
  spdlog::warn("graid: array '{}': member {} ({}) failed: {}; {} of {} members failed", sb.name,
               member, members[member] ? members[member]->path() : "missing", reason,
               failed_count.load(), members.size());
  if (array_failed()) {
    spdlog::error("graid: array '{}' has failed: more members lost than {} tolerates", sb.name,
                  raid_level_name(geometry.level()));
  }
  return write_superblocks_locked();
}

Status Array::State::bitmap_begin(std::uint64_t member_offset, std::uint64_t len) {
  if (!bitmap) return Status::ok();
  for (std::uint32_t attempt = 0; attempt <= geometry.members(); ++attempt) {
    std::vector<std::uint32_t> failed_members;
    Status st = bitmap->begin_write(member_offset, len, &failed_members);
    if (st) return st;
    if (failed_members.empty()) return st;
    for (std::uint32_t m : failed_members) {
      Status fs =
          fail_member(m, fmt::format("write-intent bitmap update failed: {}", st.to_string()));
      (void)fs;
    }
    if (array_failed()) return make_error(Errc::kIoError, "array failed updating its bitmap");
  }
  return make_error(Errc::kIoError, "write-intent bitmap update did not settle");
}

bool Array::State::begin_bitmap_clear() {
  if (!bitmap) return false;
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  const std::int64_t interval =
      std::chrono::duration_cast<std::chrono::nanoseconds>(bitmap_clear_interval).count();
  if (now - bitmap_cleared_at_ns.load(std::memory_order_relaxed) < interval) return false;
  bool expected = false;
  if (!bitmap_clearing.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
    return false;  // another flush runs a cycle
  }
  if (bitmap->mark_clear_candidates() == 0) {
    bitmap_clearing.store(false, std::memory_order_release);
    bitmap_cleared_at_ns.store(now, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void Array::State::end_bitmap_clear(bool flushed) {
  if (flushed && !array_failed()) {
    std::vector<std::uint32_t> failed_members;
    Status st = bitmap->clear_candidates(&failed_members);
    for (std::uint32_t m : failed_members) {
      Status fs =
          fail_member(m, fmt::format("write-intent bitmap clear failed: {}", st.to_string()));
      (void)fs;
    }
  }
  bitmap_cleared_at_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count(),
                             std::memory_order_relaxed);
  bitmap_clearing.store(false, std::memory_order_release);
}

Array::Array(std::unique_ptr<State> state) : state_(std::move(state)) {}
Array::~Array() = default;

const Geometry& Array::geometry() const noexcept {
  return state_->geometry;
}
std::uint64_t Array::member_data_offset() const noexcept {
  return state_->data_offset;
}
std::uint64_t Array::capacity() const noexcept {
  return state_->capacity;
}
std::uint32_t Array::member_count() const noexcept {
  return state_->geometry.members();
}

ArrayHealth Array::health() const noexcept {
  if (state_->array_failed()) return ArrayHealth::kFailed;
  return state_->failed_count.load() == 0 ? ArrayHealth::kOptimal : ArrayHealth::kDegraded;
}

MemberHealth Array::member_health(std::uint32_t member) const noexcept {
  return member < state_->members.size() && !state_->is_failed(member) ? MemberHealth::kActive
                                                                       : MemberHealth::kFailed;
}

Status Array::fail_member(std::uint32_t member, std::string_view reason) {
  return state_->fail_member(member, reason);
}

Result<std::unique_ptr<ArrayQueue>> Array::attach(IoContext& ctx) {
  return ArrayQueue::make(*state_, ctx);
}

Result<std::unique_ptr<Array>> Array::create(std::vector<std::unique_ptr<MemberDevice>> members,
                                             const CreateOptions& create,
                                             const ArrayOptions& options, bool force) {
  const auto n = static_cast<std::uint32_t>(members.size());
  auto geometry = Geometry::make(create.level, n, create.strip_bytes);
  if (!geometry) return geometry.status();
  if (geometry->parity_strips() > 0 && options.parity == nullptr) {
    return make_error(Errc::kInvalidArgument, "{} needs a parity backend",
                      raid_level_name(create.level));
  }
  if (create.name.size() > meta::kMaxArrayNameLen) {
    return make_error(Errc::kInvalidArgument, "array name '{}' is longer than {} bytes",
                      create.name, meta::kMaxArrayNameLen);
  }
  std::map<std::string, std::uint32_t> seen;
  std::uint64_t smallest = ~std::uint64_t{0};
  for (std::uint32_t m = 0; m < n; ++m) {
    MemberDevice& dev = *members[m];
    if (auto [it, fresh] = seen.emplace(dev.path(), m); !fresh) {
      return make_error(Errc::kInvalidArgument, "member {} is listed twice ({} and {})", dev.path(),
                        it->second, m);
    }
    if (!force) {
      if (auto old = read_superblock(dev); old) {
        return make_error(Errc::kBusy,
                          "{} already belongs to graid array {} ('{}'); nothing was changed "
                          "(force overwrites it)",
                          dev.path(), old->array_uuid.to_string(), old->name);
      }
    }
    smallest = std::min(smallest, dev.size());
  }
  const std::uint64_t data_offset = meta::kDefaultDataOffset;
  const std::uint64_t strip = create.strip_bytes;
  if (smallest < data_offset + strip) {
    return make_error(Errc::kNoSpace,
                      "the smallest member has {} bytes; graid needs at least {} (1 MiB of "
                      "metadata and one strip)",
                      smallest, data_offset + strip);
  }
  std::uint64_t data_size = (smallest - data_offset) / strip * strip;
  if (create.member_data_bytes != 0) {
    if (create.member_data_bytes > data_size) {
      return make_error(Errc::kNoSpace, "{} bytes per member requested, {} available",
                        create.member_data_bytes, data_size);
    }
    data_size = create.member_data_bytes / strip * strip;
    if (data_size == 0) {
      return make_error(Errc::kInvalidArgument, "member size {} is less than one strip ({})",
                        create.member_data_bytes, strip);
    }
  }

  auto state = std::make_unique<State>(*geometry);
  state->parity = options.parity;
  state->async_parity = options.async_parity;
  state->host_memory = options.host_memory;
  state->bitmap_clear_interval = options.bitmap_clear_interval;
  state->data_offset = data_offset;
  state->data_size = data_size;
  state->capacity = geometry->data_capacity(data_size);
  state->failed = std::make_unique<std::atomic<std::uint8_t>[]>(n);
  meta::Superblock& sb = state->sb;
  auto array_uuid = meta::Uuid::generate();
  if (!array_uuid) return array_uuid.status();
  sb.array_uuid = *array_uuid;
  sb.level = create.level;
  sb.member_count = n;
  sb.strip_bytes = create.strip_bytes;
  sb.data_offset = data_offset;
  sb.data_size = data_size;
  sb.name = create.name;
  sb.ctime_ns = now_ns();
  sb.array_flags = 0;  // open: not clean until stop()
  for (std::uint32_t m = 0; m < n; ++m) {
    auto u = meta::Uuid::generate();
    if (!u) return u.status();
    sb.members[m].uuid = *u;
    sb.members[m].state = meta::MemberState::kActive;
  }
  sb.member_uuid = sb.members[0].uuid;
  GRAID_RETURN_IF_ERROR(meta::validate(sb));
  sb.events = 0;  // write_superblocks_locked() makes it 1
  state->members = std::move(members);

  if (create.level != RaidLevel::kRaid0) {
    auto ptrs = live_pointers(*state);
    meta::BitmapParams params;
    params.array_uuid = uuid_bytes(sb.array_uuid);
    params.data_offset = data_offset;
    params.data_size = data_size;
    params.region_bytes = create.bitmap_region_bytes;
    auto bitmap = meta::WriteIntentBitmap::create_fresh(ptrs, params);
    if (!bitmap) return bitmap.status();
    GRAID_RETURN_IF_ERROR(bitmap->write_all());
    state->bitmap.emplace(std::move(*bitmap));
  }
  if (!create.assume_clean) {
    auto synced = resync_range(*state, 0, data_size);
    if (!synced) return synced.status();
  }
  {
    std::lock_guard guard(state->control_mutex);
    GRAID_RETURN_IF_ERROR(state->write_superblocks_locked());
  }
  spdlog::info("graid: created {} array '{}' ({}) on {} members, strip {} KiB, {} bytes",
               raid_level_name(create.level), create.name, sb.array_uuid.to_string(), n,
               strip / 1024, state->capacity);
  return std::unique_ptr<Array>(new Array(std::move(state)));
}

Result<std::unique_ptr<Array>> Array::assemble(std::vector<std::unique_ptr<MemberDevice>> devices,
                                               const ArrayOptions& options,
                                               const AssembleOptions& assemble,
                                               AssembleReport* report) {
  AssembleReport local;
  AssembleReport& rep = report ? *report : local;
  rep = AssembleReport{};
  // Decode every device's superblock; devices without one are not members.
  std::vector<meta::Superblock> copies;
  std::vector<std::size_t> device_of;
  std::string unreadable;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    auto sb = read_superblock(*devices[i]);
    if (!sb) {
      unreadable += fmt::format("\n  {}: {}", devices[i]->path(), sb.status().to_string());
      continue;
    }
    copies.push_back(std::move(*sb));
    device_of.push_back(i);
  }
  if (copies.empty()) {
    return make_error(Errc::kNotFound, "no graid superblock on any of the {} devices:{}",
                      devices.size(), unreadable);
  }
  // The array: the one the newest copy belongs to; refuse a mix.
  const meta::Superblock* newest_any = &copies[0];
  for (const auto& c : copies) {
    if (c.events > newest_any->events) newest_any = &c;
  }
  const meta::Uuid array_uuid = newest_any->array_uuid;
  for (std::size_t i = 0; i < copies.size(); ++i) {
    if (copies[i].array_uuid != array_uuid) {
      return make_error(Errc::kInvalidArgument,
                        "{} belongs to array {}, the others to {}; assemble one array at a time",
                        devices[device_of[i]]->path(), copies[i].array_uuid.to_string(),
                        array_uuid.to_string());
    }
  }
  auto newest = meta::pick_newest(copies, array_uuid);
  if (!newest) return newest.status();
  meta::Superblock sb = copies[newest->newest];
  auto geometry = sb.geometry();
  if (!geometry) return geometry.status();
  const std::uint32_t n = sb.member_count;

  auto state = std::make_unique<State>(*geometry);
  state->parity = options.parity;
  state->async_parity = options.async_parity;
  state->host_memory = options.host_memory;
  state->bitmap_clear_interval = options.bitmap_clear_interval;
  if (geometry->parity_strips() > 0 && options.parity == nullptr) {
    return make_error(Errc::kInvalidArgument, "{} needs a parity backend",
                      raid_level_name(sb.level));
  }
  state->data_offset = sb.data_offset;
  state->data_size = sb.data_size;
  state->capacity = geometry->data_capacity(sb.data_size);
  state->failed = std::make_unique<std::atomic<std::uint8_t>[]>(n);
  state->members.resize(n);
  for (std::size_t i : newest->in_sync) {
    const meta::Superblock& c = copies[i];
    if (c.member_index >= n) continue;
    state->members[c.member_index] = std::move(devices[device_of[i]]);
  }
  for (std::size_t i : newest->stale) {
    rep.stale_members.push_back(devices[device_of[i]]->path());
  }
  for (std::uint32_t m = 0; m < n; ++m) {
    const bool usable =
        state->members[m] != nullptr && sb.members[m].state == meta::MemberState::kActive;
    if (!usable) {
      state->failed[m].store(1);
      state->failed_count.fetch_add(1);
      rep.failed_members.push_back(state->members[m] ? state->members[m]->path()
                                                     : fmt::format("slot {} (missing)", m));
      sb.members[m].state = meta::MemberState::kFailed;
    }
  }
  if (state->array_failed()) {
    return make_error(Errc::kIoError,
                      "cannot assemble {} array '{}': {} of {} members missing, stale or failed",
                      raid_level_name(sb.level), sb.name, state->failed_count.load(), n);
  }
  if (state->failed_count.load() > 0 && !assemble.allow_degraded) {
    return make_error(Errc::kBusy, "array '{}' would start degraded ({} members missing)", sb.name,
                      state->failed_count.load());
  }
  rep.was_clean = sb.clean();
  rep.events = sb.events;
  state->sb = sb;

  if (sb.level != RaidLevel::kRaid0) {
    auto ptrs = live_pointers(*state);
    meta::BitmapParams params;
    params.array_uuid = uuid_bytes(sb.array_uuid);
    params.data_offset = sb.data_offset;
    params.data_size = sb.data_size;
    auto bitmap = meta::WriteIntentBitmap::load(ptrs, params);
    if (!bitmap) return bitmap.status();
    state->bitmap.emplace(std::move(*bitmap));
  }
  // Open the array: not clean until stop(), and record any members found missing.
  state->sb.array_flags &= ~meta::kArrayClean;
  {
    std::lock_guard guard(state->control_mutex);
    GRAID_RETURN_IF_ERROR(state->write_superblocks_locked());
  }
  if (state->bitmap) {
    // After a crash the bitmap names the regions that may have writes half done.
    for (const auto& [offset, length] : state->bitmap->dirty_ranges()) {
      auto synced = resync_range(*state, offset, length);
      if (!synced) return synced.status();
      rep.resynced_bytes += *synced;
    }
    for (std::uint32_t m = 0; m < n; ++m) {
      if (!state->is_failed(m)) GRAID_RETURN_IF_ERROR(state->members[m]->flush_sync());
    }
    GRAID_RETURN_IF_ERROR(state->bitmap->clear_idle());
  }
  spdlog::info("graid: assembled {} array '{}' ({}), {}, {} of {} members, events {}{}",
               raid_level_name(sb.level), sb.name, sb.array_uuid.to_string(),
               state->failed_count.load() ? "degraded" : "optimal", n - state->failed_count.load(),
               n, state->sb.events,
               rep.was_clean ? "" : fmt::format(", re-synced {} bytes", rep.resynced_bytes));
  return std::unique_ptr<Array>(new Array(std::move(state)));
}

Status Array::stop() {
  State& s = *state_;
  for (std::uint32_t m = 0; m < s.members.size(); ++m) {
    if (s.is_failed(m)) continue;
    Status st = s.members[m]->flush_sync();
    if (!st) {
      Status fs = s.fail_member(m, st.to_string());
      (void)fs;
    }
  }
  if (s.bitmap) {
    std::vector<std::uint32_t> failed_members;
    Status st = s.bitmap->clear_idle(&failed_members);
    for (std::uint32_t m : failed_members) {
      Status fs = s.fail_member(m, st.to_string());
      (void)fs;
    }
  }
  std::lock_guard guard(s.control_mutex);
  if (s.array_failed()) {
    return make_error(Errc::kIoError, "array '{}' has failed; not marked clean", s.sb.name);
  }
  s.sb.array_flags |= meta::kArrayClean;
  return s.write_superblocks_locked();
}

namespace {

VdInfo vd_info(const meta::VdEntry& e) {
  return VdInfo{e.id, e.name, e.start, e.size};
}

}  // namespace

Result<VdInfo> Array::create_vd(std::string_view name, std::uint64_t size) {
  State& s = *state_;
  std::lock_guard guard(s.control_mutex);
  if (name.empty() || name.size() > meta::kMaxVdNameLen ||
      name.find('\0') != std::string_view::npos) {
    return make_error(Errc::kInvalidArgument, "VD name '{}' must be 1 to {} bytes", name,
                      meta::kMaxVdNameLen);
  }
  if (size == 0) return make_error(Errc::kInvalidArgument, "VD size must be more than 0");
  constexpr std::uint64_t kAlign = 1u << 20;
  size = (size + meta::kDataAlign - 1) / meta::kDataAlign * meta::kDataAlign;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> used;  // [start, end)
  std::uint32_t free_slot = meta::kMaxVds;
  std::uint32_t id = 0;
  for (std::uint32_t i = 0; i < meta::kMaxVds; ++i) {
    const meta::VdEntry& e = s.sb.vds[i];
    if (!e.in_use()) {
      if (free_slot == meta::kMaxVds) free_slot = i;
      continue;
    }
    if (e.name == name) return make_error(Errc::kInvalidArgument, "a VD named '{}' exists", name);
    used.emplace_back(e.start, e.start + e.size);
    id = std::max(id, e.id + 1);
  }
  if (free_slot == meta::kMaxVds) {
    return make_error(Errc::kBusy, "the array already has {} VDs, the most it can hold",
                      meta::kMaxVds);
  }
  std::sort(used.begin(), used.end());
  std::uint64_t candidate = 0;
  for (const auto& [start, end] : used) {
    if (candidate + size <= start) break;
    candidate = std::max(candidate, (end + kAlign - 1) / kAlign * kAlign);
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
  std::lock_guard guard(s.control_mutex);
  for (meta::VdEntry& e : s.sb.vds) {
    if (e.in_use() && e.id == id) {
      e = meta::VdEntry{};
      return s.write_superblocks_locked();
    }
  }
  return make_error(Errc::kNotFound, "no VD {}", id);
}

std::vector<VdInfo> Array::vds() const {
  std::lock_guard guard(state_->control_mutex);
  std::vector<VdInfo> out;
  for (const meta::VdEntry& e : state_->sb.vds) {
    if (e.in_use()) out.push_back(vd_info(e));
  }
  std::sort(out.begin(), out.end(), [](const VdInfo& a, const VdInfo& b) { return a.id < b.id; });
  return out;
}

Result<std::uint64_t> Array::count_inconsistent_stripes() {
  return graid::count_inconsistent_stripes(*state_);
}

}  // namespace graid
