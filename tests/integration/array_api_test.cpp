// The array API's contracts, one at a time: refusals that change nothing, VDs, coalescing into
// full-stripe writes, plan choice, request validation, member errors and array failure.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <span>

#include "array_harness.h"
#include "meta/superblock.h"
#include "superblock_bytes.h"

namespace graid::testing {
namespace {

class ArrayApiTest : public ::testing::Test {
 protected:
  void SetUp() override { parity_ = std::move(*make_parity_backend("cpu")); }

  ArrayOptions options() {
    ArrayOptions o;
    o.parity = parity_.get();
    return o;
  }

  // RAID5, 4 KiB strips, 1 MiB bitmap regions: the shape of the bitmap-clearing tests.
  static CreateOptions bitmap_test_shape() {
    CreateOptions c;
    c.level = RaidLevel::kRaid5;
    c.strip_bytes = 4096;
    c.bitmap_region_bytes = 1u << 20;
    return c;
  }

  // Every flush runs a bitmap clearing cycle.
  ArrayOptions clearing_options() {
    ArrayOptions o = options();
    o.bitmap_clear_interval = std::chrono::milliseconds(0);
    return o;
  }

  Result<std::unique_ptr<Array>> make(RaidLevel level, std::uint32_t n, std::uint32_t strip,
                                      std::uint64_t member_bytes = 4u << 20) {
    member_bytes_ = member_bytes;
    auto devs = files_.open(n, member_bytes, true);
    if (!devs) return devs.status();
    CreateOptions c;
    c.level = level;
    c.strip_bytes = strip;
    c.name = "api";
    return Array::create(std::move(*devs), c, options());
  }

  Result<std::unique_ptr<Array>> reassemble(std::unique_ptr<Array>& array, std::uint32_t n) {
    if (array) {
      Status st = array->stop();
      if (!st) return st;
      array.reset();
    }
    auto devs = files_.open(n, member_bytes_, false);
    if (!devs) return devs.status();
    return Array::assemble(std::move(*devs), options());
  }

  void attach(Array& array) {
    ctx_ = std::move(*IoContext::create(128));
    queue_ = std::move(*array.attach(*ctx_));
  }

  std::vector<std::byte> pattern(std::size_t n, std::uint64_t seed) {
    return random_bytes(n, seed);
  }

  ArrayFiles files_;
  std::uint64_t member_bytes_ = 0;
  std::unique_ptr<ParityBackend> parity_;
  std::unique_ptr<IoContext> ctx_;
  std::unique_ptr<ArrayQueue> queue_;
};

TEST_F(ArrayApiTest, CreateRefusesAMemberOfAnotherArrayAndChangesNothing) {
  auto first = make(RaidLevel::kRaid5, 3, 4096);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  ASSERT_TRUE((*first)->stop().is_ok());
  first->reset();
  // Same files again, without force: refused, and the old array still assembles.
  auto devs = files_.open(3, member_bytes_, false);
  ASSERT_TRUE(devs.is_ok());
  CreateOptions c;
  c.level = RaidLevel::kRaid1;
  auto second = Array::create(std::move(*devs), c, options());
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), Errc::kBusy);
  EXPECT_NE(second.status().message().find("already belongs to graid array"), std::string::npos);
  std::unique_ptr<Array> none;
  auto again = reassemble(none, 3);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ((*again)->geometry().level(), RaidLevel::kRaid5);
}

// The bytes of a file, for "nothing was changed".
std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A graid superblock this build cannot decode is graid metadata all the same: a damaged one, or
// one of a newer format, is refused by create and add_spare as a readable one is (naming what it
// is), not taken for a blank device; nothing is written; force overwrites it.
TEST_F(ArrayApiTest, CreateAndAddSpareRefuseGraidMetadataTheyCannotDecode) {
  auto first = make(RaidLevel::kRaid5, 4, 4096);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  ASSERT_TRUE((*first)->stop().is_ok());
  first->reset();
  stamp_superblock_version(files_.paths[0], 2, 0);
  flip_bit(files_.paths[1], 150);  // damaged: a flipped bit in the array name
  const std::vector<char> newer = file_bytes(files_.paths[0]);
  const std::vector<char> damaged = file_bytes(files_.paths[1]);
  const std::string this_build =
      fmt::format("this build ({}.{})", meta::kMajorVersion, meta::kMinorVersion);
  for (const std::uint32_t first_member : {0u, 1u}) {
    std::vector<std::unique_ptr<MemberDevice>> devs;
    for (std::uint32_t i = first_member; i < first_member + 3; ++i)
      devs.push_back(std::move(*open_member(files_.paths[i])));
    CreateOptions c;
    c.level = RaidLevel::kRaid5;
    c.strip_bytes = 4096;
    auto refused = Array::create(std::move(devs), c, options());
    ASSERT_FALSE(refused.is_ok());
    EXPECT_EQ(refused.status().code(), Errc::kBusy) << refused.status().to_string();
    const std::string& why = refused.status().message();
    if (first_member == 0) {
      EXPECT_NE(why.find("graid metadata of format 2.0, newer than " + this_build),
                std::string::npos)
          << why;
    } else {
      EXPECT_NE(why.find("a damaged graid superblock"), std::string::npos) << why;
    }
  }
  EXPECT_EQ(file_bytes(files_.paths[0]), newer) << "a refusal writes nothing";
  EXPECT_EQ(file_bytes(files_.paths[1]), damaged) << "a refusal writes nothing";

  // As a spare of an array made of blank files.
  ArrayFiles other;
  auto devs = other.open(3, 4u << 20, true);
  ASSERT_TRUE(devs.is_ok());
  CreateOptions c;
  c.level = RaidLevel::kRaid5;
  c.strip_bytes = 4096;
  auto array = Array::create(std::move(*devs), c, options());
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  for (const std::uint32_t i : {0u, 1u}) {
    auto spare = (*array)->add_spare(std::move(*open_member(files_.paths[i])));
    ASSERT_FALSE(spare.is_ok());
    EXPECT_EQ(spare.status().code(), Errc::kBusy) << spare.status().to_string();
  }
  EXPECT_EQ(file_bytes(files_.paths[0]), newer);
  EXPECT_EQ(file_bytes(files_.paths[1]), damaged);
  auto forced = (*array)->add_spare(std::move(*open_member(files_.paths[0])), /*force=*/true);
  EXPECT_TRUE(forced.is_ok()) << forced.status().to_string();
  auto reread = open_member(files_.paths[0]);
  ASSERT_TRUE(reread.is_ok());
  auto examined = Array::examine(**reread);
  ASSERT_TRUE(examined.is_ok()) << examined.status().to_string();
  EXPECT_EQ(examined->array_uuid, (*array)->uuid());
}

TEST_F(ArrayApiTest, CreateRefusesBadShapesAndSmallMembers) {
  auto too_few = make(RaidLevel::kRaid6, 3, 4096);
  ASSERT_FALSE(too_few.is_ok());
  EXPECT_NE(too_few.status().message().find("at least 4"), std::string::npos);

  ArrayFiles small;
  auto devs = small.open(3, 512 * 1024, true);
  ASSERT_TRUE(devs.is_ok());
  CreateOptions c;
  c.level = RaidLevel::kRaid5;
  auto tiny = Array::create(std::move(*devs), c, options());
  ASSERT_FALSE(tiny.is_ok());
  EXPECT_EQ(tiny.status().code(), Errc::kNoSpace);

  ArrayFiles twice;
  auto d2 = twice.open(2, 4u << 20, true);
  ASSERT_TRUE(d2.is_ok());
  auto dup = open_member(twice.paths[0]);
  ASSERT_TRUE(dup.is_ok());
  d2->push_back(std::move(*dup));
  auto listed_twice = Array::create(std::move(*d2), c, options());
  ASSERT_FALSE(listed_twice.is_ok());
  EXPECT_NE(listed_twice.status().message().find("listed twice"), std::string::npos);
}

TEST_F(ArrayApiTest, VirtualDrivesAreExtentsThatPersist) {
  auto array = make(RaidLevel::kRaid5, 4, 16384, 8u << 20);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  auto a = (*array)->create_vd("alpha", 3u << 20);
  auto b = (*array)->create_vd("beta", 1000);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->start, 0u);
  EXPECT_EQ(b->start, 3u << 20);
  EXPECT_EQ(b->size, 4096u);
  EXPECT_FALSE((*array)->create_vd("alpha", 4096).is_ok());
  EXPECT_EQ((*array)->create_vd("huge", 1ull << 40).status().code(), Errc::kNoSpace);

  attach(**array);
  auto data = pattern(8192, 7);
  auto buf = AlignedBuffer::allocate(8192, 4096);
  std::memcpy(buf->data(), data.data(), data.size());
  {
    TestIo io;
    io.kind = IoKind::kWrite;
    io.offset = 0;
    io.len = 8192;
    io.buf = buf->data();
    queue_->submit(io, *b);  // 8 KiB into a 4 KiB VD: refused
    EXPECT_FALSE(io.done) << "completions never run inside submit()";
    while (!io.done)
      ctx_->poll(true);
    EXPECT_EQ(io.status.code(), Errc::kOutOfRange);
  }
  {
    TestIo io;
    io.kind = IoKind::kWrite;
    io.offset = 0;
    io.len = 4096;
    io.buf = buf->data();
    queue_->submit(io, *b);
    while (!io.done)
      ctx_->poll(true);
    ASSERT_TRUE(io.status.is_ok()) << io.status.to_string();
  }
  // The VD's byte 0 is array byte b->start.
  auto back = AlignedBuffer::allocate(4096, 4096);
  ASSERT_TRUE(run_one(*queue_, IoKind::kRead, b->start, 4096, back->data()).is_ok());
  EXPECT_EQ(std::memcmp(back->data(), data.data(), 4096), 0);
  queue_.reset();

  auto again = reassemble(*array, 4);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  auto vds = (*again)->vds();
  ASSERT_EQ(vds.size(), 2u);
  EXPECT_EQ(vds[1].name, "beta");
  EXPECT_EQ(vds[1].start, b->start);
  ASSERT_TRUE((*again)->delete_vd(a->id).is_ok());
  EXPECT_EQ((*again)->vds().size(), 1u);
  EXPECT_EQ((*again)->delete_vd(a->id).code(), Errc::kNotFound);
  auto c = (*again)->create_vd("gamma", 2u << 20);  // fits in the hole alpha left
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->start, 0u);
}

// A VD grows in place into the free space after it (graidctl edit vd size): its data stays,
// the new part takes writes, the size persists, and every refusal (shrinking, no room, unknown
// VD) changes nothing. The growth is recorded with a member failing its superblock write, and
// the reassembled, degraded array reads back every byte of the model.
TEST_F(ArrayApiTest, VirtualDrivesGrowInPlaceAndKeepTheirData) {
  auto array = make(RaidLevel::kRaid5, 4, 16384, 8u << 20);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  Array& a = **array;
  auto alpha = a.create_vd("alpha", 1u << 20);
  auto beta = a.create_vd("beta", 1u << 20);
  ASSERT_TRUE(alpha.is_ok() && beta.is_ok());
  ASSERT_EQ(beta->start, 3u << 20);  // stripes of 48 KiB: the next 1 MiB-and-stripe boundary
  attach(a);
  // The model: what each VD byte holds. Random writes over the whole of each VD first.
  std::vector<std::byte> model_alpha = pattern(3u << 20, 11);
  std::vector<std::byte> model_beta = pattern(1u << 20, 12);
  auto write = [&](const VdInfo& vd, std::uint64_t off, std::span<const std::byte> data) {
    auto buf = AlignedBuffer::allocate(data.size(), 4096);
    std::memcpy(buf->data(), data.data(), data.size());
    TestIo io;
    io.kind = IoKind::kWrite;
    io.offset = off;
    io.len = static_cast<std::uint32_t>(data.size());
    io.buf = buf->data();
    queue_->submit(io, vd);
    while (!io.done)
      ctx_->poll(true);
    return io.status;
  };
  std::mt19937_64 rng(5);
  auto scatter = [&](const VdInfo& vd, std::vector<std::byte>& model, std::uint64_t from,
                     std::uint64_t to, int count) {
    for (int i = 0; i < count; ++i) {
      const std::uint64_t len = 4096 * (1 + rng() % 24);
      const std::uint64_t off = from + (rng() % ((to - from - len) / 4096 + 1)) * 4096;
      auto data = pattern(len, rng());
      ASSERT_TRUE(write(vd, off, data).is_ok()) << vd.name << " at " << off;
      std::memcpy(model.data() + off, data.data(), len);
    }
  };
  ASSERT_TRUE(write(*alpha, 0, std::span(model_alpha).first(1u << 20)).is_ok());
  ASSERT_TRUE(write(*beta, 0, model_beta).is_ok());
  scatter(*alpha, model_alpha, 0, 1u << 20, 40);

  // Refusals, each changing nothing.
  auto events_on_disk = [&] {
    auto dev = open_member(files_.paths[0], OpenOptions{});
    if (!dev) return std::uint64_t{0};
    auto exam = Array::examine(**dev);
    return exam ? exam->events : 0;
  };
  const std::uint64_t events = events_on_disk();
  ASSERT_NE(events, 0u);
  auto shrink = a.resize_vd(alpha->id, 512u << 10);
  EXPECT_EQ(shrink.status().code(), Errc::kInvalidArgument);
  EXPECT_NE(shrink.status().message().find("shrinking"), std::string::npos);
  auto past = a.resize_vd(alpha->id, (3u << 20) + 4096);
  EXPECT_EQ(past.status().code(), Errc::kNoSpace);
  EXPECT_NE(past.status().message().find("at most 3145728 bytes, up to VD 1 ('beta')"),
            std::string::npos)
      << past.status().message();
  EXPECT_EQ(a.resize_vd(beta->id, 1ull << 62).status().code(), Errc::kNoSpace);
  EXPECT_EQ(a.resize_vd(99, 4u << 20).status().code(), Errc::kNotFound);
  auto same = a.resize_vd(alpha->id, 1u << 20);
  ASSERT_TRUE(same.is_ok());
  EXPECT_EQ(same->size, 1u << 20);
  EXPECT_EQ(events_on_disk(), events) << "a refusal or no-op wrote the superblocks";
  EXPECT_EQ(a.vds()[0].size, 1u << 20);

  // Grow alpha up to beta, with member 3 failing its superblock write: recorded on the others.
  (*files_.faulty[3]).fail_op(MemberOp::kWrite);
  auto grown = a.resize_vd(alpha->id, 3u << 20);
  ASSERT_TRUE(grown.is_ok()) << grown.status().to_string();
  EXPECT_EQ(grown->size, 3u << 20);
  EXPECT_EQ(grown->start, 0u);
  EXPECT_EQ(a.member_health(3), MemberHealth::kFailed);
  // The old size (a frontend's handle from before) still ends at 1 MiB; the new one does not.
  EXPECT_EQ(write(*alpha, 1u << 20, std::span(model_alpha).subspan(1u << 20, 4096)).code(),
            Errc::kOutOfRange);
  ASSERT_TRUE(write(*grown, 1u << 20, std::span(model_alpha).subspan(1u << 20, 2u << 20)).is_ok());
  scatter(*grown, model_alpha, 0, 3u << 20, 60);
  scatter(*beta, model_beta, 0, 1u << 20, 20);
  queue_.reset();

  auto again = reassemble(*array, 4);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ((*again)->member_health(3), MemberHealth::kFailed);  // stale: missed the update
  const auto vds = (*again)->vds();
  ASSERT_EQ(vds.size(), 2u);
  EXPECT_EQ(vds[0].size, 3u << 20);
  EXPECT_EQ(vds[1].start, 3u << 20);
  EXPECT_EQ(vds[1].size, 1u << 20);
  attach(**again);
  for (const auto& [vd, model] :
       {std::pair{vds[0], &model_alpha}, std::pair{vds[1], &model_beta}}) {
    auto back = AlignedBuffer::allocate(model->size(), 4096);
    ASSERT_TRUE(run_one(*queue_, IoKind::kRead, vd.start, static_cast<std::uint32_t>(model->size()),
                        back->data())
                    .is_ok());
    EXPECT_EQ(std::memcmp(back->data(), model->data(), model->size()), 0) << vd.name;
  }
  queue_.reset();
}

// A VD starts on a full-stripe boundary that is also a 1 MiB boundary: RAID5 of 4 with 64 KiB
// strips has 192 KiB stripes, so the second VD starts at 3 MiB. On main f1b45f8 it started at
// 1 MiB, in the middle of a stripe, and ublk's io_opt hint did not line up with the stripes.
TEST_F(ArrayApiTest, VirtualDrivesStartOnAFullStripe) {
  auto array = make(RaidLevel::kRaid5, 4, 65536, 16u << 20);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  const std::uint64_t stripe = (*array)->geometry().stripe_data_bytes();
  ASSERT_EQ(stripe, 3u * 65536);
  auto a = (*array)->create_vd("alpha", 1u << 20);
  auto b = (*array)->create_vd("beta", 1u << 20);
  auto c = (*array)->create_vd("gamma", 5u << 20);
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  EXPECT_EQ(a->start, 0u);
  EXPECT_EQ(b->start, 3u << 20);
  EXPECT_EQ(c->start, 6u << 20);
  for (const VdInfo& vd : (*array)->vds()) {
    EXPECT_EQ(vd.start % stripe, 0u) << vd.name;
    EXPECT_EQ(vd.start % (1u << 20), 0u) << vd.name;
  }
  // What is left is what a VD of "the rest" (graidctl create vd without --size) gets: from the
  // next boundary after gamma (12 MiB) to the end.
  const std::uint64_t rest = (*array)->largest_free_extent();
  EXPECT_EQ(rest, ((*array)->capacity() - (12u << 20)) / 4096 * 4096);
  auto d = (*array)->create_vd("delta", rest);
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_EQ(d->start, 12u << 20);
  EXPECT_EQ((*array)->largest_free_extent(), 0u);
}

TEST_F(ArrayApiTest, SmallWritesInFlightTogetherBecomeOneFullStripeWrite) {
  auto array = make(RaidLevel::kRaid5, 5, 4096);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  attach(**array);
  const std::uint64_t stripe = (*array)->geometry().stripe_data_bytes();  // 4 x 4 KiB
  auto buf = AlignedBuffer::allocate(stripe, 4096);
  auto data = pattern(stripe, 11);
  std::memcpy(buf->data(), data.data(), stripe);
  std::vector<TestIo> ios(4);
  std::vector<TestIo*> ptrs;
  for (int i = 0; i < 4; ++i) {
    ios[i].kind = IoKind::kWrite;
    ios[i].offset = 3 * stripe + i * 4096;  // stripe 3
    ios[i].len = 4096;
    ios[i].buf = buf->data() + i * 4096;
    ptrs.push_back(&ios[i]);
  }
  std::uint64_t reads_before = 0;
  for (auto* f : files_.faulty)
    reads_before += f->counts().reads;
  run_all(*queue_, ptrs);
  for (auto& io : ios)
    ASSERT_TRUE(io.status.is_ok()) << io.status.to_string();
  std::uint64_t reads_after = 0;
  for (auto* f : files_.faulty)
    reads_after += f->counts().reads;
  const QueueStats& st = queue_->stats();
  EXPECT_EQ(st.stripe_writes, 1u);
  EXPECT_EQ(st.coalesced, 3u);
  EXPECT_EQ(st.full_stripe, 1u);
  EXPECT_EQ(reads_after, reads_before) << "a full-stripe write reads nothing";
  auto back = AlignedBuffer::allocate(stripe, 4096);
  ASSERT_TRUE(run_one(*queue_, IoKind::kRead, 3 * stripe, stripe, back->data()).is_ok());
  EXPECT_EQ(std::memcmp(back->data(), data.data(), stripe), 0);
  queue_.reset();
  EXPECT_EQ(*(*array)->count_inconsistent_stripes(), 0u);
}

TEST_F(ArrayApiTest, ParityOfStripesReadyTogetherRunsAsOneBatch) {
  auto array = make(RaidLevel::kRaid6, 6, 4096);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  attach(**array);
  const std::uint64_t stripe = (*array)->geometry().stripe_data_bytes();
  constexpr int kStripes = 8;
  auto buf = AlignedBuffer::allocate(kStripes * stripe, 4096);
  auto data = pattern(kStripes * stripe, 13);
  std::memcpy(buf->data(), data.data(), data.size());
  std::vector<TestIo> ios(kStripes);
  std::vector<TestIo*> ptrs;
  for (int i = 0; i < kStripes; ++i) {
    ios[i].kind = IoKind::kWrite;
    ios[i].offset = (2 * i + 1) * stripe;  // every other stripe: eight separate operations
    ios[i].len = static_cast<std::uint32_t>(stripe);
    ios[i].buf = buf->data() + i * stripe;
    ptrs.push_back(&ios[i]);
  }
  run_all(*queue_, ptrs);
  for (auto& io : ios)
    ASSERT_TRUE(io.status.is_ok()) << io.status.to_string();
  EXPECT_EQ(queue_->stats().full_stripe, 8u);
  EXPECT_EQ(queue_->stats().parity_batches, 1u) << "eight stripes, one execute()";
  EXPECT_EQ(queue_->stats().parity_jobs, 8u);
  auto back = AlignedBuffer::allocate(stripe, 4096);
  for (int i = 0; i < kStripes; ++i) {
    ASSERT_TRUE(run_one(*queue_, IoKind::kRead, (2 * i + 1) * stripe,
                        static_cast<std::uint32_t>(stripe), back->data())
                    .is_ok());
    EXPECT_EQ(std::memcmp(back->data(), data.data() + i * stripe, stripe), 0) << i;
  }
  queue_.reset();
  EXPECT_EQ(*(*array)->count_inconsistent_stripes(), 0u);
}

TEST_F(ArrayApiTest, PlanChoiceFollowsMemberReads) {
  auto array = make(RaidLevel::kRaid5, 6, 4096);
  ASSERT_TRUE(array.is_ok());
  attach(**array);
  auto buf = AlignedBuffer::allocate(8192, 4096);
  // One strip of five: read-modify-write reads old data + P = 2 (reconstruct would read 4).
  ASSERT_TRUE(run_one(*queue_, IoKind::kWrite, 4096, 4096, buf->data()).is_ok());
  EXPECT_EQ(queue_->stats().read_modify_write, 1u);
  // Four strips of five: reconstruct-write reads the one untouched strip.
  auto big = AlignedBuffer::allocate(4 * 4096, 4096);
  ASSERT_TRUE(run_one(*queue_, IoKind::kWrite, 5 * 4096 * 2, 4 * 4096, big->data()).is_ok());
  EXPECT_EQ(queue_->stats().reconstruct_write, 1u);
  queue_.reset();
  EXPECT_EQ(*(*array)->count_inconsistent_stripes(), 0u);
}

TEST_F(ArrayApiTest, InvalidRequestsFailWithoutTouchingMembers) {
  auto array = make(RaidLevel::kRaid6, 4, 4096);
  ASSERT_TRUE(array.is_ok());
  attach(**array);
  auto buf = AlignedBuffer::allocate(8192, 4096);
  std::uint64_t writes_before = 0;
  for (auto* f : files_.faulty)
    writes_before += f->counts().writes;
  EXPECT_EQ(run_one(*queue_, IoKind::kWrite, 100, 512, buf->data()).code(), Errc::kInvalidArgument);
  EXPECT_EQ(run_one(*queue_, IoKind::kWrite, 0, 700, buf->data()).code(), Errc::kInvalidArgument);
  EXPECT_EQ(run_one(*queue_, IoKind::kWrite, 0, 512, buf->data() + 8).code(),
            Errc::kInvalidArgument);
  EXPECT_EQ(run_one(*queue_, IoKind::kWrite, (*array)->capacity(), 512, buf->data()).code(),
            Errc::kOutOfRange);
  EXPECT_EQ(run_one(*queue_, IoKind::kRead, 0, 0, buf->data()).code(), Errc::kInvalidArgument);
  std::uint64_t writes_after = 0;
  for (auto* f : files_.faulty)
    writes_after += f->counts().writes;
  EXPECT_EQ(writes_after, writes_before);
  EXPECT_EQ(queue_->in_flight(), 0u);
}

TEST_F(ArrayApiTest, ReadErrorsAreCorrectedAndAMemberFailsPastTheLimit) {
  auto array = make(RaidLevel::kRaid5, 4, 4096);
  ASSERT_TRUE(array.is_ok());
  attach(**array);
  const std::uint64_t n = 64 * 1024;
  auto buf = AlignedBuffer::allocate(n, 4096);
  auto data = pattern(n, 5);
  std::memcpy(buf->data(), data.data(), n);
  ASSERT_TRUE(run_one(*queue_, IoKind::kWrite, 0, n, buf->data()).is_ok());
  // Member 1 fails every read: each is reconstructed and rewritten (the rewrite succeeds), and
  // the member stays until it has had more than max_read_errors (20) of them.
  files_.faulty[1]->fail_op(MemberOp::kRead);
  auto back = AlignedBuffer::allocate(n, 4096);
  Status st = run_one(*queue_, IoKind::kRead, 0, n, back->data());
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(std::memcmp(back->data(), data.data(), n), 0);
  EXPECT_EQ((*array)->member_health(1), MemberHealth::kActive);
  const std::uint64_t corrected = (*array)->corrected_read_errors(1);
  EXPECT_GT(corrected, 0u);
  EXPECT_LE(corrected, 20u);
  for (int i = 0; i < 10 && (*array)->member_health(1) == MemberHealth::kActive; ++i) {
    std::memset(back->data(), 0, n);
    st = run_one(*queue_, IoKind::kRead, 0, n, back->data());
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_EQ(std::memcmp(back->data(), data.data(), n), 0);
  }
  EXPECT_EQ((*array)->member_health(1), MemberHealth::kFailed);
  EXPECT_EQ((*array)->health(), ArrayHealth::kDegraded);
  EXPECT_GT(queue_->stats().degraded_reads, 0u);
}

TEST_F(ArrayApiTest, TooManyFailuresFailTheArrayAndIoErrorsOut) {
  auto array = make(RaidLevel::kRaid5, 3, 4096);
  ASSERT_TRUE(array.is_ok());
  attach(**array);
  auto buf = AlignedBuffer::allocate(4096, 4096);
  ASSERT_TRUE((*array)->fail_member(0, "test").is_ok());
  EXPECT_EQ((*array)->health(), ArrayHealth::kDegraded);
  ASSERT_TRUE(run_one(*queue_, IoKind::kWrite, 0, 4096, buf->data()).is_ok());
  files_.faulty[2]->vanish();
  EXPECT_EQ(run_one(*queue_, IoKind::kWrite, 0, 4096, buf->data()).code(), Errc::kIoError);
  EXPECT_EQ((*array)->health(), ArrayHealth::kFailed);
  EXPECT_EQ(run_one(*queue_, IoKind::kRead, 0, 4096, buf->data()).code(), Errc::kIoError);
  EXPECT_FALSE((*array)->stop().is_ok());
}

TEST_F(ArrayApiTest, Raid0MemberLossIsAnErrorNotACrash) {
  auto array = make(RaidLevel::kRaid0, 2, 4096);
  ASSERT_TRUE(array.is_ok());
  attach(**array);
  auto buf = AlignedBuffer::allocate(16384, 4096);
  files_.faulty[1]->vanish();
  EXPECT_EQ(run_one(*queue_, IoKind::kWrite, 0, 16384, buf->data()).code(), Errc::kIoError);
  EXPECT_EQ((*array)->health(), ArrayHealth::kFailed);
}

TEST_F(ArrayApiTest, AFlushLetsIdleRegionsSkipResyncAfterACrash) {
  for (bool flush : {false, true}) {
    SCOPED_TRACE(flush ? "with a flush" : "without a flush");
    ArrayFiles files;
    auto devs = files.open(4, 8u << 20, true);
    ASSERT_TRUE(devs.is_ok());
    const CreateOptions c = bitmap_test_shape();
    const ArrayOptions o = clearing_options();
    auto array = Array::create(std::move(*devs), c, o);
    ASSERT_TRUE(array.is_ok()) << array.status().to_string();
    {
      auto ctx = IoContext::create(64);
      auto queue = (*array)->attach(**ctx);
      auto buf = AlignedBuffer::allocate(64 * 1024, 4096);
      for (std::uint64_t off = 0; off < (*array)->capacity(); off += 2u << 20) {
        ASSERT_TRUE(run_one(**queue, IoKind::kWrite, off, 64 * 1024, buf->data()).is_ok());
      }
      if (flush) {
        ASSERT_TRUE(run_one(**queue, IoKind::kFlush, 0, 0, nullptr).is_ok());
      }
    }
    array->reset();  // a crash: no stop()
    auto again = files.open(4, 8u << 20, false);
    AssembleReport report;
    auto assembled = Array::assemble(std::move(*again), o, {}, &report);
    ASSERT_TRUE(assembled.is_ok()) << assembled.status().to_string();
    EXPECT_FALSE(report.was_clean);
    if (flush) {
      EXPECT_EQ(report.resynced_bytes, 0u) << "every region was idle and flushed";
    } else {
      EXPECT_GT(report.resynced_bytes, 0u) << "written regions stay dirty until a flush";
    }
    EXPECT_EQ(*(*assembled)->count_inconsistent_stripes(), 0u);
  }
}

// Holds flush requests until the test releases them, so a test can complete writes while a
// flush is in flight.
class GatedFlushMember final : public MemberDevice {
 public:
  explicit GatedFlushMember(std::unique_ptr<MemberDevice> inner) : inner_(std::move(inner)) {}
  const std::string& path() const noexcept override { return inner_->path(); }
  std::uint64_t size() const noexcept override { return inner_->size(); }
  void submit(IoContext& ctx, MemberRequest& req) override {
    if (gate_ && req.op == MemberOp::kFlush) {
      held_.emplace_back(&ctx, &req);
      return;
    }
    inner_->submit(ctx, req);
  }
  Status read_sync(std::uint64_t o, std::span<std::byte> b) override {
    return inner_->read_sync(o, b);
  }
  Status write_sync(std::uint64_t o, std::span<const std::byte> b) override {
    return inner_->write_sync(o, b);
  }
  Status flush_sync() override { return inner_->flush_sync(); }

  void gate(bool on) { gate_ = on; }
  std::size_t held() const { return held_.size(); }
  // Sends the held flushes on (call on the thread that owns their contexts).
  void release() {
    gate_ = false;
    for (auto [ctx, req] : held_)
      inner_->submit(*ctx, *req);
    held_.clear();
  }

 private:
  std::unique_ptr<MemberDevice> inner_;
  bool gate_ = false;
  std::vector<std::pair<IoContext*, MemberRequest*>> held_;
};

TEST_F(ArrayApiTest, WritesThatCompleteDuringAFlushKeepTheirBitmapBits) {
  // A flush clears the bitmap bits of regions idle when it *started*. A write that begins and
  // completes while the flush is in flight is not covered by it: its region must stay dirty,
  // or a power loss can leave its stripe inconsistent with no re-sync to repair it.
  ArrayFiles files;
  auto devs = files.open(4, 12u << 20, true);
  ASSERT_TRUE(devs.is_ok());
  std::vector<GatedFlushMember*> gates;
  for (auto& d : *devs) {
    auto g = std::make_unique<GatedFlushMember>(std::move(d));
    gates.push_back(g.get());
    d = std::move(g);
  }
  const CreateOptions c = bitmap_test_shape();
  const ArrayOptions o = clearing_options();
  auto array = Array::create(std::move(*devs), c, o);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  {
    auto ctx = IoContext::create(64);
    auto queue = (*array)->attach(**ctx);
    auto buf = AlignedBuffer::allocate(64 * 1024, 4096);
    std::mt19937_64 rng(99);
    for (std::size_t i = 0; i < buf->size(); ++i)
      buf->data()[i] = static_cast<std::byte>(rng());
    const std::uint64_t region_data = 3ull << 20;  // 1 MiB of member space, 3 data strips
    // One dirty, idle region, so the flush below has something to clear and runs a cycle.
    ASSERT_TRUE(run_one(**queue, IoKind::kWrite, 9 * region_data, 16384, buf->data()).is_ok());
    // The flush starts (and marks its candidates), then is held at the members.
    for (auto* g : gates)
      g->gate(true);
    TestIo flush;
    flush.kind = IoKind::kFlush;
    (*queue)->submit(flush);
    while (std::any_of(gates.begin(), gates.end(), [](auto* g) { return g->held() == 0; })) {
      (*ctx)->poll(false);
    }
    // Writes into eight other regions begin and complete while the flush waits.
    for (int r = 0; r < 8; ++r) {
      ASSERT_TRUE(
          run_one(**queue, IoKind::kWrite, r * region_data + 8192, 16384, buf->data()).is_ok());
    }
    for (auto* g : gates)
      g->release();
    while (!flush.done)
      (*ctx)->poll(true);
    ASSERT_TRUE(flush.status.is_ok()) << flush.status.to_string();
  }
  // Power loss: each member independently loses or keeps each unflushed write.
  std::mt19937_64 rng(7);
  for (auto* f : files.faulty) {
    auto lost = f->power_loss(rng, PowerLossPolicy::kLoseRandom);
    ASSERT_TRUE(lost.is_ok()) << lost.status().to_string();
  }
  array->reset();
  auto again = files.open(4, 12u << 20, false);
  ASSERT_TRUE(again.is_ok());
  AssembleReport report;
  auto assembled = Array::assemble(std::move(*again), o, {}, &report);
  ASSERT_TRUE(assembled.is_ok()) << assembled.status().to_string();
  EXPECT_GT(report.resynced_bytes, 0u) << "the regions written during the flush stayed dirty";
  EXPECT_EQ(*(*assembled)->count_inconsistent_stripes(), 0u);
}

TEST_F(ArrayApiTest, FlushReachesEveryLiveMember) {
  auto array = make(RaidLevel::kRaid10, 4, 4096);
  ASSERT_TRUE(array.is_ok());
  attach(**array);
  ASSERT_TRUE(run_one(*queue_, IoKind::kFlush, 0, 0, nullptr).is_ok());
  for (auto* f : files_.faulty)
    EXPECT_EQ(f->counts().flushes, 1u) << f->path();
}

}  // namespace
}  // namespace graid::testing
