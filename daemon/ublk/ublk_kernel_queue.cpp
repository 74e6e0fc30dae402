#include "ublk/ublk_kernel_queue.h"

#include <liburing.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace graid::ublk {

class KernelQueueTransport::Cmd final : public RingCommand {
 public:
  Cmd(KernelQueueTransport& owner, std::uint16_t tag) : owner_(owner), tag_(tag) {}
  void set(bool commit, std::int32_t result, std::byte* buf) {
    commit_ = commit;
    result_ = result;
    buf_ = buf;
  }
  std::int32_t prep(io_uring_sqe& sqe, std::span<std::byte> cmd) override {
    if (cmd.size() < sizeof(IoCmd)) return -EINVAL;
    sqe.opcode = IORING_OP_URING_CMD;
    sqe.cmd_op = io_cmd_op(commit_ ? kIoCommitAndFetchReq : kIoFetchReq);
    IoCmd c{};
    c.q_id = owner_.q_id_;
    c.tag = tag_;
    c.result = result_;
    c.addr = reinterpret_cast<std::uint64_t>(buf_);
    std::memcpy(cmd.data(), &c, sizeof(c));
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
};

class KernelQueueTransport::CopyCmd final : public RingCommand {
 public:
  CopyCmd(KernelQueueTransport& owner, std::uint16_t tag) : owner_(owner), tag_(tag) {}
  void set(bool to_request, std::byte* buf, std::uint32_t len) {
    to_request_ = to_request;
    buf_ = buf;
    len_ = len;
  }
  std::int32_t prep(io_uring_sqe& sqe, std::span<std::byte>) override {
    sqe.opcode = to_request_ ? IORING_OP_WRITE : IORING_OP_READ;
    sqe.addr = reinterpret_cast<std::uint64_t>(buf_);
    sqe.len = len_;
    sqe.off = user_copy_offset(owner_.q_id_, tag_, 0);
    return 0;
  }
  void on_complete(std::int32_t res, std::span<const std::uint64_t>) override {
    if (owner_.queue_) owner_.queue_->copy_done(tag_, res);
  }

 private:
  KernelQueueTransport& owner_;
  std::uint16_t tag_;
  bool to_request_ = false;
  std::byte* buf_ = nullptr;
  std::uint32_t len_ = 0;
};

Result<std::unique_ptr<KernelQueueTransport>> KernelQueueTransport::create(
    IoContext& ctx, std::shared_ptr<MemberFile> ublkc, std::uint16_t q_id, std::uint16_t depth) {
  if (!ublkc || ublkc->fd() < 0)
    return make_error(Errc::kInvalidArgument, "ublk queue {}: no /dev/ublkcN", q_id);
  std::unique_ptr<KernelQueueTransport> t(new KernelQueueTransport());
  t->ctx_ = &ctx;
  t->q_id_ = q_id;
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  t->map_bytes_ = desc_map_bytes(depth, page);
  void* p = ::mmap(nullptr, t->map_bytes_, PROT_READ, MAP_SHARED | MAP_POPULATE, ublkc->fd(),
                   static_cast<off_t>(desc_area_stride(page) * q_id));
  if (p == MAP_FAILED)
    return make_error(Errc::kIoError, "ublk queue {}: mapping its descriptors: {}", q_id,
                      std::strerror(errno));
  t->descs_ = static_cast<const IoDesc*>(p);
  t->ublkc_ = std::move(ublkc);
  t->cmds_.reserve(depth);
  t->copies_.reserve(depth);
  for (std::uint16_t i = 0; i < depth; ++i) {
    t->cmds_.push_back(std::make_unique<Cmd>(*t, i));
    t->copies_.push_back(std::make_unique<CopyCmd>(*t, i));
  }
  return t;
}

KernelQueueTransport::~KernelQueueTransport() {
  if (descs_) ::munmap(const_cast<IoDesc*>(descs_), map_bytes_);
}

void KernelQueueTransport::fetch(std::uint16_t tag, bool commit, std::int32_t result,
                                 std::byte* buf) {
  Cmd& c = *cmds_[tag];
  c.set(commit, result, buf);
  ctx_->submit_command(ublkc_, c);
}

void KernelQueueTransport::copy(std::uint16_t tag, bool to_request, std::byte* buf,
                                std::uint32_t len) {
  CopyCmd& c = *copies_[tag];
  c.set(to_request, buf, len);
  ctx_->submit_command(ublkc_, c);
}

IoDesc KernelQueueTransport::desc(std::uint16_t tag) const {
  IoDesc d;
  std::memcpy(&d, &descs_[tag], sizeof(d));
  return d;
}

}  // namespace graid::ublk
