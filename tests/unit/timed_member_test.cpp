// The benchmarks' timed member model: parsing of --member-model, completion timing (latency and
// bandwidth, measured loosely: a noisy machine may be late, never early), the stored head and
// refusals.
#include "timed_member.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "graid/buffer.h"
#include "graid/member.h"
#include "member_io_helpers.h"

namespace graid::bench {
namespace {

using graid::testing::CountingRequest;
using Clock = std::chrono::steady_clock;

TEST(TimedModel, ParsesTheIssuesExample) {
  auto m = parse_timed_model("timed:read=3GB/s,write=2GB/s,lat=80us");
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_DOUBLE_EQ(m->read_bytes_per_s, 3e9);
  EXPECT_DOUBLE_EQ(m->write_bytes_per_s, 2e9);
  EXPECT_EQ(m->latency_ns, 80'000u);
  auto other = parse_timed_model("timed:lat=1.5ms,write=800MB/s,read=1.2GB/s");
  ASSERT_TRUE(other.is_ok());
  EXPECT_DOUBLE_EQ(other->write_bytes_per_s, 8e8);
  EXPECT_EQ(other->latency_ns, 1'500'000u);
  EXPECT_EQ(describe(*m), "timed: read 3.00 GB/s, write 2.00 GB/s, latency 80 us");
}

TEST(TimedModel, RefusesWhatItCannotRead) {
  for (const char* bad :
       {"", "file", "timed:", "timed:read=3GB/s,write=2GB/s", "timed:read=3GB/s,write=2GB/s,lat=80",
        "timed:read=3GB,write=2GB/s,lat=80us", "timed:read=0GB/s,write=2GB/s,lat=80us",
        "timed:read=-1GB/s,write=2GB/s,lat=80us", "timed:read=3GB/s,read=3GB/s,write=2GB/s,lat=1us",
        "timed:read=3GB/s,write=2GB/s,lat=80us,depth=4", "timed:read3GB/s,write=2GB/s,lat=80us",
        "timed:read=3GB/s,write=2GB/s,lat=20s"}) {
    auto m = parse_timed_model(bad);
    EXPECT_FALSE(m.is_ok()) << bad;
    if (!m.is_ok()) {
      EXPECT_EQ(m.status().code(), Errc::kInvalidArgument) << bad;
    }
  }
}

std::unique_ptr<IoContext> make_context() {
  auto ctx = IoContext::create(256);
  EXPECT_TRUE(ctx.is_ok());
  return ctx.is_ok() ? std::move(ctx).value() : nullptr;
}

void drain(IoContext& ctx) {
  while (ctx.in_flight() > 0)
    ctx.poll(true);
}

// A lone read waits its latency; a deep queue of writes moves at the write bandwidth; nothing
// completes inline or early, and every request completes once with its length.
TEST(TimedMember, LatencyAndBandwidthShapeCompletions) {
  TimedModel model{1e9, 0.5e9, 2'000'000};  // 1 GB/s read, 0.5 GB/s write, 2 ms
  TimedMember member("timed0", 64u << 20, model, 0);
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  auto buf = AlignedBuffer::allocate(1u << 20, 4096);
  ASSERT_TRUE(buf.is_ok());

  CountingRequest lone;
  lone.op = MemberOp::kRead;
  lone.offset = 0;
  lone.len = 4096;
  lone.buf = buf->data();
  auto t0 = Clock::now();
  member.submit(*ctx, lone);
  EXPECT_EQ(lone.calls, 0) << "never inline";
  drain(*ctx);
  const auto lone_us =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
  EXPECT_EQ(lone.calls, 1);
  EXPECT_EQ(lone.result, 4096);
  EXPECT_GE(lone_us, 2000) << "the latency";

  // 16 writes of 1 MiB: 16 MiB at 0.5 GB/s is 33.6 ms, plus the latency.
  std::vector<CountingRequest> writes(16);
  t0 = Clock::now();
  for (std::size_t i = 0; i < writes.size(); ++i) {
    writes[i].op = MemberOp::kWrite;
    writes[i].offset = i << 20;
    writes[i].len = 1u << 20;
    writes[i].buf = buf->data();
    member.submit(*ctx, writes[i]);
  }
  drain(*ctx);
  const auto deep_us =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
  for (const auto& w : writes) {
    EXPECT_EQ(w.calls, 1);
    EXPECT_EQ(w.result, 1 << 20);
  }
  EXPECT_GE(deep_us, 33'500 + 2'000) << "bandwidth-bound";
  EXPECT_EQ(member.bytes_written(), 16u << 20);
  EXPECT_EQ(member.bytes_read(), 4096u);
}

TEST(TimedMember, KeepsItsHeadAndDiscardsTheRest) {
  TimedModel model{10e9, 10e9, 1000};
  TimedMember member("timed0", 32u << 20, model, 1u << 20);
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  auto data = AlignedBuffer::allocate(8192, 4096);
  auto back = AlignedBuffer::allocate(8192, 4096);
  ASSERT_TRUE(data.is_ok() && back.is_ok());
  std::memset(data->data(), 0x5a, 8192);
  // Synchronously and asynchronously, inside the head: read back as written.
  ASSERT_TRUE(member.write_sync(4096, data->span().first(4096)).is_ok());
  CountingRequest w;
  w.op = MemberOp::kWrite;
  w.offset = 65536;
  w.len = 8192;
  w.buf = data->data();
  member.submit(*ctx, w);
  drain(*ctx);
  ASSERT_EQ(w.result, 8192);
  ASSERT_TRUE(member.read_sync(4096, back->span().first(4096)).is_ok());
  EXPECT_EQ(std::memcmp(back->data(), data->data(), 4096), 0);
  std::memset(back->data(), 0, 8192);
  CountingRequest r;
  r.op = MemberOp::kRead;
  r.offset = 65536;
  r.len = 8192;
  r.buf = back->data();
  member.submit(*ctx, r);
  drain(*ctx);
  ASSERT_EQ(r.result, 8192);
  EXPECT_EQ(std::memcmp(back->data(), data->data(), 8192), 0);
  // Beyond it: writes discarded, reads leave the buffer as it is.
  std::memset(back->data(), 0x11, 8192);
  ASSERT_TRUE(member.write_sync(8u << 20, data->span()).is_ok());
  ASSERT_TRUE(member.read_sync(8u << 20, back->span()).is_ok());
  EXPECT_EQ(back->data()[0], std::byte{0x11});
  // Zeroing reaches the head.
  ASSERT_TRUE(member.zero_range(4096, 4096).is_ok());
  ASSERT_TRUE(member.read_sync(4096, back->span().first(4096)).is_ok());
  EXPECT_EQ(back->data()[100], std::byte{0});
}

TEST(TimedMember, RefusesMalformedAndOutOfRangeRequests) {
  TimedModel model{10e9, 10e9, 1000};
  TimedMember member("timed0", 1u << 20, model);
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  auto buf = AlignedBuffer::allocate(8192, 4096);
  ASSERT_TRUE(buf.is_ok());
  CountingRequest beyond, unaligned, empty, flush;
  beyond.op = MemberOp::kRead;
  beyond.offset = (1u << 20) - 4096;
  beyond.len = 8192;
  beyond.buf = buf->data();
  unaligned.op = MemberOp::kWrite;
  unaligned.offset = 100;
  unaligned.len = 4096;
  unaligned.buf = buf->data();
  empty.op = MemberOp::kRead;
  empty.len = 0;
  empty.buf = buf->data();
  flush.op = MemberOp::kFlush;
  for (CountingRequest* r : {&beyond, &unaligned, &empty, &flush})
    member.submit(*ctx, *r);
  drain(*ctx);
  EXPECT_EQ(beyond.result, -ERANGE);
  EXPECT_EQ(unaligned.result, -EINVAL);
  EXPECT_EQ(empty.result, -EINVAL);
  EXPECT_EQ(flush.result, 0);
  for (CountingRequest* r : {&beyond, &unaligned, &empty, &flush})
    EXPECT_EQ(r->calls, 1);
  EXPECT_FALSE(member.read_sync(1u << 20, buf->span()).is_ok());
  EXPECT_EQ(member.bytes_read(), 0u) << "a refusal serves nothing";
}

}  // namespace
}  // namespace graid::bench
