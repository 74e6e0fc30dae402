// The real driver side of a BATCH_IO queue (ublk_batch_queue.h): PREP_IO_CMDS and
// COMMIT_IO_CMDS as one-shot IORING_OP_URING_CMD commands on /dev/ublkcN, FETCH_IO_CMDS as a
// multishot one whose completions name their tags in buffers of a provided-buffer ring of the
// thread's ring (ProvidedBuffers); descriptors and USER_COPY copies through QueueFile.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "graid/member.h"
#include "graid/provided_buffers.h"
#include "graid/status.h"
#include "ublk/ublk_batch_queue.h"
#include "ublk/ublk_queue_file.h"

namespace graid::ublk {

class KernelBatchDriver final : public BatchDriver {
 public:
  // For queue `q_id` (`depth` tags) of `ublkc`, an open /dev/ublkcN, on `ctx`'s thread: maps the
  // descriptors and registers the fetch buffers in `ctx`'s ring (a buffer group of its own).
  static Result<std::unique_ptr<KernelBatchDriver>> create(IoContext& ctx,
                                                           std::shared_ptr<MemberFile> ublkc,
                                                           std::uint16_t q_id, std::uint16_t depth);
  ~KernelBatchDriver() override;

  void bind(BatchQueueTransport& transport, UblkQueue& queue) override;
  void send(bool commit, std::span<const std::byte> elems, std::uint16_t nr,
            std::uint8_t elem_bytes, std::uint16_t flags, std::uint32_t cookie) override;
  void arm_fetch() override;
  IoDesc desc(std::uint16_t tag) const override { return file_->desc(tag); }
  void copy(std::uint16_t tag, bool to_request, std::byte* buf, std::uint32_t len) override {
    file_->copy(tag, to_request, buf, len);
  }

  class SendCmd;
  class FetchCmd;

 private:
  KernelBatchDriver() = default;
  std::unique_ptr<QueueFile> file_;
  std::unique_ptr<ProvidedBuffers> fetch_buffers_;
  std::uint16_t depth_ = 0;
  BatchQueueTransport* transport_ = nullptr;
  std::vector<std::unique_ptr<SendCmd>> sends_;  // by cookie
  std::unique_ptr<FetchCmd> fetch_;
};

}  // namespace graid::ublk
