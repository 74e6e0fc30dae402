// graid-demo: the engine end to end on file-backed drives.
//
// For a RAID5 (5 members) and a RAID6 (6 members) array on files in a temp directory (tmpfs when
// available): create the array and a virtual drive, run a short mixed workload from two threads
// (every read checked against a model of what was written), fail members (one for RAID5, two for
// RAID6) while I/O goes on, read everything back degraded, stop, reassemble from the files and
// check every byte again. Prints what it did; exits non-zero on any mismatch.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "graid/array.h"
#include "graid/member.h"
#include "graid/parity.h"
#include "kernels/cuda_backend.h"

namespace {

using namespace graid;

struct DemoIo final : ArrayIo {
  bool done = false;
  Status status;
  void on_complete(Status s) override {
    done = true;
    status = std::move(s);
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The whole VD's expected contents.
struct Model {
  std::vector<std::byte> bytes;
};

struct WorkloadResult {
  std::uint64_t reads = 0, writes = 0, bytes = 0, mismatches = 0, errors = 0;
};

// One thread: `ops` random 4 KiB..64 KiB reads and writes on its half of the VD, QD 16.
void run_thread(Array& array, const VdInfo& vd, Model& model, int half, std::uint64_t seed, int ops,
                WorkloadResult& out) {
  auto ctx = IoContext::create(128);
  if (!ctx) return;
  auto queue = array.attach(**ctx);
  if (!queue) return;
  std::mt19937_64 rng(seed);
  constexpr int kDepth = 16;
  constexpr std::uint32_t kMax = 64 * 1024;
  std::vector<DemoIo> ios(kDepth);
  std::vector<AlignedBuffer> bufs;
  for (int i = 0; i < kDepth; ++i)
    bufs.push_back(std::move(*AlignedBuffer::allocate(kMax, 4096)));
  const std::uint64_t span = vd.size / 2;
  const std::uint64_t base = half * span;
  for (int done = 0; done < ops; done += kDepth) {
    // A batch of requests on disjoint extents, then check each against the model.
    std::vector<std::pair<std::uint64_t, std::uint32_t>> taken;
    for (int i = 0; i < kDepth; ++i) {
      DemoIo& io = ios[i];
      std::uint64_t off;
      std::uint32_t len;
      bool clash;
      do {
        len = static_cast<std::uint32_t>(4096 * (1 + rng() % (kMax / 4096)));
        off = base + (rng() % ((span - len) / 4096)) * 4096;
        clash = false;
        for (auto [o, l] : taken)
          clash |= off < o + l && o < off + len;
      } while (clash);
      taken.emplace_back(off, len);
      io.done = false;
      io.offset = off;
      io.len = len;
      io.buf = bufs[i].data();
      io.kind = rng() % 2 ? IoKind::kWrite : IoKind::kRead;
      if (io.kind == IoKind::kWrite) {
        for (std::uint32_t b = 0; b < len; b += 8) {
          const std::uint64_t v = rng();
          std::memcpy(io.buf + b, &v, 8);
        }
      }
      (*queue)->submit(io, vd);
    }
    for (DemoIo& io : ios) {
      while (!io.done)
        (*ctx)->poll(true);
    }
    for (DemoIo& io : ios) {
      if (!io.status.is_ok()) {
        ++out.errors;
        std::fprintf(stderr, "  request failed: %s\n", io.status.to_string().c_str());
        continue;
      }
      out.bytes += io.len;
      if (io.kind == IoKind::kWrite) {
        ++out.writes;
        std::memcpy(model.bytes.data() + io.offset, io.buf, io.len);
      } else {
        ++out.reads;
        if (std::memcmp(model.bytes.data() + io.offset, io.buf, io.len) != 0) ++out.mismatches;
      }
    }
  }
}

// Reads the whole VD and counts 4 KiB blocks that differ from the model.
std::uint64_t verify_all(Array& array, const VdInfo& vd, const Model& model,
                         std::uint64_t* errors) {
  auto ctx = IoContext::create(64);
  auto queue = array.attach(**ctx);
  constexpr std::uint32_t kChunk = 1 << 20;
  auto buf = AlignedBuffer::allocate(kChunk, 4096);
  std::uint64_t bad = 0;
  for (std::uint64_t off = 0; off < vd.size; off += kChunk) {
    DemoIo io;
    io.kind = IoKind::kRead;
    io.offset = off;
    io.len = static_cast<std::uint32_t>(std::min<std::uint64_t>(kChunk, vd.size - off));
    io.buf = buf->data();
    (*queue)->submit(io, vd);
    while (!io.done)
      (*ctx)->poll(true);
    if (!io.status.is_ok()) {
      ++*errors;
      continue;
    }
    for (std::uint32_t b = 0; b < io.len; b += 4096) {
      if (std::memcmp(buf->data() + b, model.bytes.data() + off + b, 4096) != 0) ++bad;
    }
  }
  return bad;
}

Result<std::vector<std::unique_ptr<MemberDevice>>> open_members(
    const std::vector<std::string>& paths, std::uint64_t size, bool create) {
  std::vector<std::unique_ptr<MemberDevice>> out;
  for (const auto& p : paths) {
    OpenOptions o;
    o.create = create;
    o.create_size = size;
    auto m = open_member(p, o);
    if (!m) return m.status();
    out.push_back(std::move(*m));
  }
  return out;
}

bool demo(RaidLevel level, std::uint32_t n, const std::string& dir, ParityBackend& parity) {
  const std::uint64_t member_bytes = 65ull << 20;  // 64 MiB of data + 1 MiB of metadata
  const std::string name = std::string(raid_level_name(level));
  std::printf("\n== %s on %u file-backed members of %llu MiB in %s\n", name.c_str(), n,
              static_cast<unsigned long long>(member_bytes >> 20), dir.c_str());
  std::vector<std::string> paths;
  for (std::uint32_t i = 0; i < n; ++i)
    paths.push_back(fmt::format("{}/{}-{}.img", dir, name, i));
  auto members = open_members(paths, member_bytes, true);
  if (!members) {
    std::printf("   cannot open members: %s\n", members.status().to_string().c_str());
    return false;
  }
  CreateOptions create;
  create.level = level;
  create.strip_bytes = 64 * 1024;
  create.name = "demo-" + name;
  ArrayOptions options;
  options.parity = &parity;
  options.host_memory = dynamic_cast<HostMemoryRegistry*>(&parity);  // cuda pins staging slabs
  auto array = Array::create(std::move(*members), create, options);
  if (!array) {
    std::printf("   create failed: %s\n", array.status().to_string().c_str());
    return false;
  }
  auto vd = (*array)->create_vd("vd0", (*array)->capacity() / 2);
  if (!vd) return false;
  std::printf("   created: %llu MiB of data, strip 64 KiB; VD '%s' of %llu MiB at offset %llu\n",
              static_cast<unsigned long long>((*array)->capacity() >> 20), vd->name.c_str(),
              static_cast<unsigned long long>(vd->size >> 20),
              static_cast<unsigned long long>(vd->start));

  Model model{std::vector<std::byte>(vd->size)};
  auto workload = [&](const char* what, int ops, std::uint64_t seed) {
    WorkloadResult r[2];
    const auto t0 = std::chrono::steady_clock::now();
    std::thread a(run_thread, std::ref(**array), std::cref(*vd), std::ref(model), 0, seed, ops,
                  std::ref(r[0]));
    std::thread b(run_thread, std::ref(**array), std::cref(*vd), std::ref(model), 1, seed + 1, ops,
                  std::ref(r[1]));
    a.join();
    b.join();
    const double s = seconds_since(t0);
    const WorkloadResult t{r[0].reads + r[1].reads, r[0].writes + r[1].writes,
                           r[0].bytes + r[1].bytes, r[0].mismatches + r[1].mismatches,
                           r[0].errors + r[1].errors};
    std::printf(
        "   %-9s %llu reads + %llu writes (4-64 KiB, 2 threads, QD 16) in %.2f s, "
        "%.0f MB/s; %llu reads differ from the model, %llu errors\n",
        what, static_cast<unsigned long long>(t.reads), static_cast<unsigned long long>(t.writes),
        s, t.bytes / s / 1e6, static_cast<unsigned long long>(t.mismatches),
        static_cast<unsigned long long>(t.errors));
    return t.mismatches == 0 && t.errors == 0;
  };
  bool ok = workload("optimal:", 2000, 1);
  auto inconsistent = (*array)->count_inconsistent_stripes();
  std::printf("   parity check: %llu inconsistent stripes\n",
              static_cast<unsigned long long>(inconsistent ? *inconsistent : ~0ull));
  ok = ok && inconsistent && *inconsistent == 0;

  std::vector<std::uint32_t> failed = {1};
  if (level == RaidLevel::kRaid6) failed.push_back(n - 2);
  for (std::uint32_t m : failed) {
    Status st = (*array)->fail_member(m, "pulled by the demo");
    std::printf("   failed member %u: %s\n", m, st.is_ok() ? "ok" : st.to_string().c_str());
  }
  std::printf("   array is %s\n", std::string(array_health_name((*array)->health())).c_str());
  ok = workload("degraded:", 1000, 2) && ok;
  std::uint64_t errors = 0;
  std::uint64_t bad = verify_all(**array, *vd, model, &errors);
  std::printf("   degraded read-back of the whole VD: %llu of %llu blocks differ, %llu errors\n",
              static_cast<unsigned long long>(bad),
              static_cast<unsigned long long>(vd->size / 4096),
              static_cast<unsigned long long>(errors));
  ok = ok && bad == 0 && errors == 0;

  Status stopped = (*array)->stop();
  array->reset();
  auto again = open_members(paths, member_bytes, false);
  if (!stopped || !again) return false;
  AssembleReport report;
  auto assembled = Array::assemble(std::move(*again), options, {}, &report);
  if (!assembled) {
    std::printf("   reassembly failed: %s\n", assembled.status().to_string().c_str());
    return false;
  }
  auto vds = (*assembled)->vds();
  std::printf(
      "   stopped and reassembled from the files: %s, %zu failed member(s) recorded, "
      "%zu VD(s)\n",
      std::string(array_health_name((*assembled)->health())).c_str(), report.failed_members.size(),
      vds.size());
  errors = 0;
  bad = vds.empty() ? ~0ull : verify_all(**assembled, vds[0], model, &errors);
  std::printf("   read-back after reassembly: %llu blocks differ, %llu errors\n",
              static_cast<unsigned long long>(bad), static_cast<unsigned long long>(errors));
  ok = ok && bad == 0 && errors == 0;
  Status st = (*assembled)->stop();
  for (const auto& p : paths)
    std::filesystem::remove(p);
  return ok && st.is_ok();
}

}  // namespace

int main(int argc, char** argv) {
  // Engine logs go to stderr so they interleave with, but do not garble, the report; line
  // buffering keeps the two in order when both go to a file or pipe.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  spdlog::set_default_logger(spdlog::stderr_color_mt("graid"));
  std::string dir = argc > 1 ? argv[1] : "";
  if (dir.empty()) {
    std::string templ =
        std::string(std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp") +
        "/graid-demo-XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    dir = templ;
  }
  // Parity on the GPU when one is usable, else on the CPU; say which and why.
  std::unique_ptr<ParityBackend> parity;
  if (auto cuda = make_cuda_backend(); cuda) {
    const CudaDeviceInfo& d = (*cuda)->device_info();
    std::printf(
        "graid demo: arrays on file-backed drives, parity on the GPU ('cuda' backend: "
        "%s, %d SMs, %zu MiB)\n",
        d.name.c_str(), d.sm_count, d.total_memory >> 20);
    parity = std::move(*cuda);
  } else {
    auto cpu = make_parity_backend("cpu");
    if (!cpu) return 1;
    parity = std::move(*cpu);
    std::printf(
        "graid demo: arrays on file-backed drives, parity on the CPU (ISA-L, 'cpu' "
        "backend; no GPU: %s)\n",
        cuda.status().message().c_str());
  }
  bool ok = demo(RaidLevel::kRaid5, 5, dir, *parity);
  ok = demo(RaidLevel::kRaid6, 6, dir, *parity) && ok;
  if (argc <= 1) std::filesystem::remove_all(dir);
  std::printf("\n%s\n", ok ? "demo OK: every byte written was read back, optimal, degraded and "
                             "after reassembly"
                           : "demo FAILED: see above");
  return ok ? 0 : 1;
}
