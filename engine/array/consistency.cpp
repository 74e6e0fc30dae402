#include "array/consistency.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "array/stripe_access.h"
#include "level/level_module.h"
#include "stripe/stripe_range_lock.h"

namespace graid {

StripeOutcome process_stripe_failing_members(Array::State& s, StripeAccess& access, StripeTask task,
                                             std::uint64_t stripe, std::string_view job) {
  const Geometry& g = s.geometry;
  StripeOutcome r = g.module().process_stripe(task, g, access, stripe);
  for (std::uint32_t round = 0; !r.status && r.failed_member < g.members() &&
                                r.status.code() == Errc::kIoError && round < g.members();
       ++round) {
    const std::uint32_t bad = r.failed_member;
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
