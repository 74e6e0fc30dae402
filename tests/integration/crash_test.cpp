// Crash tests: a crash or a member failure loses no acknowledged write that the RAID level can
// protect.
//
// CrashKillTest: the parent creates an array on tmpfs files and stops it cleanly, then forks. The
// child assembles it and writes at random from one or two threads (queue depth 16, 512 B to 3
// strips, stripe-misaligned, no two requests in flight overlapping, a few discards, the odd
// flush), logging "issued" before each submit and "acked" after each completion to a pipe as
// fixed-size binary records. Its members stagger their writes (StaggeredMember), so a kill can
// fall between the data and parity writes of one stripe. The parent SIGKILLs it after a seeded
// 20-300 ms, reassembles the array from the files (an unclean stop: the write-intent bitmap drives
// a re-sync) and checks every sector:
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

namespace graid::testing {
namespace {

constexpr std::uint32_t kSector = 512;
constexpr std::uint64_t kDataOffset = 1u << 20;  // graid's metadata area on every member
constexpr std::uint64_t kMemberDataBytes = 1u << 20;
constexpr std::uint64_t kMemberBytes = kDataOffset + kMemberDataBytes;
constexpr std::uint64_t kRegionBytes = 64 * 1024;  // the smallest bitmap region
constexpr std::uint32_t kQueueDepth = 16;
int seeds_per_shape() {
  const char* n = std::getenv("GRAID_CRASH_SEEDS");
  return n != nullptr ? std::max(1, std::atoi(n)) : 3;
}

struct Shape {
  RaidLevel level;
  std::uint32_t members;
  std::uint32_t strip;
  std::uint32_t threads;  // writer threads (kill test; the power-loss test uses one)
};

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

// ---- Sector contents ---------------------------------------------------------------------------

std::uint64_t mix64(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr std::uint64_t kZeros = 0;        // "write id" of never-written sectors
constexpr std::uint64_t kGarbage = ~0ull;  // a sector that is no write's data

void fill_sector(std::byte* dst, std::uint64_t id, std::uint64_t sector) {
  std::array<std::uint64_t, kSector / 8> w;
  w[0] = id;
  w[1] = sector;
  const std::uint64_t base = mix64(id ^ mix64(sector));
  for (std::size_t i = 2; i < w.size(); ++i)
    w[i] = mix64(base + i);
  std::memcpy(dst, w.data(), kSector);
}

void fill_write(std::byte* dst, std::uint64_t id, std::uint64_t offset, std::uint32_t len) {
  for (std::uint32_t b = 0; b < len; b += kSector)
    fill_sector(dst + b, id, (offset + b) / kSector);
}

// Which write's data `src` (array sector `sector`) holds: an id, kZeros or kGarbage.
std::uint64_t identify(const std::byte* src, std::uint64_t sector) {
  if (std::all_of(src, src + kSector, [](std::byte b) { return b == std::byte{0}; })) {
    return kZeros;
  }
  std::uint64_t id = 0, at = 0;
  std::memcpy(&id, src, 8);
  std::memcpy(&at, src + 8, 8);
  if (at != sector || id == kZeros || id == kGarbage) return kGarbage;
  std::array<std::byte, kSector> want;
  fill_sector(want.data(), id, sector);
  return std::memcmp(want.data(), src, kSector) == 0 ? id : kGarbage;
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

// ---- Members and arrays ------------------------------------------------------------------------

Result<std::vector<std::unique_ptr<MemberDevice>>> open_plain(const std::vector<std::string>& paths,
                                                              bool create) {
  std::vector<std::unique_ptr<MemberDevice>> out;
  for (const std::string& p : paths) {
    OpenOptions o;
    o.create = create;
    o.create_size = kMemberBytes;
    auto dev = open_member(p, o);
    if (!dev) return dev.status();
    out.push_back(std::move(*dev));
  }
  return out;
}

// A member whose asynchronous writes reach the device zero to two polls late, at random. Writes
// to real drives complete at different times, so a crash often leaves a stripe with new data on
// one member and old parity on another; on tmpfs the member writes of a stripe all go to the
// kernel in one io_uring submission, which SIGKILL all but never splits. Staggering them puts
// parity and data writes of one stripe into different submissions, with user-space work between
// them where the kill can land. Completion still comes through the inner device on the
// submitting thread, never inline, as MemberDevice requires.
class StaggeredMember final : public MemberDevice {
 public:
  StaggeredMember(std::unique_ptr<MemberDevice> inner, std::uint64_t seed)
      : inner_(std::move(inner)), seed_(seed) {}

  const std::string& path() const noexcept override { return inner_->path(); }
  std::uint64_t size() const noexcept override { return inner_->size(); }
  bool direct_io() const noexcept override { return inner_->direct_io(); }
  Status read_sync(std::uint64_t offset, std::span<std::byte> buf) override {
    return inner_->read_sync(offset, buf);
  }
  Status write_sync(std::uint64_t offset, std::span<const std::byte> buf) override {
    return inner_->write_sync(offset, buf);
  }
  Status flush_sync() override { return inner_->flush_sync(); }

  void submit(IoContext& ctx, MemberRequest& req) override {
    const std::uint64_t r = mix64(seed_ + draws_.fetch_add(1, std::memory_order_relaxed));
    const int polls = static_cast<int>(r % 4) - 1;  // -1 and 0: now; 1 or 2 polls late
    if (req.op != MemberOp::kWrite || polls <= 0) {
      inner_->submit(ctx, req);
      return;
    }
    (new Delayed(*inner_, ctx, req, polls))->queue();
  }

 private:
  // Owns itself from queue() until it hands the request to the inner device.
  class Delayed final : public Task {
   public:
    Delayed(MemberDevice& inner, IoContext& ctx, MemberRequest& req, int polls)
        : inner_(inner), ctx_(ctx), req_(req), polls_(polls) {}
    void queue() { ctx_.defer(*this); }
    void run() override {
      if (--polls_ > 0) return queue();
      inner_.submit(ctx_, req_);
      delete this;
    }

   private:
    MemberDevice& inner_;
    IoContext& ctx_;
    MemberRequest& req_;
    int polls_;
  };

  std::unique_ptr<MemberDevice> inner_;
  std::uint64_t seed_;
  std::atomic<std::uint64_t> draws_{0};
};

CreateOptions create_options(const Shape& s) {
  CreateOptions c;
  c.level = s.level;
  c.strip_bytes = s.strip;
  c.name = "crash";
  c.bitmap_region_bytes = kRegionBytes;
  return c;
}

// The members to fail together for the degraded reads after recovery: every member alone for
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

// ---- Choosing extents --------------------------------------------------------------------------

struct Extent {
  std::uint64_t offset = 0;
  std::uint32_t len = 0;
};

bool overlaps(const Extent& a, const Extent& b) {
  return a.offset < b.offset + b.len && b.offset < a.offset + a.len;
}

// Where the writers write: a window of about half the array cut into units of at least a stripe
// and a half; unit u belongs to thread u % threads, so threads write different sectors of the
// same stripes and never the same sector.
struct Layout {
  std::uint64_t start = 0;
  std::uint64_t unit = 0;
  std::uint64_t units = 0;
  std::uint32_t threads = 1;
  std::uint32_t max_sectors = 0;  // 3 strips

  static Layout make(const Geometry& g, std::uint64_t capacity, std::uint32_t threads,
                     std::mt19937_64& rng) {
    Layout l;
    l.threads = threads;
    l.unit = std::max<std::uint64_t>(g.stripe_data_bytes() * 3 / 2, 4ull * g.strip_bytes());
    l.units = std::max<std::uint64_t>(capacity / 2 / l.unit, threads);
    const std::uint64_t slack = (capacity - l.units * l.unit) / kSector;
    l.start = (rng() % (slack + 1)) * kSector;
    l.max_sectors = 3 * g.strip_bytes() / kSector;
    return l;
  }

  Extent pick(std::mt19937_64& rng, std::uint32_t thread) const {
    const std::uint64_t mine = (units - thread + threads - 1) / threads;
    const std::uint64_t u = thread + threads * (rng() % mine);
    const std::uint64_t unit_sectors = unit / kSector;
    const std::uint64_t first = rng() % unit_sectors;
    const std::uint64_t room = std::min<std::uint64_t>(unit_sectors - first, max_sectors);
    // Half small writes (the read-modify-write path), half up to three strips.
    const std::uint64_t sectors =
        1 + ((rng() & 1) != 0 ? rng() % std::min<std::uint64_t>(room, 16) : rng() % room);
    return Extent{start + u * unit + first * kSector,
                  static_cast<std::uint32_t>(sectors * kSector)};
  }
};

// ---- The kill test -----------------------------------------------------------------------------

enum class RecordKind : std::uint32_t {
  kReady = 1,      // the child assembled the array and attached its queues
  kIssued,         // a write is about to be submitted: id, offset, len
  kDiscardIssued,  // a discard is about to be submitted: id, offset, len
  kAcked,          // a write or discard completed successfully: id
  kFlushIssued,    // id
  kFlushAcked,     // id
  kError,          // something failed in the child: id (0 if none), len = what
};

struct Record {
  RecordKind kind;
  std::uint32_t len;
  std::uint64_t id;
  std::uint64_t offset;
};
static_assert(sizeof(Record) == 24 && sizeof(Record) <= PIPE_BUF, "one atomic pipe write each");

// What failed in the child (Record::len of kError).
enum ChildError : std::uint32_t {
  kChildParity = 1,
  kChildOpen,
  kChildAssemble,
  kChildContext,
  kChildAttach,
  kChildBuffer,
  kChildWrite,
  kChildFlush,
  kChildPipe,
};

std::string_view child_error_name(std::uint32_t e) {
  switch (e) {
    case kChildParity:
      return "making the parity backend";
    case kChildOpen:
      return "opening the members";
    case kChildAssemble:
      return "assembling the array";
    case kChildContext:
      return "creating an IoContext";
    case kChildAttach:
      return "attaching a queue";
    case kChildBuffer:
      return "allocating a buffer";
    case kChildWrite:
      return "a write or discard failed";
    case kChildFlush:
      return "a flush failed";
    case kChildPipe:
      return "writing the pipe";
    default:
      return "unknown";
  }
}

void send(int fd, const Record& r) {
  // Pipe writes of at most PIPE_BUF bytes are atomic: records of two threads never interleave.
  ssize_t n;
  do {
    n = ::write(fd, &r, sizeof r);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof r)) _exit(5);
}

[[noreturn]] void child_fail(int fd, ChildError what, std::uint64_t id = 0) {
  send(fd, Record{RecordKind::kError, what, id, 0});
  _exit(3);
}

// One writer thread of the child: random non-overlapping writes at queue depth 16, forever.
void child_writer(int fd, Array& array, const Layout& layout, std::uint32_t thread,
                  std::uint64_t seed, std::atomic<std::uint32_t>& attached, std::atomic<bool>& go) {
  auto ctx = IoContext::create(256);
  if (!ctx) child_fail(fd, kChildContext);
  auto queue = array.attach(**ctx);
  if (!queue) child_fail(fd, kChildAttach);

  struct Slot final : ArrayIo {
    bool busy = false;
    bool done = false;
    std::uint64_t id = 0;
    Status status;
    AlignedBuffer data;
    void on_complete(Status s) override {
      status = std::move(s);
      done = true;
    }
  };
  std::vector<Slot> slots(kQueueDepth);
  for (Slot& slot : slots) {
    auto buf = AlignedBuffer::allocate(std::size_t{layout.max_sectors} * kSector, 4096);
    if (!buf) child_fail(fd, kChildBuffer);
    slot.data = std::move(*buf);
  }
  attached.fetch_add(1);
  attached.notify_all();
  go.wait(false);

  std::mt19937_64 rng(seed);
  std::uint64_t next_id = (std::uint64_t{thread} + 1) << 40;
  for (;;) {
    for (Slot& slot : slots) {
      if (slot.busy) continue;
      slot.id = ++next_id;
      slot.done = false;
      const std::uint64_t dice = rng() % 100;
      if (dice < 3) {
        slot.kind = IoKind::kFlush;
        slot.offset = 0;
        slot.len = 0;
        slot.buf = nullptr;
        send(fd, Record{RecordKind::kFlushIssued, 0, slot.id, 0});
      } else {
        Extent e;
        bool found = false;
        for (int attempt = 0; attempt < 8 && !found; ++attempt) {
          e = layout.pick(rng, thread);
          found = std::none_of(slots.begin(), slots.end(), [&](const Slot& o) {
            return o.busy && o.kind != IoKind::kFlush && overlaps(e, Extent{o.offset, o.len});
          });
        }
        if (!found) break;
        slot.offset = e.offset;
        slot.len = e.len;
        if (dice < 6) {
          slot.kind = IoKind::kDiscard;
          slot.buf = nullptr;
          send(fd, Record{RecordKind::kDiscardIssued, e.len, slot.id, e.offset});
        } else {
          slot.kind = IoKind::kWrite;
          slot.buf = slot.data.data();
          fill_write(slot.buf, slot.id, e.offset, e.len);
          send(fd, Record{RecordKind::kIssued, e.len, slot.id, e.offset});
        }
      }
      slot.busy = true;
      (*queue)->submit(slot);
    }
    (*ctx)->poll(true);
    for (Slot& slot : slots) {
      if (!slot.busy || !slot.done) continue;
      const bool write = slot.kind != IoKind::kFlush;
      if (!slot.status.is_ok()) child_fail(fd, write ? kChildWrite : kChildFlush, slot.id);
      send(fd, Record{write ? RecordKind::kAcked : RecordKind::kFlushAcked, 0, slot.id, 0});
      slot.busy = false;
    }
  }
}

[[noreturn]] void child_main(int fd, const Shape& s, const std::vector<std::string>& paths,
                             const Layout& layout, std::uint64_t seed) {
  auto parity = make_parity_backend("cpu");
  if (!parity) child_fail(fd, kChildParity);
  auto devs = open_plain(paths, /*create=*/false);
  if (!devs) child_fail(fd, kChildOpen);
  for (std::size_t m = 0; m < devs->size(); ++m)
    (*devs)[m] = std::make_unique<StaggeredMember>(std::move((*devs)[m]), mix64(seed ^ m));
  ArrayOptions options;
  options.parity = parity->get();
  // Every flush runs a bitmap clearing cycle, so the kill can land in the middle of one.
  options.bitmap_clear_interval = std::chrono::milliseconds(0);
  auto array = Array::assemble(std::move(*devs), options);
  if (!array) child_fail(fd, kChildAssemble);
  std::atomic<std::uint32_t> attached{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (std::uint32_t t = 0; t < s.threads; ++t) {
    threads.emplace_back(child_writer, fd, std::ref(**array), std::cref(layout), t,
                         mix64(seed + t + 1), std::ref(attached), std::ref(go));
  }
  for (std::uint32_t n = attached.load(); n < s.threads; n = attached.load())
    attached.wait(n);
  send(fd, Record{RecordKind::kReady, 0, 0, 0});
  go.store(true);
  go.notify_all();
  for (;;)
    pause();  // until the parent's SIGKILL; nothing here ever returns into the test runner
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

  // Create and stop cleanly in the parent: no thread or io_uring exists here before fork().
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
  SCOPED_TRACE(fmt::format("kill after {} ms, writes in [{}, +{})", kill_after.count(),
                           layout.start, layout.units * layout.unit));

  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0) << std::strerror(errno);
  Fd read_end(fds[0]), write_end(fds[1]);
  Child child;
  child.pid = ::fork();
  ASSERT_GE(child.pid, 0) << std::strerror(errno);
  if (child.pid == 0) {
    read_end.reset();
    child_main(write_end.fd, s, paths, layout, rng());
  }
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
