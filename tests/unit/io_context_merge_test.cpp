// IoContext merging (IoContextOptions::merge): reads or writes submitted in one poll pass that
// are contiguous on one file go to the kernel as one vectored I/O; reads also across small gaps.
// Every request still completes exactly once with its own result, errors land on exactly the
// requests they concern, and the bytes are those of unmerged I/O (checked against a model).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "graid/member.h"
#include "io/merge_limits.h"
#include "member_io_helpers.h"
#include "temp_dir.h"

namespace graid {
namespace {

using graid::testing::CountingRequest;
using graid::testing::kTestPage;
using graid::testing::make_buffer;
using graid::testing::make_member;
using graid::testing::set_page_io;
using graid::testing::TempDir;
constexpr const char* kBase = "/tmp";  // a filesystem with O_DIRECT

std::unique_ptr<IoContext> make_context(bool merge = true, std::uint32_t gap = 16384) {
  IoContextOptions options;
  options.queue_depth = 64;
  options.merge = merge;
  options.merge_read_gap = gap;
  auto ctx = IoContext::create(options);
  EXPECT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  return ctx.is_ok() ? std::move(ctx).value() : nullptr;
}

void drain(IoContext& ctx) {
  while (ctx.in_flight() > 0)
    ctx.poll(true);
}

std::vector<std::byte> read_all(MemberDevice& member) {
  AlignedBuffer buffer = make_buffer(member.size());
  EXPECT_TRUE(member.read_sync(0, buffer.span()).is_ok());
  return {buffer.data(), buffer.data() + buffer.size()};
}

void fill(std::byte* p, std::size_t n, std::mt19937_64& rng) {
  for (std::size_t i = 0; i < n; ++i)
    p[i] = static_cast<std::byte>(rng());
}

// A file opened O_DIRECT as a MemberFile of our own, so a test can set its merge limits.
std::shared_ptr<MemberFile> open_file(const std::string& path, std::size_t size) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  if (fd < 0) return nullptr;
  EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
  return std::make_shared<MemberFile>(fd, /*buffered=*/false);
}

TEST(IoContextMerge, ContiguousRequestsGoAsOneVectoredIoInAnyOrder) {
  TempDir dir(kBase);
  auto ctx = make_context();
  auto member = make_member(dir.file("m"), 64 * kTestPage);
  ASSERT_TRUE(ctx && member);
  std::mt19937_64 rng(1);
  AlignedBuffer data = make_buffer(8 * kTestPage);
  fill(data.data(), data.size(), rng);
  std::vector<CountingRequest> writes(8);
  std::vector<std::size_t> order(8);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  int total = 0;
  for (std::size_t i : order) {  // pages 8..15, submitted out of order
    set_page_io(writes[i], MemberOp::kWrite, 8 + i, data.data() - 8 * kTestPage);
    writes[i].total = &total;
    member->submit(*ctx, writes[i]);
  }
  EXPECT_EQ(total, 0) << "completion ran inline from submit";
  drain(*ctx);
  for (auto& w : writes) {
    EXPECT_EQ(w.calls, 1);
    EXPECT_EQ(w.result, static_cast<std::int32_t>(kTestPage));
  }
  EXPECT_EQ(ctx->stats().merged_ios, 1U);
  EXPECT_EQ(ctx->stats().merged_requests, 8U);
  const auto on_disk = read_all(*member);
  EXPECT_EQ(std::memcmp(on_disk.data() + 8 * kTestPage, data.data(), data.size()), 0);

  // Read back in reverse, each page into its own buffer.
  AlignedBuffer back = make_buffer(8 * kTestPage);
  std::vector<CountingRequest> reads(8);
  for (std::size_t i = 8; i-- > 0;) {
    set_page_io(reads[i], MemberOp::kRead, 8 + i, back.data() - 8 * kTestPage);
    member->submit(*ctx, reads[i]);
  }
  drain(*ctx);
  for (auto& r : reads) {
    EXPECT_EQ(r.calls, 1);
    EXPECT_EQ(r.result, static_cast<std::int32_t>(kTestPage));
  }
  EXPECT_EQ(ctx->stats().merged_ios, 2U);
  EXPECT_EQ(ctx->stats().merge_splits, 0U);
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
}

TEST(IoContextMerge, ReadsMergeAcrossSmallGapsWritesNever) {
  TempDir dir(kBase);
  auto ctx = make_context(true, 2 * kTestPage);
  auto member = make_member(dir.file("m"), 64 * kTestPage);
  ASSERT_TRUE(ctx && member);
  std::mt19937_64 rng(2);
  AlignedBuffer data = make_buffer(64 * kTestPage);
  fill(data.data(), data.size(), rng);
  ASSERT_TRUE(member->write_sync(0, data.span()).is_ok());
  // Pages 0, 2 (a one-page gap), 5 (two pages), 9 (three: too far).
  const std::size_t pages[] = {0, 2, 5, 9};
  AlignedBuffer back = make_buffer(64 * kTestPage);
  std::vector<CountingRequest> reads(4);
  for (std::size_t i = 0; i < 4; ++i) {
    set_page_io(reads[i], MemberOp::kRead, pages[i], back.data());
    member->submit(*ctx, reads[i]);
  }
  drain(*ctx);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(reads[i].result, static_cast<std::int32_t>(kTestPage));
    EXPECT_EQ(std::memcmp(back.data() + pages[i] * kTestPage, data.data() + pages[i] * kTestPage,
                          kTestPage),
              0)
        << "page " << pages[i];
  }
  EXPECT_EQ(ctx->stats().merged_ios, 1U);
  EXPECT_EQ(ctx->stats().merged_requests, 3U);
  EXPECT_EQ(ctx->stats().gap_bytes, 3 * kTestPage);
  EXPECT_EQ(ctx->stats().merge_splits, 0U) << "the merged read went through whole";
  // The gaps were read into scratch, not into the caller's buffer around them.
  EXPECT_EQ(back.data()[kTestPage], std::byte{0});
  EXPECT_EQ(back.data()[3 * kTestPage], std::byte{0});

  // Writes with a gap between them stay apart.
  std::vector<CountingRequest> writes(2);
  set_page_io(writes[0], MemberOp::kWrite, 20, data.data());
  set_page_io(writes[1], MemberOp::kWrite, 22, data.data());
  for (auto& w : writes)
    member->submit(*ctx, w);
  drain(*ctx);
  EXPECT_EQ(ctx->stats().merged_ios, 1U);
}

TEST(IoContextMerge, KindFuaAndFileSeparateRuns) {
  TempDir dir(kBase);
  auto ctx = make_context();
  auto a = make_member(dir.file("a"), 16 * kTestPage);
  auto b = make_member(dir.file("b"), 16 * kTestPage);
  ASSERT_TRUE(ctx && a && b);
  AlignedBuffer buf = make_buffer(16 * kTestPage);
  std::vector<CountingRequest> reqs(6);
  set_page_io(reqs[0], MemberOp::kWrite, 0, buf.data());
  set_page_io(reqs[1], MemberOp::kWrite, 1, buf.data());
  reqs[1].fua = true;  // durable on its own: not merged with a plain write
  set_page_io(reqs[2], MemberOp::kRead, 2, buf.data());  // a read after a write
  set_page_io(reqs[3], MemberOp::kWrite, 3, buf.data());
  set_page_io(reqs[4], MemberOp::kWrite, 4, buf.data());  // on the other file
  set_page_io(reqs[5], MemberOp::kWrite, 5, buf.data());  // contiguous with 3 but for the gap
  for (int i : {0, 1, 2, 3, 5})
    a->submit(*ctx, reqs[i]);
  b->submit(*ctx, reqs[4]);
  drain(*ctx);
  for (auto& r : reqs)
    EXPECT_EQ(r.result, static_cast<std::int32_t>(kTestPage));
  EXPECT_EQ(ctx->stats().merged_ios, 0U);
}

TEST(IoContextMerge, RunsKeepToTheFilesLimits) {
  TempDir dir(kBase);
  auto ctx = make_context();
  auto file = open_file(dir.file("m"), 64 * kTestPage);
  ASSERT_TRUE(ctx && file);
  file->set_merge_limits(4 * kTestPage, 3);  // at most 16 KiB and 3 iovecs
  AlignedBuffer buf = make_buffer(16 * kTestPage);
  std::vector<CountingRequest> reqs(10);
  for (std::size_t i = 0; i < 8; ++i) {  // 8 one-page writes: runs of 3, 3, 2
    set_page_io(reqs[i], MemberOp::kWrite, i, buf.data());
    ctx->submit_io(file, reqs[i]);
  }
  reqs[8].op = MemberOp::kWrite;  // a 3-page write after them: 2 + 3 pages > 4, alone
  reqs[8].offset = 8 * kTestPage;
  reqs[8].len = 3 * kTestPage;
  reqs[8].buf = buf.data();
  ctx->submit_io(file, reqs[8]);
  drain(*ctx);
  for (std::size_t i = 0; i < 9; ++i)
    EXPECT_EQ(reqs[i].result, static_cast<std::int32_t>(reqs[i].len)) << i;
  EXPECT_EQ(ctx->stats().merged_ios, 3U);
  EXPECT_EQ(ctx->stats().merged_requests, 8U);

  // A file with no limits (the default: pipes, sockets) is never merged.
  auto plain = open_file(dir.file("p"), 16 * kTestPage);
  ASSERT_TRUE(plain);
  std::vector<CountingRequest> more(4);
  for (std::size_t i = 0; i < 4; ++i) {
    set_page_io(more[i], MemberOp::kWrite, i, buf.data());
    ctx->submit_io(plain, more[i]);
  }
  drain(*ctx);
  EXPECT_EQ(ctx->stats().merged_ios, 3U);
}

TEST(IoContextMerge, DisabledMergesNothing) {
  TempDir dir(kBase);
  auto ctx = make_context(/*merge=*/false);
  auto member = make_member(dir.file("m"), 16 * kTestPage);
  ASSERT_TRUE(ctx && member);
  AlignedBuffer buf = make_buffer(16 * kTestPage);
  std::vector<CountingRequest> reqs(8);
  for (std::size_t i = 0; i < 8; ++i) {
    set_page_io(reqs[i], i < 4 ? MemberOp::kWrite : MemberOp::kRead, i % 4, buf.data());
    member->submit(*ctx, reqs[i]);
  }
  drain(*ctx);
  for (auto& r : reqs)
    EXPECT_EQ(r.result, static_cast<std::int32_t>(kTestPage));
  EXPECT_EQ(ctx->stats().merged_ios, 0U);
  EXPECT_EQ(ctx->stats().sqes, 8U);
}

// A merged read that ends early (the file is shorter than its last requests) is redone request
// by request: the ones inside the file succeed, the ones past its end fail as they would alone.
TEST(IoContextMerge, AShortMergedIoIsRedoneOneByOne) {
  TempDir dir(kBase);
  auto ctx = make_context();
  auto file = open_file(dir.file("m"), 8 * kTestPage);
  ASSERT_TRUE(ctx && file);
  file->set_merge_limits(1U << 20, 64);
  AlignedBuffer buf = make_buffer(16 * kTestPage);
  std::vector<CountingRequest> reads(5);
  for (std::size_t i = 0; i < 5; ++i) {  // pages 5..9 of an 8-page file
    set_page_io(reads[i], MemberOp::kRead, 5 + i, buf.data());
    ctx->submit_io(file, reads[i]);
  }
  drain(*ctx);
  EXPECT_EQ(ctx->stats().merged_ios, 1U);
  EXPECT_EQ(ctx->stats().merge_splits, 1U);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(reads[i].calls, 1) << i;
    EXPECT_EQ(reads[i].result, 5 + i < 8 ? static_cast<std::int32_t>(kTestPage) : -EIO)
        << "page " << 5 + i;
  }
}

// The test seam's result filter still sees every merged request on its own: halved results are
// resubmitted for their remainder, request by request.
TEST(IoContextMerge, MergedRequestsArePartialTransfersOfTheirOwn) {
  TempDir dir(kBase);
  auto ctx = make_context();
  auto member = make_member(dir.file("m"), 32 * kTestPage);
  ASSERT_TRUE(ctx && member);
  struct Halve {
    static std::int32_t filter(const MemberRequest& req, std::int32_t res, void* arg) {
      auto& left = *static_cast<int*>(arg);
      if (res > 512 && left > 0 && static_cast<std::uint32_t>(res) == req.len) {
        --left;
        return res / 2 / 512 * 512;
      }
      return res;
    }
  };
  int halvings = 4;
  ctx->set_result_filter_for_testing(&Halve::filter, &halvings);
  std::mt19937_64 rng(3);
  AlignedBuffer data = make_buffer(8 * kTestPage);
  fill(data.data(), data.size(), rng);
  std::vector<CountingRequest> writes(8);
  for (std::size_t i = 0; i < 8; ++i) {
    set_page_io(writes[i], MemberOp::kWrite, i, data.data());
    member->submit(*ctx, writes[i]);
  }
  drain(*ctx);
  ctx->set_result_filter_for_testing(nullptr, nullptr);
  for (auto& w : writes) {
    EXPECT_EQ(w.calls, 1);
    EXPECT_EQ(w.result, static_cast<std::int32_t>(kTestPage));
  }
  EXPECT_EQ(ctx->stats().merged_ios, 1U);
  EXPECT_GE(ctx->stats().short_resubmits, 4U);
  const auto on_disk = read_all(*member);
  EXPECT_EQ(std::memcmp(on_disk.data(), data.data(), data.size()), 0);
}

// Requests in a kernel buffer window (ublk zero copy) have no address for an iovec: never merged.
TEST(IoContextMerge, KernelBufferWindowsAreNotMerged) {
  TempDir dir(kBase);
  auto ctx = make_context();
  auto member = make_member(dir.file("m"), 16 * kTestPage);
  ASSERT_TRUE(ctx && member);
  constexpr std::size_t kWindow = 4 * kTestPage;
  void* reserved = ::mmap(nullptr, kWindow, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(reserved, MAP_FAILED);
  const std::span<std::byte> window(static_cast<std::byte*>(reserved), kWindow);
  auto slot = ctx->add_kernel_buffer_slot(window);
  ASSERT_TRUE(slot.is_ok()) << slot.status().to_string();
  AlignedBuffer pages = make_buffer(kWindow);
  ASSERT_TRUE(ctx->install_buffer_for_testing(*slot, pages.span()).is_ok());
  std::vector<CountingRequest> writes(4);
  for (std::size_t i = 0; i < 4; ++i) {
    set_page_io(writes[i], MemberOp::kWrite, i, window.data());
    member->submit(*ctx, writes[i]);
  }
  drain(*ctx);
  for (auto& w : writes)
    EXPECT_EQ(w.result, static_cast<std::int32_t>(kTestPage));
  EXPECT_EQ(ctx->stats().merged_ios, 0U);
  EXPECT_EQ(ctx->stats().fixed_buffer_ios, 4U);
  ASSERT_TRUE(ctx->install_buffer_for_testing(*slot, {}).is_ok());
  ctx->remove_buffer_region(window);
  ::munmap(reserved, kWindow);
}

// Randomized: batches of reads and writes, mostly running on from the previous request so that
// many merge, some FUA, checked byte for byte against a model; the same with merging off must
// give the same bytes.
TEST(IoContextMerge, RandomBatchesMatchTheModel) {
  for (const bool merge : {true, false}) {
    SCOPED_TRACE(merge ? "merging" : "not merging");
    TempDir dir(kBase);
    auto ctx = make_context(merge);
    constexpr std::size_t kPages = 256;
    auto member = make_member(dir.file("m"), kPages * kTestPage);
    ASSERT_TRUE(ctx && member);
    std::vector<std::byte> model(kPages * kTestPage);
    std::mt19937_64 rng(4);
    constexpr std::size_t kBatch = 48;
    AlignedBuffer bufs = make_buffer(kBatch * 8 * kTestPage);
    for (int round = 0; round < 60; ++round) {
      std::vector<CountingRequest> reqs(kBatch);
      std::vector<bool> written(kPages * 8, false);  // sectors written this batch
      std::vector<bool> readers(kPages * 8, false);  // sectors read this batch
      std::uint64_t cursor = 0;
      std::size_t n = 0;
      for (std::size_t i = 0; i < kBatch; ++i) {
        const std::uint64_t sectors = 1 + rng() % 32;
        std::uint64_t first = rng() % 100 < 70 ? cursor : rng() % (kPages * 8);
        if (rng() % 10 == 0) first += 1 + rng() % 8;  // a small gap
        if (first + sectors > kPages * 8) continue;
        const bool write = rng() % 2 == 0;
        bool clash = false;
        for (std::uint64_t s = first; s < first + sectors; ++s)
          clash = clash || written[s] || (write && readers[s]);
        if (clash) continue;
        CountingRequest& r = reqs[n];
        r.op = write ? MemberOp::kWrite : MemberOp::kRead;
        r.offset = first * 512;
        r.len = static_cast<std::uint32_t>(sectors * 512);
        r.buf = bufs.data() + n * 8 * kTestPage;
        r.fua = write && rng() % 10 == 0;
        for (std::uint64_t s = first; s < first + sectors; ++s)
          (write ? written : readers)[s] = true;
        if (write) {
          fill(r.buf, r.len, rng);
          std::memcpy(model.data() + r.offset, r.buf, r.len);
        }
        cursor = first + sectors;
        ++n;
      }
      for (std::size_t i = 0; i < n; ++i)
        member->submit(*ctx, reqs[i]);
      drain(*ctx);
      for (std::size_t i = 0; i < n; ++i) {
        const CountingRequest& r = reqs[i];
        ASSERT_EQ(r.calls, 1);
        ASSERT_EQ(r.result, static_cast<std::int32_t>(r.len)) << "round " << round << " " << i;
        if (r.op == MemberOp::kRead) {
          ASSERT_EQ(std::memcmp(r.buf, model.data() + r.offset, r.len), 0)
              << "round " << round << ": read at " << r.offset << " len " << r.len;
        }
      }
    }
    EXPECT_EQ(read_all(*member), model);
    if (merge) {
      EXPECT_GT(ctx->stats().merged_ios, 100U);
      EXPECT_GT(ctx->stats().gap_bytes, 0U);
      EXPECT_EQ(ctx->stats().merge_splits, 0U) << "nothing failed: no merged I/O redone";
    } else {
      EXPECT_EQ(ctx->stats().merged_ios, 0U);
    }
  }
}

TEST(IoContextMerge, CreateRejectsABadGap) {
  IoContextOptions options;
  options.merge_read_gap = 1000;
  EXPECT_EQ(IoContext::create(options).status().code(), Errc::kInvalidArgument);
  options.merge_read_gap = 2U << 20;
  EXPECT_EQ(IoContext::create(options).status().code(), Errc::kInvalidArgument);
}

// A block device's merge limits come from its queue in sysfs (a partition's from its disk's),
// capped by the file bound; without sysfs the file bound stands.
TEST(MergeLimits, BlockDevicesTakeTheirQueueLimits) {
  TempDir dir;
  namespace fs = std::filesystem;
  const fs::path sys = dir.path();
  fs::create_directories(sys / "devices/sda/sda1");
  fs::create_directories(sys / "devices/sda/queue");
  fs::create_directories(sys / "devices/nvme0n1/queue");
  fs::create_directories(sys / "dev/block");
  const auto put = [](const fs::path& path, const char* text) { std::ofstream(path) << text; };
  put(sys / "devices/sda/queue/max_sectors_kb", "128\n");
  put(sys / "devices/sda/queue/max_segments", "33\n");
  put(sys / "devices/nvme0n1/queue/max_sectors_kb", "4096\n");  // more than the file bound
  put(sys / "devices/nvme0n1/queue/max_segments", "garbage\n");
  fs::create_directory_symlink(sys / "devices/sda", sys / "dev/block/8:0");
  fs::create_directory_symlink(sys / "devices/sda/sda1", sys / "dev/block/8:1");
  fs::create_directory_symlink(sys / "devices/nvme0n1", sys / "dev/block/259:0");

  const MergeLimits disk = block_merge_limits(makedev(8, 0), sys.string());
  EXPECT_EQ(disk.max_bytes, 128u * 1024);
  EXPECT_EQ(disk.max_segments, 33u);
  const MergeLimits part = block_merge_limits(makedev(8, 1), sys.string());
  EXPECT_EQ(part.max_bytes, 128u * 1024);
  EXPECT_EQ(part.max_segments, 33u);
  const MergeLimits nvme = block_merge_limits(makedev(259, 0), sys.string());
  EXPECT_EQ(nvme.max_bytes, kFileMergeLimits.max_bytes);
  EXPECT_EQ(nvme.max_segments, kFileMergeLimits.max_segments);
  const MergeLimits unknown = block_merge_limits(makedev(7, 3), sys.string());
  EXPECT_EQ(unknown.max_bytes, kFileMergeLimits.max_bytes);
  EXPECT_EQ(unknown.max_segments, kFileMergeLimits.max_segments);
}

}  // namespace
}  // namespace graid
