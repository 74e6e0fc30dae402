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
    c.q_id = owner_.q_id_;
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

// A USER_COPY copy, done at once with pread/pwrite on /dev/ublkcN and answered at the thread's
// next poll. Not a ring operation: the driver's read and write handlers only copy between the
// request's pages and ours (they never wait for a device), but io_uring cannot run them
// non-blocking and hands each to an io-wq worker thread, which cost more than twice the CPU per
// 64 KiB request in the VM (tests/vm/examples/ublk-seqwrite.sh, docs/ublk.md).
class KernelQueueTransport::CopyCmd final : public Task {
 public:
  CopyCmd(KernelQueueTransport& owner, std::uint16_t tag) : owner_(owner), tag_(tag) {}
  void start(bool to_request, std::byte* buf, std::uint32_t len) {
    const int fd = owner_.ublkc_->fd();
    const auto off = static_cast<off_t>(user_copy_offset(owner_.q_id_, tag_, 0));
    ssize_t n;
    do {
      n = to_request ? ::pwrite(fd, buf, len, off) : ::pread(fd, buf, len, off);
    } while (n < 0 && errno == EINTR);
    res_ = n < 0 ? -errno : static_cast<std::int32_t>(n);
    owner_.ctx_->defer(*this);
  }
  void run() override {
    if (owner_.queue_) owner_.queue_->copy_done(tag_, res_);
  }

 private:
  KernelQueueTransport& owner_;
  std::uint16_t tag_;
  std::int32_t res_ = 0;
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
                                 std::byte* buf, std::int32_t buf_slot) {
  Cmd& c = *cmds_[tag];
  c.set(commit, result, buf, buf_slot);
  ctx_->submit_command(ublkc_, c);
}

void KernelQueueTransport::copy(std::uint16_t tag, bool to_request, std::byte* buf,
                                std::uint32_t len) {
  copies_[tag]->start(to_request, buf, len);
}

IoDesc KernelQueueTransport::desc(std::uint16_t tag) const {
  IoDesc d;
  std::memcpy(&d, &descs_[tag], sizeof(d));
  return d;
}

}  // namespace graid::ublk
