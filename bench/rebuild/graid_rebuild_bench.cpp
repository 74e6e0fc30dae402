// graid-rebuild-bench: how fast the background jobs go, as a share of what the members can give,
// measured in the same run.
//
//   member limit   one member file read sequentially, and written, in strip-sized blocks with
//                  blocking I/O (best of three passes each): a rebuild reads every survivor and
//                  writes the new member, all in parallel at best, so the slower of the two is
//                  the most it could reach per member
//   rebuild        a member failed, a fresh file put in its place, Array::rebuild unthrottled:
//                  member bytes rebuilt per second, idle; with a foreground thread doing random
//                  4 KiB writes at QD 32 (its IOPS reported, and compared with the same load on
//                  the same degraded array for 3 s just before the rebuild starts) under
//                  `extreme` (never yields) and under `normal` (yields: its minimum while the
//                  load runs); RAID6: two members lost, rebuilt in one pass
//   hot replace    a working member copied to a fresh file and swapped in (Array::replace), idle
//   re-add         a member failed, 1% of the array written, the same file taken back
//                  (Array::readd_failed): the bitmap-limited rebuild's time, as member bytes
//                  per second (what it did not have to rebuild counts as done)
//   check          Array::check unthrottled over the same array, idle
//   initialisation the new array's background initialisation (Array::initialise: every member
//                  read, each stripe's parity computed and written), idle, before the fill;
//                  shown against the read limit, which it shares with the parity writes
//
// CPU: process CPU seconds (getrusage) per GiB of member data rebuilt or checked, foreground
// work included where there is some. Members are files in --dir (tmpfs: /dev/shm by default),
// or, with --member-model timed:read=<bw>,write=<bw>,lat=<time>, timed members that serve I/O
// at those speeds and store nothing (bench/timed_member): on tmpfs every member I/O is a copy on
// this machine's few cores, so the figure measures copies; timed members show whether the jobs
// keep drives busy. Then the limits are the model's own: a rebuild, replace or re-add against
// the target's write bandwidth, a check against the read bandwidth; the final consistency check
// is skipped (there is no data).
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "graid/array.h"
#include "graid/member.h"
#include "graid/parity.h"
#include "graid/parity_worker.h"
#include "timed_member.h"

namespace graid {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Options {
  std::string dir = "/dev/shm";
  std::string level = "raid5";
  std::uint32_t members = 5;
  std::uint64_t member_mib = 256;
  std::uint32_t strip_kib = 64;
  std::string backend = "cpu";
  std::string member_model;          // empty: files in `dir`
  std::uint64_t window_stripes = 0;  // RebuildControl / CheckControl: 0 = the engine's default
  std::uint32_t windows = 4;
  unsigned parity_workers = 0;  // the jobs' parity on a ParityWorker with this many threads
};

Result<std::unique_ptr<MemberDevice>> open_file(const std::string& path, std::uint64_t bytes) {
  OpenOptions o;
  o.create = true;
  o.create_size = bytes;
  return open_member(path, o);
}

// MB/s of blocking sequential passes over `dev`'s first `bytes` in `block`-sized I/Os: best of 3.
double raw_pass(MemberDevice& dev, std::uint64_t offset, std::uint64_t bytes, std::uint32_t block,
                bool write) {
  auto buf = AlignedBuffer::allocate(block, 4096);
  if (!buf) return 0;
  std::memset(buf->data(), 0x5a, block);
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = Clock::now();
    for (std::uint64_t at = 0; at + block <= bytes; at += block) {
      Status st = write ? dev.write_sync(offset + at, buf->span())
                        : dev.read_sync(offset + at, buf->span());
      if (!st) return 0;
    }
    if (write) (void)dev.flush_sync();
    best = std::max(best, static_cast<double>(bytes) / seconds_since(t0) / 1e6);
  }
  return best;
}

// Random 4 KiB writes and reads (half each) at queue depth 8 until `stop`; counts requests.
void foreground(Array& array, const std::atomic<bool>& stop, std::atomic<std::uint64_t>& done) {
  constexpr int kDepth = 32;
  auto ctx = IoContext::create(2 * kDepth);
  if (!ctx) return;
  auto queue = array.attach(**ctx);
  if (!queue) return;
  struct Io final : ArrayIo {
    bool busy = false;
    void on_complete(Status) override { busy = false; }
  };
  std::vector<Io> ios(kDepth);
  auto buf = AlignedBuffer::allocate(kDepth * 4096, 4096);
  if (!buf) return;
  std::memset(buf->data(), 0x6b, buf->size());
  std::mt19937_64 rng(1);
  const std::uint64_t blocks = array.capacity() / 4096;
  while (!stop.load()) {
    for (int i = 0; i < kDepth; ++i) {
      if (ios[i].busy) continue;
      ios[i].kind = IoKind::kWrite;
      ios[i].offset = (rng() % blocks) * 4096;
      ios[i].len = 4096;
      ios[i].buf = buf->data() + i * 4096;
      ios[i].busy = true;
      (*queue)->submit(ios[i]);
      ++done;
    }
    (*queue)->context().poll(true);
  }
  while (std::any_of(ios.begin(), ios.end(), [](const Io& io) { return io.busy; }))
    (*queue)->context().poll(true);
}

// One request on `queue`, waited for.
Status sync_io(ArrayQueue& queue, IoKind kind, std::uint64_t offset, std::uint32_t len,
               std::byte* buf) {
  struct Io final : ArrayIo {
    bool done = false;
    Status status;
    void on_complete(Status s) override {
      done = true;
      status = std::move(s);
    }
  } io;
  io.kind = kind;
  io.offset = offset;
  io.len = len;
  io.buf = buf;
  queue.submit(io);
  while (!io.done)
    queue.context().poll(true);
  return io.status;
}

struct JobFigures {
  double seconds = 0;
  double mb_per_s = 0;
  double cpu_s_per_gib = 0;
  double fg_iops = 0;
  double fg_alone = 0;  // the same load on the same degraded array before the job started
};

int run(const Options& o) {
  std::optional<bench::TimedModel> timed;
  if (!o.member_model.empty() && o.member_model != "file") {
    auto model = bench::parse_timed_model(o.member_model);
    if (!model) {
      std::fprintf(stderr, "graid-rebuild-bench: --member-model: %s\n",
                   model.status().message().c_str());
      return 2;
    }
    timed = *model;
  }
  // A member: a file in the directory, or a timed member of the same size.
  auto open_dev = [&](const std::string& path,
                      std::uint64_t bytes) -> Result<std::unique_ptr<MemberDevice>> {
    if (timed) {
      return std::unique_ptr<MemberDevice>(std::make_unique<bench::TimedMember>(
          std::filesystem::path(path).filename().string(), bytes, *timed));
    }
    return open_file(path, bytes);
  };
  auto level = parse_raid_level(o.level);
  if (!level) {
    std::fprintf(stderr, "graid-rebuild-bench: %s\n", level.status().message().c_str());
    return 2;
  }
  auto parity = make_parity_backend(o.backend);
  if (!parity) {
    std::fprintf(stderr, "graid-rebuild-bench: %s\n", parity.status().message().c_str());
    return 2;
  }
  const std::uint64_t member_bytes = (o.member_mib + 1) << 20;  // + the metadata area
  const std::uint32_t strip = o.strip_kib * 1024;
  const std::string base = fmt::format("{}/graid-rebuild-bench-{}", o.dir, getpid());
  std::filesystem::create_directories(base);
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{base};

  // Member limit, on a scratch file the size of a member's data area (timed: the model's).
  double raw_read = 0, raw_write = 0;
  if (timed) {
    raw_read = timed->read_bytes_per_s / 1e6;
    raw_write = timed->write_bytes_per_s / 1e6;
  } else {
    auto scratch = open_file(base + "/scratch", member_bytes);
    if (!scratch) return std::fprintf(stderr, "%s\n", scratch.status().message().c_str()), 1;
    raw_write = raw_pass(**scratch, 0, o.member_mib << 20, strip, true);
    raw_read = raw_pass(**scratch, 0, o.member_mib << 20, strip, false);
  }
  std::filesystem::remove(base + "/scratch");
  // Files: the slower direction bounds every job (all of them read and write the same members).
  // Timed members: the direction the job is bound by, as its target: the new member's writes,
  // or, for a check, the reads.
  const double limit = timed ? raw_write : std::min(raw_read, raw_write);
  const double check_limit = timed ? raw_read : limit;

  std::vector<std::unique_ptr<MemberDevice>> devs;
  for (std::uint32_t i = 0; i < o.members; ++i) {
    auto d = open_dev(fmt::format("{}/m{}", base, i), member_bytes);
    if (!d) return std::fprintf(stderr, "%s\n", d.status().message().c_str()), 1;
    if (!timed) {
      // One block of old data in the middle: a member that does not read all zeroes, so the
      // array is initialised (by re-sync, timed below) rather than known to be consistent.
      auto old = AlignedBuffer::allocate(4096, 4096);
      if (!old) return 1;
      std::memset(old->data(), 0x5a, old->size());
      Status st = (*d)->write_sync(member_bytes / 2 / 4096 * 4096, old->span());
      if (!st) return std::fprintf(stderr, "%s\n", st.message().c_str()), 1;
    }
    devs.push_back(std::move(*d));
  }
  CreateOptions c;
  c.level = *level;
  c.strip_bytes = strip;
  c.name = "rebuild-bench";
  c.background_init = true;  // initialised by the job, measured below
  ArrayOptions ao;
  ao.parity = parity->get();
  std::unique_ptr<ParityWorker> worker;  // outlives the array: destroyed after it
  if (o.parity_workers > 0) {
    worker = std::make_unique<ParityWorker>(*ao.parity, o.parity_workers);
    ao.job_parity = worker.get();
  }
  auto array = Array::create(std::move(devs), c, ao);
  if (!array) return std::fprintf(stderr, "%s\n", array.status().message().c_str()), 1;
  Array& a = **array;
  const double gib = static_cast<double>(a.member_data_bytes()) / (1u << 30);
  // The initialisation, idle: every member read, the parity computed and written.
  JobFigures init;
  {
    InitControl init_control;
    init_control.window_stripes = o.window_stripes;
    init_control.windows_in_flight = o.windows;
    const double cpu0 = cpu_seconds();
    const auto t0 = Clock::now();
    auto done = a.initialise(init_control);
    init.seconds = seconds_since(t0);
    if (!done) return std::fprintf(stderr, "%s\n", done.status().message().c_str()), 1;
    if (!done->finished)
      return std::fprintf(stderr, "initialisation: %s\n", done->paused.c_str()), 1;
    init.mb_per_s = static_cast<double>(a.member_data_bytes()) / init.seconds / 1e6;
    init.cpu_s_per_gib = (cpu_seconds() - cpu0) / gib;
  }
  if (!timed) {
    // Random data everywhere: the parity work is real. (Timed members keep only their first
    // 16 MiB, and reads leave the rest of a buffer as it was: random data in that head would
    // leave the job buffers of later windows holding stripes that do not match, and the check
    // would spend its time redoing them one by one. Zeroes cost the parity math the same.)
    auto ctx = IoContext::create(64);
    auto queue = a.attach(**ctx);
    auto buf = AlignedBuffer::allocate(1u << 20, 4096);
    std::mt19937_64 rng(7);
    for (std::uint64_t at = 0; at < a.capacity(); at += buf->size()) {
      for (std::size_t w = 0; w < buf->size() / 8; ++w) {
        const std::uint64_t v = rng();
        std::memcpy(buf->data() + w * 8, &v, 8);
      }
      const auto len =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(buf->size(), a.capacity() - at));
      Status st = sync_io(**queue, IoKind::kWrite, at, len, buf->data());
      if (!st) return std::fprintf(stderr, "%s\n", st.message().c_str()), 1;
    }
  }

  // Runs one job (a rebuild, a replace) and measures it: member bytes per second (the whole
  // member's, even where a job had nothing to do), CPU seconds per GiB.
  auto measure = [&](const auto& job) -> Result<JobFigures> {
    const double cpu0 = cpu_seconds();
    const auto t0 = Clock::now();
    auto done = job();
    JobFigures f;
    f.seconds = seconds_since(t0);
    const double cpu = cpu_seconds() - cpu0;
    if (!done) return done.status();
    f.mb_per_s = static_cast<double>(a.member_data_bytes()) / f.seconds / 1e6;
    f.cpu_s_per_gib = cpu / gib;
    return f;
  };
  // The foreground load alone for 3 s: the IOPS the loaded rows are compared with.
  auto foreground_alone = [&]() -> double {
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> fg{0};
    const auto t0 = Clock::now();
    std::thread fg_thread([&] { foreground(a, stop, fg); });
    std::this_thread::sleep_for(std::chrono::seconds(3));
    stop = true;
    fg_thread.join();
    return static_cast<double>(fg.load()) / seconds_since(t0);
  };
  // `victims` failed and replaced by fresh members, then rebuilt in one pass; `speed`: the
  // setting the rebuild is paced by (none: as fast as it goes, never yielding).
  auto rebuild_once = [&](std::vector<std::uint32_t> victims, bool load,
                          std::optional<BackgroundSpeed> speed = {}) -> Result<JobFigures> {
    for (const std::uint32_t victim : victims)
      GRAID_RETURN_IF_ERROR(a.fail_member(victim, "benchmark"));
    for (const std::uint32_t victim : victims) {
      auto fresh = open_dev(fmt::format("{}/new{}-{}-{}-{}", base, victim, victims.size(), load,
                                        speed ? background_speed_name(*speed) : "max"),
                            member_bytes);
      if (!fresh) return fresh.status();
      GRAID_RETURN_IF_ERROR(a.replace_failed(victim, std::move(*fresh)));
    }
    // The load alone first, on the array as the rebuild will find it (degraded: writes plan
    // around the fresh members), so the loaded rows show what the job itself costs it.
    const double alone = load ? foreground_alone() : 0;
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> fg{0};
    std::thread fg_thread;
    if (load) fg_thread = std::thread([&] { foreground(a, stop, fg); });
    RebuildControl control;
    control.window_stripes = o.window_stripes;
    control.windows_in_flight = o.windows;
    if (speed) control.speed = [s = *speed] { return background_speed(s); };
    auto f = measure([&] { return a.rebuild(control); });
    stop = true;
    if (fg_thread.joinable()) fg_thread.join();
    if (f) {
      f->fg_iops = static_cast<double>(fg.load()) / f->seconds;
      f->fg_alone = alone;
    }
    return f;
  };
  // Hot replace of a working member (copy, then swap), idle.
  auto replace_once = [&](std::uint32_t victim) -> Result<JobFigures> {
    auto fresh = open_dev(fmt::format("{}/copy{}", base, victim), member_bytes);
    if (!fresh) return fresh.status();
    GRAID_RETURN_IF_ERROR(a.start_replace(victim, std::move(*fresh)));
    return measure([&] { return a.replace(); });
  };
  // The same drive taken back after `share` of the array was written while it was out: the
  // rebuild covers only the bitmap's dirty regions.
  auto readd_once = [&](std::uint32_t victim, double share) -> Result<JobFigures> {
    {
      auto ctx = IoContext::create(64);
      if (!ctx) return ctx.status();
      auto queue = a.attach(**ctx);
      if (!queue) return queue.status();
      // Bits left by the jobs before clear with a flush after the clear interval.
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      GRAID_RETURN_IF_ERROR(sync_io(**queue, IoKind::kFlush, 0, 0, nullptr));
      GRAID_RETURN_IF_ERROR(a.fail_member(victim, "benchmark: marked offline"));
      auto buf = AlignedBuffer::allocate(1u << 20, 4096);
      if (!buf) return buf.status();
      std::memset(buf->data(), timed ? 0 : 0x3c, buf->size());  // zeroes: see the fill
      const std::uint64_t bytes = std::max<std::uint64_t>(
          static_cast<std::uint64_t>(static_cast<double>(a.capacity()) * share) >> 20 << 20,
          buf->size());
      for (std::uint64_t at = 0; at < bytes; at += buf->size()) {
        const auto len =
            static_cast<std::uint32_t>(std::min<std::uint64_t>(buf->size(), bytes - at));
        GRAID_RETURN_IF_ERROR(sync_io(**queue, IoKind::kWrite, at, len, buf->data()));
      }
    }
    if (auto plan = a.readd_failed(victim); !plan) return plan.status();
    return measure([&] { return a.rebuild(); });
  };
  const double fg_alone = foreground_alone();
  auto idle = rebuild_once({1}, false);
  if (!idle) return std::fprintf(stderr, "%s\n", idle.status().message().c_str()), 1;
  // Another member (RAID1 x2 has only 0 and 1), under the load, never yielding.
  auto loaded = rebuild_once({0}, true, BackgroundSpeed::kExtreme);
  if (!loaded) return std::fprintf(stderr, "%s\n", loaded.status().message().c_str()), 1;
  // The same load with the rebuild paced by `normal` (yielding to it, keeping its minimum).
  auto yielding = rebuild_once({1}, true, BackgroundSpeed::kNormal);
  if (!yielding) return std::fprintf(stderr, "%s\n", yielding.status().message().c_str()), 1;
  // RAID6: two members lost, rebuilt in one pass.
  std::optional<JobFigures> both;
  if (*level == RaidLevel::kRaid6) {
    auto two = rebuild_once({0, 2}, false);
    if (!two) return std::fprintf(stderr, "%s\n", two.status().message().c_str()), 1;
    both = *two;
  }
  auto replaced = replace_once(o.members - 1);
  if (!replaced) return std::fprintf(stderr, "%s\n", replaced.status().message().c_str()), 1;
  auto readded = readd_once(1, 0.01);
  if (!readded) return std::fprintf(stderr, "%s\n", readded.status().message().c_str()), 1;
  const double cpu0 = cpu_seconds();
  const auto t0 = Clock::now();
  CheckControl check_control;
  check_control.window_stripes = o.window_stripes;
  check_control.windows_in_flight = o.windows;
  auto checked = a.check(check_control);
  const double check_secs = seconds_since(t0);
  const double check_cpu = cpu_seconds() - cpu0;
  if (!checked) return std::fprintf(stderr, "%s\n", checked.status().message().c_str()), 1;

  std::printf("graid-rebuild-bench: %s x%u, strip %u KiB, %llu MiB per member, parity %s, in %s\n",
              o.level.c_str(), o.members, o.strip_kib,
              static_cast<unsigned long long>(o.member_mib), o.backend.c_str(), o.dir.c_str());
  if (timed) {
    std::printf("members: %s (limit: the model's bandwidth, per member)\n",
                bench::describe(*timed).c_str());
  } else {
    std::printf(
        "member limit (blocking %u KiB passes, best of 3): read %.0f MB/s, write %.0f MB/s\n",
        o.strip_kib, raw_read, raw_write);
  }
  std::printf("foreground (4K random writes, QD 32), optimal array, alone for 3 s: %.0f IOPS\n",
              fg_alone);
  std::printf("%-26s %12s %10s %12s %10s %10s\n", "job", "MB/s/member", "of limit", "CPU s/GiB",
              "fg IOPS", "fg/alone");
  auto row = [&](const char* name, const JobFigures& f, bool fg, double of = 0) {
    std::printf("%-26s %12.0f %9.2fx %12.2f %10s %10s\n", name, f.mb_per_s,
                f.mb_per_s / (of > 0 ? of : limit), f.cpu_s_per_gib,
                fg ? fmt::format("{:.0f}", f.fg_iops).c_str() : "-",
                fg ? fmt::format("{:.2f}x", f.fg_iops / f.fg_alone).c_str() : "-");
  };
  row("rebuild, idle", *idle, false);
  row("rebuild, fg, extreme", *loaded, true);
  row("rebuild, fg, normal", *yielding, true);
  if (both) row("rebuild of two, idle", *both, false);
  row("hot replace, idle", *replaced, false);
  row("re-add, 1% written", *readded, false);
  JobFigures check;
  check.mb_per_s = static_cast<double>(a.member_data_bytes()) / check_secs / 1e6;
  check.cpu_s_per_gib = check_cpu / gib;
  row("check, idle", check, false, check_limit);
  row("initialisation, idle", init, false, check_limit);
  const double normal_min =
      static_cast<double>(background_speed(BackgroundSpeed::kNormal).min) / 1e6;
  std::printf(
      "fg/alone: the load during the rebuild against the same load on the same degraded "
      "array just before it (%.0f and %.0f IOPS)\n",
      loaded->fg_alone, yielding->fg_alone);
  std::printf(
      "under load: extreme rebuild %.2fx of idle; normal rebuild %.0f MB/s (minimum %.0f), "
      "foreground %.2fx of alone\n",
      loaded->mb_per_s / idle->mb_per_s, yielding->mb_per_s, normal_min,
      yielding->fg_iops / yielding->fg_alone);
  if (timed) {
    std::puts("timed members store no data: the check's verdict is not a finding");
    (void)a.stop();
    return 0;
  }
  if (checked->mismatches != 0) {
    std::printf("check found %llu mismatched stripes: the jobs were wrong\n",
                static_cast<unsigned long long>(checked->mismatches));
    return 1;
  }
  std::puts("check after the rebuilds, the replace and the re-add: consistent");
  (void)a.stop();
  return 0;
}

}  // namespace
}  // namespace graid

int main(int argc, char** argv) {
  graid::Options o;
  CLI::App app{"graid-rebuild-bench: rebuild and check throughput against the members' own"};
  app.add_option("--dir", o.dir, "where the member files go (default /dev/shm)");
  app.add_option("--level", o.level, "raid1, raid10, raid5, raid6 (default raid5)");
  app.add_option("--members", o.members, "members (default 5)");
  app.add_option("--member-size", o.member_mib, "MiB of data per member (default 256)");
  app.add_option("--strip", o.strip_kib, "strip KiB (default 64)");
  app.add_option("--backend", o.backend, "parity backend: cpu or ref (default cpu)");
  app.add_option("--window-stripes", o.window_stripes,
                 "stripes per job window (default 0: about 4 MiB per member)");
  app.add_option("--windows", o.windows, "job windows in flight (default 4)")
      ->check(CLI::Range(1, 64));
  app.add_option("--parity-workers", o.parity_workers,
                 "compute the parity on a ParityWorker with this many threads while the job's "
                 "thread goes on with its I/O (default 0: inline, on the job's thread)")
      ->check(CLI::Range(0, 16));
  app.add_option("--member-model", o.member_model,
                 "file (default: files in --dir) or timed:read=<bw>,write=<bw>,lat=<time>, "
                 "e.g. timed:read=3GB/s,write=2GB/s,lat=80us: members that serve I/O at those "
                 "speeds and store nothing");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  return graid::run(o);
}
