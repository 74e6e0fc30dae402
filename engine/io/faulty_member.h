// FaultyMember: a MemberDevice that forwards to another one and fails, tears or forgets I/O on
// command — the member-level counterpart of LevelDB's fault-injection Env. Test-only.
//
// Faults, all thread-safe (a test may flip them from another thread while I/O runs):
//   fail_next(n)          the next n I/Os of any kind fail with -EIO (kIoError for sync calls)
//   fail_op(op)           every I/O of that kind fails, until cleared
//   fail_op_with(op, e)   every I/O of that kind fails with -e (EOPNOTSUPP: a discard the drive
//                         cannot do; EINVAL: what a 4Kn drive says to a 512-byte write)
//   fail_range(off, len[, e])  reads, writes and discards touching [off, off+len) fail (-EIO, or
//                         -e: EINVAL is a request the drive calls malformed)
//   bad_sectors(off, len) reads touching the range fail with -EIO until a write covers them (a
//                         drive remaps a sector when it is rewritten)
//   set_logical_block_size(n)  reports n as the logical block size (a 4Kn drive)
//   vanish()              the drive is pulled: every later I/O fails, async with -ENODEV, sync
//                         with kIoError; in-flight I/O still completes as the inner device says
//                         (vanish_together: several members at one instant, a power cut)
//   tear_next_write(...)  the next write lands only a random 512-byte-multiple prefix (possibly
//                         empty), then reports -EIO or, if asked, success
//   power_loss(...)       writes and discards not covered by a completed flush are undone (all,
//                         a random subset, or torn), newest first; then the member vanishes
//   hold_writes()         async writes wait (not yet on the inner device) until
//                         release_writes(): a drive whose writes are slow, on command
//
// Injected failures complete through IoContext::complete_later, never inline. Faults are checked
// in the order vanish, fail_next, fail_op, fail_range, tear; a failed I/O never reaches the inner
// device.
//
// Power loss works from an undo log: before a write or discard is forwarded, the old contents of
// its range are read from the inner device (read_sync; so the inner device must accept 4096-byte
// aligned sync reads of the request's range). A flush that completes successfully drops the
// entries of writes that had completed when the flush was issued — exactly what a flush makes
// durable. Undoing newest first gives every byte the contents it had before the oldest undone
// write covering it, a state a real drive could have been left in.
#pragma once

#include <cerrno>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graid/member.h"

namespace graid {

enum class PowerLossPolicy : std::uint8_t {
  kLoseAll,     // every unflushed write is undone: the member is back at its last flushed state
  kLoseRandom,  // each unflushed write is undone or kept, with probability 1/2
  kTearRandom,  // each unflushed write is kept, undone, or torn (a random 512-multiple prefix of
                // the new data kept, the rest undone), with probability 1/3 each
};

// What power_loss() did to one unflushed write or discard.
struct PowerLossOutcome {
  MemberOp op = MemberOp::kWrite;
  std::uint64_t offset = 0;
  std::uint32_t len = 0;
  std::uint32_t kept = 0;  // bytes of the new data that survive, from the start: 0 (lost) .. len
};

// I/Os the member was asked for, failed ones included.
struct FaultCounts {
  std::uint64_t reads = 0;  // async, per MemberOp
  std::uint64_t writes = 0;
  std::uint64_t flushes = 0;
  std::uint64_t discards = 0;
  std::uint64_t write_zeroes = 0;
  std::uint64_t read_bytes = 0;
  std::uint64_t write_bytes = 0;
  std::uint64_t sync_reads = 0;  // read_sync / write_sync / flush_sync
  std::uint64_t sync_writes = 0;
  std::uint64_t sync_flushes = 0;
  std::uint64_t failed = 0;  // failed by injection or by having vanished
  std::uint64_t torn = 0;    // writes torn by tear_next_write
};

class FaultyMember final : public MemberDevice {
 public:
  explicit FaultyMember(std::unique_ptr<MemberDevice> inner);
  ~FaultyMember() override;
  FaultyMember(const FaultyMember&) = delete;
  FaultyMember& operator=(const FaultyMember&) = delete;

  const std::string& path() const noexcept override;
  std::uint64_t size() const noexcept override;
  bool direct_io() const noexcept override;
  DeviceIdentity identity() const noexcept override;
  bool reads_zeroes(std::uint64_t offset, std::uint64_t len) override;
  Status zero_range(std::uint64_t offset, std::uint64_t len) override;
  void submit(IoContext& ctx, MemberRequest& req) override;
  Status read_sync(std::uint64_t offset, std::span<std::byte> buf) override;
  Status write_sync(std::uint64_t offset, std::span<const std::byte> buf) override;
  Status flush_sync() override;

  // Fails the next `count` I/Os (any kind, async or sync) with EIO. Replaces an earlier count.
  void fail_next(std::uint32_t count);
  // Fails (or stops failing) every I/O of kind `op`.
  void fail_op(MemberOp op, bool fail = true);
  // Fails every read, write and discard touching [offset, offset + len); ranges accumulate.
  void fail_range(std::uint64_t offset, std::uint64_t len, int err = EIO);
  // Fails every I/O of kind `op` with -err; 0 stops.
  void fail_op_with(MemberOp op, int err);
  // Reads touching [offset, offset + len) fail with -EIO until a write covers them.
  void bad_sectors(std::uint64_t offset, std::uint64_t len);
  bool has_bad_sectors() const;
  // Reports `bytes` as the logical block size; 0 = the inner device's.
  void set_logical_block_size(std::uint32_t bytes);
  std::uint32_t logical_block_size() const noexcept override;

  // Clears fail_next, fail_op and fail_range (not vanish, bad sectors or a pending tear).
  void clear_failures();

  // From now on async writes (not reads, flushes or sync I/O) are held before they reach the
  // inner device, until release_writes(), which hands each to its ring's thread (IoContext::post)
  // to be submitted there and stops holding. held_writes(): writes held now.
  void hold_writes();
  void release_writes();
  std::size_t held_writes() const;
  // Completes every held write with -err instead, on its ring's thread, without writing
  // anything (a write lost with the power), and stops holding.
  void fail_held_writes(int err);

  // Pulls the drive: from now on every I/O fails. There is no way back; reopen the inner file.
  void vanish();
  bool vanished() const;
  // Pulls every one of `members` at one instant (a power cut): each member's lock is held while
  // all are marked, so no I/O sees one member gone and another still there, and nothing the
  // array does on seeing the first failure (a superblock update saying so) reaches the others.
  static void vanish_together(const std::vector<FaultyMember*>& members);

  // Tears the next write (async or sync): only a prefix of 512-byte sectors drawn from
  // mt19937_64(seed), in [0, len), reaches the inner device. The write then reports -EIO, or its
  // full length when `report_success`.
  void tear_next_write(std::uint64_t seed, bool report_success = false);
  // Bytes the last torn write actually wrote.
  std::uint32_t last_torn_prefix() const;

  // Simulates a power cut: undoes unflushed writes per `policy` (drawing from `rng`), newest
  // first, then vanishes. Returns one outcome per unflushed write, oldest first. Fails with
  // kBusy, changing nothing, while I/O through this member is in flight, and with kIoError if
  // the inner device refuses a restoring write (the member still vanishes).
  Result<std::vector<PowerLossOutcome>> power_loss(std::mt19937_64& rng, PowerLossPolicy policy);
  // Writes and discards that a power loss would undo now.
  std::size_t unflushed_writes() const;

  FaultCounts counts() const;

 private:
  struct State;
  struct Shim;
  friend struct Shim;
  void finish(Shim& shim, std::int32_t result);

  std::unique_ptr<MemberDevice> inner_;
  std::unique_ptr<State> state_;
};

}  // namespace graid
