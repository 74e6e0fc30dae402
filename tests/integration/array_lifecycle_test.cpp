// What a daemon needs from an array besides I/O: events for an observer (and on which thread),
// array-wide stats, refusing to stop or delete what is in use, draining, examining a member's
// superblock, and the member slot table.
#include <algorithm>
#include <cstring>
#include <functional>

#include "array/superblock_io.h"
#include "array_harness.h"
#include "meta/crc32c.h"
#include "meta/superblock.h"

namespace graid::testing {
namespace {

using namespace std::chrono_literals;

// Records every event and the thread it arrived on.
class RecordingObserver final : public ArrayObserver {
 public:
  void on_event(const ArrayEvent& event) override {
    std::lock_guard guard(mu_);
    events_.push_back(event);
    threads_.push_back(std::this_thread::get_id());
    cv_.notify_all();
  }

  // Waits until an event of `kind` (about `member`, when given) has arrived; returns it.
  std::optional<ArrayEvent> wait_for(ArrayEventKind kind,
                                     std::optional<std::uint32_t> member = std::nullopt) {
    std::unique_lock lock(mu_);
    std::optional<ArrayEvent> found;
    cv_.wait_for(lock, 10s, [&] {
      for (const ArrayEvent& e : events_) {
        if (e.kind == kind && (!member || e.member == member)) {
          found = e;
          return true;
        }
      }
      return false;
    });
    return found;
  }

  std::vector<ArrayEvent> events() const {
    std::lock_guard guard(mu_);
    return events_;
  }
  std::vector<std::thread::id> threads() const {
    std::lock_guard guard(mu_);
    return threads_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ArrayEvent> events_;
  std::vector<std::thread::id> threads_;
};

class ArrayLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override { parity_ = std::move(*make_parity_backend("cpu")); }

  ArrayOptions options(ArrayObserver* observer = nullptr) {
    ArrayOptions o;
    o.parity = parity_.get();
    o.observer = observer;
    return o;
  }

  Result<std::unique_ptr<Array>> make(RaidLevel level, std::uint32_t n,
                                      ArrayObserver* observer = nullptr) {
    n_ = n;
    auto devs = files_.open(n, 4u << 20, true);
    if (!devs) return devs.status();
    CreateOptions c;
    c.level = level;
    c.strip_bytes = 4096;
    c.name = "life";
    c.journal_bytes = journal_bytes_;
    return Array::create(std::move(*devs), c, options(observer));
  }
  // What make() reserves for the write-hole journal.
  std::uint64_t journal_bytes_ = CreateOptions::kAutoJournal;

  // Opens the member files again (only the first `count`, default all) and assembles them.
  Result<std::unique_ptr<Array>> assemble(ArrayObserver* observer = nullptr,
                                          const AssembleOptions& how = {},
                                          AssembleReport* report = nullptr,
                                          std::uint32_t count = 0) {
    auto devs = files_.open(n_, 4u << 20, false);
    if (!devs) return devs.status();
    if (count != 0) devs->resize(count);
    return Array::assemble(std::move(*devs), options(observer), how, report);
  }

  static std::unique_ptr<IoContext> context() { return std::move(*IoContext::create(64)); }

  // A queue on a context of its own (the queue goes first when destroyed).
  struct Attached {
    std::unique_ptr<IoContext> ctx;
    std::unique_ptr<ArrayQueue> queue;
    ArrayQueue& operator*() { return *queue; }
    ArrayQueue* operator->() { return queue.get(); }
    void reset() { queue.reset(); }
  };
  static Attached attach(Array& array) {
    Attached a{context(), nullptr};
    a.queue = std::move(*array.attach(*a.ctx));
    return a;
  }

  ArrayFiles files_;
  std::uint32_t n_ = 0;
  std::unique_ptr<ParityBackend> parity_;
};

// One buffer of `n` bytes with a recognisable pattern.
AlignedBuffer patterned(std::size_t n, int seed) {
  AlignedBuffer buf = std::move(*AlignedBuffer::allocate(n, 4096));
  for (std::size_t i = 0; i < n; ++i)
    buf.data()[i] = static_cast<std::byte>((i * 131 + static_cast<std::size_t>(seed)) & 0xff);
  return buf;
}

// Writes `n` patterned bytes at 0 and returns them.
AlignedBuffer write_pattern(ArrayQueue& queue, std::size_t n, int seed) {
  AlignedBuffer buf = patterned(n, seed);
  Status st = run_one(queue, IoKind::kWrite, 0, static_cast<std::uint32_t>(n), buf.data());
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return buf;
}

TEST_F(ArrayLifecycleTest, ObserverSeesFailuresAndHealthOffTheIoThread) {
  RecordingObserver observer;
  auto array = make(RaidLevel::kRaid5, 3, &observer);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  ASSERT_TRUE(observer.wait_for(ArrayEventKind::kStarted).has_value());
  auto queue = attach(**array);
  AlignedBuffer buf = write_pattern(*queue, 64 * 1024, 1);

  // A write error on member 1: it fails (the write stands on the others) and the array
  // degrades. (A read error would be corrected in place, failing nothing.)
  files_.faulty[1]->fail_op(MemberOp::kWrite);
  ASSERT_TRUE(run_one(*queue, IoKind::kWrite, 0, 64 * 1024, buf.data()).is_ok());
  auto failed = observer.wait_for(ArrayEventKind::kMemberFailed, 1);
  ASSERT_TRUE(failed.has_value());
  EXPECT_NE(failed->message.find("write error"), std::string::npos) << failed->message;
  EXPECT_GE(failed->counts.errors, 1u);
  EXPECT_EQ(failed->array_name, "life");
  auto degraded = observer.wait_for(ArrayEventKind::kHealthChanged);
  ASSERT_TRUE(degraded.has_value());
  EXPECT_EQ(degraded->previous_health, ArrayHealth::kOptimal);
  EXPECT_EQ(degraded->health, ArrayHealth::kDegraded);

  // A write error on member 2 is one failure too many.
  files_.faulty[2]->fail_op(MemberOp::kWrite);
  EXPECT_FALSE(run_one(*queue, IoKind::kWrite, 0, 4096, buf.data()).is_ok());
  ASSERT_TRUE(observer.wait_for(ArrayEventKind::kMemberFailed, 2).has_value());
  std::optional<ArrayEvent> dead;
  for (int i = 0; i < 1000 && !dead; ++i) {
    for (const ArrayEvent& e : observer.events()) {
      if (e.kind == ArrayEventKind::kHealthChanged && e.health == ArrayHealth::kFailed) dead = e;
    }
    if (!dead) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->previous_health, ArrayHealth::kDegraded);

  queue.reset();
  array->reset();  // delivers what is still queued
  const auto threads = observer.threads();
  ASSERT_FALSE(threads.empty());
  for (std::thread::id id : threads) {
    EXPECT_NE(id, std::this_thread::get_id()) << "an event was delivered on the I/O thread";
  }
}

// An observer that takes its time with each event (graidd's writes each to disk).
class SlowObserver final : public ArrayObserver {
 public:
  void on_event(const ArrayEvent& event) override {
    std::this_thread::sleep_for(50ms);
    std::lock_guard guard(mu_);
    kinds_.push_back(event.kind);
  }
  std::vector<ArrayEventKind> kinds() const {
    std::lock_guard guard(mu_);
    return kinds_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<ArrayEventKind> kinds_;
};

// Array::wait_for_events(): once it returns, the observer has been given every event raised
// before the call (graidd logs a failure before it answers the command that caused it).
TEST_F(ArrayLifecycleTest, WaitForEventsReturnsOnceTheObserverHasTheEventsRaisedBefore) {
  SlowObserver observer;
  auto array = make(RaidLevel::kRaid5, 4, &observer);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  (*array)->wait_for_events();
  const std::size_t before = observer.kinds().size();
  ASSERT_TRUE((*array)->fail_member(2, "pulled").is_ok());
  (*array)->wait_for_events();
  const auto kinds = observer.kinds();
  ASSERT_GT(kinds.size(), before);
  EXPECT_NE(std::find(kinds.begin() + static_cast<std::ptrdiff_t>(before), kinds.end(),
                      ArrayEventKind::kMemberFailed),
            kinds.end());
  EXPECT_NE(std::find(kinds.begin() + static_cast<std::ptrdiff_t>(before), kinds.end(),
                      ArrayEventKind::kHealthChanged),
            kinds.end());
  // Nothing raised since: it returns at once.
  const auto t0 = std::chrono::steady_clock::now();
  (*array)->wait_for_events();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 40ms);
}

TEST_F(ArrayLifecycleTest, ObserverSeesResyncAfterAnUncleanStopWithItsCounts) {
  {
    auto array = make(RaidLevel::kRaid5, 4);
    ASSERT_TRUE(array.is_ok());
    auto queue = attach(**array);
    AlignedBuffer buf = write_pattern(*queue, 256 * 1024, 2);
    queue.reset();
    // No stop(): the array stays dirty with its bitmap bits set, as after a crash.
  }
  RecordingObserver observer;
  AssembleReport report;
  auto array = assemble(&observer, {}, &report);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  EXPECT_FALSE(report.was_clean);
  auto started = observer.wait_for(ArrayEventKind::kResyncStarted);
  auto finished = observer.wait_for(ArrayEventKind::kResyncFinished);
  ASSERT_TRUE(started && finished);
  EXPECT_GT(started->counts.bytes, 0u);
  EXPECT_EQ(started->counts.stripes, started->counts.bytes / 4096);
  EXPECT_GT(report.resynced_bytes, 0u);
  EXPECT_EQ(finished->counts.bytes, report.resynced_bytes);
  EXPECT_EQ(finished->counts.stripes, report.resynced_bytes / 4096);
  EXPECT_EQ(finished->counts.unsynced_stripes, 0u);
  ASSERT_TRUE(observer.wait_for(ArrayEventKind::kStarted).has_value());
  // In the order they happened: started, finished, then the array is up.
  const auto events = observer.events();
  auto index = [&](ArrayEventKind k) {
    return std::find_if(events.begin(), events.end(),
                        [&](const ArrayEvent& e) { return e.kind == k; }) -
           events.begin();
  };
  EXPECT_LT(index(ArrayEventKind::kResyncStarted), index(ArrayEventKind::kResyncFinished));
  EXPECT_LT(index(ArrayEventKind::kResyncFinished), index(ArrayEventKind::kStarted));
}

TEST_F(ArrayLifecycleTest, ObserverSeesADirtyDegradedStartAsAnOverride) {
  {
    auto array = make(RaidLevel::kRaid5, 3);
    ASSERT_TRUE(array.is_ok());
    auto queue = attach(**array);
    AlignedBuffer buf = write_pattern(*queue, 64 * 1024, 3);
  }
  RecordingObserver observer;
  AssembleOptions how;
  how.start_dirty_degraded = true;
  AssembleReport report;
  auto array = assemble(&observer, how, &report, 2);  // the last member is missing
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  auto override_event = observer.wait_for(ArrayEventKind::kAssemblyOverride);
  ASSERT_TRUE(override_event.has_value());
  EXPECT_NE(override_event->message.find("dirty and degraded"), std::string::npos);
  auto finished = observer.wait_for(ArrayEventKind::kResyncFinished);
  ASSERT_TRUE(finished.has_value());
  EXPECT_GT(report.unsynced_stripes, 0u);
  EXPECT_EQ(finished->counts.unsynced_stripes, report.unsynced_stripes);
  auto started = observer.wait_for(ArrayEventKind::kStarted);
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->health, ArrayHealth::kDegraded);
}

TEST_F(ArrayLifecycleTest, ForcedAssemblyTellsWhichStaleMemberCameBack) {
  {
    auto array = make(RaidLevel::kRaid5, 3);
    ASSERT_TRUE(array.is_ok());
    ASSERT_TRUE((*array)->stop().is_ok());
  }
  {
    // Member 0 is away while the others run on: its copy goes stale.
    auto devs = files_.open(3, 4u << 20, false);
    ASSERT_TRUE(devs.is_ok());
    devs->erase(devs->begin());
    auto array = Array::assemble(std::move(*devs), options());
    ASSERT_TRUE(array.is_ok()) << array.status().to_string();
    ASSERT_TRUE((*array)->stop().is_ok());
  }
  // Now member 2 is gone too: only force starts the array, taking member 0 back.
  RecordingObserver observer;
  EXPECT_FALSE(assemble(&observer, {}, nullptr, 2).is_ok());
  AssembleOptions how;
  how.force = true;
  how.allow_degraded = false;  // refused after taking member 0 back: nothing to tell
  EXPECT_EQ(assemble(&observer, how, nullptr, 2).status().code(), Errc::kBusy);
  how.allow_degraded = true;
  auto array = assemble(&observer, how, nullptr, 2);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  auto back = observer.wait_for(ArrayEventKind::kMemberBack, 0);
  ASSERT_TRUE(back.has_value());
  EXPECT_NE(back->message.find("events behind"), std::string::npos) << back->message;
  ASSERT_TRUE(observer.wait_for(ArrayEventKind::kAssemblyOverride).has_value());
  ASSERT_TRUE(observer.wait_for(ArrayEventKind::kStarted).has_value());
  std::size_t backs = 0;
  for (const ArrayEvent& e : observer.events())
    backs += e.kind == ArrayEventKind::kMemberBack ? 1 : 0;
  EXPECT_EQ(backs, 1u) << "the refused assembly must not have told of a member coming back";
}

TEST_F(ArrayLifecycleTest, StatsTotalsAreTheSumOfQueuesAndSurviveTheirDestruction) {
  auto array = make(RaidLevel::kRaid6, 4);
  ASSERT_TRUE(array.is_ok());
  auto a = attach(**array);
  auto b = attach(**array);
  AlignedBuffer buf = write_pattern(*a, 32 * 1024, 4);
  ASSERT_TRUE(run_one(*a, IoKind::kRead, 0, 8192, buf.data()).is_ok());
  ASSERT_TRUE(run_one(*b, IoKind::kWrite, 4096, 4096, buf.data()).is_ok());
  ASSERT_TRUE(run_one(*b, IoKind::kFlush, 0, 0, nullptr).is_ok());
  ASSERT_TRUE(run_one(*b, IoKind::kRead, 0, 4096, buf.data()).is_ok());

  QueueStats sum = a->stats();
  QueueStats from_b = b->stats();
  sum.zip(from_b, [](std::uint64_t& total, std::uint64_t n) { total += n; });
  ArrayStats st = (*array)->stats();
  EXPECT_EQ(st.queues_attached, 2u);
  EXPECT_EQ(st.totals.reads, 2u);
  EXPECT_EQ(st.totals.writes, 2u);
  EXPECT_EQ(st.totals.flushes, 1u);
  std::size_t fields = 0;
  st.totals.zip(sum, [&](std::uint64_t total, std::uint64_t expected) {
    EXPECT_EQ(total, expected) << "counter " << fields;
    ++fields;
  });
  EXPECT_EQ(fields, 20u);

  a.reset();
  b.reset();
  ArrayStats after = (*array)->stats();
  EXPECT_EQ(after.queues_attached, 0u);
  after.totals.zip(st.totals,
                   [](std::uint64_t kept, std::uint64_t before) { EXPECT_EQ(kept, before); });
  for (std::uint32_t m = 0; m < 4; ++m) {
    EXPECT_EQ(after.members[m].ios(), st.members[m].ios()) << "member " << m;
  }
}

TEST_F(ArrayLifecycleTest, MemberCountersCountInjectedErrorsByKindAndEveryIoHasALatency) {
  auto array = make(RaidLevel::kRaid6, 5);
  ASSERT_TRUE(array.is_ok());
  auto queue = attach(**array);
  AlignedBuffer buf = write_pattern(*queue, 48 * 1024, 5);
  files_.faulty[0]->fail_op(MemberOp::kRead);
  ASSERT_TRUE(run_one(*queue, IoKind::kRead, 0, 48 * 1024, buf.data()).is_ok());
  files_.faulty[1]->fail_op(MemberOp::kWrite);
  ASSERT_TRUE(run_one(*queue, IoKind::kWrite, 0, 48 * 1024, buf.data()).is_ok());
  files_.faulty[2]->fail_op(MemberOp::kFlush);
  // Member 0's read errors were corrected (it stays), so members 1 and 2 are the two failures
  // RAID6 survives: the flush succeeds on the rest.
  EXPECT_TRUE(run_one(*queue, IoKind::kFlush, 0, 0, nullptr).is_ok());
  EXPECT_EQ((*array)->member_health(0), MemberHealth::kActive);

  const ArrayStats st = (*array)->stats();
  ASSERT_EQ(st.members.size(), 5u);
  // Each member failed only I/Os of one kind (the parallel strip reads or writes in flight when
  // it failed), every one of them injected.
  EXPECT_GE(st.members[0].read_errors, 1u);
  EXPECT_EQ(st.members[0].read_errors, files_.faulty[0]->counts().failed);
  EXPECT_EQ(st.members[0].write_errors + st.members[0].flush_errors, 0u);
  EXPECT_GE(st.members[1].write_errors, 1u);
  EXPECT_EQ(st.members[1].write_errors, files_.faulty[1]->counts().failed);
  EXPECT_EQ(st.members[1].read_errors + st.members[1].flush_errors, 0u);
  EXPECT_EQ(st.members[2].flush_errors, 1u);
  EXPECT_EQ(files_.faulty[2]->counts().failed, 1u);
  EXPECT_EQ(st.members[2].read_errors + st.members[2].write_errors, 0u);
  EXPECT_EQ(st.members[3].errors() + st.members[4].errors(), 0u);
  for (std::uint32_t m = 0; m < 5; ++m) {
    // Every asynchronous I/O the member was asked for, once, with one latency sample.
    const FaultCounts c = files_.faulty[m]->counts();
    EXPECT_EQ(st.members[m].reads, c.reads) << "member " << m;
    EXPECT_EQ(st.members[m].writes, c.writes) << "member " << m;
    EXPECT_EQ(st.members[m].flushes, c.flushes) << "member " << m;
    EXPECT_EQ(st.members[m].latency_samples(), st.members[m].ios()) << "member " << m;
    EXPECT_GT(st.members[m].ios(), 0u);
    EXPECT_GT(st.members[m].latency_quantile_us(0.99), 0u);
  }
  EXPECT_GT(st.members[3].read_bytes, 0u);
  EXPECT_GT(st.members[3].write_bytes, 0u);
}

TEST(LatencyBucketTest, BucketsAreLog2Microseconds) {
  EXPECT_EQ(latency_bucket(0), 0u);
  EXPECT_EQ(latency_bucket(1), 1u);
  EXPECT_EQ(latency_bucket(3), 2u);
  EXPECT_EQ(latency_bucket(4), 3u);
  EXPECT_EQ(latency_bucket(1000), 10u);
  EXPECT_EQ(latency_bucket(~std::uint64_t{0}), kLatencyBuckets - 1);
  MemberIoStats s;
  s.latency[3] = 98;  // [4, 8) µs
  s.latency[10] = 2;  // [512, 1024) µs
  EXPECT_EQ(s.latency_quantile_us(0.5), 8u);
  EXPECT_EQ(s.latency_quantile_us(0.99), 1024u);
}

TEST_F(ArrayLifecycleTest, StopWithAQueueAttachedIsRefusedAndChangesNothing) {
  auto array = make(RaidLevel::kRaid5, 3);
  ASSERT_TRUE(array.is_ok());
  auto queue = attach(**array);
  auto before = Array::examine(*files_.faulty[0]);
  ASSERT_TRUE(before.is_ok());
  std::uint64_t writes_before = 0;
  for (auto* f : files_.faulty)
    writes_before += f->counts().sync_writes + f->counts().writes;

  Status st = (*array)->stop();
  EXPECT_EQ(st.code(), Errc::kBusy);
  EXPECT_NE(st.message().find("1 queues attached"), std::string::npos) << st.message();
  std::uint64_t writes_after = 0;
  for (auto* f : files_.faulty)
    writes_after += f->counts().sync_writes + f->counts().writes;
  EXPECT_EQ(writes_after, writes_before);
  auto after = Array::examine(*files_.faulty[0]);
  ASSERT_TRUE(after.is_ok());
  EXPECT_EQ(after->events, before->events);
  EXPECT_FALSE(after->clean);

  queue.reset();
  ASSERT_TRUE((*array)->stop().is_ok());
  auto stopped = Array::examine(*files_.faulty[0]);
  ASSERT_TRUE(stopped.is_ok());
  EXPECT_TRUE(stopped->clean);
}

TEST_F(ArrayLifecycleTest, QuiesceWaitsUntilNoRequestIsInFlight) {
  auto array = make(RaidLevel::kRaid5, 3);
  ASSERT_TRUE(array.is_ok());
  auto queue = attach(**array);
  AlignedBuffer buf = patterned(8192, 6);
  TestIo io;
  io.kind = IoKind::kWrite;
  io.len = 8192;
  io.buf = buf.data();
  queue->submit(io);
  // Nobody polls: the request cannot complete, and quiesce says so.
  Status busy = (*array)->quiesce(20ms);
  EXPECT_EQ(busy.code(), Errc::kBusy);
  EXPECT_NE(busy.message().find("1 requests"), std::string::npos) << busy.message();

  // With the queue's thread polling, quiesce on another thread returns once it is done.
  Status drained = make_error(Errc::kInternal, "not run");
  std::atomic<bool> returned{false};
  std::thread control([&] {
    drained = (*array)->quiesce(10s);
    returned = true;
  });
  while (!io.done)
    queue.ctx->poll(true);
  control.join();
  EXPECT_TRUE(returned);
  EXPECT_TRUE(drained.is_ok()) << drained.to_string();
  EXPECT_TRUE(io.status.is_ok());
  EXPECT_EQ(queue->in_flight(), 0u);
}

TEST_F(ArrayLifecycleTest, ExamineWritesNothingAndReportsWhatCreateWrote) {
  auto array = make(RaidLevel::kRaid6, 4);
  ASSERT_TRUE(array.is_ok());
  auto vd = (*array)->create_vd("data", 1u << 20);
  ASSERT_TRUE(vd.is_ok());
  ASSERT_TRUE((*array)->stop().is_ok());
  for (std::uint32_t m = 0; m < 4; ++m) {
    const FaultCounts before = files_.faulty[m]->counts();
    auto ex = Array::examine(*files_.faulty[m]);
    ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
    const FaultCounts after = files_.faulty[m]->counts();
    EXPECT_EQ(after.sync_writes, before.sync_writes);
    EXPECT_EQ(after.writes, before.writes);
    EXPECT_EQ(after.sync_flushes, before.sync_flushes);
    EXPECT_EQ(after.sync_reads, before.sync_reads + 1);
    EXPECT_EQ(ex->name, "life");
    EXPECT_EQ(ex->level, RaidLevel::kRaid6);
    EXPECT_EQ(ex->member_count, 4u);
    EXPECT_EQ(ex->strip_bytes, 4096u);
    EXPECT_EQ(ex->slot, m);
    EXPECT_EQ(ex->state, MemberSlotState::kActive);
    EXPECT_TRUE(ex->clean);
    EXPECT_EQ(ex->data_offset, (*array)->member_data_offset());
    EXPECT_EQ(ex->capacity, (*array)->capacity());
    ASSERT_EQ(ex->slots.size(), 4u);
    EXPECT_EQ(ex->slots[m].uuid, ex->member_uuid);
    ASSERT_EQ(ex->vds.size(), 1u);
    EXPECT_EQ(ex->vds[0].name, "data");
    EXPECT_EQ(ex->vds[0].size, vd->size);
  }
  // A device without a superblock: an error, not a guess.
  ArrayFiles blank;
  auto devs = blank.open(1, 1u << 20, true);
  ASSERT_TRUE(devs.is_ok());
  auto none = Array::examine(*(*devs)[0]);
  ASSERT_FALSE(none.is_ok());
  EXPECT_EQ(none.status().code(), Errc::kNotFound);
  EXPECT_NE(none.status().message().find("no graid superblock"), std::string::npos)
      << none.status().to_string();
}

TEST_F(ArrayLifecycleTest, DeleteVdIsRefusedWhileItIsOpen) {
  auto array = make(RaidLevel::kRaid1, 2);
  ASSERT_TRUE(array.is_ok());
  auto vd = (*array)->create_vd("served", 1u << 20);
  ASSERT_TRUE(vd.is_ok());
  EXPECT_EQ((*array)->open_vd(vd->id + 7).status().code(), Errc::kNotFound);
  auto handle = (*array)->open_vd(vd->id);
  ASSERT_TRUE(handle.is_ok());
  EXPECT_EQ(handle->info().name, "served");
  VdHandle moved = std::move(*handle);
  Status refused = (*array)->delete_vd(vd->id);
  EXPECT_EQ(refused.code(), Errc::kBusy);
  EXPECT_NE(refused.message().find("open"), std::string::npos);
  EXPECT_EQ((*array)->vds().size(), 1u);
  moved = VdHandle();  // lets go
  EXPECT_TRUE((*array)->delete_vd(vd->id).is_ok());
  EXPECT_TRUE((*array)->vds().empty());
}

// Rewrites every member's superblock copy with `edit` applied (the array must be stopped).
void edit_superblocks(ArrayFiles& files, const std::function<void(meta::Superblock&)>& edit) {
  for (const std::string& path : files.paths) {
    auto dev = open_member(path);
    ASSERT_TRUE(dev.is_ok());
    auto sb = read_superblock(**dev);
    ASSERT_TRUE(sb.is_ok());
    edit(*sb);
    auto block = AlignedBuffer::allocate(meta::kSuperblockSize, 4096);
    ASSERT_TRUE(meta::encode(*sb, block->span()).is_ok());
    ASSERT_TRUE((*dev)->write_sync(meta::kSuperblockOffset, block->span()).is_ok());
    ASSERT_TRUE((*dev)->flush_sync().is_ok());
  }
}

TEST_F(ArrayLifecycleTest, SlotStatesPersistAcrossStopAndAssemble) {
  {
    auto array = make(RaidLevel::kRaid6, 5);
    ASSERT_TRUE(array.is_ok());
    for (const MemberSlot& s : (*array)->member_slots())
      EXPECT_EQ(s.state, MemberSlotState::kActive);
    ASSERT_TRUE((*array)->fail_member(1, "test").is_ok());
    auto slot = (*array)->member_slot(1);
    ASSERT_TRUE(slot.is_ok());
    EXPECT_EQ(slot->state, MemberSlotState::kFailed);
    EXPECT_EQ((*array)->member_slot(5).status().code(), Errc::kOutOfRange);
    ASSERT_TRUE((*array)->stop().is_ok());
  }
  // What the rebuild job will record: slot 3 rebuilding, 1 MiB done.
  edit_superblocks(files_, [](meta::Superblock& sb) {
    sb.members[3].state = meta::MemberState::kRebuilding;
    sb.members[3].rebuild_offset = 1u << 20;
  });
  AlignedBuffer data = patterned(24 * 1024, 7);
  for (int round = 0; round < 2; ++round) {
    auto array = assemble();
    ASSERT_TRUE(array.is_ok()) << array.status().to_string();
    const auto slots = (*array)->member_slots();
    ASSERT_EQ(slots.size(), 5u);
    EXPECT_EQ(slots[1].state, MemberSlotState::kFailed);
    EXPECT_EQ(slots[3].state, MemberSlotState::kRebuilding);
    EXPECT_EQ(slots[3].rebuild_offset, 1u << 20) << "assembly keeps the checkpoint";
    EXPECT_FALSE(slots[3].path.empty());
    EXPECT_EQ(slots[0].state, MemberSlotState::kActive);
    EXPECT_EQ((*array)->member_health(3), MemberHealth::kFailed);
    EXPECT_EQ((*array)->health(), ArrayHealth::kDegraded);
    {
      // Below its checkpoint a rebuilding member is written like any other; above it, it is
      // neither read nor written (the rebuild will get there).
      const Geometry& g = (*array)->geometry();
      const std::uint64_t above = (2u << 20) / g.strip_bytes() * g.stripe_data_bytes();
      auto queue = attach(**array);
      AlignedBuffer back = std::move(*AlignedBuffer::allocate(data.size(), 4096));
      const FaultCounts before = files_.faulty[3]->counts();
      if (round == 0) {
        ASSERT_TRUE(run_one(*queue, IoKind::kWrite, 0, 24 * 1024, data.data()).is_ok());
        EXPECT_GT(files_.faulty[3]->counts().writes, before.writes) << "below: written";
      }
      const std::uint64_t writes_below = files_.faulty[3]->counts().writes;
      if (round == 0) {
        ASSERT_TRUE(run_one(*queue, IoKind::kWrite, above, 24 * 1024, data.data()).is_ok());
      }
      EXPECT_EQ(files_.faulty[3]->counts().writes, writes_below) << "above: not written";
      const std::uint64_t reads_before = files_.faulty[3]->counts().reads;
      ASSERT_TRUE(run_one(*queue, IoKind::kRead, above, 24 * 1024, back.data()).is_ok());
      EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
      EXPECT_EQ(files_.faulty[3]->counts().reads, reads_before) << "above: not read";
      ASSERT_TRUE(run_one(*queue, IoKind::kRead, 0, 24 * 1024, back.data()).is_ok());
      EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
    }
    ASSERT_TRUE((*array)->stop().is_ok());
    // It keeps getting superblock updates: its copy is as new as the others'.
    auto rebuilding = Array::examine(*files_.faulty[3]);
    auto active = Array::examine(*files_.faulty[0]);
    ASSERT_TRUE(rebuilding.is_ok() && active.is_ok());
    EXPECT_EQ(rebuilding->state, MemberSlotState::kRebuilding);
    EXPECT_EQ(rebuilding->events, active->events);
  }
  // Failing it ends the rebuild: the slot is failed, and stays so.
  {
    auto array = assemble();
    ASSERT_TRUE(array.is_ok());
    ASSERT_TRUE((*array)->fail_member(3, "rebuild target pulled").is_ok());
    EXPECT_EQ((*array)->member_slot(3)->state, MemberSlotState::kFailed);
    ASSERT_TRUE((*array)->stop().is_ok());
  }
  auto array = assemble();
  ASSERT_TRUE(array.is_ok());
  EXPECT_EQ((*array)->member_slot(3)->state, MemberSlotState::kFailed);
  EXPECT_EQ((*array)->member_slot(1)->state, MemberSlotState::kFailed);
}

TEST_F(ArrayLifecycleTest, AddedSpareIsRecordedEverywhereAndFoundByAssembly) {
  RecordingObserver observer;
  n_ = 4;
  auto devs = files_.open(4, 4u << 20, true);
  ASSERT_TRUE(devs.is_ok());
  std::unique_ptr<MemberDevice> spare = std::move(devs->back());
  devs->pop_back();
  CreateOptions c;
  c.level = RaidLevel::kRaid5;
  c.strip_bytes = 4096;
  c.name = "life";
  auto array = Array::create(std::move(*devs), c, options(&observer));
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();

  // Refusals change nothing: the storage of a member, a too small device, another array's.
  auto twice = open_member(files_.paths[0]);
  ASSERT_TRUE(twice.is_ok());
  EXPECT_EQ((*array)->add_spare(std::move(*twice)).status().code(), Errc::kInvalidArgument);
  ArrayFiles small;
  auto tiny = small.open(1, 1u << 20, true);
  ASSERT_TRUE(tiny.is_ok());
  EXPECT_EQ((*array)->add_spare(std::move((*tiny)[0])).status().code(), Errc::kNoSpace);
  // A device holding a graid superblock (here a copy of member 0's).
  ArrayFiles foreign;
  auto other = foreign.open(1, 4u << 20, true);
  ASSERT_TRUE(other.is_ok());
  auto block = AlignedBuffer::allocate(meta::kSuperblockSize, 4096);
  ASSERT_TRUE(files_.faulty[0]->read_sync(meta::kSuperblockOffset, block->span()).is_ok());
  ASSERT_TRUE((*other)[0]->write_sync(meta::kSuperblockOffset, block->span()).is_ok());
  auto busy = (*array)->add_spare(std::move((*other)[0]));
  EXPECT_EQ(busy.status().code(), Errc::kBusy);
  EXPECT_NE(busy.status().message().find("already belongs"), std::string::npos);
  EXPECT_EQ((*array)->member_slots().size(), 3u);

  auto slot = (*array)->add_spare(std::move(spare));
  ASSERT_TRUE(slot.is_ok()) << slot.status().to_string();
  EXPECT_EQ(*slot, 3u);
  auto added = observer.wait_for(ArrayEventKind::kSpareAdded, 3);
  ASSERT_TRUE(added.has_value());
  auto recorded = (*array)->member_slot(3);
  ASSERT_TRUE(recorded.is_ok());
  EXPECT_EQ(recorded->state, MemberSlotState::kSpare);
  EXPECT_EQ(recorded->path, files_.paths[3]);
  EXPECT_EQ((*array)->health(), ArrayHealth::kOptimal);
  ASSERT_TRUE((*array)->stop().is_ok());

  // Its own superblock names it a spare of this array, as new as the members'.
  auto own = Array::examine(*files_.faulty[3]);
  auto member = Array::examine(*files_.faulty[0]);
  ASSERT_TRUE(own.is_ok() && member.is_ok());
  EXPECT_EQ(own->array_uuid, member->array_uuid);
  EXPECT_EQ(own->slot, 3u);
  EXPECT_EQ(own->state, MemberSlotState::kSpare);
  EXPECT_EQ(own->events, member->events);
  EXPECT_EQ(member->spare_count, 1u);
  ASSERT_EQ(member->slots.size(), 4u);
  EXPECT_EQ(member->slots[3].state, MemberSlotState::kSpare);
  EXPECT_EQ(member->slots[3].uuid, own->member_uuid);
  array->reset();

  auto again = assemble();
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  auto found = (*again)->member_slot(3);
  ASSERT_TRUE(found.is_ok());
  EXPECT_EQ(found->state, MemberSlotState::kSpare);
  EXPECT_EQ(found->path, files_.paths[3]) << "assembly kept the spare's device";
  EXPECT_EQ((*again)->member_count(), 3u);
  EXPECT_EQ((*again)->health(), ArrayHealth::kOptimal);
}

// ---- Drive-group settings ----------------------------------------------------------------------

TEST(ArraySettingsNames, NamesAndParsingRoundTrip) {
  for (BackgroundSpeed speed : {BackgroundSpeed::kLow, BackgroundSpeed::kNormal,
                                BackgroundSpeed::kHigh, BackgroundSpeed::kExtreme}) {
    EXPECT_EQ(parse_background_speed(background_speed_name(speed)), speed);
  }
  for (JournalPolicy policy :
       {JournalPolicy::kOff, JournalPolicy::kDegradedOnly, JournalPolicy::kAlways}) {
    EXPECT_EQ(parse_journal_policy(journal_policy_name(policy)), policy);
  }
  EXPECT_EQ(background_speed_name(BackgroundSpeed::kExtreme), "extreme");
  EXPECT_EQ(journal_policy_name(JournalPolicy::kDegradedOnly), "degraded-only");
  for (const char* bad : {"", "High", "fast", "normal ", "unknown"}) {
    EXPECT_FALSE(parse_background_speed(bad).has_value()) << bad;
  }
  for (const char* bad : {"", "degraded", "ON", "unknown"}) {
    EXPECT_FALSE(parse_journal_policy(bad).has_value()) << bad;
  }
  EXPECT_EQ(background_speed_name(static_cast<BackgroundSpeed>(9)), "unknown");
  EXPECT_EQ(journal_policy_name(static_cast<JournalPolicy>(9)), "unknown");
  const ArraySettings defaults;
  EXPECT_EQ(defaults.rebuild_speed, BackgroundSpeed::kNormal);
  EXPECT_EQ(defaults.journal_policy, JournalPolicy::kDegradedOnly);
}

// Not the defaults in any field.
ArraySettings unusual_settings() {
  ArraySettings s;
  s.rebuild_speed = BackgroundSpeed::kHigh;
  s.init_speed = BackgroundSpeed::kLow;
  s.check_speed = BackgroundSpeed::kExtreme;
  s.resync_speed = BackgroundSpeed::kLow;
  s.journal_policy = JournalPolicy::kAlways;
  return s;
}

TEST_F(ArrayLifecycleTest, SettingsAreRecordedEverywhereAndSurviveStopAndAssemble) {
  {
    auto array = make(RaidLevel::kRaid5, 3);
    ASSERT_TRUE(array.is_ok());
    EXPECT_EQ((*array)->settings(), ArraySettings{});
    const std::uint64_t events_before = Array::examine(*files_.faulty[0])->events;

    ASSERT_TRUE((*array)->set_settings(unusual_settings()).is_ok());
    EXPECT_EQ((*array)->settings(), unusual_settings());
    for (std::uint32_t m = 0; m < 3; ++m) {
      auto ex = Array::examine(*files_.faulty[m]);
      ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
      EXPECT_EQ(ex->settings, unusual_settings()) << "member " << m;
      EXPECT_EQ(ex->events, events_before + 1) << "one ordinary superblock update";
    }
    // The same settings again write nothing.
    ASSERT_TRUE((*array)->set_settings(unusual_settings()).is_ok());
    EXPECT_EQ(Array::examine(*files_.faulty[0])->events, events_before + 1);

    // A value outside the enums is refused and changes nothing.
    ArraySettings bad = unusual_settings();
    bad.check_speed = static_cast<BackgroundSpeed>(7);
    EXPECT_EQ((*array)->set_settings(bad).code(), Errc::kInvalidArgument);
    bad = unusual_settings();
    bad.journal_policy = static_cast<JournalPolicy>(3);
    EXPECT_EQ((*array)->set_settings(bad).code(), Errc::kInvalidArgument);
    EXPECT_EQ((*array)->settings(), unusual_settings());
    EXPECT_EQ(Array::examine(*files_.faulty[0])->events, events_before + 1);
    ASSERT_TRUE((*array)->stop().is_ok());
  }
  auto array = assemble();
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  EXPECT_EQ((*array)->settings(), unusual_settings());
  // Back to the defaults, written explicitly.
  ASSERT_TRUE((*array)->set_settings(ArraySettings{}).is_ok());
  ASSERT_TRUE((*array)->stop().is_ok());
  array->reset();
  auto again = assemble();
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ((*again)->settings(), ArraySettings{});
}

TEST_F(ArrayLifecycleTest, SettingsCanBeSetOnADegradedArray) {
  {
    auto array = make(RaidLevel::kRaid5, 3);
    ASSERT_TRUE(array.is_ok());
    ASSERT_TRUE((*array)->fail_member(2, "pulled").is_ok());
    ASSERT_EQ((*array)->health(), ArrayHealth::kDegraded);
    ASSERT_TRUE((*array)->set_settings(unusual_settings()).is_ok());
    EXPECT_EQ((*array)->settings(), unusual_settings());
    for (std::uint32_t m = 0; m < 2; ++m) {
      EXPECT_EQ(Array::examine(*files_.faulty[m])->settings, unusual_settings()) << m;
    }
    // The failed member is not written: its copy keeps what it had.
    auto failed = Array::examine(*files_.faulty[2]);
    ASSERT_TRUE(failed.is_ok());
    EXPECT_EQ(failed->settings, ArraySettings{});
    EXPECT_LT(failed->events, Array::examine(*files_.faulty[0])->events);
    ASSERT_TRUE((*array)->stop().is_ok());
  }
  AssembleReport report;
  auto array = assemble(nullptr, {}, &report);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  EXPECT_EQ((*array)->health(), ArrayHealth::kDegraded);
  EXPECT_EQ(report.stale_members.size(), 1u);
  EXPECT_EQ((*array)->settings(), unusual_settings()) << "the newest copies' settings";
}

TEST_F(ArrayLifecycleTest, CreateRecordsTheRequestedSettings) {
  auto devs = files_.open(3, 4u << 20, true);
  ASSERT_TRUE(devs.is_ok());
  CreateOptions c;
  c.level = RaidLevel::kRaid1;
  c.strip_bytes = 4096;
  c.settings = unusual_settings();
  c.settings.init_speed = static_cast<BackgroundSpeed>(4);
  auto refused = Array::create(std::move(*devs), c, options());
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), Errc::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("init speed"), std::string::npos)
      << refused.status().to_string();

  devs = files_.open(3, 4u << 20, false);
  ASSERT_TRUE(devs.is_ok());
  EXPECT_FALSE(Array::examine(*files_.faulty[0]).is_ok()) << "the refused create wrote nothing";
  c.settings = unusual_settings();
  auto array = Array::create(std::move(*devs), c, options());
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  EXPECT_EQ((*array)->settings(), unusual_settings());
  for (std::uint32_t m = 0; m < 3; ++m)
    EXPECT_EQ(Array::examine(*files_.faulty[m])->settings, unusual_settings());
}

// An array written before settings existed (minor 0, bytes 176..180 zero) assembles with the
// defaults; setting them upgrades its superblocks to minor 1.
TEST_F(ArrayLifecycleTest, AMinorZeroArrayHasTheDefaultSettings) {
  journal_bytes_ = 0;  // as minor 0 builds made them: no journal area
  {
    auto array = make(RaidLevel::kRaid5, 3);
    ASSERT_TRUE(array.is_ok());
    ASSERT_TRUE((*array)->set_settings(unusual_settings()).is_ok());
    ASSERT_TRUE((*array)->stop().is_ok());
  }
  for (const std::string& path : files_.paths) {
    auto dev = open_member(path);
    ASSERT_TRUE(dev.is_ok());
    auto sb = read_superblock(**dev);
    ASSERT_TRUE(sb.is_ok());
    sb->settings = meta::StoredSettings{};
    sb->init_method = meta::kInitMethodNotRecorded;  // minor 5's, zero in minor 0 too
    auto block = AlignedBuffer::allocate(meta::kSuperblockSize, 4096);
    ASSERT_TRUE(meta::encode(*sb, block->span()).is_ok());
    const std::span<std::byte> b = block->span();
    b[10] = std::byte{0};  // minor 0
    b[11] = std::byte{0};
    std::fill_n(b.begin() + 12, 4, std::byte{0});
    const std::uint32_t crc = meta::crc32c(b);
    for (int i = 0; i < 4; ++i)
      b[12 + i] = static_cast<std::byte>((crc >> (8 * i)) & 0xff);
    ASSERT_TRUE((*dev)->write_sync(meta::kSuperblockOffset, b).is_ok());
    ASSERT_TRUE((*dev)->flush_sync().is_ok());
    auto back = read_superblock(**dev);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    ASSERT_EQ(back->minor_version, 0);
  }
  auto array = assemble();
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  EXPECT_EQ((*array)->settings(), ArraySettings{});
  EXPECT_EQ(Array::examine(*files_.faulty[0])->settings, ArraySettings{});
  ASSERT_TRUE((*array)->set_settings(unusual_settings()).is_ok());
  for (std::uint32_t m = 0; m < 3; ++m) {
    auto sb = read_superblock(*files_.faulty[m]);
    ASSERT_TRUE(sb.is_ok());
    EXPECT_EQ(sb->minor_version, meta::kMinorVersion);
    EXPECT_EQ(Array::examine(*files_.faulty[m])->settings, unusual_settings());
  }
}

// ---- Erasing a superblock
// ------------------------------------------------------------------------

// Reads `len` bytes at `offset` of the file at `path`.
std::vector<std::byte> read_bytes(const std::string& path, std::uint64_t offset, std::size_t len) {
  auto dev = open_member(path);
  EXPECT_TRUE(dev.is_ok());
  if (!dev) return {};
  auto buf = AlignedBuffer::allocate(len, 4096);
  EXPECT_TRUE((*dev)->read_sync(offset, buf->span()).is_ok());
  return std::vector<std::byte>(buf->data(), buf->data() + len);
}

TEST_F(ArrayLifecycleTest, EraseSuperblockLeavesADeviceCreateTakesWithoutForce) {
  std::uint64_t data_offset = 0;
  {
    auto array = make(RaidLevel::kRaid5, 3);
    ASSERT_TRUE(array.is_ok());
    data_offset = (*array)->member_data_offset();
    auto queue = attach(**array);
    AlignedBuffer data = patterned(64 * 1024, 3);
    ASSERT_TRUE(run_one(*queue, IoKind::kWrite, 0, 64 * 1024, data.data()).is_ok());
    queue.reset();
    ASSERT_TRUE((*array)->stop().is_ok());
  }
  const std::vector<std::byte> data_before = read_bytes(files_.paths[0], data_offset, 64 * 1024);
  const std::vector<std::byte> bit_pages_before =
      read_bytes(files_.paths[0], meta::kBitmapPagesOffset, 4096);
  {
    auto dev = open_member(files_.paths[0]);
    ASSERT_TRUE(dev.is_ok());
    FaultyMember member(std::move(*dev));
    auto exam = Array::examine(member);
    ASSERT_TRUE(exam.is_ok());
    const FaultCounts before = member.counts();
    // The checked form erases only the named array's superblock: another UUID writes nothing.
    const Status other = Array::erase_superblock(member, "00000000-0000-4000-8000-000000000001");
    EXPECT_EQ(other.code(), Errc::kInvalidArgument) << other.to_string();
    EXPECT_NE(other.message().find(exam->array_uuid), std::string::npos) << other.to_string();
    EXPECT_EQ(member.counts().sync_writes, before.sync_writes);
    ASSERT_TRUE(Array::erase_superblock(member, exam->array_uuid).is_ok());
    EXPECT_EQ(member.counts().sync_writes, before.sync_writes + 1);
    EXPECT_EQ(member.counts().sync_flushes, before.sync_flushes + 1);
    auto gone = Array::examine(member);
    ASSERT_FALSE(gone.is_ok());
    EXPECT_EQ(gone.status().code(), Errc::kNotFound) << gone.status().to_string();
    // Erasing a device without a superblock is no error; the checked form refuses, writing nothing.
    EXPECT_TRUE(Array::erase_superblock(member).is_ok());
    EXPECT_EQ(Array::erase_superblock(member, exam->array_uuid).code(), Errc::kNotFound);
    EXPECT_EQ(member.counts().sync_writes, before.sync_writes + 2);
  }
  // The superblock, the backup slot and the bitmap header are zero; nothing after them changed.
  const std::vector<std::byte> headers = read_bytes(files_.paths[0], 0, meta::kBitmapPagesOffset);
  EXPECT_TRUE(
      std::all_of(headers.begin(), headers.end(), [](std::byte b) { return b == std::byte{0}; }));
  EXPECT_EQ(read_bytes(files_.paths[0], meta::kBitmapPagesOffset, 4096), bit_pages_before);
  EXPECT_EQ(read_bytes(files_.paths[0], data_offset, 64 * 1024), data_before);

  // The array assembles without it (degraded); a create over all three is refused while the
  // others still carry superblocks...
  {
    AssembleReport report;
    auto array = assemble(nullptr, {}, &report);
    ASSERT_TRUE(array.is_ok()) << array.status().to_string();
    EXPECT_EQ((*array)->health(), ArrayHealth::kDegraded);
    ASSERT_TRUE((*array)->stop().is_ok());
  }
  CreateOptions c;
  c.level = RaidLevel::kRaid5;
  c.strip_bytes = 4096;
  auto devs = files_.open(n_, 4u << 20, false);
  ASSERT_TRUE(devs.is_ok());
  auto refused = Array::create(std::move(*devs), c, options());
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), Errc::kBusy);
  EXPECT_NE(refused.status().message().find(files_.paths[1]), std::string::npos)
      << refused.status().to_string();

  // ... and taken without force once every member is erased. A corrupt superblock is erased too.
  {
    auto dev = open_member(files_.paths[2]);
    ASSERT_TRUE(dev.is_ok());
    auto block = AlignedBuffer::allocate(4096, 4096);
    ASSERT_TRUE((*dev)->read_sync(0, block->span()).is_ok());
    block->data()[100] ^= std::byte{1};
    ASSERT_TRUE((*dev)->write_sync(0, block->span()).is_ok());
    EXPECT_EQ(Array::examine(**dev).status().code(), Errc::kCorrupt);
  }
  for (std::uint32_t m = 1; m < n_; ++m) {
    auto dev = open_member(files_.paths[m]);
    ASSERT_TRUE(dev.is_ok());
    ASSERT_TRUE(Array::erase_superblock(**dev).is_ok());
    EXPECT_EQ(Array::examine(**dev).status().code(), Errc::kNotFound);
  }
  devs = files_.open(n_, 4u << 20, false);
  ASSERT_TRUE(devs.is_ok());
  c.assume_clean = true;
  auto created = Array::create(std::move(*devs), c, options());
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  EXPECT_EQ((*created)->health(), ArrayHealth::kOptimal);
}

}  // namespace
}  // namespace graid::testing
