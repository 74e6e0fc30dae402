// The cuda parity backend, host side (see cuda_backend.h for the pipeline and the error policy).

#include "cuda_backend.h"

#include <cuda_runtime_api.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "copy_runs.h"
#include "cuda_host_regions.h"
#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernel_batch.h"

namespace graid {

bool cuda_backend_compiled() noexcept {
  return true;
}

namespace {

using kernels::ChunkAddrs;
using kernels::CopyRun;
using kernels::CudaDeviceMemory;
using kernels::CudaPinnedMemory;
using kernels::CudaStream;
using kernels::HostRegion;
using kernels::KernelBatch;
using kernels::KernelBatchBuilder;
using kernels::KernelStripe;
using kernels::StripePlan;

constexpr std::size_t kAlign = 256;  // device allocations' alignment; keeps regions 16-aligned

// cudaMemcpyBatchAsync arrived in CUDA 12.8 with a failIdx argument, which CUDA 13 dropped
// (kernels/CMakeLists.txt says at configure time which one a build gets). Before 12.8 there is
// no batched copy: copies always go run by run.
#if CUDART_VERSION >= 12080
constexpr bool kHaveBatchedCopy = true;
#else
constexpr bool kHaveBatchedCopy = false;
#endif

// One cudaMemcpyBatchAsync of `count` copies in stream order, whichever its signature.
cudaError_t memcpy_batch(void* const* dsts, const void* const* srcs, const std::size_t* sizes,
                         std::size_t count, cudaStream_t stream) {
#if CUDART_VERSION >= 12080
  cudaMemcpyAttributes attr{};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  std::size_t attr_index = 0;
#if CUDART_VERSION >= 13000
  return cudaMemcpyBatchAsync(dsts, srcs, sizes, count, &attr, &attr_index, 1, stream);
#else
  std::size_t fail_index = 0;
  return cudaMemcpyBatchAsync(const_cast<void**>(dsts), const_cast<void**>(srcs),
                              const_cast<std::size_t*>(sizes), count, &attr, &attr_index, 1,
                              &fail_index, stream);
#endif
#else
  (void)dsts;
  (void)srcs;
  (void)sizes;
  (void)count;
  (void)stream;
  return cudaErrorNotSupported;
#endif
}

constexpr std::size_t align_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// Where one chunk of one job lives during a device batch.
struct ChunkMove {
  std::uint32_t job = 0;
  std::uint32_t chunk = 0;
  std::size_t offset = 0;  // in the arena (and, for staged chunks, in the staging buffer)
  const HostRegion* registered = nullptr;
  bool read = false;
  bool written = false;
};

// One stream with its arena, staging buffer and scratch vectors; one execute() at a time.
struct Slot {
  std::mutex mu;
  CudaStream stream;
  CudaDeviceMemory arena;
  CudaPinnedMemory staging;
  KernelBatchBuilder builder;
  std::vector<StripePlan> plans;
  std::vector<ChunkMove> moves;
  std::vector<ChunkAddrs> addrs;
  // The piece in flight on this slot (enqueue_piece -> complete_piece).
  bool mapped = false;
  std::size_t flags_off = 0;
  std::uint64_t staged = 0;
  std::uint64_t to_device = 0;
  std::uint64_t from_device = 0;
  std::vector<CopyRun> runs;  // the copies of one direction, then coalesced
  // cudaMemcpyBatchAsync's arrays.
  std::vector<void*> dsts;
  std::vector<const void*> srcs;
  std::vector<std::size_t> sizes;
};

class CudaBackendImpl final : public CudaBackend {
 public:
  CudaBackendImpl(CudaBackendOptions options, CudaDeviceInfo info, unsigned max_blocks,
                  std::vector<std::unique_ptr<Slot>> slots)
      : options_(std::move(options)),
        info_(std::move(info)),
        max_blocks_(max_blocks),
        slots_(std::move(slots)),
        cpu_(make_cpu_backend()) {}

  ~CudaBackendImpl() override {
    // Slots (streams, device and pinned memory) go before the registrations they may reference.
    slots_.clear();
    regions_.clear();  // unregisters
  }

  std::string_view name() const noexcept override { return "cuda"; }
  ParityCaps caps() const noexcept override {
    return ParityCaps{
        .raid5 = true, .raid6 = true, .reconstruct = true, .verify = true, .asynchronous = true};
  }
  bool dead() const noexcept override { return dead_.load(std::memory_order_acquire); }
  const CudaDeviceInfo& device_info() const noexcept override { return info_; }
  CudaBackendStats stats() const noexcept override {
    CudaBackendStats s;
    s.device_batches = device_batches_.load(std::memory_order_relaxed);
    s.launches = launches_.load(std::memory_order_relaxed);
    s.device_jobs = device_jobs_.load(std::memory_order_relaxed);
    s.cpu_batches = cpu_batches_.load(std::memory_order_relaxed);
    s.cpu_jobs = cpu_jobs_.load(std::memory_order_relaxed);
    s.bytes_to_device = bytes_to_device_.load(std::memory_order_relaxed);
    s.bytes_from_device = bytes_from_device_.load(std::memory_order_relaxed);
    s.staged_bytes = staged_bytes_.load(std::memory_order_relaxed);
    s.copy_calls = copy_calls_.load(std::memory_order_relaxed);
    return s;
  }

  Status add_region(std::span<std::byte> region) override {
    if (region.empty()) return Status(Errc::kInvalidArgument, "empty region");
    if (dead()) return Status(Errc::kUnsupported, "cuda backend is dead");
    return regions_.add(region, info_.ordinal);
  }

  void remove_region(std::span<std::byte> region) noexcept override {
    (void)regions_.remove(region);
  }

  Status execute(std::span<StripeJob> jobs) override {
    GRAID_RETURN_IF_ERROR(kernels::validate_jobs(jobs));
    if (jobs.empty()) return Status::ok();
    if (dead()) return run_on_cpu(jobs);
    // The batch goes in pieces of at most piece_bytes (a single bigger job alone). With more than
    // one piece and a second slot free, pieces alternate between the two slots' streams, so one
    // piece's results come back over the link while the next one's inputs go out (the link is
    // full duplex) and a piece's kernel runs meanwhile.
    const std::size_t piece_bytes =
        std::max<std::size_t>(1, std::min(options_.max_arena_bytes, options_.pipeline_piece_bytes));
    auto piece_end = [&](std::size_t begin) {
      std::size_t end = begin;
      std::size_t bytes = 0;
      while (end < jobs.size()) {
        const std::size_t b = footprint(jobs[end]);
        if (end > begin && bytes + b > piece_bytes) break;
        bytes += b;
        ++end;
      }
      return end;
    };
    Slot& first = acquire_slot();
    std::unique_lock lock_first(first.mu, std::adopt_lock);
    Slot* second = piece_end(0) < jobs.size() ? try_acquire_other(first) : nullptr;
    std::unique_lock<std::mutex> lock_second;
    if (second != nullptr) lock_second = std::unique_lock(second->mu, std::adopt_lock);
    // The registered regions as of now, for the whole batch (a snapshot: registering a new
    // region never waits for batches; see cuda_host_regions.h).
    const kernels::HostRegions::Snapshot regions = regions_.snapshot();

    struct InFlight {
      Slot* slot;
      std::size_t begin;
      std::size_t end;
    };
    std::array<InFlight, 2> flight{};  // oldest first
    std::size_t in_flight = 0;
    const std::size_t depth = second != nullptr ? 2 : 1;
    std::size_t next = 0;
    Status status;
    bool transient = false;
    std::size_t redo_from = 0;
    while (true) {
      while (next < jobs.size() && in_flight < depth) {
        Slot* slot = in_flight == 0 || flight[0].slot != &first ? &first : second;
        const std::size_t end = piece_end(next);
        status = enqueue_piece(*slot, jobs.subspan(next, end - next), *regions, transient);
        if (!status.is_ok()) {
          redo_from = in_flight > 0 ? flight[0].begin : next;
          flight[in_flight++] = {slot, next, end};
          break;
        }
        flight[in_flight++] = {slot, next, end};
        next = end;
      }
      if (!status.is_ok() || in_flight == 0) break;
      const InFlight done = flight[0];
      flight[0] = flight[1];
      --in_flight;
      status =
          complete_piece(*done.slot, jobs.subspan(done.begin, done.end - done.begin), transient);
      if (!status.is_ok()) {
        redo_from = done.begin;
        flight[in_flight++] = done;  // drained below with the rest
        break;
      }
    }
    if (status.is_ok()) {
      device_batches_.fetch_add(1, std::memory_order_relaxed);
      device_jobs_.fetch_add(jobs.size(), std::memory_order_relaxed);
      return Status::ok();
    }
    // Drain every stream in use, ignoring their errors: no copy may still be writing into the
    // caller's memory while the cpu redoes the work.
    for (std::size_t i = 0; i < in_flight; ++i)
      (void)cudaStreamSynchronize(flight[i].slot->stream.get());
    if (!transient) mark_dead(status);
    if (!options_.fallback_to_cpu) return status;
    // Inputs were never written, so the cpu can redo every piece not completed.
    return run_on_cpu(jobs.subspan(redo_from));
  }

 private:
  static std::size_t footprint(const StripeJob& job) {
    return static_cast<std::size_t>(job.chunk_count()) * align_up(job.len) + 512;
  }

  Slot& acquire_slot() {
    const std::size_t n = slots_.size();
    const std::size_t first = next_slot_.fetch_add(1, std::memory_order_relaxed) % n;
    for (std::size_t i = 0; i < n; ++i) {
      Slot& s = *slots_[(first + i) % n];
      if (s.mu.try_lock()) return s;
    }
    Slot& s = *slots_[first];
    s.mu.lock();  // every stream busy: queue behind one (execute() is synchronous anyway)
    return s;
  }

  // Another free slot, locked, or null when every other one is busy (never waits: two callers
  // each holding one slot must not wait for each other's).
  Slot* try_acquire_other(const Slot& taken) {
    for (const auto& s : slots_) {
      if (s.get() != &taken && s->mu.try_lock()) return s.get();
    }
    return nullptr;
  }

  // Makes one CUDA call of the device pipeline, unless the fault hook fails it first (test seam):
  // then it reports what a kernel fault looks like, a sticky error.
  template <typename Call>
  cudaError_t hooked(std::string_view what, Call&& call) {
    if (options_.fault_hook && options_.fault_hook(what)) return cudaErrorLaunchFailure;
    return call();
  }

  // `e` as a Status; `transient` says whether the device may still be used (out of memory).
  static Status checked(cudaError_t e, std::string_view what, bool& transient) {
    if (e == cudaSuccess) return Status::ok();
    transient = e == cudaErrorMemoryAllocation;
    return kernels::cuda_status(e, what);
  }

  template <typename Call>
  Status step(std::string_view what, bool& transient, Call&& call) {
    return checked(hooked(what, std::forward<Call>(call)), what, transient);
  }

  Status ensure_capacity(Slot& slot, std::size_t bytes, bool& transient) {
    if (slot.arena.size() >= bytes && slot.staging.size() >= bytes) return Status::ok();
    std::size_t size = std::size_t{1} << 20;
    while (size < bytes)
      size *= 2;
    // Let go of the old buffers first: the device may not hold both.
    slot.arena.reset();
    slot.staging.reset();
    GRAID_RETURN_IF_ERROR(
        step("alloc device", transient, [&] { return slot.arena.allocate(size); }));
    return step("alloc pinned", transient, [&] { return slot.staging.allocate(size); });
  }

  // Issues slot.runs (host address, arena offset, len) in direction `kind` on the slot's stream,
  // after merging runs contiguous on both sides: one cudaMemcpyBatchAsync for all of them, or one
  // cudaMemcpyAsync each when batched copies are off or the driver refuses the batch call (then
  // for good, said once in the log; a refusal is not a device failure).
  Status issue_copies(Slot& slot, cudaMemcpyKind kind, std::byte* dev, bool& transient) {
    const std::string_view what = kind == cudaMemcpyHostToDevice ? "h2d" : "d2h";
    kernels::coalesce_runs(slot.runs);
    cudaStream_t stream = slot.stream.get();
    auto dst_of = [&](const CopyRun& r) -> void* {
      return kind == cudaMemcpyHostToDevice ? static_cast<void*>(dev + r.device_offset)
                                            : reinterpret_cast<void*>(r.host);
    };
    auto src_of = [&](const CopyRun& r) -> const void* {
      return kind == cudaMemcpyHostToDevice ? reinterpret_cast<const void*>(r.host)
                                            : static_cast<const void*>(dev + r.device_offset);
    };
    if (slot.runs.size() > 1 && batched_copies_.load(std::memory_order_relaxed)) {
      slot.dsts.clear();
      slot.srcs.clear();
      slot.sizes.clear();
      for (const CopyRun& r : slot.runs) {
        slot.dsts.push_back(dst_of(r));
        slot.srcs.push_back(src_of(r));
        slot.sizes.push_back(r.len);
      }
      const cudaError_t e = hooked(what, [&] {
        return memcpy_batch(slot.dsts.data(), slot.srcs.data(), slot.sizes.data(), slot.runs.size(),
                            stream);
      });
      if (e == cudaSuccess) {
        copy_calls_.fetch_add(1, std::memory_order_relaxed);
        return Status::ok();
      }
      if (e != cudaErrorInvalidValue && e != cudaErrorNotSupported) {
        return checked(e, what, transient);
      }
      (void)cudaGetLastError();
      if (batched_copies_.exchange(false)) {
        spdlog::warn("graid: cudaMemcpyBatchAsync refused ({}); copying chunk by chunk",
                     cudaGetErrorName(e));
      }
    }
    for (const CopyRun& r : slot.runs) {
      GRAID_RETURN_IF_ERROR(step(what, transient, [&] {
        return cudaMemcpyAsync(dst_of(r), src_of(r), r.len, kind, stream);
      }));
      copy_calls_.fetch_add(1, std::memory_order_relaxed);
    }
    return Status::ok();
  }

  // Lays out one piece in the slot's arena and queues its copies in, its launch and its copies
  // out on the slot's stream; complete_piece() waits for them and finishes on the host.
  Status enqueue_piece(Slot& slot, std::span<StripeJob> jobs,
                       const kernels::HostRegions::Table& regions, bool& transient) {
    GRAID_RETURN_IF_ERROR(
        step("set device", transient, [&] { return cudaSetDevice(info_.ordinal); }));
    const std::size_t n = jobs.size();
    slot.plans.clear();
    for (const StripeJob& job : jobs)
      slot.plans.push_back(kernels::plan_stripe(job));

    // Header: descriptors, tile prefix, verify flags.
    const std::size_t stripes_off = 0;
    const std::size_t tiles_off = align_up(stripes_off + n * sizeof(KernelStripe));
    const std::size_t flags_off = align_up(tiles_off + (n + 1) * sizeof(std::uint64_t));
    const std::size_t header_end = flags_off + n * sizeof(std::uint32_t);
    std::size_t cursor = align_up(header_end);

    // Mapped mode needs every chunk of the piece registered; otherwise copy.
    bool mapped = options_.transfer == CudaBackendOptions::Transfer::kMapped;
    slot.moves.clear();
    for (std::uint32_t j = 0; j < n; ++j) {
      const StripePlan& plan = slot.plans[j];
      for (std::uint32_t c = 0; c < jobs[j].chunk_count(); ++c) {
        const bool read = plan.reads(c);
        const bool written = plan.writes(c);
        if (!read && !written) continue;
        ChunkMove m;
        m.job = j;
        m.chunk = c;
        m.read = read;
        m.written = written;
        m.registered = kernels::HostRegions::find(regions, jobs[j].chunk[c].data(), jobs[j].len);
        if (m.registered == nullptr) mapped = false;
        slot.moves.push_back(m);
      }
    }
    // Copy mode: the arena holds, after the header, the staged inputs, the registered inputs,
    // the staged outputs and the registered outputs, each group in host-address order so that
    // chunks neighbouring in host memory are neighbours in the arena too and move as one copy.
    // A staged chunk sits in the staging buffer at its arena offset, so the header and all
    // staged inputs (and all staged outputs) are contiguous on both sides as well.
    if (!mapped) {
      auto group = [&](auto&& in_group) {
        slot.runs.clear();
        for (std::uint32_t i = 0; i < slot.moves.size(); ++i) {
          const ChunkMove& m = slot.moves[i];
          if (!in_group(m)) continue;
          slot.runs.push_back({reinterpret_cast<std::uintptr_t>(jobs[m.job].chunk[m.chunk].data()),
                               0, jobs[m.job].len, i});
        }
        cursor = kernels::place_runs(slot.runs, cursor, kAlign);
        for (const CopyRun& r : slot.runs)
          slot.moves[r.tag].offset = r.device_offset;
      };
      group([](const ChunkMove& m) { return m.read && m.registered == nullptr; });
      group([](const ChunkMove& m) { return m.read && m.registered != nullptr; });
      group([](const ChunkMove& m) { return !m.read && m.registered == nullptr; });
      group([](const ChunkMove& m) { return !m.read && m.registered != nullptr; });
    }
    GRAID_RETURN_IF_ERROR(ensure_capacity(slot, cursor, transient));
    std::byte* const dev = slot.arena.get();
    std::byte* const host = slot.staging.get();
    // Where a move's bytes are on the host side of its copy.
    auto host_side = [&](const ChunkMove& m) {
      return m.registered != nullptr ? jobs[m.job].chunk[m.chunk].data() : host + m.offset;
    };

    // Descriptors with device addresses.
    slot.addrs.assign(n, ChunkAddrs{});
    for (const ChunkMove& m : slot.moves) {
      std::uint8_t* a = nullptr;
      const StripeJob& job = jobs[m.job];
      if (mapped) {
        const auto off =
            reinterpret_cast<std::uintptr_t>(job.chunk[m.chunk].data()) - m.registered->begin;
        a = m.registered->device_base + off;
      } else {
        a = reinterpret_cast<std::uint8_t*>(dev + m.offset);
      }
      slot.addrs[m.job][m.chunk] = a;
    }
    slot.builder.clear();
    for (std::uint32_t j = 0; j < n; ++j)
      slot.builder.add(kernels::materialize(slot.plans[j], slot.addrs[j]));
    std::memcpy(host + stripes_off, slot.builder.stripes().data(), n * sizeof(KernelStripe));
    std::memcpy(host + tiles_off, slot.builder.tile_begin().data(),
                (n + 1) * sizeof(std::uint64_t));
    std::memset(host + flags_off, 0, n * sizeof(std::uint32_t));

    // Inputs in: the header, then every chunk read (staged ones through the staging buffer).
    std::uint64_t staged = 0;
    std::uint64_t to_device = header_end;
    slot.runs.clear();
    slot.runs.push_back({reinterpret_cast<std::uintptr_t>(host), 0, header_end, 0});
    for (const ChunkMove& m : slot.moves) {
      if (mapped || !m.read) continue;
      const std::size_t len = jobs[m.job].len;
      if (m.registered == nullptr) {
        std::memcpy(host + m.offset, jobs[m.job].chunk[m.chunk].data(), len);
        staged += len;
      }
      to_device += len;
      slot.runs.push_back({reinterpret_cast<std::uintptr_t>(host_side(m)), m.offset, len, 0});
    }
    cudaStream_t stream = slot.stream.get();
    GRAID_RETURN_IF_ERROR(issue_copies(slot, cudaMemcpyHostToDevice, dev, transient));

    // One launch for the piece.
    KernelBatch batch;
    batch.stripes = reinterpret_cast<const KernelStripe*>(dev + stripes_off);
    batch.tile_begin = reinterpret_cast<const std::uint64_t*>(dev + tiles_off);
    batch.mismatch = reinterpret_cast<std::uint32_t*>(dev + flags_off);
    batch.stripe_count = static_cast<std::uint32_t>(n);
    batch.tile_count = slot.builder.tile_count();
    GRAID_RETURN_IF_ERROR(step("launch", transient, [&] {
      return kernels::launch_parity_batch(batch, max_blocks_, stream, options_.gf_mul);
    }));

    // Outputs and verify flags out.
    std::uint64_t from_device = n * sizeof(std::uint32_t);
    slot.runs.clear();
    slot.runs.push_back({reinterpret_cast<std::uintptr_t>(host + flags_off), flags_off,
                         n * sizeof(std::uint32_t), 0});
    for (const ChunkMove& m : slot.moves) {
      if (mapped || !m.written) continue;
      const std::size_t len = jobs[m.job].len;
      from_device += len;
      slot.runs.push_back({reinterpret_cast<std::uintptr_t>(host_side(m)), m.offset, len, 0});
    }
    GRAID_RETURN_IF_ERROR(issue_copies(slot, cudaMemcpyDeviceToHost, dev, transient));
    slot.mapped = mapped;
    slot.flags_off = flags_off;
    slot.staged = staged;
    slot.to_device = to_device;
    slot.from_device = from_device;
    return Status::ok();
  }

  // Waits for the piece enqueue_piece() queued on `slot`, then copies staged outputs to the
  // callers and reads the verify flags.
  Status complete_piece(Slot& slot, std::span<StripeJob> jobs, bool& transient) {
    cudaStream_t stream = slot.stream.get();
    GRAID_RETURN_IF_ERROR(step("sync", transient, [&] { return cudaStreamSynchronize(stream); }));
    std::byte* const host = slot.staging.get();
    std::uint64_t staged = slot.staged;
    for (const ChunkMove& m : slot.moves) {
      if (!slot.mapped && m.written && m.registered == nullptr) {
        std::memcpy(jobs[m.job].chunk[m.chunk].data(), host + m.offset, jobs[m.job].len);
        staged += jobs[m.job].len;
      }
    }
    std::uint32_t flags_copy = 0;
    for (std::uint32_t j = 0; j < jobs.size(); ++j) {
      if (jobs[j].op != ParityOp::kVerify) continue;
      std::memcpy(&flags_copy, host + slot.flags_off + j * sizeof(std::uint32_t),
                  sizeof flags_copy);
      jobs[j].parity_ok = flags_copy == 0;
    }
    launches_.fetch_add(1, std::memory_order_relaxed);
    bytes_to_device_.fetch_add(slot.to_device, std::memory_order_relaxed);
    bytes_from_device_.fetch_add(slot.from_device, std::memory_order_relaxed);
    staged_bytes_.fetch_add(staged, std::memory_order_relaxed);
    return Status::ok();
  }

  void mark_dead(const Status& why) {
    if (!dead_.exchange(true, std::memory_order_acq_rel)) {
      spdlog::error(
          "graid: cuda backend on {} ({}) failed: {}; parity continues on the cpu backend",
          info_.name, info_.pci_bus_id, why.to_string());
    }
  }

  Status run_on_cpu(std::span<StripeJob> jobs) {
    cpu_batches_.fetch_add(1, std::memory_order_relaxed);
    cpu_jobs_.fetch_add(jobs.size(), std::memory_order_relaxed);
    return cpu_->execute(jobs);
  }

  const CudaBackendOptions options_;
  const CudaDeviceInfo info_;
  const unsigned max_blocks_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::unique_ptr<ParityBackend> cpu_;
  std::atomic<std::size_t> next_slot_{0};
  std::atomic<bool> dead_{false};

  kernels::HostRegions regions_;

  std::atomic<std::uint64_t> device_batches_{0};
  std::atomic<std::uint64_t> launches_{0};
  std::atomic<std::uint64_t> device_jobs_{0};
  std::atomic<std::uint64_t> cpu_batches_{0};
  std::atomic<std::uint64_t> cpu_jobs_{0};
  std::atomic<std::uint64_t> bytes_to_device_{0};
  std::atomic<std::uint64_t> bytes_from_device_{0};
  std::atomic<std::uint64_t> staged_bytes_{0};
  std::atomic<std::uint64_t> copy_calls_{0};
  std::atomic<bool> batched_copies_{kHaveBatchedCopy &&
                                    options_.batched_copies};  // off for good if refused
};

}  // namespace

Result<std::unique_ptr<CudaBackend>> make_cuda_backend(CudaBackendOptions options) {
  if (options.fault_hook && options.fault_hook("init")) {
    return Status(Errc::kIoError, "CUDA init failed: injected fault");
  }
  Result<int> count = kernels::cuda_device_count();
  if (!count.is_ok()) return count.status();
  if (options.device < 0 || options.device >= *count) {
    return make_error(Errc::kNotFound, "no CUDA device {} ({} visible)", options.device, *count);
  }
  cudaError_t e = cudaSetDevice(options.device);
  if (e != cudaSuccess) return kernels::cuda_status(e, "cudaSetDevice");
  unsigned flags = cudaDeviceMapHost;
  if (options.blocking_sync) flags |= cudaDeviceScheduleBlockingSync;
  e = cudaSetDeviceFlags(flags);
  if (e == cudaErrorSetOnActiveProcess) {
    // Someone in this process created the context first; its flags stand. Not fatal: waits may
    // spin instead of sleeping.
    (void)cudaGetLastError();
    spdlog::warn("graid: CUDA context already active; device flags (blocking sync) not applied");
  } else if (e != cudaSuccess) {
    return kernels::cuda_status(e, "cudaSetDeviceFlags");
  }
  e = cudaFree(nullptr);  // creates the context now, so start-up, not the first I/O, fails
  if (e != cudaSuccess) return kernels::cuda_status(e, "context creation");
  Result<CudaDeviceInfo> info = kernels::query_device_info(options.device);
  if (!info.is_ok()) return info.status();
  int per_sm = 0;
  e = kernels::parity_kernel_blocks_per_sm(&per_sm, options.gf_mul);
  if (e != cudaSuccess)
    return kernels::cuda_status(e, "occupancy query (no kernel image for this GPU?)");
  const unsigned max_blocks =
      static_cast<unsigned>(std::max(1, per_sm) * std::max(1, info->sm_count));
  std::vector<std::unique_ptr<Slot>> slots;
  for (unsigned i = 0; i < std::max(1u, options.streams); ++i) {
    auto slot = std::make_unique<Slot>();
    e = slot->stream.create();
    if (e != cudaSuccess) return kernels::cuda_status(e, "cudaStreamCreate");
    slots.push_back(std::move(slot));
  }
  return std::unique_ptr<CudaBackend>(std::make_unique<CudaBackendImpl>(
      std::move(options), std::move(info).value(), max_blocks, std::move(slots)));
}

std::unique_ptr<ParityBackend> make_preferred_parity_backend(CudaBackendOptions options) {
  static std::once_flag logged;
  Result<std::unique_ptr<CudaBackend>> cuda = make_cuda_backend(std::move(options));
  if (cuda.is_ok()) {
    const CudaDeviceInfo& d = (*cuda)->device_info();
    std::call_once(logged, [&] {
      spdlog::info("graid: parity on the cuda backend: {} ({}, {} SMs, {} MiB, driver {})", d.name,
                   d.pci_bus_id, d.sm_count, d.total_memory >> 20, d.driver_version);
    });
    return std::move(cuda).value();
  }
  std::call_once(logged, [&] {
    spdlog::info("graid: parity on the cpu backend (cuda backend: {})", cuda.status().message());
  });
  return make_cpu_backend();
}

}  // namespace graid
