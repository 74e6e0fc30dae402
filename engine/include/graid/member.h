// Member I/O: asynchronous reads and writes on the drives (members) of an array.
//
// Threading model (as ublksrv and Seastar): every thread that does I/O owns one IoContext, which
// owns one io_uring. A MemberDevice (one per drive, shared by all threads) issues each request
// through the *calling thread's* IoContext; the request's completion runs later on that same
// thread, inside IoContext::poll(). Nothing on this path takes a lock, except the cross-thread
// inbox (IoContext::post), which another thread uses to hand work to this one, and it is a
// lock-free list.
//
//    thread A                       thread B
//    IoContext A ── io_uring A      IoContext B ── io_uring B
//        │   submit(ctxA, req)          │
//        └──► MemberDevice (fd, shared, stateless per request) ◄──┘
//
// Completion contract: every submitted MemberRequest completes exactly once, never inline from
// submit() (so callers may submit while holding their own state half-built), always on the
// submitting thread. `result` is the byte count for reads/writes (always the full length: short
// transfers and EAGAIN are retried inside the layer), 0 for flush/discard, or -errno:
//   -ERANGE   the range does not lie inside [0, size())
//   -EINVAL   a malformed request (null buffer, zero or unaligned length/offset)
//   -EIO      the device failed, or ended early (a file shrunk under us: never silent zeros)
//   other     whatever the kernel said (-ENODEV for a vanished device, ...)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "graid/status.h"

// <liburing.h>'s submission entry. Only code that builds RingCommands needs its definition;
// including liburing here would put it into every engine user's translation units.
struct io_uring_sqe;

namespace graid {

class IoContext;

// Something that runs later on an IoContext's thread (deferred completions, cross-thread work).
// Intrusive: the object that wants to run embeds it; no allocation per task. A task may be
// queued again once its run() has started.
class Task {
 public:
  virtual void run() = 0;

 protected:
  // Virtual although protected: IoContext is a friend, so -Wnon-virtual-dtor counts the
  // destructor as accessible. Costs nothing per call.
  virtual ~Task() = default;

 private:
  friend class IoContext;
  Task* next_task_ = nullptr;
};

// kDiscard may deallocate (punch a hole, discard); kWriteZeroes keeps the range allocated
// (FALLOC_FL_ZERO_RANGE: write-zeroes on a block device, falling back to writing them). After
// either the range reads as zeroes.
enum class MemberOp : std::uint8_t { kRead, kWrite, kFlush, kDiscard, kWriteZeroes };

// One I/O on one member. Owned by the caller (embedded in its stripe op or request object) and
// must stay alive, unmodified, until on_done runs.
class MemberRequest {
 public:
  MemberOp op = MemberOp::kRead;
  std::uint64_t offset = 0;  // byte offset on the device (absolute: includes any data offset)
  std::byte* buf = nullptr;  // kRead/kWrite: 512-byte aligned for O_DIRECT (4096 preferred)
  std::uint32_t len = 0;     // kRead/kWrite/kDiscard/kWriteZeroes: bytes, a multiple of 512
  // kWrite: durable when it completes (RWF_DSYNC: a FUA write where the drive has FUA, else
  // the write and a cache flush), so no later flush is needed for it.
  bool fua = false;

  // Called once on the submitting thread with the byte count, 0, or -errno.
  virtual void on_done(std::int32_t result) = 0;

 protected:
  virtual ~MemberRequest() = default;  // virtual for the same reason as Task's

 private:
  friend class IoContext;
  // Private state of the submitting IoContext (retries of short transfers, deferral).
  std::uint32_t done_bytes_ = 0;   // bytes already transferred by earlier (short) attempts
  std::int32_t result_ = 0;        // result of a deferred completion (complete_later)
  int fd_ = -1;                    // raw fd, or fixed-file slot when fixed_file_
  std::uint16_t buf_index_ = 0;    // registered buffer, when fixed_buf_
  std::intptr_t fixed_delta_ = 0;  // fixed_buf_: SQE address minus buffer address (kernel buffers)
  std::uint16_t retries_ = 0;      // consecutive -EAGAIN/-EINTR resubmissions
  // Merging (IoContextOptions::merge): the largest vectored I/O and the most iovecs its file
  // takes (MemberFile::set_merge_limits); 0 = never merged.
  std::uint32_t merge_bytes_ = 0;
  std::uint16_t merge_segments_ = 0;
  bool fixed_file_ = false;
  bool fixed_buf_ = false;
  bool buffered_ = false;          // flush is a full fsync
  MemberRequest* next_ = nullptr;  // intrusive link: deferred completions, SQ-full backlog
};

// An io_uring operation the caller builds itself, submitted through IoContext::submit_command:
// how a thread puts other ring users' work on the ring its member I/O already uses, so that it
// sleeps in one place. The ublk queue loop issues FETCH_REQ / COMMIT_AND_FETCH_REQ this way
// (IORING_OP_URING_CMD on /dev/ublkcN); an NVMe passthrough member issues NVMe reads and writes
// (IORING_OP_URING_CMD on /dev/ngXnY, which needs a context created with big_sqe and big_cqe).
//
// Intrusive like MemberRequest: owned by the caller, alive and not resubmitted until
// on_complete runs. Completion contract as for member requests: on_complete runs exactly once,
// on the submitting thread, inside IoContext::poll(), never inline from submit_command. Unlike
// member requests nothing is retried or adjusted: `res` is what the kernel put in the CQE (or a
// negative errno from prep or from the context).
//
// A multishot operation (a multishot recv, ublk's FETCH_IO_CMDS) posts several CQEs: each that
// carries IORING_CQE_F_MORE goes to on_next() while the command stays in flight, and the last
// (without it) to on_complete(), so on_complete still runs exactly once.
class RingCommand {
 public:
  // Fills in the operation when the context has a submission slot for it: at submit_command,
  // or later if the submission queue was full (so state prep reads must stay valid until
  // on_complete). `sqe` arrives zeroed; set opcode, fd, cmd_op, addr, len and so on. `cmd` is
  // the command area at the SQE's tail (sqe->cmd; for IORING_OP_URING_CMD the driver's command):
  // 16 bytes on a normal ring, 80 on a context created with big_sqe; write the driver command
  // there rather than through sqe->cmd (a zero-length array to the compiler).
  //
  // The context owns user_data and the link/skip flags: after prep it sets user_data, keeps
  // only IOSQE_IO_DRAIN and IOSQE_ASYNC of the flags prep set (a link would chain the command to
  // whatever SQE happens to follow it, a skipped CQE would never complete it), and, for a
  // command submitted on a MemberFile, sets fd (and IOSQE_FIXED_FILE) itself.
  //
  // Returns 0, or -errno when the operation cannot be built (say, a command area too small on a
  // normal ring); the command then completes with that result and nothing reaches the kernel.
  virtual std::int32_t prep(io_uring_sqe& sqe, std::span<std::byte> cmd) = 0;

  // Called once on the submitting thread with the CQE's result, which the opcode defines (a
  // byte count, 0, a driver status, -errno). `big_cqe` is the 16 extra bytes of a 32-byte CQE
  // on a context created with big_cqe (an NVMe command's result dword 0 is big_cqe[0]); empty
  // on a normal ring, and zeros when the command failed before reaching the kernel. The
  // context no longer touches the command once this starts: it may be submitted again from
  // here (as ublk's COMMIT_AND_FETCH_REQ follows each FETCH_REQ).
  virtual void on_complete(std::int32_t res, std::span<const std::uint64_t> big_cqe) = 0;

  // A multishot operation's CQE with IORING_CQE_F_MORE (see above); on the submitting thread,
  // inside poll(). The command is still in flight: do not resubmit it from here. Single-shot
  // commands never see this.
  virtual void on_next(std::int32_t res) { (void)res; }

 protected:
  virtual ~RingCommand() = default;  // virtual for the same reason as Task's
  // The flags of the CQE being delivered to on_next() or on_complete(): IORING_CQE_F_BUFFER with
  // the id of the provided buffer the operation filled (ProvidedBuffers::id_of), F_MORE and so
  // on; 0 for a completion that never reached the kernel.
  std::uint32_t cqe_flags() const noexcept { return cqe_flags_; }

 private:
  friend class IoContext;
  int fd_ = -1;                  // submit_command(file, ...): raw fd or fixed-file slot
  bool set_fd_ = false;          // the context sets sqe->fd (submitted on a MemberFile)
  bool fixed_file_ = false;      // fd_ is a registered-file slot
  std::int32_t result_ = 0;      // result of a completion that never reached the kernel
  std::uint32_t cqe_flags_ = 0;  // see cqe_flags()
  RingCommand* next_ = nullptr;  // intrusive link: deferred completions, SQ-full backlog
};

// An open file or block device as the I/O layer sees it: the fd, how to flush it, and an
// identity that is never reused (fd numbers are), which keys each IoContext's registered-file
// table. Shared by the MemberDevice that opened it and anything wrapping it; closes the fd when
// the last owner lets go. An IoContext that registered the file drops that registration at its
// next poll() afterwards (or when it is destroyed), releasing the kernel's reference (and, for a
// block device opened O_EXCL, the exclusive claim).
class MemberFile {
 public:
  // Takes ownership of `fd`. `buffered`: opened without O_DIRECT, so flush is a full fsync.
  MemberFile(int fd, bool buffered) noexcept;
  ~MemberFile();
  MemberFile(const MemberFile&) = delete;
  MemberFile& operator=(const MemberFile&) = delete;

  int fd() const noexcept { return fd_; }
  bool buffered() const noexcept { return buffered_; }
  std::uint64_t id() const noexcept { return id_; }

  // Lets an IoContext merge reads or writes on this file that are contiguous (and submitted in
  // one poll pass) into one vectored I/O of at most `max_bytes` and `max_segments` iovecs: the
  // device's own limits (a block device's max_sectors_kb and max_segments), so the kernel need
  // not split what was merged. Files without limits (pipes, sockets: no offsets) are never
  // merged. Set before the file is used.
  void set_merge_limits(std::uint32_t max_bytes, std::uint16_t max_segments) noexcept {
    merge_bytes_ = max_bytes;
    merge_segments_ = max_segments;
  }
  std::uint32_t merge_bytes() const noexcept { return merge_bytes_; }
  std::uint16_t merge_segments() const noexcept { return merge_segments_; }

 private:
  int fd_;
  bool buffered_;
  std::uint64_t id_;
  std::uint32_t merge_bytes_ = 0;
  std::uint16_t merge_segments_ = 0;
};

// What an IoContext did, for tests and benchmarks. Counts only; never reset.
struct IoStats {
  std::uint64_t submitted = 0;         // member requests accepted by submit_io/complete_later
  std::uint64_t sqes = 0;              // SQEs prepared (first attempts and resubmissions)
  std::uint64_t enters = 0;            // io_uring_submit/_and_wait calls that had work or waited
  std::uint64_t fixed_buffer_ios = 0;  // SQEs that used READ_FIXED/WRITE_FIXED
  std::uint64_t fixed_file_ios = 0;    // SQEs that used a registered file
  std::uint64_t short_resubmits = 0;   // partial transfers resubmitted for the remainder
  std::uint64_t again_retries = 0;     // -EAGAIN/-EINTR results retried
  std::uint64_t sq_full = 0;           // times the SQ was full when a request wanted an SQE
  std::uint64_t commands = 0;          // RingCommands accepted by submit_command
  std::uint64_t merged_ios = 0;        // vectored I/Os that carried several requests (merging)
  std::uint64_t merged_requests = 0;   // requests that went in them
  std::uint64_t merge_splits = 0;      // merged I/Os redone request by request (error, short)
  std::uint64_t gap_bytes = 0;         // bytes read through gaps between merged reads
};

// How to set up an IoContext's ring.
struct IoContextOptions {
  // Sizes the SQ ring (the number of SQEs one poll iteration can hand the kernel). More
  // requests than that may be in flight: a full SQ is submitted and refilled, and what still
  // does not fit waits in a backlog until completions make room. 1 to 32768.
  unsigned queue_depth = 256;
  // IORING_SETUP_SQE128: 128-byte SQEs, whose 80-byte command area holds an NVMe passthrough
  // command (struct nvme_uring_cmd, 72 bytes) or a ublk control command (32 bytes).
  bool big_sqe = false;
  // IORING_SETUP_CQE32: 32-byte CQEs with 16 extra bytes (NVMe passthrough's result dword).
  bool big_cqe = false;
  // SINGLE_ISSUER | DEFER_TASKRUN where the kernel has it (completion work runs only when the
  // owning thread asks for completions; fastest for member I/O). false: COOP_TASKRUN, which
  // runs it whenever the thread enters the kernel (ublk servers use that on queue rings, where
  // kernel-side teardown may wait for task work).
  bool defer_taskrun = true;
  // With big_sqe/big_cqe: where the kernel refuses them (before Linux 5.19), make a normal ring
  // instead of failing, and say once on stderr why. For threads that serve any member (big
  // entries are what NVMe passthrough members need; other members work on either ring): check
  // big_sqe()/big_cqe() to learn what was made.
  bool plain_if_refused = false;
  // Merging, as the block layer's plugging does for md: reads or writes submitted in one poll
  // pass that are contiguous on one file (one whose MemberFile has merge limits) go to the
  // kernel as one READV/WRITEV, each request still completing on its own. A merged I/O that
  // fails or comes back short is redone request by request, so errors land exactly where they
  // would without merging. Requests in kernel buffer windows are never merged (they have no
  // address for an iovec).
  bool merge = true;
  // Reads on one file separated by at most this many bytes are merged too, the gap read into a
  // scratch buffer: a RAID5/6 read spanning small strips then reads through the parity strips
  // between its data strips in one I/O instead of several (at 16 KiB and below the command costs
  // more than the transfer). 0: contiguous reads only. At most 1 MiB.
  std::uint32_t merge_read_gap = 16384;
};

// What a thread that serves members of every kind asks for: 128-byte SQEs and 32-byte CQEs (NVMe
// passthrough members need them; other members work on either ring), or a normal ring where the
// kernel has no big entries (said once on stderr; passthrough members then fail their requests).
inline IoContextOptions member_ring_options(unsigned queue_depth) {
  IoContextOptions o;
  o.queue_depth = queue_depth;
  o.big_sqe = true;
  o.big_cqe = true;
  o.plain_if_refused = true;
  return o;
}

// Per-thread I/O context: one io_uring, a local list of deferred tasks and an inbox for tasks
// posted from other threads (woken through an eventfd the ring reads). Besides member I/O the
// ring carries caller-built operations (RingCommand), so a thread that also serves ublk or
// drives NVMe passthrough still has one ring and sleeps in one poll(). Not thread-safe except
// post(); every other method must be called on the owning thread. Destroy it with nothing in
// flight (requests and commands still in the kernel then never complete).
class IoContext {
  struct Key {  // lets create() use make_unique while nothing else constructs an IoContext
    explicit Key() = default;
  };

 public:
  // Sets up the ring on the calling thread, which is the thread that must use it. Errors:
  // kInvalidArgument for a queue depth outside [1, 32768]; kUnsupported when the kernel
  // refuses the ring (the message says whether it was SQE128/CQE32 it refused: those need
  // Linux 5.19); kNoSpace when it is out of memory for it (RLIMIT_MEMLOCK on old kernels).
  static Result<std::unique_ptr<IoContext>> create(const IoContextOptions& options);
  // create() with default options and `queue_depth`.
  static Result<std::unique_ptr<IoContext>> create(unsigned queue_depth = 256);
  explicit IoContext(Key);
  ~IoContext();
  IoContext(const IoContext&) = delete;
  IoContext& operator=(const IoContext&) = delete;

  // Runs ready work: deferred and posted tasks, deferred completions, reaped completions (with
  // their callbacks and retries), then hands every SQE queued meanwhile to the kernel in one
  // submit. When `wait` is true and nothing ran, sleeps until something is ready (a completion
  // or a post) and runs it; with nothing in flight that means until another thread posts.
  // Returns the number of callbacks and tasks run. Not re-entrant: do not call it from a
  // callback or task.
  int poll(bool wait);

  // Queues `task` to run on this context's thread at its next poll(). Thread-safe and
  // lock-free; wakes the thread if it sleeps in poll(true). The context must outlive the call
  // (join or otherwise synchronise with posting threads before destroying it).
  void post(Task& task);
  // Queues `task` to run at this thread's next poll() (same thread only; no wake-up needed).
  void defer(Task& task);
  // Queues `task` to run at the end of this thread's current poll() pass, after the pass's tasks
  // and completions and before its SQEs go to the kernel (at the end of the next pass when
  // called outside poll()). For work that gathers what a pass produced into one submission
  // (ublk BATCH_IO's commit of every request the pass finished). Same thread only.
  void before_submit(Task& task);

  // Member I/Os and ring commands submitted and not yet completed (including deferred ones).
  std::uint32_t in_flight() const noexcept { return in_flight_; }

  const IoStats& stats() const noexcept;

  // The steady clock in nanoseconds as this thread's poll() last read it: at the start of each
  // pass and again just before it reaps completions (and at create()). For per-request
  // accounting (member latency) at two clock reads per pass rather than two per request: a
  // request is stamped with the reading before the tasks or callbacks that submit it, so a
  // latency measured between two stamps includes the rest of the submitting pass (at most a
  // pass's length), never a sleep in poll().
  std::int64_t clock_ns() const noexcept;

  // Whether the ring has 128-byte SQEs (IoContextOptions::big_sqe) / 32-byte CQEs (big_cqe).
  bool big_sqe() const noexcept;
  bool big_cqe() const noexcept;

  // Registers memory regions for fixed-buffer I/O (READ_FIXED/WRITE_FIXED): requests whose
  // buffer lies wholly inside a registered region use it; others use plain READ/WRITE. Replaces
  // earlier registrations; an empty list unregisters. REQUIRES: in_flight() == 0 (kBusy
  // otherwise). The regions must outlive the registration.
  Status register_buffers(std::span<const std::span<std::byte>> regions);
  // Registers one more region for fixed-buffer I/O, keeping the others (a sparse table of 16384
  // slots, filled one region at a time; no I/O needs to be idle). For long-lived memory that
  // many I/Os use (staging slabs, ublk tag buffers): the pages are pinned once, not per I/O.
  // kBusy when register_buffers() made the table; kInvalidArgument for an empty region, one
  // over 1 GiB or one overlapping a registered region; kNoSpace when every slot is taken or the
  // pages cannot be pinned (RLIMIT_MEMLOCK). Only the thread that polls this context may call
  // it. The region must stay valid until remove_buffer_region() or the context's end.
  Status add_buffer_region(std::span<std::byte> region);
  // Withdraws a region add_buffer_region() accepted (exactly that span; others are ignored).
  // I/O in flight on it finishes normally; later I/O on that memory uses plain READ/WRITE.
  void remove_buffer_region(std::span<std::byte> region) noexcept;
  // Takes a slot of the sparse table for buffers the kernel installs there itself (ublk's
  // AUTO_BUF_REG registers each request's pages in the slot its fetch names) and ties `window`
  // to it: an address range the caller reserved and never touches (PROT_NONE), standing for the
  // slot's buffer. Member reads and writes whose buffer lies in the window become
  // READ_FIXED/WRITE_FIXED on the slot, at the same offset into the kernel's buffer; nothing
  // else may use the window (registered_buffer() answers nullopt for it). Released with
  // remove_buffer_region(window). Errors as add_buffer_region(); same thread only.
  Result<std::uint16_t> add_kernel_buffer_slot(std::span<std::byte> window);
  // Whether [p, p + len) lies in a window of add_kernel_buffer_slot() (memory not to touch).
  bool in_kernel_buffer_window(const std::byte* p, std::size_t len) const noexcept;
  // Tests: puts user `memory` into kernel buffer `slot` as the kernel would put a request's
  // pages there, so that I/O on the slot's window lands in it at the same offsets (empty: takes
  // it out again).
  Status install_buffer_for_testing(std::uint16_t slot, std::span<std::byte> memory);

  // Low-level submission used by MemberDevice implementations: starts `req` on `file`, which
  // the caller keeps alive until the request completes. Does not check the request's range
  // (the device does that); a request with no way to start completes later with -errno.
  void submit_io(const std::shared_ptr<MemberFile>& file, MemberRequest& req);
  // Completes `req` with `result` at the next poll() (for faults and synchronous paths).
  void complete_later(MemberRequest& req, std::int32_t result);

  // Starts a caller-built operation (see RingCommand): its prep() runs now, or when a
  // submission slot frees up if the SQ is full; its SQE goes to the kernel with the next batch
  // (at the latest when this thread next polls). Counts in in_flight() until on_complete.
  void submit_command(RingCommand& cmd);
  // The same on `file`, which the caller keeps alive until the command completes: the context
  // sets the SQE's fd to the file's registered slot (IOSQE_FIXED_FILE) or, where the table has
  // no room, its plain fd. A null or closed file completes the command later with -EBADF.
  void submit_command(const std::shared_ptr<MemberFile>& file, RingCommand& cmd);

  // The index of the region registered with register_buffers() or add_buffer_region() that
  // wholly holds [p, p + len), for commands that use fixed buffers themselves (NVMe passthrough:
  // IORING_URING_CMD_FIXED with sqe->buf_index); nullopt when none does.
  std::optional<std::uint16_t> registered_buffer(const std::byte* p,
                                                 std::size_t len) const noexcept;

  // Registers a provided-buffer ring (io_uring_register_buf_ring, 5.19+) of `entries` (a power
  // of two) at `ring_memory` (page-aligned, 16 bytes per entry) as buffer group `group`, for
  // operations that pick their buffer themselves (IOSQE_BUFFER_SELECT). Use ProvidedBuffers
  // (provided_buffers.h) rather than these. kBusy when the group is taken, kUnsupported when the
  // kernel has no buffer rings. Same thread only.
  Status register_buffer_ring(void* ring_memory, std::uint32_t entries, std::uint16_t group);
  void unregister_buffer_ring(std::uint16_t group) noexcept;

  // Test seam: `filter` sees every CQE result of a member request before the layer acts on it
  // and returns the result to act on — how tests fake -EAGAIN and short transfers, which the
  // kernel rarely produces on demand. nullptr (the default) turns it off.
  using ResultFilter = std::int32_t (*)(const MemberRequest& req, std::int32_t result, void* arg);
  void set_result_filter_for_testing(ResultFilter filter, void* arg) noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::uint32_t in_flight_ = 0;
};

// What storage a member really is, whatever path named it: a block device by its device number
// (st_rdev), an NVMe generic character device by its own (block false, ino 0), a regular file by
// its filesystem and inode (st_dev, st_ino). Two members with equal identities are one drive
// under two names (a symlink, a hard link, "dir/./m0"); an array must never take both. (A
// namespace's /dev/ngXnY and /dev/nvmeXnY differ here; OpenOptions::exclusive keeps them apart.)
// `known` is false for devices that cannot tell (test doubles).
struct DeviceIdentity {
  bool known = false;
  bool block = false;
  std::uint64_t dev = 0;  // st_rdev of a block or character device, st_dev of a file
  std::uint64_t ino = 0;  // 0 for a device (no file has inode 0)

  friend bool operator==(const DeviceIdentity&, const DeviceIdentity&) = default;
};

// How a member reaches its drive: O_DIRECT reads and writes (a block device or a file), buffered
// ones (a filesystem without O_DIRECT), or NVMe commands on a generic character device
// (/dev/ngXnY, IORING_OP_URING_CMD; see docs/nvme.md).
enum class MemberIoMode : std::uint8_t { kDirect, kBuffered, kPassthrough };

// A drive. Thread-safe: any thread may submit through its own IoContext.
class MemberDevice {
 public:
  virtual ~MemberDevice() = default;

  virtual const std::string& path() const noexcept = 0;
  // Usable size in bytes (a file's length, a block device's capacity).
  virtual std::uint64_t size() const noexcept = 0;
  // False when the member was opened buffered (the filesystem refused O_DIRECT, or asked for):
  // data then sits in the page cache until a flush, which is a full fsync.
  virtual bool direct_io() const noexcept { return true; }
  virtual MemberIoMode io_mode() const noexcept {
    return direct_io() ? MemberIoMode::kDirect : MemberIoMode::kBuffered;
  }
  // The smallest I/O unit the device accepts with direct I/O: BLKSSZGET for a block device (512
  // or 4096), for a file the filesystem's direct-I/O offset alignment when it reports one
  // (STATX_DIOALIGN) and 512 otherwise. Requests must be multiples of it, aligned to it.
  virtual std::uint32_t logical_block_size() const noexcept { return 512; }
  // The storage behind this member (see DeviceIdentity).
  virtual DeviceIdentity identity() const noexcept { return {}; }

  // True when bytes [offset, +len) are known to read as zeroes without reading them: a regular
  // file with no data there (a hole, as a freshly created or truncated file is). False when
  // unknown, which is always safe. Block devices answer false: BLKDISCARDZEROES reports 0 on
  // every kernel since 4.12, so only zeroing them (zero_range) proves anything.
  virtual bool reads_zeroes(std::uint64_t /*offset*/, std::uint64_t /*len*/) { return false; }
  // Makes bytes [offset, +len) read as zeroes: punches a hole in a regular file, BLKZEROOUT on a
  // block device (the kernel uses the drive's write-zeroes or deallocate where it guarantees
  // zeroes, and writes zeroes otherwise). Blocking; for initialisation, not the data path.
  // kUnsupported where the device cannot, kOutOfRange beyond size().
  virtual Status zero_range(std::uint64_t offset, std::uint64_t len) {
    (void)offset;
    (void)len;
    return make_error(Errc::kUnsupported, "{}: cannot zero a range", path());
  }

  // Starts one I/O on this thread's context; see the completion contract above.
  virtual void submit(IoContext& ctx, MemberRequest& req) = 0;

  // Blocking I/O for metadata and tools (superblocks, bitmaps); not for the data path. `buf`
  // must be 4096-byte aligned (O_DIRECT), `offset` and the length multiples of 512, and the
  // range inside [0, size()): kInvalidArgument / kOutOfRange otherwise. Short transfers and
  // EINTR are retried; an early end of file is kIoError.
  virtual Status read_sync(std::uint64_t offset, std::span<std::byte> buf) = 0;
  virtual Status write_sync(std::uint64_t offset, std::span<const std::byte> buf) = 0;
  virtual Status flush_sync() = 0;
};

struct OpenOptions {
  // Create a regular file of `create_size` bytes if it is missing, or grow a smaller one to
  // that size; a larger existing file is refused, never shrunk. Ignored for block devices.
  bool create = false;
  std::uint64_t create_size = 0;
  bool exclusive = true;  // O_EXCL on block devices: refuse a device in use (mounted, md)
  bool direct = true;     // O_DIRECT (falling back to buffered if refused); false: buffered
  // Regular files: take an exclusive advisory lock (flock LOCK_EX | LOCK_NB) on the opened file
  // and refuse with kBusy ("<path> is in use (locked by another process)") a file that another
  // open of it holds locked, in this process or another: what keeps a second graidd off a file
  // member, as O_EXCL does for block devices (for which this adds nothing). The lock is taken
  // before a file is grown and belongs to the open file, so it lasts until the member is closed
  // and every IoContext that registered the file has dropped it (at its next poll()), as the
  // O_EXCL claim does. Advisory: programs that do not flock are not kept out. kUnsupported where
  // the filesystem cannot lock. Off by default, since tests open one file twice in a process.
  bool lock = false;
};

// Opens a regular file or block device with O_DIRECT. Where the filesystem refuses O_DIRECT the
// file is opened buffered, with a one-line warning on stderr, and flushes become fsync.
//
// An NVMe generic character device (/dev/ngXnY) opens as a passthrough member (docs/nvme.md):
// NVMe commands through IORING_OP_URING_CMD, which needs IoContexts created with big_sqe and
// big_cqe (on any other context each request fails with -EOPNOTSUPP). Its size, LBA size and
// transfer limit come from Identify; formats with metadata or protection information are
// refused. OpenOptions for it: `create` and `direct` do not apply; `lock` takes the flock as for
// files; `exclusive` has no O_EXCL of its own to use (character devices have no exclusive
// claim), so it claims the namespace's block device /dev/nvmeXnY with O_EXCL instead, where the
// kernel made one: a mounted namespace, or one in md or another graidd, is refused as in use.
//
// Anything else (a directory, another character device, an empty file) is refused with a Status
// naming the path.
Result<std::unique_ptr<MemberDevice>> open_member(const std::string& path,
                                                  const OpenOptions& options = {});

// The other device node of an NVMe namespace: its generic character device (/dev/ngXnY) for its
// block device (/dev/nvmeXnY), and back, as sysfs pairs them (same numbers in the names, same
// parent controller). kNotFound when `path` has none (a partition, a file, a namespace the kernel
// made no block device for); kInvalidArgument when `path` cannot be looked at.
Result<std::string> nvme_sibling_path(const std::string& path);

// An NVMe controller's SMART / Health Information log (Get Log Page 02h, controller-wide), as
// `describe pd` shows it (docs/cli.md).
struct NvmeHealth {
  // Critical Warning bits: 0 available spare below its threshold, 1 a temperature past a
  // threshold, 2 NVM subsystem reliability degraded (media or internal errors), 3 media placed in
  // read-only mode, 4 volatile memory backup failed, 5 persistent memory region read-only.
  std::uint8_t critical_warning = 0;
  std::uint16_t temperature_kelvin = 0;  // composite temperature
  std::uint8_t available_spare = 0;      // percent
  std::uint8_t available_spare_threshold = 0;
  std::uint8_t percentage_used = 0;  // of the rated endurance (may exceed 100)
  // 128-bit counters in the log; held here as 64 bits (saturated).
  std::uint64_t data_units_read = 0, data_units_written = 0;  // thousands of 512-byte units
  std::uint64_t power_cycles = 0, power_on_hours = 0, unsafe_shutdowns = 0;
  std::uint64_t media_errors = 0;       // media and data integrity errors
  std::uint64_t error_log_entries = 0;  // error information log entries
};
inline constexpr std::size_t kNvmeSmartLogBytes = 512;

// Decodes a SMART / Health Information log page (at least 512 bytes; kInvalidArgument if
// shorter).
Result<NvmeHealth> parse_nvme_smart_log(std::span<const std::byte> page);
// The names of the Critical Warning bits set in `bits` ("available spare below threshold",
// ...), for messages.
std::string nvme_critical_warning_text(std::uint8_t bits);
// Reads the log from the NVMe device at `path` (a namespace's block device /dev/nvmeXnY, its
// generic device /dev/ngXnY, or a controller /dev/nvmeX), opened read-only and without O_EXCL so a
// running array's hold is no obstacle. kUnsupported for a device that is not NVMe; kIoError with
// the NVMe status or errno otherwise (admin commands need root).
Result<NvmeHealth> read_nvme_health(const std::string& path);

}  // namespace graid
