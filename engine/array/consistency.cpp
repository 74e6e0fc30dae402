#include "array/consistency.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "array/stripe_access.h"
#include "level/level_module.h"
#include "stripe/stripe_range_lock.h"

namespace graid {

namespace {

// Member `bad` could not be read in `stripe`, and redundancy cannot make its strip up: the
// logical blocks of it that do not read are lost, and so are the data blocks at the same rows of
// the stale members (which would be made from them). They are recorded lost first, then zeroed on
// `bad` (a rewrite, which also lets the drive remap them), so that the stripe, processed again,
// is consistent over zeroes there. False (the caller fails `bad`) when the zeroes cannot be
// written or the lost list is full.
bool record_lost_blocks(Array::State& s, ArrayStripeAccess& access, std::uint64_t stripe,
                        std::uint32_t bad, std::string_view job) {
  const Geometry& g = s.geometry;
  const std::uint32_t strip = g.strip_bytes();
  const std::uint32_t block = std::max<std::uint32_t>(s.logical_block, 512);
  const std::uint64_t at = s.device_offset(stripe * strip);
  auto buf = AlignedBuffer::allocate(block, 4096);
  if (!buf) return false;
  MemberDevice& device = *s.members[bad];
  std::vector<std::uint32_t> rows;  // offsets inside the strip of the blocks that do not read
  for (std::uint32_t row = 0; row < strip; row += block) {
    if (!device.read_sync(at + row, buf->span())) rows.push_back(row);
  }
  if (rows.empty()) return true;  // it reads now: process the stripe again
  std::vector<meta::BadRange> lost;
  auto lose = [&](std::uint32_t member, std::uint32_t row) {
    const MemberPlace place = g.place(member, stripe * strip + row);
    if (place.role == StripRole::kData) lost.push_back(meta::BadRange{place.array_offset, block});
  };
  for (const std::uint32_t row : rows) {
    lose(bad, row);
    for (std::uint32_t m = 0; m < g.members(); ++m)
      if (m != bad && access.is_stale(m)) lose(m, row);
  }
  const std::string why =
      fmt::format("{} of stripe {}: {} of its blocks unreadable", job, stripe, rows.size());
  if (Status st = s.add_lost_ranges(std::move(lost), bad, why); !st) {
    spdlog::error("graid: array '{}': member {}: {}", s.name, bad, st.message());
    return false;
  }
  std::memset(buf->data(), 0, block);
  for (const std::uint32_t row : rows) {
    if (!device.write_sync(at + row, buf->span())) return false;
  }
  return true;
}

// Member `bad` could not be read in `stripe` (a media error, as far as a blocking read can tell):
// the strip is reconstructed from the others and rewritten (and the stale members' strips made
// with it), or, where redundancy cannot do that, its unreadable blocks recorded lost. True when
// the stripe can be processed again; false when `bad` is to be failed (past its read-error limit,
// its rewrite failed, or the lost list is full).
bool correct_unreadable(Array::State& s, ArrayStripeAccess& access, std::uint64_t stripe,
                        std::uint32_t bad, std::string_view job) {
  const Geometry& g = s.geometry;
  if (!s.read_errors || s.read_errors->record(bad)) return false;
  const std::uint64_t stale = access.stale_mask();
  access.set_stale_mask(stale | std::uint64_t{1} << bad);
  StripeOutcome fix = g.module().process_stripe(StripeTask::kRebuild, g, access, stripe);
  access.set_stale_mask(stale);
  if (fix.status && !fix.skipped) {
    spdlog::warn(
        "graid: array '{}': member {} ({}): read error in stripe {} during the {}; "
        "reconstructed and rewritten ({} corrected on this member)",
        s.name, bad, s.members[bad]->path(), stripe, job, s.read_errors->total(bad));
    return true;
  }
  if (!fix.status) return false;
  return record_lost_blocks(s, access, stripe, bad, job);
}

}  // namespace

StripeOutcome process_stripe_failing_members(Array::State& s, ArrayStripeAccess& access,
                                             StripeTask task, std::uint64_t stripe,
                                             std::string_view job) {
  const Geometry& g = s.geometry;
  StripeOutcome r = g.module().process_stripe(task, g, access, stripe);
  for (std::uint32_t round = 0; !r.status && r.failed_member < g.members() &&
                                r.status.code() == Errc::kIoError && round < 2 * g.members();
       ++round) {
    const std::uint32_t bad = r.failed_member;
    if (r.failed_read && !access.is_stale(bad) && correct_unreadable(s, access, stripe, bad, job)) {
      r = g.module().process_stripe(task, g, access, stripe);
      continue;
    }
    (void)s.fail_member(bad, fmt::format("{} of stripe {}: {}", job, stripe, r.status.message()));
    if (s.array_failed() || access.is_stale(bad)) break;
    r = g.module().process_stripe(task, g, access, stripe);
  }
  return r;
}

std::uint64_t count_unsyncable_stripes(const Array::State& s, std::uint64_t member_offset,
                                       std::uint64_t len) {
  const Geometry& g = s.geometry;
  const std::uint32_t strip = g.strip_bytes();
  if (g.redundancy() == Redundancy::kNone || len == 0) return 0;
  const std::uint64_t first = member_offset / strip;
  const std::uint64_t last =
      std::min(g.stripes(s.data_size), (member_offset + len + strip - 1) / strip);
  std::uint64_t count = 0;
  for (std::uint64_t stripe = first; stripe < last; ++stripe) {
    std::uint64_t dead = 0;
    for (std::uint32_t m = 0; m < g.members(); ++m)
      dead |= s.dead_at(m, stripe) ? std::uint64_t{1} << m : 0;
    count += g.module().can_resync(g, stripe, dead) ? 0 : 1;
  }
  return count;
}

Result<std::uint64_t> resync_range(Array::State& s, std::uint64_t member_offset, std::uint64_t len,
                                   std::uint64_t* unsynced) {
  const Geometry& g = s.geometry;
  const std::uint32_t strip = g.strip_bytes();
  if (g.redundancy() == Redundancy::kNone || len == 0) return std::uint64_t{0};
  const std::uint64_t first = member_offset / strip;
  const std::uint64_t last =
      std::min(g.stripes(s.data_size), (member_offset + len + strip - 1) / strip);
  auto access = ArrayStripeAccess::make(s);
  if (!access) return access.status();
  std::uint64_t synced = 0, skipped = 0;
  for (std::uint64_t stripe = first; stripe < last; ++stripe) {
    StripeOutcome r =
        process_stripe_failing_members(s, *access, StripeTask::kResync, stripe, "re-sync");
    if (!r.status && s.array_failed()) {
      return make_error(Errc::kIoError, "array failed while re-syncing stripe {}: {}", stripe,
                        r.status.message());
    }
    if (!r.status) return r.status;
    if (r.skipped) {
      ++skipped;
      continue;
    }
    synced += strip;
  }
  if (skipped > 0) {
    spdlog::warn(
        "graid: array '{}': {} stripes could not be re-synced (a data member has "
        "failed); their parity is trusted as written",
        s.name, skipped);
  }
  if (unsynced != nullptr) *unsynced += skipped;
  return synced;
}

Status initialise(Array::State& s, std::uint64_t from) {
  // Checkpoints every 1/64 of the data area (at least 64 MiB apart): a crash costs at most that
  // much redone work, and the superblocks are not rewritten for every stripe.
  const std::uint64_t strip = s.geometry.strip_bytes();
  const std::uint64_t step =
      std::max<std::uint64_t>((s.data_size / 64 + strip - 1) / strip * strip, 64u << 20);
  for (std::uint64_t at = from / strip * strip; at < s.data_size;) {
    const std::uint64_t len = std::min(step, s.data_size - at);
    auto synced = resync_range(s, at, len);
    if (!synced) return synced.status();
    at += len;
    if (at < s.data_size) {
      MutexLock guard(s.control_mutex);
      s.sb.init_checkpoint = at;
      GRAID_RETURN_IF_ERROR(s.write_superblocks_locked());
    }
  }
  return Status::ok();
}

Result<std::uint64_t> count_inconsistent_stripes(Array::State& s) {
  const Geometry& g = s.geometry;
  if (g.redundancy() == Redundancy::kNone) return std::uint64_t{0};
  auto access = ArrayStripeAccess::make(s);
  if (!access) return access.status();
  // Window by window under stripe locks, so no write is half done on a stripe being read (a
  // read between a write's data and parity updates would see a false mismatch).
  StripeRangeLock window(s.locks);
  const std::uint64_t stripes = g.stripes(s.data_size);
  std::uint64_t bad = 0;
  for (std::uint64_t first = 0; first < stripes; first += kCheckWindowStripes) {
    window.lock(first, std::min(kCheckWindowStripes, stripes - first));
    for (std::uint64_t stripe = first; stripe < first + window.count(); ++stripe) {
      StripeOutcome r = g.module().process_stripe(StripeTask::kCheck, g, *access, stripe);
      if (!r.status) return r.status;
      bad += r.inconsistent ? 1 : 0;
    }
    window.unlock();
  }
  return bad;
}

}  // namespace graid
