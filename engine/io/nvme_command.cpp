#include "io/nvme_command.h"

#include <linux/nvme_ioctl.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

namespace graid::nvme {
namespace {

static_assert(std::endian::native == std::endian::little,
              "NVMe data structures (DSM ranges, Identify pages) are read and written as "
              "little-endian host structs");
static_assert(sizeof(nvme_uring_cmd) == 72 && sizeof(nvme_passthru_cmd) == 72);

constexpr std::uint32_t kStatusDnr = 0x4000;
constexpr std::uint32_t kStatusCodeMask = 0x7ff;  // SCT (10:8) and SC (7:0)
constexpr unsigned kStatusCrdShift = 11;          // CRD (12:11)
constexpr unsigned kSctPath = 3;
constexpr std::int64_t kCrdtUnitNs = 100'000'000;  // CRDT counts 100 ms

bool has_data(MemberOp op) noexcept {
  return op == MemberOp::kRead || op == MemberOp::kWrite;
}

void set_slba(Command& c, std::uint64_t slba) noexcept {
  c.cdw10 = static_cast<std::uint32_t>(slba);
  c.cdw11 = static_cast<std::uint32_t>(slba >> 32);
}

// The table of docs/nvme.md. Generic (SCT 0) and media (SCT 2) codes follow the kernel's
// nvme_error_status(), so a drive used through /dev/ngXnY fails requests with the errno class
// the same drive gives through /dev/nvmeXnY, except that media errors are -EIO as the engine's
// read-error repair expects (the kernel says -ENODATA; both are the media class), and that the
// "retry later" statuses the kernel leaves at -EIO (transient transport error, format in
// progress) are device errors here: once their retries are spent the member is not serving.
// `later` marks those statuses: the base specification says the command may succeed if sent
// again later (with DNR clear), so they are retried for kTransientRetryNs, not kStatusRetries.
struct StatusEntry {
  std::uint16_t code;  // SCT << 8 | SC
  std::int32_t err;
  const char* name;
  bool later = false;
};
constexpr StatusEntry kStatusTable[] = {
    // SCT 0: generic command status
    {0x001, -EOPNOTSUPP, "invalid command opcode"},
    {0x002, -EINVAL, "invalid field in command"},
    {0x004, -EIO, "data transfer error"},
    {0x005, -EIO, "commands aborted due to power loss notification"},
    {0x006, -EIO, "internal error"},
    {0x007, -EIO, "command abort requested"},
    {0x008, -EIO, "command aborted due to SQ deletion"},
    {0x00b, -ENODEV, "invalid namespace or format"},
    {0x00d, -EINVAL, "invalid SGL segment descriptor"},
    {0x00f, -EINVAL, "data SGL length invalid"},
    {0x015, -EINVAL, "invalid use of controller memory buffer"},
    {0x020, -EIO, "namespace is write protected"},
    {0x021, -EREMOTEIO, "command interrupted", true},
    {0x022, -ENOLINK, "transient transport error", true},
    {0x080, -ERANGE, "LBA out of range"},
    {0x081, -ENOSPC, "capacity exceeded"},
    {0x082, -EREMOTEIO, "namespace not ready", true},
    {0x083, -EBUSY, "reservation conflict"},
    {0x084, -EREMOTEIO, "format in progress", true},
    // SCT 1: command specific status
    {0x180, -EOPNOTSUPP, "conflicting attributes"},
    {0x181, -EILSEQ, "invalid protection information"},
    {0x182, -EROFS, "attempted write to read only range"},
    {0x183, -EINVAL, "command size limit exceeded"},
    // SCT 2: media and data integrity errors
    {0x280, -EIO, "write fault"},
    {0x281, -EIO, "unrecovered read error"},
    {0x282, -EILSEQ, "end-to-end guard check error"},
    {0x283, -EILSEQ, "end-to-end application tag check error"},
    {0x284, -EILSEQ, "end-to-end reference tag check error"},
    {0x285, -EILSEQ, "compare failure"},
    {0x286, -EACCES, "access denied"},
    {0x287, -ENODATA, "deallocated or unwritten logical block"},
    // SCT 3: path related status; every code of this type is "retry later" (the kernel's
    // multipath fails them over to another path; a passthrough node has only this one)
    {0x300, -ENOLINK, "internal path error", true},
    {0x301, -ENOLINK, "asymmetric access persistent loss", true},
    {0x302, -ENOLINK, "asymmetric access inaccessible", true},
    {0x303, -ENOLINK, "asymmetric access transition", true},
    {0x360, -ENOLINK, "controller pathing error", true},
    {0x370, -ENOLINK, "host pathing error", true},
    {0x371, -ENOLINK, "command aborted by host", true},
};

const StatusEntry* find_status(std::uint32_t status) noexcept {
  const std::uint32_t code = status & kStatusCodeMask;
  for (const StatusEntry& e : kStatusTable)
    if (e.code == code) return &e;
  return nullptr;
}

}  // namespace

std::int32_t check_request(const Limits& limits, std::uint64_t size, const MemberRequest& req) {
  if (req.op == MemberOp::kFlush) return 0;
  const std::uint32_t lba = limits.lba_size();
  if (req.len == 0 || req.len % lba != 0 || req.offset % lba != 0) return -EINVAL;
  if (has_data(req.op) && req.buf == nullptr) return -EINVAL;
  if (req.offset > size || req.len > size - req.offset) return -ERANGE;
  if (req.op == MemberOp::kWriteZeroes && !limits.write_zeroes()) return -EOPNOTSUPP;
  if (req.op == MemberOp::kDiscard && limits.discard == DiscardMethod::kNone) return -EOPNOTSUPP;
  return 0;
}

std::uint32_t chunk_bytes(const Limits& limits, MemberOp op, std::uint64_t addr,
                          std::uint64_t remaining) noexcept {
  const std::uint64_t lba = limits.lba_size();
  std::uint64_t most = 0;
  switch (op) {
    case MemberOp::kFlush:
      return 0;
    case MemberOp::kRead:
    case MemberOp::kWrite: {
      // Unknown, the pages of an aligned transfer; the kernel allows one more (for a buffer
      // that starts inside a page) but caps it with the controller's own limit, which we cannot
      // see. At least 2, which the kernel always allows: a block that straddles two pages.
      const std::uint64_t segments = std::max<std::uint64_t>(
          2, limits.max_segments != 0 ? limits.max_segments : limits.max_transfer_bytes / kPage);
      // The pages a buffer starting at `addr` may span hold this many bytes from `addr`.
      const std::uint64_t by_pages = segments * kPage - addr % kPage;
      most = std::min<std::uint64_t>({limits.max_transfer_bytes, by_pages,
                                      std::uint64_t{kMaxBlocksPerCommand} << limits.lba_shift});
      break;
    }
    case MemberOp::kWriteZeroes:
      most = std::uint64_t{std::min(limits.max_zeroes_blocks, kMaxBlocksPerCommand)}
             << limits.lba_shift;
      break;
    case MemberOp::kDiscard:
      if (limits.discard == DiscardMethod::kDeallocate) {
        most = std::uint64_t{UINT32_MAX} << limits.lba_shift;  // one range: NLB is 32 bits
      } else {
        most = std::uint64_t{std::min(limits.max_zeroes_blocks, kMaxBlocksPerCommand)}
               << limits.lba_shift;
      }
      break;
  }
  most -= most % lba;
  most = std::max(most, lba);
  return static_cast<std::uint32_t>(
      std::min({most, remaining, std::uint64_t{UINT32_MAX} / lba * lba}));
}

Command read_write(const Limits& limits, bool write, std::uint64_t offset, std::uint32_t len,
                   std::uint64_t addr, bool fua) noexcept {
  Command c;
  c.opcode = write ? kOpWrite : kOpRead;
  c.nsid = limits.nsid;
  c.addr = addr;
  c.data_len = len;
  set_slba(c, offset >> limits.lba_shift);
  c.cdw12 = (len >> limits.lba_shift) - 1;
  if (write && fua) c.cdw12 |= kCdw12Fua;
  return c;
}

Command flush(const Limits& limits) noexcept {
  Command c;
  c.opcode = kOpFlush;
  c.nsid = limits.nsid;
  return c;
}

Command write_zeroes(const Limits& limits, std::uint64_t offset, std::uint32_t len,
                     bool deallocate) noexcept {
  Command c;
  c.opcode = kOpWriteZeroes;
  c.nsid = limits.nsid;
  set_slba(c, offset >> limits.lba_shift);
  c.cdw12 = (len >> limits.lba_shift) - 1;
  if (deallocate) c.cdw12 |= kCdw12Deallocate;
  return c;
}

DsmRange deallocate_range(const Limits& limits, std::uint64_t offset, std::uint64_t len) noexcept {
  DsmRange r;
  r.slba = offset >> limits.lba_shift;
  r.blocks = static_cast<std::uint32_t>(len >> limits.lba_shift);
  return r;
}

Command deallocate(const Limits& limits, std::span<const DsmRange> ranges) noexcept {
  Command c;
  c.opcode = kOpDatasetManagement;
  c.nsid = limits.nsid;
  c.addr = reinterpret_cast<std::uintptr_t>(ranges.data());
  c.data_len = static_cast<std::uint32_t>(ranges.size_bytes());
  c.cdw10 = static_cast<std::uint32_t>(ranges.size()) - 1;  // NR: 0's based, at most 256
  c.cdw11 = kCdw11Deallocate;
  return c;
}

Command encode(const Limits& limits, MemberOp op, std::uint64_t offset, std::uint32_t len,
               std::uint64_t addr, bool fua, DsmRange& range) noexcept {
  switch (op) {
    case MemberOp::kRead:
    case MemberOp::kWrite:
      return read_write(limits, op == MemberOp::kWrite, offset, len, addr, fua);
    case MemberOp::kFlush:
      return flush(limits);
    case MemberOp::kWriteZeroes:
      return write_zeroes(limits, offset, len, false);
    case MemberOp::kDiscard:
      if (limits.discard == DiscardMethod::kDeallocate) {
        range = deallocate_range(limits, offset, len);
        return deallocate(limits, {&range, 1});
      }
      return write_zeroes(limits, offset, len,
                          limits.discard == DiscardMethod::kWriteZeroesDeallocate);
  }
  return flush(limits);
}

namespace {

// nvme_uring_cmd and nvme_passthru_cmd carry the same command fields under the same names.
template <typename Out>
void fill_kernel_cmd(const Command& cmd, Out& out) noexcept {
  std::memset(&out, 0, sizeof(out));
  out.opcode = cmd.opcode;
  out.nsid = cmd.nsid;
  out.addr = cmd.addr;
  out.data_len = cmd.data_len;
  out.cdw10 = cmd.cdw10;
  out.cdw11 = cmd.cdw11;
  out.cdw12 = cmd.cdw12;
  out.cdw13 = cmd.cdw13;
  out.cdw14 = cmd.cdw14;
  out.cdw15 = cmd.cdw15;
}

}  // namespace

void to_uring_cmd(const Command& cmd, nvme_uring_cmd& out) noexcept {
  fill_kernel_cmd(cmd, out);
}

void to_passthru_cmd(const Command& cmd, nvme_passthru_cmd& out) noexcept {
  fill_kernel_cmd(cmd, out);
}

Outcome decode_result(std::int32_t result) noexcept {
  if (result == 0) return {};
  if (result < 0) {
    return {result, result == -EAGAIN || result == -EINTR ? Retry::kKernel : Retry::kNo, 0};
  }
  const auto status = static_cast<std::uint32_t>(result);
  // Success with the More bit (or CRD) set: the kernel passes the whole field through.
  if ((status & kStatusCodeMask) == 0) return {};
  const StatusEntry* e = find_status(status);
  const bool path = ((status >> 8) & 7U) == kSctPath;
  Outcome o;
  o.err = e != nullptr ? e->err : (path ? -ENOLINK : -EIO);
  o.crd = static_cast<std::uint8_t>((status >> kStatusCrdShift) & 3U);
  if ((status & kStatusDnr) != 0) return o;  // the controller says it would fail again
  if (path || (e != nullptr && e->later)) {
    o.retry = Retry::kLater;
  } else if (o.err == -EIO) {
    // DNR clear on a media, internal or unknown error: a few more tries may get through. A
    // malformed or refused command fails the same way however often it is sent.
    o.retry = Retry::kSoon;
  }
  return o;
}

std::optional<std::int64_t> retry_delay_ns(const Outcome& o, const Limits& limits, unsigned tries,
                                           std::int64_t failing_ns) noexcept {
  switch (o.retry) {
    case Retry::kNo:
      return std::nullopt;
    case Retry::kKernel:
      if (tries >= kAgainRetries) return std::nullopt;
      return 0;
    case Retry::kSoon:
      if (tries >= kStatusRetries) return std::nullopt;
      break;
    case Retry::kLater:
      break;
  }
  if (failing_ns >= kTransientRetryNs) return std::nullopt;
  std::int64_t delay = o.crd != 0 ? std::int64_t{limits.crdt[o.crd - 1U]} * kCrdtUnitNs : 0;
  if (o.retry == Retry::kLater) {
    // A CRD of 0 (or a CRDT of 0) asks for no wait; waiting a little is still allowed, and
    // keeps a path that stays down from being hammered for the whole bound.
    const std::int64_t backoff =
        tries >= 10 ? kBackoffMaxNs : std::min(kBackoffMaxNs, kBackoffFirstNs << tries);
    delay = std::max(delay, backoff);
  }
  return std::min(delay, kTransientRetryNs - std::max<std::int64_t>(failing_ns, 0));
}

std::optional<std::int64_t> RetryState::next(const Outcome& o, const Limits& limits,
                                             std::int64_t now_ns) noexcept {
  static_assert(static_cast<int>(Retry::kKernel) == 1 && static_cast<int>(Retry::kLater) == 3);
  if (o.retry == Retry::kNo) return std::nullopt;
  if (total() == 0) failed_at_ns_ = now_ns;
  std::uint16_t& tries = tries_[static_cast<std::size_t>(o.retry) - 1];
  const auto delay = retry_delay_ns(o, limits, tries, now_ns - failed_at_ns_);
  if (delay) ++tries;
  return delay;
}

const char* status_name(std::uint32_t status) noexcept {
  const StatusEntry* e = find_status(status);
  if (e != nullptr) return e->name;
  switch ((status >> 8) & 7) {
    case 0:
      return "generic command error";
    case 1:
      return "command specific error";
    case 2:
      return "media or data integrity error";
    case 3:
      return "path related error";
    case 7:
      return "vendor specific error";
    default:
      return "unknown status type";
  }
}

}  // namespace graid::nvme
