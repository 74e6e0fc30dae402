// Background initialisation (CreateOptions::background_init, Array::initialise) on RAID1, RAID10,
// RAID5 and RAID6 over members that hold old data: the array is usable at once; bytes written
// before the job reaches them survive a member failure (their stripes were never written by
// read-modify-write over meaningless parity); the job runs under verified writes and leaves
// every stripe consistent; stopped, it resumes from its checkpoint after a restart; it waits
// while a member is failed, and a check waits for it; on the job engine's pipeline it runs with
// windows in flight under verified writes and held writes, and resumes after a power loss at a
// random moment from a checkpoint that covers only durable parity.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "array_harness.h"

namespace graid::testing {
namespace {

using namespace std::chrono_literals;

constexpr std::uint32_t kStrip = 4096;
constexpr std::uint64_t kMemberBytes = 8u << 20;
constexpr std::uint32_t kSector = 512;

struct Shape {
  RaidLevel level;
  std::uint32_t members;
};

std::string shape_name(const ::testing::TestParamInfo<Shape>& param_info) {
  return std::string(raid_level_name(param_info.param.level));
}

// Writes random bytes over every member past its first MiB (superblock and bitmap stay clear),
// as drives that held other data do.
void scribble(const std::vector<std::string>& paths, std::uint64_t seed) {
  constexpr std::uint64_t kFrom = 1u << 20;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const auto junk = random_bytes(kMemberBytes - kFrom, seed + i);
    const int fd = ::open(paths[i].c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, junk.data(), junk.size(), kFrom), static_cast<ssize_t>(junk.size()));
    ::close(fd);
  }
}

class ArrayBackgroundInitTest : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    parity_ = std::move(*make_parity_backend("cpu"));
    auto devs = files_.open(GetParam().members, kMemberBytes, true);
    ASSERT_TRUE(devs.is_ok());
    ASSERT_NO_FATAL_FAILURE(scribble(files_.paths, 31));
    CreateOptions c;
    c.level = GetParam().level;
    c.strip_bytes = kStrip;
    c.name = "binit";
    c.background_init = true;
    auto array = Array::create(std::move(*devs), c, options());
    ASSERT_TRUE(array.is_ok()) << array.status().to_string();
    array_ = std::move(*array);
    ctx_ = std::move(*IoContext::create(128));
    queue_ = std::move(*array_->attach(*ctx_));
    // The model starts as what the array reads now: the old contents.
    model_.resize(array_->capacity());
    written_.assign(array_->capacity() / kSector, false);
    for (std::uint64_t at = 0; at < model_.size(); at += kChunk) {
      auto buf = AlignedBuffer::allocate(kChunk, 4096);
      ASSERT_TRUE(run_one(*queue_, IoKind::kRead, at, kChunk, buf->data()).is_ok());
      std::memcpy(model_.data() + at, buf->data(), kChunk);
    }
  }

  ArrayOptions options() {
    ArrayOptions o;
    o.parity = parity_.get();
    return o;
  }

  // `count` writes of 1..24 sectors at random sector offsets, recorded in the model.
  void random_writes(std::mt19937_64& rng, int count) {
    const std::uint64_t sectors = model_.size() / kSector;
    auto buf = AlignedBuffer::allocate(24 * kSector, 4096);
    for (int i = 0; i < count; ++i) {
      const std::uint32_t len = static_cast<std::uint32_t>(1 + rng() % 24) * kSector;
      const std::uint64_t at = rng() % (sectors - len / kSector + 1) * kSector;
      for (std::uint32_t j = 0; j < len; ++j)
        buf->data()[j] = static_cast<std::byte>(rng());
      ASSERT_TRUE(run_one(*queue_, IoKind::kWrite, at, len, buf->data()).is_ok());
      std::memcpy(model_.data() + at, buf->data(), len);
      std::fill_n(written_.begin() + static_cast<std::ptrdiff_t>(at / kSector), len / kSector,
                  true);
    }
  }

  // Reads the whole array; `only_written` compares only sectors written through the array.
  void verify(bool only_written) {
    for (std::uint64_t at = 0; at < model_.size(); at += kChunk) {
      auto buf = AlignedBuffer::allocate(kChunk, 4096);
      ASSERT_TRUE(run_one(*queue_, IoKind::kRead, at, kChunk, buf->data()).is_ok());
      for (std::uint64_t s = 0; s < kChunk / kSector; ++s) {
        const std::uint64_t sector = at / kSector + s;
        if (only_written && !written_[sector]) continue;
        ASSERT_EQ(std::memcmp(buf->data() + s * kSector, model_.data() + sector * kSector, kSector),
                  0)
            << "sector " << sector << (written_[sector] ? " (written)" : " (old data)");
      }
    }
  }

  // After initialisation: every byte for parity levels (the job must not touch data); for
  // mirrors the written bytes only (unwritten ones now read as the first copy, while the model
  // may hold what another copy read before).
  void verify_after_init() {
    const RaidLevel level = GetParam().level;
    verify(level == RaidLevel::kRaid1 || level == RaidLevel::kRaid10);
  }

  static constexpr std::uint32_t kChunk = 256 * 1024;
  ArrayFiles files_;
  std::unique_ptr<ParityBackend> parity_;
  std::unique_ptr<Array> array_;
  std::unique_ptr<IoContext> ctx_;
  std::unique_ptr<ArrayQueue> queue_;
  std::vector<std::byte> model_;
  std::vector<bool> written_;
};

// Create returns with the work pending; the old data makes stripes inconsistent until it runs.
TEST_P(ArrayBackgroundInitTest, CreateReturnsWithInitialisationPending) {
  EXPECT_EQ(array_->init_method(), InitMethod::kResync);
  EXPECT_EQ(array_->init_progress(), std::optional<std::uint64_t>(0));
  EXPECT_GT(*array_->count_inconsistent_stripes(), 0u);
  EXPECT_EQ(array_->check().status().code(), Errc::kBusy);
}

// Writes land before the job gets anywhere; then a member fails. Every written byte must read
// back through reconstruction: a read-modify-write over the old, meaningless parity would have
// left wrong parity behind (RAID5 with 4 data strips picks it for a one-strip write).
TEST_P(ArrayBackgroundInitTest, WritesBeforeInitialisationSurviveAMemberFailure) {
  std::mt19937_64 rng(7);
  ASSERT_NO_FATAL_FAILURE(random_writes(rng, 400));
  ASSERT_TRUE(array_->fail_member(1, "test").is_ok());
  ASSERT_NO_FATAL_FAILURE(verify(true));
  // Degraded: the job waits, changing nothing.
  auto r = array_->initialise();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_FALSE(r->finished);
  EXPECT_FALSE(r->paused.empty());
  EXPECT_EQ(array_->init_progress(), std::optional<std::uint64_t>(0));
}

// The job runs on its own thread, paced, while this thread writes and reads back; at the end
// every stripe is consistent and every byte (old or new) reads as the model says.
TEST_P(ArrayBackgroundInitTest, InitialisationUnderVerifiedWritesLeavesEveryStripeConsistent) {
  InitControl control;
  control.window_stripes = 4;
  control.bytes_per_second = 16u << 20;  // about half a second for these members
  control.checkpoint_interval = 50ms;
  Result<InitReport> report = make_error(Errc::kIoError, "not run");
  std::thread job([&] { report = array_->initialise(control); });
  std::mt19937_64 rng(11);
  int rounds = 0;
  while (array_->init_progress().has_value() && rounds < 2000) {
    ASSERT_NO_FATAL_FAILURE(random_writes(rng, 20));
    ++rounds;
  }
  job.join();
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_TRUE(report->finished);
  EXPECT_GT(rounds, 1) << "the writes did not overlap the job";
  EXPECT_EQ(array_->init_progress(), std::nullopt);
  EXPECT_EQ(*array_->count_inconsistent_stripes(), 0u);
  ASSERT_NO_FATAL_FAILURE(verify_after_init());
  auto checked = array_->check();
  ASSERT_TRUE(checked.is_ok()) << checked.status().to_string();
  EXPECT_EQ(checked->mismatches, 0u);
}

// With every member working the initialisation goes window by window: each member read in one
// request per window (requests of consecutive windows may merge, never split), not the level
// module's stripe-by-stripe way, which reads every strip on its own. (A test of the path, not of
// speed: stripe by stripe, the same job ran at 0.02-0.05 of the drives' bandwidth.)
TEST_P(ArrayBackgroundInitTest, AnIdleInitialisationReadsEachMemberInWholeWindows) {
  InitControl control;
  control.window_stripes = 32;
  control.windows_in_flight = 4;
  std::vector<FaultCounts> before;
  for (FaultyMember* f : files_.faulty)
    before.push_back(f->counts());
  auto report = array_->initialise(control);
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  ASSERT_TRUE(report->finished);
  const std::uint64_t stripes = array_->member_data_bytes() / kStrip;
  const std::uint64_t windows = (stripes + 31) / 32;
  for (std::size_t m = 0; m < files_.faulty.size(); ++m) {
    const FaultCounts after = files_.faulty[m]->counts();
    const std::uint64_t reads =
        after.reads + after.sync_reads - before[m].reads - before[m].sync_reads;
    EXPECT_LE(reads, windows) << "member " << m << ": " << stripes << " stripes";
  }
  EXPECT_EQ(*array_->count_inconsistent_stripes(), 0u);
  ASSERT_NO_FATAL_FAILURE(verify_after_init());
}

// Stopped part way, the job records where it got to; after a stop and assembly it is still
// pending from there, and the next run finishes it.
TEST_P(ArrayBackgroundInitTest, AStoppedInitialisationResumesAfterAssembly) {
  std::atomic<bool> stop{false};
  InitControl control;
  control.stop = &stop;
  control.window_stripes = 2;
  control.bytes_per_second = 4u << 20;
  Result<InitReport> report = make_error(Errc::kIoError, "not run");
  std::thread job([&] { report = array_->initialise(control); });
  while (array_->init_progress().value_or(0) < kMemberBytes / 8)
    std::this_thread::sleep_for(5ms);
  stop = true;
  job.join();
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  ASSERT_FALSE(report->finished);
  const auto reached = array_->init_progress();
  ASSERT_TRUE(reached.has_value());
  ASSERT_GT(*reached, 0u);
  ASSERT_LT(*reached, array_->member_data_bytes());
  std::mt19937_64 rng(13);
  ASSERT_NO_FATAL_FAILURE(random_writes(rng, 100));

  queue_.reset();
  ASSERT_TRUE(array_->stop().is_ok());
  array_.reset();
  auto devs = files_.open(GetParam().members, kMemberBytes, false);
  ASSERT_TRUE(devs.is_ok());
  auto assembled = Array::assemble(std::move(*devs), options());
  ASSERT_TRUE(assembled.is_ok()) << assembled.status().to_string();
  array_ = std::move(*assembled);
  queue_ = std::move(*array_->attach(*ctx_));
  EXPECT_EQ(array_->init_progress(), reached);
  auto finished = array_->initialise();
  ASSERT_TRUE(finished.is_ok()) << finished.status().to_string();
  EXPECT_TRUE(finished->finished);
  EXPECT_EQ(finished->from_stripe, *reached / kStrip);
  EXPECT_EQ(*array_->count_inconsistent_stripes(), 0u);
  ASSERT_NO_FATAL_FAILURE(verify_after_init());
}

// On the job engine's pipeline: four two-stripe windows in flight while verified writes land
// around them, and a random member's writes (the parity or copies the job writes among them) held
// back again and again, so windows wait with writes in flight or done behind an earlier one.
TEST_P(ArrayBackgroundInitTest, PipelinedInitialisationUnderVerifiedWritesAndHeldWrites) {
  InitControl control;
  control.window_stripes = 2;
  control.windows_in_flight = 4;
  control.bytes_per_second = 16u << 20;
  control.checkpoint_interval = 5ms;
  Result<InitReport> report = make_error(Errc::kIoError, "not run");
  std::atomic<bool> done{false};
  std::atomic<std::uint32_t> holds{0};
  std::thread job([&] {
    report = array_->initialise(control);
    done = true;
  });
  std::thread holder([&] {
    std::mt19937_64 rng(23);
    while (!done.load()) {
      FaultyMember* f = files_.faulty[rng() % files_.faulty.size()];
      f->hold_writes();
      std::this_thread::sleep_for(std::chrono::microseconds(200 + rng() % 3000));
      if (f->held_writes() > 0) ++holds;
      f->release_writes();
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
    }
  });
  std::mt19937_64 rng(29);
  int rounds = 0;
  while (!done.load() && rounds < 4000) {
    ASSERT_NO_FATAL_FAILURE(random_writes(rng, 8));
    ++rounds;
  }
  job.join();
  holder.join();
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_TRUE(report->finished);
  EXPECT_GT(rounds, 10) << "the writes did not overlap the job";
  EXPECT_GT(holds.load(), 5u) << "writes were held with windows in flight";
  EXPECT_EQ(*array_->count_inconsistent_stripes(), 0u);
  ASSERT_NO_FATAL_FAILURE(verify_after_init());
  ASSERT_TRUE(array_->fail_member(1, "test").is_ok());
  ASSERT_NO_FATAL_FAILURE(verify(true));
}

// The power goes at a random moment of a pipelined initialisation (every unflushed write on every
// member kept or undone at random): the checkpoint on disk covers only parity that is on stable
// storage. After assembly the initialisation resumes from it and leaves every stripe consistent,
// the data as it was.
TEST_P(ArrayBackgroundInitTest, PowerLossMidInitialisationResumesFromADurableCheckpoint) {
  const std::uint64_t seed = 41 + static_cast<std::uint64_t>(GetParam().level);
  std::mt19937_64 rng(seed);
  ASSERT_NO_FATAL_FAILURE(random_writes(rng, 200));
  ASSERT_TRUE(run_one(*queue_, IoKind::kFlush, 0, 0, nullptr).is_ok()) << "the writes are durable";
  InitControl control;
  control.window_stripes = 2;
  control.windows_in_flight = 4;
  control.bytes_per_second = 24u << 20;
  control.checkpoint_interval = 2ms;
  const auto cut_after = std::chrono::microseconds(rng() % 150'000);
  Result<InitReport> report = make_error(Errc::kIoError, "not run");
  std::thread job([&] { report = array_->initialise(control); });
  while (array_->init_progress().value_or(1) == 0)
    std::this_thread::sleep_for(100us);
  std::this_thread::sleep_for(cut_after);
  ASSERT_NO_FATAL_FAILURE(cut_power(files_.faulty, seed + 1, PowerLossPolicy::kLoseRandom));
  job.join();  // failed or finished, depending on when the power went
  queue_.reset();
  array_.reset();  // the crash: no stop()

  auto devs = files_.open(GetParam().members, kMemberBytes, false);
  ASSERT_TRUE(devs.is_ok());
  auto assembled = Array::assemble(std::move(*devs), options());
  ASSERT_TRUE(assembled.is_ok()) << assembled.status().to_string();
  array_ = std::move(*assembled);
  queue_ = std::move(*array_->attach(*ctx_));
  ASSERT_EQ(array_->health(), ArrayHealth::kOptimal);
  auto finished = array_->initialise(control);
  ASSERT_TRUE(finished.is_ok()) << finished.status().to_string();
  EXPECT_TRUE(finished->finished);
  EXPECT_EQ(*array_->count_inconsistent_stripes(), 0u)
      << "stripes below the checkpoint on disk lost their parity";
  ASSERT_NO_FATAL_FAILURE(verify_after_init());
}

INSTANTIATE_TEST_SUITE_P(Levels, ArrayBackgroundInitTest,
                         ::testing::Values(Shape{RaidLevel::kRaid1, 2},
                                           Shape{RaidLevel::kRaid10, 4},
                                           Shape{RaidLevel::kRaid5, 5},
                                           Shape{RaidLevel::kRaid6, 6}),
                         shape_name);

}  // namespace
}  // namespace graid::testing
