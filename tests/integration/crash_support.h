// What the crash tests' parent (crash_test) and the process it kills (crash_child) share: the
// array shapes, deterministic sector contents, the extents the writers pick, the members that
// stagger their writes, and the records the child sends through its pipe.
#pragma once

#include <limits.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "extent.h"
#include "graid/array.h"
#include "graid/member.h"

namespace graid::testing {

constexpr std::uint32_t kSector = 512;
constexpr std::uint64_t kDataOffset = 1u << 20;  // graid's metadata area on every member
constexpr std::uint64_t kMemberDataBytes = 1u << 20;
constexpr std::uint64_t kMemberBytes = kDataOffset + kMemberDataBytes;
constexpr std::uint64_t kRegionBytes = 64 * 1024;  // the smallest bitmap region
constexpr std::uint32_t kQueueDepth = 16;

struct Shape {
  RaidLevel level;
  std::uint32_t members;
  std::uint32_t strip;
  std::uint32_t threads;  // writer threads (kill test; the power-loss test uses one)
};

// ---- Sector contents ---------------------------------------------------------------------------

inline std::uint64_t mix64(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr std::uint64_t kZeros = 0;        // "write id" of never-written sectors
constexpr std::uint64_t kGarbage = ~0ull;  // a sector that is no write's data

inline void fill_sector(std::byte* dst, std::uint64_t id, std::uint64_t sector) {
  std::array<std::uint64_t, kSector / 8> w;
  w[0] = id;
  w[1] = sector;
  const std::uint64_t base = mix64(id ^ mix64(sector));
  for (std::size_t i = 2; i < w.size(); ++i)
    w[i] = mix64(base + i);
  std::memcpy(dst, w.data(), kSector);
}

inline void fill_write(std::byte* dst, std::uint64_t id, std::uint64_t offset, std::uint32_t len) {
  for (std::uint32_t b = 0; b < len; b += kSector)
    fill_sector(dst + b, id, (offset + b) / kSector);
}

// Which write's data `src` (array sector `sector`) holds: an id, kZeros or kGarbage.
inline std::uint64_t identify(const std::byte* src, std::uint64_t sector) {
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

// ---- Members and arrays ------------------------------------------------------------------------

inline Result<std::vector<std::unique_ptr<MemberDevice>>> open_plain(
    const std::vector<std::string>& paths, bool create) {
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

inline CreateOptions create_options(const Shape& s) {
  CreateOptions c;
  c.level = s.level;
  c.strip_bytes = s.strip;
  c.name = "crash";
  c.bitmap_region_bytes = kRegionBytes;
  return c;
}

// The members to fail together for the degraded reads after recovery: every member alone for
// ---- Choosing extents --------------------------------------------------------------------------

// Where the writers write: a window of about half the array cut into units of at least five
// stripes and a half; unit u belongs to thread u % threads, so threads write different sectors of
// the same stripes and never the same sector.
struct Layout {
  std::uint64_t start = 0;
  std::uint64_t unit = 0;
  std::uint64_t units = 0;
  std::uint32_t threads = 1;
  std::uint32_t max_sectors = 0;  // a unit: the longest write

  static Layout make(const Geometry& g, std::uint64_t capacity, std::uint32_t threads,
                     std::mt19937_64& rng) {
    Layout l;
    l.threads = threads;
    l.unit = std::max<std::uint64_t>(g.stripe_data_bytes() * 11 / 2, 4ull * g.strip_bytes());
    l.units = std::max<std::uint64_t>(capacity / 2 / l.unit, threads);
    const std::uint64_t slack = (capacity - l.units * l.unit) / kSector;
    l.start = (rng() % (slack + 1)) * kSector;
    l.max_sectors = static_cast<std::uint32_t>(l.unit / kSector);
    return l;
  }

  Extent pick(std::mt19937_64& rng, std::uint32_t thread) const {
    const std::uint64_t mine = (units - thread + threads - 1) / threads;
    const std::uint64_t u = thread + threads * (rng() % mine);
    const std::uint64_t unit_sectors = unit / kSector;
    if ((rng() & 3) == 0) {
      // A quarter long writes: from the unit's first eighth over at least half of it, so whole
      // stripes in the middle (at least two) go out as one run (queue/stripe_run.cpp).
      const std::uint64_t first = rng() % (unit_sectors / 8);
      const std::uint64_t half = unit_sectors / 2;
      const std::uint64_t sectors = half + rng() % (unit_sectors - first - half + 1);
      return Extent{start + u * unit + first * kSector,
                    static_cast<std::uint32_t>(sectors * kSector)};
    }
    const std::uint64_t first = rng() % unit_sectors;
    const std::uint64_t room = std::min<std::uint64_t>(unit_sectors - first, unit_sectors / 4);
    // The others half small (the read-modify-write path), half up to a quarter of the unit.
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
  kChildArgs,
};

inline std::string_view child_error_name(std::uint32_t e) {
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
    case kChildArgs:
      return "parsing its arguments";
    default:
      return "unknown";
  }
}

// The child's interface: records go to this descriptor (the parent's pipe, dup2()ed there by
// posix_spawn), and its arguments are
//   crash_child LEVEL MEMBERS STRIP THREADS SEED START UNIT UNITS MAX_SECTORS PATH...
constexpr int kChildPipeFd = 3;

}  // namespace graid::testing
