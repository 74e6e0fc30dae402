// The passthrough member's retry policy: which statuses are retried (DNR, CRD, "retry later"
// kinds), how long each resend waits (CRDT, backoff) and for how long in all (the 30 s bound);
// then nvme::IoOp carrying it out on a fake ring with its own clock (waits measured exactly, not
// by the wall clock), and its retry timer on a real ring.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <tuple>
#include <utility>

#include "graid/buffer.h"
#include "graid/member.h"
#include "io/nvme_command.h"
#include "io/nvme_io_op.h"
#include "member_io_helpers.h"
#include "nvme_fake_sink.h"
#include "state/member_errors.h"

namespace graid::nvme {
namespace {

using graid::testing::CountingRequest;
using graid::testing::make_buffer;
using testing::FakeSink;
using testing::kPath;
using testing::Sent;
using testing::small_limits;

// The status field's bits as the kernel hands them over: SC 7:0, SCT 10:8, CRD 12:11, More 13,
// DNR 14 (the completion's Status Field without the phase tag).
TEST(NvmeStatus, CrdSelectsOneOfTheControllersThreeDelays) {
  EXPECT_EQ(decode_result(0x0021).crd, 0);
  EXPECT_EQ(decode_result(0x0821).crd, 1);
  EXPECT_EQ(decode_result(0x1021).crd, 2);
  EXPECT_EQ(decode_result(0x1821).crd, 3);
  EXPECT_EQ(decode_result(0x3821).crd, 3) << "the More bit is not part of CRD";
  EXPECT_EQ(decode_result(0x1821).err, -EREMOTEIO) << "CRD is not part of the code";
}

constexpr std::int64_t kMs = 1'000'000;

TEST(NvmeRetry, CrdWaitsItsCrdtInHundredsOfMilliseconds) {
  Limits l;
  l.crdt = {3, 20, 0};
  EXPECT_EQ(retry_delay_ns(decode_result(0x0821), l, 0, 0), 300 * kMs);
  EXPECT_EQ(retry_delay_ns(decode_result(0x1082), l, 5, 1000 * kMs), 2000 * kMs);
  // A media error with CRD waits too, for its few tries.
  EXPECT_EQ(retry_delay_ns(decode_result(0x0a81), l, 0, 0), 300 * kMs);
  EXPECT_EQ(retry_delay_ns(decode_result(0x0281), l, 0, 0), 0) << "no CRD: at once";
  EXPECT_EQ(retry_delay_ns(decode_result(0x0281), l, kStatusRetries, 0), std::nullopt);
  // CRD 3 with a CRDT3 of 0 asks for no wait: a "retry later" status still backs off a little.
  EXPECT_EQ(retry_delay_ns(decode_result(0x1821), l, 0, 0), kBackoffFirstNs);
}

TEST(NvmeRetry, RetryLaterBacksOffWithoutCrdAndStopsAtTheBound) {
  const Limits l;
  const Outcome path = decode_result(0x303);
  EXPECT_EQ(retry_delay_ns(path, l, 0, 0), 1 * kMs);
  EXPECT_EQ(retry_delay_ns(path, l, 1, 1 * kMs), 2 * kMs);
  EXPECT_EQ(retry_delay_ns(path, l, 9, 0), 512 * kMs);
  EXPECT_EQ(retry_delay_ns(path, l, 10, 0), 1000 * kMs);
  EXPECT_EQ(retry_delay_ns(path, l, 500, 0), 1000 * kMs) << "capped, and not by count";
  EXPECT_EQ(kTransientRetryNs, 30'000 * kMs) << "the documented default";
  // The last wait ends exactly at the bound; past it, no more tries.
  EXPECT_EQ(retry_delay_ns(path, l, 40, kTransientRetryNs - 100 * kMs), 100 * kMs);
  EXPECT_EQ(retry_delay_ns(path, l, 40, kTransientRetryNs), std::nullopt);
  // A CRDT longer than the bound is cut short at it.
  Limits slow;
  slow.crdt = {65535, 0, 0};  // 109 minutes
  EXPECT_EQ(retry_delay_ns(decode_result(0x0821), slow, 0, 0), kTransientRetryNs);
  // DNR, and request errors, are never retried; kernel -EAGAIN by count only.
  EXPECT_EQ(retry_delay_ns(decode_result(0x4303), l, 0, 0), std::nullopt);
  EXPECT_EQ(retry_delay_ns(decode_result(0x0802), l, 0, 0), std::nullopt);
  EXPECT_EQ(retry_delay_ns(decode_result(-EAGAIN), l, 999, 0), 0);
  EXPECT_EQ(retry_delay_ns(decode_result(-EAGAIN), l, kAgainRetries, 0), std::nullopt);
}

TEST(NvmeRetry, StateCountsEachKindAndTheTimeSinceTheFirstFailure) {
  const Limits l;
  RetryState r;
  const std::int64_t t0 = 5'000 * kMs;
  EXPECT_EQ(r.next(decode_result(0x281), l, t0), 0);  // media, DNR clear: try 2
  EXPECT_EQ(r.next(decode_result(0x303), l, t0 + 1 * kMs), 1 * kMs) << "its own count: 0";
  for (unsigned i = 1; i < kStatusRetries; ++i)
    EXPECT_EQ(r.next(decode_result(0x281), l, t0 + 2 * kMs), 0);
  EXPECT_EQ(r.next(decode_result(0x281), l, t0 + 3 * kMs), std::nullopt) << "media tries spent";
  EXPECT_EQ(r.total(), kStatusRetries + 1U);
  EXPECT_EQ(r.next(decode_result(0x303), l, t0 + kTransientRetryNs), std::nullopt)
      << "the bound counts from the first failure, whatever its kind";
  EXPECT_EQ(r.failing_ns(t0 + 7 * kMs), 7 * kMs);
}

// Command Interrupted with CRD = 1 (0x0821: SC 21h, SCT 0, CRD 01b in bits 12:11) twice, then
// success: the command is sent three times, each resend only after CRDT1 x 100 ms, waited on the
// ring (a timeout SQE), never by sending it again at once.
TEST(NvmeIoOp, CrdWaitsTheControllersRetryDelayOnTheRingBeforeSendingAgain) {
  FakeSink sink;
  Limits l = small_limits();
  l.crdt = {3, 20, 50};  // 300 ms, 2 s, 5 s
  AlignedBuffer buf = make_buffer(4096);
  CountingRequest req;
  req.op = MemberOp::kRead;
  req.offset = 8192;
  req.len = 4096;
  req.buf = buf.data();
  IoOp op;
  const std::int64_t start = sink.now;
  op.start(sink, l, kPath, req);
  const Sent first = sink.complete(0, 0x0821);
  for (int round = 0; round < 2; ++round) {
    EXPECT_TRUE(sink.pending.empty()) << "not sent again before the delay";
    ASSERT_EQ(sink.timers.size(), 1U);
    EXPECT_EQ(sink.timers[0].wait_ns, 300'000'000) << "CRDT1 x 100 ms";
    EXPECT_EQ(req.calls, 0);
    sink.expire_timer();
    ASSERT_EQ(sink.pending.size(), 1U);
    EXPECT_EQ(std::memcmp(&first.nvme, &sink.pending[0].nvme, sizeof(first.nvme)), 0)
        << "the same command again";
    sink.complete(0, round == 0 ? 0x0821 : 0);
  }
  EXPECT_EQ(sink.submitted, 3);
  EXPECT_GE(sink.now - start, 600'000'000) << "two waits of CRDT1";
  ASSERT_EQ(req.calls, 1);
  EXPECT_EQ(req.result, 4096);

  // CRD 2 and 3 select CRDT2 and CRDT3.
  for (const auto& [status, wait] : {std::pair{0x1082, std::int64_t{2'000'000'000}},
                                     std::pair{0x1821, std::int64_t{5'000'000'000}}}) {
    CountingRequest r;
    r.op = MemberOp::kFlush;
    IoOp o;
    o.start(sink, l, kPath, r);
    sink.complete(0, status);
    ASSERT_EQ(sink.timers.size(), 1U) << status;
    EXPECT_EQ(sink.expire_timer(), wait) << status;
    sink.complete(0, 0);
    EXPECT_EQ(r.result, 0);
  }
}

// A path error (and the other "retry later" statuses) that never clears: resent, backing off,
// until 30 s after the first failure and not before; then the request fails with an errno the
// array treats as a device error, which fails the member.
TEST(NvmeIoOp, RetryLaterStatusesThatPersistFailTheMemberAfterTheBound) {
  const std::pair<std::int32_t, std::int32_t> cases[] = {
      {0x303, -ENOLINK},     // asymmetric access transition
      {0x370, -ENOLINK},     // host pathing error
      {0x082, -EREMOTEIO},   // namespace not ready
      {0x021, -EREMOTEIO},   // command interrupted
      {0x0821, -EREMOTEIO},  // the same with CRD 1 and a CRDT1 of 0: no wait asked
  };
  for (const auto& [status, err] : cases) {
    SCOPED_TRACE(status);
    FakeSink sink;
    const Limits l = small_limits();
    AlignedBuffer buf = make_buffer(4096);
    CountingRequest req;
    req.op = MemberOp::kWrite;
    req.len = 4096;
    req.buf = buf.data();
    IoOp op;
    const std::int64_t start = sink.now;
    op.start(sink, l, kPath, req);
    int tries = 0;
    for (;;) {
      ASSERT_EQ(sink.pending.size(), 1U);
      sink.complete(0, status);
      ++tries;
      if (req.calls != 0) break;
      EXPECT_LT(sink.now - start, kTransientRetryNs) << "still trying past the bound";
      ASSERT_EQ(sink.timers.size(), 1U) << "each resend waits on the ring";
      EXPECT_GT(sink.timers[0].wait_ns, 0);
      sink.expire_timer();
    }
    EXPECT_EQ(sink.now - start, kTransientRetryNs) << "failed at the bound, not before";
    // Waits of 1, 2, 4 ... 512 ms, then 1 s steps, the last cut to end at 30 s: 39 resends,
    // far more than a media error's few, far fewer than hammering the path would make.
    EXPECT_EQ(tries, 40);
    EXPECT_EQ(req.result, err);
    EXPECT_EQ(classify_member_error(MemberOp::kWrite, req.result), MemberErrorClass::kDevice);
    EXPECT_EQ(classify_member_error(MemberOp::kRead, req.result), MemberErrorClass::kDevice);
  }

  // One that clears before the bound: the request succeeds.
  FakeSink sink;
  const Limits l = small_limits();
  CountingRequest req;
  req.op = MemberOp::kFlush;
  IoOp op;
  op.start(sink, l, kPath, req);
  for (int i = 0; i < 5; ++i) {
    sink.complete(0, 0x302);  // asymmetric access inaccessible
    ASSERT_EQ(sink.timers.size(), 1U);
    sink.expire_timer();
  }
  sink.complete(0, 0);
  ASSERT_EQ(req.calls, 1);
  EXPECT_EQ(req.result, 0);
}

// DNR set: the controller says the command would fail again. No retry and no wait, whatever
// CRD says; "retry later" statuses then fail the member at once, request errors do not.
TEST(NvmeIoOp, DnrStopsRetriesAtOnce) {
  const std::tuple<std::int32_t, std::int32_t, MemberErrorClass> cases[] = {
      {0x4303, -ENOLINK, MemberErrorClass::kDevice},
      {0x4821, -EREMOTEIO, MemberErrorClass::kDevice},  // command interrupted, CRD 1, DNR
      {0x4082, -EREMOTEIO, MemberErrorClass::kDevice},
      {0x4802, -EINVAL, MemberErrorClass::kRequest},  // invalid field, CRD 1, DNR
      {0x4880, -ERANGE, MemberErrorClass::kRequest},  // LBA out of range, CRD 1, DNR
  };
  for (const auto& [status, err, cls] : cases) {
    SCOPED_TRACE(status);
    FakeSink sink;
    Limits l = small_limits();
    l.crdt = {10, 10, 10};
    AlignedBuffer buf = make_buffer(4096);
    CountingRequest req;
    req.op = MemberOp::kRead;
    req.len = 4096;
    req.buf = buf.data();
    IoOp op;
    op.start(sink, l, kPath, req);
    sink.complete(0, status);
    EXPECT_TRUE(sink.pending.empty());
    EXPECT_TRUE(sink.timers.empty());
    EXPECT_EQ(sink.submitted, 1);
    ASSERT_EQ(req.calls, 1);
    EXPECT_EQ(req.result, err);
    EXPECT_EQ(classify_member_error(MemberOp::kRead, req.result), cls);
  }
}

// A piece waiting to be resent when another piece of the request fails for good: it is not
// sent again, and the request completes (with the first error) once its timer is done.
TEST(NvmeIoOp, AWaitingPieceEndsWhenAnotherPieceFails) {
  FakeSink sink;
  const Limits l = small_limits();
  AlignedBuffer buf = make_buffer(128 << 10);
  CountingRequest req;
  req.op = MemberOp::kRead;
  req.len = 128 << 10;  // two 64 KiB commands
  req.buf = buf.data();
  IoOp op;
  op.start(sink, l, kPath, req);
  ASSERT_EQ(sink.pending.size(), 2U);
  sink.complete(0, 0x303);
  ASSERT_EQ(sink.timers.size(), 1U);
  sink.complete(0, 0x4281);
  EXPECT_EQ(req.calls, 0) << "the waiting piece still counts";
  sink.expire_timer();
  EXPECT_TRUE(sink.pending.empty()) << "not sent again";
  ASSERT_EQ(req.calls, 1);
  EXPECT_EQ(req.result, -EIO);
  EXPECT_EQ(sink.submitted, 2);
}

// The retry timer on a real ring: the kernel takes the timeout SQE RetryTimer builds and
// completes it no sooner than asked, while the thread keeps polling (commands are answered by a
// task on the same ring, since a file has no NVMe to answer them).
TEST(NvmeIoOp, RetryTimerWaitsOnARealRing) {
  auto ctx = IoContext::create(member_ring_options(16));  // as the member's threads make them
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  class RingSink final : public CommandSink, public Task {
   public:
    explicit RingSink(IoContext& c) : ctx(c) {}
    void submit(RingCommand& cmd) override {
      pending = &cmd;
      ++sent;
      ctx.defer(*this);
    }
    void submit_timer(RingCommand& cmd) override { ctx.submit_command(cmd); }
    std::int64_t now_ns() const override { return ctx.clock_ns(); }
    std::optional<std::uint16_t> registered_buffer(const std::byte*, std::size_t) const override {
      return std::nullopt;
    }
    void run() override {  // the "drive": Command Interrupted with CRD 1 twice, then success
      RingCommand* cmd = std::exchange(pending, nullptr);
      cmd->on_complete(sent < 3 ? 0x0821 : 0, {});
    }
    IoContext& ctx;
    RingCommand* pending = nullptr;
    int sent = 0;
  } sink(**ctx);
  Limits l = small_limits();
  l.crdt = {1, 0, 0};  // 100 ms
  CountingRequest req;
  req.op = MemberOp::kFlush;
  IoOp op;
  const auto start = std::chrono::steady_clock::now();
  op.start(sink, l, kPath, req);
  int polls = 0;
  while (req.calls == 0) {
    (*ctx)->poll(true);
    ++polls;
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(sink.sent, 3);
  EXPECT_EQ(req.result, 0);
  EXPECT_GE(waited, std::chrono::milliseconds(200)) << "two waits of CRDT1 = 100 ms";
  EXPECT_EQ((*ctx)->in_flight(), 0U);
  EXPECT_GE((*ctx)->stats().commands, 2U) << "the waits were ring commands";
}

}  // namespace
}  // namespace graid::nvme
