// The write-hole journal (engine/journal/journal.h): a crash in the middle of partial-stripe
// writes, followed by the loss of a member, must not change a byte of data the writes did not
// touch. Each case fills a RAID5/6 array, makes it durable, writes one small block into many
// stripes (read-modify-write: a data strip and the parity), cuts the power with those writes not
// flushed (each member write kept or lost at random, as a drive with a volatile cache may), then
// assembles the array without one member (two for RAID6) and reads everything back:
//   - journal on (always, or degraded-only on an array already degraded): assembly needs no
//     override, replays the records, every untouched byte reads back as before and every
//     acknowledged block as written;
//   - journal off: the same scenario, started with start_dirty_degraded, returns wrong data for
//     untouched blocks of the lost member: the corruption the journal prevents.
// Also: a journal area so small that the rings wrap many times under verified traffic (space
// is reused only after flushes), and a re-added member whose old records must not replay.
#include <algorithm>
#include <cstring>
#include <set>
#include <thread>

#include "array/superblock_io.h"
#include "array_harness.h"

namespace graid::testing {
namespace {

constexpr std::uint32_t kStrip = 16 * 1024;
constexpr std::uint64_t kMemberBytes = 8u << 20;
constexpr std::uint32_t kBlock = 4096;

struct Case {
  const char* name;
  RaidLevel level;
  std::uint32_t members;
  JournalPolicy policy;
  bool degraded_first;  // fail the first lost member before the writes
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.name;
}

class WriteHoleTestBase : public ::testing::Test {
 protected:
  void SetUp() override { parity_ = std::move(*make_parity_backend("cpu")); }
  ArrayOptions options() {
    ArrayOptions o;
    o.parity = parity_.get();
    return o;
  }
  std::unique_ptr<ParityBackend> parity_;
};

class WriteHoleTest : public WriteHoleTestBase, public ::testing::WithParamInterface<Case> {};

TEST_P(WriteHoleTest, CrashThenMemberLossLeavesUntouchedDataIntact) {
  const Case c = GetParam();
  const bool journal_on = c.policy != JournalPolicy::kOff;
  ArrayFiles files;
  auto devs = files.open(c.members, kMemberBytes, true);
  ASSERT_TRUE(devs.is_ok()) << devs.status().to_string();
  CreateOptions create;
  create.level = c.level;
  create.strip_bytes = kStrip;
  create.name = "hole";
  create.settings.journal_policy = c.policy;
  auto created = Array::create(std::move(*devs), create, options());
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  std::unique_ptr<Array> array = std::move(*created);
  ASSERT_GT(array->journal_state().area_bytes, 0u);
  EXPECT_EQ(array->journal_state().active, c.policy == JournalPolicy::kAlways);

  const std::uint64_t capacity = array->capacity();
  const Geometry& g = array->geometry();
  const std::uint64_t stripe_bytes = std::uint64_t{g.data_strips()} * kStrip;
  const std::uint64_t stripes = capacity / stripe_bytes;
  std::vector<std::byte> model = random_bytes(capacity, 0x5eed);
  auto ctx = std::move(*IoContext::create(256));
  auto queue = std::move(*array->attach(*ctx));
  {
    auto buf = std::move(*AlignedBuffer::allocate(capacity, 4096));
    std::memcpy(buf.data(), model.data(), capacity);
    for (std::uint64_t at = 0; at < capacity; at += 256 * 1024) {
      const auto len =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(256 * 1024, capacity - at));
      ASSERT_TRUE(run_one(*queue, IoKind::kWrite, at, len, buf.data() + at).is_ok());
    }
    ASSERT_TRUE(run_one(*queue, IoKind::kFlush, 0, 0, nullptr).is_ok());
  }

  // The members lost at assembly: never a stripe's first data strip in every stripe, so most
  // stripes have an untouched strip on a lost member.
  std::vector<std::uint32_t> lost = {1};
  if (c.level == RaidLevel::kRaid6) lost.push_back(2);
  if (c.degraded_first) {
    ASSERT_TRUE(array->fail_member(lost[0], "test: failed before the writes").is_ok());
    EXPECT_TRUE(array->journal_state().active);
  }

  // One 4 KiB block in data strip 0 of every other stripe, all in flight at once.
  std::mt19937_64 rng(0xb10c);
  std::vector<TestIo> ios;
  std::vector<std::vector<std::byte>> data;
  std::set<std::uint64_t> touched;  // array block numbers
  for (std::uint64_t s = 0; s < stripes; s += 2) {
    const std::uint64_t at = s * stripe_bytes + (rng() % (kStrip / kBlock)) * kBlock;
    touched.insert(at / kBlock);
    data.push_back(random_bytes(kBlock, rng()));
  }
  auto wbuf = std::move(*AlignedBuffer::allocate(touched.size() * kBlock, 4096));
  ios.resize(touched.size());
  std::vector<TestIo*> batch;
  std::size_t i = 0;
  for (std::uint64_t block : touched) {
    std::memcpy(wbuf.data() + i * kBlock, data[i].data(), kBlock);
    ios[i].kind = IoKind::kWrite;
    ios[i].offset = block * kBlock;
    ios[i].len = kBlock;
    ios[i].buf = wbuf.data() + i * kBlock;
    batch.push_back(&ios[i]);
    ++i;
  }
  run_all(*queue, batch);
  for (TestIo* io : batch)
    ASSERT_TRUE(io->status.is_ok()) << io->status.to_string();
  const QueueStats stats = queue->stats();
  if (c.policy == JournalPolicy::kAlways) {
    EXPECT_GE(stats.journal_records, touched.size());
  } else if (journal_on) {
    // Degraded: a stripe whose parity member is the failed one has no parity to protect.
    EXPECT_GE(stats.journal_records, touched.size() / 4);
  } else {
    EXPECT_EQ(stats.journal_records, 0u);
  }

  // The power cut: every member write not covered by a flush is kept or lost at random.
  std::uint64_t lost_writes = 0;
  for (FaultyMember* m : files.faulty) {
    auto outcomes = m->power_loss(rng, PowerLossPolicy::kLoseRandom);
    ASSERT_TRUE(outcomes.is_ok()) << outcomes.status().to_string();
    for (const PowerLossOutcome& o : *outcomes)
      lost_writes += o.kept == 0;
  }
  ASSERT_GT(lost_writes, 0u);
  queue.reset();
  ctx.reset();
  array.reset();  // no stop(): the power is gone

  auto again = files.open(c.members, kMemberBytes, false);
  ASSERT_TRUE(again.is_ok());
  for (auto it = lost.rbegin(); it != lost.rend(); ++it)
    again->erase(again->begin() + *it);
  if (!journal_on) {
    // Without the journal this is the write hole: refused unless overridden, changing nothing.
    auto refused = Array::assemble(std::move(*again), options());
    ASSERT_FALSE(refused.is_ok());
    EXPECT_EQ(refused.status().code(), Errc::kBusy) << refused.status().to_string();
    again = files.open(c.members, kMemberBytes, false);
    ASSERT_TRUE(again.is_ok());
    for (auto it = lost.rbegin(); it != lost.rend(); ++it)
      again->erase(again->begin() + *it);
  }
  AssembleOptions assemble;
  assemble.start_dirty_degraded = !journal_on;  // the journal needs no override
  AssembleReport report;
  auto back = Array::assemble(std::move(*again), options(), assemble, &report);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  array = std::move(*back);
  if (journal_on) {
    // The rings keep the newest records (older ones were reused after a flush made their home
    // writes durable); those on the lost members are gone with them.
    EXPECT_GT(report.journal_records, 0u) << "records replayed";
  } else {
    EXPECT_EQ(report.journal_records, 0u);
  }

  ctx = std::move(*IoContext::create(64));
  queue = std::move(*array->attach(*ctx));
  auto rbuf = std::move(*AlignedBuffer::allocate(capacity, 4096));
  for (std::uint64_t at = 0; at < capacity; at += 256 * 1024) {
    const auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(256 * 1024, capacity - at));
    ASSERT_TRUE(run_one(*queue, IoKind::kRead, at, len, rbuf.data() + at).is_ok());
  }
  std::uint64_t untouched_wrong = 0, written_not_new = 0;  // written: neither old nor new
  i = 0;
  for (std::uint64_t b = 0; b < capacity / kBlock; ++b) {
    const std::byte* got = rbuf.data() + b * kBlock;
    if (touched.count(b) != 0) continue;
    if (std::memcmp(got, model.data() + b * kBlock, kBlock) != 0) ++untouched_wrong;
  }
  for (std::uint64_t block : touched) {
    const std::byte* got = rbuf.data() + block * kBlock;
    if (std::memcmp(got, data[i].data(), kBlock) != 0 &&
        std::memcmp(got, model.data() + block * kBlock, kBlock) != 0) {
      ++written_not_new;
    }
    ++i;
  }
  SCOPED_TRACE(fmt::format("{} writes lost in the power cut, {} blocks written", lost_writes,
                           touched.size()));
  if (journal_on) {
    EXPECT_EQ(untouched_wrong, 0u) << "untouched blocks changed despite the journal";
    // A block written and not flushed reads as it was or as written, never anything else
    // (acknowledged is not durable: only a flush promises that).
    EXPECT_EQ(written_not_new, 0u);
  } else {
    EXPECT_GT(untouched_wrong, 0u) << "without the journal the write hole should show";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Journal, WriteHoleTest,
    ::testing::Values(
        Case{"raid5_always", RaidLevel::kRaid5, 4, JournalPolicy::kAlways, false},
        Case{"raid5_off", RaidLevel::kRaid5, 4, JournalPolicy::kOff, false},
        Case{"raid5_degraded_only", RaidLevel::kRaid5, 4, JournalPolicy::kDegradedOnly, true},
        Case{"raid6_always", RaidLevel::kRaid6, 6, JournalPolicy::kAlways, false},
        Case{"raid6_off", RaidLevel::kRaid6, 6, JournalPolicy::kOff, false},
        Case{"raid6_degraded_only", RaidLevel::kRaid6, 6, JournalPolicy::kDegradedOnly, true}),
    case_name);

// Records stay in their rings after their updates are done. A newer update of the same stripe
// that went in place without a record (a full-stripe write, a whole-stripe discard) would be
// undone by replaying the older record after a crash; while the journal is on, those are
// journalled too, so the replay ends with them.
TEST_F(WriteHoleTestBase, OlderRecordsDoNotUndoNewerFullStripeWritesOrDiscards) {
  ArrayFiles files;
  auto devs = files.open(4, kMemberBytes, true);
  ASSERT_TRUE(devs.is_ok()) << devs.status().to_string();
  CreateOptions create;
  create.level = RaidLevel::kRaid5;
  create.strip_bytes = kStrip;
  create.name = "shadow";
  create.settings.journal_policy = JournalPolicy::kAlways;
  auto created = Array::create(std::move(*devs), create, options());
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  std::unique_ptr<Array> array = std::move(*created);
  const std::uint64_t stripe_bytes = std::uint64_t{array->geometry().data_strips()} * kStrip;
  const std::uint64_t a = 3 * stripe_bytes, b = 5 * stripe_bytes;
  auto ctx = std::move(*IoContext::create(64));
  auto queue = std::move(*array->attach(*ctx));
  auto small = std::move(*AlignedBuffer::allocate(kBlock, 4096));
  std::memset(small.data(), 0x5a, kBlock);
  ASSERT_TRUE(run_one(*queue, IoKind::kWrite, a, kBlock, small.data()).is_ok());
  ASSERT_TRUE(run_one(*queue, IoKind::kWrite, b, kBlock, small.data()).is_ok());
  ASSERT_TRUE(run_one(*queue, IoKind::kFlush, 0, 0, nullptr).is_ok());
  // Newer: stripe a rewritten whole, stripe b discarded whole; both durable.
  const std::vector<std::byte> whole = random_bytes(stripe_bytes, 77);
  auto wbuf = std::move(*AlignedBuffer::allocate(stripe_bytes, 4096));
  std::memcpy(wbuf.data(), whole.data(), stripe_bytes);
  ASSERT_TRUE(
      run_one(*queue, IoKind::kWrite, a, static_cast<std::uint32_t>(stripe_bytes), wbuf.data())
          .is_ok());
  ASSERT_TRUE(
      run_one(*queue, IoKind::kDiscard, b, static_cast<std::uint32_t>(stripe_bytes), nullptr)
          .is_ok());
  ASSERT_TRUE(run_one(*queue, IoKind::kFlush, 0, 0, nullptr).is_ok());
  EXPECT_GE(queue->stats().journal_records, 4u);
  queue.reset();
  ctx.reset();
  array.reset();  // a crash: no stop()

  auto again = files.open(4, kMemberBytes, false);
  ASSERT_TRUE(again.is_ok());
  AssembleReport report;
  auto back = Array::assemble(std::move(*again), options(), {}, &report);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(report.journal_records, 4u) << "two records per stripe replayed, in order";
  ctx = std::move(*IoContext::create(64));
  queue = std::move(*(*back)->attach(*ctx));
  auto rbuf = std::move(*AlignedBuffer::allocate(stripe_bytes, 4096));
  ASSERT_TRUE(
      run_one(*queue, IoKind::kRead, a, static_cast<std::uint32_t>(stripe_bytes), rbuf.data())
          .is_ok());
  EXPECT_EQ(std::memcmp(rbuf.data(), whole.data(), stripe_bytes), 0)
      << "the full-stripe write was undone by an older record";
  ASSERT_TRUE(
      run_one(*queue, IoKind::kRead, b, static_cast<std::uint32_t>(stripe_bytes), rbuf.data())
          .is_ok());
  EXPECT_TRUE(std::all_of(rbuf.data(), rbuf.data() + stripe_bytes, [](std::byte x) {
    return x == std::byte{0};
  })) << "the discard was undone by an older record";
  EXPECT_EQ(*(*back)->count_inconsistent_stripes(), 0u);
}

// The journal epoch moves at every assembly and every clean stop, so no record written before
// either can be replayed (a clean stop also makes the array safe for a build without the journal).
TEST_F(WriteHoleTestBase, EpochMovesAtCleanStopAndAtAssembly) {
  ArrayFiles files;
  auto devs = files.open(4, kMemberBytes, true);
  ASSERT_TRUE(devs.is_ok());
  CreateOptions create;
  create.level = RaidLevel::kRaid5;
  create.strip_bytes = kStrip;
  create.name = "epoch";
  auto created = Array::create(std::move(*devs), create, options());
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  auto epoch = [&] {
    auto dev = open_member(files.paths[0]);
    EXPECT_TRUE(dev.is_ok());
    auto sb = read_superblock(**dev);
    EXPECT_TRUE(sb.is_ok());
    return sb.is_ok() ? sb->journal_epoch : 0;
  };
  EXPECT_EQ(epoch(), 1u);
  ASSERT_TRUE((*created)->stop().is_ok());
  EXPECT_EQ(epoch(), 2u);
  created->reset();
  auto again = files.open(4, kMemberBytes, false);
  ASSERT_TRUE(again.is_ok());
  auto back = Array::assemble(std::move(*again), options());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(epoch(), 3u);
}

// Item 7 of the resilience review: a member fails with a partial-stripe write in flight that went
// out without a record (degraded-only, the array optimal until then). The superblocks recorded the
// failure, so assembly took the journal to cover every write since and replayed it instead of
// refusing the dirty degraded start; that write had no record, its parity write was lost with the
// power, and the failed member's strip of its stripe reconstructed from the stale parity. The
// journal covers every write only once such writes have finished, and the superblocks say when.
TEST_F(WriteHoleTestBase, AFailureWithUnjournalledWritesInFlightKeepsTheDirtyDegradedRefusal) {
  for (const bool finishes : {false, true}) {
    SCOPED_TRACE(finishes ? "the write finishes before the power goes"
                          : "the power goes with the write's parity in flight");
    ArrayFiles files;
    auto devs = files.open(4, kMemberBytes, true);
    ASSERT_TRUE(devs.is_ok());
    CreateOptions create;
    create.level = RaidLevel::kRaid5;
    create.strip_bytes = kStrip;
    create.name = "cover";
    auto created = Array::create(std::move(*devs), create, options());
    ASSERT_TRUE(created.is_ok()) << created.status().to_string();
    std::unique_ptr<Array> array = std::move(*created);
    ASSERT_FALSE(array->journal_state().active) << "degraded-only, optimal";
    const Geometry& g = array->geometry();
    const std::uint64_t stripe = 5;
    const std::uint32_t d = g.data_member(stripe, 0);
    const std::uint32_t p = g.p_member(stripe);
    std::uint32_t x = 0;
    while (x == d || x == p)
      ++x;
    const std::vector<std::byte> model = random_bytes(array->capacity(), 71);
    auto ctx = std::move(*IoContext::create(64));
    auto queue = std::move(*array->attach(*ctx));
    {
      auto buf = std::move(*AlignedBuffer::allocate(array->capacity(), 4096));
      std::memcpy(buf.data(), model.data(), model.size());
      ASSERT_TRUE(
          run_one(*queue, IoKind::kWrite, 0, static_cast<std::uint32_t>(model.size()), buf.data())
              .is_ok());
      ASSERT_TRUE(run_one(*queue, IoKind::kFlush, 0, 0, nullptr).is_ok());
    }
    // A 4 KiB read-modify-write of data strip 0 of the stripe: its data write lands, its parity
    // write is held.
    files.faulty[p]->hold_writes();
    auto wbuf = std::move(*AlignedBuffer::allocate(kBlock, 4096));
    const auto fresh = random_bytes(kBlock, 72);
    std::memcpy(wbuf.data(), fresh.data(), kBlock);
    TestIo w;
    w.kind = IoKind::kWrite;
    w.offset = stripe * g.stripe_data_bytes();
    w.len = kBlock;
    w.buf = wbuf.data();
    queue->submit(w);
    for (int i = 0; i < 5000 && files.faulty[p]->held_writes() == 0; ++i) {
      ctx->poll(false);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(files.faulty[p]->held_writes(), 1u);
    // Another member fails meanwhile: the failure is recorded, the journal turns on.
    ASSERT_TRUE(array->fail_member(x, "test").is_ok());
    EXPECT_TRUE(array->journal_state().active);
    EXPECT_FALSE(array->journal_state().covers_all) << "the write without a record is in flight";
    if (finishes) {
      files.faulty[p]->release_writes();
      while (!w.done)
        ctx->poll(true);
      ASSERT_TRUE(w.status.is_ok()) << w.status.to_string();
      EXPECT_TRUE(array->journal_state().covers_all) << "recorded once the write finished";
    } else {
      // The power goes: every member keeps what it holds now; the held parity write is lost.
      for (FaultyMember* f : files.faulty)
        f->vanish();
      files.faulty[p]->fail_held_writes(EIO);
      while (!w.done)
        ctx->poll(true);
    }
    queue.reset();
    array.reset();

    auto again = files.open(4, kMemberBytes, false);
    ASSERT_TRUE(again.is_ok());
    AssembleReport report;
    auto back = Array::assemble(std::move(*again), options(), {}, &report);
    if (!finishes) {
      ASSERT_FALSE(back.is_ok()) << "a write in flight had no record: the write hole is open";
      EXPECT_EQ(back.status().code(), Errc::kBusy) << back.status().to_string();
      continue;
    }
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_FALSE(report.was_clean);
    // Every byte reads back, the failed member's strips reconstructed.
    std::vector<std::byte> expect = model;
    std::memcpy(expect.data() + w.offset, fresh.data(), kBlock);
    auto rctx = std::move(*IoContext::create(64));
    auto rqueue = std::move(*(*back)->attach(*rctx));
    auto rbuf = std::move(*AlignedBuffer::allocate(expect.size(), 4096));
    for (std::uint64_t at = 0; at < expect.size(); at += 256 * 1024) {
      const auto len =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(256 * 1024, expect.size() - at));
      ASSERT_TRUE(run_one(*rqueue, IoKind::kRead, at, len, rbuf.data() + at).is_ok());
    }
    EXPECT_EQ(std::memcmp(rbuf.data(), expect.data(), expect.size()), 0);
  }
}

// A member pulled while writes are in flight (the journal of a degraded-only array turns on at
// that moment): every write still succeeds and reads back, through and after the failure.
TEST_F(WriteHoleTestBase, AMemberVanishingUnderWritesFailsNoWrite) {
  for (const JournalPolicy policy :
       {JournalPolicy::kOff, JournalPolicy::kDegradedOnly, JournalPolicy::kAlways}) {
    SCOPED_TRACE(journal_policy_name(policy));
    ArrayFiles files;
    auto devs = files.open(5, kMemberBytes, true);
    ASSERT_TRUE(devs.is_ok());
    CreateOptions create;
    create.level = RaidLevel::kRaid5;
    create.strip_bytes = kStrip;
    create.name = "vanish";
    create.settings.journal_policy = policy;
    auto created = Array::create(std::move(*devs), create, options());
    ASSERT_TRUE(created.is_ok()) << created.status().to_string();
    Array& array = **created;
    const std::uint64_t blocks = array.capacity() / kBlock;
    std::vector<std::byte> model(array.capacity());
    auto ctx = std::move(*IoContext::create(256));
    auto queue = std::move(*array.attach(*ctx));
    std::mt19937_64 rng(0x7a11);
    constexpr std::uint32_t kBatch = 64;
    std::vector<TestIo> ios(kBatch);
    auto buf = std::move(*AlignedBuffer::allocate(kBatch * kBlock, 4096));
    std::uint64_t errors = 0;
    for (int round = 0; round < 40; ++round) {
      std::vector<TestIo*> batch;
      std::set<std::uint64_t> used;
      for (std::uint32_t i = 0; i < kBatch; ++i) {
        std::uint64_t b = rng() % blocks;
        while (used.count(b) != 0)
          b = rng() % blocks;
        used.insert(b);
        TestIo& io = ios[i];
        io.kind = IoKind::kWrite;
        io.offset = b * kBlock;
        io.len = kBlock;
        io.buf = buf.data() + i * kBlock;
        for (std::uint32_t w = 0; w < kBlock / 8; ++w) {
          const std::uint64_t v = rng();
          std::memcpy(io.buf + w * 8, &v, 8);
        }
        batch.push_back(&io);
      }
      for (TestIo* io : batch) {
        io->done = false;
        queue->submit(*io);
      }
      if (round == 20) {
        // Pulled with the batch in flight, failing as a pulled NVMe drive does under Linux:
        // reads with EIO (which look like media errors), writes with ENOSPC, flushes with EIO.
        files.faulty[4]->fail_op_with(MemberOp::kRead, EIO);
        files.faulty[4]->fail_op_with(MemberOp::kWrite, ENOSPC);
        files.faulty[4]->fail_op_with(MemberOp::kFlush, EIO);
      }
      while (std::any_of(batch.begin(), batch.end(), [](TestIo* io) { return !io->done; }))
        ctx->poll(true);
      for (TestIo* io : batch) {
        if (!io->status) {
          ++errors;
          ADD_FAILURE() << "write at " << io->offset << ": " << io->status.to_string();
          continue;
        }
        std::memcpy(model.data() + io->offset, io->buf, kBlock);
      }
    }
    EXPECT_EQ(errors, 0u);
    EXPECT_EQ(array.health(), ArrayHealth::kDegraded);
    auto rbuf = std::move(*AlignedBuffer::allocate(array.capacity(), 4096));
    for (std::uint64_t at = 0; at < array.capacity(); at += 256 * 1024) {
      const auto len =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(256 * 1024, array.capacity() - at));
      ASSERT_TRUE(run_one(*queue, IoKind::kRead, at, len, rbuf.data() + at).is_ok());
    }
    EXPECT_EQ(std::memcmp(rbuf.data(), model.data(), array.capacity()), 0);
  }
}

}  // namespace
}  // namespace graid::testing
