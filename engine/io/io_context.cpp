// IoContext: one io_uring per thread, driving every member I/O that thread issues.
//
// A request's life: submit_io() prepares an SQE (or parks the request in a backlog while the SQ
// is full); poll() hands all SQEs queued since the last poll to the kernel in one submit, reaps
// CQEs, and either finishes the request (on_done) or prepares it again: the remainder of a short
// transfer, or the same range after -EAGAIN. The CQE's user_data is the request itself, so the
// hot path allocates nothing.
//
// The same ring carries caller-built operations (RingCommand: ublk FETCH/COMMIT, NVMe
// passthrough). Their user_data is the command's address with a tag in the low bits, which
// alignment leaves free; see the tags below. They share the SQ-full handling (their own backlog,
// drained before the requests', since a ublk COMMIT is what answers an application) and count
// in in_flight(), but nothing is retried for them: the CQE goes to on_complete as it is.
//
// Cross-thread wake-up: an IORING_OP_READ on an eventfd is always armed in the ring; post() pushes
// onto a lock-free list and writes the eventfd when the list was empty, which completes that read
// and ends a poll(true) sleep. The eventfd is blocking on purpose: io_uring answers -EAGAIN on an
// O_NONBLOCK file instead of waiting for it.
#include <fcntl.h>
#include <liburing.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "graid/member.h"

namespace graid {
namespace {

// Never reused, so a registered-file entry can't be mistaken for a later file with the same fd.
std::atomic<std::uint64_t> g_next_file_id{1};
// Bumped whenever a MemberFile closes; a context that sees it move sweeps its registered files.
std::atomic<std::uint64_t> g_files_closed{0};

// What a CQE's user_data is, by its low two bits. Requests and commands are pointers to objects
// with a vtable, so at least 8-aligned: a plain MemberRequest pointer (the hot path, untagged),
// a RingCommand pointer + 2, or one of two bare values.
constexpr std::uint64_t kTagMask = 3;
constexpr std::uint64_t kRequestTag = 0;
constexpr std::uint64_t kWakeTag = 1;     // the eventfd read
constexpr std::uint64_t kCommandTag = 2;  // RingCommand* | kCommandTag
constexpr std::uint64_t kIgnoreTag = 3;   // a NOP filling the SQE of a command whose prep failed
static_assert(alignof(MemberRequest) > kTagMask && alignof(RingCommand) > kTagMask);
// SQE flags a RingCommand's prep may set; the context owns the rest (see RingCommand::prep).
constexpr unsigned kCommandFlags = IOSQE_IO_DRAIN | IOSQE_ASYNC | IOSQE_BUFFER_SELECT;
// Slots in each ring's sparse registered-file table: more than the members of a few arrays.
constexpr unsigned kFileSlots = 256;
// After this many consecutive -EAGAIN/-EINTR results a request fails with that error rather than
// spinning forever on a device that never becomes ready.
constexpr std::uint16_t kMaxRetries = 1000;
constexpr unsigned kReapBatch = 64;
// Kernel limits for registered buffers (IORING_MAX_REG_BUFFERS, 1 GiB per buffer).
constexpr std::size_t kMaxRegions = 16384;
constexpr std::size_t kMaxRegionBytes = std::size_t{1} << 30;

bool is_rw(MemberOp op) noexcept {
  return op == MemberOp::kRead || op == MemberOp::kWrite;
}

}  // namespace

MemberFile::MemberFile(int fd, bool buffered) noexcept
    : fd_(fd), buffered_(buffered), id_(g_next_file_id.fetch_add(1, std::memory_order_relaxed)) {}

MemberFile::~MemberFile() {
  if (fd_ >= 0) ::close(fd_);
  g_files_closed.fetch_add(1, std::memory_order_release);
}

struct IoContext::Impl {
  struct Region {
    std::uintptr_t start;
    std::uintptr_t end;
    std::uint16_t index;
    // What the SQE's address is for a byte of the region: start itself for user memory (the
    // kernel finds it by its address); 0 for a buffer the kernel installed (add_kernel_buffer_slot:
    // addressed by offset); test-installed memory's own address (install_buffer_for_testing).
    std::uintptr_t addr_base;
    bool kernel = false;  // add_kernel_buffer_slot: the window is never memory to touch
  };
  struct FileSlot {
    std::weak_ptr<MemberFile> file;
    unsigned slot;
  };
  // A FIFO over an intrusive link (Task::next_task_ or MemberRequest::next_).
  template <typename T, T* T::*Next>
  struct Fifo {
    T* head = nullptr;
    T* tail = nullptr;
    bool empty() const noexcept { return head == nullptr; }
    void push(T& item) noexcept {
      item.*Next = nullptr;
      if (tail != nullptr) {
        tail->*Next = &item;
      } else {
        head = &item;
      }
      tail = &item;
    }
    T* pop() noexcept {
      T* item = head;
      if (item == nullptr) return nullptr;
      head = item->*Next;
      if (head == nullptr) tail = nullptr;
      item->*Next = nullptr;
      return item;
    }
    // Takes every item, leaving this empty: what runs now, as opposed to what gets queued while
    // running it.
    Fifo take() noexcept {
      Fifo taken = *this;
      head = tail = nullptr;
      return taken;
    }
  };

  explicit Impl(IoContext& owner_ctx) : owner(owner_ctx) {}
  ~Impl() {
    // A poster on another thread may still be between publishing its task (which this thread
    // may already have run, letting its owner finish and destroy us) and writing the eventfd.
    // Wait for it, so its write never lands on a closed -- or reused -- descriptor.
    while (posting.load(std::memory_order_acquire) != 0)
      std::this_thread::yield();
    // Exiting the ring cancels the eventfd read before its buffer (a member) goes away, and drops
    // the registered files and buffers.
    if (ring_ready) io_uring_queue_exit(&ring);
    if (wake_fd >= 0) ::close(wake_fd);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  io_uring_sqe* get_sqe();
  // Plugs a fresh read or write of a mergeable file until the pass ends, else start_now().
  void start(MemberRequest& req);
  void start_now(MemberRequest& req);
  // Merging (IoContextOptions::merge): sorts the plugged requests by file, kind and offset and
  // sends each run of contiguous ones as one vectored I/O. Called once per pass, before submit.
  void flush_plug();
  class MergedIo;
  void send_merged(std::span<MemberRequest* const> run);
  void merged_done(MergedIo& m, std::int32_t res);
  void prep(io_uring_sqe* sqe, MemberRequest& req);
  void start_command(RingCommand& cmd);
  void prep_command(io_uring_sqe* sqe, RingCommand& cmd);
  int finish_command(RingCommand& cmd, std::int32_t res, std::span<const std::uint64_t> extra);
  void arm_wake();
  void refill_backlog();
  void enter(bool wait);
  int reap();
  void refresh_clock() noexcept {
    pass_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now().time_since_epoch())
                  .count();
  }
  int on_cqe(MemberRequest& req, std::int32_t res);
  void finish(MemberRequest& req, std::int32_t res);
  int run_tasks();
  int run_completions();
  int file_slot(const std::shared_ptr<MemberFile>& file);
  void sweep_files(bool force);
  const Region* find_region(const std::byte* p, std::uint32_t len) const;
  // The sparse table add_buffer_region() and add_kernel_buffer_slot() fill, made on first use.
  Status ensure_sparse_table();
  Status insert_region(std::span<std::byte> window, bool kernel, std::uint16_t& slot);

  IoContext& owner;
  io_uring ring{};
  bool ring_ready = false;
  bool big_sqe = false;  // IORING_SETUP_SQE128
  bool big_cqe = false;  // IORING_SETUP_CQE32
  int wake_fd = -1;
  std::uint64_t wake_value = 0;  // the kernel writes the eventfd counter here
  bool wake_armed = false;

  Fifo<Task, &Task::next_task_> deferred;
  Fifo<Task, &Task::next_task_> pass_end;  // before_submit()
  std::atomic<Task*> inbox{nullptr};       // LIFO stack pushed by post(), reversed when drained
  std::atomic<int> posting{0};             // post() calls in progress (see ~Impl)
  Fifo<MemberRequest, &MemberRequest::next_> completions;
  Fifo<MemberRequest, &MemberRequest::next_> backlog;  // requests waiting for an SQE
  Fifo<RingCommand, &RingCommand::next_> command_completions;
  Fifo<RingCommand, &RingCommand::next_> command_backlog;  // commands waiting for an SQE

  std::vector<Region> regions;  // registered buffers, sorted by start
  // add_buffer_region(): the buffer table is sparse (kMaxRegions slots, filled one region at
  // a time); register_buffers() replaces it with a dense one.
  bool sparse_table = false;
  std::vector<std::uint16_t> free_region_slots;

  bool files_enabled = false;
  std::unordered_map<std::uint64_t, FileSlot> files;  // by MemberFile::id()
  std::vector<unsigned> free_slots;
  std::uint64_t files_closed_seen = 0;

  bool merge = true;
  std::uint32_t read_gap = 0;
  Fifo<MemberRequest, &MemberRequest::next_> plug;  // fresh requests waiting for flush_plug()
  struct PlugKey {
    std::uint64_t file;  // fixed-file flag, fd or slot, kind and FUA: what a run shares
    std::uint64_t offset;
    std::uint32_t len;
    std::uint32_t seq;  // submission order
    MemberRequest* req;
  };
  struct PlugGroup {
    std::uint64_t file;
    std::uint32_t count;
    std::uint32_t next;
  };
  std::vector<PlugKey> plugged;  // flush_plug's sort space
  std::vector<PlugKey> sorted;
  std::vector<PlugGroup> groups;
  std::vector<MemberRequest*> run;                     // one merge run
  std::vector<std::unique_ptr<MergedIo>> merged_pool;  // every MergedIo made
  std::vector<MergedIo*> merged_idle;                  // those not in flight
  struct FreeDeleter {
    void operator()(std::byte* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<std::byte, FreeDeleter> scratch;  // read_gap bytes: gaps between merged reads

  IoStats stats;
  std::int64_t pass_ns = 0;  // the steady clock at the last refresh (see IoContext::clock_ns)
  ResultFilter filter = nullptr;
  void* filter_arg = nullptr;
};

Result<std::unique_ptr<IoContext>> IoContext::create(unsigned queue_depth) {
  IoContextOptions options;
  options.queue_depth = queue_depth;
  return create(options);
}

Result<std::unique_ptr<IoContext>> IoContext::create(const IoContextOptions& options) {
  const unsigned queue_depth = options.queue_depth;
  if (queue_depth == 0 || queue_depth > 32768) {
    return make_error(Errc::kInvalidArgument, "io_uring queue depth {} not in [1, 32768]",
                      queue_depth);
  }
  if (options.merge_read_gap > (1U << 20) || options.merge_read_gap % 512 != 0) {
    return make_error(Errc::kInvalidArgument,
                      "merge read gap {} is not a multiple of 512 bytes up to 1 MiB",
                      options.merge_read_gap);
  }
  auto ctx = std::make_unique<IoContext>(Key{});
  Impl& impl = *ctx->impl_;
  impl.merge = options.merge;
  impl.read_gap = options.merge_read_gap;

  // Best first: SINGLE_ISSUER + DEFER_TASKRUN (6.1+) runs completion work only when this
  // thread asks for completions, which is exactly our one-thread-per-ring model (the ring must
  // then be created on the thread that uses it). It measured ~1.5x the IOPS of COOP_TASKRUN
  // for 4 KiB reads on tmpfs members (see docs/performance.md). TASKRUN_FLAG makes the kernel
  // raise IORING_SQ_TASKRUN when completion work waits for us, which reap() checks: without it
  // a poll(false) loop never runs that work (only a waiting enter would) and I/O that completes
  // asynchronously (a file on tmpfs, a pipe) never finishes. Then COOP_TASKRUN (5.19+):
  // completions are delivered when we enter the kernel rather than by interrupting the thread;
  // we enter at least once per poll anyway. Then nothing. The CQ is sized so a backlog beyond
  // the SQ rarely overflows it (the kernel keeps overflowed CQEs regardless).
  constexpr unsigned kTaskrunFlags[] = {
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
      IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
      0,
  };
  const unsigned big = (options.big_sqe ? unsigned{IORING_SETUP_SQE128} : 0U) |
                       (options.big_cqe ? unsigned{IORING_SETUP_CQE32} : 0U);
  auto init = [&](unsigned flags) {
    io_uring_params params{};
    params.flags = IORING_SETUP_CQSIZE | flags;
    params.cq_entries = std::min(queue_depth * 4U, 65536U);
    return io_uring_queue_init_params(queue_depth, &impl.ring, &params);
  };
  // The best task-run mode the kernel takes, with `extra` setup flags.
  auto init_best = [&](unsigned extra) {
    int r = -EINVAL;
    for (std::size_t i = options.defer_taskrun ? 0 : 1;
         i < std::size(kTaskrunFlags) && r == -EINVAL; ++i) {
      r = init(kTaskrunFlags[i] | extra);
    }
    return r;
  };
  int ret = init_best(big);
  bool big_made = big != 0;
  if (ret == -EINVAL && big != 0 && init(0) == 0) {
    // A plain ring works: it is the big entries this kernel refuses.
    io_uring_queue_exit(&impl.ring);
    if (!options.plain_if_refused) {
      return make_error(Errc::kUnsupported,
                        "io_uring refuses{}{} (32-byte CQEs and 128-byte SQEs need Linux 5.19)",
                        options.big_sqe ? " IORING_SETUP_SQE128" : "",
                        options.big_cqe ? " IORING_SETUP_CQE32" : "");
    }
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      fmt::print(stderr,
                 "graid: io_uring refuses 128-byte SQEs / 32-byte CQEs (they need Linux 5.19): "
                 "using normal rings, so NVMe passthrough members (/dev/ngXnY) cannot do I/O\n");
    }
    big_made = false;
    ret = init_best(0);
  }
  if (ret < 0) {
    return make_error(ret == -ENOMEM ? Errc::kNoSpace : Errc::kUnsupported,
                      "io_uring_queue_init({}): {}", queue_depth, std::strerror(-ret));
  }
  impl.ring_ready = true;
  impl.refresh_clock();
  impl.big_sqe = big_made && options.big_sqe;
  impl.big_cqe = big_made && options.big_cqe;

  impl.wake_fd = ::eventfd(0, EFD_CLOEXEC);
  if (impl.wake_fd < 0) {
    return make_error(Errc::kInternal, "eventfd: {}", std::strerror(errno));
  }

  // Registered files save the kernel an fget/fput per I/O. Optional: without them (an old
  // kernel, or a table error) requests use plain fds.
  if (io_uring_register_files_sparse(&impl.ring, kFileSlots) == 0) {
    impl.files_enabled = true;
    impl.free_slots.reserve(kFileSlots);
    for (unsigned slot = kFileSlots; slot > 0; --slot)
      impl.free_slots.push_back(slot - 1);
  }
  impl.files_closed_seen = g_files_closed.load(std::memory_order_acquire);

  impl.arm_wake();
  return ctx;
}

IoContext::IoContext(Key) : impl_(std::make_unique<Impl>(*this)) {}

IoContext::~IoContext() = default;

const IoStats& IoContext::stats() const noexcept {
  return impl_->stats;
}

std::int64_t IoContext::clock_ns() const noexcept {
  return impl_->pass_ns;
}

bool IoContext::big_sqe() const noexcept {
  return impl_->big_sqe;
}

bool IoContext::big_cqe() const noexcept {
  return impl_->big_cqe;
}

void IoContext::set_result_filter_for_testing(ResultFilter filter, void* arg) noexcept {
  impl_->filter = filter;
  impl_->filter_arg = arg;
}

// ---- submission --------------------------------------------------------------------------------

io_uring_sqe* IoContext::Impl::get_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  if (sqe != nullptr) return sqe;
  // SQ full: hand what is queued to the kernel and take a fresh slot. If even that fails (the
  // kernel pushing back with -EBUSY/-EAGAIN) the caller parks the request in the backlog.
  ++stats.sq_full;
  ++stats.enters;
  io_uring_submit(&ring);
  return io_uring_get_sqe(&ring);
}

void IoContext::Impl::start(MemberRequest& req) {
  // Only first attempts: a remainder or a retry goes out as it is. A kernel buffer has no
  // address an iovec could carry.
  if (req.merge_bytes_ != 0 && req.done_bytes_ == 0 && req.retries_ == 0 &&
      (!req.fixed_buf_ || req.fixed_delta_ == 0)) {
    plug.push(req);
    return;
  }
  start_now(req);
}

void IoContext::Impl::start_now(MemberRequest& req) {
  // Behind an existing backlog, to keep submission order.
  if (!backlog.empty()) {
    backlog.push(req);
    return;
  }
  io_uring_sqe* sqe = get_sqe();
  if (sqe == nullptr) {
    backlog.push(req);
    return;
  }
  prep(sqe, req);
}

void IoContext::Impl::prep(io_uring_sqe* sqe, MemberRequest& req) {
  switch (req.op) {
    case MemberOp::kRead:
    case MemberOp::kWrite: {
      std::byte* ptr = req.buf + req.done_bytes_;
      // A fixed buffer's SQE address is the region's (kernel buffers: an offset into them).
      if (req.fixed_buf_)
        ptr =
            reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(ptr) + req.fixed_delta_);
      const unsigned remaining = req.len - req.done_bytes_;
      const std::uint64_t offset = req.offset + req.done_bytes_;
      if (req.op == MemberOp::kRead) {
        if (req.fixed_buf_) {
          io_uring_prep_read_fixed(sqe, req.fd_, ptr, remaining, offset, req.buf_index_);
        } else {
          io_uring_prep_read(sqe, req.fd_, ptr, remaining, offset);
        }
      } else {
        if (req.fixed_buf_) {
          io_uring_prep_write_fixed(sqe, req.fd_, ptr, remaining, offset, req.buf_index_);
        } else {
          io_uring_prep_write(sqe, req.fd_, ptr, remaining, offset);
        }
        if (req.fua) sqe->rw_flags = RWF_DSYNC;
      }
      if (req.fixed_buf_) ++stats.fixed_buffer_ios;
      break;
    }
    case MemberOp::kFlush:
      // O_DIRECT data is already out of the page cache; fdatasync flushes the device cache and
      // any allocation metadata. A buffered member needs the full fsync.
      io_uring_prep_fsync(sqe, req.fd_, req.buffered_ ? 0U : IORING_FSYNC_DATASYNC);
      break;
    case MemberOp::kDiscard:
      // Punching a hole deallocates a file range and, on a block device, discards or zeroes it;
      // either way the range then reads as zeros.
      io_uring_prep_fallocate(sqe, req.fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                              static_cast<off_t>(req.offset), static_cast<off_t>(req.len));
      break;
    case MemberOp::kWriteZeroes:
      // Zeroes the range and keeps it allocated: on a block device the drive's write-zeroes
      // (without deallocation), or zeroes written by the kernel; filesystems without it (tmpfs)
      // answer -EOPNOTSUPP, which the array treats as "write the zeroes yourself".
      io_uring_prep_fallocate(sqe, req.fd_, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
                              static_cast<off_t>(req.offset), static_cast<off_t>(req.len));
      break;
  }
  if (req.fixed_file_) {
    sqe->flags |= IOSQE_FIXED_FILE;
    ++stats.fixed_file_ios;
  }
  io_uring_sqe_set_data(sqe, &req);
  ++stats.sqes;
}

// ---- merging ----------------------------------------------------------------------------------

// One vectored I/O carrying a run of plugged requests that are contiguous on one file (reads
// possibly with small gaps, read into the scratch buffer). An internal ring command: counted in
// in_flight() while it runs, on top of its requests, which complete one by one when it is done.
class IoContext::Impl::MergedIo final : public RingCommand {
 public:
  Impl* impl = nullptr;
  MemberOp op = MemberOp::kRead;
  bool fua = false;
  std::uint64_t offset = 0;
  std::uint32_t bytes = 0;  // what the I/O moves, gaps included
  std::vector<iovec> iov;
  std::vector<MemberRequest*> parts;

  void aim(int fd, bool fixed_file) noexcept {
    fd_ = fd;
    fixed_file_ = fixed_file;
    set_fd_ = true;
  }
  std::int32_t prep(io_uring_sqe& sqe, std::span<std::byte> /*cmd*/) override {
    const auto n = static_cast<unsigned>(iov.size());
    if (op == MemberOp::kRead) {
      io_uring_prep_readv(&sqe, -1, iov.data(), n, offset);
    } else {
      io_uring_prep_writev(&sqe, -1, iov.data(), n, offset);
      if (fua) sqe.rw_flags = RWF_DSYNC;
    }
    return 0;
  }
  void on_complete(std::int32_t res, std::span<const std::uint64_t> /*big_cqe*/) override {
    impl->merged_done(*this, res);
  }
};

void IoContext::Impl::flush_plug() {
  if (plug.empty()) return;
  if (plug.head == plug.tail) {
    start_now(*plug.pop());
    return;
  }
  // Grouped by file, kind and FUA (what a run shares), and by offset within a group, on keys
  // copied out of the requests so that ordering them touches no request. Groups are few (the
  // members of the arrays this thread serves, times kinds) and a group usually arrives in
  // offset order already (a request's strips, sequential requests): grouping is a counting sort
  // and only a group out of order is sorted, in submission order among equal offsets.
  plugged.clear();
  groups.clear();
  while (MemberRequest* r = plug.pop()) {
    const std::uint64_t file =
        (static_cast<std::uint64_t>(r->fixed_file_) << 63) |
        (static_cast<std::uint64_t>(static_cast<std::uint32_t>(r->fd_)) << 8) |
        (static_cast<std::uint64_t>(r->op) << 1) | static_cast<std::uint64_t>(r->fua);
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const PlugGroup& x) { return x.file == file; });
    if (g == groups.end()) g = groups.insert(groups.end(), PlugGroup{file, 0, 0});
    ++g->count;
    plugged.push_back(
        PlugKey{file, r->offset, r->len, static_cast<std::uint32_t>(plugged.size()), r});
  }
  if (groups.size() > 1) {
    std::uint32_t start = 0;
    for (PlugGroup& g : groups) {
      g.next = start;
      start += g.count;
    }
    sorted.resize(plugged.size());
    for (const PlugKey& k : plugged) {
      auto g = std::find_if(groups.begin(), groups.end(),
                            [&](const PlugGroup& x) { return x.file == k.file; });
      sorted[g->next++] = k;
    }
    plugged.swap(sorted);
  }
  const auto by_offset = [](const PlugKey& a, const PlugKey& b) {
    return std::tie(a.offset, a.seq) < std::tie(b.offset, b.seq);
  };
  for (auto first = plugged.begin(); first != plugged.end();) {
    const auto last =
        std::find_if(first, plugged.end(), [&](const PlugKey& k) { return k.file != first->file; });
    if (!std::is_sorted(first, last, by_offset)) std::sort(first, last, by_offset);
    first = last;
  }
  const std::size_t n = plugged.size();
  for (std::size_t i = 0; i < n;) {
    const MemberRequest& first = *plugged[i].req;
    run.clear();
    run.push_back(plugged[i].req);
    std::uint64_t end = plugged[i].offset + plugged[i].len;
    std::uint64_t bytes = plugged[i].len;
    std::uint32_t segments = 1;
    std::size_t j = i + 1;
    for (; j < n; ++j) {
      const PlugKey& next = plugged[j];
      if (next.file != plugged[i].file || next.offset < end) break;
      const std::uint64_t gap = next.offset - end;
      if (gap != 0 && (first.op != MemberOp::kRead || gap > read_gap)) break;
      const std::uint32_t add = gap != 0 ? 2 : 1;
      if (bytes + gap + next.len > first.merge_bytes_ || segments + add > first.merge_segments_)
        break;
      bytes += gap + next.len;
      segments += add;
      end = next.offset + next.len;
      run.push_back(plugged[j].req);
    }
    if (run.size() == 1) {
      start_now(*run.front());
    } else {
      send_merged(run);
    }
    i = j;
  }
}

void IoContext::Impl::send_merged(std::span<MemberRequest* const> parts) {
  if (merged_idle.empty()) {
    merged_pool.push_back(std::make_unique<MergedIo>());
    merged_pool.back()->impl = this;
    merged_idle.push_back(merged_pool.back().get());
  }
  MergedIo& m = *merged_idle.back();
  merged_idle.pop_back();  // back when merged_done() runs
  const MemberRequest& first = *parts.front();
  m.op = first.op;
  m.fua = first.fua;
  m.offset = first.offset;
  m.iov.clear();
  m.parts.assign(parts.begin(), parts.end());
  std::uint64_t end = first.offset;
  for (MemberRequest* r : parts) {
    if (r->offset != end) {
      if (!scratch) {
        const std::size_t size = (read_gap + 4095) / 4096 * 4096;
        scratch.reset(static_cast<std::byte*>(std::aligned_alloc(4096, size)));
        if (!scratch) {  // no memory for the sink: send the run as it is, one by one
          m.parts.clear();
          merged_idle.push_back(&m);
          for (MemberRequest* p : parts)
            start_now(*p);
          return;
        }
      }
      const std::size_t gap = r->offset - end;
      m.iov.push_back(iovec{scratch.get(), gap});
      stats.gap_bytes += gap;
    }
    m.iov.push_back(iovec{r->buf, r->len});
    end = r->offset + r->len;
  }
  m.bytes = static_cast<std::uint32_t>(end - first.offset);
  m.aim(first.fd_, first.fixed_file_);
  ++stats.merged_ios;
  stats.merged_requests += parts.size();
  ++owner.in_flight_;  // finish_command() takes it back
  start_command(m);
}

void IoContext::Impl::merged_done(MergedIo& m, std::int32_t res) {
  merged_idle.push_back(&m);  // reused only by a later flush_plug(), after the loops below
  if (res >= 0 && static_cast<std::uint32_t>(res) == m.bytes) {
    for (MemberRequest* r : m.parts)
      on_cqe(*r, static_cast<std::int32_t>(r->len));
    return;
  }
  // An error or a short transfer: every request again on its own, so that an error is
  // reported for exactly the requests it concerns (and a short one resumes where it should).
  // Rewriting or rereading what did get through is harmless: the requests' ranges are theirs.
  ++stats.merge_splits;
  for (MemberRequest* r : m.parts)
    start_now(*r);
}

void IoContext::Impl::arm_wake() {
  if (wake_armed) return;
  io_uring_sqe* sqe = get_sqe();
  if (sqe == nullptr) return;  // retried by refill_backlog() at the next poll
  io_uring_prep_read(sqe, wake_fd, &wake_value, sizeof(wake_value), 0);
  io_uring_sqe_set_data64(sqe, kWakeTag);
  wake_armed = true;
}

void IoContext::Impl::refill_backlog() {
  arm_wake();
  while (!command_backlog.empty()) {
    io_uring_sqe* sqe = get_sqe();
    if (sqe == nullptr) return;
    prep_command(sqe, *command_backlog.pop());
  }
  while (!backlog.empty()) {
    io_uring_sqe* sqe = get_sqe();
    if (sqe == nullptr) return;
    prep(sqe, *backlog.pop());
  }
}

void IoContext::Impl::enter(bool wait) {
  int ret;
  if (wait) {
    ++stats.enters;
    ret = io_uring_submit_and_wait(&ring, 1);
  } else {
    if (io_uring_sq_ready(&ring) == 0) return;
    ++stats.enters;
    ret = io_uring_submit(&ring);
  }
  // -EINTR (a signal), -EAGAIN/-EBUSY (the kernel wants CQEs reaped first): the SQEs stay queued
  // and go with the next enter, after the caller has reaped. Anything else is a broken ring,
  // which no retry fixes; say so once rather than spin silently.
  if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      fmt::print(stderr, "graid: io_uring_enter failed: {}\n", std::strerror(-ret));
    }
  }
}

void IoContext::submit_io(const std::shared_ptr<MemberFile>& file, MemberRequest& req) {
  const bool malformed =
      is_rw(req.op)
          ? (req.buf == nullptr || req.len == 0)
          : ((req.op == MemberOp::kDiscard || req.op == MemberOp::kWriteZeroes) && req.len == 0);
  if (malformed || file == nullptr || file->fd() < 0) {
    complete_later(req, malformed ? -EINVAL : -EBADF);
    return;
  }
  ++in_flight_;
  ++impl_->stats.submitted;
  req.done_bytes_ = 0;
  req.retries_ = 0;
  req.buffered_ = file->buffered();
  req.next_ = nullptr;
  const int slot = impl_->file_slot(file);
  req.fixed_file_ = slot >= 0;
  req.fd_ = slot >= 0 ? slot : file->fd();
  const bool mergeable = impl_->merge && is_rw(req.op) && file->merge_segments() > 1;
  req.merge_bytes_ = mergeable ? file->merge_bytes() : 0;
  req.merge_segments_ = mergeable ? file->merge_segments() : 0;
  const Impl::Region* region = is_rw(req.op) ? impl_->find_region(req.buf, req.len) : nullptr;
  req.fixed_buf_ = region != nullptr;
  if (region != nullptr) {
    req.buf_index_ = region->index;
    req.fixed_delta_ = region->addr_base - region->start;
  }
  impl_->start(req);
}

void IoContext::complete_later(MemberRequest& req, std::int32_t result) {
  ++in_flight_;
  ++impl_->stats.submitted;
  req.result_ = result;
  impl_->completions.push(req);
}

// ---- caller-built commands ---------------------------------------------------------------------

void IoContext::submit_command(RingCommand& cmd) {
  ++in_flight_;
  ++impl_->stats.commands;
  cmd.set_fd_ = false;
  cmd.fixed_file_ = false;
  impl_->start_command(cmd);
}

void IoContext::submit_command(const std::shared_ptr<MemberFile>& file, RingCommand& cmd) {
  ++in_flight_;
  ++impl_->stats.commands;
  if (file == nullptr || file->fd() < 0) {
    cmd.result_ = -EBADF;
    impl_->command_completions.push(cmd);
    return;
  }
  const int slot = impl_->file_slot(file);
  cmd.set_fd_ = true;
  cmd.fixed_file_ = slot >= 0;
  cmd.fd_ = slot >= 0 ? slot : file->fd();
  impl_->start_command(cmd);
}

void IoContext::Impl::start_command(RingCommand& cmd) {
  io_uring_sqe* sqe = command_backlog.empty() ? get_sqe() : nullptr;
  if (sqe == nullptr) {
    command_backlog.push(cmd);
    return;
  }
  prep_command(sqe, cmd);
}

void IoContext::Impl::prep_command(io_uring_sqe* sqe, RingCommand& cmd) {
  // The command area starts where a 64-byte SQE's addr3 does and runs to the end of the entry.
  constexpr std::size_t kCmdOffset = offsetof(io_uring_sqe, addr3);
  const std::size_t sqe_bytes = big_sqe ? 2 * sizeof(io_uring_sqe) : sizeof(io_uring_sqe);
  auto* bytes = reinterpret_cast<std::byte*>(sqe);
  std::memset(bytes, 0, sqe_bytes);
  const std::int32_t err = cmd.prep(*sqe, {bytes + kCmdOffset, sqe_bytes - kCmdOffset});
  if (err < 0) {
    // The slot is taken and cannot be handed back: fill it with a NOP whose CQE is ignored, and
    // complete the command at the next poll like any other that never reached the kernel.
    std::memset(bytes, 0, sqe_bytes);
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data64(sqe, kIgnoreTag);
    cmd.result_ = err;
    command_completions.push(cmd);
    return;
  }
  sqe->flags &= kCommandFlags;
  if (cmd.set_fd_) {
    sqe->fd = cmd.fd_;
    if (cmd.fixed_file_) {
      sqe->flags |= IOSQE_FIXED_FILE;
      ++stats.fixed_file_ios;
    }
  }
  io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uintptr_t>(&cmd) | kCommandTag);
  ++stats.sqes;
}

int IoContext::Impl::finish_command(RingCommand& cmd, std::int32_t res,
                                    std::span<const std::uint64_t> extra) {
  --owner.in_flight_;
  cmd.on_complete(res, extra);  // may resubmit cmd: touch nothing of it afterwards
  return 1;
}

Status IoContext::register_buffer_ring(void* ring_memory, std::uint32_t entries,
                                       std::uint16_t group) {
  if (ring_memory == nullptr || entries == 0 || entries > 32768 || (entries & (entries - 1)) != 0)
    return make_error(Errc::kInvalidArgument,
                      "buffer ring of {} entries: not a power of two to 32768", entries);
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<std::uintptr_t>(ring_memory);
  reg.ring_entries = entries;
  reg.bgid = group;
  const int rc = io_uring_register_buf_ring(&impl_->ring, &reg, 0);
  if (rc == -EEXIST) return make_error(Errc::kBusy, "buffer group {} is registered already", group);
  if (rc == -EINVAL || rc == -EOPNOTSUPP)
    return make_error(Errc::kUnsupported, "this kernel has no provided-buffer rings (errno {})",
                      -rc);
  if (rc < 0)
    return make_error(Errc::kIoError, "registering buffer group {}: {}", group, std::strerror(-rc));
  return Status::ok();
}

void IoContext::unregister_buffer_ring(std::uint16_t group) noexcept {
  (void)io_uring_unregister_buf_ring(&impl_->ring, group);
}

// ---- completion --------------------------------------------------------------------------------

void IoContext::Impl::finish(MemberRequest& req, std::int32_t res) {
  --owner.in_flight_;
  req.on_done(res);
}

// Returns 1 when the request finished (its callback ran), 0 when it was resubmitted.
int IoContext::Impl::on_cqe(MemberRequest& req, std::int32_t res) {
  if (filter != nullptr) res = filter(req, res, filter_arg);
  if (res == -EAGAIN || res == -EINTR) {
    if (req.retries_ < kMaxRetries) {
      ++req.retries_;
      ++stats.again_retries;
      start(req);
      return 0;
    }
  } else if (res >= 0 && is_rw(req.op)) {
    req.retries_ = 0;
    const std::uint32_t remaining = req.len - req.done_bytes_;
    const auto got = static_cast<std::uint32_t>(res);
    if (got < remaining) {
      if (got == 0) {
        // End of file before the request's end (a file shrunk under us, a device smaller than
        // it claimed): an error, never silent zeros or a partial write.
        finish(req, -EIO);
        return 1;
      }
      req.done_bytes_ += got;
      ++stats.short_resubmits;
      start(req);
      return 0;
    }
    res = static_cast<std::int32_t>(req.len);
  }
  finish(req, res);
  return 1;
}

int IoContext::Impl::reap() {
  // With COOP_TASKRUN the kernel may hold completions until we enter it; the flag says so.
  if ((IO_URING_READ_ONCE(*ring.sq.kflags) & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) != 0) {
    io_uring_get_events(&ring);
  }
  int ran = 0;
  for (;;) {
    io_uring_cqe* cqes[kReapBatch];
    const unsigned n = io_uring_peek_batch_cqe(&ring, cqes, kReapBatch);
    if (n == 0) break;
    // Copy out and release the CQ slots before running callbacks, which may submit (and so
    // enter the kernel, which posts more CQEs).
    struct Done {
      std::uint64_t data;
      std::int32_t res;
      std::uint32_t flags;
    } batch[kReapBatch];
    std::uint64_t extra[kReapBatch][2];  // a 32-byte CQE's tail, for commands
    for (unsigned i = 0; i < n; ++i)
      batch[i] = {cqes[i]->user_data, cqes[i]->res, cqes[i]->flags};
    if (big_cqe) {
      for (unsigned i = 0; i < n; ++i) {
        extra[i][0] = cqes[i]->big_cqe[0];
        extra[i][1] = cqes[i]->big_cqe[1];
      }
    }
    io_uring_cq_advance(&ring, n);
    for (unsigned i = 0; i < n; ++i) {
      const std::uint64_t data = batch[i].data;
      const std::uint64_t tag = data & kTagMask;
      if (tag == kRequestTag) [[likely]] {
        ran += on_cqe(*reinterpret_cast<MemberRequest*>(data), batch[i].res);
      } else if (tag == kCommandTag) {
        auto& cmd = *reinterpret_cast<RingCommand*>(data - kCommandTag);
        cmd.cqe_flags_ = batch[i].flags;
        if ((batch[i].flags & IORING_CQE_F_MORE) != 0) {
          cmd.on_next(batch[i].res);  // a multishot operation's: it stays in flight
          ++ran;
          continue;
        }
        ran += finish_command(
            cmd, batch[i].res,
            big_cqe ? std::span<const std::uint64_t>(extra[i]) : std::span<const std::uint64_t>());
      } else if (data == kWakeTag) {
        wake_armed = false;  // re-armed by refill_backlog(); the posted tasks run in run_tasks()
      }  // else kIgnoreTag: the command already completes through command_completions
    }
    if (n < kReapBatch) break;
  }
  return ran;
}

// ---- tasks -------------------------------------------------------------------------------------

void IoContext::post(Task& task) {
  // Counted before the task is published: the owner cannot run the task, finish, and destroy
  // this context without seeing the count first.
  impl_->posting.fetch_add(1, std::memory_order_acq_rel);
  Task* head = impl_->inbox.load(std::memory_order_relaxed);
  do {
    task.next_task_ = head;
  } while (!impl_->inbox.compare_exchange_weak(head, &task, std::memory_order_release,
                                               std::memory_order_relaxed));
  // Only the push onto an empty inbox wakes the thread: a non-empty inbox already has a wake-up
  // on its way, and draining takes everything.
  if (head == nullptr) {
    const std::uint64_t one = 1;
    while (::write(impl_->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
  }
  impl_->posting.fetch_sub(1, std::memory_order_release);
}

void IoContext::defer(Task& task) {
  impl_->deferred.push(task);
}

void IoContext::before_submit(Task& task) {
  impl_->pass_end.push(task);
}

int IoContext::Impl::run_tasks() {
  int ran = 0;
  // Tasks deferred while these run wait for the next poll, so a task that re-defers itself
  // cannot starve I/O.
  auto local = deferred.take();
  while (Task* task = local.pop()) {
    task->run();
    ++ran;
  }
  Task* stack = inbox.exchange(nullptr, std::memory_order_acquire);
  Task* fifo = nullptr;  // reverse the LIFO stack: run in posting order
  while (stack != nullptr) {
    Task* next = stack->next_task_;
    stack->next_task_ = fifo;
    fifo = stack;
    stack = next;
  }
  while (fifo != nullptr) {
    Task* next = fifo->next_task_;  // read before run(): the task may be posted again
    fifo->next_task_ = nullptr;
    fifo->run();
    ++ran;
    fifo = next;
  }
  return ran;
}

int IoContext::Impl::run_completions() {
  int ran = 0;
  auto local = completions.take();
  while (MemberRequest* req = local.pop()) {
    finish(*req, req->result_);
    ++ran;
  }
  auto local_commands = command_completions.take();
  while (RingCommand* cmd = local_commands.pop()) {
    // A CQE32 ring promises two extra words with every completion; these never had a CQE.
    static constexpr std::uint64_t kNoExtra[2] = {0, 0};
    cmd->cqe_flags_ = 0;
    ran += finish_command(
        *cmd, cmd->result_,
        big_cqe ? std::span<const std::uint64_t>(kNoExtra) : std::span<const std::uint64_t>());
  }
  return ran;
}

int IoContext::poll(bool wait) {
  Impl& impl = *impl_;
  int ran = 0;
  for (;;) {
    // The clock at the pass's start (what tasks submit at: after a sleep in enter() the last
    // reading is as old as the sleep), then again before reaping (what the CQEs complete at).
    impl.refresh_clock();
    impl.sweep_files(false);
    ran += impl.run_tasks();
    ran += impl.run_completions();
    impl.refresh_clock();
    ran += impl.reap();
    // Tasks queued for the pass's end (and, should they queue more, those run next pass).
    auto ending = impl.pass_end.take();
    while (Task* task = ending.pop()) {
      task->run();
      ++ran;
    }
    impl.flush_plug();
    impl.refill_backlog();
    if (ran > 0 || !wait) {
      impl.enter(false);
      return ran;
    }
    // Nothing ran. Work queued by this thread needs no sleep; otherwise sleep for a CQE (an I/O
    // or the eventfd read that post() completes). Posted tasks need no sleep either: reap() may
    // have just consumed the eventfd read that announced them (the kernel posts CQEs while it
    // runs task work there, after run_tasks() looked), and post() writes the eventfd only when
    // the inbox was empty, so sleeping now would wait for a wake-up that never comes.
    if (!impl.deferred.empty() || !impl.pass_end.empty() || !impl.completions.empty() ||
        !impl.command_completions.empty() ||
        impl.inbox.load(std::memory_order_acquire) != nullptr) {
      continue;
    }
    impl.enter(true);
  }
}

// ---- registered files and buffers --------------------------------------------------------------

int IoContext::Impl::file_slot(const std::shared_ptr<MemberFile>& file) {
  if (!files_enabled) return -1;
  if (auto it = files.find(file->id()); it != files.end()) return static_cast<int>(it->second.slot);
  if (free_slots.empty()) sweep_files(true);
  if (free_slots.empty()) return -1;  // table full: plain fd
  const unsigned slot = free_slots.back();
  int fd = file->fd();
  if (io_uring_register_files_update(&ring, slot, &fd, 1) != 1) return -1;
  free_slots.pop_back();
  files.emplace(file->id(), FileSlot{file, slot});
  return static_cast<int>(slot);
}

void IoContext::Impl::sweep_files(bool force) {
  const std::uint64_t closed = g_files_closed.load(std::memory_order_acquire);
  if (!force && closed == files_closed_seen) return;
  files_closed_seen = closed;
  for (auto it = files.begin(); it != files.end();) {
    if (!it->second.file.expired()) {
      ++it;
      continue;
    }
    int empty = -1;  // drop the ring's reference to the closed file
    io_uring_register_files_update(&ring, it->second.slot, &empty, 1);
    free_slots.push_back(it->second.slot);
    it = files.erase(it);
  }
}

const IoContext::Impl::Region* IoContext::Impl::find_region(const std::byte* p,
                                                            std::uint32_t len) const {
  if (regions.empty()) return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  auto it = std::upper_bound(regions.begin(), regions.end(), start,
                             [](std::uintptr_t v, const Region& r) { return v < r.start; });
  if (it == regions.begin()) return nullptr;
  --it;
  if (start + len > it->end) return nullptr;
  return &*it;
}

std::optional<std::uint16_t> IoContext::registered_buffer(const std::byte* p,
                                                          std::size_t len) const noexcept {
  if (len > kMaxRegionBytes) return std::nullopt;
  const Impl::Region* r = impl_->find_region(p, static_cast<std::uint32_t>(len));
  // A kernel buffer is addressed by offset, which commands that put the address in their own
  // payload (NVMe passthrough) do not do: none for them.
  if (r == nullptr || r->kernel) return std::nullopt;
  return r->index;
}

bool IoContext::in_kernel_buffer_window(const std::byte* p, std::size_t len) const noexcept {
  if (len > kMaxRegionBytes) return false;
  const Impl::Region* r = impl_->find_region(p, static_cast<std::uint32_t>(len));
  return r != nullptr && r->kernel;
}

Status IoContext::register_buffers(std::span<const std::span<std::byte>> regions) {
  Impl& impl = *impl_;
  if (in_flight_ > 0) {
    return make_error(Errc::kBusy, "register_buffers with {} I/Os in flight", in_flight_);
  }
  if (regions.size() > kMaxRegions) {
    return make_error(Errc::kInvalidArgument, "{} buffer regions (at most {})", regions.size(),
                      kMaxRegions);
  }
  std::vector<iovec> iovecs;
  iovecs.reserve(regions.size());
  for (const auto& region : regions) {
    if (region.empty() || region.size() > kMaxRegionBytes) {
      return make_error(Errc::kInvalidArgument, "buffer region of {} bytes (1 B to 1 GiB)",
                        region.size());
    }
    iovecs.push_back(iovec{region.data(), region.size()});
  }
  if (!impl.regions.empty() || impl.sparse_table) {
    io_uring_unregister_buffers(&impl.ring);
    impl.regions.clear();
    impl.sparse_table = false;
    impl.free_region_slots.clear();
  }
  if (iovecs.empty()) return Status::ok();
  const int ret =
      io_uring_register_buffers(&impl.ring, iovecs.data(), static_cast<unsigned>(iovecs.size()));
  if (ret < 0) {
    return make_error(ret == -ENOMEM ? Errc::kNoSpace : Errc::kUnsupported,
                      "io_uring_register_buffers ({} regions): {}", iovecs.size(),
                      std::strerror(-ret));
  }
  for (std::size_t i = 0; i < regions.size(); ++i) {
    const auto start = reinterpret_cast<std::uintptr_t>(regions[i].data());
    impl.regions.push_back(
        Impl::Region{start, start + regions[i].size(), static_cast<std::uint16_t>(i), start});
  }
  std::sort(impl.regions.begin(), impl.regions.end(),
            [](const Impl::Region& a, const Impl::Region& b) { return a.start < b.start; });
  return Status::ok();
}

Status IoContext::Impl::ensure_sparse_table() {
  if (sparse_table) return Status::ok();
  if (!regions.empty()) {
    return make_error(Errc::kBusy, "buffers are registered as a set (register_buffers)");
  }
  const int ret = io_uring_register_buffers_sparse(&ring, kMaxRegions);
  if (ret < 0) {
    return make_error(Errc::kUnsupported, "io_uring_register_buffers_sparse: {}",
                      std::strerror(-ret));
  }
  sparse_table = true;
  for (std::size_t i = kMaxRegions; i > 0; --i)
    free_region_slots.push_back(static_cast<std::uint16_t>(i - 1));
  return Status::ok();
}

// Takes a free slot for `window`, registering the memory there unless `kernel` (the kernel
// installs its own buffers in the slot).
Status IoContext::Impl::insert_region(std::span<std::byte> window, bool kernel,
                                      std::uint16_t& slot) {
  if (window.empty() || window.size() > kMaxRegionBytes) {
    return make_error(Errc::kInvalidArgument, "buffer region of {} bytes (1 B to 1 GiB)",
                      window.size());
  }
  GRAID_RETURN_IF_ERROR(ensure_sparse_table());
  const auto start = reinterpret_cast<std::uintptr_t>(window.data());
  const auto overlaps = [&](const Region& r) {
    return start < r.end && r.start < start + window.size();
  };
  if (std::any_of(regions.begin(), regions.end(), overlaps)) {
    return make_error(Errc::kInvalidArgument, "buffer region overlaps a registered one");
  }
  if (free_region_slots.empty()) {
    return make_error(Errc::kNoSpace, "all {} buffer slots of the ring are taken", kMaxRegions);
  }
  slot = free_region_slots.back();
  if (!kernel) {
    iovec iov{window.data(), window.size()};
    // Pins the pages now (counted against RLIMIT_MEMLOCK without CAP_IPC_LOCK), never per I/O.
    const int ret = io_uring_register_buffers_update_tag(&ring, slot, &iov, nullptr, 1);
    if (ret < 0) {
      return make_error(ret == -ENOMEM ? Errc::kNoSpace : Errc::kUnsupported,
                        "io_uring_register_buffers_update_tag ({} bytes): {}", window.size(),
                        std::strerror(-ret));
    }
  }
  free_region_slots.pop_back();
  const Region r{start, start + window.size(), slot, kernel ? std::uintptr_t{0} : start, kernel};
  regions.insert(
      std::upper_bound(regions.begin(), regions.end(), r,
                       [](const Region& a, const Region& b) { return a.start < b.start; }),
      r);
  return Status::ok();
}

Status IoContext::add_buffer_region(std::span<std::byte> region) {
  std::uint16_t slot = 0;
  return impl_->insert_region(region, /*kernel=*/false, slot);
}

Result<std::uint16_t> IoContext::add_kernel_buffer_slot(std::span<std::byte> window) {
  std::uint16_t slot = 0;
  GRAID_RETURN_IF_ERROR(impl_->insert_region(window, /*kernel=*/true, slot));
  return slot;
}

Status IoContext::install_buffer_for_testing(std::uint16_t slot, std::span<std::byte> memory) {
  Impl& impl = *impl_;
  auto it = std::find_if(impl.regions.begin(), impl.regions.end(),
                         [&](const Impl::Region& r) { return r.kernel && r.index == slot; });
  if (it == impl.regions.end()) {
    return make_error(Errc::kNotFound, "slot {} is no kernel buffer slot", slot);
  }
  // An empty entry takes the memory out again (as the kernel does at a request's commit).
  iovec iov{memory.empty() ? nullptr : memory.data(), memory.size()};
  const int ret = io_uring_register_buffers_update_tag(&impl.ring, it->index, &iov, nullptr, 1);
  if (ret < 0) {
    return make_error(Errc::kUnsupported, "io_uring_register_buffers_update_tag: {}",
                      std::strerror(-ret));
  }
  it->addr_base = reinterpret_cast<std::uintptr_t>(memory.data());
  return Status::ok();
}

void IoContext::remove_buffer_region(std::span<std::byte> region) noexcept {
  Impl& impl = *impl_;
  if (!impl.sparse_table) return;
  const auto start = reinterpret_cast<std::uintptr_t>(region.data());
  auto it = std::find_if(impl.regions.begin(), impl.regions.end(), [&](const Impl::Region& r) {
    return r.start == start && r.end == start + region.size();
  });
  if (it == impl.regions.end()) return;
  // An empty entry releases the slot's pages; I/O already in flight on it keeps its own
  // reference to them until it completes.
  iovec empty{nullptr, 0};
  if (io_uring_register_buffers_update_tag(&impl.ring, it->index, &empty, nullptr, 1) < 0) {
    // The ring keeps the pages pinned until it is torn down; the slot is not reused.
    impl.regions.erase(it);
    return;
  }
  impl.free_region_slots.push_back(it->index);
  impl.regions.erase(it);
}

}  // namespace graid
