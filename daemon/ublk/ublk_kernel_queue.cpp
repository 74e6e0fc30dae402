#include "ublk/ublk_kernel_queue.h"

#include <liburing.h>

#include <cerrno>
#include <cstring>

namespace graid::ublk {

class KernelQueueTransport::Cmd final : public RingCommand {
 public:
  Cmd(KernelQueueTransport& owner, std::uint16_t tag) : owner_(owner), tag_(tag) {}
  void set(bool commit, std::int32_t result, std::byte* buf, std::int32_t buf_slot) {
    commit_ = commit;
    result_ = result;
    buf_ = buf;
    buf_slot_ = buf_slot;
  }
  std::int32_t prep(io_uring_sqe& sqe, std::span<std::byte> cmd) override {
    if (cmd.size() < sizeof(IoCmd)) return -EINVAL;
    sqe.opcode = IORING_OP_URING_CMD;
    sqe.cmd_op = io_cmd_op(commit_ ? kIoCommitAndFetchReq : kIoFetchReq);
    IoCmd c{};
    c.q_id = owner_.file_->queue_id();
    c.tag = tag_;
    c.result = result_;
    c.addr = reinterpret_cast<std::uint64_t>(buf_);
    std::memcpy(cmd.data(), &c, sizeof(c));
    // AUTO_BUF_REG: where the driver registers the next request's pages; with the fallback
    // flag a failed registration delivers the request with kIoFNeedRegBuf instead of failing it.
    if (buf_slot_ >= 0)
      sqe.addr = auto_buf_reg_addr(static_cast<std::uint16_t>(buf_slot_), kAutoBufRegFallback);
    return 0;
  }
  void on_complete(std::int32_t res, std::span<const std::uint64_t>) override {
    if (owner_.queue_) owner_.queue_->fetch_done(tag_, res);
  }

 private:
  KernelQueueTransport& owner_;
  std::uint16_t tag_;
  bool commit_ = false;
  std::int32_t result_ = 0;
  std::byte* buf_ = nullptr;
  std::int32_t buf_slot_ = -1;
};

Result<std::unique_ptr<KernelQueueTransport>> KernelQueueTransport::create(
    IoContext& ctx, std::shared_ptr<MemberFile> ublkc, std::uint16_t q_id, std::uint16_t depth) {
  auto file = QueueFile::create(ctx, std::move(ublkc), q_id, depth);
  if (!file.is_ok()) return file.status();
  std::unique_ptr<KernelQueueTransport> t(new KernelQueueTransport());
  t->file_ = std::move(*file);
  t->cmds_.reserve(depth);
  for (std::uint16_t i = 0; i < depth; ++i)
    t->cmds_.push_back(std::make_unique<Cmd>(*t, i));
  return t;
}

KernelQueueTransport::~KernelQueueTransport() = default;

void KernelQueueTransport::fetch(std::uint16_t tag, bool commit, std::int32_t result,
                                 std::byte* buf, std::int32_t buf_slot) {
  Cmd& c = *cmds_[tag];
  c.set(commit, result, buf, buf_slot);
  file_->context().submit_command(file_->file(), c);
}

void KernelQueueTransport::copy(std::uint16_t tag, bool to_request, std::byte* buf,
                                std::uint32_t len) {
  file_->copy(tag, to_request, buf, len);
}

IoDesc KernelQueueTransport::desc(std::uint16_t tag) const {
  return file_->desc(tag);
}

}  // namespace graid::ublk
