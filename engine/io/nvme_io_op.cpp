#include "io/nvme_io_op.h"

#include <liburing.h>
#include <linux/nvme_ioctl.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace graid::nvme {
namespace {

// Each thread's idle ops. Ops never move (pieces point back at them), so they are held by
// unique_ptr; the list only grows to the most requests a thread had in flight at once.
struct OpPool {
  std::vector<std::unique_ptr<IoOp>> all;
  std::vector<IoOp*> idle;
};
thread_local OpPool t_pool;
thread_local std::uint64_t t_fixed_commands = 0;

// Failed commands are logged with their NVMe status (the errno the array sees loses it), up to
// this many per process, so a dying drive cannot flood the log.
constexpr int kLoggedFailures = 64;
std::atomic<int> g_logged{0};

const char* op_name(MemberOp op) {
  switch (op) {
    case MemberOp::kRead:
      return "read";
    case MemberOp::kWrite:
      return "write";
    case MemberOp::kFlush:
      return "flush";
    case MemberOp::kDiscard:
      return "discard";
    case MemberOp::kWriteZeroes:
      return "write zeroes";
  }
  return "command";
}

bool has_data(MemberOp op) {
  return op == MemberOp::kRead || op == MemberOp::kWrite;
}

}  // namespace

std::int32_t Piece::prep(io_uring_sqe& sqe, std::span<std::byte> cmd) {
  return op_->prep(*this, sqe, cmd);
}

void Piece::on_complete(std::int32_t res, std::span<const std::uint64_t> /*big_cqe*/) {
  op_->piece_done(*this, res);
}

std::int32_t RetryTimer::prep(io_uring_sqe& sqe, std::span<std::byte> /*cmd*/) {
  io_uring_prep_timeout(&sqe, &wait_, 0, 0);
  return 0;
}

void RetryTimer::on_complete(std::int32_t /*res*/, std::span<const std::uint64_t> /*big_cqe*/) {
  // -ETIME when it expired. Anything else (a kernel that refused the timeout) sends the piece
  // again without the wait, which the time bound still ends.
  piece_->op_->timer_done(*piece_);
}

IoOp::IoOp() {
  for (Piece& p : pieces_)
    p.op_ = this;
}

IoOp& IoOp::acquire() {
  OpPool& pool = t_pool;
  if (pool.idle.empty()) {
    pool.all.push_back(std::make_unique<IoOp>());
    return *pool.all.back();
  }
  IoOp* op = pool.idle.back();
  pool.idle.pop_back();
  return *op;
}

void IoOp::release(IoOp& op) {
  t_pool.idle.push_back(&op);
}

std::uint64_t IoOp::fixed_buffer_commands() noexcept {
  return t_fixed_commands;
}

void IoOp::start_on(IoContext& ctx, const std::shared_ptr<MemberFile>& file, const Limits& limits,
                    const std::string& path, MemberRequest& req) {
  own_sink_.ctx_ = &ctx;
  own_sink_.file_ = &file;
  start(own_sink_, limits, path, req, &IoOp::release);
}

void IoOp::start(CommandSink& sink, const Limits& limits, const std::string& path,
                 MemberRequest& req, void (*recycle)(IoOp&)) {
  sink_ = &sink;
  limits_ = &limits;
  path_ = &path;
  req_ = &req;
  recycle_ = recycle;
  issued_ = 0;
  flush_issued_ = false;
  error_ = 0;
  // Pieces are all assigned before any is submitted, so the count is right whatever the sink
  // does with the first.
  active_ = 0;
  while (active_ < kWindow && take_next(pieces_[active_]))
    ++active_;
  const unsigned started = active_;
  for (unsigned i = 0; i < started; ++i)
    sink.submit(pieces_[i]);
}

bool IoOp::take_next(Piece& p) {
  const MemberRequest& r = *req_;
  p.retries_ = RetryState();
  if (r.op == MemberOp::kFlush) {
    if (flush_issued_) return false;
    flush_issued_ = true;
    p.offset_ = 0;
    p.len_ = 0;
    return true;
  }
  if (issued_ >= r.len) return false;
  const std::uint64_t addr =
      has_data(r.op) ? reinterpret_cast<std::uintptr_t>(r.buf + issued_) : std::uint64_t{0};
  const std::uint32_t n = chunk_bytes(*limits_, r.op, addr, r.len - issued_);
  p.offset_ = issued_;
  p.len_ = n;
  issued_ += n;
  return true;
}

std::int32_t IoOp::prep(Piece& p, io_uring_sqe& sqe, std::span<std::byte> cmd) {
  // A normal ring's 16-byte command area cannot hold the 72-byte command (the member checks
  // the ring first; this is the backstop that keeps a command from spilling into the next SQE).
  if (cmd.size() < sizeof(nvme_uring_cmd)) return -EOPNOTSUPP;
  const MemberRequest& r = *req_;
  std::byte* data = has_data(r.op) ? r.buf + p.offset_ : nullptr;
  const Command c = encode(*limits_, r.op, r.offset + p.offset_, p.len_,
                           reinterpret_cast<std::uintptr_t>(data), r.fua, p.range_);
  nvme_uring_cmd u;
  to_uring_cmd(c, u);
  std::memcpy(cmd.data(), &u, sizeof(u));
  sqe.opcode = IORING_OP_URING_CMD;
  sqe.cmd_op = NVME_URING_CMD_IO;
  if (data != nullptr) {
    if (const auto index = sink_->registered_buffer(data, p.len_)) {
      sqe.uring_cmd_flags = IORING_URING_CMD_FIXED;
      sqe.buf_index = *index;
      ++t_fixed_commands;
    }
  }
  return 0;
}

bool IoOp::retry(Piece& p, const Outcome& outcome) {
  if (error_ != 0) return false;  // the request fails anyway
  const std::optional<std::int64_t> delay = p.retries_.next(outcome, *limits_, sink_->now_ns());
  if (!delay) return false;
  if (*delay == 0) {
    sink_->submit(p);
  } else {
    p.timer_.wait_.tv_sec = *delay / 1'000'000'000;
    p.timer_.wait_.tv_nsec = *delay % 1'000'000'000;
    sink_->submit_timer(p.timer_);
  }
  return true;
}

void IoOp::timer_done(Piece& p) {
  if (error_ == 0) {
    sink_->submit(p);
    return;
  }
  // Another piece failed while this one waited: the request fails anyway.
  if (--active_ == 0) finish();
}

void IoOp::piece_done(Piece& p, std::int32_t res) {
  const Outcome outcome = decode_result(res);
  if (outcome.err != 0) {
    if (retry(p, outcome)) return;
    if (error_ == 0) error_ = outcome.err;
    if (g_logged.fetch_add(1, std::memory_order_relaxed) < kLoggedFailures) {
      const MemberRequest& r = *req_;
      const std::string why = res > 0
                                  ? fmt::format("{} (NVMe status {:#x})",
                                                status_name(static_cast<std::uint32_t>(res)), res)
                                  : std::string(std::strerror(-res));
      const unsigned retries = p.retries_.total();
      fmt::print(stderr, "graid: {}: NVMe {} of {} bytes at offset {}: {}{}; fails with {}\n",
                 *path_, op_name(r.op), p.len_, r.offset + p.offset_, why,
                 retries > 0 ? fmt::format(" after {} retries in {} ms", retries,
                                           p.retries_.failing_ns(sink_->now_ns()) / 1'000'000)
                             : std::string(),
                 std::strerror(-outcome.err));
    }
  }
  if (error_ == 0 && take_next(p)) {
    sink_->submit(p);
    return;
  }
  if (--active_ == 0) finish();
}

void IoOp::finish() {
  MemberRequest& r = *req_;
  const std::int32_t result =
      error_ != 0 ? error_ : (has_data(r.op) ? static_cast<std::int32_t>(r.len) : 0);
  void (*recycle)(IoOp&) = recycle_;
  req_ = nullptr;
  sink_ = nullptr;
  if (recycle != nullptr) recycle(*this);  // nothing below touches this op
  r.on_done(result);
}

}  // namespace graid::nvme
