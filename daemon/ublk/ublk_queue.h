// One ublk queue: `depth` tags, each a request slot that cycles
//
//   fetch ─► (kernel delivers a request) ─► ArrayIo on the VD ─► commit result + fetch again
//     ▲                                                                    │
//     └────────────────────────────────────────────────────────────────────┘
//
// until the kernel answers a fetch with an abort (the device is stopping: that tag is done).
// A queue may also be split over threads by tag (TagSet: each UblkQueue serves some of the
// queue's tags, on its own thread and ring), where the driver lets any task serve any tag
// (PER_IO_DAEMON, 6.16+). The parts share nothing but the array: each tag's fetches, copies,
// registrations and commits stay with its part.
//
// Everything runs on the thread that owns the IoContext: fetches and commits are ring commands
// on the same ring as the thread's member I/O (the transport), requests are ArrayIos on that
// thread's ArrayQueue, so the thread sleeps in one IoContext::poll() for both.
//
// With a helper lane (set_helper(), ublk_helper_lane.h) the queue spreads its RAID work over two
// threads: while more than one request is being served, a READ or WRITE whose first stripe is
// odd is submitted on the helper's thread instead (posted there, and its completion posted
// back), so each stripe's requests stay on one thread as far as the load allows. Fetches,
// copies and commits never move.
//
// Where request data goes (DataPath): copy mode (kKernelCopy) gives the driver a buffer per tag
// to copy into and out of; USER_COPY (kUserCopy) copies a request's data itself, into a buffer
// taken for the request being served; zero copy (kZeroCopy: AUTO_BUF_REG with USER_COPY)
// serves READs straight into the request's own pages, which the driver registers in this
// thread's ring at each fetch (a slot per tag, named in the fetch): member reads land there as
// fixed-buffer I/O (ArrayIo kIoKernelBuffer), nothing is copied; on RAID0, RAID1 and RAID10,
// WRITEs likewise go to every member straight from those pages. Everything else (parity levels'
// writes: parity is computed from the data), and a request the engine can only serve with the
// CPU (a degraded or repaired read) or whose pages the driver could not register, goes the
// USER_COPY way; zero-copy requests are never moved to the helper lane (its ring has not the
// pages).
//
// Every request the kernel delivers is committed exactly once, whatever happens (an engine error
// becomes -errno in the commit, this boundary being the only place errno appears); a tag is never
// fetched while its request is being served, nor after an abort. `stats()` counts both sides so
// tests and `stats` can check it.
//
// The kernel side is behind QueueTransport, so the tag logic is tested without a kernel (a fake
// transport acts as the driver) and the real one (KernelQueueTransport, ublk_kernel_queue.h)
// stays a thin layer of ring commands.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "graid/array.h"
#include "graid/buffer.h"
#include "graid/status.h"
#include "nbd/buffer_pool.h"
#include "ublk/mapped_buffer.h"
#include "ublk/ring_regions.h"
#include "ublk/ublk_helper_lane.h"
#include "ublk/ublk_uapi.h"

namespace graid::ublk {

class UblkQueue;

enum class DataPath : std::uint8_t { kKernelCopy, kUserCopy, kZeroCopy };

// The tags of a queue that one UblkQueue serves: first, first + stride, ... below the queue's
// depth. All of them (first 0, stride 1) unless the queue is split over threads, which the
// driver allows from 6.16 (PER_IO_DAEMON: each tag is served by the task that fetched it).
struct TagSet {
  std::uint16_t first = 0;
  std::uint16_t stride = 1;
  // How many of `depth` tags the set holds.
  std::uint16_t count(std::uint16_t depth) const noexcept {
    return first >= depth ? 0 : static_cast<std::uint16_t>((depth - first + stride - 1) / stride);
  }
  bool holds(std::uint16_t tag) const noexcept {
    return tag >= first && (tag - first) % stride == 0;
  }
  std::uint16_t tag(std::uint16_t index) const noexcept {
    return static_cast<std::uint16_t>(first + index * stride);
  }
  std::uint16_t index(std::uint16_t tag) const noexcept {
    return static_cast<std::uint16_t>((tag - first) / stride);
  }
};
// "kernel", "user", "zero".
const char* data_path_name(DataPath path) noexcept;

// The driver's side of one queue. Calls come from the queue's thread; each fetch completes
// later, on that thread, through UblkQueue::fetch_done(tag, res) (never inline).
class QueueTransport {
 public:
  virtual ~QueueTransport() = default;
  // FETCH_REQ (`commit` false) or COMMIT_AND_FETCH_REQ with `result` for `tag`; `buf` is the
  // tag's data buffer (copy mode), null with USER_COPY; `buf_slot` the ring slot where the
  // driver is to register the next request's pages (zero copy), -1 otherwise.
  virtual void fetch(std::uint16_t tag, bool commit, std::int32_t result, std::byte* buf,
                     std::int32_t buf_slot) = 0;
  // USER_COPY: copies the request data of `tag` (being served) into `buf` (`to_request` false:
  // a WRITE's payload) or `buf` into the request (true: a READ's data), `len` bytes from its
  // start. Completes later through UblkQueue::copy_done(tag, res): bytes copied or -errno.
  virtual void copy(std::uint16_t tag, bool to_request, std::byte* buf, std::uint32_t len) = 0;
  // The descriptor of the request a fetch of `tag` just delivered.
  virtual IoDesc desc(std::uint16_t tag) const = 0;
  // Binds the completions to `queue` (called once, before the first fetch).
  virtual void bind(UblkQueue& queue) = 0;
  // Commands other than fetches sent or waiting to be sent and not yet answered (BATCH_IO's
  // PREP and COMMIT): the queue is not quiet while there are any. A fetch per tag has none.
  virtual bool sending() const { return false; }
};

struct UblkQueueStats {
  std::uint64_t requests = 0;  // delivered by the kernel
  std::uint64_t commits = 0;   // results committed (== requests once idle)
  std::uint64_t errors = 0;    // committed with -errno
  std::uint64_t reads = 0, writes = 0, flushes = 0, discards = 0, write_zeroes = 0;
  std::uint64_t read_bytes = 0, write_bytes = 0;
  std::uint64_t unsupported = 0;  // ops graid does not serve (answered -EOPNOTSUPP)
  std::uint64_t aborted_tags = 0;
  std::uint64_t copy_errors = 0;  // USER_COPY copies that failed (the request got -EIO)
  std::uint64_t spread = 0;  // requests served on another thread (helper lane, or a part not first)
  std::uint64_t zero_copy_reads = 0;      // READs served straight into the request's pages
  std::uint64_t zero_copy_writes = 0;     // WRITEs served straight from them (RAID0/1/10)
  std::uint64_t zero_copy_fallbacks = 0;  // READs and WRITEs meant to, served through a copy

  UblkQueueStats& operator+=(const UblkQueueStats& o) noexcept {
    requests += o.requests;
    commits += o.commits;
    errors += o.errors;
    reads += o.reads;
    writes += o.writes;
    flushes += o.flushes;
    discards += o.discards;
    write_zeroes += o.write_zeroes;
    read_bytes += o.read_bytes;
    write_bytes += o.write_bytes;
    unsupported += o.unsupported;
    aborted_tags += o.aborted_tags;
    copy_errors += o.copy_errors;
    spread += o.spread;
    zero_copy_reads += o.zero_copy_reads;
    zero_copy_writes += o.zero_copy_writes;
    zero_copy_fallbacks += o.zero_copy_fallbacks;
    return *this;
  }
};

// Copy mode: the first bytes of every tag's buffer are registered in the thread's ring, so that
// member I/O of small requests (the many) goes to and from them as fixed buffers, with no page
// pinning per I/O. Only the heads: registering pins the pages, and whole buffers would pin the
// device's entire budget (256 MiB by default) whether or not large requests ever come.
inline constexpr std::size_t kRegisteredTagBytes = 64 << 10;

class UblkQueue {
 public:
  // On the thread owning `ctx`: attaches an ArrayQueue of `array` there. Copy mode
  // (kKernelCopy) allocates every tag's buffer (depth x max_io_bytes) for the driver to copy
  // into and out of; USER_COPY takes a buffer per request being served, of its size, from a pool
  // that keeps at most `pool_cache_bytes` of free ones; zero copy takes that pool too and a slot
  // of the ring's buffer table per tag (kNoSpace when the ring has too few left). `vd` is the
  // extent served; `transport` the driver side; `tags` which of the queue's `depth` tags this
  // part serves (all of them by default; everything above is per tag served).
  static Result<std::unique_ptr<UblkQueue>> create(IoContext& ctx, Array& array, VdInfo vd,
                                                   std::uint16_t q_id, std::uint16_t depth,
                                                   std::uint32_t max_io_bytes,
                                                   std::unique_ptr<QueueTransport> transport,
                                                   DataPath path = DataPath::kKernelCopy,
                                                   TagSet tags = {},
                                                   std::uint64_t pool_cache_bytes = 32ull << 20);
  // REQUIRES: finished() or start() never called (no request may be in flight).
  ~UblkQueue();
  UblkQueue(const UblkQueue&) = delete;
  UblkQueue& operator=(const UblkQueue&) = delete;

  // Lets the queue hand READs and WRITEs to `lane`, an ArrayQueue of the same array on another
  // thread (see above). REQUIRES: before start(), on the owning thread; `lane` outlives every
  // request handed to it (it does once finished() is true).
  void set_helper(HelperLane& lane);
  // The memory registered in the owning thread's ring for fixed-buffer member I/O (copy mode:
  // the heads of the tags' buffers), for a helper lane to register in its own ring.
  std::span<const std::span<std::byte>> registered_regions() const noexcept {
    return registered_.regions();
  }

  // Fetches every tag (on the owning thread).
  void start();
  // The VD grew (UblkDevice::resize): requests up to `bytes` are served from now on. On the
  // owning thread; set_helper_vd_size() likewise on the helper lane's thread, which reads its
  // own copy.
  void set_vd_size(std::uint64_t bytes) noexcept { vd_.size = bytes; }
  // Lets go of the array (its ArrayQueue, and the helper lane's use) while the tags stay: a
  // device handed over with fetches still pending (UblkDevice::hand_over) keeps its queue until
  // they are cancelled, but its array may stop. A request delivered after this fails with EIO
  // (the quiesced driver delivers none). REQUIRES: serving() == 0, on the owning thread; the
  // helper lane is then destroyed by the caller, on its thread.
  void detach_array();
  void set_helper_vd_size(std::uint64_t bytes) noexcept { helper_vd_.size = bytes; }
  // Requests served here count as moved (stats().spread): this part is not the queue's first.
  void set_away(bool away) noexcept { away_ = away; }
  // Every tag aborted by the kernel and nothing in flight: the queue may be destroyed.
  bool finished() const noexcept { return started_ && done_tags_ == tags_.size(); }
  // The first fetch error other than an abort (the device refused the queue), or ok.
  const Status& error() const noexcept { return error_; }

  // From the transport: a fetch (or commit-and-fetch) of `tag` completed with `res`.
  void fetch_done(std::uint16_t tag, std::int32_t res);
  // From the transport: a USER_COPY copy of `tag` completed with `res`.
  void copy_done(std::uint16_t tag, std::int32_t res);
  bool user_copy() const noexcept { return user_copy_; }
  DataPath data_path() const noexcept { return path_; }

  std::uint16_t id() const noexcept { return q_id_; }
  // The tags served here (all of the queue's unless split, TagSet).
  std::uint16_t depth() const noexcept { return static_cast<std::uint16_t>(tags_.size()); }
  const TagSet& tag_set() const noexcept { return tag_set_; }
  // Requests being served (delivered, not yet committed).
  std::uint32_t serving() const noexcept { return serving_; }
  // Of those, the ones handed to the helper lane and not yet back.
  std::uint32_t on_helper() const noexcept { return on_helper_; }
  // Nothing being served and every commit answered: what is left are fetches waiting.
  bool quiet() const { return serving_ == 0 && on_helper_ == 0 && !transport_->sending(); }
  const UblkQueueStats& stats() const noexcept { return stats_; }
  // Copy mode: the tags' buffers (depth × max I/O) and how much of them is in memory now (only
  // what requests have touched, and the registered heads); 0 with USER_COPY.
  std::size_t tag_buffer_bytes() const noexcept { return buffers_.size(); }
  // Zero copy: the address space standing for the tags' request pages (never to be touched).
  std::span<const std::byte> zero_copy_windows() noexcept {
    return {windows_.data(), windows_.size()};
  }
  std::size_t tag_buffer_resident_bytes() const { return buffers_.resident_bytes(); }

  struct Tag;

 private:
  UblkQueue() = default;
  // The tag's state, null when this part does not serve `tag`.
  Tag* find(std::uint16_t tag) noexcept;
  void serve(Tag& t);
  // Starts `t` on the ArrayQueue of this thread or of the helper lane.
  void submit(Tag& t);
  void io_done(Tag& t, const Status& st);
  // USER_COPY: a buffer from the pool for the request `t` serves (t.buf, t.held).
  Status take_buffer(Tag& t);
  void commit(Tag& t, std::int32_t result);

  std::unique_ptr<QueueTransport> transport_;
  std::unique_ptr<ArrayQueue> queue_;
  VdInfo vd_;
  VdInfo helper_vd_;  // vd_ as the helper lane's thread sees it
  std::uint16_t q_id_ = 0;
  TagSet tag_set_;
  bool away_ = false;
  std::uint32_t max_io_ = 0;
  std::uint32_t logical_block_ = 512;
  bool user_copy_ = false;      // USER_COPY or zero copy: the queue copies what it copies itself
  bool kernel_writes_ = false;  // zero copy of WRITEs too: the array is RAID0, RAID1 or RAID10
  DataPath path_ = DataPath::kKernelCopy;
  MappedBuffer buffers_;      // copy mode: every tag's buffer (untouched until used)
  MappedBuffer windows_;      // zero copy: address space standing for the tags' request pages
  RingRegions kernel_slots_;  // zero copy: the windows' slots in ctx_; after windows_ (goes first)
  IoContext* ctx_ = nullptr;  // the thread's ring (the tags' buffer heads are registered there)
  HelperLane* helper_ = nullptr;
  std::uint64_t stripe_bytes_ = 0;  // data bytes per stripe: a request's home is its first stripe
  RingRegions registered_;  // the tags' buffer heads in ctx_; declared after buffers_ (goes first)
  std::unique_ptr<nbd::BufferPool> pool_;  // USER_COPY: buffers of the requests being served
  std::vector<std::unique_ptr<Tag>> tags_;
  std::size_t done_tags_ = 0;
  std::uint32_t serving_ = 0;
  std::uint32_t on_helper_ = 0;
  bool started_ = false;
  Status error_;
  UblkQueueStats stats_;
};

}  // namespace graid::ublk
