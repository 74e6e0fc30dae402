// Member I/O: IoContext over io_uring and file-backed members, on real files in a temp dir.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/loop.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "graid/buffer.h"
#include "graid/member.h"
#include "member_io_helpers.h"
#include "temp_dir.h"

namespace graid {
namespace {

// Under /tmp rather than tmpfs: the O_DIRECT paths want a filesystem that supports O_DIRECT.
using graid::testing::CountingRequest;
using graid::testing::make_buffer;
using graid::testing::make_member;
using graid::testing::set_page_io;
using graid::testing::TempDir;
constexpr const char* kIoTestBase = "/tmp";

std::unique_ptr<IoContext> make_context(unsigned depth = 256) {
  auto ctx = IoContext::create(depth);
  EXPECT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  return ctx.is_ok() ? std::move(ctx).value() : nullptr;
}

void fill_random(std::span<std::byte> bytes, std::mt19937_64& rng) {
  for (auto& b : bytes)
    b = static_cast<std::byte>(rng());
}

void drain(IoContext& ctx) {
  while (ctx.in_flight() > 0)
    ctx.poll(true);
}

std::vector<std::byte> read_all(MemberDevice& member) {
  AlignedBuffer buffer = make_buffer(member.size());
  const Status status = member.read_sync(0, buffer.span());
  EXPECT_TRUE(status.is_ok()) << status.to_string();
  return {buffer.data(), buffer.data() + buffer.size()};
}

// Writes random data to `count` disjoint random ranges inside [base, base + span) at once, then
// reads random ranges back at the same depth, checking every byte against `model`.
void random_round(IoContext& ctx, MemberDevice& member, std::vector<std::byte>& model,
                  std::uint64_t base, std::uint64_t span, unsigned count, std::mt19937_64& rng) {
  const std::uint64_t slot = span / count;
  ASSERT_GE(slot, 512U);
  AlignedBuffer data = make_buffer(slot * count);
  std::vector<CountingRequest> reqs(count);
  int total = 0;
  for (unsigned i = 0; i < count; ++i) {
    const std::uint64_t sectors = slot / 512;
    const std::uint64_t first = rng() % sectors;
    const std::uint64_t n = 1 + rng() % (sectors - first);
    CountingRequest& req = reqs[i];
    req.op = MemberOp::kWrite;
    req.offset = base + i * slot + first * 512;
    req.len = static_cast<std::uint32_t>(n * 512);
    req.buf = data.data() + i * slot;  // slot is a multiple of 512: O_DIRECT alignment holds
    req.total = &total;
    fill_random({req.buf, req.len}, rng);
    std::memcpy(model.data() + req.offset, req.buf, req.len);
    member.submit(ctx, req);
  }
  EXPECT_EQ(total, 0) << "completion ran inline from submit";
  drain(ctx);
  ASSERT_EQ(total, static_cast<int>(count));
  for (auto& req : reqs) {
    ASSERT_EQ(req.calls, 1);
    ASSERT_EQ(req.result, static_cast<std::int32_t>(req.len)) << "write at " << req.offset;
  }
  // Reads: overlapping is fine; each into its own slot of the buffer.
  total = 0;
  for (unsigned i = 0; i < count; ++i) {
    const std::uint64_t sectors = span / 512;
    const std::uint64_t first = rng() % sectors;
    const std::uint64_t n = 1 + rng() % std::min<std::uint64_t>(slot / 512, sectors - first);
    CountingRequest& req = reqs[i];
    req = CountingRequest{};
    req.op = MemberOp::kRead;
    req.offset = base + first * 512;
    req.len = static_cast<std::uint32_t>(n * 512);
    req.buf = data.data() + i * slot;
    req.total = &total;
    member.submit(ctx, req);
  }
  drain(ctx);
  ASSERT_EQ(total, static_cast<int>(count));
  for (auto& req : reqs) {
    ASSERT_EQ(req.result, static_cast<std::int32_t>(req.len));
    ASSERT_EQ(std::memcmp(req.buf, model.data() + req.offset, req.len), 0)
        << "read at " << req.offset << " len " << req.len;
  }
}

TEST(IoContext, CreateRejectsBadDepth) {
  EXPECT_EQ(IoContext::create(0).status().code(), Errc::kInvalidArgument);
  EXPECT_EQ(IoContext::create(1 << 20).status().code(), Errc::kInvalidArgument);
}

TEST(IoContext, ClockIsReadOncePerPollPassAndFollowsTheSteadyClock) {
  auto steady = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  const std::int64_t before = steady();
  auto ctx = IoContext::create(8);
  ASSERT_TRUE(ctx.is_ok());
  const std::int64_t c0 = (*ctx)->clock_ns();
  EXPECT_GE(c0, before);  // read at create()
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  EXPECT_EQ((*ctx)->clock_ns(), c0);  // not read again outside poll()
  (*ctx)->poll(false);
  const std::int64_t c1 = (*ctx)->clock_ns();
  EXPECT_GE(c1 - c0, 3'000'000);
  EXPECT_LE(c1, steady());
}

// A task posted to a context whose thread has slept sees a clock read after the sleep, so what it
// submits is not stamped with the time before the sleep (a member latency as long as the idle).
class ClockReadingTask final : public Task {
 public:
  explicit ClockReadingTask(IoContext& ctx) : ctx_(ctx) {}
  void run() override { seen_ = ctx_.clock_ns(); }
  std::int64_t seen() const { return seen_; }

 private:
  IoContext& ctx_;
  std::int64_t seen_ = 0;
};

TEST(IoContext, PostedTasksSeeAClockReadAfterTheSleep) {
  auto ctx = IoContext::create(8);
  ASSERT_TRUE(ctx.is_ok());
  (*ctx)->poll(false);
  const std::int64_t before_sleep = (*ctx)->clock_ns();
  ClockReadingTask task(**ctx);
  std::thread poster([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    (*ctx)->post(task);
  });
  while (task.seen() == 0)
    (*ctx)->poll(/*wait=*/true);  // sleeps until the post wakes it
  poster.join();
  EXPECT_GE(task.seen() - before_sleep, 20'000'000);
}

TEST(FileMember, RandomRoundTripsAtDepth64) {
  TempDir dir(kIoTestBase);
  constexpr std::uint64_t kSize = 8 << 20;
  auto ctx = make_context(64);
  auto member = make_member(dir.file("m0"), kSize);
  ASSERT_TRUE(ctx && member);
  EXPECT_EQ(member->size(), kSize);
  EXPECT_TRUE(member->direct_io());
  std::vector<std::byte> model(kSize);
  std::mt19937_64 rng(1);
  for (int round = 0; round < 6; ++round) {
    random_round(*ctx, *member, model, 0, kSize, 64, rng);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(read_all(*member), model);
  EXPECT_EQ(ctx->in_flight(), 0U);
  EXPECT_GT(ctx->stats().fixed_file_ios, 0U) << "registered files not used";
}

TEST(FileMember, ThreadsWithOwnContextsShareAMember) {
  TempDir dir(kIoTestBase);
  constexpr unsigned kThreads = 4;
  constexpr std::uint64_t kPerThread = 2 << 20;
  auto member = make_member(dir.file("m0"), kPerThread * kThreads);
  ASSERT_TRUE(member);
  std::vector<std::vector<std::byte>> models(kThreads, std::vector<std::byte>(member->size()));
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto ctx = make_context(32);
      ASSERT_TRUE(ctx);
      std::mt19937_64 rng(100 + t);
      for (int round = 0; round < 4; ++round) {
        random_round(*ctx, *member, models[t], t * kPerThread, kPerThread, 32, rng);
        if (::testing::Test::HasFatalFailure()) return;
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  const std::vector<std::byte> disk = read_all(*member);
  for (unsigned t = 0; t < kThreads; ++t) {
    const std::size_t begin = t * kPerThread;
    EXPECT_EQ(std::memcmp(disk.data() + begin, models[t].data() + begin, kPerThread), 0)
        << "thread " << t;
  }
}

TEST(FileMember, FlushAndDiscard) {
  TempDir dir(kIoTestBase);
  for (const bool direct : {true, false}) {
    auto ctx = make_context();
    auto member = make_member(dir.file(direct ? "direct" : "buffered"), 1 << 20, direct);
    ASSERT_TRUE(ctx && member);
    EXPECT_EQ(member->direct_io(), direct);
    AlignedBuffer data = make_buffer(1 << 20);
    std::mt19937_64 rng(7);
    fill_random(data.span(), rng);
    ASSERT_TRUE(member->write_sync(0, data.span()).is_ok());

    CountingRequest flush, discard;
    flush.op = MemberOp::kFlush;
    discard.op = MemberOp::kDiscard;
    discard.offset = 128 << 10;
    discard.len = 256 << 10;
    member->submit(*ctx, flush);
    member->submit(*ctx, discard);
    drain(*ctx);
    EXPECT_EQ(flush.calls, 1);
    EXPECT_EQ(flush.result, 0);
    EXPECT_EQ(discard.calls, 1);
    EXPECT_EQ(discard.result, 0);

    const std::vector<std::byte> disk = read_all(*member);
    std::vector<std::byte> expect(data.data(), data.data() + data.size());
    std::fill(expect.begin() + discard.offset, expect.begin() + discard.offset + discard.len,
              std::byte{0});
    EXPECT_EQ(disk, expect) << (direct ? "direct" : "buffered");
    EXPECT_TRUE(member->flush_sync().is_ok());
  }
}

TEST(FileMember, FixedBuffersUsedInsideRegisteredRegions) {
  TempDir dir(kIoTestBase);
  // Unmerged: the writes below are contiguous on the member, and a merged I/O goes by address
  // (io_context_merge_test).
  IoContextOptions options;
  options.merge = false;
  auto created = IoContext::create(options);
  ASSERT_TRUE(created.is_ok());
  auto ctx = std::move(created).value();
  auto member = make_member(dir.file("m0"), 1 << 20);
  ASSERT_TRUE(ctx && member);
  // Only the first half of `memory` is registered.
  AlignedBuffer memory = make_buffer(512 << 10);
  const std::span<std::byte> regions[] = {memory.span().first(256 << 10)};
  ASSERT_TRUE(ctx->register_buffers(regions).is_ok());
  std::mt19937_64 rng(3);
  fill_random(memory.span(), rng);
  const std::vector<std::byte> original(memory.data(), memory.data() + memory.size());

  const auto write_from = [&](std::size_t at, std::uint64_t offset, CountingRequest& req) {
    req.op = MemberOp::kWrite;
    req.buf = memory.data() + at;
    req.len = 64 << 10;
    req.offset = offset;
    member->submit(*ctx, req);
  };
  CountingRequest inside, outside, straddling;
  write_from(64 << 10, 0, inside);               // inside the region: WRITE_FIXED
  write_from(320 << 10, 64 << 10, outside);      // beyond it: plain WRITE
  write_from(224 << 10, 128 << 10, straddling);  // runs off its end: plain WRITE
  drain(*ctx);
  EXPECT_EQ(inside.result, 64 << 10);
  EXPECT_EQ(outside.result, 64 << 10);
  EXPECT_EQ(straddling.result, 64 << 10);
  EXPECT_EQ(ctx->stats().fixed_buffer_ios, 1U);

  // Registration with I/O in flight is refused.
  CountingRequest read;
  read.op = MemberOp::kRead;
  read.buf = memory.data();  // fixed
  read.len = 192 << 10;
  member->submit(*ctx, read);
  EXPECT_EQ(ctx->register_buffers(regions).code(), Errc::kBusy);
  drain(*ctx);
  EXPECT_EQ(read.result, 192 << 10);
  EXPECT_EQ(ctx->stats().fixed_buffer_ios, 2U);
  const auto same = [&](std::size_t read_at, std::size_t written_from) {
    return std::memcmp(memory.data() + read_at, original.data() + written_from, 64 << 10) == 0;
  };
  EXPECT_TRUE(same(0, 64 << 10));
  EXPECT_TRUE(same(64 << 10, 320 << 10));
  EXPECT_TRUE(same(128 << 10, 224 << 10));

  // Unregistered: the same buffer goes through plain READ.
  ASSERT_TRUE(ctx->register_buffers({}).is_ok());
  read = CountingRequest{};
  read.op = MemberOp::kRead;
  read.buf = memory.data();
  read.len = 4096;
  member->submit(*ctx, read);
  drain(*ctx);
  EXPECT_EQ(read.result, 4096);
  EXPECT_EQ(ctx->stats().fixed_buffer_ios, 2U);
}

TEST(FileMember, BufferRegionsAddedOneByOneAreUsedUntilRemoved) {
  TempDir dir(kIoTestBase);
  auto ctx = make_context();
  auto member = make_member(dir.file("m0"), 1 << 20);
  ASSERT_TRUE(ctx && member);
  AlignedBuffer a = make_buffer(256 << 10), b = make_buffer(256 << 10), c = make_buffer(64 << 10);
  std::mt19937_64 rng(11);
  fill_random(a.span(), rng);
  ASSERT_TRUE(ctx->add_buffer_region(a.span()).is_ok());
  ASSERT_TRUE(ctx->add_buffer_region(b.span()).is_ok());
  // Refused, changing nothing: overlapping a region, empty, and the dense set beside them.
  EXPECT_EQ(ctx->add_buffer_region(a.span().subspan(4096, 8192)).code(), Errc::kInvalidArgument);
  EXPECT_EQ(ctx->add_buffer_region({}).code(), Errc::kInvalidArgument);
  const std::span<std::byte> set[] = {c.span()};
  const auto index_a = ctx->registered_buffer(a.data() + 4096, 8192);
  const auto index_b = ctx->registered_buffer(b.data(), b.size());
  ASSERT_TRUE(index_a && index_b);
  EXPECT_NE(*index_a, *index_b);
  EXPECT_EQ(ctx->registered_buffer(a.data() + (192 << 10), 128 << 10), std::nullopt)
      << "runs off region a's end";
  EXPECT_EQ(ctx->registered_buffer(c.data(), 4096), std::nullopt);

  // Write from a (fixed), read it back into b (fixed), with I/O of another region in flight
  // while a third region is added.
  CountingRequest write, read;
  write.op = MemberOp::kWrite;
  write.buf = a.data() + (64 << 10);
  write.len = 128 << 10;
  write.offset = 256 << 10;
  member->submit(*ctx, write);
  ASSERT_TRUE(ctx->add_buffer_region(c.span()).is_ok()) << "no need for idle I/O";
  drain(*ctx);
  read.op = MemberOp::kRead;
  read.buf = b.data();
  read.len = 128 << 10;
  read.offset = 256 << 10;
  member->submit(*ctx, read);
  drain(*ctx);
  EXPECT_EQ(write.result, 128 << 10);
  EXPECT_EQ(read.result, 128 << 10);
  EXPECT_EQ(ctx->stats().fixed_buffer_ios, 2U);
  EXPECT_EQ(std::memcmp(b.data(), a.data() + (64 << 10), 128 << 10), 0);

  // Removed: b's memory goes through plain READ, and its slot is taken again by the next region.
  ctx->remove_buffer_region(b.span());
  EXPECT_EQ(ctx->registered_buffer(b.data(), 4096), std::nullopt);
  std::memset(b.data(), 0, b.size());
  read = CountingRequest{};
  read.op = MemberOp::kRead;
  read.buf = b.data();
  read.len = 64 << 10;
  read.offset = 256 << 10;
  member->submit(*ctx, read);
  drain(*ctx);
  EXPECT_EQ(read.result, 64 << 10);
  EXPECT_EQ(ctx->stats().fixed_buffer_ios, 2U);
  EXPECT_EQ(std::memcmp(b.data(), a.data() + (64 << 10), 64 << 10), 0);
  ASSERT_TRUE(ctx->add_buffer_region(b.span()).is_ok());
  EXPECT_EQ(ctx->registered_buffer(b.data(), 4096), index_b) << "the freed slot is reused";

  // A dense set replaces the table; added regions are refused until it is dropped.
  ASSERT_TRUE(ctx->register_buffers(set).is_ok());
  EXPECT_EQ(ctx->registered_buffer(a.data(), 4096), std::nullopt);
  EXPECT_EQ(ctx->add_buffer_region(a.span()).code(), Errc::kBusy);
  ASSERT_TRUE(ctx->register_buffers({}).is_ok());
  EXPECT_TRUE(ctx->add_buffer_region(a.span()).is_ok());
}

// A kernel buffer slot (ublk zero copy): I/O on the reserved window becomes fixed-buffer I/O on
// the slot at the same offset, landing in whatever the slot holds (here memory installed as the
// kernel would install a request's pages); the window itself is never touched (PROT_NONE: a
// touch would crash the test). registered_buffer() gives no index for it, and the slot goes with
// remove_buffer_region().
TEST(FileMember, KernelBufferSlotsTakeIoOnTheirWindowAtTheSameOffsets) {
  TempDir dir(kIoTestBase);
  auto ctx = make_context();
  auto member = make_member(dir.file("m0"), 1 << 20);
  ASSERT_TRUE(ctx && member);
  void* reserved = ::mmap(nullptr, 256 << 10, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(reserved, MAP_FAILED);
  const std::span<std::byte> window(static_cast<std::byte*>(reserved), 256 << 10);
  auto slot = ctx->add_kernel_buffer_slot(window);
  ASSERT_TRUE(slot.is_ok()) << slot.status().to_string();
  EXPECT_TRUE(ctx->in_kernel_buffer_window(window.data() + 4096, 8192));
  EXPECT_FALSE(ctx->in_kernel_buffer_window(window.data() + (252 << 10), 8192)) << "runs off it";
  EXPECT_EQ(ctx->registered_buffer(window.data(), 4096), std::nullopt)
      << "no index for commands that carry addresses";
  EXPECT_EQ(ctx->add_buffer_region(window.subspan(0, 4096)).code(), Errc::kInvalidArgument)
      << "overlaps the window";

  AlignedBuffer data = make_buffer(128 << 10), pages = make_buffer(192 << 10);
  std::mt19937_64 rng(12);
  fill_random(data.span(), rng);
  CountingRequest write;
  write.op = MemberOp::kWrite;
  write.buf = data.data();
  write.len = 128 << 10;
  write.offset = 64 << 10;
  member->submit(*ctx, write);
  drain(*ctx);
  ASSERT_EQ(write.result, 128 << 10);

  // The "request's pages" in the slot; a read into the window at 16 KiB lands at 16 KiB of them.
  std::memset(pages.data(), 0xee, pages.size());
  ASSERT_TRUE(ctx->install_buffer_for_testing(*slot, pages.span()).is_ok());
  const std::uint64_t fixed_before = ctx->stats().fixed_buffer_ios;
  CountingRequest read;
  read.op = MemberOp::kRead;
  read.buf = window.data() + (16 << 10);
  read.len = 128 << 10;
  read.offset = 64 << 10;
  member->submit(*ctx, read);
  drain(*ctx);
  EXPECT_EQ(read.result, 128 << 10);
  EXPECT_EQ(ctx->stats().fixed_buffer_ios, fixed_before + 1);
  EXPECT_EQ(std::memcmp(pages.data() + (16 << 10), data.data(), 128 << 10), 0);
  EXPECT_EQ(pages.data()[(16 << 10) - 1], std::byte{0xee}) << "nothing before the offset";
  EXPECT_EQ(pages.data()[(144 << 10)], std::byte{0xee}) << "nothing after the length";

  // Withdrawn: the window is no longer the slot's, and the slot is free for a region.
  ASSERT_TRUE(ctx->install_buffer_for_testing(*slot, {}).is_ok());
  ctx->remove_buffer_region(window);
  EXPECT_FALSE(ctx->in_kernel_buffer_window(window.data(), 4096));
  EXPECT_EQ(ctx->install_buffer_for_testing(*slot, pages.span()).code(), Errc::kNotFound);
  EXPECT_TRUE(ctx->add_buffer_region(data.span()).is_ok());
  ::munmap(reserved, 256 << 10);
}

TEST(FileMember, RegisteredFileSlotsAreRecycledWhenMembersClose) {
  // More members than the 256-slot table, opened and closed one after another: each must get a
  // registered slot, which only works if closed members' slots come back.
  TempDir dir(kIoTestBase);
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  AlignedBuffer buf = make_buffer(4096);
  auto first = make_member(dir.file("m"), 1 << 16);
  ASSERT_TRUE(first);
  first.reset();
  for (int i = 0; i < 300; ++i) {
    auto member = open_member(dir.file("m"));
    ASSERT_TRUE(member.is_ok()) << member.status().to_string();
    CountingRequest read;
    read.op = MemberOp::kRead;
    read.buf = buf.data();
    read.len = 4096;
    (*member)->submit(*ctx, read);
    drain(*ctx);
    ASSERT_EQ(read.result, 4096);
  }
  EXPECT_EQ(ctx->stats().fixed_file_ios, 300U);
}

TEST(FileMember, BadRequestsFailLaterNotInline) {
  TempDir dir(kIoTestBase);
  auto ctx = make_context();
  auto member = make_member(dir.file("m0"), 1 << 20);
  ASSERT_TRUE(ctx && member);
  AlignedBuffer buf = make_buffer(8192);
  struct Case {
    MemberOp op;
    std::uint64_t offset;
    std::uint32_t len;
    bool null_buf;
    std::int32_t expect;
  };
  const Case cases[] = {
      {MemberOp::kRead, 1 << 20, 4096, false, -ERANGE},           // at the end
      {MemberOp::kRead, (1 << 20) - 4096, 8192, false, -ERANGE},  // straddling the end
      {MemberOp::kWrite, std::uint64_t{1} << 40, 4096, false, -ERANGE},
      {MemberOp::kDiscard, (1 << 20) - 512, 1024, false, -ERANGE},
      {MemberOp::kRead, 0, 100, false, -EINVAL},  // not a sector multiple
      {MemberOp::kWrite, 100, 512, false, -EINVAL},
      {MemberOp::kRead, 0, 0, false, -EINVAL},
      {MemberOp::kWrite, 0, 4096, true, -EINVAL},
      {MemberOp::kRead, (1 << 20) - 4096, 4096, false, 4096},  // the last block is fine
  };
  std::vector<CountingRequest> reqs(std::size(cases));
  int total = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].op = cases[i].op;
    reqs[i].offset = cases[i].offset;
    reqs[i].len = cases[i].len;
    reqs[i].buf = cases[i].null_buf ? nullptr : buf.data();
    reqs[i].total = &total;
    member->submit(*ctx, reqs[i]);
  }
  EXPECT_EQ(total, 0);
  EXPECT_EQ(ctx->in_flight(), reqs.size());
  drain(*ctx);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(reqs[i].calls, 1) << "case " << i;
    EXPECT_EQ(reqs[i].result, cases[i].expect) << "case " << i;
  }
}

TEST(FileMember, ReadPastTheRealEndOfAShrunkFileIsAnError) {
  // The file shrinks under an open member (its size() is stale): the kernel returns a short
  // read, the layer asks for the rest, gets end-of-file, and reports -EIO, not zeros.
  TempDir dir(kIoTestBase);
  auto ctx = make_context();
  auto member = make_member(dir.file("m0"), 64 << 10);
  ASSERT_TRUE(ctx && member);
  ASSERT_EQ(::truncate(dir.file("m0").c_str(), 60 << 10), 0);
  AlignedBuffer buf = make_buffer(8192);
  CountingRequest read;
  read.op = MemberOp::kRead;
  read.buf = buf.data();
  read.len = 8192;
  read.offset = 56 << 10;
  member->submit(*ctx, read);
  drain(*ctx);
  EXPECT_EQ(read.result, -EIO);
  EXPECT_EQ(ctx->stats().short_resubmits, 1U);
  EXPECT_EQ(member->read_sync(56 << 10, buf.span()).code(), Errc::kIoError);
}

// A pipe as a member file: reads return what the pipe holds, so transfers come back short.
struct Pipe {
  Pipe(int flags) {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC | flags), 0);
    read_end = std::make_shared<MemberFile>(fds[0], true);
    write_fd = fds[1];
  }
  ~Pipe() { ::close(write_fd); }
  void put(const std::byte* data, std::size_t n) const {
    ASSERT_EQ(::write(write_fd, data, n), static_cast<ssize_t>(n));
  }
  std::shared_ptr<MemberFile> read_end;
  int write_fd;
};

TEST(IoContext, ShortTransfersAreResubmittedForTheRest) {
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  Pipe pipe(0);
  std::vector<std::byte> data(4096);
  std::mt19937_64 rng(5);
  fill_random(data, rng);
  AlignedBuffer buf = make_buffer(4096);
  CountingRequest read;
  read.op = MemberOp::kRead;
  read.buf = buf.data();
  read.len = 4096;
  pipe.put(data.data(), 100);
  ctx->submit_io(pipe.read_end, read);
  while (ctx->stats().short_resubmits == 0)
    ctx->poll(false);
  EXPECT_EQ(read.calls, 0);
  pipe.put(data.data() + 100, 4096 - 100);
  drain(*ctx);
  EXPECT_EQ(read.calls, 1);
  EXPECT_EQ(read.result, 4096);
  EXPECT_EQ(std::memcmp(buf.data(), data.data(), 4096), 0);
}

// Rewrites CQE results through the test seam: the first `again` results become -EAGAIN, then
// every full transfer of more than one sector comes back as half of it (whole sectors), so each
// request is resubmitted for its remainder several times.
struct Mangler {
  int again = 0;
  bool halve = false;
  static std::int32_t filter(const MemberRequest& req, std::int32_t result, void* arg) {
    auto& self = *static_cast<Mangler*>(arg);
    if (self.again > 0) {
      --self.again;
      return -EAGAIN;
    }
    if (self.halve && result > 512 && req.op != MemberOp::kFlush) {
      return result / 1024 * 512;  // half, rounded down to a sector: at least one sector
    }
    return result;
  }
};

TEST(IoContext, EagainAndShortTransfersAreRetriedToTheFullLength) {
  TempDir dir(kIoTestBase);
  auto ctx = make_context(16);
  auto member = make_member(dir.file("m0"), 4 << 20);
  ASSERT_TRUE(ctx && member);
  Mangler mangler{.again = 5, .halve = true};
  ctx->set_result_filter_for_testing(&Mangler::filter, &mangler);
  std::vector<std::byte> model(member->size());
  std::mt19937_64 rng(13);
  for (int round = 0; round < 3; ++round)
    random_round(*ctx, *member, model, 0, 4 << 20, 16, rng);
  ctx->set_result_filter_for_testing(nullptr, nullptr);
  EXPECT_EQ(read_all(*member), model);
  EXPECT_EQ(ctx->stats().again_retries, 5U);
  EXPECT_GT(ctx->stats().short_resubmits, 16U);
}

TEST(IoContext, EagainRetriesAreBounded) {
  TempDir dir(kIoTestBase);
  auto ctx = make_context();
  auto member = make_member(dir.file("m0"), 1 << 20);
  ASSERT_TRUE(ctx && member);
  Mangler mangler{.again = 1 << 30};  // never ready
  ctx->set_result_filter_for_testing(&Mangler::filter, &mangler);
  AlignedBuffer buf = make_buffer(4096);
  CountingRequest read;
  read.op = MemberOp::kRead;
  read.buf = buf.data();
  read.len = 4096;
  member->submit(*ctx, read);
  drain(*ctx);
  EXPECT_EQ(read.calls, 1);
  EXPECT_EQ(read.result, -EAGAIN);
  EXPECT_GE(ctx->stats().again_retries, 100U);
}

// Submits `count` one-page I/Os (writes and reads alternating) on a fresh context of `depth`
// and drives them with poll(wait) until none is in flight (at most 10 s); each must complete
// once, in full, and never inline. Returns the context for checks of its stats.
std::unique_ptr<IoContext> run_alternating_pages(unsigned depth, std::size_t count, bool wait) {
  TempDir dir(kIoTestBase);
  auto ctx = make_context(depth);
  auto member = make_member(dir.file("m0"), count * 4096);
  if (!ctx || !member) return nullptr;
  AlignedBuffer buf = make_buffer(count * 4096);
  std::vector<CountingRequest> reqs(count);
  int total = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    set_page_io(reqs[i], i % 2 == 0 ? MemberOp::kWrite : MemberOp::kRead, i, buf.data());
    reqs[i].total = &total;
    member->submit(*ctx, reqs[i]);
  }
  EXPECT_EQ(total, 0) << "completion ran inline from submit";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ctx->in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    if (ctx->poll(wait) == 0) std::this_thread::yield();
  }
  EXPECT_EQ(ctx->in_flight(), 0U) << "I/O never completed (poll(" << wait << "))";
  EXPECT_EQ(total, static_cast<int>(count));
  for (auto& req : reqs) {
    EXPECT_EQ(req.calls, 1);
    EXPECT_EQ(req.result, 4096);
  }
  return ctx;
}

TEST(IoContext, FullSubmissionQueueNeverDropsARequest) {
  auto ctx = run_alternating_pages(4, 256, true);
  ASSERT_TRUE(ctx);
  EXPECT_GT(ctx->stats().sq_full, 0U);
}

// A caller that never sleeps (a busy-polling queue thread) must still see completions that the
// kernel finishes asynchronously, as it does for files on tmpfs.
TEST(IoContext, PollWithoutWaitingFinishesAsynchronousIo) {
  EXPECT_TRUE(run_alternating_pages(8, 16, false));
}

class CountingTask final : public Task {
 public:
  void run() override { runs.fetch_add(1, std::memory_order_relaxed); }
  std::atomic<int> runs{0};
};

TEST(IoContext, PostFromAnotherThreadWakesASleepingPoll) {
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  CountingTask task;
  std::thread poster([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ctx->post(task);
  });
  const auto start = std::chrono::steady_clock::now();
  int ran = 0;
  while (ran == 0)
    ran = ctx->poll(true);  // nothing in flight: sleeps until the post
  poster.join();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(task.runs.load(), 1);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(40));
}

TEST(IoContext, ManyPostersEveryTaskRunsOnce) {
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  constexpr int kPosters = 3;
  constexpr int kEach = 2000;
  std::vector<CountingTask> tasks(kPosters * kEach);
  std::vector<std::thread> posters;
  for (int p = 0; p < kPosters; ++p) {
    posters.emplace_back([&, p] {
      for (int i = 0; i < kEach; ++i)
        ctx->post(tasks[p * kEach + i]);
    });
  }
  int ran = 0;
  while (ran < kPosters * kEach)
    ran += ctx->poll(true);
  for (auto& poster : posters)
    poster.join();
  EXPECT_EQ(ran, kPosters * kEach);
  for (auto& task : tasks)
    ASSERT_EQ(task.runs.load(), 1);
}

TEST(IoContext, DeferRunsAtTheNextPoll) {
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  CountingTask a, b;
  ctx->defer(a);
  ctx->defer(b);
  EXPECT_EQ(a.runs.load(), 0);
  EXPECT_EQ(ctx->poll(false), 2);
  EXPECT_EQ(a.runs.load(), 1);
  EXPECT_EQ(b.runs.load(), 1);
  EXPECT_EQ(ctx->poll(false), 0);
  ctx->defer(a);
  EXPECT_EQ(ctx->poll(true), 1);  // deferred work is ready: no sleep
}

TEST(FileMember, SyncIoChecksAlignmentAndRange) {
  TempDir dir(kIoTestBase);
  auto member = make_member(dir.file("m0"), 1 << 20);
  ASSERT_TRUE(member);
  AlignedBuffer buf = make_buffer(3 * 4096);
  std::mt19937_64 rng(9);
  fill_random(buf.span(), rng);
  ASSERT_TRUE(member->write_sync(4096, buf.span()).is_ok());
  AlignedBuffer back = make_buffer(3 * 4096);
  ASSERT_TRUE(member->read_sync(4096, back.span()).is_ok());
  EXPECT_EQ(std::memcmp(buf.data(), back.data(), buf.size()), 0);
  EXPECT_TRUE(member->flush_sync().is_ok());

  const Status misaligned = member->read_sync(0, back.span().subspan(512, 4096));
  EXPECT_EQ(misaligned.code(), Errc::kInvalidArgument);
  EXPECT_NE(misaligned.message().find(dir.file("m0")), std::string::npos);
  EXPECT_EQ(member->write_sync(100, buf.span()).code(), Errc::kInvalidArgument);
  EXPECT_EQ(member->read_sync((1 << 20) - 4096, back.span()).code(), Errc::kOutOfRange);
}

TEST(OpenMember, RefusesWhatIsNotADrive) {
  TempDir dir(kIoTestBase);
  const auto expect_error = [](const std::string& path, Errc code, const std::string& words,
                               const OpenOptions& options = {}) {
    auto member = open_member(path, options);
    ASSERT_FALSE(member.is_ok()) << path;
    EXPECT_EQ(member.status().code(), code) << member.status().to_string();
    EXPECT_NE(member.status().message().find(path), std::string::npos)
        << member.status().to_string();
    EXPECT_NE(member.status().message().find(words), std::string::npos)
        << member.status().to_string();
  };
  expect_error(dir.file("missing"), Errc::kNotFound, "No such file");
  expect_error(dir.path(), Errc::kInvalidArgument, "is a directory");
  expect_error("/dev/null", Errc::kInvalidArgument, "is a character device");
  {
    const int fd = ::open(dir.file("empty").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ::close(fd);
  }
  expect_error(dir.file("empty"), Errc::kInvalidArgument, "is empty");
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  expect_error(dir.file("fifo"), Errc::kInvalidArgument, "FIFO");
}

TEST(OpenMember, CreateMakesGrowsButNeverShrinks) {
  TempDir dir(kIoTestBase);
  OpenOptions options;
  options.create = true;
  options.create_size = 1 << 20;
  auto made = open_member(dir.file("m"), options);
  ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  EXPECT_EQ((*made)->size(), 1U << 20);
  made = Result<std::unique_ptr<MemberDevice>>(make_error(Errc::kInternal, "closed"));

  options.create_size = 2 << 20;  // grow
  auto grown = open_member(dir.file("m"), options);
  ASSERT_TRUE(grown.is_ok()) << grown.status().to_string();
  EXPECT_EQ((*grown)->size(), 2U << 20);

  options.create_size = 1 << 20;  // shrink: refused, file untouched
  auto shrunk = open_member(dir.file("m"), options);
  ASSERT_FALSE(shrunk.is_ok());
  EXPECT_EQ(shrunk.status().code(), Errc::kInvalidArgument);
  EXPECT_NE(shrunk.status().message().find("refusing to shrink"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat(dir.file("m").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 2 << 20);

  options.create_size = 0;
  EXPECT_EQ(open_member(dir.file("other"), options).status().code(), Errc::kInvalidArgument);
}

TEST(OpenMember, LockKeepsASecondOpenerOffAFile) {
  TempDir dir(kIoTestBase);
  const std::string path = dir.file("m");
  OpenOptions locked;
  locked.lock = true;
  locked.create = true;
  locked.create_size = 1 << 20;
  auto first = open_member(path, locked);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();

  auto second = open_member(path, locked);
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), Errc::kBusy);
  EXPECT_NE(second.status().message().find(path + " is in use (locked by another process)"),
            std::string::npos)
      << second.status().to_string();
  // Refused before growing it.
  locked.create_size = 2 << 20;
  EXPECT_EQ(open_member(path, locked).status().code(), Errc::kBusy);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1 << 20);
  locked.create = false;

  // Without the option nothing changes: the file opens as before.
  auto unlocked = open_member(path);
  ASSERT_TRUE(unlocked.is_ok()) << unlocked.status().to_string();

  // The lock is a real flock on the open file: another open file description cannot take it.
  {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(::flock(fd, LOCK_EX | LOCK_NB), -1);
    EXPECT_EQ(errno, EWOULDBLOCK);
    ::close(fd);
  }

  // Closing the holder releases it; while a context still has the file registered, it holds the
  // lock until its next poll.
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  AlignedBuffer buf = make_buffer(4096);
  CountingRequest read;
  read.op = MemberOp::kRead;
  read.buf = buf.data();
  read.len = 4096;
  (*first)->submit(*ctx, read);
  drain(*ctx);
  ASSERT_EQ(read.result, 4096);
  first = Result<std::unique_ptr<MemberDevice>>(make_error(Errc::kInternal, "closed"));
  if (ctx->stats().fixed_file_ios > 0) {
    EXPECT_EQ(open_member(path, locked).status().code(), Errc::kBusy);
  }
  ctx->poll(false);
  auto again = open_member(path, locked);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();

  // A file locked by someone else (here a plain flock on another open) is refused too.
  again = Result<std::unique_ptr<MemberDevice>>(make_error(Errc::kInternal, "closed"));
  const int holder = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(holder, 0);
  ASSERT_EQ(::flock(holder, LOCK_EX | LOCK_NB), 0);
  EXPECT_EQ(open_member(path, locked).status().code(), Errc::kBusy);
  EXPECT_TRUE(open_member(path).is_ok());
  ::close(holder);
  EXPECT_TRUE(open_member(path, locked).is_ok());
}

// A loop device over a file in `dir`, detached on destruction; path() is empty when the machine
// cannot make one (no /dev/loop-control, no privilege).
class LoopDevice {
 public:
  LoopDevice(const TempDir& dir, std::uint64_t size) {
    const std::string backing = dir.file("loop-backing");
    const int file = ::open(backing.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (file < 0 || ::ftruncate(file, static_cast<off_t>(size)) != 0) return;
    const int control = ::open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    const int index = control >= 0 ? ::ioctl(control, LOOP_CTL_GET_FREE) : -1;
    if (control >= 0) ::close(control);
    if (index >= 0) {
      const std::string path = "/dev/loop" + std::to_string(index);
      fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
      if (fd_ >= 0 && ::ioctl(fd_, LOOP_SET_FD, file) == 0) {
        path_ = path;
      } else if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
      }
    }
    ::close(file);
  }
  ~LoopDevice() {
    if (fd_ < 0) return;
    if (!path_.empty()) ::ioctl(fd_, LOOP_CLR_FD, 0);
    ::close(fd_);
  }
  LoopDevice(const LoopDevice&) = delete;
  LoopDevice& operator=(const LoopDevice&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

TEST(OpenMember, BlockDeviceSizeExclusiveClaimAndIo) {
  TempDir dir(kIoTestBase);
  LoopDevice loop(dir, 4 << 20);
  if (loop.path().empty()) GTEST_SKIP() << "cannot set up a loop device: block path untested";
  auto member = open_member(loop.path());
  ASSERT_TRUE(member.is_ok()) << member.status().to_string();
  EXPECT_EQ((*member)->size(), 4U << 20);
  // The exclusive claim turns a second opener away; without `exclusive` it may share.
  auto second = open_member(loop.path());
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), Errc::kBusy);
  EXPECT_NE(second.status().message().find("device in use"), std::string::npos);
  OpenOptions shared;
  shared.exclusive = false;
  EXPECT_TRUE(open_member(loop.path(), shared).is_ok());

  auto ctx = make_context();
  std::vector<std::byte> model((*member)->size());
  std::mt19937_64 rng(17);
  random_round(*ctx, **member, model, 0, (*member)->size(), 32, rng);
  CountingRequest discard, flush;
  discard.op = MemberOp::kDiscard;
  discard.offset = 1 << 20;
  discard.len = 1 << 20;
  flush.op = MemberOp::kFlush;
  (*member)->submit(*ctx, discard);
  drain(*ctx);
  (*member)->submit(*ctx, flush);
  drain(*ctx);
  EXPECT_EQ(discard.result, 0);
  EXPECT_EQ(flush.result, 0);
  std::fill(model.begin() + (1 << 20), model.begin() + (2 << 20), std::byte{0});
  EXPECT_EQ(read_all(**member), model);

  // Closing the member (and letting the context drop its registered file) releases the claim.
  member = Result<std::unique_ptr<MemberDevice>>(make_error(Errc::kInternal, "closed"));
  ctx->poll(false);
  EXPECT_TRUE(open_member(loop.path()).is_ok());
}

TEST(OpenMember, FallsBackToBufferedWhereODirectIsRefused) {
  // ramfs has no direct I/O. Mounting needs CAP_SYS_ADMIN; without it the test cannot run.
  TempDir dir(kIoTestBase);
  const std::string mnt = dir.file("ramfs");
  ASSERT_EQ(::mkdir(mnt.c_str(), 0700), 0);
  if (::mount("graid-test", mnt.c_str(), "ramfs", 0, nullptr) != 0) {
    GTEST_SKIP() << "cannot mount ramfs (" << std::strerror(errno)
                 << "): O_DIRECT fallback untested";
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{mnt};
  const std::string path = mnt + "/m0";
  ::testing::internal::CaptureStderr();
  auto member = make_member(path, 1 << 20);
  const std::string warning = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(member);
  EXPECT_FALSE(member->direct_io());
  EXPECT_NE(warning.find("O_DIRECT refused"), std::string::npos) << warning;
  EXPECT_NE(warning.find(path), std::string::npos) << warning;
  EXPECT_EQ(std::count(warning.begin(), warning.end(), '\n'), 1) << "one line";

  auto ctx = make_context();
  std::vector<std::byte> model(member->size());
  std::mt19937_64 rng(11);
  random_round(*ctx, *member, model, 0, member->size(), 16, rng);
  EXPECT_TRUE(member->flush_sync().is_ok());
  EXPECT_EQ(read_all(*member), model);
}

}  // namespace
}  // namespace graid
