// Turning the write-hole journal off while the array runs (Array::State::
// turn_journal_off_if_unwanted): an edit of the policy to `off` under concurrent writes, and the
// end of a rebuild under `degraded-only`. New journalled updates wait while those in flight
// finish, the epoch moves in the superblocks, and only then do writes go unjournalled, so after a
// crash no record written before the turn-off is replayed over what was written after it.
#include <atomic>
#include <cstring>
#include <thread>

#include "array/superblock_io.h"
#include "array_harness.h"

namespace graid::testing {
namespace {

using namespace std::chrono_literals;

constexpr std::uint32_t kStrip = 16 * 1024;
constexpr std::uint64_t kMemberBytes = 8u << 20;
constexpr std::uint32_t kBlock = 4096;

class JournalOffTest : public ::testing::Test {
 protected:
  void SetUp() override { parity_ = std::move(*make_parity_backend("cpu")); }
  ArrayOptions options() {
    ArrayOptions o;
    o.parity = parity_.get();
    return o;
  }
  std::uint64_t epoch_on_disk(const std::string& path) {
    auto dev = open_member(path);
    EXPECT_TRUE(dev.is_ok());
    auto sb = read_superblock(**dev);
    EXPECT_TRUE(sb.is_ok());
    return sb.is_ok() ? sb->journal_epoch : 0;
  }
  std::unique_ptr<ParityBackend> parity_;
};

// Writes run on their own thread (one 4 KiB block at a time into the first 64 stripes, each a
// partial-stripe update that writes a record while the journal is on) while this thread turns
// the journal off. Then the same blocks are written again, unjournalled, and made durable, and
// the array is dropped without stop() (a crash). Assembly must replay nothing (every record is
// of the old epoch) and every block must read as last written; with the epoch left as it was,
// the older records would be replayed over the newer blocks.
TEST_F(JournalOffTest, TurnedOffUnderWritesNoOldRecordIsReplayedAfterACrash) {
  ArrayFiles files;
  auto devs = files.open(5, kMemberBytes, true);
  ASSERT_TRUE(devs.is_ok()) << devs.status().to_string();
  CreateOptions create;
  create.level = RaidLevel::kRaid5;
  create.strip_bytes = kStrip;
  create.name = "joff";
  create.settings.journal_policy = JournalPolicy::kAlways;
  auto created = Array::create(std::move(*devs), create, options());
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  std::unique_ptr<Array> array = std::move(*created);
  ASSERT_TRUE(array->journal_state().active);
  const std::uint64_t epoch_before = epoch_on_disk(files.paths[0]);
  const std::uint64_t stripe_bytes = std::uint64_t{array->geometry().data_strips()} * kStrip;
  const std::uint64_t region = 64 * stripe_bytes;
  std::vector<std::byte> model(region);

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> writes{0};
  std::atomic<bool> failed{false};
  std::thread writer([&] {
    auto ctx = std::move(*IoContext::create(64));
    auto queue = std::move(*array->attach(*ctx));
    std::mt19937_64 rng(3);
    auto buf = std::move(*AlignedBuffer::allocate(kBlock, 4096));
    while (!stop.load()) {
      const std::uint64_t at = rng() % (region / kBlock) * kBlock;
      for (std::uint32_t i = 0; i < kBlock; ++i)
        buf.data()[i] = static_cast<std::byte>(rng());
      if (!run_one(*queue, IoKind::kWrite, at, kBlock, buf.data()).is_ok()) failed = true;
      std::memcpy(model.data() + at, buf.data(), kBlock);
      writes.fetch_add(1);
    }
    if (!run_one(*queue, IoKind::kFlush, 0, 0, nullptr).is_ok()) failed = true;
  });
  while (writes.load() < 200)
    std::this_thread::sleep_for(1ms);
  ArraySettings off = array->settings();
  off.journal_policy = JournalPolicy::kOff;
  Status st = array->set_settings(off);
  const std::uint64_t at_turn_off = writes.load();
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_FALSE(array->journal_state().active);
  EXPECT_EQ(epoch_on_disk(files.paths[0]), epoch_before + 1);
  while (writes.load() < at_turn_off + 200)
    std::this_thread::sleep_for(1ms);
  stop = true;
  writer.join();
  ASSERT_FALSE(failed.load()) << "a write failed across the turn-off";

  // Every block again, now unjournalled, made durable.
  {
    auto ctx = std::move(*IoContext::create(64));
    auto queue = std::move(*array->attach(*ctx));
    std::mt19937_64 rng(4);
    auto buf = std::move(*AlignedBuffer::allocate(kBlock, 4096));
    for (std::uint64_t at = 0; at < region; at += 2 * kBlock) {
      for (std::uint32_t i = 0; i < kBlock; ++i)
        buf.data()[i] = static_cast<std::byte>(rng());
      ASSERT_TRUE(run_one(*queue, IoKind::kWrite, at, kBlock, buf.data()).is_ok());
      std::memcpy(model.data() + at, buf.data(), kBlock);
    }
    ASSERT_TRUE(run_one(*queue, IoKind::kFlush, 0, 0, nullptr).is_ok());
    EXPECT_EQ(queue->stats().journal_records, 0u) << "writes after the turn-off wrote records";
  }
  array.reset();  // a crash: no stop()

  auto again = files.open(5, kMemberBytes, false);
  ASSERT_TRUE(again.is_ok());
  AssembleReport report;
  auto back = Array::assemble(std::move(*again), options(), {}, &report);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_FALSE(report.was_clean);
  EXPECT_EQ(report.journal_records, 0u) << "records of the old epoch were replayed";
  EXPECT_FALSE((*back)->journal_state().active) << "the policy off is recorded";
  auto ctx = std::move(*IoContext::create(64));
  auto queue = std::move(*(*back)->attach(*ctx));
  auto rbuf = std::move(*AlignedBuffer::allocate(region, 4096));
  ASSERT_TRUE(
      run_one(*queue, IoKind::kRead, 0, static_cast<std::uint32_t>(region), rbuf.data()).is_ok());
  for (std::uint64_t at = 0; at < region; at += kBlock) {
    ASSERT_EQ(std::memcmp(rbuf.data() + at, model.data() + at, kBlock), 0)
        << "block at " << at << " is not as last written";
  }
  EXPECT_EQ(*(*back)->count_inconsistent_stripes(), 0u);
}

// degraded-only: on when a member fails, off again (epoch moved) when the rebuild that makes the
// array whole ends; a second failure turns it on again.
TEST_F(JournalOffTest, DegradedOnlyTurnsOffWhenTheRebuildEnds) {
  ArrayFiles files;
  auto devs = files.open(4, kMemberBytes, true);
  ASSERT_TRUE(devs.is_ok());
  CreateOptions create;
  create.level = RaidLevel::kRaid5;
  create.strip_bytes = kStrip;
  create.name = "jdeg";
  auto created = Array::create(std::move(*devs), create, options());
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  std::unique_ptr<Array> array = std::move(*created);
  EXPECT_FALSE(array->journal_state().active);
  ASSERT_TRUE(array->fail_member(1, "test").is_ok());
  EXPECT_TRUE(array->journal_state().active);
  const std::uint64_t epoch_degraded = epoch_on_disk(files.paths[0]);

  const std::string spare = files.dir.path() + "/replacement.img";
  OpenOptions o;
  o.create = true;
  o.create_size = kMemberBytes;
  auto dev = open_member(spare, o);
  ASSERT_TRUE(dev.is_ok());
  ASSERT_TRUE(array->replace_failed(1, std::move(*dev)).is_ok());
  auto done = array->rebuild();
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  ASSERT_TRUE(*done);
  EXPECT_EQ(array->health(), ArrayHealth::kOptimal);
  EXPECT_FALSE(array->journal_state().active) << "not wanted on an optimal array";
  EXPECT_GT(epoch_on_disk(files.paths[0]), epoch_degraded);
  ASSERT_TRUE(array->fail_member(2, "test").is_ok());
  EXPECT_TRUE(array->journal_state().active);
}

}  // namespace
}  // namespace graid::testing
