// Array::create: validating members and shape, writing the first superblocks and bitmap, and
// initialising parity where the members' contents are not known to be consistent.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "array/array_settings.h"
#include "array/consistency.h"
#include "array/device_checks.h"
#include "array/superblock_io.h"
#include "meta/journal_record.h"
#include "state/array_state.h"

namespace graid {
namespace {

// The journal area for `g` on members of `smallest` bytes (CreateOptions::journal_bytes).
Result<std::uint64_t> choose_journal_bytes(const Geometry& g, std::uint64_t asked,
                                           std::uint64_t smallest) {
  if (g.parity_strips() == 0 || asked == 0) return std::uint64_t{0};
  constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
  // The largest record: every strip of the stripe written, in 512-byte pieces at worst.
  const std::uint64_t chunks = g.data_strips() + g.parity_strips();
  const std::uint64_t largest =
      meta::journal_record_bytes(chunks * (g.strip_bytes() / 512), chunks * g.strip_bytes());
  if (asked != CreateOptions::kAutoJournal) {
    if (asked % meta::kDataAlign != 0 || asked < 2 * largest) {
      return make_error(Errc::kInvalidArgument,
                        "journal area of {} bytes: it must be a multiple of {} and hold two of "
                        "this shape's largest records ({} bytes)",
                        asked, meta::kDataAlign, 2 * largest);
    }
    return asked;
  }
  constexpr std::uint64_t kGrain = 64 * 1024;
  const std::uint64_t least = (4 * largest + kGrain - 1) / kGrain * kGrain;
  const std::uint64_t wanted = std::min<std::uint64_t>(64 * kMiB, smallest / 256 / kMiB * kMiB);
  const std::uint64_t bytes = std::max(least, wanted);
  // Members too small to spare it (a few MiB): no journal rather than no array.
  if (smallest < meta::kDefaultDataOffset + bytes + 4 * std::uint64_t{g.strip_bytes()}) {
    spdlog::info("graid: members of {} bytes leave no room for a {}-byte journal area", smallest,
                 bytes);
    return std::uint64_t{0};
  }
  return bytes;
}

}  // namespace

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
  auto settings = stored_settings(create.settings);
  if (!settings) return settings.status();
  GRAID_RETURN_IF_ERROR(refuse_same_storage(members));
  std::uint64_t smallest = ~std::uint64_t{0};
  for (std::uint32_t m = 0; m < n; ++m) {
    MemberDevice& dev = *members[m];
    if (!force) GRAID_RETURN_IF_ERROR(refuse_graid_superblock(dev));
    smallest = std::min(smallest, dev.size());
  }
  const std::uint64_t strip = create.strip_bytes;
  auto journal_bytes = choose_journal_bytes(*geometry, create.journal_bytes, smallest);
  if (!journal_bytes) return journal_bytes.status();
  const std::uint64_t journal_offset = *journal_bytes != 0 ? meta::kDefaultDataOffset : 0;
  const std::uint64_t data_offset = meta::kDefaultDataOffset + *journal_bytes;
  if (smallest < data_offset + strip) {
    return make_error(Errc::kNoSpace,
                      "the smallest member has {} bytes; graid needs at least {} ({} bytes of "
                      "metadata and journal, and one strip)",
                      smallest, data_offset + strip, data_offset);
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

  auto logical_block = array_logical_block(members, create.strip_bytes);
  if (!logical_block) return logical_block.status();
  auto state = std::make_unique<State>(*geometry);
  state->logical_block = *logical_block;
  state->read_errors.emplace(n, options.max_read_errors);
  state->parity = options.parity;
  state->async_parity = options.async_parity;
  state->job_parity = options.job_parity != nullptr ? options.job_parity : options.async_parity;
  state->host_memory = options.host_memory;
  state->bitmap_clear_interval = options.bitmap_clear_interval;
  state->metadata_timeout = options.metadata_timeout;
  state->data_offset = data_offset;
  state->data_size = data_size;
  state->capacity = geometry->data_capacity(data_size);
  state->init_member_flags(n);
  state->name = create.name;
  // Filled here, then published into state->sb under the control mutex.
  meta::Superblock sb;
  auto array_uuid = meta::Uuid::generate();
  if (!array_uuid) return array_uuid.status();
  sb.array_uuid = *array_uuid;
  sb.level = create.level;
  sb.member_count = n;
  sb.strip_bytes = create.strip_bytes;
  sb.data_offset = data_offset;
  sb.data_size = data_size;
  sb.journal_offset = journal_offset;
  sb.journal_bytes = *journal_bytes;
  sb.journal_epoch = *journal_bytes != 0 ? 1 : 0;
  sb.name = create.name;
  sb.settings = *settings;
  sb.ctime_ns = wall_clock_ns();
  sb.array_flags = 0;  // open: not clean until stop()
  for (std::uint32_t m = 0; m < n; ++m) {
    auto u = meta::Uuid::generate();
    if (!u) return u.status();
    sb.members[m].uuid = *u;
    sb.members[m].state = meta::MemberState::kActive;
  }
  sb.member_uuid = sb.members[0].uuid;
  GRAID_RETURN_IF_ERROR(meta::validate(sb));
  state->events.start(options.observer, sb.name, sb.array_uuid.to_string());
  sb.events = 0;  // write_superblocks_locked() makes it 1
  {
    MutexLock guard(state->control_mutex);
    state->sb = sb;
  }
  state->members.assign(std::move(members));

  if (geometry->redundancy() != Redundancy::kNone) {
    const auto live = live_members(*state);
    meta::BitmapParams params;
    params.array_uuid = sb.array_uuid.bytes;
    params.metadata_timeout = state->metadata_timeout;
    params.data_offset = sb.bitmap_area_end();
    params.data_size = data_size;
    params.region_bytes = create.bitmap_region_bytes;
    params.events_cleared = 1;  // the first superblock's events: nothing was cleared before it
    auto bitmap = meta::WriteIntentBitmap::create_fresh(live, params);
    if (!bitmap) return bitmap.status();
    GRAID_RETURN_IF_ERROR(bitmap->write_all());
    state->bitmap.emplace(std::move(*bitmap));
  }
  state->journal_policy.store(create.settings.journal_policy);
  if (sb.journal_bytes != 0) {
    state->journal = std::make_unique<Journal>(n, sb.journal_offset, sb.journal_bytes,
                                               sb.array_uuid.bytes, sb.journal_epoch);
    MutexLock guard(state->control_mutex);
    state->activate_journal();  // recorded by the first superblock update below
  }
  // Initialisation: parity (or mirror copies) must agree with whatever the members hold, or the
  // first read-modify-write carries garbage parity forward and the first reconstruction returns
  // wrong data. Members known to read zeroes need nothing: zeroes are consistent at every level.
  InitMethod method = InitMethod::kNone;
  if (geometry->redundancy() != Redundancy::kNone && !create.assume_clean) {
    const bool all_zero = std::ranges::all_of(state->members.snapshot(), [&](const auto& m) {
      return m->reads_zeroes(data_offset, data_size);
    });
    method = all_zero              ? InitMethod::kKnownZero
             : create.zero_members ? InitMethod::kZeroed
                                   : InitMethod::kResync;
  }
  {
    // Recorded with the first superblock update below (a zeroing that falls back to a re-sync
    // records that with the last).
    MutexLock guard(state->control_mutex);
    state->sb.init_method = init_method_code(method);
  }
  const ArrayEventCounts init_counts = byte_counts(*geometry, data_size);
  // In the background (Array::initialise), only a re-sync: zeroing is quick where it is cheap,
  // and where it is not (no write-zeroes) it falls back to a re-sync anyway.
  const bool background = create.background_init && method == InitMethod::kResync;
  if (method == InitMethod::kZeroed || method == InitMethod::kResync) {
    if (!background) {
      state->emit(ArrayEventKind::kInitStarted, std::nullopt, std::string(init_method_name(method)),
                  init_counts);
    }
    // Recorded first: a crash before it ends leaves init_checkpoint set, and the array finishes
    // the job (Array::initialise) instead of trusting unsynced parity.
    MutexLock guard(state->control_mutex);
    state->sb.init_checkpoint = 0;
    GRAID_RETURN_IF_ERROR(state->write_superblocks_locked());
  }
  if (method == InitMethod::kZeroed) {
    for (std::uint32_t m = 0; m < n && method == InitMethod::kZeroed; ++m) {
      Status st = state->members[m]->zero_range(data_offset, data_size);
      if (st.code() == Errc::kUnsupported) {
        spdlog::info("graid: {}: {}; initialising by re-sync instead", state->members[m]->path(),
                     st.message());
        method = InitMethod::kResync;
        MutexLock guard(state->control_mutex);
        state->sb.init_method = init_method_code(method);
      } else if (!st) {
        return st;
      }
    }
    for (std::uint32_t m = 0; m < n && method == InitMethod::kZeroed; ++m) {
      GRAID_RETURN_IF_ERROR(state->members[m]->flush_sync());
    }
  }
  if (background) {
    state->init_done.store(0, std::memory_order_release);
  } else {
    if (method == InitMethod::kResync) GRAID_RETURN_IF_ERROR(graid::initialise(*state, 0));
    MutexLock guard(state->control_mutex);
    state->sb.init_checkpoint = std::nullopt;
    GRAID_RETURN_IF_ERROR(state->write_superblocks_locked());
  }
  state->init_method = method;
  if (!background && (method == InitMethod::kZeroed || method == InitMethod::kResync)) {
    state->emit(ArrayEventKind::kInitFinished, std::nullopt, std::string(init_method_name(method)),
                init_counts);
  }
  const std::string started =
      fmt::format("created {} array '{}' ({}) on {} members, strip {} KiB, {} bytes; {}",
                  raid_level_name(create.level), create.name, sb.array_uuid.to_string(), n,
                  strip / 1024, state->capacity,
                  background ? std::string("initialising in the background")
                             : std::string(init_method_name(method)));
  spdlog::info("graid: {}", started);
  state->emit(ArrayEventKind::kStarted, std::nullopt, started);
  return std::unique_ptr<Array>(new Array(std::move(state)));
}

}  // namespace graid
