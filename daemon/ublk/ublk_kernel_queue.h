// The real driver side of a ublk queue: FETCH_REQ / COMMIT_AND_FETCH_REQ as IORING_OP_URING_CMD
// ring commands on /dev/ublkcN (a registered file of the thread's ring where the table has room),
// and the queue's request descriptors read from their read-only mapping of /dev/ublkcN.
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

  void fetch(std::uint16_t tag, bool commit, std::int32_t result, std::byte* buf) override;
  IoDesc desc(std::uint16_t tag) const override;
  void bind(UblkQueue& queue) override { queue_ = &queue; }

  class Cmd;

 private:
  KernelQueueTransport() = default;
  IoContext* ctx_ = nullptr;
  std::shared_ptr<MemberFile> ublkc_;
  std::uint16_t q_id_ = 0;
  const IoDesc* descs_ = nullptr;
  std::size_t map_bytes_ = 0;
  UblkQueue* queue_ = nullptr;
  std::vector<std::unique_ptr<Cmd>> cmds_;
};

}  // namespace graid::ublk
