// The write-intent bitmap: after an unclean stop, only the regions that had writes in flight need
// their parity (or mirror copies) re-synced, not the whole array.
//
// The member data area [0, data_size) (offsets relative to data_offset; a stripe row sits at the
// same offset on every member, so one map serves all members) is cut into regions of
// region_bytes, a power of two. One bit per region says "writes may have been in flight here".
//
// On disk, on every member, between the superblock and the data area:
//
//   byte 0        kBitmapOffset (8192)          +4096              data_offset
//   | superblock | (4 KiB free: future backup  | header | bit page 0 | bit page 1 | ... | data
//   |  4 KiB     |  superblock)                | 4 KiB  |   4 KiB    |   4 KiB    |     |
//
// A bit page holds kBitsPerPage bits, little-endian bit order: bit i of the page is bit (i % 8)
// of byte i / 8. Region r is bit r % kBitsPerPage of page r / kBitsPerPage. Bits at or beyond
// region_count are zero. The byte layout is in docs/on-disk-format.md ("Write-intent bitmap").
//
// Protocol (as md's bitmap): before a data write reaches any member, begin_write() makes sure the
// bits of the regions it touches are set *on stable storage on every live member*; end_write()
// only counts down. Bits are cleared later, in two phases, so that a region whose last write
// completed but may still sit in a volatile device cache is never cleared:
//
//   mark_clear_candidates()   remembers regions whose bit is set and have no write in flight
//   <caller flushes every live member>
//   clear_candidates()        clears and persists the bits of remembered regions that saw no
//                             begin_write() since the mark
//
// clear_idle() does both phases at once, for callers that already flushed after every write
// completed (clean stop, end of a resync with I/O quiesced).
//
// Invariant: a bit set in memory (what begin_write()'s lock-free fast path tests) is set on disk on
// every live member. Bits are set in memory only after the page holding them is on stable
// storage everywhere, and cleared in memory before the cleared page is written.
//
// Torn writes need no crc on bit pages: a page is rewritten only with bits being set (for
// regions whose data writes have not started yet) or cleared (for regions already safe); every
// other bit has the same value in the old and the new image. Whatever mix of old and new sectors
// a crash leaves, no region with a data write in flight reads as clear. Members that missed an
// update are covered by load(), which takes the union over all members.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "graid/member.h"
#include "graid/status.h"
#include "meta/bitmap_header.h"
#include "meta/metadata_io.h"

namespace graid::meta {

// ---- The bitmap ---------------------------------------------------------------------------------

// What create_fresh() and load() need to know about the array.
struct BitmapParams {
  ArrayUuidBytes array_uuid{};
  std::uint64_t data_offset = 0;  // from the superblock; the bitmap area ends here
  std::uint64_t data_size = 0;    // member data bytes (from the superblock)
  // create_fresh: 0 = choose_region_bytes(). load: 0 = take it from the members' headers;
  // otherwise headers with another value are rejected.
  std::uint64_t region_bytes = 0;
  // create_fresh: the re-add baseline of a new array (BitmapHeader::events_cleared): the event
  // count of its first superblock. Ignored by load().
  std::uint64_t events_cleared = 0;
  // A member whose bitmap write + flush takes longer than this is reported failed (kIoError in
  // `failed`), so a hung member costs one timeout, not a stalled array (meta/metadata_io.h).
  std::chrono::milliseconds metadata_timeout = kDefaultMetadataTimeout;
};

// A member the bitmap could not use or had to repair, and why.
struct BitmapMemberIssue {
  std::uint32_t member = 0;  // index into the members span
  Status status;
};

// What load() found.
struct BitmapLoadReport {
  std::uint64_t events = 0;  // highest event count among accepted headers
  // The re-add baseline the accepted headers record: the highest, or 0 (unknown) when any of
  // them records none (an older build rewrote it).
  std::uint64_t events_cleared = 0;
  std::vector<std::uint32_t> accepted;      // members whose bitmap went into the union
  std::vector<BitmapMemberIssue> rejected;  // unreadable, corrupt, foreign or mismatched layout
  std::vector<std::uint32_t> behind;        // accepted with a lower event count (missed a clear)
  std::vector<std::uint32_t> rewritten;     // members whose on-disk bitmap load() rewrote
};

// Thread-safe: begin_write()/end_write() may be called from any number of I/O threads at once,
// together with the other methods. Movable (not while in use), not copyable.
//
// Metadata I/O: every update writes its pages (and header) to all live members at once and waits
// once (run_on_members), so it costs one write + flush round trip whatever the member count; a
// member that does not finish within BitmapParams::metadata_timeout is reported failed. Only the
// bit pages an update writes are locked while it waits for members: begin_write() on a region in
// another page proceeds (its own page write goes out in parallel), and drop_member() never waits
// for member I/O, so the thread failing a hung member is not blocked by it.
//
// Members: with shared_ptrs the bitmap (and any metadata write still running in a hung member
// after its timeout) shares ownership of the devices. The raw-pointer overloads do not own them:
// the caller keeps the devices alive for as long as a write to them may run (past the bitmap's
// life if a member hung).
class WriteIntentBitmap {
 public:
  // A new, all-clear bitmap for a new array over `members` (index = member slot; nullptr = no
  // device in that slot). Nothing is written: call write_all() to put it on the members.
  // kInvalidArgument / kNoSpace for a layout validate_layout() refuses.
  static Result<WriteIntentBitmap> create_fresh(
      std::span<const std::shared_ptr<MemberDevice>> members, const BitmapParams& params);
  static Result<WriteIntentBitmap> create_fresh(std::span<MemberDevice* const> members,
                                                const BitmapParams& params);

  // Reads the bitmap from every non-null member, keeps the headers that match params (array
  // uuid, data_offset, data_size and, if given, region_bytes) and takes the union (OR) of their
  // bits, since a member may have missed updates before a crash. Members whose copy was
  // rejected or differs from the union are then rewritten with the union (header + differing
  // pages), so every live member holds every set bit again. kCorrupt (listing every member's
  // reason) when no member holds a usable bitmap; kCorrupt when accepted headers disagree on
  // region_bytes and params did not choose one; kIoError naming the member when a rewrite
  // fails (fail that member and load again without it). `report` (optional) says what was found.
  static Result<WriteIntentBitmap> load(std::span<const std::shared_ptr<MemberDevice>> members,
                                        const BitmapParams& params,
                                        BitmapLoadReport* report = nullptr);
  static Result<WriteIntentBitmap> load(std::span<MemberDevice* const> members,
                                        const BitmapParams& params,
                                        BitmapLoadReport* report = nullptr);

  WriteIntentBitmap(WriteIntentBitmap&&) noexcept;
  WriteIntentBitmap& operator=(WriteIntentBitmap&&) noexcept;
  ~WriteIntentBitmap();

  // Writes the header (with events + 1) and every bit page to every live member and flushes
  // them. Used after create_fresh() and to repair members. Returns the first error (kIoError
  // naming the member); every live member is attempted. `failed` (optional) receives the index
  // of each member that failed.
  Status write_all(std::vector<std::uint32_t>* failed = nullptr);

  // Declares a data write to member bytes [member_offset, member_offset + len) (relative to
  // data_offset): counts it in flight in every region it touches and, if any of those regions'
  // bits is clear, sets them and writes and flushes the affected bit pages on every live member
  // before returning. When every bit is already set (the common case) it takes no lock and does
  // no I/O. len 0 does nothing. kOutOfRange beyond data_size. kIoError naming the member when a
  // member fails to persist a page (`failed` receives the indices): then nothing stays counted
  // (do not call end_write()); drop_member() the failed member and call begin_write() again.
  Status begin_write(std::uint64_t member_offset, std::uint64_t len,
                     std::vector<std::uint32_t>* failed = nullptr);

  // Ends a write begun with a successful begin_write() of the same range. Only counts down:
  // the bits stay set until a clear (see the protocol above).
  void end_write(std::uint64_t member_offset, std::uint64_t len) noexcept;

  // Phase 1 of clearing during operation: remembers the regions whose bit is set and that have
  // no write in flight right now. Returns how many. The caller then flushes every live member
  // and calls clear_candidates().
  std::uint64_t mark_clear_candidates();

  // Phase 2: clears, in memory and on every live member (bit pages written and flushed, then the
  // header with events + 1), the bits of the regions remembered by the last
  // mark_clear_candidates() that have had no begin_write() since. REQUIRES: every live member
  // was flushed after mark_clear_candidates() returned. On a member error the bits stay clear in
  // memory (conservative: the disk has them set or clear) and their pages are rewritten by the
  // next clear; the error names the member.
  //
  // `sb_events`: the array's superblock event count now, the re-add baseline from here on. When
  // it is higher than events_cleared() (or that is unknown) and a bit is to be cleared, the header
  // recording it is written and flushed on every live member first, before any page: a crash
  // between the two leaves the baseline raised and the bits set, never bits cleared under an old
  // baseline.
  Status clear_candidates(std::uint64_t sb_events, std::vector<std::uint32_t>* failed = nullptr);

  // Both phases at once: clears and persists the bits of all regions with no write in flight.
  // REQUIRES: every live member was flushed after every write in those regions completed (clean
  // stop, or the end of a resync with writes quiesced). `sb_events` as for clear_candidates().
  Status clear_idle(std::uint64_t sb_events, std::vector<std::uint32_t>* failed = nullptr);

  // Pins every region whose bit is set now: no clear (clear_candidates, clear_idle) takes a
  // pinned bit, so it stays set on disk until unpinned. For a re-sync that runs in the
  // background: the regions it has yet to pass keep their bits through a stop or a crash, and
  // the next assembly re-syncs them again. Returns the regions pinned.
  std::uint64_t pin_dirty();
  // Unpins the regions that end at or below member byte `member_offset` (the re-sync has
  // passed them); data_size or more unpins every region. Their bits clear as usual from then on.
  // Regions kept by pin() stay pinned.
  void unpin_below(std::uint64_t member_offset);
  // Whether `region`'s bit is pinned, by pin_dirty() or by pin().
  bool is_pinned(std::uint64_t region) const noexcept;
  // Pins the region holding member byte `member_offset`, whose bit a write in flight has set:
  // its stripe is left inconsistent (a member refused its part of the write), and the bit must
  // stay set on disk until a re-sync passes the region after now. Only the next assembly's
  // re-sync is sure to (a background re-sync running now may have passed the region already,
  // or not cover it), so the pin holds for as long as this bitmap lives: unpin_below() leaves it.
  // Out of range: ignored.
  void pin(std::uint64_t member_offset);
  // Whether pin() pinned any region: the array then owes a re-sync that only the next assembly
  // runs, so it must not be marked clean.
  bool has_kept_pins() const noexcept;

  // The member byte ranges (relative to data_offset) whose bits are set, as {offset, length},
  // ascending, adjacent regions merged, the last clipped to data_size: what a resync covers.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> dirty_ranges() const;

  // Makes `device` live member `index` (a rebuilt member taking a failed one's place): writes
  // the header and every bit page as memory holds them to it and flushes, holding every page
  // so no bit is set meanwhile, then includes it in every later update. kInvalidArgument for
  // an index beyond the members; kIoError (nothing changed) when the device fails the write.
  Status add_member(std::uint32_t index, std::shared_ptr<MemberDevice> device);

  // Stops writing to member `index` (it failed); later persists skip it. Out-of-range: ignored.
  void drop_member(std::uint32_t index);

  std::uint64_t region_bytes() const noexcept;
  std::uint64_t region_count() const noexcept;
  std::uint64_t data_size() const noexcept;
  std::uint64_t events() const noexcept;
  // The re-add baseline as the members' headers record it (BitmapHeader::events_cleared; 0:
  // unknown).
  std::uint64_t events_cleared() const noexcept;
  // The region holding member byte `member_offset`.
  std::uint64_t region_of(std::uint64_t member_offset) const noexcept;
  // Writes in flight in `region` (for tests and stats); 0 out of range.
  std::uint32_t in_flight(std::uint64_t region) const noexcept;
  // Whether `region`'s bit is set (set bits are on every live member's disk); false out of range.
  bool is_dirty(std::uint64_t region) const noexcept;

 private:
  struct State;
  explicit WriteIntentBitmap(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace graid::meta
