// The real driver side of a ublk queue: FETCH_REQ / COMMIT_AND_FETCH_REQ as IORING_OP_URING_CMD
// ring commands on /dev/ublkcN (a registered file of the thread's ring where the table has room),
// the queue's request descriptors read from their read-only mapping of /dev/ublkcN, and with
// USER_COPY the request data read and written at its offsets in /dev/ublkcN (plain pread/pwrite:
// see CopyCmd).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "graid/member.h"
#include "graid/status.h"
#include "ublk/ublk_queue.h"

namespace graid::ublk {

class KernelQueueTransport final : public QueueTransport {
 public:
  // Maps queue `q_id`'s descriptors (`depth` of them) from `ublkc`, an open /dev/ublkcN.
  static Result<std::unique_ptr<KernelQueueTransport>> create(IoContext& ctx,
                                                              std::shared_ptr<MemberFile> ublkc,
                                                              std::uint16_t q_id,
                                                              std::uint16_t depth);
  ~KernelQueueTransport() override;

  void fetch(std::uint16_t tag, bool commit, std::int32_t result, std::byte* buf,
             std::int32_t buf_slot) override;
  // USER_COPY: a read or write of /dev/ublkcN at the tag's request-data offset, done at once
  // (a copy between pages in memory), answered at the next poll.
  void copy(std::uint16_t tag, bool to_request, std::byte* buf, std::uint32_t len) override;
  IoDesc desc(std::uint16_t tag) const override;
  void bind(UblkQueue& queue) override { queue_ = &queue; }

  class Cmd;
  class CopyCmd;

 private:
  KernelQueueTransport() = default;
  IoContext* ctx_ = nullptr;
  std::shared_ptr<MemberFile> ublkc_;
  std::uint16_t q_id_ = 0;
  const IoDesc* descs_ = nullptr;
  std::size_t map_bytes_ = 0;
  UblkQueue* queue_ = nullptr;
  std::vector<std::unique_ptr<Cmd>> cmds_;
  std::vector<std::unique_ptr<CopyCmd>> copies_;
};

}  // namespace graid::ublk
