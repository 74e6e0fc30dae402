// How many member I/Os one array request costs: the bridge from the raw capacity of the members
// (what io_uring gets from them directly) to the best the array could possibly do on them.
//
//   limit_iops = raw_member_iops / member_ios_per_array_io(...).total()
//
// where the raw baseline issues member I/Os of `io_bytes` with the read share `read_fraction()`.
#pragma once

#include <cstdint>

#include "graid/geometry.h"
#include "profiles.h"

namespace graid::bench {

struct MemberCost {
  double reads = 0;            // member reads per array request, averaged over the profile
  double writes = 0;           // member writes per array request
  std::uint32_t io_bytes = 0;  // size of each member I/O: their mean, in whole 4 KiB blocks

  double total() const noexcept { return reads + writes; }
  double read_fraction() const noexcept { return total() > 0 ? reads / total() : 0.0; }
};

// Member I/Os per array request of `profile` on `geometry`, with every member healthy.
//
// The request is cut at strip boundaries into pieces (the profiles' requests are powers of two
// aligned to their size, so every piece is a whole strip or a single range inside one strip).
// Counts are averaged over every alignment a request of that size can have relative to the
// stripe. Then, per piece:
//
//   reads            the data strip's member (mirrors: one copy for the whole request), and
//                    then merged as the engine's IoContext merges them: per member, contiguous
//                    pieces in one I/O of at most 1 MiB and 256 ranges, across gaps of at most
//                    IoContextOptions::merge_read_gap (parity strips read through).
//   RAID0 write      1 member write.
//   RAID1 write      n member writes (every member holds a copy).
//   RAID10 write     2 member writes (the mirror pair).
//   RAID5/6 write    per stripe touched, with t data pieces of k and p parity strips (1 or 2):
//     full stripe (t = k): k + p writes, no reads (parity from the new data alone);
//     otherwise the cheaper, by member I/Os, of
//       read-modify-write:  t + p reads (old data, old parity) + t + p writes;
//       reconstruct-write:  k - t reads (the untouched data)   + t + p writes.
//     So RAID5 4K random write on n=5 is RMW, 2 reads + 2 writes; RAID6 on n=5 (k=3) is
//     reconstruct-write, 2 reads + 3 writes; RAID5 on n=3 is reconstruct-write, 1 read + 2 writes.
//
// Sequential writes are costed as full-stripe writes whatever the request size: the engine
// coalesces adjacent writes that arrive together into whole stripes, and a sequential stream at
// the benchmark's queue depth keeps whole stripes in flight. That is the cheapest plan, so the
// limit stays an upper bound: member bytes are (k + p) / k per array byte for parity levels, 1
// for RAID0, n for RAID1 and 2 for RAID10. A request of a stripe or more puts its share of those
// bytes on each member contiguously (consecutive rows), so it costs one merged I/O per member
// (per MiB); a smaller one n/k writes of min(block, strip) per piece. Writes of several requests
// in flight together can coalesce and merge into larger member I/Os than these, so for
// sequential writes the limit errs low: a ratio above 1 there says the engine merged across
// requests, not that it beat its members.
//
// `io_bytes` is the mean size of these member I/Os (gaps read through included), which the raw
// baseline issues.
//
// A profile mixing reads and writes costs read_share * read cost + write_share * write cost.
MemberCost member_ios_per_array_io(const Geometry& geometry, const Profile& profile);

}  // namespace graid::bench
