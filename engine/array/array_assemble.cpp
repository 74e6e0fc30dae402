// Array::assemble: choosing the superblock copy to trust, mapping devices to member slots,
// refusing what cannot be assembled safely, and re-syncing after an unclean stop.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "array/array_settings.h"
#include "array/background_resync.h"
#include "array/consistency.h"
#include "array/device_checks.h"
#include "array/journal_replay.h"
#include "array/superblock_io.h"
#include "state/array_state.h"

namespace graid {

namespace {

// The members a dirty degraded start lacks: those failed or missing, and those being rebuilt
// (whose strips above their checkpoint must come from parity too).
std::vector<std::string> missing_or_rebuilding(const Array::State& state,
                                               const meta::Superblock& sb,
                                               const AssembleReport& rep) {
  std::vector<std::string> out = rep.failed_members;
  for (std::uint32_t m = 0; m < state.members.size(); ++m) {
    if (!state.is_rebuilding(m)) continue;
    out.push_back(fmt::format("{} (being rebuilt, {} of {} bytes done)", state.members[m]->path(),
                              sb.members[m].rebuild_offset, sb.data_size));
  }
  return out;
}

struct Copies {
  std::vector<meta::Superblock> sb;
  std::vector<std::size_t> device_of;  // index into the devices
};

// Decodes every device's superblock; devices without a readable one are not members.
Result<Copies> read_copies(const std::vector<std::unique_ptr<MemberDevice>>& devices) {
  Copies out;
  std::string unreadable;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    auto sb = read_superblock(*devices[i]);
    if (!sb) {
      unreadable += fmt::format("\n  {}: {}", devices[i]->path(), sb.status().to_string());
      continue;
    }
    out.sb.push_back(std::move(*sb));
    out.device_of.push_back(i);
  }
  if (out.sb.empty()) {
    return make_error(Errc::kNotFound, "no graid superblock on any of the {} devices:{}",
                      devices.size(), unreadable);
  }
  return out;
}

std::string member_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

// A hot replace the superblocks record (hot_replace.cpp) resumes when its device is here and the
// role it copies is active: from its checkpoint, or after an unclean stop from below the first
// region the bitmap marks dirty (a write in flight at the crash may have reached only one of the
// two devices). Otherwise the record is dropped and the device stays a hot spare in its slot.
void resume_replace_locked(Array::State& s, bool was_clean) REQUIRES(s.control_mutex) {
  if (!s.sb.replace) return;
  const meta::ReplaceRecord r = *s.sb.replace;
  const auto n = static_cast<std::uint32_t>(s.members.size());
  std::string why;
  if (r.events != s.sb.events) {
    why = "a build that does not know hot replace has updated the array since";
  } else if (r.slot - n >= s.spares.size() || !s.spares[r.slot - n]) {
    why = "its device is missing";
  } else if (s.is_failed(r.role)) {
    why = fmt::format("member {} is not active", r.role);
  }
  if (!why.empty()) {
    spdlog::warn(
        "graid: array '{}': the hot replace of member {} does not resume ({}); slot {} "
        "stays a hot spare",
        s.name, r.role, why, r.slot);
    s.sb.replace.reset();
    return;
  }
  const std::uint64_t strip = s.geometry.strip_bytes();
  std::uint64_t copied = r.copied / strip;
  if (!was_clean && s.bitmap) {
    for (const auto& range : s.bitmap->dirty_ranges())
      copied = std::min(copied, range.first / strip);
  }
  s.replacement_owner = std::move(s.spares[r.slot - n]);
  s.replacement_uuid = s.sb.members[r.slot].uuid;
  s.replace_copied.store(copied, std::memory_order_release);
  s.replace_broken.store(false, std::memory_order_release);
  s.replacement.store(s.replacement_owner.get(), std::memory_order_release);
  s.replace_member.store(r.role, std::memory_order_seq_cst);
  spdlog::info("graid: array '{}': hot replace of member {} by {} resumes at {} MiB{}", s.name,
               r.role, s.replacement_owner->path(), (copied * strip) >> 20,
               copied * strip < r.copied ? " (below the regions written around the crash)" : "");
}

}  // namespace

Result<std::unique_ptr<Array>> Array::assemble(std::vector<std::unique_ptr<MemberDevice>> devices,
                                               const ArrayOptions& options,
                                               const AssembleOptions& assemble,
                                               AssembleReport* report) {
  AssembleReport local;
  AssembleReport& rep = report ? *report : local;
  rep = AssembleReport{};
  GRAID_RETURN_IF_ERROR(refuse_same_storage(devices));
  auto read = read_copies(devices);
  if (!read) return read.status();
  const std::vector<meta::Superblock>& copies = read->sb;
  const std::vector<std::size_t>& device_of = read->device_of;
  auto path_of = [&](std::size_t copy) -> const std::string& {
    return devices[device_of[copy]]->path();
  };

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
                        path_of(i), copies[i].array_uuid.to_string(), array_uuid.to_string());
    }
  }
  auto newest = meta::pick_newest(copies, array_uuid);
  if (!newest) return newest.status();
  meta::Superblock sb = copies[newest->newest];
  // Whether the write-hole journal covered every partial-stripe write up to the stop: the
  // policy said always, or degraded-only and the array was already degraded (a member recorded
  // not active) before it stopped.
  const JournalPolicy policy_on_disk = array_settings(sb.settings).journal_policy;
  const bool degraded_on_disk =
      std::any_of(sb.members.begin(), sb.members.begin() + sb.member_count,
                  [](const meta::MemberEntry& e) { return e.state != meta::MemberState::kActive; });
  // A re-sync left pending by an earlier run (sb.resync_checkpoint) covers stripes written
  // before this run's journal records: the journal does not make those whole.
  // From minor 4 the superblocks say it (journal_covered): a journal that turned on while
  // updates without a record were in flight (a failure under degraded-only) covers everything
  // only once those have finished. Older minors did not record it: the policy decides, as then.
  const bool journal_covered =
      sb.journal_bytes != 0 && !sb.resync_checkpoint.has_value() &&
      (sb.minor_version >= 4
           ? sb.journal_covered()
           : policy_on_disk == JournalPolicy::kAlways ||
                 (policy_on_disk == JournalPolicy::kDegradedOnly && degraded_on_disk));
  auto geometry = sb.geometry();
  if (!geometry) return geometry.status();
  const std::uint32_t n = sb.member_count;
  if (geometry->parity_strips() > 0 && options.parity == nullptr) {
    return make_error(Errc::kInvalidArgument, "{} needs a parity backend",
                      raid_level_name(sb.level));
  }

  // Split brain: refuse unless forced, then trust the half with the most events.
  const auto signs = meta::find_split_brain(copies, *newest);
  for (const auto& sign : signs) {
    const std::size_t holder =
        *std::find_if(newest->in_sync.begin(), newest->in_sync.end(),
                      [&](std::size_t j) { return newest->slot_of[j] == sign.slot; });
    const std::string what = fmt::format(
        "split brain in array '{}': {} (member {}, events {}) records member {} as failed, while "
        "{} (member {}, events {}) ran on and records member {} as failed: the two ran apart",
        sb.name, path_of(sign.copy), copies[sign.copy].member_index, copies[sign.copy].events,
        sign.slot, path_of(holder), sign.slot, copies[holder].events,
        copies[sign.copy].member_index);
    if (!assemble.force) {
      return make_error(Errc::kCorrupt,
                        "{}. Nothing was changed. Assemble only the members of the half to keep, "
                        "or force to keep the half with the most events ({} events) and drop "
                        "what the other wrote since the split",
                        what, newest->events);
    }
    rep.overrides.push_back(what + "; kept the half with the most events");
  }

  auto state = std::make_unique<State>(*geometry);
  state->name = sb.name;
  state->events.start(options.observer, sb.name, sb.array_uuid.to_string());
  state->parity = options.parity;
  state->async_parity = options.async_parity;
  state->job_parity = options.job_parity != nullptr ? options.job_parity : options.async_parity;
  state->host_memory = options.host_memory;
  state->bitmap_clear_interval = options.bitmap_clear_interval;
  state->metadata_timeout = options.metadata_timeout;
  state->data_offset = sb.data_offset;
  state->data_size = sb.data_size;
  state->init_method = init_method_of(sb.init_method);
  state->capacity = geometry->data_capacity(sb.data_size);
  state->init_member_flags(n);
  state->members.resize(n);
  const std::uint64_t needed = sb.data_offset + sb.data_size;
  std::vector<std::string> too_small(n);
  auto take = [&](std::size_t copy) {
    const std::uint32_t slot = newest->slot_of[copy];
    if (slot >= n || state->members[slot]) return false;
    std::unique_ptr<MemberDevice>& dev = devices[device_of[copy]];
    if (dev->size() < needed) {
      too_small[slot] = fmt::format("{} (too small: {} bytes, the array needs {})", dev->path(),
                                    dev->size(), needed);
      return false;
    }
    state->members.set(slot, std::move(dev));
    return true;
  };
  for (std::size_t i : newest->in_sync)
    take(i);
  // Hot spares that are as new as the array: kept for rebuild. Absent ones keep their slot.
  // Published with sb below, under the control mutex.
  std::vector<std::shared_ptr<MemberDevice>> spares(sb.spare_count);
  for (std::size_t i : newest->in_sync) {
    const std::uint32_t slot = newest->slot_of[i];
    std::unique_ptr<MemberDevice>& dev = devices[device_of[i]];
    if (slot < n || slot >= n + sb.spare_count || !dev || dev->size() < needed ||
        sb.members[slot].state != meta::MemberState::kSpare ||
        sb.members[slot].uuid != copies[i].member_uuid) {
      continue;
    }
    spares[slot - n] = std::move(dev);
  }
  for (std::size_t i : newest->behind)
    rep.behind_members.push_back(state->members[newest->slot_of[i]]
                                     ? state->members[newest->slot_of[i]]->path()
                                     : path_of(i));
  auto mark_unusable = [&] {
    state->failed_count.store(0);
    for (std::uint32_t m = 0; m < n; ++m) {
      const bool usable =
          state->members[m] != nullptr && sb.members[m].state == meta::MemberState::kActive;
      state->failed[m].store(usable ? 0 : 1);
      if (!usable) state->failed_count.fetch_add(1);
    }
  };
  mark_unusable();

  // Forced: take stale members back, newest first, until the array can start.
  std::vector<std::size_t> stale = newest->stale;
  std::sort(stale.begin(), stale.end(),
            [&](std::size_t a, std::size_t b) { return copies[a].events > copies[b].events; });
  const bool split = !signs.empty();
  std::vector<std::pair<std::uint32_t, std::string>> taken_back;  // told once assembly goes on
  for (std::size_t i : stale) {
    if (!assemble.force || !state->array_failed() || split) break;
    const std::uint32_t slot = copies[i].member_index;
    if (slot >= n || sb.members[slot].uuid != copies[i].member_uuid) continue;
    if (!take(i)) continue;
    sb.members[slot].state = meta::MemberState::kActive;
    rep.overrides.push_back(fmt::format(
        "took back {} (member {}) although its superblock is {} events behind: its data may be "
        "out of date",
        state->members[slot]->path(), slot, newest->events - copies[i].events));
    mark_unusable();
    taken_back.emplace_back(slot, rep.overrides.back());
  }
  std::vector<std::string> stale_in(n);  // the stale device of each role, where one was given
  for (std::size_t i : newest->stale) {
    if (!devices[device_of[i]]) continue;
    rep.stale_members.push_back(path_of(i));
    const std::uint32_t slot = copies[i].member_index;
    if (slot < n && sb.members[slot].uuid == copies[i].member_uuid) stale_in[slot] = path_of(i);
  }
  for (std::uint32_t m = 0; m < n; ++m) {
    if (!state->is_failed(m)) continue;
    meta::MemberEntry& entry = sb.members[m];
    if (entry.state == meta::MemberState::kRebuilding && state->members[m]) {
      // Valid below its checkpoint (the rebuild flushed it before recording that); the rebuild
      // goes on from there (Array::rebuild).
      state->rebuilt[m].store(entry.rebuild_offset / sb.strip_bytes);
      state->rebuilding[m].store(1);
      continue;
    }
    if (entry.state == meta::MemberState::kRemoved) continue;
    rep.failed_members.push_back(!too_small[m].empty() ? too_small[m]
                                 : state->members[m]   ? state->members[m]->path()
                                 : !stale_in[m].empty()
                                     ? fmt::format("slot {} (stale: {})", m, stale_in[m])
                                     : fmt::format("slot {} (missing)", m));
    rep.failed_roles.push_back(m);
    sb.members[m].state = meta::MemberState::kFailed;
  }
  if (state->array_failed()) {
    return make_error(Errc::kIoError,
                      "cannot assemble {} array '{}': {} of {} members missing, stale or failed "
                      "(failed or missing: {}; stale: {}). Nothing was changed{}",
                      raid_level_name(sb.level), sb.name, state->failed_count.load(), n,
                      member_list(rep.failed_members), member_list(rep.stale_members),
                      rep.stale_members.empty() || assemble.force
                          ? ""
                          : "; force takes stale members back, at the risk of stale data");
  }
  if (state->failed_count.load() > 0 && !assemble.allow_degraded) {
    return make_error(Errc::kBusy,
                      "array '{}' would start degraded ({} members missing: {}); nothing was "
                      "changed",
                      sb.name, state->failed_count.load(), member_list(rep.failed_members));
  }
  rep.was_clean = sb.clean();
  rep.events = sb.events;
  auto logical_block = array_logical_block(state->members.snapshot(), sb.strip_bytes);
  if (!logical_block) return logical_block.status();
  state->logical_block = *logical_block;
  state->read_errors.emplace(n, options.max_read_errors);

  if (geometry->redundancy() != Redundancy::kNone) {
    const auto live = live_members(*state);
    meta::BitmapParams params;
    params.array_uuid = sb.array_uuid.bytes;
    params.metadata_timeout = state->metadata_timeout;
    params.data_offset = sb.bitmap_area_end();
    params.data_size = sb.data_size;
    auto bitmap = meta::WriteIntentBitmap::load(live, params);
    if (!bitmap) return bitmap.status();
    state->bitmap.emplace(std::move(*bitmap));
  }
  {
    MutexLock guard(state->control_mutex);
    state->sb = sb;
    state->spares = std::move(spares);
    state->publish_bad_ranges_locked();
  }
  // A dirty RAID5/6 with a data strip missing in a dirty region: the write hole.
  if (!rep.was_clean && state->bitmap && geometry->redundancy() == Redundancy::kParity &&
      state->failed_count.load() > 0) {
    for (const auto& [offset, length] : state->bitmap->dirty_ranges()) {
      rep.unsynced_stripes += count_unsyncable_stripes(*state, offset, length);
    }
    if (journal_covered) {
      // The journal replay below makes every stripe written around the crash whole again.
      rep.unsynced_stripes = 0;
    }
    if (rep.unsynced_stripes > 0 && !assemble.start_dirty_degraded && !assemble.force) {
      return make_error(
          Errc::kBusy,
          "array '{}' was not stopped cleanly and is missing {}: {} stripes written around the "
          "crash may have parity that does not match their data, and the missing strips in them "
          "cannot be rebuilt reliably (the RAID5/6 write hole). Nothing was changed. Bring the "
          "missing members back, or start it dirty and degraded (start_dirty_degraded) and check "
          "the data those stripes hold",
          sb.name, member_list(missing_or_rebuilding(*state, sb, rep)), rep.unsynced_stripes);
    }
    if (rep.unsynced_stripes > 0) {
      rep.overrides.push_back(fmt::format(
          "started dirty and degraded: {} stripes could not be re-synced", rep.unsynced_stripes));
    }
  }
  for (const auto& o : rep.overrides) {
    spdlog::warn("graid: array '{}': override: {}", sb.name, o);
    state->emit(ArrayEventKind::kAssemblyOverride, std::nullopt, o);
  }
  for (auto& [slot, why] : taken_back)
    state->emit(ArrayEventKind::kMemberBack, slot, std::move(why));

  // The write-hole journal: after an unclean stop its records make the stripes written around
  // the crash whole, before anything reads them (resync included).
  if (!rep.was_clean && sb.journal_bytes != 0) {
    auto replayed = replay_journal(*state, sb);
    if (!replayed) return replayed.status();
    rep.journal_records = replayed->records;
    if (replayed->records > 0) {
      const std::string what = fmt::format(
          "replayed {} write-hole journal records ({} bytes written home, {} strips of members "
          "that take no writes skipped)",
          replayed->records, replayed->bytes, replayed->skipped_strips);
      spdlog::warn("graid: array '{}': {}", sb.name, what);
      state->emit(ArrayEventKind::kJournalReplayed, std::nullopt, what);
    }
  }

  // The regions the bitmap marks, re-synced by Array::resync() while the array is in use.
  const bool background_resync =
      !rep.was_clean && assemble.background_resync && state->bitmap.has_value();
  if (background_resync) rep.resync_pending_bytes = plan_background_resync(*state);

  // Open the array: not clean until stop(), and record any members found missing.
  std::optional<std::uint64_t> init_checkpoint;
  {
    MutexLock guard(state->control_mutex);
    if (rep.resync_pending_bytes > 0) {
      state->sb.resync_checkpoint =
          state->resync_done.load(std::memory_order_relaxed) * geometry->strip_bytes();
    }
    resume_replace_locked(*state, rep.was_clean);
    // Records written before now are never replayed again: a new epoch.
    if (state->sb.journal_bytes != 0) ++state->sb.journal_epoch;
    state->sb.array_flags &= ~meta::kArrayClean;
    state->reported_health = state->health();  // kStarted reports it
    // The journal, on if the policy says so with the array as it is: no update is in flight yet,
    // so it covers every one from here (sb.journal_covered, recorded just below).
    state->journal_covered = false;
    state->journal_policy.store(array_settings(state->sb.settings).journal_policy);
    if (state->sb.journal_bytes != 0 && geometry->parity_strips() > 0) {
      state->journal =
          std::make_unique<Journal>(n, state->sb.journal_offset, state->sb.journal_bytes,
                                    state->sb.array_uuid.bytes, state->sb.journal_epoch);
      state->activate_journal();
    }
    GRAID_RETURN_IF_ERROR(state->write_superblocks_locked());
    init_checkpoint = state->sb.init_checkpoint;
  }
  if (init_checkpoint.has_value() && geometry->redundancy() != Redundancy::kNone) {
    // An initialisation cut short (by a crash, or a stop of a background one): pending until
    // Array::initialise() finishes it; until then no write trusts the parity above it.
    spdlog::info("graid: array '{}': initialisation pending from member byte {}", sb.name,
                 *init_checkpoint);
    state->init_done.store(std::min(*init_checkpoint, sb.data_size) / geometry->strip_bytes(),
                           std::memory_order_release);
  }
  if (rep.resync_pending_bytes > 0) {
    spdlog::info("graid: array '{}': {} bytes per member to re-sync in the background", sb.name,
                 rep.resync_pending_bytes);
  } else if (state->bitmap && !rep.was_clean && !background_resync) {
    // After a crash the bitmap names the regions that may have writes half done. (After a clean
    // stop it names only what a member missed while the array ran degraded: kept for its re-add,
    // neither re-synced nor cleared.)
    std::uint64_t unsynced = 0;
    const auto dirty = state->bitmap->dirty_ranges();
    const bool resync = !dirty.empty();
    if (resync) {
      std::uint64_t dirty_bytes = 0;
      for (const auto& range : dirty)
        dirty_bytes += range.second;
      state->emit(ArrayEventKind::kResyncStarted, std::nullopt,
                  fmt::format("re-syncing {} regions the write-intent bitmap marks", dirty.size()),
                  byte_counts(*geometry, dirty_bytes));
    }
    for (const auto& [offset, length] : dirty) {
      auto synced = resync_range(*state, offset, length, &unsynced);
      if (!synced) return synced.status();
      rep.resynced_bytes += *synced;
    }
    rep.unsynced_stripes = unsynced;
    if (resync) {
      ArrayEventCounts done = byte_counts(*geometry, rep.resynced_bytes);
      done.unsynced_stripes = unsynced;
      state->emit(ArrayEventKind::kResyncFinished, std::nullopt,
                  fmt::format("re-synced {} bytes per member, {} stripes not re-synced",
                              rep.resynced_bytes, unsynced),
                  done);
    }
    const std::vector<Status> flushed =
        flush_members(writing_members(*state), state->metadata_timeout);
    for (std::uint32_t m = 0; m < n; ++m) {
      if (const Status& st = flushed[m]; !st) {
        Status fs = state->fail_member(m, fmt::format("flush after re-sync: {}", st.message()));
        (void)fs;
        if (state->array_failed()) return st;
      }
    }
    GRAID_RETURN_IF_ERROR(
        state->bitmap->clear_idle(state->sb_events.load(std::memory_order_acquire)));
    MutexLock guard(state->control_mutex);
    if (state->sb.resync_checkpoint.has_value()) {
      // A background re-sync an earlier run left pending: done now with the rest.
      state->sb.resync_checkpoint.reset();
      GRAID_RETURN_IF_ERROR(state->write_superblocks_locked());
    }
  }
  std::uint64_t events = 0;
  {
    MutexLock guard(state->control_mutex);
    events = state->sb.events;
  }
  const std::string started =
      fmt::format("assembled {} array '{}' ({}), {}, {} of {} members, events {}{}",
                  raid_level_name(sb.level), sb.name, sb.array_uuid.to_string(),
                  array_health_name(state->health()), n - state->failed_count.load(), n, events,
                  rep.was_clean ? "" : fmt::format(", re-synced {} bytes", rep.resynced_bytes));
  spdlog::info("graid: {}", started);
  // The re-add baseline: as the bitmap records it (raised by the clear after a re-sync above,
  // and by every clear since it was created); where no header records it (an older build wrote
  // them), the events now, so every device that failed before is re-added in full.
  state->events_at_bitmap_clear.store(events, std::memory_order_release);
  state->note_bitmap_cleared();
  state->emit(ArrayEventKind::kStarted, std::nullopt, started);
  return std::unique_ptr<Array>(new Array(std::move(state)));
}

}  // namespace graid
