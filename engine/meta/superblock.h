// The per-member superblock: what every PD of a drive group carries so that the array can be
// assembled from its members alone.
//
// One fixed-size block (kSuperblockSize bytes) at byte kSuperblockOffset of each member. It names
// the array and this member, holds the shape (level, member count, strip), the member table with
// per-member state, the data area (data_offset/data_size, the same on every member), the VD table
// and the progress checkpoints of background jobs, all under a crc32c. The byte layout, versioning
// rules and update protocol are in docs/on-disk-format.md; this header and that document must
// agree (superblock_test pins the offsets).
//
// Update rule: every change is written to all live members with `events` one higher than before.
// Assembly decodes each member's copy and calls pick_newest(): the copies at the highest event
// count that agree on the array state are the truth, members with older copies are stale.
//
// Encoding is explicit little-endian, field by field; the in-memory Superblock is an ordinary
// struct whose layout the compiler is free to choose.
#pragma once

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graid/geometry.h"
#include "graid/status.h"

namespace graid::meta {

// ---- Placement and size -----------------------------------------------------------------------

// Bytes of one encoded superblock: one 4 KiB block, so it can be read and written with O_DIRECT
// on any device whose logical block is 512 B or 4 KiB.
inline constexpr std::size_t kSuperblockSize = 4096;
// Where the superblock sits on every member (byte offset from the start of the device or file).
inline constexpr std::uint64_t kSuperblockOffset = 0;
// data_offset and data_size, VD starts and sizes are multiples of this.
inline constexpr std::uint64_t kDataAlign = 4096;
// The data area may not begin before the end of the superblock.
inline constexpr std::uint64_t kMinDataOffset = kSuperblockOffset + kSuperblockSize;
// What `create` uses: leaves room between the superblock and the data for the write-intent
// bitmap and the journal. Each array records its own data_offset, so changing this default
// never affects existing arrays.
inline constexpr std::uint64_t kDefaultDataOffset = std::uint64_t{1} << 20;

// ---- Versions -----------------------------------------------------------------------------------

// A major bump is an incompatible layout: readers refuse majors they do not know (kUnsupported).
inline constexpr std::uint16_t kMajorVersion = 1;
// A minor bump only gives meaning to bytes that older minors kept zero (reserved bytes and flag
// bits); older readers accept newer minors and carry those bytes forward unchanged.
//   minor 0: the first layout.
//   minor 1: drive-group settings (Superblock::settings) at bytes 176..180.
//   minor 2: the write-hole journal area (journal_offset, journal_bytes, journal_epoch) at bytes
//            184..207.
//   minor 3: the hot replace record (Superblock::replace) at bytes 208..231.
//   minor 4: journal coverage (Superblock::journal_covered) at bytes 232..239, and the bad-range
//            list (Superblock::bad_ranges) at bytes 2304..3343.
//   minor 5: how the array was initialised (Superblock::init_method) at byte 181.
inline constexpr std::uint16_t kMinorVersion = 5;

// The first 8 bytes of every superblock: ASCII "graid-sb".
inline constexpr std::array<std::byte, 8> kSuperblockMagic = {
    std::byte{'g'}, std::byte{'r'}, std::byte{'a'}, std::byte{'i'},
    std::byte{'d'}, std::byte{'-'}, std::byte{'s'}, std::byte{'b'}};

// ---- Tables -------------------------------------------------------------------------------------

// Entries of the VD table; a drive group holds at most this many virtual drives.
inline constexpr std::size_t kMaxVds = 16;
// Longest array name and VD name in bytes (the on-disk fields are one byte longer, for the NUL).
inline constexpr std::size_t kMaxArrayNameLen = 31;
inline constexpr std::size_t kMaxVdNameLen = 39;
// Bytes kept verbatim for future minor versions (see Superblock::reserved).
inline constexpr std::size_t kReservedBytes = 774;
// Entries of the bad-range list (minor 4): a drive group holds at most this many lost ranges; a
// job that would need another fails the member it read from instead (as md's bad-block log).
inline constexpr std::size_t kMaxBadRanges = 64;

// A 16-byte identifier (RFC 4122 layout; generated ones are version 4, random). All-zero is the
// nil UUID, which means "none" wherever a UUID is optional.
struct Uuid {
  std::array<std::byte, 16> bytes{};

  // A fresh random (version 4) UUID from getrandom(2). kIoError if the kernel refuses.
  static Result<Uuid> generate();
  // Parses "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (either case) or the same 32 hex digits
  // without dashes. kInvalidArgument otherwise.
  static Result<Uuid> parse(std::string_view text);
  // Canonical lower-case text, 36 characters with dashes.
  std::string to_string() const;
  bool is_nil() const noexcept;

  friend bool operator==(const Uuid&, const Uuid&) = default;
  friend auto operator<=>(const Uuid&, const Uuid&) = default;
};

// State of one slot of the member table. The numeric values are on disk and closed: a new state
// needs a new major version, so an unknown value is corruption, not a newer feature.
enum class MemberState : std::uint32_t {
  kEmpty = 0,       // unused slot (beyond member_count + spare_count); the entry is all zero
  kActive = 1,      // in sync, serving reads and writes
  kFailed = 2,      // failed; not read or written until replaced
  kSpare = 3,       // hot spare, not in a role (only in the spare slots)
  kRebuilding = 4,  // being rebuilt; data below rebuild_offset is valid
  kRemoved = 5,     // the role has no device (removed by the user); uuid may name the last one
};

// "empty", "active", "failed", "spare", "rebuilding", "removed".
std::string_view member_state_name(MemberState state) noexcept;

// One slot of the member table. Slots 0..member_count-1 are the RAID roles (slot i is member i
// of the Geometry); the next spare_count slots hold hot spares.
struct MemberEntry {
  Uuid uuid;  // the PD in this slot (nil only for kEmpty/kRemoved)
  MemberState state = MemberState::kEmpty;
  std::uint32_t flags = 0;           // none defined yet; unknown bits from newer minors kept
  std::uint64_t rebuild_offset = 0;  // kRebuilding: member data bytes rebuilt so far; else 0

  friend bool operator==(const MemberEntry&, const MemberEntry&) = default;
};

// VdEntry::flags bits.
inline constexpr std::uint32_t kVdInUse = 1u << 0;  // the entry describes a VD
inline constexpr std::uint32_t kVdKnownFlags = kVdInUse;

// One virtual drive: an extent of the array's data space (array byte offsets, as
// Geometry::locate() takes them). An entry without kVdInUse is all zero.
struct VdEntry {
  std::uint32_t id = 0;     // the VD number users see; unique among entries in use
  std::uint32_t flags = 0;  // kVd* bits
  std::uint64_t start = 0;  // first array byte, a multiple of kDataAlign
  std::uint64_t size = 0;   // bytes, a non-zero multiple of kDataAlign
  std::string name;         // at most kMaxVdNameLen bytes, no NUL

  bool in_use() const noexcept { return (flags & kVdInUse) != 0; }
  friend bool operator==(const VdEntry&, const VdEntry&) = default;
};

// Superblock::array_flags bits.
inline constexpr std::uint32_t kArrayClean = 1u << 0;  // stopped cleanly: no resync needed
inline constexpr std::uint32_t kArrayKnownFlags = kArrayClean;

// Drive-group settings as stored (minor 1): one byte each, the codes below. 0 in any field means
// "unset": the reader uses the default (normal speed, journal on degraded arrays only). A minor 0
// superblock, which had these bytes reserved, reads with every field unset. The code sets are
// closed, as member states are: a code above the largest listed is corruption in any minor (a
// new code needs a new major version). The engine's names for them are graid::ArraySettings.
inline constexpr std::uint8_t kSettingUnset = 0;
// Background job speeds: 1 low, 2 normal, 3 high, 4 extreme.
inline constexpr std::uint8_t kMaxSpeedCode = 4;
// Journal policy: 1 off, 2 degraded-only, 3 always.
inline constexpr std::uint8_t kMaxJournalCode = 3;

// How create made the array's redundancy consistent (minor 5): a fact of its creation, recorded
// once and never changed, so an older writer carrying it forward keeps it true. The codes are
// closed, as the settings': above kMaxInitMethodCode is corruption in any minor.
inline constexpr std::uint8_t kInitMethodNotRecorded = 0;  // created before minor 5
inline constexpr std::uint8_t kInitMethodNone = 1;         // RAID0, or --assume-clean
inline constexpr std::uint8_t kInitMethodKnownZero = 2;    // every member read zeroes
inline constexpr std::uint8_t kInitMethodZeroed = 3;       // members zeroed
inline constexpr std::uint8_t kInitMethodResync = 4;       // parity computed from the data
inline constexpr std::uint8_t kMaxInitMethodCode = 4;

struct StoredSettings {
  std::uint8_t rebuild_speed = kSettingUnset;
  std::uint8_t init_speed = kSettingUnset;
  std::uint8_t check_speed = kSettingUnset;
  std::uint8_t resync_speed = kSettingUnset;
  std::uint8_t journal_policy = kSettingUnset;

  friend bool operator==(const StoredSettings&, const StoredSettings&) = default;
};

// A checkpoint of a background job: the member data-area offset below which the job is done
// (every stripe row lies at the same offset on all members), or nullopt when no such job is
// pending. Bounded by data_size.
using Checkpoint = std::optional<std::uint64_t>;

// A hot replace in progress (minor 3; engine/array/hot_replace.cpp): the new device sits in spare
// slot `slot` (state kSpare, so a reader that does not know this record sees a hot spare, which is
// safe: a spare's contents never matter) and is a valid copy of active role `role` below member
// data offset `copied`, flushed before it was recorded. Writes to the role go to it as well, so a
// restart resumes the copy from `copied`.
struct ReplaceRecord {
  std::uint32_t role = 0;    // < member_count
  std::uint32_t slot = 0;    // member_count <= slot < member_count + spare_count, a kSpare entry
  std::uint64_t copied = 0;  // a multiple of strip_bytes, <= data_size
  // The superblock's `events` when this record was last written. A writer that knows the record
  // rewrites it with every update; one of an older minor carries it forward unchanged while it
  // bumps `events` and does not send the role's writes to the new device, so a record whose
  // events differ from the superblock's is void (the device is then just a spare).
  std::uint64_t events = 0;

  friend bool operator==(const ReplaceRecord&, const ReplaceRecord&) = default;
};

// A range of array data whose contents are lost (minor 4; md's bad-block log, kept per drive
// group): a member could not be read there during a background job and redundancy could not make
// it up (a RAID5 rebuild, say). The stripe holds zeroes there (parity computed over them, so the
// rest of the stripe stays consistent and writable); reads of the range fail with an I/O error
// until a write covers all of it (docs/resilience.md).
struct BadRange {
  std::uint64_t offset = 0;  // array data byte, a multiple of 512
  std::uint32_t len = 0;     // bytes, a non-zero multiple of 512

  friend bool operator==(const BadRange&, const BadRange&) = default;
  friend auto operator<=>(const BadRange&, const BadRange&) = default;
};

// The decoded superblock. Array-wide fields are the same on every member at the same event
// count; member_uuid and member_index say which member this copy came from.
struct Superblock {
  // The minor version this copy was written with. encode() writes max(this, kMinorVersion).
  std::uint16_t minor_version = kMinorVersion;
  // Bumped on every update, on every member; never 0 in a valid superblock.
  std::uint64_t events = 1;
  // Nanoseconds since the Unix epoch: when the array was created / this copy last written.
  std::uint64_t ctime_ns = 0;
  std::uint64_t utime_ns = 0;

  Uuid array_uuid;                 // the drive group; never nil
  Uuid member_uuid;                // this member; equals members[member_index].uuid
  std::uint32_t member_index = 0;  // this member's slot in `members`

  RaidLevel level = RaidLevel::kRaid0;
  std::uint32_t member_count = 0;  // RAID width n (spares not counted)
  std::uint32_t spare_count = 0;   // spares after the roles; member_count + spare_count <= 32
  std::uint32_t strip_bytes = 0;
  std::uint32_t array_flags = 0;  // kArray* bits

  // The data area on each member: [data_offset, data_offset + data_size), the same on all
  // members. Geometry member offsets are relative to data_offset.
  std::uint64_t data_offset = kDefaultDataOffset;
  std::uint64_t data_size = 0;

  // The write-hole journal (minor 2; engine/journal/journal.h): [journal_offset, +journal_bytes)
  // on every member, between the bitmap and the data; journal_bytes 0 = no journal area (arrays
  // created before minor 2, RAID0/1/10, members too small). Records of an epoch other than
  // journal_epoch are never replayed; assembly bumps it once it has replayed the journal.
  std::uint64_t journal_offset = 0;
  std::uint64_t journal_bytes = 0;
  std::uint64_t journal_epoch = 0;
  // Where the metadata below the data ends for the write-intent bitmap: the journal area's start
  // when there is one, else data_offset.
  std::uint64_t bitmap_area_end() const noexcept {
    return journal_bytes != 0 ? journal_offset : data_offset;
  }

  Checkpoint init_checkpoint;    // initialisation (parity/mirror sync of a new array)
  Checkpoint resync_checkpoint;  // resync after an unclean stop
  Checkpoint check_checkpoint;   // consistency check
  // A hot replace in progress (minor 3), or none.
  std::optional<ReplaceRecord> replace;
  // Whether the write-hole journal covered every partial-stripe update since it last turned on
  // (minor 4; engine/journal/journal.h): assembly lets the journal's replay make a dirty degraded
  // RAID5/6 whole only when it did. Stored as the `events` of the update that wrote it (0: not
  // covered); a writer that knows it keeps it equal to `events` in every update
  // (set_journal_covered, and the engine's superblock update), so a value that differs was carried
  // forward by an older minor, which does not keep it true, and reads as not covered. Kept as
  // read, so a copy re-encodes to the same bytes.
  std::uint64_t journal_covered_at = 0;
  bool journal_covered() const noexcept {
    return journal_covered_at != 0 && journal_covered_at == events;
  }
  void set_journal_covered(bool covered) noexcept { journal_covered_at = covered ? events : 0; }
  // Lost array data ranges (minor 4), ascending, not overlapping, at most kMaxBadRanges, inside
  // the array's capacity.
  std::vector<BadRange> bad_ranges;

  std::string name;  // the drive group's name; at most kMaxArrayNameLen bytes, no NUL

  // The drive group's settings (minor 1; all unset when read from a minor 0 copy). An older
  // writer carries them forward unchanged in its reserved bytes, which keeps them correct: it has
  // no way to change them.
  StoredSettings settings;
  // How create initialised the array (minor 5; kInitMethod* codes, kInitMethodNotRecorded from
  // an older build).
  std::uint8_t init_method = kInitMethodNotRecorded;

  std::array<MemberEntry, kMaxMembers> members{};
  std::array<VdEntry, kMaxVds> vds{};

  // Bytes of the reserved areas, concatenated in on-disk order. Zero as written by this version;
  // a copy from a newer minor may hold that version's fields here, which are written back as
  // read (see docs/on-disk-format.md, "Versioning").
  std::array<std::byte, kReservedBytes> reserved{};

  // The array's shape; fails (kInvalidArgument) when level/member_count/strip_bytes are not one.
  Result<Geometry> geometry() const;
  // Array bytes available to VDs: geometry().data_capacity(data_size), 0 for a bad shape.
  std::uint64_t data_capacity() const;
  bool clean() const noexcept { return (array_flags & kArrayClean) != 0; }

  friend bool operator==(const Superblock&, const Superblock&) = default;
};

using EncodedSuperblock = std::array<std::byte, kSuperblockSize>;

// Checks every rule decode() enforces on a superblock (the shape, tables, offsets, UUIDs...),
// so a caller can refuse to write a bad one. kInvalidArgument with a message naming the rule.
Status validate(const Superblock& sb);

// Serializes `sb` (after validate()) into `out`, which must hold at least kSuperblockSize bytes
// (only the first kSuperblockSize are written), and fills in the crc32c.
Status encode(const Superblock& sb, std::span<std::byte> out);
// The same into a fresh block.
Result<EncodedSuperblock> encode(const Superblock& sb);

// The format version a block claims in its frozen prefix (bytes 8..11), read without checking
// anything else: what a refusal names when decode() answers kUnsupported. nullopt when the block
// is shorter than the prefix or does not begin with the superblock magic.
struct FormatVersion {
  std::uint16_t major = 0;
  std::uint16_t minor = 0;
};
std::optional<FormatVersion> peek_version(std::span<const std::byte> bytes) noexcept;

// Parses a superblock from untrusted bytes (only the first kSuperblockSize bytes are read).
// Fails with kCorrupt (truncated, bad magic, bad crc, any broken rule of validate()) or
// kUnsupported (a major version this build does not know), the message naming the check. Never
// reads past `bytes`.
Result<Superblock> decode(std::span<const std::byte> bytes);

// True when `a` and `b` describe the same array state: equal in everything but the fields that
// name the member the copy came from (member_uuid, member_index).
bool same_array_state(const Superblock& a, const Superblock& b);

// What pick_newest() found.
struct NewestCopy {
  std::size_t newest = 0;            // index (into the input) of a copy holding the newest state
  std::uint64_t events = 0;          // its event count
  std::vector<std::size_t> in_sync;  // copies usable as they are, `newest` included, ascending
  std::vector<std::size_t> behind;   // of those, copies one event behind (see pick_newest)
  std::vector<std::size_t> stale;    // copies of the array with fewer events, ascending
  std::vector<std::size_t> foreign;  // copies of other arrays, ascending
  // The slot each copy of the array holds (by input index): its own member_index, except for a
  // hot replacement that a power cut caught in the middle of its swap update (see pick_newest),
  // which holds the role it was being swapped into.
  std::vector<std::uint32_t> slot_of;
};

// Chooses the copy assembly trusts among the decoded superblocks read from several members:
// among copies whose array_uuid is `array_uuid`, the ones with the highest event count. A copy
// exactly one event behind whose member the newest copy still lists as active, in that slot, is
// in sync too (as md): an update writes every member at once, so a power cut in the middle of
// one leaves some members one event behind, and nothing the update recorded concerns them. The
// one update that moves a member between slots is a hot replace's swap, which puts the
// replacement (its member UUID unchanged) from its spare slot into the role it copied: a copy one
// event behind whose replace record names its own slot and a role that the newest copy lists
// active with this copy's member UUID is in sync too, in that role (slot_of). Fails
// with kNotFound when no copy belongs to the array, kCorrupt when copies at the highest event
// count disagree on the array state or two in-sync copies claim the same member (a split brain or
// a cloned disk: refuse rather than guess).
Result<NewestCopy> pick_newest(std::span<const Superblock> copies, const Uuid& array_uuid);

// One sign of a split brain: stale copy `copy` records slot `slot` as failed, while the newest
// copy lists that slot active and has no record of `copy`'s member being in sync. The two halves
// ran apart, each recording the other as failed; trusting the higher event count would silently
// drop what the other half wrote.
struct SplitBrainSign {
  std::size_t copy = 0;    // the stale copy (index into the input)
  std::uint32_t slot = 0;  // the slot it records as failed, active in the newest copy
};

// Every split-brain sign among the stale copies of `newest` (empty: none). A member that failed
// and was later rebuilt would look the same to this check from a copy written before the
// rebuild; rebuild must record the event at which a slot re-joined before it lands.
std::vector<SplitBrainSign> find_split_brain(std::span<const Superblock> copies,
                                             const NewestCopy& newest);

}  // namespace graid::meta
