// Crash tests: a crash or a member failure loses no acknowledged write that the RAID level can
// protect.
//
// CrashKillTest: the parent creates an array on tmpfs files and stops it cleanly, then starts
// crash_child (crash_child.cpp, a process of its own: posix_spawn, not a bare fork of this
// multi-threaded runner). The child assembles it and writes at random from one or two threads
// (queue depth 16, 512 B to five stripes, stripe-misaligned, a quarter long enough to write runs
// of whole stripes (queue/stripe_run.cpp), no two requests in flight overlapping, a
// few discards, the odd flush), logging "issued" before each submit and "acked" after each
// completion to a pipe as fixed-size binary records. Its members stagger their writes
// (StaggeredMember), so a kill can fall between the data and parity writes of one stripe. The
// parent SIGKILLs it a seeded 20-300 ms after its first acknowledgement, reassembles the array from
// the files (an unclean stop: the write-intent bitmap drives a re-sync) and checks every sector:
//   - the last write issued to it was acked: the sector holds exactly that write's data;
//   - it was issued but not acked: that write's data, or the write's before it (zeros if none).
// Then parity (or every mirror copy) must match its data, and, with members failed afterwards
// (each member for RAID1/5/10, pairs for RAID6), degraded reads must return data obeying the same
// rule: that is what catches a write hole the re-sync missed. The seed fixes the extents and the
// kill delay; how far the child got by then is up to the scheduler.
//
// PowerLossTest: in process, members behind FaultyMember. Random writes, discards and flushes
// from one queue; a write acked before an acked flush was issued is durable. With nothing in
// flight, every member loses power (PowerLossPolicy::kTearRandom: each unflushed member write
// kept, undone or torn, independently per member), the Array is dropped without stop() and
// reassembled. Every sector must hold the data of its newest durable write (zeros if none) or of
// a later write to it; parity must be consistent after the re-sync, and degraded reads must obey
// the same rule. A second round writes on the recovered array and cuts the power again. Fully
// deterministic per seed.
//
// GRAID_CRASH_SEEDS=<n> runs n seeds per shape instead of 3 (stress runs); failures print the seed.
//
// Writes are confined to a seeded window of about half the array, and the bitmap regions are the
// smallest allowed (64 KiB of member space), so the re-sync covers only part of the array: a
// region the bitmap failed to mark shows up as an inconsistent stripe or a bad degraded read.
//
// Sector contents are deterministic from (write id, array sector): the first two 64-bit words are
// the id and the sector index, so a bad sector names the write it came from.
#include <fcntl.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <unordered_map>

#include "array_harness.h"
#include "crash_support.h"

namespace graid::testing {
namespace {

int seeds_per_shape() {
  const char* n = std::getenv("GRAID_CRASH_SEEDS");
  return n != nullptr ? std::max(1, std::atoi(n)) : 3;
}

std::string shape_name(const ::testing::TestParamInfo<Shape>& info) {
  const Shape& s = info.param;
  return fmt::format("{}_n{}_strip{}k_t{}", raid_level_name(s.level), s.members, s.strip / 1024,
                     s.threads);
}

std::uint64_t shape_seed(const Shape& s, std::uint64_t salt, int index) {
  return salt ^ (static_cast<std::uint64_t>(s.level) << 40) ^ (std::uint64_t{s.members} << 32) ^
         (std::uint64_t{s.strip} << 8) ^ (std::uint64_t{s.threads} << 4) ^
         static_cast<std::uint64_t>(index);
}

// ---- What each sector may hold -----------------------------------------------------------------

struct WriteInfo {
  std::uint64_t offset = 0;
  std::uint32_t len = 0;
  bool discard = false;  // a discard: its sectors read as zeros
  bool acked = false;
  std::uint64_t ack_seq = 0;  // power-loss test: order of acknowledgement (1, 2, ...)
  bool durable = false;       // power-loss test
};
using Writes = std::unordered_map<std::uint64_t, WriteInfo>;

// Per array sector, the ids (kZeros for zeros) whose data it may hold.
using Allowed = std::vector<std::vector<std::uint64_t>>;

// What a sector holds after write `id` (kZeros for none or a discard).
std::uint64_t content(std::uint64_t id, const Writes& writes) {
  return id == kZeros || writes.at(id).discard ? kZeros : id;
}

std::string describe(std::uint64_t id, const Writes& writes) {
  if (id == kZeros) return "zeros";
  if (id == kGarbage) return "garbage (no write's data)";
  auto it = writes.find(id);
  if (it == writes.end()) return fmt::format("write {:#x} (never issued)", id);
  const WriteInfo& w = it->second;
  return fmt::format("{} {:#x} [{}, +{}){}{}", w.discard ? "discard" : "write", id, w.offset, w.len,
                     w.acked ? " acked" : " not acked", w.durable ? " durable" : "");
}

// Checks an image of the whole array against `allowed`; names up to 8 bad sectors.
::testing::AssertionResult check_image(const std::vector<std::byte>& image, const Allowed& allowed,
                                       const Writes& writes, std::string_view when) {
  std::string bad;
  std::uint64_t bad_count = 0;
  for (std::uint64_t s = 0; s < allowed.size(); ++s) {
    const std::uint64_t got = identify(image.data() + s * kSector, s);
    const auto& ok = allowed[s];
    if (std::find(ok.begin(), ok.end(), got) != ok.end()) continue;
    if (++bad_count > 8) continue;
    std::string want;
    for (std::uint64_t id : ok)
      want += fmt::format("{}{}", want.empty() ? "" : " or ", describe(id, writes));
    bad += fmt::format("\n  sector {} (array byte {}): holds {}; allowed: {}", s, s * kSector,
                       describe(got, writes), want);
  }
  if (bad_count == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << when << ": " << bad_count << " of " << allowed.size() << " sectors wrong" << bad;
}

// Reads the whole array through a fresh queue on this thread.
Status read_array(Array& array, std::vector<std::byte>& out) {
  auto ctx = IoContext::create(64);
  if (!ctx) return ctx.status();
  auto queue = array.attach(**ctx);
  if (!queue) return queue.status();
  constexpr std::uint32_t kChunk = 256 * 1024;
  auto buf = AlignedBuffer::allocate(kChunk, 4096);
  if (!buf) return buf.status();
  out.assign(array.capacity(), std::byte{0});
  for (std::uint64_t off = 0; off < array.capacity(); off += kChunk) {
    const auto len =
        static_cast<std::uint32_t>(std::min<std::uint64_t>(kChunk, array.capacity() - off));
    GRAID_RETURN_IF_ERROR(run_one(**queue, IoKind::kRead, off, len, buf->data()));
    std::memcpy(out.data() + off, buf->data(), len);
  }
  return Status::ok();
}

// single-redundancy levels (RAID10: its mirror survives), n distinct pairs for RAID6.
std::vector<std::vector<std::uint32_t>> failure_sets(const Shape& s, std::uint64_t seed) {
  std::vector<std::vector<std::uint32_t>> sets;
  const std::uint32_t n = s.members;
  for (std::uint32_t m = 0; m < n; ++m) {
    if (s.level != RaidLevel::kRaid6) {
      sets.push_back({m});
      continue;
    }
    std::uint32_t other = (m + 1 + static_cast<std::uint32_t>((seed >> 7) % (n - 1))) % n;
    std::vector<std::uint32_t> pair{std::min(m, other), std::max(m, other)};
    if (std::find(sets.begin(), sets.end(), pair) == sets.end()) sets.push_back(pair);
  }
  return sets;
}

// Copies the members of the recovered, idle array, assembles the copy, fails `fail` with
// Array::fail_member and checks every sector read through degraded reads. The copy was taken from
// an open array, so its assembly re-syncs what its bitmap marks: nothing, as the recovery cleared
// the bitmap after its own re-sync.
void check_degraded(const Shape& s, const std::vector<std::string>& paths, ParityBackend* parity,
                    const std::vector<std::uint32_t>& fail, const Allowed& allowed,
                    const Writes& writes) {
  const std::string what = fmt::format("degraded, members {} failed", fmt::join(fail, "+"));
  SCOPED_TRACE(what);
  TempDir copy;
  ASSERT_FALSE(copy.path().empty());
  std::vector<std::string> copies;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    copies.push_back(copy.path() + "/member-" + std::to_string(i) + ".img");
    std::error_code ec;
    std::filesystem::copy_file(paths[i], copies.back(), ec);
    ASSERT_FALSE(ec) << "copy " << paths[i] << ": " << ec.message();
  }
  auto devs = open_plain(copies, /*create=*/false);
  ASSERT_TRUE(devs.is_ok()) << devs.status().to_string();
  ArrayOptions options;
  options.parity = parity;
  AssembleReport report;
  auto array = Array::assemble(std::move(*devs), options, {}, &report);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  EXPECT_TRUE(report.failed_members.empty());
  for (std::uint32_t m : fail) {
    Status st = (*array)->fail_member(m, "crash test");
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
  ASSERT_EQ((*array)->health(), ArrayHealth::kDegraded) << raid_level_name(s.level);
  std::vector<std::byte> image;
  Status st = read_array(**array, image);
  ASSERT_TRUE(st.is_ok()) << what << ": " << st.to_string();
  EXPECT_TRUE(check_image(image, allowed, writes, what));
}

// Assembles the members after the crash and checks: an unclean stop was seen, every sector obeys
// `allowed`, parity is consistent; then degraded reads on copies of the members. Hands back the
// recovered array (open) and the image read from it when asked.
void check_recovery(const Shape& s, std::uint64_t seed,
                    Result<std::vector<std::unique_ptr<MemberDevice>>> devs, ParityBackend* parity,
                    const std::vector<std::string>& paths, const Allowed& allowed,
                    const Writes& writes, std::unique_ptr<Array>* array_out = nullptr,
                    std::vector<std::byte>* image_out = nullptr) {
  ASSERT_TRUE(devs.is_ok()) << devs.status().to_string();
  ArrayOptions options;
  options.parity = parity;
  AssembleReport report;
  auto assembled = Array::assemble(std::move(*devs), options, {}, &report);
  ASSERT_TRUE(assembled.is_ok()) << assembled.status().to_string();
  std::unique_ptr<Array> array = std::move(*assembled);
  SCOPED_TRACE(fmt::format("re-synced {} bytes per member", report.resynced_bytes));
  EXPECT_FALSE(report.was_clean) << "the crash left the array marked clean";
  EXPECT_TRUE(report.failed_members.empty());
  EXPECT_TRUE(report.stale_members.empty());
  ASSERT_EQ(array->health(), ArrayHealth::kOptimal);
  ASSERT_EQ(array->capacity() / kSector, allowed.size());

  std::vector<std::byte> image;
  Status st = read_array(*array, image);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_TRUE(check_image(image, allowed, writes, "after reassembly"));
  auto bad = array->count_inconsistent_stripes();
  ASSERT_TRUE(bad.is_ok()) << bad.status().to_string();
  EXPECT_EQ(*bad, 0u) << "stripes whose parity (or mirror copies) the re-sync left inconsistent";
  if (::testing::Test::HasFailure()) return;  // degraded reads would only repeat the news

  for (const auto& fail : failure_sets(s, seed)) {
    check_degraded(s, paths, parity, fail, allowed, writes);
    if (::testing::Test::HasFailure()) return;
  }
  if (image_out != nullptr) *image_out = std::move(image);
  if (array_out != nullptr) *array_out = std::move(array);
}

struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// Kills and reaps the child on every path out of the test.
struct Child {
  pid_t pid = -1;
  int status = 0;
  ~Child() { kill_and_wait(); }
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  void kill_and_wait() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    pid = -1;
  }
};

// Reads what the pipe holds into `log` until `deadline` or end of file. Returns false at EOF.
bool drain(int fd, std::string& log, std::chrono::steady_clock::time_point deadline,
           std::size_t until_size = 0) {
  char buf[64 * 1024];
  for (;;) {
    if (until_size != 0 && log.size() >= until_size) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return true;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;  // timeout: the loop head sees the deadline
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    log.append(buf, static_cast<std::size_t>(n));
  }
}

class CrashKillTest : public ::testing::TestWithParam<Shape> {
 protected:
  void run_seed(std::uint64_t seed);
};

void CrashKillTest::run_seed(std::uint64_t seed) {
  const Shape s = GetParam();
  std::mt19937_64 rng(seed);
  auto parity = make_parity_backend("cpu");
  ASSERT_TRUE(parity.is_ok()) << parity.status().to_string();
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::vector<std::string> paths;
  for (std::uint32_t i = 0; i < s.members; ++i)
    paths.push_back(dir.path() + "/member-" + std::to_string(i) + ".img");

  // Create and stop cleanly in the parent; the child is a fresh process (crash_child.cpp).
  std::uint64_t capacity = 0;
  Layout layout;
  {
    auto devs = open_plain(paths, /*create=*/true);
    ASSERT_TRUE(devs.is_ok()) << devs.status().to_string();
    ArrayOptions options;
    options.parity = parity->get();
    auto array = Array::create(std::move(*devs), create_options(s), options);
    ASSERT_TRUE(array.is_ok()) << array.status().to_string();
    capacity = (*array)->capacity();
    layout = Layout::make((*array)->geometry(), capacity, s.threads, rng);
    Status st = (*array)->stop();
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
  const auto kill_after = std::chrono::milliseconds(20 + rng() % 281);
  SCOPED_TRACE(fmt::format("kill {} ms after the first ack, writes in [{}, +{})",
                           kill_after.count(), layout.start, layout.units * layout.unit));

  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0) << std::strerror(errno);
  Fd read_end(fds[0]), write_end(fds[1]);
  std::vector<std::string> args = {GRAID_CRASH_CHILD,
                                   std::to_string(static_cast<std::uint32_t>(s.level)),
                                   std::to_string(s.members),
                                   std::to_string(s.strip),
                                   std::to_string(s.threads),
                                   std::to_string(rng()),
                                   std::to_string(layout.start),
                                   std::to_string(layout.unit),
                                   std::to_string(layout.units),
                                   std::to_string(layout.max_sectors)};
  args.insert(args.end(), paths.begin(), paths.end());
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  ASSERT_EQ(::posix_spawn_file_actions_init(&actions), 0);
  // dup2 onto the child's fixed descriptor clears O_CLOEXEC there; nothing else is inherited.
  ASSERT_EQ(::posix_spawn_file_actions_adddup2(&actions, write_end.fd, kChildPipeFd), 0);
  Child child;
  const int spawned = ::posix_spawn(&child.pid, argv[0], &actions, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ASSERT_EQ(spawned, 0) << "posix_spawn " << argv[0] << ": " << std::strerror(spawned);
  write_end.reset();

  std::string log;
  const auto start = std::chrono::steady_clock::now();
  drain(read_end.fd, log, start + std::chrono::seconds(30), sizeof(Record));
  ASSERT_GE(log.size(), sizeof(Record)) << "the child never reported ready";
  Record first;
  std::memcpy(&first, log.data(), sizeof first);
  if (first.kind == RecordKind::kError) {
    FAIL() << "child failed " << child_error_name(first.len);
  }
  ASSERT_EQ(first.kind, RecordKind::kReady);
  // The delay counts from the first acknowledgement: a freshly started child (its first bitmap
  // writes start the metadata workers) on a loaded machine can take longer than the shortest
  // delays to complete anything, and a kill before any ack checks nothing.
  const auto ack_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::size_t scanned = sizeof(Record);
  bool acked_one = false;
  while (!acked_one && std::chrono::steady_clock::now() < ack_deadline) {
    if (!drain(read_end.fd, log, std::chrono::steady_clock::now() + std::chrono::milliseconds(5)))
      break;  // the child is gone: the checks below say why
    for (; scanned + sizeof(Record) <= log.size() && !acked_one; scanned += sizeof(Record)) {
      Record r;
      std::memcpy(&r, log.data() + scanned, sizeof r);
      acked_one = r.kind == RecordKind::kAcked || r.kind == RecordKind::kError;
    }
  }
  drain(read_end.fd, log, std::chrono::steady_clock::now() + kill_after);
  child.kill_and_wait();
  drain(read_end.fd, log, std::chrono::steady_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(WIFSIGNALED(child.status) && WTERMSIG(child.status) == SIGKILL)
      << "the child ended on its own, status " << child.status;
  ASSERT_EQ(log.size() % sizeof(Record), 0u) << "a torn record in the pipe";

  // Replay the log: per sector, the last write issued to it and the one before.
  const std::uint64_t sectors = capacity / kSector;
  std::vector<std::uint64_t> last(sectors, kZeros), prev(sectors, kZeros);
  Writes writes;
  std::uint64_t issued = 0, acked = 0, flushes = 0;
  for (std::size_t at = 0; at < log.size(); at += sizeof(Record)) {
    Record r;
    std::memcpy(&r, log.data() + at, sizeof r);
    switch (r.kind) {
      case RecordKind::kReady:
      case RecordKind::kFlushIssued:
        break;
      case RecordKind::kFlushAcked:
        ++flushes;
        break;
      case RecordKind::kIssued:
      case RecordKind::kDiscardIssued: {
        ASSERT_TRUE(r.offset % kSector == 0 && r.len % kSector == 0 && r.len > 0 &&
                    r.offset + r.len <= capacity)
            << "bad record [" << r.offset << ", +" << r.len << ")";
        WriteInfo w{r.offset, r.len};
        w.discard = r.kind == RecordKind::kDiscardIssued;
        ASSERT_TRUE(writes.emplace(r.id, w).second) << "write id " << r.id << " issued twice";
        ++issued;
        for (std::uint64_t sec = r.offset / kSector; sec < (r.offset + r.len) / kSector; ++sec) {
          ASSERT_TRUE(last[sec] == kZeros || writes.at(last[sec]).acked)
              << "test bug: writes " << last[sec] << " and " << r.id << " overlapped in flight";
          prev[sec] = last[sec];
          last[sec] = r.id;
        }
        break;
      }
      case RecordKind::kAcked: {
        auto it = writes.find(r.id);
        ASSERT_NE(it, writes.end()) << "write " << r.id << " acked but never issued";
        it->second.acked = true;
        ++acked;
        break;
      }
      case RecordKind::kError:
        FAIL() << "child failed " << child_error_name(r.len) << " (id " << r.id << ")";
      default:
        FAIL() << "unknown record kind " << static_cast<std::uint32_t>(r.kind);
    }
  }
  SCOPED_TRACE(fmt::format("{} writes issued, {} acked, {} flushes acked", issued, acked, flushes));
  ASSERT_GT(acked, 0u) << "the child acked no write before it was killed";

  Allowed allowed(sectors);
  for (std::uint64_t sec = 0; sec < sectors; ++sec) {
    allowed[sec].push_back(content(last[sec], writes));
    if (last[sec] != kZeros && !writes.at(last[sec]).acked) {
      allowed[sec].push_back(content(prev[sec], writes));
    }
  }
  check_recovery(s, seed, open_plain(paths, /*create=*/false), parity->get(), paths, allowed,
                 writes);
}

TEST_P(CrashKillTest, SigkillMidWriteLosesNoAcknowledgedWrite) {
  for (int i = 0; i < seeds_per_shape(); ++i) {
    const std::uint64_t seed = shape_seed(GetParam(), 0x510e527fade682d1ull, i);
    SCOPED_TRACE(fmt::format("seed {:#x}", seed));
    run_seed(seed);
    if (HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Levels, CrashKillTest,
    ::testing::Values(Shape{RaidLevel::kRaid5, 4, 4096, 2}, Shape{RaidLevel::kRaid5, 5, 16384, 1},
                      Shape{RaidLevel::kRaid6, 5, 4096, 1}, Shape{RaidLevel::kRaid6, 6, 16384, 2},
                      Shape{RaidLevel::kRaid1, 2, 4096, 2}, Shape{RaidLevel::kRaid10, 4, 16384, 2}),
    shape_name);

// ---- The power-loss test -----------------------------------------------------------------------

class PowerLossTest : public ::testing::TestWithParam<Shape> {
 protected:
  static constexpr std::uint64_t kRequestsPerRound = 1500;
  // Round 2 writes on the very array round 1's assembly recovered: the bitmap that assembly
  // loaded, re-synced from and cleared must still mark (on disk) the regions written next.
  static constexpr int kRounds = 2;
  void run_seed(std::uint64_t seed);
};

void PowerLossTest::run_seed(std::uint64_t seed) {
  const Shape s = GetParam();
  std::mt19937_64 rng(seed);
  auto parity = make_parity_backend("cpu");
  ASSERT_TRUE(parity.is_ok()) << parity.status().to_string();
  ArrayOptions options;
  options.parity = parity->get();
  // Every flush runs a bitmap clearing cycle: power loss must not lose what they cleared.
  options.bitmap_clear_interval = std::chrono::milliseconds(0);
  ArrayFiles files;
  ASSERT_FALSE(files.dir.path().empty());

  Writes writes;  // every write and discard of every round, by id
  std::uint64_t next_id = 0;
  std::vector<std::uint64_t> baseline;  // per sector, what it held after the last recovery
  std::unique_ptr<Array> array;         // round 2 goes on with the array round 1 recovered
  for (int round = 1; round <= kRounds; ++round) {
    SCOPED_TRACE(fmt::format("round {}", round));
    if (round == 1) {
      auto devs = files.open(s.members, kMemberBytes, /*create=*/true);
      ASSERT_TRUE(devs.is_ok()) << devs.status().to_string();
      auto created = Array::create(std::move(*devs), create_options(s), options);
      ASSERT_TRUE(created.is_ok()) << created.status().to_string();
      array = std::move(*created);
      baseline.assign(array->capacity() / kSector, kZeros);
    }
    ASSERT_NE(array, nullptr);
    const std::uint64_t capacity = array->capacity();
    const std::uint64_t sectors = capacity / kSector;
    ASSERT_EQ(baseline.size(), sectors);
    const Layout layout = Layout::make(array->geometry(), capacity, 1, rng);

    auto ctx = IoContext::create(256);
    ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
    auto queue = array->attach(**ctx);
    ASSERT_TRUE(queue.is_ok()) << queue.status().to_string();

    struct Slot final : ArrayIo {
      bool busy = false;
      bool done = false;
      std::uint64_t id = 0;
      std::uint64_t ack_seq = 0;  // writes: order of acknowledgement; flushes: acks before issue
      std::uint64_t* acks = nullptr;
      Status status;
      AlignedBuffer data;
      void on_complete(Status st) override {
        status = std::move(st);
        done = true;
        if (kind != IoKind::kFlush && status.is_ok()) ack_seq = ++*acks;
      }
    };
    std::uint64_t acks = 0;
    std::uint64_t durable_upto = 0;  // writes with ack_seq <= this are durable
    std::vector<Slot> slots(kQueueDepth);
    for (Slot& slot : slots) {
      auto buf = AlignedBuffer::allocate(std::size_t{layout.max_sectors} * kSector, 4096);
      ASSERT_TRUE(buf.is_ok());
      slot.data = std::move(*buf);
      slot.acks = &acks;
    }
    std::vector<std::vector<std::uint64_t>> history(sectors);  // this round's ids, oldest first
    std::uint64_t requests = 0, flushes = 0;
    const std::uint64_t flush_percent = 2 + rng() % 5;
    std::string error;  // the first failed request; the loop still drains what is in flight
    while ((requests < kRequestsPerRound && error.empty()) || (*queue)->in_flight() > 0) {
      for (Slot& slot : slots) {
        if (slot.busy || requests >= kRequestsPerRound || !error.empty()) continue;
        const std::uint64_t dice = rng() % 100;
        slot.done = false;
        slot.ack_seq = 0;
        if (dice < flush_percent) {
          slot.kind = IoKind::kFlush;
          slot.offset = 0;
          slot.len = 0;
          slot.buf = nullptr;
          slot.ack_seq = acks;
        } else {
          Extent e;
          bool found = false;
          for (int attempt = 0; attempt < 8 && !found; ++attempt) {
            e = layout.pick(rng, 0);
            found = std::none_of(slots.begin(), slots.end(), [&](const Slot& o) {
              return o.busy && o.kind != IoKind::kFlush && overlaps(e, Extent{o.offset, o.len});
            });
          }
          if (!found) break;
          slot.offset = e.offset;
          slot.len = e.len;
          WriteInfo w{e.offset, e.len};
          w.discard = dice >= 95;
          slot.kind = w.discard ? IoKind::kDiscard : IoKind::kWrite;
          slot.buf = w.discard ? nullptr : slot.data.data();
          slot.id = ++next_id;
          if (!w.discard) fill_write(slot.buf, slot.id, e.offset, e.len);
          writes.emplace(slot.id, w);
          for (std::uint64_t sec = e.offset / kSector; sec < (e.offset + e.len) / kSector; ++sec)
            history[sec].push_back(slot.id);
        }
        ++requests;
        slot.busy = true;
        (*queue)->submit(slot);
      }
      (*ctx)->poll(true);
      for (Slot& slot : slots) {
        if (!slot.busy || !slot.done) continue;
        slot.busy = false;
        if (!slot.status.is_ok()) {
          if (error.empty()) {
            error = fmt::format("{} [{}, +{}): {}",
                                slot.kind == IoKind::kFlush ? "flush" : "write or discard",
                                slot.offset, slot.len, slot.status.to_string());
          }
          continue;
        }
        if (slot.kind == IoKind::kFlush) {
          durable_upto = std::max(durable_upto, slot.ack_seq);
          ++flushes;
        } else {
          WriteInfo& w = writes.at(slot.id);
          w.acked = true;
          w.ack_seq = slot.ack_seq;
        }
      }
    }
    ASSERT_TRUE(error.empty()) << error;
    if (s.level == RaidLevel::kRaid5 || s.level == RaidLevel::kRaid6) {
      // The power goes with runs of whole stripes among the unflushed writes.
      EXPECT_GT((*queue)->stats().stripe_runs, 0u);
    }
    std::uint64_t durable = 0;
    for (const auto& h : history) {
      for (std::uint64_t id : h) {
        WriteInfo& w = writes.at(id);
        if (w.durable || !w.acked || w.ack_seq > durable_upto) continue;
        w.durable = true;
        ++durable;
      }
    }

    // The power cut, with nothing in flight: each member independently keeps, loses or tears
    // each write not covered by a completed flush.
    std::uint64_t unflushed = 0, kept = 0, torn = 0;
    for (FaultyMember* m : files.faulty) {
      auto outcomes = m->power_loss(rng, PowerLossPolicy::kTearRandom);
      ASSERT_TRUE(outcomes.is_ok()) << outcomes.status().to_string();
      for (const PowerLossOutcome& o : *outcomes) {
        ++unflushed;
        kept += o.kept == o.len;
        torn += o.kept != 0 && o.kept != o.len;
      }
    }
    SCOPED_TRACE(fmt::format(
        "{} requests ({} durable writes and discards, {} flushes); power loss: {} unflushed "
        "member writes, {} kept, {} torn",
        requests, durable, flushes, unflushed, kept, torn));
    queue->reset();
    ctx->reset();
    array.reset();  // no stop(): the power is gone

    // Each sector: its newest durable write (or what it held before the round), or any later one.
    Allowed allowed(sectors);
    for (std::uint64_t sec = 0; sec < sectors; ++sec) {
      const auto& h = history[sec];
      std::size_t from = h.size();
      for (std::size_t i = h.size(); i-- > 0;) {
        if (writes.at(h[i]).durable) {
          from = i;
          break;
        }
      }
      if (from == h.size()) {
        allowed[sec].push_back(baseline[sec]);
        from = 0;
      }
      for (std::size_t i = from; i < h.size(); ++i)
        allowed[sec].push_back(content(h[i], writes));
    }
    std::vector<std::byte> image;
    check_recovery(s, seed, files.open(s.members, kMemberBytes, /*create=*/false), parity->get(),
                   files.paths, allowed, writes, &array, &image);
    if (HasFailure()) return;
    for (std::uint64_t sec = 0; sec < sectors; ++sec)
      baseline[sec] = identify(image.data() + sec * kSector, sec);
  }
}

TEST_P(PowerLossTest, UnflushedWritesLostOrTornDurableWritesSurvive) {
  for (int i = 0; i < seeds_per_shape(); ++i) {
    const std::uint64_t seed = shape_seed(GetParam(), 0x9b05688c2b3e6c1full, i);
    SCOPED_TRACE(fmt::format("seed {:#x}", seed));
    run_seed(seed);
    if (HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Levels, PowerLossTest,
    ::testing::Values(Shape{RaidLevel::kRaid5, 4, 4096, 1}, Shape{RaidLevel::kRaid5, 5, 16384, 1},
                      Shape{RaidLevel::kRaid6, 5, 4096, 1}, Shape{RaidLevel::kRaid6, 6, 16384, 1},
                      Shape{RaidLevel::kRaid1, 2, 4096, 1}, Shape{RaidLevel::kRaid10, 4, 16384, 1}),
    shape_name);

}  // namespace
}  // namespace graid::testing
