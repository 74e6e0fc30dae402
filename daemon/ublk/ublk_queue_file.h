// What every way of serving a ublk queue reads from /dev/ublkcN besides its commands: the
// queue's request descriptors (a read-only mapping) and, with USER_COPY, the request data at its
// offsets (plain pread/pwrite: see copy()). Shared by the per-tag transport
// (ublk_kernel_queue.h) and the batch driver (ublk_kernel_batch.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "graid/member.h"
#include "graid/status.h"
#include "ublk/ublk_uapi.h"

namespace graid::ublk {

class UblkQueue;

class QueueFile {
 public:
  // Maps queue `q_id`'s descriptors (`depth` of them) from `ublkc`, an open /dev/ublkcN.
  static Result<std::unique_ptr<QueueFile>> create(IoContext& ctx,
                                                   std::shared_ptr<MemberFile> ublkc,
                                                   std::uint16_t q_id, std::uint16_t depth);
  ~QueueFile();
  QueueFile(const QueueFile&) = delete;
  QueueFile& operator=(const QueueFile&) = delete;

  // Copy completions go to `queue` (UblkQueue::copy_done).
  void bind(UblkQueue& queue) noexcept { queue_ = &queue; }
  IoDesc desc(std::uint16_t tag) const;
  // USER_COPY: a read or write of /dev/ublkcN at the tag's request-data offset, done at once (a
  // copy between pages in memory), answered at the next poll.
  void copy(std::uint16_t tag, bool to_request, std::byte* buf, std::uint32_t len);

  IoContext& context() const noexcept { return *ctx_; }
  const std::shared_ptr<MemberFile>& file() const noexcept { return ublkc_; }
  std::uint16_t queue_id() const noexcept { return q_id_; }

 private:
  class CopyCmd;
  QueueFile() = default;
  IoContext* ctx_ = nullptr;
  std::shared_ptr<MemberFile> ublkc_;
  std::uint16_t q_id_ = 0;
  const IoDesc* descs_ = nullptr;
  std::size_t map_bytes_ = 0;
  UblkQueue* queue_ = nullptr;
  std::vector<std::unique_ptr<CopyCmd>> copies_;
};

}  // namespace graid::ublk
