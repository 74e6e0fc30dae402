// RAID level modules: everything that differs between RAID levels, behind one interface, one
// file per level (raid0.cpp ... raid6.cpp), registered in one table (level_registry.cpp). As
// SPDK's raid_bdev_module: adding a level means writing its file and adding it to the table.
//
// A module answers, for an array of n members:
//   - which member counts it allows (min_members, even_members);
//   - its shape: data strips per stripe, parity strips, copies, and how it keeps redundancy
//     (Redundancy: none, mirror copies, parity), which picks the write path the stripe engine
//     takes (direct member I/O, mirrored writes, parity read-modify-write / reconstruct-write);
//   - its layout: which member holds data strip d (copy c) of stripe s, and what a member holds
//     at a member offset (the inverse);
//   - which sets of failed members it survives (RAID10 survives one failure per mirror pair);
//   - the background-job hook: one stripe of a window processed with blocking I/O (resync,
//     check) through a StripeAccess, which the array gives it with the window locked.
// Geometry (graid/geometry.h) is the public face of a module; the engine calls modules through
// it and through level_module().
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "graid/buffer.h"
#include "graid/geometry.h"
#include "graid/parity.h"
#include "graid/status.h"

namespace graid {

// Members a background job works with on one stripe, with blocking I/O. Offsets are stripes; the
// access maps them to device offsets (data area start + stripe * strip). The job holds the
// stripes it works on locked.
class StripeAccess {
 public:
  virtual ~StripeAccess() = default;
  // Whether `member` holds nothing usable in `stripe` (neither read nor written there).
  virtual bool is_failed(std::uint32_t member, std::uint64_t stripe) const noexcept = 0;
  // Whether `member` is being rebuilt: written by kRebuild, never read, in every stripe the job
  // gives the module. Such a member is not is_failed().
  virtual bool is_stale(std::uint32_t /*member*/) const noexcept { return false; }
  // One strip of `member` at `stripe`, into or from `buf` (strip bytes).
  virtual Status read_strip(std::uint32_t member, std::uint64_t stripe,
                            std::span<std::byte> buf) = 0;
  virtual Status write_strip(std::uint32_t member, std::uint64_t stripe,
                             std::span<const std::byte> buf) = 0;
  // The array's parity backend; null for levels without parity.
  virtual ParityBackend* parity() noexcept = 0;
  // One strip-sized scratch buffer per member, for the module's use during one call.
  virtual std::span<AlignedBuffer> scratch() noexcept = 0;
};

// What a background job does to one stripe.
enum class StripeTask : std::uint8_t {
  kResync,   // make parity (or every mirror copy) agree with the data
  kCheck,    // report whether parity (or every mirror copy) agrees with the data; writes nothing
  kRebuild,  // write the strips of the stale members (is_stale), made from the others
  // kCheck, and where parity (or a copy) disagrees, rewrite what is wrong: the one bad strip when
  // parity locates it (RAID6: locate_parity_mismatch) or a majority of copies outvotes it (three
  // or more copies), else parity from the data / every copy from the first live one (as md).
  kRepair,
};

// Outcome of one stripe.
struct StripeOutcome {
  Status status;                      // first error; ok otherwise
  std::uint32_t failed_member = ~0u;  // the member whose read or write failed, if any
  bool skipped = false;               // could not be processed with the members failed now
                                      // (kRebuild: too few members left to rebuild from)
  bool inconsistent = false;          // kCheck: parity or a mirror copy disagrees with the data
  std::string repaired;               // kRepair: what was rewritten, for logs and events

  bool failed_read = false;           // the failure was a read of failed_member (media error?)

  // Records the outcome of member `m`'s I/O: the first failure wins. True while all went well.
  bool member_io(std::uint32_t m, Status st) {
    if (!st && status.is_ok()) {
      status = std::move(st);
      failed_member = m;
    }
    return status.is_ok();
  }
  // The same for a read, which a job may correct (consistency.h).
  bool member_read(std::uint32_t m, Status st) {
    if (!st && status.is_ok()) failed_read = true;
    return member_io(m, std::move(st));
  }
};

class LevelModule {
 public:
  virtual ~LevelModule() = default;

  virtual RaidLevel level() const noexcept = 0;
  // "raid5"
  virtual std::string_view name() const noexcept = 0;
  virtual std::uint32_t min_members() const noexcept = 0;
  virtual bool even_members() const noexcept { return false; }
  virtual Redundancy redundancy() const noexcept = 0;

  // Shape, for n members.
  virtual std::uint32_t data_strips(std::uint32_t n) const noexcept = 0;
  virtual std::uint32_t parity_strips() const noexcept { return 0; }
  virtual std::uint32_t copies(std::uint32_t /*n*/) const noexcept { return 1; }
  // Members that may fail, whichever they are, with no data lost.
  virtual std::uint32_t failures_tolerated(std::uint32_t n) const noexcept = 0;
  // True when every data byte is still readable with the members in `failed` (bit m: member m)
  // gone. Can hold beyond failures_tolerated() (RAID10: failures in different pairs).
  virtual bool survives(std::uint32_t n, std::uint64_t failed) const noexcept = 0;

  // Layout. REQUIRES: d < data_strips(n), copy < copies(n).
  virtual std::uint32_t data_member(std::uint32_t n, std::uint64_t stripe, std::uint32_t d,
                                    std::uint32_t copy) const noexcept = 0;
  // Parity strip `index` (0: P, 1: Q) of `stripe`. REQUIRES: index < parity_strips().
  virtual std::uint32_t parity_member(std::uint32_t n, std::uint64_t stripe,
                                      std::uint32_t index) const noexcept;
  // What `member` holds in stripe `place.stripe`: fills role, data_index and copy.
  virtual void place(std::uint32_t n, std::uint32_t member, MemberPlace& place) const noexcept = 0;

  // Background jobs: true when `stripe` can be resynced with the members in `failed` gone (every
  // data strip readable: parity levels need each data member, mirrors one copy of each strip).
  virtual bool can_resync(const Geometry& g, std::uint64_t stripe,
                          std::uint64_t failed) const noexcept = 0;
  // Processes one stripe. REQUIRES: the stripe locked against foreground writes.
  virtual StripeOutcome process_stripe(StripeTask task, const Geometry& g, StripeAccess& access,
                                       std::uint64_t stripe) const = 0;
};

// Shared implementations of process_stripe / can_resync (parity_stripe.cpp, mirror_stripe.cpp).
StripeOutcome process_parity_stripe(StripeTask task, const Geometry& g, StripeAccess& access,
                                    std::uint64_t stripe);
bool can_resync_parity_stripe(const Geometry& g, std::uint64_t stripe, std::uint64_t failed);
StripeOutcome process_mirror_stripe(StripeTask task, const Geometry& g, StripeAccess& access,
                                    std::uint64_t stripe);
bool can_resync_mirror_stripe(const Geometry& g, std::uint64_t stripe, std::uint64_t failed);

// A mirrored level (RAID1, RAID10): every copy written, background work by mirror_stripe.cpp.
class MirrorLevel : public LevelModule {
 public:
  Redundancy redundancy() const noexcept final { return Redundancy::kMirror; }
  bool can_resync(const Geometry& g, std::uint64_t stripe,
                  std::uint64_t failed) const noexcept final {
    return can_resync_mirror_stripe(g, stripe, failed);
  }
  StripeOutcome process_stripe(StripeTask task, const Geometry& g, StripeAccess& access,
                               std::uint64_t stripe) const final {
    return process_mirror_stripe(task, g, access, stripe);
  }
};

// The module of `level`. REQUIRES: a RaidLevel value is_valid_raid_level_value() accepts.
const LevelModule& level_module(RaidLevel level) noexcept;
// The module whose RaidLevel has numeric value `value`, or null (decoding untrusted bytes).
const LevelModule* find_level_module(std::uint32_t value) noexcept;
// Every registered module, in the table's order.
std::span<const LevelModule* const> level_modules() noexcept;

}  // namespace graid
