// The ublk queue's tag logic (daemon/ublk/ublk_queue.h) with a fake driver in place of the
// kernel, in copy mode and with USER_COPY, over a real RAID5 array on tmpfs files: randomized
// reads, writes, flushes, discards and write-zeroes checked byte for byte against a model; every
// delivered request committed exactly once with the right result; errors mapped to -errno; and
// teardown with requests in flight (the kernel aborting fetches, as STOP_DEV does) finishing every
// tag without a lost or doubled commit; and a device's stop() while a queue has not finished.
// Each test also runs with a helper lane on a second thread
// (ublk_helper_lane.h), where part of the requests are served, and with BATCH_IO's per-queue
// commands (ublk_batch_queue.h: the same fake driver behind a batch front, FakeBatch).
#include "ublk/ublk_queue.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "graidd/io_threads.h"
#include "nbd_harness.h"
#include "ublk/ublk_batch_queue.h"
#include "ublk/ublk_device.h"

namespace graid::testing {
namespace {

using namespace graid::ublk;

constexpr std::uint64_t kVdBytes = 8u << 20;
constexpr std::uint32_t kMaxIo = 256u << 10;
constexpr std::uint16_t kDepth = 16;

// The driver's side, as the kernel behaves: a tag fetched is the driver's until it delivers a
// request on it; the server then owns it until COMMIT_AND_FETCH, which hands the result back and
// the tag to the driver again. For WRITEs the driver copies the data into the tag's buffer
// before delivering; for READs it takes the data from that buffer at commit. With USER_COPY the
// server copies instead (copy()), which this driver answers at its next pump(). With zero copy
// (AUTO_BUF_REG) the driver also puts each request's pages into the ring slot the tag's fetch
// named, before delivering it (here: memory of its own, installed in that slot of the server's
// ring), and takes them out at the commit; a READ's data is then what the server left in them,
// unless it copied the data in (copy()).
class FakeDriver final : public QueueTransport {
 public:
  // `served`: the tags the queue may fetch (a part of a split queue serves only some).
  FakeDriver(DataPath path, IoContext& ctx, TagSet served = {})
      : user_copy_(path != DataPath::kKernelCopy),
        zero_copy_(path == DataPath::kZeroCopy),
        served_(served),
        ctx_(ctx) {}
  struct Request {
    IoDesc desc{};
    std::vector<std::byte> data;  // WRITE: the payload
  };
  struct Commit {
    std::uint16_t tag;
    std::int32_t result;
    std::vector<std::byte> data;  // READ: what the server returned
    IoDesc desc;
  };

  void bind(UblkQueue& q) override { queue_ = &q; }
  void fetch(std::uint16_t tag, bool commit, std::int32_t result, std::byte* buf,
             std::int32_t buf_slot) override {
    if (!served_.holds(tag)) ADD_FAILURE() << "fetch of tag " << tag << ", not the queue's";
    auto& t = tags_[tag];
    if (zero_copy_ && buf_slot < 0)
      ADD_FAILURE() << "zero-copy fetch of tag " << tag << " with no slot";
    if (!zero_copy_ && buf_slot >= 0) ADD_FAILURE() << "a slot in a fetch without zero copy";
    if (t.slot >= 0 && buf_slot != t.slot) ADD_FAILURE() << "tag " << tag << " changed its slot";
    t.slot = buf_slot;
    if (commit) {
      if (!t.delivered) {
        ADD_FAILURE() << "commit of tag " << tag << " that carries no request";
        return;
      }
      Commit c{tag, result, {}, t.desc};
      if ((t.desc.op_flags & 0xff) == kOpRead && result > 0) {
        if (user_copy_ && (!t.registered || t.copied_in))
          c.data = t.returned;
        else if (user_copy_)
          c.data.assign(t.pages.begin(), t.pages.begin() + result);  // zero copy
        else
          c.data.assign(buf, buf + result);
        if (t.registered && !t.copied_in) ++zero_copy_commits;
      }
      if (t.registered) {
        // Unregistered at the commit, as AUTO_BUF_REG does.
        EXPECT_TRUE(
            ctx_.install_buffer_for_testing(static_cast<std::uint16_t>(t.slot), {}).is_ok());
        t.registered = false;
      }
      t.copied_in = false;
      if (user_copy_ && buf != nullptr) ADD_FAILURE() << "USER_COPY fetch with a buffer";
      t.returned.clear();
      commits.push_back(std::move(c));
      t.delivered = false;
    } else if (t.fetched || t.delivered) {
      ADD_FAILURE() << "FETCH_REQ of tag " << tag << " that is not idle";
    }
    if (t.fetched) ADD_FAILURE() << "tag " << tag << " fetched twice";
    t.fetched = true;
    t.buf = buf;
    ++fetches;
  }
  IoDesc desc(std::uint16_t tag) const override { return tags_.at(tag).desc; }
  // The buffer the tag was last fetched with (null with USER_COPY).
  std::byte* tag_buffer(std::uint16_t tag) const { return tags_.at(tag).buf; }
  // Every tag ever fetched.
  std::vector<std::uint16_t> known_tags() const {
    std::vector<std::uint16_t> v;
    for (const auto& [tag, t] : tags_)
      v.push_back(tag);
    return v;
  }
  void copy(std::uint16_t tag, bool to_request, std::byte* buf, std::uint32_t len) override {
    if (!user_copy_) ADD_FAILURE() << "copy() in copy mode";
    if (!tags_[tag].delivered) ADD_FAILURE() << "copy() on tag " << tag << " with no request";
    if (zero_copy_ && buf >= window_lo && buf < window_hi)
      ADD_FAILURE() << "copy() from a zero-copy window: memory the server must not touch";
    copies_.push_back({tag, to_request, buf, len});
  }
  // Answers the copies asked for so far; returns how many.
  std::size_t pump() {
    auto copies = std::move(copies_);
    copies_.clear();
    for (const auto& c : copies) {
      auto& t = tags_[c.tag];
      if (fail_copies > 0) {
        --fail_copies;
        queue_->copy_done(c.tag, -EFAULT);
        continue;
      }
      const std::size_t n = std::min<std::size_t>(c.len, std::uint64_t{t.desc.nr_sectors} << 9);
      if (c.to_request) {
        t.returned.assign(c.buf, c.buf + n);
        t.copied_in = true;
      } else
        std::memcpy(c.buf, t.payload.data(), std::min(n, t.payload.size()));
      queue_->copy_done(c.tag, static_cast<std::int32_t>(n));
    }
    return copies.size();
  }
  bool copies_pending() const { return !copies_.empty(); }

  // A tag the driver holds a fetch for, or -1.
  int free_tag() const {
    for (const auto& [tag, t] : tags_)
      if (t.fetched) return tag;
    return -1;
  }
  // Delivers `r` on a fetched tag (completing the fetch with 0).
  void deliver(std::uint16_t tag, const Request& r) {
    auto& t = tags_[tag];
    ASSERT_TRUE(t.fetched);
    t.fetched = false;
    t.delivered = true;
    t.desc = r.desc;
    t.payload = r.data;
    if (!user_copy_ && !r.data.empty()) std::memcpy(t.buf, r.data.data(), r.data.size());
    const std::uint8_t op = r.desc.op_flags & 0xff;
    if (zero_copy_ && (op == kOpRead || op == kOpWrite)) {
      if (fail_registrations > 0) {
        --fail_registrations;  // the slot was taken: delivered for the server to copy
        t.desc.op_flags |= kIoFNeedRegBuf;
      } else {
        // The request's pages: its payload, or bytes a read must overwrite.
        t.pages = r.data;
        t.pages.resize(std::uint64_t{r.desc.nr_sectors} << 9, std::byte{0xee});
        Status st = ctx_.install_buffer_for_testing(static_cast<std::uint16_t>(t.slot), t.pages);
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        t.registered = true;
      }
    }
    if (batch_ != nullptr) {
      // BATCH_IO: the armed multishot fetch names the tag.
      ASSERT_TRUE(armed) << "a request delivered with no fetch armed";
      const std::uint16_t one = tag;
      batch_->fetched({&one, 1});
      return;
    }
    queue_->fetch_done(tag, kIoResOk);
  }
  // Completes every outstanding fetch with -ENODEV (STOP_DEV's cancel); returns how many tags
  // it held. BATCH_IO: the multishot fetch ends instead, once (the front answers the tags).
  int abort_fetched() {
    int n = 0;
    for (auto& [tag, t] : tags_)
      if (t.fetched) {
        t.fetched = false;
        t.aborted = true;
        if (batch_ == nullptr) queue_->fetch_done(tag, -ENODEV);
        ++n;
      }
    if (batch_ != nullptr && armed) {
      armed = false;
      batch_->fetch_ended(-ENODEV);
    }
    return n;
  }
  // BATCH_IO: the front in use (set by FakeBatch), whether its multishot fetch is armed, and how
  // often it was.
  BatchQueueTransport* batch_ = nullptr;
  bool armed = false;
  int arms = 0;

  std::vector<Commit> commits;
  std::uint64_t fetches = 0;
  int fail_copies = 0;                  // the next copies fail with -EFAULT
  int fail_registrations = 0;           // zero copy: the next requests come with kIoFNeedRegBuf
  std::uint64_t zero_copy_commits = 0;  // READs committed with the data in their pages
  // Zero copy: the queue's windows, which copies must never come from or go to.
  std::byte* window_lo = nullptr;
  std::byte* window_hi = nullptr;

 private:
  struct TagState {
    bool fetched = false, delivered = false, aborted = false;
    bool registered = false;  // zero copy: `pages` are in the slot
    bool copied_in = false;   // the server copied a READ's data into the request
    std::int32_t slot = -1;
    std::vector<std::byte> pages;  // zero copy: the request's pages
    std::byte* buf = nullptr;
    IoDesc desc{};
    std::vector<std::byte> payload;   // the WRITE data of the request delivered
    std::vector<std::byte> returned;  // USER_COPY: what the server copied into the request
  };
  struct PendingCopy {
    std::uint16_t tag;
    bool to_request;
    std::byte* buf;
    std::uint32_t len;
  };
  bool user_copy_;
  bool zero_copy_;
  TagSet served_;
  IoContext& ctx_;
  std::vector<PendingCopy> copies_;
  UblkQueue* queue_ = nullptr;
  std::map<std::uint16_t, TagState> tags_;
};

// BATCH_IO's commands on top of FakeDriver's tag rules: each PREP or COMMIT element is checked
// for the wire format the driver demands and handed to FakeDriver as the FETCH_REQ or
// COMMIT_AND_FETCH_REQ it stands for; the command completes at the next poll with what the
// driver took (all of it, or, where told, none or the elements before `refuse_from`).
class FakeBatch final : public BatchDriver {
 public:
  FakeBatch(std::unique_ptr<FakeDriver> driver, IoContext& ctx, std::uint16_t depth)
      : driver_(std::move(driver)), ctx_(ctx), depth_(depth), done_(*this) {}
  void bind(BatchQueueTransport& transport, UblkQueue& queue) override {
    transport_ = &transport;
    driver_->bind(queue);
    driver_->batch_ = &transport;
  }
  void send(bool commit, std::span<const std::byte> elems, std::uint16_t nr,
            std::uint8_t elem_bytes, std::uint16_t flags, std::uint32_t cookie) override {
    const bool has_addr = (flags & kBatchFHasBufAddr) != 0;
    const bool fallback = (flags & kBatchFAutoBufRegFallback) != 0;
    EXPECT_FALSE(has_addr && fallback) << "the driver refuses both flags together";
    EXPECT_EQ(flags & ~(kBatchFHasBufAddr | kBatchFAutoBufRegFallback), 0);
    EXPECT_EQ(elem_bytes, has_addr ? 16u : 8u);
    EXPECT_EQ(elems.size(), std::size_t{nr} * elem_bytes);
    EXPECT_GE(nr, 1u);
    EXPECT_LE(nr, depth_) << "more elements than the queue has tags";
    std::int32_t res = commit ? static_cast<std::int32_t>(elems.size()) : 0;
    std::size_t take = nr;
    if (commit && refuse_from >= 0) {
      take = std::min<std::size_t>(nr, static_cast<std::size_t>(refuse_from));
      res = take == 0 ? refuse_with : static_cast<std::int32_t>(take * elem_bytes);
      refuse_from = -1;
    }
    for (std::size_t i = 0; i < take; ++i) {
      BatchElemHeader h;
      std::memcpy(&h, elems.data() + i * elem_bytes, sizeof(h));
      std::uint64_t addr = 0;
      if (has_addr) std::memcpy(&addr, elems.data() + i * elem_bytes + sizeof(h), sizeof(addr));
      EXPECT_TRUE(!has_addr || addr != 0) << "copy mode: a tag with no buffer";
      driver_->fetch(h.tag, commit, h.result,
                     reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(addr)),
                     fallback ? h.buf_index : -1);
    }
    commit ? ++commits : ++preps;
    answers_.push_back({cookie, res});
    if (!done_queued_) {
      done_queued_ = true;
      ctx_.defer(done_);
    }
  }
  void arm_fetch() override {
    EXPECT_FALSE(driver_->armed) << "a second fetch armed on the queue";
    driver_->armed = true;
    ++driver_->arms;
  }
  IoDesc desc(std::uint16_t tag) const override { return driver_->desc(tag); }
  void copy(std::uint16_t tag, bool to_request, std::byte* buf, std::uint32_t len) override {
    driver_->copy(tag, to_request, buf, len);
  }
  // Ends the armed fetch with `res` (the kernel running out of fetch buffers: -ENOBUFS).
  void end_fetch(std::int32_t res) {
    ASSERT_TRUE(driver_->armed);
    driver_->armed = false;
    transport_->fetch_ended(res);
  }
  FakeDriver& driver() { return *driver_; }

  int preps = 0, commits = 0;
  int refuse_from = -1;  // the next COMMIT takes only the elements before this one
  std::int32_t refuse_with = -EBUSY;

 private:
  struct Done final : Task {
    explicit Done(FakeBatch& o) : owner(o) {}
    void run() override {
      owner.done_queued_ = false;
      auto answers = std::move(owner.answers_);
      owner.answers_.clear();
      for (const auto& [cookie, res] : answers)
        owner.transport_->sent(cookie, res);
    }
    FakeBatch& owner;
  };
  std::unique_ptr<FakeDriver> driver_;
  IoContext& ctx_;
  std::uint16_t depth_;
  BatchQueueTransport* transport_ = nullptr;
  std::vector<std::pair<std::uint32_t, std::int32_t>> answers_;
  bool done_queued_ = false;
  Done done_;
};

IoDesc make_desc(std::uint8_t op, std::uint64_t offset, std::uint64_t len,
                 std::uint32_t flags = 0) {
  IoDesc d{};
  d.op_flags = op | flags;
  d.start_sector = offset >> 9;
  d.nr_sectors = static_cast<std::uint32_t>(len >> 9);
  return d;
}

struct QueueMode {
  DataPath path = DataPath::kKernelCopy;
  bool helper = false;  // a helper lane on a second thread takes part of the requests
  // The queue is one part of a split one (PER_IO_DAEMON): it serves the odd tags of a queue
  // twice as deep (kDepth of them, none of them at its own index), counting its requests as
  // moved.
  bool part = false;
  // The array's level: RAID5 (4 members), or a mirror (RAID1 of 2, RAID10 of 4), where zero
  // copy serves WRITEs from the requests' pages too.
  RaidLevel level = RaidLevel::kRaid5;
  bool batch = false;  // BATCH_IO: per-queue PREP, multishot FETCH and COMMIT commands
  bool user_copy() const { return path != DataPath::kKernelCopy; }
  bool mirror() const { return level == RaidLevel::kRaid1 || level == RaidLevel::kRaid10; }
  std::uint16_t queue_depth() const { return part ? 2 * kDepth : kDepth; }
  TagSet tags() const { return part ? TagSet{1, 2} : TagSet{}; }
};
void PrintTo(const QueueMode& m, std::ostream* os) {
  *os << data_path_name(m.path) << " copy" << (m.helper ? ", helper lane" : "")
      << (m.part ? ", odd tags" : "") << ", " << raid_level_name(m.level)
      << (m.batch ? ", batch" : "");
}

class UblkQueueTest : public ::testing::TestWithParam<QueueMode> {
 protected:
  void SetUp() override {
    const QueueMode& m = GetParam();
    array_ = std::make_unique<TestArray>(m.level, m.level == RaidLevel::kRaid1 ? 2 : 4,
                                         m.mirror() ? 24u << 20 : 8u << 20, kVdBytes, 16 * 1024);
    ASSERT_NE(array_->array, nullptr);
    auto ctx = IoContext::create(256);
    ASSERT_TRUE(ctx.is_ok());
    ctx_ = std::move(*ctx);
    auto driver = std::make_unique<FakeDriver>(GetParam().path, *ctx_, GetParam().tags());
    driver_ = driver.get();
    std::unique_ptr<QueueTransport> transport = std::move(driver);
    if (GetParam().batch) {
      auto batch = std::make_unique<FakeBatch>(
          std::unique_ptr<FakeDriver>(static_cast<FakeDriver*>(transport.release())), *ctx_,
          GetParam().queue_depth());
      batch_ = batch.get();
      transport = std::make_unique<BatchQueueTransport>(*ctx_, std::move(batch),
                                                        GetParam().queue_depth(), GetParam().path);
    }
    auto q = UblkQueue::create(*ctx_, *array_->array, array_->vd, 0, GetParam().queue_depth(),
                               kMaxIo, std::move(transport), GetParam().path, GetParam().tags());
    ASSERT_TRUE(q.is_ok()) << q.status().to_string();
    queue_ = std::move(*q);
    queue_->set_away(GetParam().part);
    const auto windows = queue_->zero_copy_windows();
    driver_->window_lo = const_cast<std::byte*>(windows.data());
    driver_->window_hi = driver_->window_lo + windows.size();
    if (GetParam().helper) {
      auto threads = daemon::IoThreads::start(1, 256);
      ASSERT_TRUE(threads.is_ok()) << threads.status().to_string();
      helper_thread_ = std::move(*threads);
      Status st;
      helper_thread_->call(0, [&](IoContext& helper_ctx) {
        auto lane = HelperLane::create(helper_ctx, *array_->array, queue_->registered_regions());
        if (lane.is_ok())
          lane_ = std::move(*lane);
        else
          st = lane.status();
      });
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      queue_->set_helper(*lane_);
    }
    queue_->start();
    if (batch_ != nullptr) {
      // The PREP goes out at the end of a poll pass and is answered at the next, which arms the
      // fetch.
      for (int i = 0; i < 4 && !driver_->armed; ++i)
        ctx_->poll(false);
      ASSERT_TRUE(driver_->armed);
      ASSERT_EQ(batch_->preps, 1) << "every tag in one PREP";
    }
    model_.assign(kVdBytes, std::byte{0});
  }
  void TearDown() override {
    if (queue_ && !queue_->finished()) {
      // Finish the queue as the kernel would on STOP_DEV before destroying it.
      drain();
      driver_->abort_fetched();
      // BATCH_IO: the tags are answered once the commands in flight are.
      for (int i = 0; i < 100 && !queue_->finished(); ++i)
        ctx_->poll(false);
      EXPECT_TRUE(queue_->finished());
    }
    // The lane before the queue (it has the queue's buffers registered), on its own thread.
    if (lane_) helper_thread_->call(0, [&](IoContext&) { lane_.reset(); });
    queue_.reset();
    helper_thread_.reset();
    ctx_.reset();
    array_.reset();
  }
  // One step: the driver answers copies, then the context runs (waiting only when nothing else
  // can make progress: the ring has I/O, or the helper lane will post results back).
  void step(bool may_wait) {
    driver_->pump();
    // Wait only for what the ring holds: a READ whose copy just committed left nothing there.
    ctx_->poll(may_wait && !driver_->copies_pending() &&
               (ctx_->in_flight() > 0 || queue_->on_helper() > 0));
  }
  // Steps until nothing is being served.
  void drain() {
    while (queue_->serving() > 0)
      step(true);
  }
  // The queue's i-th tag.
  std::uint16_t tag_at(std::uint16_t i) const { return GetParam().tags().tag(i); }
  // A ThreadCall that runs everything on this test's thread, in its context. With BATCH_IO the
  // context is polled first, as a real I/O thread's loop does between calls: the batch commands'
  // answers arrive in polls.
  ThreadCall inline_call() {
    return [this](std::uint32_t, const std::function<void(IoContext&)>& fn) {
      if (batch_ != nullptr) ctx_->poll(false);
      fn(*ctx_);
    };
  }
  // A device (UblkDevice::adopt) for a new handle on the fixture's VD, its commands going to
  // `commands`: with `queue` (the fixture's queue_, moved in) as device 7, or with no queue as
  // device 8; `flags` as the kernel granted them. Null, with a failure, when the VD cannot be
  // opened.
  std::unique_ptr<UblkDevice> adopt_device(UblkStopCommands& commands, ThreadCall call,
                                           std::unique_ptr<UblkQueue> queue,
                                           std::chrono::milliseconds drain_timeout,
                                           std::uint64_t flags = 0) {
    auto vd = array_->array->open_vd(array_->vd.id);
    if (!vd.is_ok()) {
      ADD_FAILURE() << vd.status().to_string();
      return nullptr;
    }
    std::vector<std::unique_ptr<UblkQueue>> queues;
    const std::uint32_t dev_id = queue ? 7 : 8;
    if (queue) queues.push_back(std::move(queue));
    return UblkDevice::adopt(commands, std::move(call), *array_->array, std::move(*vd), dev_id,
                             std::move(queues), 1, drain_timeout, flags);
  }

  // The helper lane's ArrayQueue counters (read on its thread).
  QueueStats lane_stats() {
    QueueStats s{};
    helper_thread_->call(0, [&](IoContext&) { s = lane_->queue().stats(); });
    return s;
  }

  std::unique_ptr<TestArray> array_;
  std::unique_ptr<IoContext> ctx_;
  FakeDriver* driver_ = nullptr;
  FakeBatch* batch_ = nullptr;  // BATCH_IO: the batch front of driver_
  std::unique_ptr<UblkQueue> queue_;
  std::unique_ptr<daemon::IoThreads> helper_thread_;
  std::unique_ptr<HelperLane> lane_;  // lives on helper_thread_
  std::vector<std::byte> model_;
  std::map<std::uint16_t, FakeDriver::Request> pending_;  // by tag: what was delivered
};

TEST_P(UblkQueueTest, StartFetchesEveryTagOnce) {
  EXPECT_EQ(driver_->fetches, kDepth);
  EXPECT_EQ(queue_->depth(), kDepth);
  std::vector<std::uint16_t> want;
  for (std::uint16_t i = 0; i < kDepth; ++i)
    want.push_back(tag_at(i));
  EXPECT_EQ(driver_->known_tags(), want) << "the queue's tags, each once";
  EXPECT_EQ(queue_->stats().requests, 0u);
  EXPECT_FALSE(queue_->finished());
}

TEST_P(UblkQueueTest, CopyModeTagBufferHeadsAreRegisteredInTheRingWhileTheQueueLives) {
  if (GetParam().user_copy()) GTEST_SKIP() << "USER_COPY has no per-tag buffers";
  std::vector<std::byte*> bufs;
  for (std::uint16_t i = 0; i < kDepth; ++i) {
    const std::uint16_t tag = tag_at(i);
    bufs.push_back(driver_->tag_buffer(tag));
    ASSERT_NE(bufs.back(), nullptr);
    EXPECT_TRUE(ctx_->registered_buffer(bufs.back(), kRegisteredTagBytes).has_value())
        << "tag " << tag << ": its head";
    EXPECT_FALSE(ctx_->registered_buffer(bufs.back(), kMaxIo).has_value())
        << "tag " << tag << ": not all of it (pinned memory)";
  }
  // A read lands in its tag's buffer through a fixed-buffer member read.
  const std::uint64_t before = ctx_->stats().fixed_buffer_ios;
  FakeDriver::Request r;
  r.desc = IoDesc{kOpRead, 8, 0, 0};
  driver_->deliver(tag_at(0), r);
  drain();
  ASSERT_EQ(driver_->commits.size(), 1u);
  EXPECT_EQ(driver_->commits[0].result, 4096);
  EXPECT_GT(ctx_->stats().fixed_buffer_ios, before);
  driver_->abort_fetched();
  if (lane_) {
    // The helper's ring has them too (its member I/O for them is fixed-buffer as well), until
    // the lane goes.
    helper_thread_->call(0, [&](IoContext& ctx) {
      for (std::byte* buf : bufs)
        EXPECT_TRUE(ctx.registered_buffer(buf, kRegisteredTagBytes).has_value());
      lane_.reset();
      for (std::byte* buf : bufs)
        EXPECT_FALSE(ctx.registered_buffer(buf, 4096).has_value()) << "withdrawn with the lane";
    });
  }
  queue_.reset();
  for (std::byte* buf : bufs)
    EXPECT_FALSE(ctx_->registered_buffer(buf, 4096).has_value()) << "withdrawn with the queue";
}

// Copy mode's tag buffers take memory only where used: once started, only the registered heads
// (at most kRegisteredTagBytes a tag) are resident, not depth × max I/O. On main f1b45f8 the
// buffers were zero-filled at creation, all of them resident; here that is 4 MiB of which at most
// 1 MiB may be.
TEST_P(UblkQueueTest, CopyModeTagBuffersAreResidentOnlyWhereUsed) {
  if (GetParam().user_copy()) GTEST_SKIP() << "USER_COPY has no per-tag buffers";
  EXPECT_EQ(queue_->tag_buffer_bytes(), std::size_t{kDepth} * kMaxIo);
  EXPECT_LE(queue_->tag_buffer_resident_bytes(), std::size_t{kDepth} * kRegisteredTagBytes);
}

TEST_P(UblkQueueTest, RandomizedIoMatchesTheModelAndEveryRequestIsCommittedOnce) {
  std::mt19937_64 rng(20261201);
  struct InFlight {
    std::uint64_t off, len;
    bool write;
  };
  std::map<std::uint16_t, InFlight> in_flight;  // by tag: ranges being served
  auto overlaps = [&](std::uint64_t off, std::uint64_t len, bool write) {
    for (const auto& [tag, f] : in_flight)
      if (off < f.off + f.len && f.off < off + len && (write || f.write)) return true;
    return false;
  };
  std::uint64_t delivered = 0, checked_reads = 0;
  std::size_t seen_commits = 0;
  driver_->fail_registrations = 40;  // zero copy: some requests the driver could not register
  for (int round = 0; round < 3000; ++round) {
    if (round == 1500 && GetParam().mirror()) {
      // A copy fails with requests in flight: every write still lands on the live copies.
      ASSERT_TRUE(array_->array->fail_member(1, "test").is_ok());
    }
    // Deliver up to a few requests, then poll once.
    for (int burst = std::uniform_int_distribution<int>(0, 4)(rng); burst > 0; --burst) {
      const int tag = driver_->free_tag();
      if (tag < 0) break;
      const int kind = std::uniform_int_distribution<int>(0, 99)(rng);
      // Mostly small requests, some up to a tag's whole buffer.
      const std::uint64_t max_blocks = kind % 4 == 0 ? kMaxIo / 512 : 32;
      const std::uint64_t blocks =
          512 * std::uniform_int_distribution<std::uint64_t>(1, max_blocks)(rng);
      const std::uint64_t off =
          512 * std::uniform_int_distribution<std::uint64_t>(0, (kVdBytes - blocks) / 512)(rng);
      FakeDriver::Request r;
      bool write = false;
      if (kind < 45) {  // write
        if (overlaps(off, blocks, true)) continue;
        write = true;
        r.desc = make_desc(kOpWrite, off, blocks, kind < 5 ? kIoFFua : 0);
        r.data.resize(blocks);
        for (auto& b : r.data)
          b = static_cast<std::byte>(rng());
      } else if (kind < 90) {  // read
        if (overlaps(off, blocks, false)) continue;
        r.desc = make_desc(kOpRead, off, blocks);
      } else if (kind < 93) {
        r.desc = make_desc(kOpFlush, 0, 0);
      } else if (kind < 97) {
        if (overlaps(off, blocks, true)) continue;
        write = true;
        r.desc = make_desc(kOpDiscard, off, blocks);
      } else {
        if (overlaps(off, blocks, true)) continue;
        write = true;
        r.desc = make_desc(kOpWriteZeroes, off, blocks, kind == 99 ? kIoFNoUnmap : 0);
      }
      const std::uint8_t op = r.desc.op_flags & 0xff;
      if (op != kOpFlush) in_flight[static_cast<std::uint16_t>(tag)] = {off, blocks, write};
      pending_[static_cast<std::uint16_t>(tag)] = r;
      driver_->deliver(static_cast<std::uint16_t>(tag), r);
      ++delivered;
    }
    step(queue_->serving() == kDepth);
    for (; seen_commits < driver_->commits.size(); ++seen_commits) {
      const auto& c = driver_->commits[seen_commits];
      const FakeDriver::Request& r = pending_.at(c.tag);
      const std::uint8_t op = r.desc.op_flags & 0xff;
      const std::uint64_t off = r.desc.start_sector << 9;
      const std::uint64_t len = std::uint64_t{r.desc.nr_sectors} << 9;
      if (op == kOpRead || op == kOpWrite)
        ASSERT_EQ(c.result, static_cast<std::int32_t>(len)) << "op " << int(op);
      else
        ASSERT_EQ(c.result, 0) << "op " << int(op);
      if (op == kOpWrite) std::memcpy(model_.data() + off, r.data.data(), len);
      if (op == kOpDiscard || op == kOpWriteZeroes) std::memset(model_.data() + off, 0, len);
      if (op == kOpRead) {
        ASSERT_EQ(c.data.size(), len);
        ASSERT_EQ(std::memcmp(c.data.data(), model_.data() + off, len), 0)
            << "read at " << off << " +" << len << " differs from the model";
        ++checked_reads;
      }
      in_flight.erase(c.tag);
      pending_.erase(c.tag);
    }
  }
  drain();
  for (; seen_commits < driver_->commits.size(); ++seen_commits) {
    const auto& c = driver_->commits[seen_commits];
    const FakeDriver::Request& r = pending_.at(c.tag);
    const std::uint8_t op = r.desc.op_flags & 0xff;
    const std::uint64_t off = r.desc.start_sector << 9;
    const std::uint64_t len = std::uint64_t{r.desc.nr_sectors} << 9;
    ASSERT_GE(c.result, 0);
    if (op == kOpWrite) std::memcpy(model_.data() + off, r.data.data(), len);
    if (op == kOpDiscard || op == kOpWriteZeroes) std::memset(model_.data() + off, 0, len);
    pending_.erase(c.tag);
  }
  EXPECT_GT(delivered, 1000u);
  EXPECT_GT(checked_reads, 300u);
  EXPECT_EQ(driver_->commits.size(), delivered);
  EXPECT_EQ(queue_->stats().requests, delivered);
  EXPECT_EQ(queue_->stats().commits, delivered);
  EXPECT_EQ(queue_->stats().errors, 0u);
  if (lane_) {
    // Both threads served requests: the lane's ArrayQueue exactly those handed to it.
    const QueueStats lane = lane_stats();
    EXPECT_GT(queue_->stats().spread, delivered / 5);
    EXPECT_LT(queue_->stats().spread, delivered);
    EXPECT_EQ(lane.reads + lane.writes, queue_->stats().spread);
    EXPECT_EQ(queue_->on_helper(), 0u);
  } else {
    // A part away counts all it serves as moved; a whole queue, none.
    EXPECT_EQ(queue_->stats().spread, GetParam().part ? delivered : 0u);
  }
  if (GetParam().path == DataPath::kZeroCopy) {
    // Reads went straight into the requests' pages, but those the driver could not register.
    EXPECT_GT(queue_->stats().zero_copy_reads, checked_reads / 2);
    EXPECT_EQ(queue_->stats().zero_copy_reads, driver_->zero_copy_commits);
    EXPECT_GT(queue_->stats().zero_copy_fallbacks, 0u);
    EXPECT_GT(ctx_->stats().fixed_buffer_ios, queue_->stats().zero_copy_reads);
    if (GetParam().mirror()) {
      // Writes too, but those whose pages the driver could not register.
      EXPECT_GT(queue_->stats().zero_copy_writes, queue_->stats().writes / 2);
    } else {
      EXPECT_EQ(queue_->stats().zero_copy_writes, 0u) << "parity is computed from the data";
    }
  } else {
    EXPECT_EQ(queue_->stats().zero_copy_reads, 0u);
    EXPECT_EQ(queue_->stats().zero_copy_writes, 0u);
  }
  // The array itself holds the model, parity consistent.
  const auto bytes = array_->read(0, static_cast<std::uint32_t>(kVdBytes));
  ASSERT_EQ(bytes.size(), model_.size());
  EXPECT_EQ(std::memcmp(bytes.data(), model_.data(), bytes.size()), 0);
  if (!GetParam().mirror()) {
    EXPECT_EQ(*array_->array->count_inconsistent_stripes(), 0u);
  }
}

// Zero copy where a read needs the CPU: with a member failed, reads of its strips are
// reconstructed from parity, which the engine does only in memory. Those come back to the queue
// refused (before anything touched the request's pages) and are served again through a copy;
// reads of the live members' strips still go straight into the pages. Every byte as written.
// A mirror reads the live copy instead, and writes it, straight from the pages: no copy at all.
TEST_P(UblkQueueTest, ZeroCopyReadsThatNeedTheCpuAreServedAgainThroughACopy) {
  if (GetParam().path != DataPath::kZeroCopy) GTEST_SKIP() << "zero copy only";
  std::mt19937_64 rng(20261205);
  // Data first (all of the first MiB), then a member fails.
  for (std::uint64_t off = 0; off < (1u << 20); off += 128u << 10) {
    FakeDriver::Request w;
    w.desc = make_desc(kOpWrite, off, 128u << 10);
    w.data.resize(128u << 10);
    for (auto& b : w.data)
      b = static_cast<std::byte>(rng());
    std::memcpy(model_.data() + off, w.data.data(), w.data.size());
    driver_->deliver(static_cast<std::uint16_t>(driver_->free_tag()), w);
    drain();
  }
  ASSERT_TRUE(array_->array->fail_member(1, "test").is_ok());
  const std::uint64_t fallbacks = queue_->stats().zero_copy_fallbacks;
  const std::uint64_t zero = queue_->stats().zero_copy_reads;
  std::size_t seen = driver_->commits.size();
  for (int i = 0; i < 64; ++i) {
    const std::uint64_t len = 4096 * std::uniform_int_distribution<std::uint64_t>(1, 16)(rng);
    const std::uint64_t off =
        4096 * std::uniform_int_distribution<std::uint64_t>(0, ((1u << 20) - len) / 4096)(rng);
    FakeDriver::Request r;
    r.desc = make_desc(kOpRead, off, len);
    driver_->deliver(static_cast<std::uint16_t>(driver_->free_tag()), r);
    drain();
    ASSERT_EQ(driver_->commits.size(), seen + 1);
    const auto& c = driver_->commits[seen++];
    ASSERT_EQ(c.result, static_cast<std::int32_t>(len));
    ASSERT_EQ(c.data.size(), len);
    ASSERT_EQ(std::memcmp(c.data.data(), model_.data() + off, len), 0) << "read at " << off;
  }
  if (GetParam().mirror()) {
    EXPECT_EQ(queue_->stats().zero_copy_fallbacks, fallbacks) << "the live copy needs no CPU";
    // Degraded writes, from the pages, then read back.
    const std::uint64_t zero_writes = queue_->stats().zero_copy_writes;
    for (std::uint64_t off = 0; off < (1u << 20); off += 192u << 10) {
      FakeDriver::Request w;
      w.desc = make_desc(kOpWrite, off, 64u << 10);
      w.data.resize(64u << 10);
      for (auto& b : w.data)
        b = static_cast<std::byte>(rng());
      std::memcpy(model_.data() + off, w.data.data(), w.data.size());
      driver_->deliver(static_cast<std::uint16_t>(driver_->free_tag()), w);
      drain();
    }
    EXPECT_GT(queue_->stats().zero_copy_writes, zero_writes);
    const auto bytes = array_->read(0, 1u << 20);
    EXPECT_EQ(std::memcmp(bytes.data(), model_.data(), bytes.size()), 0);
  } else {
    EXPECT_GT(queue_->stats().zero_copy_fallbacks, fallbacks) << "reads of the failed member";
  }
  EXPECT_GT(queue_->stats().zero_copy_reads, zero) << "reads of live members only";
  EXPECT_EQ(queue_->stats().errors, 0u);
}

TEST_P(UblkQueueTest, BadRequestsAreAnsweredWithNegativeErrno) {
  struct Case {
    IoDesc desc;
    std::int32_t want;
  };
  const Case cases[] = {
      {make_desc(kOpRead, kVdBytes, 4096), -ERANGE},         // beyond the VD
      {make_desc(kOpWrite, kVdBytes - 512, 4096), -ERANGE},  // straddles its end
      {make_desc(kOpWrite, 0, kMaxIo + 4096), -EINVAL},      // larger than a tag's buffer
      {make_desc(kOpRead, 0, 0), -EINVAL},                   // empty
      {make_desc(kOpWriteSame, 0, 4096), -EOPNOTSUPP},       // not served
      {make_desc(42, 0, 4096), -EOPNOTSUPP},                 // unknown
  };
  for (const auto& c : cases) {
    const int tag = driver_->free_tag();
    ASSERT_GE(tag, 0);
    const std::size_t before = driver_->commits.size();
    FakeDriver::Request r;
    r.desc = c.desc;
    if ((c.desc.op_flags & 0xff) == kOpWrite && c.desc.nr_sectors * 512ull <= kMaxIo)
      r.data.assign(c.desc.nr_sectors * 512ull, std::byte{0x5a});
    driver_->deliver(static_cast<std::uint16_t>(tag), r);
    while (driver_->commits.size() == before)
      step(true);
    ASSERT_EQ(driver_->commits.size(), before + 1);
    EXPECT_EQ(driver_->commits.back().tag, tag);
    EXPECT_EQ(driver_->commits.back().result, c.want)
        << "op " << (c.desc.op_flags & 0xff) << " at sector " << c.desc.start_sector;
  }
  EXPECT_EQ(queue_->stats().errors, std::size(cases));
  EXPECT_EQ(queue_->stats().unsupported, 2u);
  if (lane_) {
    // An error on the helper's thread comes back as the request's -errno: two requests at once
    // (a lone one is never moved), the bad one, past the VD's end, starting in an odd stripe.
    const std::uint64_t stripe = array_->array->geometry().stripe_data_bytes();
    std::uint64_t bad_off = kVdBytes;
    while ((array_->vd.start + bad_off) / stripe % 2 == 0)
      bad_off += 4096;
    const std::uint64_t spread_before = queue_->stats().spread;
    const std::size_t before = driver_->commits.size();
    FakeDriver::Request good, bad;
    good.desc = make_desc(kOpRead, 0, 4096);
    bad.desc = make_desc(kOpRead, bad_off, 4096);
    const int good_tag = driver_->free_tag();
    driver_->deliver(static_cast<std::uint16_t>(good_tag), good);
    const int bad_tag = driver_->free_tag();
    driver_->deliver(static_cast<std::uint16_t>(bad_tag), bad);
    drain();
    ASSERT_EQ(driver_->commits.size(), before + 2);
    // Zero-copy reads stay home (the helper's ring has not the requests' pages).
    const bool zero = GetParam().path == DataPath::kZeroCopy;
    EXPECT_EQ(queue_->stats().spread, spread_before + (zero ? 0 : 1));
    for (std::size_t i = before; i < driver_->commits.size(); ++i)
      EXPECT_EQ(driver_->commits[i].result, driver_->commits[i].tag == bad_tag ? -ERANGE : 4096);
  }
  // The request's own fault fails no member, and the refused writes wrote nothing.
  EXPECT_EQ(array_->array->health(), ArrayHealth::kOptimal);
  const auto bytes = array_->read(kVdBytes - 4096, 4096);
  for (auto b : bytes)
    ASSERT_EQ(b, std::byte{0});
}

TEST_P(UblkQueueTest, TeardownWithRequestsInFlightCommitsEachOnceAndFinishes) {
  // Fill every tag with a write, let the kernel abort what it still holds (nothing: all tags are
  // out), then as the writes finish their COMMIT_AND_FETCHes come back aborted.
  std::vector<std::byte> data(kMaxIo, std::byte{0x77});
  for (std::uint16_t i = 0; i < kDepth; ++i) {
    const int tag = driver_->free_tag();
    ASSERT_GE(tag, 0);
    FakeDriver::Request r;
    r.desc = make_desc(kOpWrite, std::uint64_t{i} * kMaxIo, kMaxIo);
    r.data = data;
    driver_->deliver(static_cast<std::uint16_t>(tag), r);
  }
  EXPECT_EQ(driver_->free_tag(), -1);
  EXPECT_EQ(queue_->serving(), kDepth);
  EXPECT_EQ(driver_->abort_fetched(), 0);
  int aborted = 0;
  while (!queue_->finished()) {
    step(queue_->serving() > 0);
    aborted += driver_->abort_fetched();  // each commit's fetch is refused: device stopping
  }
  EXPECT_EQ(aborted, kDepth);
  EXPECT_EQ(driver_->commits.size(), kDepth);
  for (const auto& c : driver_->commits)
    EXPECT_EQ(c.result, static_cast<std::int32_t>(kMaxIo));
  EXPECT_EQ(queue_->stats().aborted_tags, kDepth);
  EXPECT_EQ(queue_->stats().requests, queue_->stats().commits);
  if (lane_) {
    EXPECT_GT(queue_->stats().spread, 0u) << "some were in flight on the helper";
  }
  if (GetParam().part) {
    EXPECT_EQ(queue_->stats().spread, kDepth) << "a part away counts all";
  }
  EXPECT_EQ(queue_->on_helper(), 0u);
  EXPECT_TRUE(queue_->error().is_ok());
  // A completion for a finished tag changes nothing (the kernel never sends one; a bug would).
  queue_->fetch_done(tag_at(0), kIoResOk);
  queue_->fetch_done(static_cast<std::uint16_t>(tag_at(0) + 1), kIoResOk);  // a tag not served
  queue_->copy_done(static_cast<std::uint16_t>(tag_at(0) + 1), 4096);
  EXPECT_EQ(queue_->stats().requests, kDepth);
  const auto bytes = array_->read(0, static_cast<std::uint32_t>(kMaxIo) * kDepth);
  for (auto b : bytes)
    ASSERT_EQ(b, std::byte{0x77});
}

TEST_P(UblkQueueTest, AFetchRefusedByTheDriverIsReported) {
  // A driver error other than an abort (say, a queue the device does not have): the tag is done
  // and the queue says why.
  const int tag = driver_->free_tag();
  ASSERT_GE(tag, 0);
  queue_->fetch_done(static_cast<std::uint16_t>(tag), -EINVAL);
  EXPECT_FALSE(queue_->error().is_ok());
  EXPECT_NE(queue_->error().message().find("fetch failed"), std::string::npos);
  EXPECT_EQ(queue_->stats().aborted_tags, 1u);
}

TEST_P(UblkQueueTest, AFailedUserCopyFailsTheRequestAndWritesNothing) {
  if (!GetParam().user_copy()) GTEST_SKIP() << "copy mode has no server-side copies";
  for (std::uint8_t op : {kOpWrite, kOpRead}) {
    const int tag = driver_->free_tag();
    ASSERT_GE(tag, 0);
    FakeDriver::Request r;
    r.desc = make_desc(op, 0, 8192);
    if (op == kOpWrite) r.data.assign(8192, std::byte{0x33});
    driver_->fail_copies = 1;
    // Zero copy copies a READ only where the driver could not register its pages.
    if (GetParam().path == DataPath::kZeroCopy) driver_->fail_registrations = 1;
    const std::size_t before = driver_->commits.size();
    driver_->deliver(static_cast<std::uint16_t>(tag), r);
    while (driver_->commits.size() == before)
      step(true);
    EXPECT_EQ(driver_->commits.back().result, -EFAULT) << "op " << int(op);
  }
  EXPECT_EQ(queue_->stats().copy_errors, 2u);
  EXPECT_EQ(queue_->stats().errors, 2u);
  const auto bytes = array_->read(0, 8192);
  for (auto b : bytes)
    ASSERT_EQ(b, std::byte{0});
}

// BATCH_IO: the requests a poll pass finished go back in one COMMIT_IO_CMDS, each tag once, and
// the driver may hand every tag out again.
TEST_P(UblkQueueTest, BatchCommitsWhatAPassFinishedInOneCommand) {
  if (batch_ == nullptr) GTEST_SKIP() << "a command per tag";
  // Requests answered at once (an op graid does not serve): all finished before the next pass.
  for (int i = 0; i < 8; ++i) {
    const int tag = driver_->free_tag();
    ASSERT_GE(tag, 0);
    FakeDriver::Request r;
    r.desc = make_desc(kOpWriteSame, 0, 4096);
    driver_->deliver(static_cast<std::uint16_t>(tag), r);
  }
  EXPECT_EQ(batch_->commits, 0) << "nothing sent before the pass ends";
  ctx_->poll(false);
  EXPECT_EQ(batch_->commits, 1);
  ASSERT_EQ(driver_->commits.size(), 8u);
  for (const auto& c : driver_->commits)
    EXPECT_EQ(c.result, -EOPNOTSUPP);
  ctx_->poll(false);  // the COMMIT's answer
  EXPECT_TRUE(queue_->quiet());
  EXPECT_EQ(queue_->stats().commits, 8u);
  EXPECT_TRUE(queue_->error().is_ok());
  // Every tag is the driver's again: a full queue's worth can be delivered.
  std::vector<std::uint16_t> tags;
  for (int tag; (tag = driver_->free_tag()) >= 0;) {
    FakeDriver::Request r;
    r.desc = make_desc(kOpFlush, 0, 0);
    driver_->deliver(static_cast<std::uint16_t>(tag), r);
    tags.push_back(static_cast<std::uint16_t>(tag));
  }
  EXPECT_EQ(tags.size(), GetParam().tags().count(GetParam().queue_depth()));
  drain();
  EXPECT_EQ(queue_->stats().flushes, tags.size());
}

// BATCH_IO: a COMMIT the driver takes only in part (it stops at the first element it refuses,
// a tag it does not think the server holds) fails the tags it did not take, and only those; a
// fetch that ends for want of buffers is armed again and delivers what came meanwhile.
TEST_P(UblkQueueTest, BatchRefusedCommitsFailTheirTagsAndAnEmptiedFetchIsArmedAgain) {
  if (batch_ == nullptr) GTEST_SKIP() << "a command per tag";
  std::vector<std::uint16_t> tags;
  for (int i = 0; i < 3; ++i) {
    const int tag = driver_->free_tag();
    ASSERT_GE(tag, 0);
    FakeDriver::Request r;
    r.desc = make_desc(kOpWriteSame, 0, 4096);
    driver_->deliver(static_cast<std::uint16_t>(tag), r);
    tags.push_back(static_cast<std::uint16_t>(tag));
  }
  batch_->refuse_from = 1;  // the driver takes the first element only
  ctx_->poll(false);
  ctx_->poll(false);
  EXPECT_EQ(driver_->commits.size(), 1u);
  EXPECT_EQ(queue_->stats().aborted_tags, 2u) << "the two refused tags are finished";
  EXPECT_FALSE(queue_->error().is_ok()) << "and the queue says why";
  EXPECT_TRUE(queue_->quiet());

  batch_->end_fetch(-ENOBUFS);
  EXPECT_TRUE(driver_->armed) << "armed again";
  EXPECT_EQ(driver_->arms, 2);
  const int tag = driver_->free_tag();
  ASSERT_GE(tag, 0);
  FakeDriver::Request r;
  r.desc = make_desc(kOpWrite, 0, 4096);
  r.data.assign(4096, std::byte{0x42});
  driver_->deliver(static_cast<std::uint16_t>(tag), r);
  drain();
  ctx_->poll(false);
  ASSERT_EQ(driver_->commits.size(), 2u);
  EXPECT_EQ(driver_->commits[1].result, 4096);
  const auto back = array_->read(0, 4096);
  EXPECT_TRUE(
      std::all_of(back.begin(), back.end(), [](std::byte b) { return b == std::byte{0x42}; }));
}

// The driver's stop commands, counted.
struct FakeStopCommands final : UblkStopCommands {
  Status update_size(std::uint32_t, std::uint64_t sectors) override {
    sizes.push_back(sectors);
    return {};
  }
  std::vector<std::uint64_t> sizes;  // UPDATE_SIZE commands, in sectors
  Status quiesce_dev(std::uint32_t, std::chrono::milliseconds) override {
    ++quiesces;
    if (on_quiesce) on_quiesce();
    return {};
  }
  int quiesces = 0;
  std::function<void()> on_quiesce;  // what the kernel does on QUIESCE_DEV
  Status stop_dev(std::uint32_t) override {
    ++stops;
    return {};
  }
  Status try_stop_dev(std::uint32_t) override {
    ++tries;
    if (open) return make_error(Errc::kBusy, "TRY_STOP_DEV: EBUSY");
    ++stops;
    if (on_stop) on_stop();
    return {};
  }
  bool open = false;              // TRY_STOP_DEV answers EBUSY
  std::function<void()> on_stop;  // what the kernel does after a successful TRY_STOP_DEV
  int tries = 0;
  Status del_dev(std::uint32_t, std::chrono::milliseconds) override {
    ++dels;
    return {};
  }
  int stops = 0, dels = 0;
};

// UblkDevice::stop() while a queue has not finished (its driver never aborts the fetches, as a
// kernel still draining after STOP_DEV): kBusy, and kBusy again on a retry, the queue still
// attached and no DEL_DEV sent. On main f1b45f8 the retry answered success with the queue still
// attached (and the VD deletable under it). Once the driver aborts the fetches, stop() removes
// the device, sending DEL_DEV once.
TEST_P(UblkQueueTest, StopStaysBusyUntilEveryQueueHasFinished) {
  if (GetParam().helper) GTEST_SKIP() << "the device made here has no helper lanes";
  FakeStopCommands commands;
  const ThreadCall call = inline_call();
  const std::uint32_t attached = array_->array->queues_attached();
  auto dev = adopt_device(commands, call, std::move(queue_), std::chrono::milliseconds(50));
  ASSERT_NE(dev, nullptr);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Status st = dev->stop();
    EXPECT_EQ(st.code(), Errc::kBusy) << "attempt " << attempt << ": " << st.to_string();
    EXPECT_FALSE(dev->removed());
    EXPECT_EQ(array_->array->queues_attached(), attached);
  }
  EXPECT_EQ(commands.stops, 1);
  EXPECT_EQ(commands.dels, 0);
  EXPECT_EQ(driver_->abort_fetched(), kDepth);  // STOP_DEV's cancel arrives at last
  EXPECT_TRUE(dev->stop().is_ok());
  EXPECT_TRUE(dev->removed());
  EXPECT_EQ(array_->array->queues_attached(), attached - 1);
  EXPECT_TRUE(dev->stop().is_ok());
  EXPECT_EQ(commands.stops, 1);
  EXPECT_EQ(commands.dels, 1);
}

// TRY_STOP_DEV (7.0+): while the kernel says the device is open, try_stop() changes nothing
// (no STOP_DEV, queue attached); once it is closed, the device is stopped and removed. Without
// kFlagSafeStopDev the kernel cannot tell: kUnsupported, nothing sent.
TEST_P(UblkQueueTest, TryStopLeavesAnOpenDeviceAlone) {
  if (GetParam().helper) GTEST_SKIP() << "the device made here has no helper lanes";
  FakeStopCommands commands;
  const ThreadCall call = inline_call();
  const std::uint32_t attached = array_->array->queues_attached();
  auto dev = adopt_device(commands, call, std::move(queue_), std::chrono::milliseconds(2000),
                          kFlagSafeStopDev);
  ASSERT_NE(dev, nullptr);
  ASSERT_TRUE(dev->can_try_stop());
  commands.open = true;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto r = dev->try_stop();
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_FALSE(*r) << "open: not stopped";
    EXPECT_FALSE(dev->removed());
    EXPECT_EQ(array_->array->queues_attached(), attached);
  }
  EXPECT_EQ(commands.tries, 2);
  EXPECT_EQ(commands.stops, 0);
  EXPECT_EQ(commands.dels, 0);
  commands.open = false;
  commands.on_stop = [this] { driver_->abort_fetched(); };  // the stop's cancel of every fetch
  auto r = dev->try_stop();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(*r);
  EXPECT_TRUE(dev->removed());
  EXPECT_EQ(array_->array->queues_attached(), attached - 1);
  EXPECT_EQ(commands.stops, 1);
  EXPECT_EQ(commands.dels, 1);

  auto plain = adopt_device(commands, call, nullptr, std::chrono::milliseconds(50));
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->can_try_stop());
  EXPECT_EQ(plain->try_stop().status().code(), Errc::kUnsupported);
  EXPECT_EQ(commands.tries, 3) << "nothing sent without the flag";
}

// A live resize (UPDATE_SIZE, 6.16+): once the VD grew, resize() lets the queue serve up to the
// new end, then tells the kernel the new size in sectors. A write past the old end fails before
// and lands after (read back through the array). Without kFlagUpdateSize, false: nothing sent,
// the device keeps its size. A smaller size, or one past the VD, is refused.
TEST_P(UblkQueueTest, ResizeServesTheGrownVdAndTellsTheKernel) {
  if (GetParam().helper) GTEST_SKIP() << "the device made here has no helper lanes";
  FakeStopCommands commands;
  const ThreadCall call = inline_call();
  UblkQueue* queue = queue_.get();
  auto dev = adopt_device(commands, call, std::move(queue_), std::chrono::milliseconds(2000),
                          kFlagUpdateSize);
  ASSERT_NE(dev, nullptr);
  ASSERT_TRUE(dev->can_resize());
  EXPECT_EQ(dev->info().size_bytes, kVdBytes);
  auto write_past_end = [&] {
    FakeDriver::Request r;
    r.desc = make_desc(kOpWrite, kVdBytes, 8192);
    r.data.resize(8192);
    std::mt19937 rng(99);
    for (auto& b : r.data)
      b = static_cast<std::byte>(rng());
    const int tag = driver_->free_tag();
    EXPECT_GE(tag, 0);
    driver_->deliver(static_cast<std::uint16_t>(tag), r);
    while (queue->serving() > 0) {
      driver_->pump();
      ctx_->poll(ctx_->in_flight() > 0 && !driver_->copies_pending());
    }
    return r.data;
  };
  (void)write_past_end();
  ASSERT_EQ(driver_->commits.size(), 1u);
  EXPECT_LT(driver_->commits[0].result, 0) << "past the end of the VD";

  // The grown VD: first the array, then the device.
  auto grown = array_->array->resize_vd(array_->vd.id, 2 * kVdBytes);
  ASSERT_TRUE(grown.is_ok()) << grown.status().to_string();
  EXPECT_EQ(dev->resize(kVdBytes - 4096).status().code(), Errc::kInvalidArgument);
  EXPECT_EQ(dev->resize(3 * kVdBytes).status().code(), Errc::kInvalidArgument);
  EXPECT_TRUE(commands.sizes.empty()) << "refusals send nothing";
  auto live = dev->resize(2 * kVdBytes);
  ASSERT_TRUE(live.is_ok()) << live.status().to_string();
  EXPECT_TRUE(*live);
  EXPECT_EQ(commands.sizes, std::vector<std::uint64_t>{2 * kVdBytes / 512});
  EXPECT_EQ(dev->info().size_bytes, 2 * kVdBytes);
  const auto data = write_past_end();
  ASSERT_EQ(driver_->commits.size(), 2u);
  EXPECT_EQ(driver_->commits[1].result, 8192);
  array_->vd = *grown;  // reads through the VD as it is now
  const auto back = array_->read(kVdBytes, 8192);
  EXPECT_TRUE(std::equal(back.begin(), back.end(), data.begin(), data.end()));

  driver_->abort_fetched();
  ASSERT_TRUE(dev->stop().is_ok());
  EXPECT_EQ(dev->resize(3 * kVdBytes).status().code(), Errc::kUnsupported) << "removed";

  // A kernel without UPDATE_SIZE: nothing sent, the device keeps its size.
  constexpr std::uint64_t kMore = 2 * kVdBytes + (4u << 20);  // within the array's 20 MiB
  auto grown_more = array_->array->resize_vd(array_->vd.id, kMore);
  ASSERT_TRUE(grown_more.is_ok()) << grown_more.status().to_string();
  auto plain = adopt_device(commands, call, nullptr, std::chrono::milliseconds(50));
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->can_resize());
  auto not_live = plain->resize(kMore);
  ASSERT_TRUE(not_live.is_ok()) << not_live.status().to_string();
  EXPECT_FALSE(*not_live);
  EXPECT_EQ(commands.sizes.size(), 1u) << "nothing sent without the flag";
}

// QUIESCE_DEV (6.16+): hand_over() quiesces the device (the kernel cancels every fetch), lets
// the queue finish and go, and leaves the device to the next server: no STOP_DEV or DEL_DEV, not
// then, not from a later stop() or the destructor. A write served before is on the array.
// Without kFlagQuiesce: kUnsupported, nothing sent.
TEST_P(UblkQueueTest, HandOverQuiescesAndLeavesTheDeviceForTheNextServer) {
  if (GetParam().helper) GTEST_SKIP() << "the device made here has no helper lanes";
  FakeStopCommands commands;
  const ThreadCall call = inline_call();
  {
    FakeDriver::Request r;
    r.desc = make_desc(kOpWrite, 1u << 20, 8192);
    r.data.assign(8192, std::byte{0x5a});
    driver_->deliver(static_cast<std::uint16_t>(driver_->free_tag()), r);
    drain();
    ASSERT_EQ(driver_->commits.size(), 1u);
    ASSERT_EQ(driver_->commits[0].result, 8192);
  }
  const std::uint32_t attached = array_->array->queues_attached();
  {
    auto dev = adopt_device(commands, call, std::move(queue_), std::chrono::milliseconds(2000),
                            kFlagUserRecovery | kFlagQuiesce);
    ASSERT_NE(dev, nullptr);
    ASSERT_TRUE(dev->can_hand_over());
    commands.on_quiesce = [this] { driver_->abort_fetched(); };
    auto released = dev->hand_over();
    ASSERT_TRUE(released.is_ok()) << released.status().to_string();
    EXPECT_TRUE(*released) << "every fetch cancelled: the queue goes";
    EXPECT_TRUE(dev->handed_over());
    EXPECT_EQ(commands.quiesces, 1);
    EXPECT_EQ(array_->array->queues_attached(), attached - 1) << "the queue is gone";
    EXPECT_TRUE(dev->hand_over().is_ok());
    EXPECT_TRUE(dev->stop().is_ok());
    EXPECT_EQ(commands.quiesces, 1);
  }
  EXPECT_EQ(commands.stops, 0) << "the device stays for the next server";
  EXPECT_EQ(commands.dels, 0);
  const auto back = array_->read(1u << 20, 8192);
  EXPECT_TRUE(
      std::all_of(back.begin(), back.end(), [](std::byte b) { return b == std::byte{0x5a}; }));

  auto plain =
      adopt_device(commands, call, nullptr, std::chrono::milliseconds(50), kFlagUserRecovery);
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->can_hand_over());
  EXPECT_EQ(plain->hand_over().status().code(), Errc::kUnsupported);
  EXPECT_EQ(commands.quiesces, 1) << "nothing sent without the flag";
}

// The driver cancels only the fetches pending when it quiesces. A request being served then is
// finished (its write reaches the array) and committed, and its tag's new fetch stays pending:
// hand_over() waits for that, then answers false with the queue kept (never freed while the
// fetch is pending) but detached from the array, which may then stop; nothing more is sent.
// Once the fetch is cancelled (the process's exit, here the fake), destroying the device frees
// the queue.
TEST_P(UblkQueueTest, HandOverWithARequestInFlightKeepsTheQueueUntilItsFetchIsCancelled) {
  if (GetParam().helper) GTEST_SKIP() << "the device made here has no helper lanes";
  FakeStopCommands commands;
  // Each call from the device first lets the queue's thread make progress, as a real I/O
  // thread's loop does between calls. (Not the fake driver: the device destroys it with the
  // queue, and a call may follow.)
  ThreadCall call = [this](std::uint32_t, const std::function<void(IoContext&)>& fn) {
    ctx_->poll(false);
    fn(*ctx_);
  };
  FakeDriver::Request r;
  r.desc = make_desc(kOpWrite, 2u << 20, 16384);
  r.data.assign(16384, std::byte{0xa7});
  driver_->deliver(static_cast<std::uint16_t>(driver_->free_tag()), r);  // being served
  driver_->pump();  // USER_COPY: the payload is copied out; the write itself is still in flight
  const std::uint32_t attached = array_->array->queues_attached();
  UblkQueue* queue = queue_.get();
  {
    auto dev = adopt_device(commands, call, std::move(queue_), std::chrono::milliseconds(5000),
                            kFlagUserRecovery | kFlagQuiesce);
    ASSERT_NE(dev, nullptr);
    commands.on_quiesce = [this] { driver_->abort_fetched(); };  // the pending ones only
    auto released = dev->hand_over();
    ASSERT_TRUE(released.is_ok()) << released.status().to_string();
    if (batch_ != nullptr) {
      // BATCH_IO: no fetch per tag. The multishot fetch ended at the quiesce, and the request
      // in flight was committed: nothing of the queue's is left in the driver, so it goes (and
      // the fake driver with it: what it saw cannot be asked any more).
      EXPECT_TRUE(*released);
      EXPECT_EQ(array_->array->queues_attached(), attached - 1);
      EXPECT_TRUE(dev->stop().is_ok());
      EXPECT_EQ(commands.stops, 0);
      EXPECT_EQ(commands.dels, 0);
      const auto back = array_->read(2u << 20, 16384);
      EXPECT_TRUE(
          std::all_of(back.begin(), back.end(), [](std::byte b) { return b == std::byte{0xa7}; }));
      return;
    }
    EXPECT_FALSE(*released) << "a fetch is still pending: the queue stays";
    EXPECT_TRUE(dev->handed_over());
    ASSERT_EQ(driver_->commits.size(), 1u);
    EXPECT_EQ(driver_->commits[0].result, 16384) << "the request in flight finished";
    EXPECT_EQ(queue->serving(), 0u);
    EXPECT_FALSE(queue->finished());
    EXPECT_EQ(array_->array->queues_attached(), attached - 1) << "the array is let go";
    EXPECT_TRUE(dev->stop().is_ok());
    EXPECT_EQ(commands.stops, 0);
    EXPECT_EQ(commands.dels, 0);
    EXPECT_EQ(driver_->abort_fetched(), 1) << "the re-fetched tag";
  }
  EXPECT_EQ(commands.stops, 0);
  EXPECT_EQ(commands.dels, 0);
  const auto back = array_->read(2u << 20, 16384);
  EXPECT_TRUE(
      std::all_of(back.begin(), back.end(), [](std::byte b) { return b == std::byte{0xa7}; }));
}

// plan_queue_parts: every tag of every queue is served by exactly one part; split, each queue's
// parts are on different threads, consecutive tags on different threads, and every thread gets
// the same share; not split, one part per queue, queue q on thread q % threads.
TEST(UblkQueueParts, EveryTagOfEveryQueueIsServedOnceAndSplitPartsCoverEveryThread) {
  for (bool split : {false, true})
    for (std::uint16_t queues : {1, 2, 3})
      for (std::uint32_t threads : {1u, 2u, 3u, 4u})
        for (std::uint16_t depth : {1, 2, 7, 128}) {
          SCOPED_TRACE(::testing::Message() << "split " << split << ", " << queues << " queues, "
                                            << threads << " threads, depth " << depth);
          const auto parts = plan_queue_parts(queues, depth, threads, split);
          std::map<std::pair<std::uint16_t, std::uint16_t>, int> served;  // (queue, tag)
          std::map<std::uint32_t, std::uint32_t> per_thread;              // tags per thread
          for (const QueuePart& p : parts) {
            ASSERT_LT(p.thread, threads);
            ASSERT_LT(p.q_id, queues);
            for (std::uint16_t i = 0; i < p.tags.count(depth); ++i) {
              const std::uint16_t tag = p.tags.tag(i);
              ASSERT_LT(tag, depth);
              ASSERT_TRUE(p.tags.holds(tag));
              ASSERT_EQ(p.tags.index(tag), i);
              ++served[{p.q_id, tag}];
              ++per_thread[p.thread];
            }
          }
          ASSERT_EQ(served.size(), std::size_t{queues} * depth);
          for (const auto& [qt, n] : served)
            ASSERT_EQ(n, 1) << "queue " << qt.first << " tag " << qt.second;
          const std::uint32_t want_parts = split ? std::min<std::uint32_t>(threads, depth) : 1;
          ASSERT_EQ(parts.size(), std::size_t{queues} * want_parts);
          for (std::uint16_t q = 0; q < queues; ++q) {
            std::vector<std::uint32_t> on;
            for (const QueuePart& p : parts)
              if (p.q_id == q) on.push_back(p.thread);
            std::sort(on.begin(), on.end());
            EXPECT_EQ(std::adjacent_find(on.begin(), on.end()), on.end())
                << "two parts, one thread";
            if (!split) {
              EXPECT_EQ(on, std::vector<std::uint32_t>{q % threads});
            }
          }
          if (split && depth % threads == 0 && depth >= threads) {
            for (std::uint32_t t = 0; t < threads; ++t)
              EXPECT_EQ(per_thread[t], std::uint32_t{queues} * depth / threads) << "thread " << t;
          }
          if (split && depth >= 2 && threads >= 2) {
            // Tags 0 and 1 of queue 0 are on different threads.
            std::uint32_t t0 = 99, t1 = 99;
            for (const QueuePart& p : parts)
              if (p.q_id == 0) {
                if (p.tags.holds(0)) t0 = p.thread;
                if (p.tags.holds(1)) t1 = p.thread;
              }
            EXPECT_NE(t0, t1);
          }
        }
}

// One queue split by tag over two I/O threads (PER_IO_DAEMON), each part with its own driver as
// the kernel's per-tag daemons are: both threads serve randomized writes of the same stripes at
// once (4 KiB blocks, each part its own blocks, so the outcome is known), every request is
// committed once by its own part, the array holds every byte and its parity is consistent; the
// device made of both parts (UblkDevice::adopt, each part on its thread) stops once the driver
// aborts the fetches, its counters the sum of both, the second part's requests counted as moved.
TEST(UblkQueueSplit, TwoPartsOnTwoThreadsServeOneQueueAndStopTogether) {
  TestArray array(RaidLevel::kRaid5, 4, 8u << 20, kVdBytes, 16 * 1024);
  ASSERT_NE(array.array, nullptr);
  auto threads = daemon::IoThreads::start(2, 256);
  ASSERT_TRUE(threads.is_ok()) << threads.status().to_string();
  constexpr std::uint16_t kQueueDepth = 2 * kDepth;
  const DataPath path = DataPath::kUserCopy;
  std::vector<std::unique_ptr<UblkQueue>> parts(2);
  std::vector<FakeDriver*> drivers(2);
  for (std::uint32_t p = 0; p < 2; ++p) {
    Status st;
    (*threads)->call(p, [&](IoContext& ctx) {
      const TagSet tags{static_cast<std::uint16_t>(p), 2};
      auto driver = std::make_unique<FakeDriver>(path, ctx, tags);
      drivers[p] = driver.get();
      auto q = UblkQueue::create(ctx, *array.array, array.vd, 0, kQueueDepth, kMaxIo,
                                 std::move(driver), path, tags);
      if (!q.is_ok()) {
        st = q.status();
        return;
      }
      parts[p] = std::move(*q);
      parts[p]->set_away(p != 0);
      parts[p]->start();
    });
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
  constexpr std::uint64_t kBlock = 4096;
  constexpr std::uint64_t kBlocks = 1024;  // the first 4 MiB of the VD, blocks alternating
  std::vector<std::vector<std::byte>> model(kBlocks, std::vector<std::byte>(kBlock, std::byte{0}));
  std::vector<std::uint64_t> delivered(2, 0);
  // Part p writes the blocks b with b % 2 == p (both parts write every stripe), on its thread.
  auto serve = [&](std::uint32_t p) {
    (*threads)->call(p, [&, p](IoContext& ctx) {
      std::mt19937_64 rng(7 + p);
      FakeDriver& d = *drivers[p];
      std::map<std::uint16_t, std::uint64_t> by_tag;  // tag -> block being written
      std::size_t seen = 0;
      for (int round = 0; round < 1500; ++round) {
        for (int burst = static_cast<int>(rng() % 4); burst > 0; --burst) {
          const int tag = d.free_tag();
          if (tag < 0) break;
          std::uint64_t block = 2 * (rng() % (kBlocks / 2)) + p;
          bool busy = false;
          for (const auto& [t, b] : by_tag)
            busy = busy || b == block;
          if (busy) continue;
          FakeDriver::Request r;
          r.desc = make_desc(kOpWrite, block * kBlock, kBlock);
          r.data.resize(kBlock);
          for (auto& b : r.data)
            b = static_cast<std::byte>(rng());
          by_tag[static_cast<std::uint16_t>(tag)] = block;
          model[block] = r.data;  // this part alone writes the block; the last write wins
          d.deliver(static_cast<std::uint16_t>(tag), r);
          ++delivered[p];
        }
        d.pump();
        ctx.poll(ctx.in_flight() > 0 && !d.copies_pending());
        for (; seen < d.commits.size(); ++seen) {
          EXPECT_EQ(d.commits[seen].result, static_cast<std::int32_t>(kBlock));
          EXPECT_EQ(d.commits[seen].tag % 2, p) << "committed by the other part";
          by_tag.erase(d.commits[seen].tag);
        }
      }
      while (!by_tag.empty()) {
        d.pump();
        ctx.poll(ctx.in_flight() > 0 && !d.copies_pending());
        for (; seen < d.commits.size(); ++seen)
          by_tag.erase(d.commits[seen].tag);
      }
    });
  };
  std::thread other([&] { serve(1); });
  serve(0);
  other.join();
  EXPECT_GT(delivered[0], 500u);
  EXPECT_GT(delivered[1], 500u);
  const auto bytes = array.read(0, static_cast<std::uint32_t>(kBlocks * kBlock));
  for (std::uint64_t b = 0; b < kBlocks; ++b)
    ASSERT_EQ(std::memcmp(bytes.data() + b * kBlock, model[b].data(), kBlock), 0) << "block " << b;
  EXPECT_EQ(*array.array->count_inconsistent_stripes(), 0u);

  // The device of both parts: stop() waits for each on its own thread.
  FakeStopCommands commands;
  const ThreadCall call = [&](std::uint32_t t, const std::function<void(IoContext&)>& fn) {
    (*threads)->call(t, fn);
  };
  auto vd = array.array->open_vd(array.vd.id);
  ASSERT_TRUE(vd.is_ok());
  const UblkQueueStats want_first = parts[0]->stats(), want_second = parts[1]->stats();
  auto dev = UblkDevice::adopt(commands, call, *array.array, std::move(*vd), 9, std::move(parts), 2,
                               std::chrono::milliseconds(50), kFlagPerIoDaemon, {0, 1});
  EXPECT_EQ(dev->stop().code(), Errc::kBusy) << "the fetches are still pending";
  for (std::uint32_t p = 0; p < 2; ++p)
    (*threads)->call(p, [&](IoContext&) { EXPECT_EQ(drivers[p]->abort_fetched(), kDepth); });
  EXPECT_TRUE(dev->stop().is_ok());
  EXPECT_TRUE(dev->removed());
  const UblkQueueStats s = dev->stats();
  EXPECT_EQ(s.requests, delivered[0] + delivered[1]);
  EXPECT_EQ(s.commits, s.requests);
  EXPECT_EQ(s.errors, 0u);
  EXPECT_EQ(s.aborted_tags, kQueueDepth);
  EXPECT_EQ(s.spread, delivered[1]) << "the second part's requests, as moved";
  EXPECT_EQ(want_first.requests, delivered[0]);
  EXPECT_EQ(want_second.requests, delivered[1]);
}

std::string mode_name(const ::testing::TestParamInfo<QueueMode>& p) {
  static constexpr const char* kNames[] = {"CopyMode", "UserCopy", "ZeroCopy"};
  std::string level;  // "Raid1", "Raid10"; nothing for RAID5
  if (p.param.level != RaidLevel::kRaid5) {
    level = raid_level_name(p.param.level);
    level[0] = 'R';
  }
  return std::string(kNames[static_cast<int>(p.param.path)]) +
         (p.param.helper ? "WithHelper" : "") + (p.param.part ? "OddTags" : "") + level +
         (p.param.batch ? "Batch" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Modes, UblkQueueTest,
    ::testing::Values(QueueMode{DataPath::kKernelCopy, false},
                      QueueMode{DataPath::kUserCopy, false}, QueueMode{DataPath::kZeroCopy, false},
                      QueueMode{DataPath::kKernelCopy, true}, QueueMode{DataPath::kUserCopy, true},
                      QueueMode{DataPath::kZeroCopy, true},
                      QueueMode{DataPath::kKernelCopy, false, true},
                      QueueMode{DataPath::kUserCopy, false, true},
                      QueueMode{DataPath::kZeroCopy, false, true},
                      QueueMode{DataPath::kZeroCopy, false, false, RaidLevel::kRaid1},
                      QueueMode{DataPath::kZeroCopy, false, false, RaidLevel::kRaid10},
                      QueueMode{DataPath::kUserCopy, false, false, RaidLevel::kRaid10},
                      QueueMode{DataPath::kKernelCopy, false, false, RaidLevel::kRaid5, true},
                      QueueMode{DataPath::kUserCopy, false, false, RaidLevel::kRaid5, true},
                      QueueMode{DataPath::kZeroCopy, false, false, RaidLevel::kRaid5, true},
                      QueueMode{DataPath::kKernelCopy, true, false, RaidLevel::kRaid5, true},
                      QueueMode{DataPath::kZeroCopy, false, false, RaidLevel::kRaid1, true}),
    mode_name);

}  // namespace
}  // namespace graid::testing
