#include "graid/provided_buffers.h"

#include <liburing.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace graid {

namespace {

std::size_t round_to_page(std::size_t bytes) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

void* map_anonymous(std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

Result<std::unique_ptr<ProvidedBuffers>> ProvidedBuffers::create(IoContext& ctx,
                                                                 std::uint16_t group,
                                                                 std::uint16_t count,
                                                                 std::uint32_t size) {
  if (count == 0 || count > 32768 || (count & (count - 1)) != 0)
    return make_error(Errc::kInvalidArgument, "{} provided buffers: not a power of two to 32768",
                      count);
  if (size == 0) return make_error(Errc::kInvalidArgument, "provided buffers of 0 bytes");
  std::unique_ptr<ProvidedBuffers> b(new ProvidedBuffers());
  b->ctx_ = &ctx;
  b->group_ = group;
  b->count_ = count;
  b->size_ = size;
  b->ring_bytes_ = round_to_page(std::size_t{count} * sizeof(io_uring_buf));
  b->buffer_bytes_ = round_to_page(std::size_t{count} * size);
  b->ring_ = static_cast<io_uring_buf_ring*>(map_anonymous(b->ring_bytes_));
  if (b->ring_ == nullptr)
    return make_error(Errc::kNoSpace, "mapping a buffer ring: {}", std::strerror(errno));
  b->buffers_ = static_cast<std::byte*>(map_anonymous(b->buffer_bytes_));
  if (b->buffers_ == nullptr)
    return make_error(Errc::kNoSpace, "mapping {} provided buffers: {}", count,
                      std::strerror(errno));
  io_uring_buf_ring_init(b->ring_);
  const int mask = io_uring_buf_ring_mask(count);
  for (std::uint16_t id = 0; id < count; ++id)
    io_uring_buf_ring_add(b->ring_, b->buffers_ + std::size_t{id} * size, size, id, mask, id);
  io_uring_buf_ring_advance(b->ring_, count);
  GRAID_RETURN_IF_ERROR(ctx.register_buffer_ring(b->ring_, count, group));
  b->registered_ = true;
  return b;
}

ProvidedBuffers::~ProvidedBuffers() {
  if (registered_) ctx_->unregister_buffer_ring(group_);
  if (buffers_ != nullptr) ::munmap(buffers_, buffer_bytes_);
  if (ring_ != nullptr) ::munmap(ring_, ring_bytes_);
}

std::optional<std::uint16_t> ProvidedBuffers::id_of(std::uint32_t cqe_flags) const noexcept {
  if ((cqe_flags & IORING_CQE_F_BUFFER) == 0) return std::nullopt;
  const auto id = static_cast<std::uint16_t>(cqe_flags >> IORING_CQE_BUFFER_SHIFT);
  if (id >= count_) return std::nullopt;
  return id;
}

std::span<const std::byte> ProvidedBuffers::data(std::uint16_t id,
                                                 std::size_t bytes) const noexcept {
  if (id >= count_) return {};
  return {buffers_ + std::size_t{id} * size_, std::min<std::size_t>(bytes, size_)};
}

void ProvidedBuffers::recycle(std::uint16_t id) noexcept {
  if (id >= count_) return;
  // Buffer ids go back at the ring's tail in any order: the kernel takes whatever is next.
  io_uring_buf_ring_add(ring_, buffers_ + std::size_t{id} * size_, size_, id,
                        io_uring_buf_ring_mask(count_), 0);
  io_uring_buf_ring_advance(ring_, 1);
}

}  // namespace graid
