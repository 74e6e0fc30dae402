#include "ublk/ublk_batch_queue.h"

#include <cerrno>
#include <cstring>

namespace graid::ublk {

class BatchQueueTransport::Flush final : public Task {
 public:
  explicit Flush(BatchQueueTransport& owner) : owner_(owner) {}
  void run() override { owner_.flush(); }

 private:
  BatchQueueTransport& owner_;
};

BatchQueueTransport::BatchQueueTransport(IoContext& ctx, std::unique_ptr<BatchDriver> driver,
                                         std::uint16_t depth, DataPath path)
    : ctx_(ctx),
      driver_(std::move(driver)),
      state_(depth, TagState::kNew),
      flush_(std::make_unique<Flush>(*this)) {
  if (path == DataPath::kKernelCopy) {
    elem_bytes_ = sizeof(BatchElemHeader) + sizeof(std::uint64_t);
    elem_flags_ = kBatchFHasBufAddr;
  } else if (path == DataPath::kZeroCopy) {
    elem_flags_ = kBatchFAutoBufRegFallback;
  }
}

BatchQueueTransport::~BatchQueueTransport() = default;

void BatchQueueTransport::bind(UblkQueue& queue) {
  queue_ = &queue;
  driver_->bind(*this, queue);
}

BatchQueueTransport::Batch& BatchQueueTransport::open_batch(bool commit) {
  int& open = commit ? open_commit_ : open_prep_;
  if (open >= 0) return *batches_[static_cast<std::size_t>(open)];
  std::size_t i = 0;
  while (i < batches_.size() && (batches_[i]->in_flight || static_cast<int>(i) == open_prep_ ||
                                 static_cast<int>(i) == open_commit_))
    ++i;
  if (i == batches_.size()) batches_.push_back(std::make_unique<Batch>());
  Batch& b = *batches_[i];
  b.commit = commit;
  b.elems.clear();
  b.tags.clear();
  open = static_cast<int>(i);
  return b;
}

void BatchQueueTransport::append(Batch& b, std::uint16_t tag, std::int32_t result, std::byte* buf,
                                 std::int32_t buf_slot) {
  const std::size_t at = b.elems.size();
  b.elems.resize(at + elem_bytes_);
  BatchElemHeader h{};
  h.tag = tag;
  h.buf_index = buf_slot >= 0 ? static_cast<std::uint16_t>(buf_slot) : 0;
  h.result = result;
  std::memcpy(b.elems.data() + at, &h, sizeof(h));
  if (elem_flags_ & kBatchFHasBufAddr) {
    const auto addr = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(buf));
    std::memcpy(b.elems.data() + at + sizeof(h), &addr, sizeof(addr));
  }
  b.tags.push_back(tag);
}

void BatchQueueTransport::fetch(std::uint16_t tag, bool commit, std::int32_t result, std::byte* buf,
                                std::int32_t buf_slot) {
  if (tag >= state_.size()) return;
  TagState& s = state_[tag];
  if (commit ? s != TagState::kServer : s != TagState::kNew) return;  // not the caller's to give
  append(open_batch(commit), tag, commit ? result : 0, buf, buf_slot);
  s = TagState::kDriver;
  schedule_flush();
}

void BatchQueueTransport::schedule_flush() {
  if (flush_scheduled_) return;
  flush_scheduled_ = true;
  ctx_.before_submit(*flush_);
}

void BatchQueueTransport::flush() {
  flush_scheduled_ = false;
  for (int* open : {&open_prep_, &open_commit_}) {
    if (*open < 0) continue;
    const auto cookie = static_cast<std::uint32_t>(*open);
    Batch& b = *batches_[cookie];
    *open = -1;
    if (b.tags.empty()) continue;
    b.in_flight = true;
    ++sends_in_flight_;
    if (b.commit) {
      ++counters_.commits;
      counters_.committed += b.tags.size();
    } else {
      ++counters_.preps;
    }
    driver_->send(b.commit, b.elems, static_cast<std::uint16_t>(b.tags.size()), elem_bytes_,
                  elem_flags_, cookie);
  }
  finish_if_stopped();
}

void BatchQueueTransport::sent(std::uint32_t cookie, std::int32_t res) {
  if (cookie >= batches_.size() || !batches_[cookie]->in_flight) return;
  Batch& b = *batches_[cookie];
  b.in_flight = false;
  --sends_in_flight_;
  // The elements the driver took (PREP: all or none).
  std::size_t taken = 0;
  if (b.commit)
    taken = res < 0 ? 0 : static_cast<std::size_t>(res) / elem_bytes_;
  else
    taken = res == 0 ? b.tags.size() : 0;
  const std::int32_t err = res < 0 ? res : -EIO;
  for (std::size_t i = taken; i < b.tags.size(); ++i) {
    // Refused: the tag's request (COMMIT) or the tag itself (PREP) is not the driver's. Nothing
    // more can be done for it.
    if (state_[b.tags[i]] == TagState::kDriver) finish_tag(b.tags[i], stopped_ ? -ENODEV : err);
  }
  if (!b.commit && !prepped_ && res == 0 && !stopped_) {
    bool all = true;
    for (const auto& other : batches_)
      if (other->in_flight && !other->commit) all = false;
    if (all && open_prep_ < 0) {
      prepped_ = true;
      if (!fetch_armed_) {
        fetch_armed_ = true;
        ++counters_.fetch_arms;
        driver_->arm_fetch();
      }
    }
  }
  if (!b.commit && res < 0 && !stopped_) {
    // The driver refused the queue: nothing will be delivered.
    stopped_ = true;
    stop_res_ = res;
  }
  finish_if_stopped();
}

void BatchQueueTransport::fetched(std::span<const std::uint16_t> tags) {
  ++counters_.fetch_cqes;
  for (const std::uint16_t tag : tags) {
    if (tag >= state_.size() || state_[tag] != TagState::kDriver) continue;  // not the driver's
    state_[tag] = TagState::kServer;
    ++counters_.fetched;
    if (queue_) queue_->fetch_done(tag, kIoResOk);
  }
}

void BatchQueueTransport::fetch_ended(std::int32_t res) {
  fetch_armed_ = false;
  if ((res >= 0 || res == -ENOBUFS) && !stopped_) {
    // Ended without the device going (every fetch buffer was in use, or a last completion with
    // tags): what waits in the driver is delivered once armed again.
    fetch_armed_ = true;
    ++counters_.fetch_arms;
    driver_->arm_fetch();
    return;
  }
  if (!stopped_) {
    stopped_ = true;
    stop_res_ = res;
  }
  finish_if_stopped();
}

void BatchQueueTransport::finish_tag(std::uint16_t tag, std::int32_t res) {
  if (state_[tag] == TagState::kDone) return;
  state_[tag] = TagState::kDone;
  if (queue_) queue_->fetch_done(tag, res < 0 ? res : -EIO);
}

void BatchQueueTransport::finish_if_stopped() {
  // Not while a command is in flight or a batch waits to be sent: the queue may be destroyed
  // once every tag is answered.
  if (!stopped_ || in_flight() > 0 || flush_scheduled_) return;
  const std::int32_t res = stop_res_ < 0 ? stop_res_ : -ENODEV;
  for (std::size_t tag = 0; tag < state_.size(); ++tag)
    if (state_[tag] == TagState::kDriver) finish_tag(static_cast<std::uint16_t>(tag), res);
}

}  // namespace graid::ublk
