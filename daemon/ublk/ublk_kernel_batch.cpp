#include "ublk/ublk_kernel_batch.h"

#include <liburing.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace graid::ublk {

namespace {

// The fetch buffers: a few, each holding one completion's tags (at most 128 of them), handed
// back as soon as their tags are read.
constexpr std::uint16_t kFetchBuffers = 4;

// Buffer groups are per ring; queues of several devices may share a thread's ring, so each
// driver takes the next free group id.
std::atomic<std::uint16_t> next_group{0x4b00};

}  // namespace

class KernelBatchDriver::SendCmd final : public RingCommand {
 public:
  SendCmd(KernelBatchDriver& owner, std::uint32_t cookie) : owner_(owner), cookie_(cookie) {}
  void set(bool commit, std::span<const std::byte> elems, std::uint16_t nr, std::uint8_t elem_bytes,
           std::uint16_t flags) {
    commit_ = commit;
    elems_ = elems;
    nr_ = nr;
    elem_bytes_ = elem_bytes;
    flags_ = flags;
  }
  std::int32_t prep(io_uring_sqe& sqe, std::span<std::byte> cmd) override {
    if (cmd.size() < sizeof(BatchIoCmd)) return -EINVAL;
    sqe.opcode = IORING_OP_URING_CMD;
    sqe.cmd_op = batch_cmd_op(commit_ ? kIoCommitIoCmds : kIoPrepIoCmds);
    BatchIoCmd c{};
    c.q_id = owner_.file_->queue_id();
    c.flags = flags_;
    c.nr_elem = nr_;
    c.elem_bytes = elem_bytes_;
    std::memcpy(cmd.data(), &c, sizeof(c));
    sqe.addr = reinterpret_cast<std::uint64_t>(elems_.data());
    sqe.len = static_cast<std::uint32_t>(elems_.size());
    return 0;
  }
  void on_complete(std::int32_t res, std::span<const std::uint64_t>) override {
    if (owner_.transport_) owner_.transport_->sent(cookie_, res);
  }

 private:
  KernelBatchDriver& owner_;
  std::uint32_t cookie_;
  bool commit_ = false;
  std::span<const std::byte> elems_;
  std::uint16_t nr_ = 0;
  std::uint8_t elem_bytes_ = 8;
  std::uint16_t flags_ = 0;
};

class KernelBatchDriver::FetchCmd final : public RingCommand {
 public:
  explicit FetchCmd(KernelBatchDriver& owner) : owner_(owner) {}
  std::int32_t prep(io_uring_sqe& sqe, std::span<std::byte> cmd) override {
    if (cmd.size() < sizeof(BatchIoCmd)) return -EINVAL;
    sqe.opcode = IORING_OP_URING_CMD;
    sqe.cmd_op = batch_cmd_op(kIoFetchIoCmds);
    BatchIoCmd c{};
    c.q_id = owner_.file_->queue_id();
    c.nr_elem = static_cast<std::uint16_t>(owner_.fetch_buffers_->buffer_size() / 2);
    c.elem_bytes = sizeof(std::uint16_t);
    std::memcpy(cmd.data(), &c, sizeof(c));
    sqe.rw_flags = static_cast<int>(kUringCmdMultishot);  // uring_cmd_flags
    sqe.flags |= IOSQE_BUFFER_SELECT;
    sqe.buf_group = owner_.fetch_buffers_->group();
    return 0;
  }
  void on_next(std::int32_t res) override { deliver(res); }
  void on_complete(std::int32_t res, std::span<const std::uint64_t>) override {
    // The command ended: a last CQE may still carry tags.
    if (res > 0) {
      deliver(res);
      res = 0;
    }
    if (owner_.transport_) owner_.transport_->fetch_ended(res);
  }

 private:
  void deliver(std::int32_t res) {
    ProvidedBuffers& buffers = *owner_.fetch_buffers_;
    const auto id = buffers.id_of(cqe_flags());
    if (!id) return;  // no buffer: nothing delivered (a CQE with zero tags)
    std::uint16_t tags[kMaxTagsPerFetchCqe];
    const auto data = buffers.data(*id, res > 0 ? static_cast<std::size_t>(res) : 0);
    const std::size_t n = std::min<std::size_t>(data.size() / 2, kMaxTagsPerFetchCqe);
    std::memcpy(tags, data.data(), n * sizeof(std::uint16_t));
    buffers.recycle(*id);  // read: the kernel may fill it again
    if (owner_.transport_) owner_.transport_->fetched({tags, n});
  }

  KernelBatchDriver& owner_;
};

Result<std::unique_ptr<KernelBatchDriver>> KernelBatchDriver::create(
    IoContext& ctx, std::shared_ptr<MemberFile> ublkc, std::uint16_t q_id, std::uint16_t depth) {
  auto file = QueueFile::create(ctx, std::move(ublkc), q_id, depth);
  if (!file.is_ok()) return file.status();
  std::unique_ptr<KernelBatchDriver> d(new KernelBatchDriver());
  d->file_ = std::move(*file);
  d->depth_ = depth;
  const auto per_cqe = static_cast<std::uint32_t>(
      std::min<std::uint16_t>(std::max<std::uint16_t>(depth, 1), kMaxTagsPerFetchCqe));
  Status last;
  for (int attempt = 0; attempt < 256; ++attempt) {
    auto buffers = ProvidedBuffers::create(ctx, next_group.fetch_add(1), kFetchBuffers,
                                           per_cqe * sizeof(std::uint16_t));
    if (buffers.is_ok()) {
      d->fetch_buffers_ = std::move(*buffers);
      break;
    }
    last = buffers.status();
    if (last.code() != Errc::kBusy) return last;
  }
  if (!d->fetch_buffers_) return last;
  d->fetch_ = std::make_unique<FetchCmd>(*d);
  return d;
}

KernelBatchDriver::~KernelBatchDriver() = default;

void KernelBatchDriver::bind(BatchQueueTransport& transport, UblkQueue& queue) {
  transport_ = &transport;
  file_->bind(queue);
}

void KernelBatchDriver::send(bool commit, std::span<const std::byte> elems, std::uint16_t nr,
                             std::uint8_t elem_bytes, std::uint16_t flags, std::uint32_t cookie) {
  while (sends_.size() <= cookie)
    sends_.push_back(std::make_unique<SendCmd>(*this, static_cast<std::uint32_t>(sends_.size())));
  SendCmd& c = *sends_[cookie];
  c.set(commit, elems, nr, elem_bytes, flags);
  file_->context().submit_command(file_->file(), c);
}

void KernelBatchDriver::arm_fetch() {
  file_->context().submit_command(file_->file(), *fetch_);
}

}  // namespace graid::ublk
