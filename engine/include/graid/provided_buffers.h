// Buffers the kernel picks from itself: a provided-buffer ring (io_uring_register_buf_ring,
// 5.19+) of one IoContext's ring. An operation submitted with IOSQE_BUFFER_SELECT and the
// group's id (sqe->buf_group) takes the next free buffer when it has data to deliver, and names
// it in its CQE (IORING_CQE_F_BUFFER, the id above IORING_CQE_BUFFER_SHIFT); the owner reads
// it and hands it back with recycle(). Multishot operations (ublk's FETCH_IO_CMDS delivering
// arrays of tags, a multishot recv) need one: they cannot name a buffer per CQE in advance.
//
// Owned by the thread that polls the context, and destroyed before it (unregisters the group).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "graid/member.h"
#include "graid/status.h"

struct io_uring_buf_ring;

namespace graid {

class ProvidedBuffers {
 public:
  // `count` buffers (a power of two, at most 32768) of `size` bytes, all given to the kernel,
  // registered in `ctx` as group `group`. Errors as IoContext::register_buffer_ring.
  static Result<std::unique_ptr<ProvidedBuffers>> create(IoContext& ctx, std::uint16_t group,
                                                         std::uint16_t count, std::uint32_t size);
  ~ProvidedBuffers();
  ProvidedBuffers(const ProvidedBuffers&) = delete;
  ProvidedBuffers& operator=(const ProvidedBuffers&) = delete;

  std::uint16_t group() const noexcept { return group_; }
  std::uint32_t buffer_size() const noexcept { return size_; }
  std::uint16_t count() const noexcept { return count_; }

  // The buffer a CQE with `cqe_flags` filled, or nullopt when it names none (or an id outside
  // this ring, which a kernel would not post).
  std::optional<std::uint16_t> id_of(std::uint32_t cqe_flags) const noexcept;
  // Buffer `id`'s first `bytes` (what the CQE said it holds, clamped to the buffer).
  std::span<const std::byte> data(std::uint16_t id, std::size_t bytes) const noexcept;
  // Gives buffer `id` back to the kernel (after its data was read). Each buffer id the kernel
  // delivered is given back once; recycling one the kernel still holds corrupts the ring.
  void recycle(std::uint16_t id) noexcept;

 private:
  ProvidedBuffers() = default;
  IoContext* ctx_ = nullptr;
  std::uint16_t group_ = 0;
  std::uint16_t count_ = 0;
  std::uint32_t size_ = 0;
  bool registered_ = false;
  io_uring_buf_ring* ring_ = nullptr;
  std::size_t ring_bytes_ = 0;
  std::byte* buffers_ = nullptr;
  std::size_t buffer_bytes_ = 0;
};

}  // namespace graid
