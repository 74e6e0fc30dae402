// NVMe passthrough commands: encoding (opcode, nsid, SLBA, NLB, FUA, DEAC, DSM ranges, the
// nvme_uring_cmd / nvme_passthru_cmd layouts), splitting to the limits, request checks, and the
// status -> errno table with the error classes the array gives those errnos.
#include "io/nvme_command.h"

#include <gtest/gtest.h>
#include <linux/nvme_ioctl.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <random>

#include "state/member_errors.h"

namespace graid::nvme {
namespace {

class Req final : public MemberRequest {
 public:
  void on_done(std::int32_t) override {}
};

Limits limits_4k() {
  Limits l;
  l.nsid = 7;
  l.lba_shift = 12;
  l.max_transfer_bytes = 512 << 10;
  l.max_zeroes_blocks = kMaxBlocksPerCommand;
  l.discard = DiscardMethod::kWriteZeroesDeallocate;
  return l;
}

std::uint32_t le32_at(const void* p, std::size_t off) {
  std::uint32_t v;
  std::memcpy(&v, static_cast<const std::byte*>(p) + off, 4);
  return v;
}

TEST(NvmeCommand, ReadPutsSlbaInCdw10And11AndZeroBasedBlocksInCdw12) {
  const Limits l = limits_4k();
  const std::uint64_t slba = 0x1'2345'6789ULL;
  const Command c = read_write(l, false, slba << 12, 8 * 4096, 0xdead000, /*fua=*/true);
  EXPECT_EQ(c.opcode, 0x02);
  EXPECT_EQ(c.nsid, 7U);
  EXPECT_EQ(c.cdw10, 0x2345'6789U);
  EXPECT_EQ(c.cdw11, 0x1U);
  EXPECT_EQ(c.cdw12, 7U) << "NLB is 0's based; FUA is for writes only";
  EXPECT_EQ(c.addr, 0xdead000U);
  EXPECT_EQ(c.data_len, 8U * 4096);
  EXPECT_EQ(c.cdw13 | c.cdw14 | c.cdw15, 0U);
}

TEST(NvmeCommand, WriteSetsFuaBit30OnlyWhenAsked) {
  Limits l = limits_4k();
  l.lba_shift = 9;
  const Command plain = read_write(l, true, 512 * 10, 512 * 3, 0x1000, false);
  EXPECT_EQ(plain.opcode, 0x01);
  EXPECT_EQ(plain.cdw10, 10U);
  EXPECT_EQ(plain.cdw12, 2U);
  const Command fua = read_write(l, true, 512 * 10, 512 * 3, 0x1000, true);
  EXPECT_EQ(fua.cdw12, 2U | (1U << 30));
  const Command max = read_write(l, true, 0, 65536 * 512, 0x1000, false);
  EXPECT_EQ(max.cdw12, 0xffffU) << "65536 blocks is the most NLB holds";
}

TEST(NvmeCommand, FlushIsOpcodeZeroWithTheNamespaceOnly) {
  const Command c = flush(limits_4k());
  EXPECT_EQ(c.opcode, 0x00);
  EXPECT_EQ(c.nsid, 7U);
  EXPECT_EQ(c.addr, 0U);
  EXPECT_EQ(c.data_len, 0U);
  EXPECT_EQ(c.cdw10 | c.cdw11 | c.cdw12 | c.cdw13 | c.cdw14 | c.cdw15, 0U);
}

TEST(NvmeCommand, WriteZeroesDeallocatesOnlyWhenAsked) {
  const Limits l = limits_4k();
  const Command keep = write_zeroes(l, 4096 * 5, 4096 * 16, false);
  EXPECT_EQ(keep.opcode, 0x08);
  EXPECT_EQ(keep.cdw10, 5U);
  EXPECT_EQ(keep.cdw12, 15U);
  EXPECT_EQ(keep.data_len, 0U);
  const Command dealloc = write_zeroes(l, 4096 * 5, 4096 * 16, true);
  EXPECT_EQ(dealloc.cdw12, 15U | (1U << 25));
}

TEST(NvmeCommand, DatasetManagementRangeLayoutAndFields) {
  const Limits l = limits_4k();
  const DsmRange r = deallocate_range(l, 4096ULL * 0x1'0000'0002ULL, 4096 * 300);
  // The controller reads 16 bytes: context attributes, NLB (1's based), SLBA, little-endian.
  unsigned char bytes[16];
  std::memcpy(bytes, &r, 16);
  EXPECT_EQ(le32_at(bytes, 0), 0U);
  EXPECT_EQ(le32_at(bytes, 4), 300U);
  EXPECT_EQ(le32_at(bytes, 8), 2U);
  EXPECT_EQ(le32_at(bytes, 12), 1U);
  const Command c = deallocate(l, {&r, 1});
  EXPECT_EQ(c.opcode, 0x09);
  EXPECT_EQ(c.nsid, 7U);
  EXPECT_EQ(c.cdw10, 0U) << "number of ranges, 0's based";
  EXPECT_EQ(c.cdw11, 1U << 2) << "attribute: deallocate";
  EXPECT_EQ(c.addr, reinterpret_cast<std::uintptr_t>(&r));
  EXPECT_EQ(c.data_len, 16U);
}

TEST(NvmeCommand, DiscardFollowsTheChosenMethod) {
  Limits l = limits_4k();
  DsmRange range;
  l.discard = DiscardMethod::kWriteZeroesDeallocate;
  Command c = encode(l, MemberOp::kDiscard, 8192, 4096, 0, false, range);
  EXPECT_EQ(c.opcode, kOpWriteZeroes);
  EXPECT_EQ(c.cdw12, kCdw12Deallocate);
  l.discard = DiscardMethod::kWriteZeroes;
  c = encode(l, MemberOp::kDiscard, 8192, 4096, 0, false, range);
  EXPECT_EQ(c.opcode, kOpWriteZeroes);
  EXPECT_EQ(c.cdw12, 0U);
  l.discard = DiscardMethod::kDeallocate;
  c = encode(l, MemberOp::kDiscard, 8192, 4096 * 3, 0, false, range);
  EXPECT_EQ(c.opcode, kOpDatasetManagement);
  EXPECT_EQ(c.addr, reinterpret_cast<std::uintptr_t>(&range));
  EXPECT_EQ(range.slba, 2U);
  EXPECT_EQ(range.blocks, 3U);
  // kWriteZeroes never deallocates, whatever the discard method.
  c = encode(l, MemberOp::kWriteZeroes, 8192, 4096, 0, false, range);
  EXPECT_EQ(c.opcode, kOpWriteZeroes);
  EXPECT_EQ(c.cdw12, 0U);
}

TEST(NvmeCommand, KernelStructLayoutsMatch) {
  // The fields land where the kernel reads them (include/uapi/linux/nvme_ioctl.h).
  static_assert(offsetof(nvme_uring_cmd, opcode) == 0);
  static_assert(offsetof(nvme_uring_cmd, nsid) == 4);
  static_assert(offsetof(nvme_uring_cmd, addr) == 24);
  static_assert(offsetof(nvme_uring_cmd, data_len) == 36);
  static_assert(offsetof(nvme_uring_cmd, cdw10) == 40);
  static_assert(offsetof(nvme_uring_cmd, cdw12) == 48);
  static_assert(offsetof(nvme_uring_cmd, cdw15) == 60);
  Limits l = limits_4k();
  const Command c = read_write(l, true, 4096 * 3, 4096 * 2, 0xabc000, true);
  nvme_uring_cmd u;
  std::memset(&u, 0xff, sizeof(u));
  to_uring_cmd(c, u);
  EXPECT_EQ(u.opcode, 0x01);
  EXPECT_EQ(u.flags, 0);
  EXPECT_EQ(u.nsid, 7U);
  EXPECT_EQ(u.addr, 0xabc000U);
  EXPECT_EQ(u.data_len, 8192U);
  EXPECT_EQ(u.cdw10, 3U);
  EXPECT_EQ(u.cdw12, 1U | kCdw12Fua);
  EXPECT_EQ(u.metadata, 0U);
  EXPECT_EQ(u.metadata_len, 0U);
  EXPECT_EQ(u.timeout_ms, 0U) << "0: the driver's default timeout";
  nvme_passthru_cmd p;
  std::memset(&p, 0xff, sizeof(p));
  to_passthru_cmd(c, p);
  EXPECT_EQ(p.opcode, 0x01);
  EXPECT_EQ(p.nsid, 7U);
  EXPECT_EQ(p.addr, 0xabc000U);
  EXPECT_EQ(p.data_len, 8192U);
  EXPECT_EQ(p.cdw12, 1U | kCdw12Fua);
  EXPECT_EQ(p.result, 0U);
}

// ---- splitting -------------------------------------------------------------------------------

TEST(NvmeSplit, ReadWriteChunksStopAtTheTransferLimit) {
  const Limits l = limits_4k();
  EXPECT_EQ(chunk_bytes(l, MemberOp::kRead, 0x10000, 512 << 10), 512U << 10);
  EXPECT_EQ(chunk_bytes(l, MemberOp::kRead, 0x10000, (512 << 10) + 4096), 512U << 10);
  EXPECT_EQ(chunk_bytes(l, MemberOp::kWrite, 0x10000, 4096), 4096U);
  EXPECT_EQ(chunk_bytes(l, MemberOp::kFlush, 0, 0), 0U);
}

TEST(NvmeSplit, ABufferInsideAPageGivesUpOnePage) {
  Limits l = limits_4k();
  l.lba_shift = 9;
  // 128 pages hold 512 KiB from a page boundary; from 64 bytes in, the 128th page ends 64 bytes
  // short, and the chunk stops at the last whole LBA before that.
  EXPECT_EQ(chunk_bytes(l, MemberOp::kRead, 0x10040, 1 << 20), (512U << 10) - 512);
  l.max_segments = 200;  // sysfs says more pages may be mapped: MDTS decides again
  EXPECT_EQ(chunk_bytes(l, MemberOp::kRead, 0x10040, 1 << 20), 512U << 10);
  l.max_segments = 16;
  EXPECT_EQ(chunk_bytes(l, MemberOp::kRead, 0x10000, 1 << 20), 64U << 10);
}

TEST(NvmeSplit, NlbCapsAChunkAt65536Blocks) {
  Limits l = limits_4k();
  l.lba_shift = 9;
  l.max_transfer_bytes = 1U << 30;
  l.max_segments = 1U << 16;
  EXPECT_EQ(chunk_bytes(l, MemberOp::kRead, 0, 1ULL << 31), 65536U * 512);
  l.max_zeroes_blocks = kMaxBlocksPerCommand;
  EXPECT_EQ(chunk_bytes(l, MemberOp::kWriteZeroes, 0, 1ULL << 31), 65536U * 512);
  l.max_zeroes_blocks = 256;
  EXPECT_EQ(chunk_bytes(l, MemberOp::kWriteZeroes, 0, 1ULL << 31), 256U * 512);
  l.discard = DiscardMethod::kDeallocate;  // one DSM range takes 32-bit block counts
  EXPECT_EQ(chunk_bytes(l, MemberOp::kDiscard, 0, 1ULL << 31), 1U << 31);
}

// Walks requests of random shape through chunk_bytes: every byte is covered once, in order,
// by chunks that respect every limit.
TEST(NvmeSplit, RandomRequestsAreCoveredExactlyOnceWithinLimits) {
  std::mt19937_64 rng(20240611);
  for (int round = 0; round < 4000; ++round) {
    Limits l;
    l.lba_shift = rng() % 2 ? 9 : 12;
    const std::uint32_t lba = l.lba_size();
    l.max_transfer_bytes = static_cast<std::uint32_t>((1 + rng() % 256) * 4096);
    l.max_segments = rng() % 3 == 0 ? 0 : static_cast<std::uint32_t>(2 + rng() % 300);
    l.max_zeroes_blocks = static_cast<std::uint32_t>(1 + rng() % 70000);
    const MemberOp op = rng() % 3 == 0 ? MemberOp::kWriteZeroes : MemberOp::kRead;
    const std::uint64_t len = (1 + rng() % 3000) * lba;
    const std::uint64_t addr = 0x7f0000000000ULL + (rng() % 4096 / 64) * 64;
    const std::uint64_t segments =
        l.max_segments != 0 ? l.max_segments : l.max_transfer_bytes / kPage;
    std::uint64_t done = 0;
    int chunks = 0;
    while (done < len) {
      const std::uint64_t at = op == MemberOp::kRead ? addr + done : 0;
      const std::uint32_t n = chunk_bytes(l, op, at, len - done);
      ASSERT_GT(n, 0U);
      ASSERT_EQ(n % lba, 0U);
      ASSERT_LE(n, len - done);
      ASSERT_LE(n >> l.lba_shift, kMaxBlocksPerCommand);
      if (op == MemberOp::kRead) {
        ASSERT_LE(n, l.max_transfer_bytes);
        const std::uint64_t pages = (at + n + kPage - 1) / kPage - at / kPage;
        ASSERT_LE(pages, std::max<std::uint64_t>(segments, 2))
            << "addr " << at << " n " << n << " segments " << segments;
      } else {
        ASSERT_LE(n >> l.lba_shift, l.max_zeroes_blocks);
      }
      done += n;
      ++chunks;
    }
    EXPECT_EQ(done, len);
    ASSERT_LT(chunks, 100000);
  }
}

TEST(NvmeSplit, BoundariesOfOneAndTwoCommands) {
  const Limits l = limits_4k();
  const std::uint64_t max = l.max_transfer_bytes;
  EXPECT_EQ(chunk_bytes(l, MemberOp::kRead, 0, max), max) << "exactly the limit: one command";
  EXPECT_EQ(chunk_bytes(l, MemberOp::kRead, 0, max + 4096), max);
  EXPECT_EQ(chunk_bytes(l, MemberOp::kRead, max, 4096), 4096U) << "the rest: one more LBA";
}

// ---- request checks ----------------------------------------------------------------------------

TEST(NvmeCheck, RefusesUnalignedOutOfRangeAndUnsupportedRequests) {
  Limits l = limits_4k();
  const std::uint64_t size = 1 << 20;
  alignas(4096) static std::byte buf[8192];
  Req r;
  r.op = MemberOp::kRead;
  r.buf = buf;
  r.offset = 4096;
  r.len = 4096;
  EXPECT_EQ(check_request(l, size, r), 0);
  r.offset = 512;  // a 512-byte-aligned offset on a 4096-byte-LBA namespace
  EXPECT_EQ(check_request(l, size, r), -EINVAL);
  r.offset = 4096;
  r.len = 512;
  EXPECT_EQ(check_request(l, size, r), -EINVAL);
  r.len = 0;
  EXPECT_EQ(check_request(l, size, r), -EINVAL);
  r.len = 8192;
  r.buf = nullptr;
  EXPECT_EQ(check_request(l, size, r), -EINVAL);
  r.buf = buf;
  r.offset = size - 4096;
  EXPECT_EQ(check_request(l, size, r), -ERANGE);
  r.offset = size;
  r.len = 4096;
  EXPECT_EQ(check_request(l, size, r), -ERANGE);
  r.op = MemberOp::kFlush;
  EXPECT_EQ(check_request(l, size, r), 0) << "a flush has no range";
  r.op = MemberOp::kWriteZeroes;
  r.offset = 0;
  r.buf = nullptr;
  EXPECT_EQ(check_request(l, size, r), 0);
  l.max_zeroes_blocks = 0;
  EXPECT_EQ(check_request(l, size, r), -EOPNOTSUPP);
  r.op = MemberOp::kDiscard;
  EXPECT_EQ(check_request(l, size, r), 0) << "discard method still set";
  l.discard = DiscardMethod::kNone;
  EXPECT_EQ(check_request(l, size, r), -EOPNOTSUPP);
}

// ---- status -> errno ---------------------------------------------------------------------------

struct StatusCase {
  std::int32_t result;
  std::int32_t err;
  Retry retry;
  MemberErrorClass read_class;  // what the array makes of a read failing so
};

TEST(NvmeStatus, TableMapsStatusesToErrnosAndErrorClasses) {
  const StatusCase cases[] = {
      // media errors: retried a few times while DNR is clear; reads are repaired from redundancy
      {0x281, -EIO, Retry::kSoon, MemberErrorClass::kMedia},
      {0x4281, -EIO, Retry::kNo, MemberErrorClass::kMedia},
      {0x280, -EIO, Retry::kSoon, MemberErrorClass::kMedia},
      {0x287, -ENODATA, Retry::kNo, MemberErrorClass::kMedia},
      {0x282, -EILSEQ, Retry::kNo, MemberErrorClass::kMedia},
      {0x286, -EACCES, Retry::kNo, MemberErrorClass::kDevice},
      // the request was wrong: the request fails, the member stays (CRD or not)
      {0x4002, -EINVAL, Retry::kNo, MemberErrorClass::kRequest},
      {0x0802, -EINVAL, Retry::kNo, MemberErrorClass::kRequest},
      {0x4080, -ERANGE, Retry::kNo, MemberErrorClass::kRequest},
      {0x0880, -ERANGE, Retry::kNo, MemberErrorClass::kRequest},
      {0x183, -EINVAL, Retry::kNo, MemberErrorClass::kRequest},
      // the drive cannot: never a member failure for discard/zeroes (see below)
      {0x4001, -EOPNOTSUPP, Retry::kNo, MemberErrorClass::kUnsupported},
      // "retry later": retried for the bound while DNR is clear, then the member fails
      {0x082, -EREMOTEIO, Retry::kLater, MemberErrorClass::kDevice},
      {0x4082, -EREMOTEIO, Retry::kNo, MemberErrorClass::kDevice},
      {0x021, -EREMOTEIO, Retry::kLater, MemberErrorClass::kDevice},
      {0x0821, -EREMOTEIO, Retry::kLater, MemberErrorClass::kDevice},
      {0x4821, -EREMOTEIO, Retry::kNo, MemberErrorClass::kDevice},
      {0x022, -ENOLINK, Retry::kLater, MemberErrorClass::kDevice},
      {0x084, -EREMOTEIO, Retry::kLater, MemberErrorClass::kDevice},
      {0x300, -ENOLINK, Retry::kLater, MemberErrorClass::kDevice},
      {0x303, -ENOLINK, Retry::kLater, MemberErrorClass::kDevice},
      {0x370, -ENOLINK, Retry::kLater, MemberErrorClass::kDevice},
      {0x371, -ENOLINK, Retry::kLater, MemberErrorClass::kDevice},
      {0x3ab, -ENOLINK, Retry::kLater, MemberErrorClass::kDevice},  // any path status
      {0x4370, -ENOLINK, Retry::kNo, MemberErrorClass::kDevice},
      // not there, or refused for good
      {0x00b, -ENODEV, Retry::kNo, MemberErrorClass::kDevice},
      {0x006, -EIO, Retry::kSoon, MemberErrorClass::kMedia},
      {0x081, -ENOSPC, Retry::kNo, MemberErrorClass::kDevice},
      {0x182, -EROFS, Retry::kNo, MemberErrorClass::kDevice},
      // unknown codes and vendor statuses: a generic I/O error
      {0x7ff, -EIO, Retry::kSoon, MemberErrorClass::kMedia},
      {0x47c0, -EIO, Retry::kNo, MemberErrorClass::kMedia},
      // kernel errors pass through; -EAGAIN/-EINTR are retried
      {-EAGAIN, -EAGAIN, Retry::kKernel, MemberErrorClass::kDevice},
      {-EINTR, -EINTR, Retry::kKernel, MemberErrorClass::kDevice},
      {-ENODEV, -ENODEV, Retry::kNo, MemberErrorClass::kDevice},
      {-EOPNOTSUPP, -EOPNOTSUPP, Retry::kNo, MemberErrorClass::kUnsupported},
  };
  for (const StatusCase& c : cases) {
    SCOPED_TRACE(c.result);
    const Outcome o = decode_result(c.result);
    EXPECT_EQ(o.err, c.err);
    EXPECT_EQ(o.retry, c.retry);
    EXPECT_EQ(classify_member_error(MemberOp::kRead, o.err), c.read_class);
  }
  // Success, also with the More bit (or CRD) set in an otherwise clean status.
  EXPECT_EQ(decode_result(0).err, 0);
  EXPECT_EQ(decode_result(0x2000).err, 0);
  EXPECT_EQ(decode_result(0x1800).err, 0);
  // A drive without Write Zeroes: the array writes zeroes itself rather than failing the member.
  EXPECT_EQ(classify_member_error(MemberOp::kWriteZeroes, decode_result(0x4002).err),
            MemberErrorClass::kUnsupported);
  EXPECT_EQ(classify_member_error(MemberOp::kDiscard, decode_result(0x4001).err),
            MemberErrorClass::kUnsupported);
  // LBA Out of Range is the command's fault whatever the command: the member stays.
  for (MemberOp op :
       {MemberOp::kRead, MemberOp::kWrite, MemberOp::kDiscard, MemberOp::kWriteZeroes}) {
    EXPECT_EQ(classify_member_error(op, decode_result(0x4080).err), MemberErrorClass::kRequest)
        << static_cast<int>(op);
  }
  // A write that hits a media error fails the member (md does the same).
  EXPECT_EQ(classify_member_error(MemberOp::kWrite, decode_result(0x4280).err),
            MemberErrorClass::kDevice);
}

TEST(NvmeStatus, NamesForLogs) {
  EXPECT_STREQ(status_name(0x281), "unrecovered read error");
  EXPECT_STREQ(status_name(0x4281), "unrecovered read error") << "DNR does not change the code";
  EXPECT_STREQ(status_name(0x2ff), "media or data integrity error");
  EXPECT_STREQ(status_name(0x7c0), "vendor specific error");
}

}  // namespace
}  // namespace graid::nvme
