// The passthrough member's request state machine (nvme::IoOp) against a fake command sink: the
// SQEs its commands fill, split requests covered exactly once through the in-flight window,
// retries, first-error-wins with in-flight pieces drained, exactly one completion. Then the
// member itself on real rings (no NVMe here: its commands reach a regular file, which has no
// uring_cmd), and open_member on character devices that are not NVMe.
#include "io/nvme_io_op.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <liburing.h>
#include <linux/nvme_ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "graid/buffer.h"
#include "graid/member.h"
#include "io/nvme_member.h"
#include "member_io_helpers.h"
#include "nvme_fake_sink.h"
#include "temp_dir.h"

namespace graid::nvme {
namespace {

using graid::testing::CountingRequest;
using graid::testing::make_buffer;
using testing::FakeSink;
using testing::kPath;
using testing::Sent;
using testing::small_limits;

TEST(NvmeIoOp, ReadSplitsIntoCommandsCoveringEveryBlockOnce) {
  FakeSink sink;
  const Limits l = small_limits();
  AlignedBuffer buf = make_buffer(1 << 20);
  CountingRequest req;
  req.op = MemberOp::kRead;
  req.offset = 3 << 20;
  req.len = 1 << 20;  // 16 commands of 64 KiB, 8 at a time
  req.buf = buf.data();
  IoOp op;
  op.start(sink, l, kPath, req);
  EXPECT_EQ(sink.pending.size(), IoOp::kWindow);
  std::map<std::uint64_t, std::uint32_t> covered;  // slba -> blocks
  std::mt19937 rng(7);
  while (!sink.pending.empty()) {
    EXPECT_EQ(req.calls, 0) << "no completion before the last command";
    EXPECT_LE(sink.pending.size(), IoOp::kWindow);
    const Sent s = sink.complete(rng() % sink.pending.size(), 0);
    EXPECT_EQ(s.opcode, IORING_OP_URING_CMD);
    EXPECT_EQ(s.cmd_op, NVME_URING_CMD_IO);
    EXPECT_EQ(s.uring_cmd_flags, 0U) << "no registered buffer";
    EXPECT_EQ(s.nvme.opcode, kOpRead);
    EXPECT_EQ(s.nvme.nsid, 1U);
    const std::uint64_t slba = s.nvme.cdw10 | std::uint64_t{s.nvme.cdw11} << 32;
    const std::uint32_t blocks = (s.nvme.cdw12 & 0xffff) + 1;
    EXPECT_EQ(s.nvme.data_len, blocks * 512);
    // The buffer address follows the LBA: byte k of the request is byte k of the buffer.
    EXPECT_EQ(s.nvme.addr,
              reinterpret_cast<std::uintptr_t>(buf.data()) + (slba * 512 - req.offset));
    EXPECT_TRUE(covered.emplace(slba, blocks).second) << "LBA " << slba << " sent twice";
  }
  EXPECT_EQ(sink.submitted, 16);
  ASSERT_EQ(req.calls, 1);
  EXPECT_EQ(req.result, static_cast<std::int32_t>(req.len));
  std::uint64_t next = req.offset / 512;
  for (const auto& [slba, blocks] : covered) {
    EXPECT_EQ(slba, next) << "a gap or an overlap";
    next = slba + blocks;
  }
  EXPECT_EQ(next, (req.offset + req.len) / 512);
}

TEST(NvmeIoOp, WriteCarriesFuaOnEveryPieceAndUsesTheRegisteredBuffer) {
  FakeSink sink;
  const Limits l = small_limits();
  AlignedBuffer buf = make_buffer(256 << 10);
  sink.region = buf.span();
  const std::uint64_t fixed_before = IoOp::fixed_buffer_commands();
  CountingRequest req;
  req.op = MemberOp::kWrite;
  req.offset = 4096;
  req.len = 200 << 10;  // 64 + 64 + 64 + 8 KiB
  req.buf = buf.data();
  req.fua = true;
  IoOp op;
  op.start(sink, l, kPath, req);
  ASSERT_EQ(sink.pending.size(), 4U);
  std::uint32_t total = 0;
  while (!sink.pending.empty()) {
    const Sent s = sink.complete(0, 0);
    EXPECT_EQ(s.nvme.opcode, kOpWrite);
    EXPECT_NE(s.nvme.cdw12 & kCdw12Fua, 0U);
    EXPECT_EQ(s.uring_cmd_flags, IORING_URING_CMD_FIXED);
    EXPECT_EQ(s.buf_index, 3);
    total += s.nvme.data_len;
  }
  EXPECT_EQ(total, req.len);
  EXPECT_EQ(IoOp::fixed_buffer_commands() - fixed_before, 4U);
  ASSERT_EQ(req.calls, 1);
  EXPECT_EQ(req.result, static_cast<std::int32_t>(req.len));
}

TEST(NvmeIoOp, FlushIsOneCommandAndCompletesWithZero) {
  FakeSink sink;
  const Limits l = small_limits();
  CountingRequest req;
  req.op = MemberOp::kFlush;
  IoOp op;
  op.start(sink, l, kPath, req);
  ASSERT_EQ(sink.pending.size(), 1U);
  const Sent s = sink.complete(0, 0);
  EXPECT_EQ(s.nvme.opcode, kOpFlush);
  EXPECT_EQ(s.nvme.data_len, 0U);
  EXPECT_EQ(sink.submitted, 1);
  ASSERT_EQ(req.calls, 1);
  EXPECT_EQ(req.result, 0);
}

TEST(NvmeIoOp, DiscardSplitsAtTheWriteZeroesLimit) {
  FakeSink sink;
  const Limits l = small_limits();  // 1024 blocks of 512 per Write Zeroes
  CountingRequest req;
  req.op = MemberOp::kDiscard;
  req.offset = 0;
  req.len = 3 * 1024 * 512 + 512;
  IoOp op;
  op.start(sink, l, kPath, req);
  ASSERT_EQ(sink.pending.size(), 4U);
  std::uint32_t blocks = 0;
  while (!sink.pending.empty()) {
    const Sent s = sink.complete(0, 0);
    EXPECT_EQ(s.nvme.opcode, kOpWriteZeroes);
    EXPECT_NE(s.nvme.cdw12 & kCdw12Deallocate, 0U);
    EXPECT_EQ(s.nvme.addr, 0U);
    blocks += (s.nvme.cdw12 & 0xffff) + 1;
  }
  EXPECT_EQ(blocks, 3U * 1024 + 1);
  EXPECT_EQ(req.result, 0);
}

TEST(NvmeIoOp, FirstErrorStopsNewPiecesAndWaitsForThoseInFlight) {
  FakeSink sink;
  const Limits l = small_limits();
  AlignedBuffer buf = make_buffer(1 << 20);
  CountingRequest req;
  req.op = MemberOp::kRead;
  req.len = 1 << 20;
  req.buf = buf.data();
  IoOp op;
  op.start(sink, l, kPath, req);
  ASSERT_EQ(sink.pending.size(), IoOp::kWindow);
  sink.complete(2, 0x4281);  // unrecovered read error, do not retry
  EXPECT_EQ(sink.pending.size(), IoOp::kWindow - 1) << "no piece replaces the failed one";
  sink.complete(0, 0);  // a success after the error starts nothing new either
  EXPECT_EQ(sink.pending.size(), IoOp::kWindow - 2);
  sink.complete(0, 0x4280);  // a second error: the first one is reported
  while (sink.pending.size() > 1)
    sink.complete(0, 0);
  EXPECT_EQ(req.calls, 0) << "a piece is still in the kernel: the buffer is still in use";
  sink.complete(0, 0);
  EXPECT_EQ(sink.submitted, static_cast<int>(IoOp::kWindow));
  ASSERT_EQ(req.calls, 1);
  EXPECT_EQ(req.result, -EIO);
}

TEST(NvmeIoOp, RetryableStatusesResendTheSamePieceWithinABudget) {
  FakeSink sink;
  const Limits l = small_limits();
  AlignedBuffer buf = make_buffer(4096);
  CountingRequest req;
  req.op = MemberOp::kRead;
  req.offset = 8192;
  req.len = 4096;
  req.buf = buf.data();
  IoOp op;
  op.start(sink, l, kPath, req);
  // An internal error, DNR clear, no CRD: resent at once, then it works.
  Sent first = sink.complete(0, 0x006);
  ASSERT_EQ(sink.pending.size(), 1U);
  EXPECT_TRUE(sink.timers.empty());
  EXPECT_EQ(std::memcmp(&first.nvme, &sink.pending[0].nvme, sizeof(first.nvme)), 0)
      << "the same command again";
  sink.complete(0, 0);
  ASSERT_EQ(req.calls, 1);
  EXPECT_EQ(req.result, 4096);

  // A media error that stays: 1 + kStatusRetries tries, then -EIO.
  CountingRequest bad;
  bad.op = MemberOp::kRead;
  bad.len = 4096;
  bad.buf = buf.data();
  IoOp op2;
  const int before = sink.submitted;
  op2.start(sink, l, kPath, bad);
  while (!sink.pending.empty())
    sink.complete(0, 0x281);
  EXPECT_EQ(sink.submitted - before, 1 + kStatusRetries);
  ASSERT_EQ(bad.calls, 1);
  EXPECT_EQ(bad.result, -EIO);

  // Invalid field is not worth resending, DNR or not.
  CountingRequest wrong;
  wrong.op = MemberOp::kWrite;
  wrong.len = 4096;
  wrong.buf = buf.data();
  IoOp op3;
  const int before3 = sink.submitted;
  op3.start(sink, l, kPath, wrong);
  sink.complete(0, 0x002);
  EXPECT_EQ(sink.submitted - before3, 1);
  EXPECT_EQ(wrong.result, -EINVAL);
}

TEST(NvmeIoOp, RecycledBeforeTheCallbackSoTheCallbackMayStartAnother) {
  static IoOp* recycled = nullptr;
  FakeSink sink;
  const Limits l = small_limits();
  CountingRequest req;
  req.op = MemberOp::kFlush;
  IoOp op;
  op.start(sink, l, kPath, req, [](IoOp& o) {
    EXPECT_TRUE(o.idle());
    recycled = &o;
  });
  sink.complete(0, 0);
  EXPECT_EQ(recycled, &op);
  EXPECT_EQ(req.calls, 1);
}

TEST(NvmeIoOp, PrepRefusesACommandAreaTooSmallForTheCommand) {
  const Limits l = small_limits();
  CountingRequest req;
  req.op = MemberOp::kFlush;
  class Sink final : public CommandSink {
   public:
    void submit(RingCommand& c) override { cmd = &c; }
    void submit_timer(RingCommand&) override { ADD_FAILURE() << "no retry expected"; }
    std::int64_t now_ns() const override { return 0; }
    std::optional<std::uint16_t> registered_buffer(const std::byte*, std::size_t) const override {
      return std::nullopt;
    }
    RingCommand* cmd = nullptr;
  } sink;
  IoOp op;
  op.start(sink, l, kPath, req);
  ASSERT_NE(sink.cmd, nullptr);
  alignas(64) std::byte sqe_bytes[64] = {};
  auto& sqe = *reinterpret_cast<io_uring_sqe*>(sqe_bytes);
  EXPECT_EQ(sink.cmd->prep(sqe, {sqe_bytes + 48, 16}), -EOPNOTSUPP);
  sink.cmd->on_complete(-EOPNOTSUPP, {});
  EXPECT_EQ(req.result, -EOPNOTSUPP);
}

// ---- the member on real rings ------------------------------------------------------------------

class NvmeMemberOnRing : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = dir_.path() + "/not-nvme";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 1 << 20), 0);
    Limits l = small_limits();
    l.lba_shift = 12;
    member_ =
        make_nvme_member_for_testing(path, std::make_shared<MemberFile>(fd, false), l, 1 << 20);
  }
  static void drain(IoContext& ctx) {
    while (ctx.in_flight() > 0)
      ctx.poll(true);
  }
  graid::testing::TempDir dir_{"/tmp"};
  std::unique_ptr<MemberDevice> member_;
};

TEST_F(NvmeMemberOnRing, ReportsPassthroughAndItsLbaSize) {
  EXPECT_EQ(member_->io_mode(), MemberIoMode::kPassthrough);
  EXPECT_TRUE(member_->direct_io());
  EXPECT_EQ(member_->logical_block_size(), 4096U);
  EXPECT_EQ(member_->size(), 1U << 20);
}

TEST_F(NvmeMemberOnRing, ANormalRingFailsEveryRequestWithEopnotsupp) {
  auto ctx = IoContext::create(16);
  ASSERT_TRUE(ctx.is_ok());
  AlignedBuffer buf = make_buffer(8192);
  std::memset(buf.data(), 0x5a, buf.size());
  CountingRequest reqs[3];
  reqs[0].op = MemberOp::kWrite;
  reqs[1].op = MemberOp::kRead;
  reqs[2].op = MemberOp::kFlush;
  for (auto& r : reqs) {
    if (r.op != MemberOp::kFlush) {
      r.len = 8192;
      r.buf = buf.data();
    }
    member_->submit(**ctx, r);
    EXPECT_EQ(r.calls, 0) << "never inline";
  }
  drain(**ctx);
  for (auto& r : reqs) {
    EXPECT_EQ(r.calls, 1);
    EXPECT_EQ(r.result, -EOPNOTSUPP);
  }
  EXPECT_EQ((*ctx)->stats().commands, 0U) << "nothing reached the ring";
}

TEST_F(NvmeMemberOnRing, ABigRingSendsUringCmdsWhichAPlainFileRefuses) {
  IoContextOptions o;
  o.queue_depth = 16;
  o.big_sqe = true;
  o.big_cqe = true;
  auto ctx = IoContext::create(o);
  if (!ctx.is_ok()) GTEST_SKIP() << "no SQE128/CQE32 rings here: " << ctx.status().to_string();
  AlignedBuffer buf = make_buffer(256 << 10);
  CountingRequest write;
  write.op = MemberOp::kWrite;
  write.len = 256 << 10;  // four 64 KiB commands
  write.buf = buf.data();
  member_->submit(**ctx, write);
  drain(**ctx);
  ASSERT_EQ(write.calls, 1);
  // A regular file has no uring_cmd: io_uring answers -EOPNOTSUPP, which is not retried.
  EXPECT_EQ(write.result, -EOPNOTSUPP);
  EXPECT_EQ((*ctx)->stats().commands, 4U) << "all four pieces went to the kernel";
}

TEST_F(NvmeMemberOnRing, MisalignedAndOutOfRangeRequestsNeverReachTheRing) {
  IoContextOptions o;
  o.big_sqe = true;
  o.big_cqe = true;
  auto ctx = IoContext::create(o);
  if (!ctx.is_ok()) GTEST_SKIP() << "no SQE128/CQE32 rings here: " << ctx.status().to_string();
  AlignedBuffer buf = make_buffer(8192);
  CountingRequest misaligned, beyond;
  misaligned.op = MemberOp::kRead;
  misaligned.offset = 512;  // the namespace has 4096-byte LBAs
  misaligned.len = 4096;
  misaligned.buf = buf.data();
  beyond.op = MemberOp::kWrite;
  beyond.offset = (1 << 20) - 4096;
  beyond.len = 8192;
  beyond.buf = buf.data();
  member_->submit(**ctx, misaligned);
  member_->submit(**ctx, beyond);
  drain(**ctx);
  EXPECT_EQ(misaligned.result, -EINVAL);
  EXPECT_EQ(beyond.result, -ERANGE);
  EXPECT_EQ((*ctx)->stats().commands, 0U);
}

TEST_F(NvmeMemberOnRing, SyncCallsCheckAlignmentAndReportTheIoctlFailing) {
  AlignedBuffer buf = make_buffer(8192);
  Status st = member_->read_sync(512, buf.span().subspan(0, 4096));
  EXPECT_EQ(st.code(), Errc::kInvalidArgument);
  st = member_->read_sync(1 << 20, buf.span().subspan(0, 4096));
  EXPECT_EQ(st.code(), Errc::kOutOfRange);
  st = member_->write_sync(0, buf.span());
  EXPECT_EQ(st.code(), Errc::kIoError) << st.to_string();
  EXPECT_NE(st.message().find("NVMe write"), std::string::npos) << st.message();
  EXPECT_EQ(member_->zero_range(0, 512).code(), Errc::kInvalidArgument);
  EXPECT_EQ(member_->zero_range(0, 2 << 20).code(), Errc::kOutOfRange);
}

TEST(NvmeOpen, CharacterDevicesThatAreNotNvmeAreRefusedClearly) {
  for (const char* path : {"/dev/null", "/dev/zero"}) {
    auto m = open_member(path);
    ASSERT_FALSE(m.is_ok()) << path;
    EXPECT_EQ(m.status().code(), Errc::kInvalidArgument);
    EXPECT_NE(m.status().message().find("not an NVMe generic namespace device"), std::string::npos)
        << m.status().message();
    EXPECT_NE(m.status().message().find(path), std::string::npos);
  }
  auto sibling = nvme_sibling_path("/dev/null");
  EXPECT_EQ(sibling.status().code(), Errc::kNotFound);
}

TEST(NvmeOpen, MemberRingsAreBigWhereTheKernelHasThem) {
  IoContextOptions o;
  o.big_sqe = true;
  o.big_cqe = true;
  o.plain_if_refused = true;
  auto ctx = IoContext::create(o);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  // Either what was asked for, or (a kernel before 5.19) a plain ring: never half of it.
  EXPECT_EQ((*ctx)->big_sqe(), (*ctx)->big_cqe());
  IoContextOptions strict = o;
  strict.plain_if_refused = false;
  auto strict_ctx = IoContext::create(strict);
  EXPECT_EQ(strict_ctx.is_ok(), (*ctx)->big_sqe());
}

}  // namespace
}  // namespace graid::nvme
