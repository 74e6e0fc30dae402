// The NVMe passthrough member on real NVMe generic devices. DESTROYS their contents, so it runs
// only on devices named in the environment, and skips loudly otherwise (this machine has no
// NVMe; tests/vm/nvme_passthrough_guest.sh runs it in a VM with emulated drives):
//
//   GRAID_NVME_TEST_DEVICE=/dev/ng1n1                 one namespace for the member tests
//   GRAID_NVME_RAID_DEVICES="/dev/ng0n1 /dev/ng2n1 ..."  five namespaces for the RAID5 test
//
// Checked: what open_member learns (against the namespace's block device), the O_EXCL claim on
// that block device, random reads and writes of random lengths (beyond MDTS) from misaligned and
// registered buffers against a byte model and against O_DIRECT reads of /dev/nvmeXnY, blocking
// I/O, zeroing, NVMe errors from the drive mapped to errnos, and a RAID5 array over five
// passthrough members (random verified I/O, stop, reassemble, degraded reads).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <linux/nvme_ioctl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "graid/array.h"
#include "graid/buffer.h"
#include "graid/member.h"
#include "graid/parity.h"
#include "io/nvme_io_op.h"
#include "io/nvme_member.h"

namespace graid {
namespace {

std::string test_device() {
  const char* v = std::getenv("GRAID_NVME_TEST_DEVICE");
  return v != nullptr ? v : "";
}

std::vector<std::string> raid_devices() {
  std::vector<std::string> out;
  const char* v = std::getenv("GRAID_NVME_RAID_DEVICES");
  if (v == nullptr) return out;
  std::istringstream in(v);
  for (std::string s; in >> s;)
    out.push_back(s);
  return out;
}

#define NEED_DEVICE()                   \
  const std::string ng = test_device(); \
  if (ng.empty()) GTEST_SKIP() << "set GRAID_NVME_TEST_DEVICE=/dev/ngXnY (its data is destroyed)"

class Done final : public MemberRequest {
 public:
  void on_done(std::int32_t r) override {
    result = r;
    ++calls;
  }
  std::int32_t result = 0;
  int calls = 0;
};

std::unique_ptr<IoContext> big_ring(unsigned depth = 256) {
  IoContextOptions o;
  o.queue_depth = depth;
  o.big_sqe = true;
  o.big_cqe = true;
  auto ctx = IoContext::create(o);
  EXPECT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  return ctx.is_ok() ? std::move(ctx).value() : nullptr;
}

void drain(IoContext& ctx) {
  while (ctx.in_flight() > 0)
    ctx.poll(true);
}

std::int32_t run_one(IoContext& ctx, MemberDevice& m, MemberOp op, std::uint64_t offset,
                     std::uint32_t len, std::byte* buf) {
  Done r;
  r.op = op;
  r.offset = offset;
  r.len = len;
  r.buf = buf;
  m.submit(ctx, r);
  drain(ctx);
  EXPECT_EQ(r.calls, 1);
  return r.result;
}

AlignedBuffer buffer(std::size_t n) {
  auto b = AlignedBuffer::allocate(n, 4096);
  EXPECT_TRUE(b.is_ok());
  return std::move(b).value();
}

TEST(NvmePassthroughDevice, OpenLearnsWhatTheBlockDeviceReports) {
  NEED_DEVICE();
  auto m = open_member(ng);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  auto sibling = nvme_sibling_path(ng);
  ASSERT_TRUE(sibling.is_ok()) << sibling.status().to_string();
  auto back = nvme_sibling_path(*sibling);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(*back, ng);
  const int fd = ::open(sibling->c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::uint64_t bytes = 0;
  int lbs = 0;
  ASSERT_EQ(::ioctl(fd, BLKGETSIZE64, &bytes), 0);
  ASSERT_EQ(::ioctl(fd, BLKSSZGET, &lbs), 0);
  ::close(fd);
  EXPECT_EQ((*m)->io_mode(), MemberIoMode::kPassthrough);
  EXPECT_EQ((*m)->size(), bytes);
  EXPECT_EQ((*m)->logical_block_size(), static_cast<std::uint32_t>(lbs));
  std::printf("%s: %llu bytes, %u-byte LBAs, block device %s\n", ng.c_str(),
              static_cast<unsigned long long>((*m)->size()), (*m)->logical_block_size(),
              sibling->c_str());
}

TEST(NvmePassthroughDevice, ExclusiveOpenClaimsTheBlockDevice) {
  NEED_DEVICE();
  auto first = open_member(ng);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  auto second = open_member(ng);
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), Errc::kBusy) << second.status().to_string();
  auto sibling = nvme_sibling_path(ng);
  ASSERT_TRUE(sibling.is_ok());
  auto block = open_member(*sibling);
  ASSERT_FALSE(block.is_ok());
  EXPECT_EQ(block.status().code(), Errc::kBusy) << block.status().to_string();
  OpenOptions shared;
  shared.exclusive = false;
  auto third = open_member(ng, shared);
  EXPECT_TRUE(third.is_ok()) << third.status().to_string();
  std::printf("second exclusive open: %s\n", second.status().to_string().c_str());
}

TEST(NvmePassthroughDevice, ANormalRingIsRefusedWithEopnotsupp) {
  NEED_DEVICE();
  auto m = open_member(ng);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  auto ctx = IoContext::create(16);
  ASSERT_TRUE(ctx.is_ok());
  AlignedBuffer b = buffer(4096);
  EXPECT_EQ(run_one(**ctx, **m, MemberOp::kRead, 0, 4096, b.data()), -EOPNOTSUPP);
}

// Rounds of concurrent random writes (disjoint within a round), then reads of random ranges, all
// checked against a byte model; then the whole region read back through the block device.
TEST(NvmePassthroughDevice, RandomIoMatchesTheModelAndTheBlockDevice) {
  NEED_DEVICE();
  auto opened = open_member(ng);
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  MemberDevice& m = **opened;
  auto ctx = big_ring();
  ASSERT_NE(ctx, nullptr);
  const std::uint32_t lba = m.logical_block_size();
  const std::uint64_t region = std::min<std::uint64_t>(m.size(), 96ULL << 20);
  std::vector<std::byte> model(region);
  ASSERT_TRUE(m.zero_range(0, region).is_ok());
  std::mt19937_64 rng(0x6e766d65);
  constexpr unsigned kPerRound = 12;
  constexpr std::size_t kMaxLen = 3 << 20;  // several MDTS-sized commands
  // Half the slots live in a registered region (IORING_URING_CMD_FIXED), half do not.
  AlignedBuffer fixed = buffer(kPerRound / 2 * (kMaxLen + 4096));
  AlignedBuffer plain = buffer(kPerRound / 2 * (kMaxLen + 4096));
  const std::span<std::byte> regions[] = {fixed.span()};
  ASSERT_TRUE(ctx->register_buffers(regions).is_ok());
  auto slot_buf = [&](unsigned i, std::size_t misalign) {
    AlignedBuffer& b = i % 2 == 0 ? fixed : plain;
    return b.data() + (i / 2) * (kMaxLen + 4096) + misalign;
  };
  auto random_len = [&]() -> std::uint64_t {
    const unsigned pick = rng() % 10;
    const std::uint64_t most = pick < 5 ? 64 << 10 : pick < 8 ? 640 << 10 : kMaxLen;
    return (1 + rng() % (most / lba)) * lba;
  };
  const std::uint64_t fixed_before = nvme::IoOp::fixed_buffer_commands();
  std::uint64_t bytes_written = 0, bytes_read = 0;
  for (int round = 0; round < 8; ++round) {
    Done reqs[kPerRound];
    const std::uint64_t slice = region / kPerRound / lba * lba;
    for (unsigned i = 0; i < kPerRound; ++i) {
      const std::uint64_t len = std::min<std::uint64_t>(random_len(), slice);
      const std::uint64_t start = i * slice + (rng() % ((slice - len) / lba + 1)) * lba;
      std::byte* p = slot_buf(i, (rng() % 64) * 64);  // DMA needs 4-byte alignment, not 4096
      for (std::uint64_t k = 0; k < len; k += 8) {
        const std::uint64_t v = rng();
        std::memcpy(p + k, &v, 8);
      }
      std::memcpy(model.data() + start, p, len);
      reqs[i].op = MemberOp::kWrite;
      reqs[i].offset = start;
      reqs[i].len = static_cast<std::uint32_t>(len);
      reqs[i].buf = p;
      reqs[i].fua = rng() % 4 == 0;
      m.submit(*ctx, reqs[i]);
      bytes_written += len;
    }
    drain(*ctx);
    for (auto& r : reqs)
      ASSERT_EQ(r.result, static_cast<std::int32_t>(r.len)) << "write at " << r.offset;
    Done reads[kPerRound];
    for (unsigned i = 0; i < kPerRound; ++i) {
      const std::uint64_t len = random_len();
      const std::uint64_t start = (rng() % ((region - len) / lba + 1)) * lba;
      reads[i].op = MemberOp::kRead;
      reads[i].offset = start;
      reads[i].len = static_cast<std::uint32_t>(len);
      reads[i].buf = slot_buf(i, (rng() % 64) * 64);
      m.submit(*ctx, reads[i]);
      bytes_read += len;
    }
    drain(*ctx);
    for (auto& r : reads) {
      ASSERT_EQ(r.result, static_cast<std::int32_t>(r.len)) << "read at " << r.offset;
      ASSERT_EQ(std::memcmp(r.buf, model.data() + r.offset, r.len), 0)
          << "read of " << r.len << " at " << r.offset << " differs from what was written";
    }
  }
  Done flush;
  flush.op = MemberOp::kFlush;
  m.submit(*ctx, flush);
  drain(*ctx);
  EXPECT_EQ(flush.result, 0);
  const std::uint64_t fixed_used = nvme::IoOp::fixed_buffer_commands() - fixed_before;
  EXPECT_GT(fixed_used, 0U) << "registered buffers were used";
  std::printf(
      "random I/O: %llu MiB written, %llu MiB read, %llu commands on registered buffers, "
      "%llu ring commands\n",
      static_cast<unsigned long long>(bytes_written >> 20),
      static_cast<unsigned long long>(bytes_read >> 20),
      static_cast<unsigned long long>(fixed_used),
      static_cast<unsigned long long>(ctx->stats().commands));

  // The block device sees what the passthrough member wrote.
  auto sibling = nvme_sibling_path(ng);
  ASSERT_TRUE(sibling.is_ok());
  const int fd = ::open(sibling->c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  AlignedBuffer chunk = buffer(1 << 20);
  for (std::uint64_t at = 0; at < region; at += chunk.size()) {
    const std::size_t n = std::min<std::uint64_t>(chunk.size(), region - at);
    ASSERT_EQ(::pread(fd, chunk.data(), n, static_cast<off_t>(at)), static_cast<ssize_t>(n));
    ASSERT_EQ(std::memcmp(chunk.data(), model.data() + at, n), 0)
        << sibling.value() << " differs at MiB " << (at >> 20);
  }
  ::close(fd);
}

TEST(NvmePassthroughDevice, BlockingIoAndZeroing) {
  NEED_DEVICE();
  auto opened = open_member(ng);
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  MemberDevice& m = **opened;
  const std::size_t len = (2 << 20) + 8192;  // several commands
  AlignedBuffer out = buffer(len), in = buffer(len);
  std::mt19937_64 rng(99);
  for (auto& b : out.span())
    b = static_cast<std::byte>(rng());
  const std::uint64_t at = 5 << 20;
  ASSERT_TRUE(m.write_sync(at, out.span()).is_ok());
  ASSERT_TRUE(m.flush_sync().is_ok());
  ASSERT_TRUE(m.read_sync(at, in.span()).is_ok());
  EXPECT_EQ(std::memcmp(in.data(), out.data(), len), 0);

  const std::vector<std::byte> zeroes(len);
  Status st = m.zero_range(at, 1 << 20);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  ASSERT_TRUE(m.read_sync(at, in.span()).is_ok());
  EXPECT_EQ(std::memcmp(in.data(), zeroes.data(), 1 << 20), 0) << "zero_range left data";
  EXPECT_EQ(std::memcmp(in.data() + (1 << 20), out.data() + (1 << 20), len - (1 << 20)), 0)
      << "zero_range went beyond its range";

  auto ctx = big_ring();
  ASSERT_NE(ctx, nullptr);
  ASSERT_TRUE(m.write_sync(at, out.span()).is_ok());
  EXPECT_EQ(run_one(*ctx, m, MemberOp::kWriteZeroes, at, 1 << 20, nullptr), 0);
  EXPECT_EQ(run_one(*ctx, m, MemberOp::kDiscard, at + (1 << 20), 1 << 20, nullptr), 0);
  ASSERT_TRUE(m.read_sync(at, in.span()).is_ok());
  EXPECT_EQ(std::memcmp(in.data(), zeroes.data(), 2 << 20), 0)
      << "write zeroes / discard left data";
  EXPECT_EQ(std::memcmp(in.data() + (2 << 20), out.data() + (2 << 20), 8192), 0);
}

// An NVMe error from the drive itself: a member that believes the namespace is larger reads past
// its end, and the controller's LBA Out of Range becomes -ERANGE (the engine's "bad request").
TEST(NvmePassthroughDevice, DriveStatusesBecomeErrnos) {
  NEED_DEVICE();
  auto real = open_member(ng);
  ASSERT_TRUE(real.is_ok()) << real.status().to_string();
  const int fd = ::open(ng.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const int nsid = ::ioctl(fd, NVME_IOCTL_ID);
  ASSERT_GT(nsid, 0);
  nvme::Limits l;
  l.nsid = static_cast<std::uint32_t>(nsid);
  l.lba_shift = static_cast<std::uint32_t>(__builtin_ctz((*real)->logical_block_size()));
  const std::uint64_t size = (*real)->size();
  auto liar = make_nvme_member_for_testing(ng, std::make_shared<MemberFile>(fd, false), l,
                                           size + (1 << 20));
  auto ctx = big_ring();
  ASSERT_NE(ctx, nullptr);
  AlignedBuffer b = buffer(8192);
  EXPECT_EQ(run_one(*ctx, *liar, MemberOp::kRead, size, 8192, b.data()), -ERANGE);
  EXPECT_EQ(run_one(*ctx, *liar, MemberOp::kWrite, size + 4096, 4096, b.data()), -ERANGE);
  Status st = liar->read_sync(size, b.span());
  EXPECT_EQ(st.code(), Errc::kOutOfRange) << st.to_string();
  EXPECT_NE(st.message().find("LBA out of range"), std::string::npos) << st.message();
  std::printf("past the end: %s\n", st.to_string().c_str());
}

// ---- RAID5 over passthrough members ------------------------------------------------------------

struct ArrayRequest final : ArrayIo {
  bool done = false;
  Status status;
  void on_complete(Status s) override {
    done = true;
    status = std::move(s);
  }
};

std::vector<std::unique_ptr<MemberDevice>> open_all(const std::vector<std::string>& paths) {
  std::vector<std::unique_ptr<MemberDevice>> out;
  for (const auto& p : paths) {
    auto m = open_member(p);
    EXPECT_TRUE(m.is_ok()) << m.status().to_string();
    if (m.is_ok()) out.push_back(std::move(*m));
  }
  return out;
}

// Random writes, then reads of random ranges, through `array`, against `model`.
void random_array_io(Array& array, std::vector<std::byte>& model, std::mt19937_64& rng, int rounds,
                     bool write) {
  auto ctx = big_ring(1024);
  ASSERT_NE(ctx, nullptr);
  auto queue = array.attach(*ctx);
  ASSERT_TRUE(queue.is_ok()) << queue.status().to_string();
  constexpr unsigned kPerRound = 16;
  constexpr std::size_t kMaxLen = 1 << 20;
  AlignedBuffer bufs = buffer(kPerRound * kMaxLen);
  const std::uint64_t region = model.size();
  const std::uint64_t slice = region / kPerRound / 4096 * 4096;
  for (int round = 0; round < rounds; ++round) {
    ArrayRequest reqs[kPerRound];
    for (unsigned i = 0; i < kPerRound; ++i) {
      const std::uint64_t len = (1 + rng() % (rng() % 3 == 0 ? kMaxLen / 4096 : 16)) * 4096;
      ArrayRequest& r = reqs[i];
      r.buf = bufs.data() + i * kMaxLen;
      r.len = static_cast<std::uint32_t>(len);
      if (write) {
        r.kind = IoKind::kWrite;
        r.offset = i * slice + (rng() % ((slice - len) / 4096 + 1)) * 4096;
        for (std::uint64_t k = 0; k < len; k += 8) {
          const std::uint64_t v = rng();
          std::memcpy(r.buf + k, &v, 8);
        }
        std::memcpy(model.data() + r.offset, r.buf, len);
      } else {
        r.kind = IoKind::kRead;
        r.offset = (rng() % ((region - len) / 4096 + 1)) * 4096;
      }
      (*queue)->submit(r);
    }
    while ((*queue)->in_flight() > 0)
      ctx->poll(true);
    for (auto& r : reqs) {
      ASSERT_TRUE(r.done);
      ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
      if (!write) {
        ASSERT_EQ(std::memcmp(r.buf, model.data() + r.offset, r.len), 0)
            << "array read of " << r.len << " at " << r.offset;
      }
    }
  }
  queue->reset();
}

TEST(NvmePassthroughDevice, Raid5OverFivePassthroughMembers) {
  const auto paths = raid_devices();
  if (paths.size() != 5) {
    GTEST_SKIP() << "set GRAID_NVME_RAID_DEVICES to five /dev/ngXnY (their data is destroyed)";
  }
  auto parity = make_parity_backend("cpu");
  ASSERT_TRUE(parity.is_ok());
  ArrayOptions options;
  options.parity = parity->get();
  CreateOptions create;
  create.level = RaidLevel::kRaid5;
  create.strip_bytes = 64 << 10;
  create.zero_members = true;  // zero_range: Write Zeroes through passthrough
  create.name = "nvme-passthrough";
  auto array = Array::create(open_all(paths), create, options, /*force=*/true);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  const std::uint64_t region = std::min<std::uint64_t>((*array)->capacity(), 128ULL << 20);
  std::vector<std::byte> model(region);
  std::mt19937_64 rng(5);
  random_array_io(**array, model, rng, 6, true);
  random_array_io(**array, model, rng, 6, false);
  std::printf("raid5: %llu MiB capacity, %u-byte blocks, %s\n",
              static_cast<unsigned long long>((*array)->capacity() >> 20),
              (*array)->logical_block_size(),
              std::string(array_health_name((*array)->health())).c_str());
  // Parity read back through NVME_IOCTL_IO_CMD agrees with the data.
  auto bad = (*array)->count_inconsistent_stripes();
  ASSERT_TRUE(bad.is_ok()) << bad.status().to_string();
  EXPECT_EQ(*bad, 0U);
  const Status stopped = (*array)->stop();  // superblocks and bitmap: blocking passthrough I/O
  ASSERT_TRUE(stopped.is_ok()) << stopped.to_string();
  array->reset();

  AssembleReport report;
  auto again = Array::assemble(open_all(paths), options, {}, &report);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ((*again)->health(), ArrayHealth::kOptimal);
  EXPECT_TRUE(report.was_clean);
  EXPECT_EQ(report.resynced_bytes, 0U);
  random_array_io(**again, model, rng, 4, false);
  ASSERT_TRUE((*again)->fail_member(2, "test: degraded reads").is_ok());
  EXPECT_EQ((*again)->health(), ArrayHealth::kDegraded);
  random_array_io(**again, model, rng, 4, false);  // member 2's strips reconstructed
  random_array_io(**again, model, rng, 3, true);   // degraded writes
  random_array_io(**again, model, rng, 4, false);
}

}  // namespace
}  // namespace graid
