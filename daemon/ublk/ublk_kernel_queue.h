// The real driver side of a ublk queue served a tag at a time: FETCH_REQ / COMMIT_AND_FETCH_REQ
// as IORING_OP_URING_CMD ring commands on /dev/ublkcN (a registered file of the thread's ring
// where the table has room); the descriptors and USER_COPY copies through QueueFile.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "graid/member.h"
#include "graid/status.h"
#include "ublk/ublk_queue.h"
#include "ublk/ublk_queue_file.h"

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
  // USER_COPY: QueueFile::copy.
  void copy(std::uint16_t tag, bool to_request, std::byte* buf, std::uint32_t len) override;
  IoDesc desc(std::uint16_t tag) const override;
  void bind(UblkQueue& queue) override {
    queue_ = &queue;
    file_->bind(queue);
  }

  class Cmd;

 private:
  KernelQueueTransport() = default;
  std::unique_ptr<QueueFile> file_;
  UblkQueue* queue_ = nullptr;
  std::vector<std::unique_ptr<Cmd>> cmds_;
};

}  // namespace graid::ublk
