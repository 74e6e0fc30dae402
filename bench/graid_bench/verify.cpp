#include "verify.h"

#include <memory>
#include <vector>

#include "graid/array.h"
#include "graid/buffer.h"
#include "graid/member.h"
#include "workload.h"

namespace graid::bench {

namespace {

class VerifyIo final : public ArrayIo {
 public:
  std::vector<std::uint32_t>* done = nullptr;
  std::uint32_t slot = 0;
  Status outcome;

  void on_complete(Status status) override {
    outcome = std::move(status);
    done->push_back(slot);
  }
};

// Streams the region's blocks through the queue, `kind` for all, queue_depth at a time.
// `before(slot, offset)` prepares a slot's buffer; `after(slot, offset)` inspects it.
template <typename Before, typename After>
Status pass(ArrayQueue& queue, const VerifyConfig& config, std::uint64_t blocks, IoKind kind,
            AlignedBuffer& buffer, Before&& before, After&& after) {
  const std::uint32_t block = config.block_bytes;
  std::vector<std::uint32_t> done;
  done.reserve(config.queue_depth);
  auto slots = std::make_unique<VerifyIo[]>(config.queue_depth);
  std::vector<std::uint64_t> slot_offset(config.queue_depth);
  std::uint64_t next = 0;
  Status error;
  auto issue = [&](std::uint32_t slot) {
    VerifyIo& io = slots[slot];
    const std::uint64_t offset = next++ * block;
    slot_offset[slot] = offset;
    before(slot, offset);
    io.kind = kind;
    io.offset = offset;
    io.len = block;
    io.buf = buffer.data() + std::size_t{slot} * block;
    queue.submit(io);
  };
  for (std::uint32_t i = 0; i < config.queue_depth && next < blocks; ++i) {
    slots[i].done = &done;
    slots[i].slot = i;
    issue(i);
  }
  while (queue.in_flight() > 0) {
    queue.context().poll(true);
    for (std::uint32_t slot : done) {
      VerifyIo& io = slots[slot];
      if (!io.outcome.is_ok()) {
        if (error.is_ok()) {
          error =
              make_error(io.outcome.code(), "verify: {} at {}: {}",
                         kind == IoKind::kRead ? "read" : "write", io.offset, io.outcome.message());
        }
        continue;
      }
      after(slot, slot_offset[slot]);
      if (next < blocks && error.is_ok()) issue(slot);
    }
    done.clear();
  }
  return error;
}

}  // namespace

Result<VerifyResult> verify_array(ArraySession& session, const VerifyConfig& config) {
  VerifyResult result;
  result.blocks = config.region_bytes / config.block_bytes;
  if (result.blocks == 0) return result;

  auto ctx = IoContext::create(member_ring_options(4096));
  if (!ctx.is_ok()) return ctx.status();
  auto queue = session.array().attach(**ctx);
  if (!queue.is_ok()) return queue.status();
  auto buffer = AlignedBuffer::allocate(std::size_t{config.block_bytes} * config.queue_depth, 4096);
  if (!buffer.is_ok()) return buffer.status();

  auto slot_span = [&](std::uint32_t slot) {
    return buffer->span().subspan(std::size_t{slot} * config.block_bytes, config.block_bytes);
  };
  Status status = pass(
      **queue, config, result.blocks, IoKind::kWrite, *buffer,
      [&](std::uint32_t slot, std::uint64_t offset) {
        fill_pattern(slot_span(slot), offset, config.seed);
      },
      [](std::uint32_t, std::uint64_t) {});
  if (status.is_ok()) {
    status = pass(
        **queue, config, result.blocks, IoKind::kRead, *buffer, [](std::uint32_t, std::uint64_t) {},
        [&](std::uint32_t slot, std::uint64_t offset) {
          if (matches_pattern(slot_span(slot), offset, config.seed)) return;
          if (result.mismatched_blocks++ == 0 || offset < result.first_mismatch_offset) {
            result.first_mismatch_offset = offset;
          }
        });
  }
  queue->reset();  // the queue goes before its context, with nothing in flight
  if (!status.is_ok()) return status;
  return result;
}

}  // namespace graid::bench
