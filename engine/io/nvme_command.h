// NVMe I/O commands for the passthrough member (/dev/ngXnY): encoding, splitting and what a
// completion status means. Pure functions, no system calls, so every bit is unit-tested on a
// machine without NVMe. Internal to engine/io.
//
// A command is encoded once, as the fields struct nvme_uring_cmd (io_uring, IORING_OP_URING_CMD)
// and struct nvme_passthru_cmd (ioctl NVME_IOCTL_IO_CMD) share, then copied into either:
//
//   opcode  nsid  addr (user buffer)  data_len (bytes)  cdw10..cdw15
//   read 0x02 / write 0x01:  cdw10 = SLBA[31:0]  cdw11 = SLBA[63:32]
//                            cdw12 = NLB - 1 (bits 15:0) | FUA (bit 30, writes)
//   write zeroes 0x08:       cdw10/11 = SLBA, cdw12 = NLB - 1 | DEAC (bit 25: deallocate)
//   dataset management 0x09: cdw10 = ranges - 1, cdw11 = AD (bit 2: deallocate);
//                            data = ranges of 16 bytes {attributes, NLB (not 0's based), SLBA}
//   flush 0x00:              nothing but nsid
//
// Splitting: a passthrough command is neither split nor merged by the kernel, so one member
// request becomes as many commands as the limits need: a read or write carries at most
// max_transfer_bytes (MDTS, or the kernel's max_hw_sectors) and 65536 blocks (NLB is 16 bits),
// and its buffer spans at most max_segments pages (the kernel maps a user buffer page by page:
// a buffer that starts inside a page needs one page more than its length suggests); write zeroes
// carries at most max_zeroes_blocks; a deallocate is one range.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "graid/member.h"

struct nvme_passthru_cmd;
struct nvme_uring_cmd;

namespace graid::nvme {

inline constexpr std::uint8_t kOpFlush = 0x00;
inline constexpr std::uint8_t kOpWrite = 0x01;
inline constexpr std::uint8_t kOpRead = 0x02;
inline constexpr std::uint8_t kOpWriteZeroes = 0x08;
inline constexpr std::uint8_t kOpDatasetManagement = 0x09;
inline constexpr std::uint8_t kAdminIdentify = 0x06;

inline constexpr std::uint32_t kMaxBlocksPerCommand = 65536;  // NLB: 16 bits, 0's based
inline constexpr std::uint32_t kCdw12Fua = 1U << 30;
inline constexpr std::uint32_t kCdw12Deallocate = 1U << 25;  // write zeroes: DEAC
inline constexpr std::uint32_t kCdw11Deallocate = 1U << 2;   // dataset management: AD
inline constexpr std::uint32_t kPage = 4096;  // the kernel maps user buffers in pages of this

// One command's fields, as both kernel interfaces take them.
struct Command {
  std::uint8_t opcode = 0;
  std::uint32_t nsid = 0;
  std::uint64_t addr = 0;  // user buffer
  std::uint32_t data_len = 0;
  std::uint32_t cdw10 = 0, cdw11 = 0, cdw12 = 0, cdw13 = 0, cdw14 = 0, cdw15 = 0;
};

// A Dataset Management range as the controller reads it (little-endian, which the static_assert
// in nvme_command.cpp requires of the host).
struct DsmRange {
  std::uint32_t attributes = 0;
  std::uint32_t blocks = 0;  // not 0's based
  std::uint64_t slba = 0;
};
static_assert(sizeof(DsmRange) == 16);

// How the member turns kDiscard into commands (see choose_discard in nvme_identify.h).
enum class DiscardMethod : std::uint8_t {
  kNone,                   // -EOPNOTSUPP: the array writes zeroes itself
  kWriteZeroesDeallocate,  // Write Zeroes with DEAC: zeroes guaranteed, deallocated if it can
  kWriteZeroes,            // Write Zeroes: zeroes guaranteed, stays allocated
  kDeallocate,             // Dataset Management deallocate where DLFEAT says it reads zeroes
};

// What commands are built from: the namespace and the limits of one command.
struct Limits {
  std::uint32_t nsid = 1;
  std::uint32_t lba_shift = 9;                   // log2 of the LBA size
  std::uint32_t max_transfer_bytes = 128 << 10;  // per read/write, a multiple of the LBA size
  std::uint32_t max_segments = 0;  // pages per command buffer; 0: transfer / 4 KiB (at least 2)
  std::uint32_t max_zeroes_blocks = 0;  // per Write Zeroes; 0: no Write Zeroes
  DiscardMethod discard = DiscardMethod::kNone;
  // The controller's Command Retry Delay Times (Identify Controller CRDT1..3, in 100 ms): how
  // long a completion with CRD = n asks the host to wait before sending the command again.
  std::array<std::uint16_t, 3> crdt{};

  std::uint32_t lba_size() const noexcept { return 1U << lba_shift; }
  bool write_zeroes() const noexcept { return max_zeroes_blocks != 0; }
};

// -errno for a request that must not become commands (not LBA-aligned: -EINVAL; beyond
// `size` bytes: -ERANGE; an operation the namespace cannot do: -EOPNOTSUPP), 0 for one that may.
std::int32_t check_request(const Limits& limits, std::uint64_t size, const MemberRequest& req);

// Bytes the next command of a request takes: the request's op, the address its remaining part
// starts at (0 for operations without data), and the bytes remaining. 0 for a flush (one command
// with no data). Never more than `remaining`; at least one LBA while `remaining` is nonzero.
std::uint32_t chunk_bytes(const Limits& limits, MemberOp op, std::uint64_t addr,
                          std::uint64_t remaining) noexcept;

// Encoders. Byte offsets and lengths must be LBA multiples that chunk_bytes allowed.
Command read_write(const Limits& limits, bool write, std::uint64_t offset, std::uint32_t len,
                   std::uint64_t addr, bool fua) noexcept;
Command flush(const Limits& limits) noexcept;
Command write_zeroes(const Limits& limits, std::uint64_t offset, std::uint32_t len,
                     bool deallocate) noexcept;
// `ranges` must stay alive until the command completes (the controller reads it).
DsmRange deallocate_range(const Limits& limits, std::uint64_t offset, std::uint64_t len) noexcept;
Command deallocate(const Limits& limits, std::span<const DsmRange> ranges) noexcept;
// The command for a piece [offset, +len) of `op` (data at `addr`, for reads and writes);
// `range` receives the DSM range of a kDeallocate discard, and must outlive the command.
Command encode(const Limits& limits, MemberOp op, std::uint64_t offset, std::uint32_t len,
               std::uint64_t addr, bool fua, DsmRange& range) noexcept;

void to_uring_cmd(const Command& cmd, nvme_uring_cmd& out) noexcept;
void to_passthru_cmd(const Command& cmd, nvme_passthru_cmd& out) noexcept;

// What a completion means: a CQE's or ioctl's result (0 success, > 0 the NVMe status field as
// the kernel reports it, SC | SCT << 8 | CRD << 11 | More << 13 | DNR << 14; < 0 -errno).
//
// How a failed command may be sent again (the policy of docs/nvme.md, "Retries"):
enum class Retry : std::uint8_t {
  kNo,      // fails at once: DNR set, or a status that fails the same way however often sent
  kKernel,  // -EAGAIN/-EINTR from the kernel: sent again at once, up to kAgainRetries times
  kSoon,    // DNR clear on an error that may not recur (media, internal, unknown): up to
            // kStatusRetries more tries, each after the CRD delay
  kLater,   // a "retry later" status (path related, namespace not ready, command interrupted,
            // transient transport error, format in progress): sent again after the CRD delay
            // (or a backoff) until kTransientRetryNs have passed since the command first failed
};
struct Outcome {
  std::int32_t err = 0;  // 0 or -errno for the member request (the table in docs/nvme.md)
  Retry retry = Retry::kNo;
  std::uint8_t crd = 0;  // Command Retry Delay: 0, or which of Limits::crdt to wait (1..3)
};
Outcome decode_result(std::int32_t result) noexcept;

inline constexpr std::uint16_t kAgainRetries = 1000;  // as IoContext does for member requests
inline constexpr std::uint16_t kStatusRetries = 4;    // the kernel's nvme_max_retries: 5 tries
// How long "retry later" statuses are retried: nvme_core's default I/O timeout (30 s), after
// which the kernel times a command out (aborting it or resetting the controller).
inline constexpr std::int64_t kTransientRetryNs = 30'000'000'000;
// Backoff for "retry later" statuses without a CRD delay, so that a path that stays down is
// not hammered: 1 ms doubling per try, at most 1 s.
inline constexpr std::int64_t kBackoffFirstNs = 1'000'000;
inline constexpr std::int64_t kBackoffMaxNs = 1'000'000'000;

// The wait in nanoseconds before sending again a command that failed with `o`, or nullopt when
// it must not be sent again. `tries`: how often it was already sent again for this kind of
// outcome (Retry); `failing_ns`: how long since it first failed. A wait never reaches past
// kTransientRetryNs after the first failure (a CRDT of up to 109 minutes is cut short there),
// and nothing but kKernel is retried once that has passed.
std::optional<std::int64_t> retry_delay_ns(const Outcome& o, const Limits& limits, unsigned tries,
                                           std::int64_t failing_ns) noexcept;

// One command's retries: the counts and first failure time retry_delay_ns needs.
class RetryState {
 public:
  // The wait before sending the command again after it failed with `o` at `now_ns` (a steady
  // clock in nanoseconds), counting that resend; nullopt when it fails for good.
  std::optional<std::int64_t> next(const Outcome& o, const Limits& limits,
                                   std::int64_t now_ns) noexcept;
  // Resends counted so far, and how long since the first failure (for logs).
  unsigned total() const noexcept { return tries_[0] + tries_[1] + tries_[2]; }
  std::int64_t failing_ns(std::int64_t now_ns) const noexcept { return now_ns - failed_at_ns_; }

 private:
  std::array<std::uint16_t, 3> tries_{};  // by Retry kind: kKernel, kSoon, kLater
  std::int64_t failed_at_ns_ = 0;
};
// What an NVMe status field says, for logs ("unrecovered read error").
const char* status_name(std::uint32_t status) noexcept;

}  // namespace graid::nvme
