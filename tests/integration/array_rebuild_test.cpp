// Rebuild onto a hot spare or a replacement (Array::take_spare, replace_failed, rebuild) for
// RAID1, RAID10, RAID5 and RAID6, with randomized reads and writes checked byte for byte against
// a model running all the while: reads of stripes below and above the checkpoint, writes that
// land on the member being rebuilt or plan around it. After each rebuild the array is optimal,
// consistent, and serves every byte with *other* members failed (so the rebuilt member's data is
// what answers). Also: a rebuild stopped and the array dropped without a clean stop (a crash)
// resumes from the recorded checkpoint after assembly; a second member failing during a RAID6
// rebuild; a survivor that cannot be read during a RAID5 rebuild fails it cleanly.
#include <algorithm>
#include <cstring>

#include "array_harness.h"

namespace graid::testing {
namespace {

using namespace std::chrono_literals;

constexpr std::uint32_t kStrip = 4096;
constexpr std::uint64_t kMemberBytes = 6u << 20;

struct Shape {
  RaidLevel level;
  std::uint32_t members;
};

std::string shape_name(const ::testing::TestParamInfo<Shape>& info) {
  return std::string(raid_level_name(info.param.level));
}

// Random verified I/O on the array from one thread until `stop`: writes of fresh data recorded
// in `model`, reads compared with it. One batch of non-overlapping requests at a time.
class Traffic {
 public:
  Traffic(Array& array, std::vector<std::byte>& model, std::uint64_t seed)
      : array_(array), model_(model), thread_([this, seed] { run(seed); }) {}
  ~Traffic() { finish(); }
  void finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::uint64_t ios() const { return ios_.load(); }
  std::uint64_t mismatches() const { return mismatches_.load(); }
  std::uint64_t errors() const { return errors_.load(); }

 private:
  void run(std::uint64_t seed) {
    auto ctx = std::move(*IoContext::create(64));
    auto queue = std::move(*array_.attach(*ctx));
    std::mt19937_64 rng(seed);
    const std::uint64_t blocks = array_.capacity() / 4096;
    constexpr std::uint32_t kBatch = 8, kMaxBlocks = 8;
    std::vector<TestIo> ios(kBatch);
    auto buf = std::move(*AlignedBuffer::allocate(kBatch * kMaxBlocks * 4096, 4096));
    while (!stop_.load()) {
      // Non-overlapping: each request in its own slice of the array.
      const std::uint64_t slice = blocks / kBatch;
      std::vector<TestIo*> batch;
      for (std::uint32_t i = 0; i < kBatch; ++i) {
        TestIo& io = ios[i];
        const std::uint32_t n = 1 + static_cast<std::uint32_t>(rng() % kMaxBlocks);
        io.kind = rng() % 2 == 0 ? IoKind::kWrite : IoKind::kRead;
        io.offset = (i * slice + rng() % (slice - n)) * 4096;
        io.len = n * 4096;
        io.buf = buf.data() + i * kMaxBlocks * 4096;
        if (io.kind == IoKind::kWrite) {
          for (std::uint32_t w = 0; w < io.len / 8; ++w) {
            const std::uint64_t v = rng();
            std::memcpy(io.buf + w * 8, &v, 8);
          }
        }
        batch.push_back(&io);
      }
      run_all(*queue, batch);
      for (TestIo* io : batch) {
        ++ios_;
        if (!io->status) {
          ++errors_;
          continue;
        }
        std::byte* at = model_.data() + io->offset;
        if (io->kind == IoKind::kWrite) {
          std::memcpy(at, io->buf, io->len);
        } else if (std::memcmp(at, io->buf, io->len) != 0) {
          ++mismatches_;
        }
      }
    }
  }

  Array& array_;
  std::vector<std::byte>& model_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> ios_{0}, mismatches_{0}, errors_{0};
  std::thread thread_;
};

class ArrayRebuildTest : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override { parity_ = std::move(*make_parity_backend("cpu")); }

  ArrayOptions options() {
    ArrayOptions o;
    o.parity = parity_.get();
    return o;
  }
  // Members (and `spares` more files, opened separately) of kMemberBytes.
  std::unique_ptr<Array> make(std::uint32_t spares = 1) {
    auto devs = files_.open(GetParam().members + spares, kMemberBytes, true);
    EXPECT_TRUE(devs.is_ok());
    for (std::uint32_t i = 0; i < spares; ++i) {
      spare_devs_.push_back(std::move(devs->back()));
      devs->pop_back();
    }
    CreateOptions c;
    c.level = GetParam().level;
    c.strip_bytes = kStrip;
    c.bitmap_region_bytes = 1u << 20;
    c.name = "rebuild";
    auto array = Array::create(std::move(*devs), c, options());
    EXPECT_TRUE(array.is_ok()) << array.status().to_string();
    return array.is_ok() ? std::move(*array) : nullptr;
  }
  // Fills the array with random data and the model with the same.
  void fill(Array& array, std::uint64_t seed) {
    model_ = random_bytes(array.capacity(), seed);
    auto ctx = std::move(*IoContext::create(64));
    auto queue = std::move(*array.attach(*ctx));
    auto buf = std::move(*AlignedBuffer::allocate(1u << 20, 4096));
    for (std::uint64_t at = 0; at < array.capacity(); at += buf.size()) {
      const auto len =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(buf.size(), array.capacity() - at));
      std::memcpy(buf.data(), model_.data() + at, len);
      ASSERT_TRUE(run_one(*queue, IoKind::kWrite, at, len, buf.data()).is_ok());
    }
  }
  // Reads the whole array and compares it with the model.
  void verify(Array& array, const char* when) {
    auto ctx = std::move(*IoContext::create(64));
    auto queue = std::move(*array.attach(*ctx));
    auto buf = std::move(*AlignedBuffer::allocate(1u << 20, 4096));
    for (std::uint64_t at = 0; at < array.capacity(); at += buf.size()) {
      const auto len =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(buf.size(), array.capacity() - at));
      Status st = run_one(*queue, IoKind::kRead, at, len, buf.data());
      ASSERT_TRUE(st.is_ok()) << when << ": " << st.to_string();
      ASSERT_EQ(std::memcmp(buf.data(), model_.data() + at, len), 0)
          << when << ": data differs in array bytes [" << at << ", +" << len << ")";
    }
  }
  // A member other than `except` whose failure the array survives with `failed` already gone.
  std::uint32_t other_member(const Array& array, std::uint32_t except, std::uint64_t failed) {
    for (std::uint32_t m = 0; m < array.member_count(); ++m) {
      if (m == except || (failed >> m & 1u) != 0) continue;
      if (array.geometry().survives(failed | std::uint64_t{1} << m)) return m;
    }
    return array.member_count();
  }

  ArrayFiles files_;
  std::vector<std::unique_ptr<MemberDevice>> spare_devs_;
  std::vector<std::byte> model_;
  std::unique_ptr<ParityBackend> parity_;
};

TEST_P(ArrayRebuildTest, SpareTakesOverAndRebuildsUnderVerifiedIo) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 11);
  const std::uint32_t victim = 1;
  ASSERT_TRUE(array->add_spare(std::move(spare_devs_[0])).is_ok());
  EXPECT_EQ(array->take_spare(victim).code(), Errc::kInvalidArgument) << "member not failed";
  ASSERT_TRUE(array->fail_member(victim, "test").is_ok());
  ASSERT_EQ(array->health(), ArrayHealth::kDegraded);
  ASSERT_TRUE(array->take_spare(victim).is_ok());
  EXPECT_EQ(array->take_spare(victim).code(), Errc::kInvalidArgument) << "rebuilding already";
  auto slot = array->member_slot(victim);
  ASSERT_TRUE(slot.is_ok());
  EXPECT_EQ(slot->state, MemberSlotState::kRebuilding);
  EXPECT_EQ(slot->path, files_.paths.back());
  EXPECT_EQ(array->member_slots().size(), array->member_count()) << "the spare slot is gone";

  Traffic traffic(*array, model_, 21);
  RebuildControl control;
  control.window_stripes = 8;
  control.checkpoint_interval = 20ms;
  control.bytes_per_second = 12u << 20;  // slow enough for traffic to meet the checkpoint
  auto done = array->rebuild(control);
  traffic.finish();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(*done);
  EXPECT_GT(traffic.ios(), 100u);
  EXPECT_EQ(traffic.errors(), 0u);
  EXPECT_EQ(traffic.mismatches(), 0u);
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal);
  EXPECT_EQ(array->member_slot(victim)->state, MemberSlotState::kActive);
  EXPECT_TRUE(array->rebuilding_members().empty());
  auto bad = array->count_inconsistent_stripes();
  ASSERT_TRUE(bad.is_ok());
  EXPECT_EQ(*bad, 0u);
  verify(*array, "after rebuild");

  // The rebuilt member now answers for what the others lose.
  std::uint64_t failed = 0;
  for (std::uint32_t round = 0; round < array->geometry().failures_tolerated(); ++round) {
    const std::uint32_t other = other_member(*array, victim, failed);
    ASSERT_LT(other, array->member_count());
    ASSERT_TRUE(array->fail_member(other, "test").is_ok());
    failed |= std::uint64_t{1} << other;
  }
  verify(*array, "after failing the others");
}

TEST_P(ArrayRebuildTest, StoppedRebuildResumesFromItsCheckpointAfterACrash) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 12);
  const std::uint32_t victim = 0;
  ASSERT_TRUE(array->fail_member(victim, "test").is_ok());
  ASSERT_TRUE(array->replace_failed(victim, std::move(spare_devs_[0])).is_ok());
  std::atomic<bool> stop{false};
  RebuildControl control;
  control.stop = &stop;
  control.window_stripes = 4;
  control.bytes_per_second = 8u << 20;
  std::uint64_t reached = 0;
  {
    Traffic traffic(*array, model_, 22);
    std::thread stopper([&] {
      while (array->member_slot(victim)->rebuild_offset < kMemberBytes / 3)
        std::this_thread::sleep_for(1ms);
      stop = true;
    });
    auto done = array->rebuild(control);
    stopper.join();
    ASSERT_TRUE(done.is_ok()) << done.status().to_string();
    EXPECT_FALSE(*done) << "stopped";
    reached = array->member_slot(victim)->rebuild_offset;
    EXPECT_GE(reached, kMemberBytes / 3);
    // Writes go on above and below the checkpoint before the "crash".
    std::this_thread::sleep_for(100ms);
    traffic.finish();
    EXPECT_EQ(traffic.errors(), 0u);
    EXPECT_EQ(traffic.mismatches(), 0u);
  }
  // A crash: the array object goes without stop() (nothing marks it clean).
  array.reset();
  auto devs = files_.open(GetParam().members + 1, kMemberBytes, false);
  ASSERT_TRUE(devs.is_ok());
  AssembleReport report;
  AssembleOptions assemble;
  // RAID5/6: a crash with a member being rebuilt is a dirty degraded start (a write torn by the
  // crash above the checkpoint leaves parity the rebuild would trust). The write-hole journal
  // (degraded-only, the default) covered every write since the member failed, so assembly
  // replays it and needs no override (without a journal it is refused: array_journal_test).
  auto again = Array::assemble(std::move(*devs), options(), assemble, &report);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_FALSE(report.was_clean);
  auto slot = (*again)->member_slot(victim);
  ASSERT_TRUE(slot.is_ok());
  EXPECT_EQ(slot->state, MemberSlotState::kRebuilding);
  EXPECT_EQ(slot->rebuild_offset, reached) << "the checkpoint recorded when it stopped";
  // Reads below and above the checkpoint are right before the rebuild resumes.
  verify(**again, "after assembly, before resuming");
  auto done = (*again)->rebuild();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(*done);
  EXPECT_EQ((*again)->health(), ArrayHealth::kOptimal);
  EXPECT_EQ(*(*again)->count_inconsistent_stripes(), 0u);
  const std::uint32_t other = other_member(**again, victim, 0);
  ASSERT_TRUE((*again)->fail_member(other, "test").is_ok());
  verify(**again, "resumed rebuild, another member failed");
}

TEST_P(ArrayRebuildTest, TakenBackMemberIsRebuiltInFull) {
  auto array = make(0);
  ASSERT_TRUE(array);
  fill(*array, 15);
  const std::uint32_t victim = array->member_count() - 1;
  ASSERT_TRUE(array->fail_member(victim, "marked offline").is_ok());
  {
    // Writes while it is out: its old contents are stale now.
    Traffic traffic(*array, model_, 25);
    std::this_thread::sleep_for(150ms);
  }
  ASSERT_TRUE(array->readd_failed(victim).is_ok());
  EXPECT_EQ(array->member_slot(victim)->state, MemberSlotState::kRebuilding);
  EXPECT_EQ(array->readd_failed(victim).code(), Errc::kInvalidArgument) << "rebuilding already";
  Traffic traffic(*array, model_, 26);
  auto done = array->rebuild();
  traffic.finish();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_EQ(traffic.mismatches(), 0u);
  EXPECT_EQ(traffic.errors(), 0u);
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal);
  EXPECT_EQ(*array->count_inconsistent_stripes(), 0u);
  const std::uint32_t other = other_member(*array, victim, 0);
  ASSERT_TRUE(array->fail_member(other, "test").is_ok());
  verify(*array, "taken back, another member failed");
}

INSTANTIATE_TEST_SUITE_P(Levels, ArrayRebuildTest,
                         ::testing::Values(Shape{RaidLevel::kRaid1, 2},
                                           Shape{RaidLevel::kRaid10, 4},
                                           Shape{RaidLevel::kRaid5, 4},
                                           Shape{RaidLevel::kRaid6, 5}),
                         shape_name);

class ArrayRebuildFailureTest : public ArrayRebuildTest {};

TEST_P(ArrayRebuildFailureTest, SecondFailureDuringARaid6RebuildIsSurvived) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 13);
  ASSERT_TRUE(array->add_spare(std::move(spare_devs_[0])).is_ok());
  ASSERT_TRUE(array->fail_member(2, "test").is_ok());
  ASSERT_TRUE(array->take_spare(2).is_ok());
  Traffic traffic(*array, model_, 23);
  std::thread failer([&] {
    while (array->member_slot(2)->rebuild_offset < kMemberBytes / 4)
      std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(array->fail_member(4, "second failure").is_ok());
  });
  RebuildControl control;
  control.window_stripes = 4;
  control.bytes_per_second = 16u << 20;
  auto done = array->rebuild(control);
  failer.join();
  traffic.finish();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(*done);
  EXPECT_EQ(traffic.errors(), 0u);
  EXPECT_EQ(traffic.mismatches(), 0u);
  EXPECT_EQ(array->health(), ArrayHealth::kDegraded) << "member 4 is still failed";
  EXPECT_EQ(array->member_slot(2)->state, MemberSlotState::kActive);
  verify(*array, "after the rebuild");
  ASSERT_TRUE(array->fail_member(0, "third").is_ok());
  verify(*array, "rebuilt member + 2 survivors");
}

INSTANTIATE_TEST_SUITE_P(Raid6, ArrayRebuildFailureTest,
                         ::testing::Values(Shape{RaidLevel::kRaid6, 5}), shape_name);

class ArrayRebuildRaid5Test : public ArrayRebuildTest {};

TEST_P(ArrayRebuildRaid5Test, UnreadableSurvivorFailsTheRebuildAndTheArrayCleanly) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 14);
  ASSERT_TRUE(array->fail_member(3, "test").is_ok());
  ASSERT_TRUE(array->replace_failed(3, std::move(spare_devs_[0])).is_ok());
  // Member 1 cannot be read in the second half of its data area: nothing left to rebuild from.
  const std::uint64_t data = array->member_data_offset();
  files_.faulty[1]->fail_range(data + kMemberBytes / 2, kMemberBytes);
  auto done = array->rebuild();
  ASSERT_FALSE(done.is_ok());
  EXPECT_EQ(done.status().code(), Errc::kIoError);
  EXPECT_EQ(array->health(), ArrayHealth::kFailed);
  EXPECT_EQ(array->member_slot(3)->state, MemberSlotState::kRebuilding)
      << "the replacement keeps its role and checkpoint";
  EXPECT_GT(array->member_slot(3)->rebuild_offset, 0u);
}

INSTANTIATE_TEST_SUITE_P(Raid5, ArrayRebuildRaid5Test,
                         ::testing::Values(Shape{RaidLevel::kRaid5, 4}), shape_name);

// A member pulled with I/O in flight: its errors come back after a spare has taken its role
// (graidd's rebuild job is that quick). They must not fail the spare: the VM found it did.
TEST_P(ArrayRebuildRaid5Test, ErrorsFromTheReplacedDeviceDoNotFailTheSpare) {
  auto array = make();
  ASSERT_TRUE(array);
  fill(*array, 16);
  ASSERT_TRUE(array->add_spare(std::move(spare_devs_[0])).is_ok());
  auto ctx = std::move(*IoContext::create(64));
  auto queue = std::move(*array->attach(*ctx));
  const std::uint32_t bytes = 4 * array->geometry().stripe_data_bytes();  // member 1 holds data
  auto buf = std::move(*AlignedBuffer::allocate(bytes, 4096));
  files_.faulty[1]->fail_op_with(MemberOp::kRead, ENODEV);  // a vanished drive's answer
  const std::uint64_t reads_before = files_.faulty[1]->counts().reads;
  TestIo io;
  io.kind = IoKind::kRead;
  io.offset = 0;
  io.len = bytes;
  io.buf = buf.data();
  queue->submit(io);
  ASSERT_GT(files_.faulty[1]->counts().reads, reads_before) << "the read went to member 1 first";
  // Before its error is seen: member 1 fails (another I/O saw it) and the spare takes over.
  ASSERT_TRUE(array->fail_member(1, "pulled").is_ok());
  ASSERT_TRUE(array->take_spare(1).is_ok());
  while (!io.done)
    queue->context().poll(true);
  ASSERT_TRUE(io.status.is_ok()) << io.status.to_string();
  EXPECT_EQ(std::memcmp(buf.data(), model_.data(), bytes), 0);
  EXPECT_EQ(array->member_slot(1)->state, MemberSlotState::kRebuilding)
      << "the spare was failed for the old drive's error";
  queue.reset();
  auto done = array->rebuild();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal);
  verify(*array, "after the rebuild");
}

TEST_P(ArrayRebuildRaid5Test, ReplacementIsRefusedWhenItCannotServe) {
  auto array = make(2);
  ASSERT_TRUE(array);
  EXPECT_EQ(array->take_spare(0).code(), Errc::kInvalidArgument);
  ASSERT_TRUE(array->fail_member(0, "test").is_ok());
  EXPECT_EQ(array->take_spare(0).code(), Errc::kNotFound) << "no spare";
  EXPECT_EQ(array->take_spare(9).code(), Errc::kOutOfRange);
  // Its own failed device under another name is refused only for its superblock (force takes it).
  auto same = open_member(files_.paths[1], {});
  ASSERT_TRUE(same.is_ok());
  EXPECT_EQ(array->replace_failed(0, std::move(*same)).code(), Errc::kInvalidArgument)
      << "member 1's storage";
  ASSERT_TRUE(array->fail_member(1, "second").is_ok());
  EXPECT_EQ(array->replace_failed(1, std::move(spare_devs_[0])).code(), Errc::kIoError)
      << "array failed: nothing to rebuild from";
  EXPECT_EQ(array->member_slot(1)->state, MemberSlotState::kFailed);
}

}  // namespace
}  // namespace graid::testing
