// The process crash_test's CrashKillTest kills: assembles the array its parent created and
// writes at random from one or two threads, logging every request to the parent's pipe (see
// crash_test.cpp for the test and crash_support.h for the records), until SIGKILL.
//
// A process of its own, started with posix_spawn: a child that fork() alone made from the
// multi-threaded test runner inherits whatever locks the runner's other threads held at that
// instant (the metadata I/O pool's workers, freeing memory under ASan's allocator lock, say) and
// can hang in its first allocation. An exec'd process starts with none.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <thread>

#include "crash_support.h"
#include "graid/parity.h"

namespace graid::testing {
namespace {

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

bool parse(const char* s, std::uint64_t& out) {
  const std::string_view v(s);
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && end == v.data() + v.size();
}

}  // namespace
}  // namespace graid::testing

int main(int argc, char** argv) {
  using namespace graid::testing;
  const int fd = kChildPipeFd;
  constexpr int kFixed = 10;  // argv[0] and the nine numbers before the paths
  std::uint64_t n[kFixed] = {};
  if (argc < kFixed + 1) child_fail(fd, kChildArgs);
  for (int i = 1; i < kFixed; ++i) {
    if (!parse(argv[i], n[i])) child_fail(fd, kChildArgs);
  }
  Shape s{static_cast<graid::RaidLevel>(n[1]), static_cast<std::uint32_t>(n[2]),
          static_cast<std::uint32_t>(n[3]), static_cast<std::uint32_t>(n[4])};
  Layout layout;
  layout.threads = s.threads;
  layout.start = n[6];
  layout.unit = n[7];
  layout.units = n[8];
  layout.max_sectors = static_cast<std::uint32_t>(n[9]);
  std::vector<std::string> paths(argv + kFixed, argv + argc);
  if (paths.size() != s.members || s.threads == 0 || layout.unit == 0 || layout.units == 0)
    child_fail(fd, kChildArgs);
  child_main(fd, s, paths, layout, n[5]);
}
