#include "ublk/ublk_queue_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ublk/ublk_queue.h"

namespace graid::ublk {

// A USER_COPY copy, done at once with pread/pwrite on /dev/ublkcN and answered at the thread's
// next poll. Not a ring operation: the driver's read and write handlers only copy between the
// request's pages and ours (they never wait for a device), but io_uring cannot run them
// non-blocking and hands each to an io-wq worker thread, which cost more than twice the CPU per
// 64 KiB request in the VM (tests/vm/examples/ublk-seqwrite.sh, docs/ublk.md).
class QueueFile::CopyCmd final : public Task {
 public:
  CopyCmd(QueueFile& owner, std::uint16_t tag) : owner_(owner), tag_(tag) {}
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
  QueueFile& owner_;
  std::uint16_t tag_;
  std::int32_t res_ = 0;
};

Result<std::unique_ptr<QueueFile>> QueueFile::create(IoContext& ctx,
                                                     std::shared_ptr<MemberFile> ublkc,
                                                     std::uint16_t q_id, std::uint16_t depth) {
  if (!ublkc || ublkc->fd() < 0)
    return make_error(Errc::kInvalidArgument, "ublk queue {}: no /dev/ublkcN", q_id);
  std::unique_ptr<QueueFile> f(new QueueFile());
  f->ctx_ = &ctx;
  f->q_id_ = q_id;
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  f->map_bytes_ = desc_map_bytes(depth, page);
  void* p = ::mmap(nullptr, f->map_bytes_, PROT_READ, MAP_SHARED | MAP_POPULATE, ublkc->fd(),
                   static_cast<off_t>(desc_area_stride(page) * q_id));
  if (p == MAP_FAILED)
    return make_error(Errc::kIoError, "ublk queue {}: mapping its descriptors: {}", q_id,
                      std::strerror(errno));
  f->descs_ = static_cast<const IoDesc*>(p);
  f->ublkc_ = std::move(ublkc);
  f->copies_.reserve(depth);
  for (std::uint16_t i = 0; i < depth; ++i)
    f->copies_.push_back(std::make_unique<CopyCmd>(*f, i));
  return f;
}

QueueFile::~QueueFile() {
  if (descs_) ::munmap(const_cast<IoDesc*>(descs_), map_bytes_);
}

IoDesc QueueFile::desc(std::uint16_t tag) const {
  IoDesc d;
  std::memcpy(&d, &descs_[tag], sizeof(d));
  return d;
}

void QueueFile::copy(std::uint16_t tag, bool to_request, std::byte* buf, std::uint32_t len) {
  if (tag < copies_.size()) copies_[tag]->start(to_request, buf, len);
}

}  // namespace graid::ublk
