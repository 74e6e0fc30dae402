#include "ublk/ublk_queue.h"

#include <algorithm>
#include <cerrno>

namespace graid::ublk {

const char* data_path_name(DataPath path) noexcept {
  switch (path) {
    case DataPath::kKernelCopy:
      return "kernel";
    case DataPath::kUserCopy:
      return "user";
    case DataPath::kZeroCopy:
      return "zero";
  }
  return "unknown";
}

struct UblkQueue::Tag final : ArrayIo {
  enum class State : std::uint8_t { kIdle, kFetching, kServing, kDone };
  // A hop of a request served on the helper lane: there (submit) and back (complete).
  struct Hop final : Task {
    Tag* tag = nullptr;
    bool there = false;
    void run() override { there ? tag->start_on_helper() : tag->finish_from_helper(); }
  };
  UblkQueue* queue = nullptr;
  std::uint16_t tag = 0;      // the queue's tag
  std::uint16_t index = 0;    // its place in this part (buffers and windows go by it)
  std::byte* data = nullptr;  // copy mode: this tag's buffer (ArrayIo::buf points at it)
  AlignedBuffer held;         // USER_COPY: the buffer of the request being served
  bool copying = false;       // USER_COPY: a copy is in flight
  std::int32_t slot = -1;     // zero copy: where the driver registers this tag's requests
  State state = State::kIdle;
  std::uint8_t op = 0;
  bool on_helper = false;  // submitted on the helper lane; completes there
  Status helper_status;    // its outcome, carried back
  Hop to_helper, from_helper;

  void on_complete(Status status) override {
    if (!on_helper) {
      queue->io_done(*this, status);
      return;
    }
    // On the helper's thread: the result goes home, where the commit is made.
    helper_status = std::move(status);
    queue->ctx_->post(from_helper);
  }
  void start_on_helper() { queue->helper_->queue().submit(*this, queue->helper_vd_); }
  void finish_from_helper() {
    on_helper = false;
    --queue->on_helper_;
    queue->io_done(*this, helper_status);
  }
};

Result<std::unique_ptr<UblkQueue>> UblkQueue::create(IoContext& ctx, Array& array, VdInfo vd,
                                                     std::uint16_t q_id, std::uint16_t depth,
                                                     std::uint32_t max_io_bytes,
                                                     std::unique_ptr<QueueTransport> transport,
                                                     DataPath path, TagSet tags,
                                                     std::uint64_t pool_cache_bytes) {
  const bool user_copy = path != DataPath::kKernelCopy;
  if (depth == 0 || depth > kMaxQueueDepth)
    return make_error(Errc::kInvalidArgument, "ublk queue depth {}: must be 1..{}", depth,
                      kMaxQueueDepth);
  if (max_io_bytes == 0 || max_io_bytes % 4096 != 0)
    return make_error(Errc::kInvalidArgument, "ublk request size {}: not a 4 KiB multiple",
                      max_io_bytes);
  if (!transport) return make_error(Errc::kInvalidArgument, "ublk queue without a transport");
  if (tags.stride == 0 || tags.count(depth) == 0)
    return make_error(Errc::kInvalidArgument, "ublk queue {}: no tag from {} by {} below {}", q_id,
                      tags.first, tags.stride, depth);
  const std::uint16_t served = tags.count(depth);
  auto attached = array.attach(ctx);
  if (!attached.is_ok()) return attached.status();
  std::unique_ptr<UblkQueue> q(new UblkQueue());
  q->queue_ = std::move(*attached);
  q->transport_ = std::move(transport);
  q->helper_vd_ = vd;
  q->vd_ = std::move(vd);
  q->q_id_ = q_id;
  q->tag_set_ = tags;
  q->max_io_ = max_io_bytes;
  q->logical_block_ = array.logical_block_size();
  q->user_copy_ = user_copy;
  q->path_ = path;
  q->kernel_writes_ =
      path == DataPath::kZeroCopy && array.geometry().redundancy() != Redundancy::kParity;
  q->ctx_ = &ctx;
  q->stripe_bytes_ = array.geometry().stripe_data_bytes();
  std::vector<std::uint16_t> slots;
  if (path == DataPath::kZeroCopy) {
    // Each tag's window stands for its request's pages, which the driver puts in the tag's slot.
    auto windows = MappedBuffer::reserve(std::size_t{served} * max_io_bytes);
    if (!windows.is_ok()) return windows.status();
    q->windows_ = std::move(*windows);
    std::vector<std::span<std::byte>> each;
    for (std::uint16_t i = 0; i < served; ++i)
      each.emplace_back(q->windows_.data() + std::size_t{i} * max_io_bytes, max_io_bytes);
    auto taken = RingRegions::kernel_slots(ctx, each, slots);
    if (!taken.is_ok()) return taken.status();
    q->kernel_slots_ = std::move(*taken);
  }
  if (user_copy) {
    q->pool_ = std::make_unique<nbd::BufferPool>(pool_cache_bytes);
  } else {
    auto buffers = MappedBuffer::map(std::size_t{served} * max_io_bytes);
    if (!buffers.is_ok()) return buffers.status();
    q->buffers_ = std::move(*buffers);
    // Member reads and writes go straight to and from the tags' buffers: each tag's head is
    // registered (kRegisteredTagBytes). A refusal (no slot left, RLIMIT_MEMLOCK) leaves the rest
    // unregistered: their I/O still works, pinning pages per request.
    const std::size_t head = std::min<std::size_t>(max_io_bytes, kRegisteredTagBytes);
    std::vector<std::span<std::byte>> heads;
    for (std::uint16_t i = 0; i < served; ++i)
      heads.emplace_back(q->buffers_.data() + std::size_t{i} * max_io_bytes, head);
    q->registered_ = RingRegions(ctx, heads);
  }
  q->tags_.reserve(served);
  for (std::uint16_t i = 0; i < served; ++i) {
    auto t = std::make_unique<Tag>();
    t->queue = q.get();
    t->tag = tags.tag(i);
    t->index = i;
    if (!user_copy) t->data = q->buffers_.data() + std::size_t{i} * max_io_bytes;
    if (!slots.empty()) t->slot = slots[i];
    t->buf = t->data;
    t->to_helper.tag = t->from_helper.tag = t.get();
    t->to_helper.there = true;
    q->tags_.push_back(std::move(t));
  }
  q->transport_->bind(*q);
  return q;
}

UblkQueue::~UblkQueue() = default;  // here, where Tag is complete

void UblkQueue::set_helper(HelperLane& lane) {
  helper_ = &lane;
}

void UblkQueue::start() {
  started_ = true;
  for (auto& t : tags_) {
    t->state = Tag::State::kFetching;
    transport_->fetch(t->tag, /*commit=*/false, 0, t->data, t->slot);
  }
}

UblkQueue::Tag* UblkQueue::find(std::uint16_t tag) noexcept {
  if (!tag_set_.holds(tag)) return nullptr;
  const std::uint16_t i = tag_set_.index(tag);
  return i < tags_.size() ? tags_[i].get() : nullptr;
}

void UblkQueue::fetch_done(std::uint16_t tag, std::int32_t res) {
  Tag* found = find(tag);
  if (found == nullptr) return;  // not ours: the transport is broken; nothing to answer
  Tag& t = *found;
  if (t.state != Tag::State::kFetching) return;  // a second completion: never act twice
  if (res == kIoResOk) {
    t.state = Tag::State::kServing;
    ++serving_;
    ++stats_.requests;
    if (away_) ++stats_.spread;
    serve(t);
    return;
  }
  // -ENODEV: the device is going away; anything else: the driver refused the fetch. Either way
  // this tag is finished.
  if (res != -ENODEV && error_.is_ok())
    error_ = make_error(Errc::kIoError, "ublk queue {} tag {}: fetch failed: errno {}", q_id_, tag,
                        -res);
  t.state = Tag::State::kDone;
  ++stats_.aborted_tags;
  ++done_tags_;
}

void UblkQueue::serve(Tag& t) {
  const IoDesc d = transport_->desc(t.tag);
  t.op = static_cast<std::uint8_t>(d.op_flags & 0xff);
  const std::uint32_t flags = d.op_flags;
  const std::uint64_t offset = d.start_sector << 9;
  const std::uint64_t bytes = std::uint64_t{d.nr_sectors} << 9;
  t.flags = 0;
  t.buf = t.data;
  switch (t.op) {
    case kOpRead:
    case kOpWrite:
      if (bytes == 0 || bytes > max_io_) {
        commit(t, -EINVAL);
        return;
      }
      t.kind = t.op == kOpRead ? IoKind::kRead : IoKind::kWrite;
      if (t.op == kOpWrite && (flags & kIoFFua)) t.flags |= kIoFua;
      break;
    case kOpFlush:
      t.kind = IoKind::kFlush;
      break;
    case kOpDiscard:
      t.kind = IoKind::kDiscard;
      break;
    case kOpWriteZeroes:
      t.kind = IoKind::kWriteZeroes;
      if (flags & kIoFNoUnmap) t.flags |= kIoNoUnmap;
      break;
    default:
      ++stats_.unsupported;
      commit(t, -EOPNOTSUPP);
      return;
  }
  if (t.kind != IoKind::kFlush && bytes > 0xffffffffull) {
    commit(t, -EINVAL);
    return;
  }
  t.offset = t.kind == IoKind::kFlush ? 0 : offset;
  t.len = t.kind == IoKind::kFlush ? 0 : static_cast<std::uint32_t>(bytes);
  const bool zero = t.kind == IoKind::kRead || (t.kind == IoKind::kWrite && kernel_writes_);
  if (path_ == DataPath::kZeroCopy && zero && queue_ != nullptr) {
    if ((flags & kIoFNeedRegBuf) == 0) {
      // Straight into (or from) the request's pages, on this thread (whose ring holds them).
      t.buf = windows_.data() + std::size_t{t.index} * max_io_;
      t.flags |= kIoKernelBuffer;
      queue_->submit(t, vd_);
      return;
    }
    ++stats_.zero_copy_fallbacks;  // the driver could not register them: copy
  }
  if (user_copy_ && (t.kind == IoKind::kRead || t.kind == IoKind::kWrite)) {
    if (Status st = take_buffer(t); !st) {
      commit(t, -ENOMEM);
      return;
    }
    if (t.kind == IoKind::kWrite) {
      // The payload first: copied out of the request, then written.
      t.copying = true;
      transport_->copy(t.tag, /*to_request=*/false, t.buf, t.len);
      return;
    }
  }
  // Out-of-range and misaligned requests complete with an error from the engine (at its next
  // poll), so every path goes through io_done().
  submit(t);
}

Status UblkQueue::take_buffer(Tag& t) {
  auto buf = pool_->take(t.len);
  if (!buf.is_ok()) return buf.status();
  t.held = std::move(*buf);
  t.buf = t.held.data();
  return Status::ok();
}

void UblkQueue::detach_array() {
  helper_ = nullptr;
  queue_.reset();
}

void UblkQueue::submit(Tag& t) {
  if (!queue_) {
    commit(t, -EIO);  // detached (handed over): nothing to serve it with
    return;
  }
  const bool data = t.kind == IoKind::kRead || t.kind == IoKind::kWrite;
  if (helper_ != nullptr && data && serving_ > 1 && stripe_bytes_ > 0 &&
      ((vd_.start + t.offset) / stripe_bytes_) % 2 == 1) {
    ++stats_.spread;
    ++on_helper_;
    t.on_helper = true;
    helper_->context().post(t.to_helper);
    return;
  }
  queue_->submit(t, vd_);
}

void UblkQueue::copy_done(std::uint16_t tag, std::int32_t res) {
  Tag* found = find(tag);
  if (found == nullptr) return;
  Tag& t = *found;
  if (t.state != Tag::State::kServing || !t.copying) return;  // not waiting for a copy
  t.copying = false;
  if (res != static_cast<std::int32_t>(t.len)) {
    ++stats_.copy_errors;
    commit(t, res < 0 ? res : -EIO);
    return;
  }
  if (t.kind == IoKind::kWrite) {
    submit(t);  // the payload is in: write it
    return;
  }
  ++stats_.reads;  // the data is in the request: done
  stats_.read_bytes += t.len;
  commit(t, static_cast<std::int32_t>(t.len));
}

void UblkQueue::io_done(Tag& t, const Status& st) {
  if ((t.flags & kIoKernelBuffer) != 0) {  // served into the request's own pages
    t.flags &= static_cast<std::uint8_t>(~kIoKernelBuffer);
    if (st.is_ok()) {
      if (t.kind == IoKind::kRead) {
        ++stats_.reads;  // the data is in the request already
        ++stats_.zero_copy_reads;
        stats_.read_bytes += t.len;
      } else {
        ++stats_.writes;
        ++stats_.zero_copy_writes;
        stats_.write_bytes += t.len;
      }
      commit(t, static_cast<std::int32_t>(t.len));
      return;
    }
    if (st.code() == Errc::kUnsupported) {
      // A path that needs the data in memory (degraded, repaired) or a member that cannot take
      // the pages (NVMe passthrough), refused before anything was done: the USER_COPY way.
      ++stats_.zero_copy_fallbacks;
      if (Status taken = take_buffer(t); !taken) {
        commit(t, -ENOMEM);
        return;
      }
      if (t.kind == IoKind::kWrite) {
        t.copying = true;  // the payload first, then written (copy_done)
        transport_->copy(t.tag, /*to_request=*/false, t.buf, t.len);
        return;
      }
      submit(t);
      return;
    }
  }
  if (!st) {
    commit(t, st.to_errno() < 0 ? st.to_errno() : -EIO);
    return;
  }
  if (user_copy_ && t.kind == IoKind::kRead) {
    // The data goes into the request before the commit.
    t.copying = true;
    transport_->copy(t.tag, /*to_request=*/true, t.buf, t.len);
    return;
  }
  switch (t.kind) {
    case IoKind::kRead:
      ++stats_.reads;
      stats_.read_bytes += t.len;
      break;
    case IoKind::kWrite:
      ++stats_.writes;
      stats_.write_bytes += t.len;
      break;
    case IoKind::kFlush:
      ++stats_.flushes;
      break;
    case IoKind::kDiscard:
      ++stats_.discards;
      break;
    case IoKind::kWriteZeroes:
      ++stats_.write_zeroes;
      break;
  }
  const bool data = t.kind == IoKind::kRead || t.kind == IoKind::kWrite;
  commit(t, data ? static_cast<std::int32_t>(t.len) : 0);
}

void UblkQueue::commit(Tag& t, std::int32_t result) {
  if (t.state != Tag::State::kServing) return;  // never commit a request twice
  if (result < 0) ++stats_.errors;
  ++stats_.commits;
  --serving_;
  if (t.held.size() > 0) {
    pool_->give(std::move(t.held));
    t.buf = nullptr;
  }
  t.state = Tag::State::kFetching;
  transport_->fetch(t.tag, /*commit=*/true, result, t.data, t.slot);
}

}  // namespace graid::ublk
