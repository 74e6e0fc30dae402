// FaultyMember: fault injection in front of another MemberDevice (see faulty_member.h).
//
// Writes, discards and flushes go to the inner device through a Shim — a MemberRequest of our
// own that carries the caller's request — so their completions pass through here first: that is
// where the undo log learns a write completed, a flush makes entries durable, and a torn write's
// result is rewritten. Reads need none of that and go to the inner device as they are. This is a
// test device: one mutex guards everything and shims are allocated per I/O.
#include "io/faulty_member.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>

#include "graid/buffer.h"
#include "graid/thread_annotations.h"

namespace graid {
namespace {

constexpr std::uint32_t kSector = 512;
constexpr std::size_t kUndoAlign = 4096;  // the inner device's read_sync/write_sync rule

struct UndoEntry {
  std::uint64_t seq;
  MemberOp op;
  std::uint64_t offset;
  std::uint32_t len;
  AlignedBuffer old;  // contents of [offset, offset + len) before this write
  bool completed;
};

}  // namespace

struct FaultyMember::Shim final : MemberRequest {
  FaultyMember* owner = nullptr;
  MemberRequest* user = nullptr;
  std::uint64_t seq = 0;              // undo entry of a write or discard (0: none)
  std::vector<std::uint64_t> covers;  // a flush: entries its success makes durable
  bool torn = false;
  bool torn_success = false;
  std::list<Shim>::iterator self;

  // A held write (hold_writes): submitted on its ring's thread once released.
  struct Release final : Task {
    Shim* shim = nullptr;
    IoContext* ctx = nullptr;
    int error = 0;  // fail_held_writes(): complete with -error instead of submitting
    void run() override {
      if (error != 0) {
        shim->owner->finish(*shim, -error);
      } else {
        shim->owner->inner_->submit(*ctx, *shim);
      }
    }
  } release;

  void on_done(std::int32_t result) override { owner->finish(*this, result); }
};

struct FaultyMember::State {
  mutable Mutex mu;  // guards everything below
  bool vanished GUARDED_BY(mu) = false;
  std::uint32_t fail_next GUARDED_BY(mu) = 0;
  int fail_ops[5] GUARDED_BY(mu) = {};                    // errno per MemberOp
  using Range = std::pair<std::uint64_t, std::uint64_t>;  // [begin, end)
  struct FailRange {
    std::uint64_t begin, end;
    int err;
  };
  std::vector<FailRange> fail_ranges GUARDED_BY(mu);
  std::vector<Range> bad GUARDED_BY(mu);           // bad sectors
  std::uint32_t logical_block GUARDED_BY(mu) = 0;  // 0: the inner device's
  bool tear_pending GUARDED_BY(mu) = false;
  bool tear_success GUARDED_BY(mu) = false;
  std::mt19937_64 tear_rng GUARDED_BY(mu);
  std::uint32_t last_torn_prefix GUARDED_BY(mu) = 0;
  std::uint64_t next_seq GUARDED_BY(mu) = 1;
  std::vector<UndoEntry> log GUARDED_BY(mu);  // oldest first
  std::list<Shim> shims GUARDED_BY(mu);       // writes, discards and flushes in flight
  bool holding GUARDED_BY(mu) = false;        // hold_writes()
  std::vector<Shim*> held GUARDED_BY(mu);     // writes held, in submission order
  FaultCounts counts GUARDED_BY(mu);

  // The errno an I/O is to fail with by injection, 0 for none (consumes fail_next).
  int injected_error(MemberOp op, std::uint64_t offset, std::uint64_t len) REQUIRES(mu) {
    if (fail_next > 0) {
      --fail_next;
      return EIO;
    }
    if (fail_ops[static_cast<int>(op)] != 0) return fail_ops[static_cast<int>(op)];
    if (op == MemberOp::kFlush) return 0;
    auto touches = [&](const auto& range) {
      return offset < range.second && offset + len > range.first;
    };
    for (const FailRange& r : fail_ranges)
      if (offset < r.end && offset + len > r.begin) return r.err;
    if (op == MemberOp::kRead && std::any_of(bad.begin(), bad.end(), touches)) return EIO;
    return 0;
  }
  bool should_fail(MemberOp op, std::uint64_t offset, std::uint64_t len) REQUIRES(mu) {
    return injected_error(op, offset, len) != 0;
  }

  // A write of [offset, +len) landed: the bad sectors under it are remapped.
  void rewritten(std::uint64_t offset, std::uint64_t len) REQUIRES(mu) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> left;
    const std::uint64_t end = offset + len;
    for (const auto& [b, e] : bad) {
      if (e <= offset || b >= end) {
        left.emplace_back(b, e);
        continue;
      }
      if (b < offset) left.emplace_back(b, offset);
      if (e > end) left.emplace_back(end, e);
    }
    bad.swap(left);
  }

  // Records the old contents of a write's range; returns its sequence number, or 0 when the
  // request is malformed (the inner device will refuse it, changing nothing).
  std::uint64_t capture(MemberDevice& inner, MemberOp op, std::uint64_t offset, std::uint32_t len)
      REQUIRES(mu) {
    if (len == 0 || len % kSector != 0 || offset % kSector != 0 || offset > inner.size() ||
        len > inner.size() - offset) {
      return 0;
    }
    auto old = AlignedBuffer::allocate(len, kUndoAlign);
    if (!old.is_ok() || !inner.read_sync(offset, old->span()).is_ok()) return 0;
    const std::uint64_t seq = next_seq++;
    log.push_back(UndoEntry{seq, op, offset, len, std::move(*old), false});
    return seq;
  }

  void mark_completed(std::uint64_t seq) REQUIRES(mu) {
    for (auto& entry : log) {
      if (entry.seq == seq) entry.completed = true;
    }
  }

  // The entries a flush issued now makes durable when it succeeds.
  std::vector<std::uint64_t> completed_entries() const REQUIRES(mu) {
    std::vector<std::uint64_t> seqs;
    for (const auto& entry : log) {
      if (entry.completed) seqs.push_back(entry.seq);
    }
    return seqs;
  }

  void make_durable(const std::vector<std::uint64_t>& seqs) REQUIRES(mu) {
    std::erase_if(log, [&](const UndoEntry& entry) {
      return std::find(seqs.begin(), seqs.end(), entry.seq) != seqs.end();
    });
  }

  // Draws the prefix of the pending torn write, in whole sectors below len.
  std::uint32_t draw_tear(std::uint32_t len) REQUIRES(mu) {
    tear_pending = false;
    ++counts.torn;
    const std::uint32_t sectors = len / kSector;
    last_torn_prefix =
        sectors == 0 ? 0 : static_cast<std::uint32_t>(tear_rng() % sectors) * kSector;
    return last_torn_prefix;
  }
};

FaultyMember::FaultyMember(std::unique_ptr<MemberDevice> inner)
    : inner_(std::move(inner)), state_(std::make_unique<State>()) {}

FaultyMember::~FaultyMember() = default;

const std::string& FaultyMember::path() const noexcept {
  return inner_->path();
}
std::uint64_t FaultyMember::size() const noexcept {
  return inner_->size();
}
bool FaultyMember::direct_io() const noexcept {
  return inner_->direct_io();
}
DeviceIdentity FaultyMember::identity() const noexcept {
  return inner_->identity();
}

void FaultyMember::submit(IoContext& ctx, MemberRequest& req) {
  State& st = *state_;
  UniqueLock lock(st.mu);
  switch (req.op) {
    case MemberOp::kRead:
      ++st.counts.reads;
      st.counts.read_bytes += req.len;
      break;
    case MemberOp::kWrite:
      ++st.counts.writes;
      st.counts.write_bytes += req.len;
      break;
    case MemberOp::kFlush:
      ++st.counts.flushes;
      break;
    case MemberOp::kDiscard:
      ++st.counts.discards;
      break;
    case MemberOp::kWriteZeroes:
      ++st.counts.write_zeroes;
      break;
  }
  const int injected = st.vanished ? ENODEV : st.injected_error(req.op, req.offset, req.len);
  if (injected != 0) {
    ++st.counts.failed;
    const std::int32_t error = -injected;
    lock.unlock();
    ctx.complete_later(req, error);
    return;
  }
  if (req.op == MemberOp::kRead) {
    lock.unlock();
    inner_->submit(ctx, req);
    return;
  }

  Shim& shim = st.shims.emplace_back();
  shim.self = std::prev(st.shims.end());
  shim.owner = this;
  shim.user = &req;
  shim.op = req.op;
  shim.offset = req.offset;
  shim.buf = req.buf;
  shim.len = req.len;
  shim.fua = req.fua;
  if (req.op == MemberOp::kFlush) {
    shim.covers = st.completed_entries();
  } else {
    shim.seq = st.capture(*inner_, req.op, req.offset, req.len);
    if (req.op == MemberOp::kWrite && st.tear_pending) {
      shim.torn = true;
      shim.torn_success = st.tear_success;
      shim.len = st.draw_tear(req.len);
      if (shim.len == 0) {  // nothing reaches the device
        st.mark_completed(shim.seq);
        const std::int32_t result = shim.torn_success ? static_cast<std::int32_t>(req.len) : -EIO;
        st.shims.erase(shim.self);
        lock.unlock();
        ctx.complete_later(req, result);
        return;
      }
    }
  }
  if (req.op == MemberOp::kWrite && st.holding) {
    shim.release.shim = &shim;
    shim.release.ctx = &ctx;
    st.held.push_back(&shim);
    return;
  }
  lock.unlock();
  inner_->submit(ctx, shim);
}

void FaultyMember::hold_writes() {
  MutexLock lock(state_->mu);
  state_->holding = true;
}

void FaultyMember::release_writes() {
  fail_held_writes(0);
}

void FaultyMember::fail_held_writes(int err) {
  std::vector<Shim*> held;
  {
    MutexLock lock(state_->mu);
    state_->holding = false;
    held.swap(state_->held);
    state_->counts.failed += err != 0 ? held.size() : 0;
  }
  for (Shim* shim : held) {
    shim->release.error = err;
    shim->release.ctx->post(shim->release);
  }
}

std::size_t FaultyMember::held_writes() const {
  MutexLock lock(state_->mu);
  return state_->held.size();
}

void FaultyMember::finish(Shim& shim, std::int32_t result) {
  State& st = *state_;
  MemberRequest* user = shim.user;
  {
    MutexLock lock(st.mu);
    if (shim.seq != 0) st.mark_completed(shim.seq);
    if (shim.op == MemberOp::kFlush && result == 0) st.make_durable(shim.covers);
    if (shim.op == MemberOp::kWrite && result >= 0 && !shim.torn) {
      st.rewritten(shim.offset, shim.len);
      // A FUA write is durable as it completes: no power loss undoes it.
      if (shim.fua && shim.seq != 0) st.make_durable({shim.seq});
    }
    if (shim.torn && result >= 0) {
      result = shim.torn_success ? static_cast<std::int32_t>(user->len) : -EIO;
    }
    st.shims.erase(shim.self);  // destroys shim: touch nothing of it below
  }
  user->on_done(result);
}

bool FaultyMember::reads_zeroes(std::uint64_t offset, std::uint64_t len) {
  {
    MutexLock lock(state_->mu);
    if (state_->vanished) return false;
  }
  return inner_->reads_zeroes(offset, len);
}

// Not in the undo log: zeroing is for initialisation, before anything a power loss could
// undo matters; it counts as a sync write.
Status FaultyMember::zero_range(std::uint64_t offset, std::uint64_t len) {
  State& st = *state_;
  MutexLock lock(st.mu);
  ++st.counts.sync_writes;
  if (st.vanished || st.should_fail(MemberOp::kWrite, offset, len)) {
    ++st.counts.failed;
    return make_error(Errc::kIoError, "{}: zero {} bytes at offset {}: {} (injected)", path(), len,
                      offset, st.vanished ? "device vanished" : "EIO");
  }
  return inner_->zero_range(offset, len);
}

Status FaultyMember::read_sync(std::uint64_t offset, std::span<std::byte> buf) {
  State& st = *state_;
  {
    MutexLock lock(st.mu);
    ++st.counts.sync_reads;
    if (st.vanished || st.should_fail(MemberOp::kRead, offset, buf.size())) {
      ++st.counts.failed;
      return make_error(Errc::kIoError, "{}: read of {} bytes at offset {}: {} (injected)", path(),
                        buf.size(), offset, st.vanished ? "device vanished" : "EIO");
    }
  }
  return inner_->read_sync(offset, buf);
}

Status FaultyMember::write_sync(std::uint64_t offset, std::span<const std::byte> buf) {
  State& st = *state_;
  MutexLock lock(st.mu);  // held across the write: the undo entry must match it
  ++st.counts.sync_writes;
  if (st.vanished || st.should_fail(MemberOp::kWrite, offset, buf.size())) {
    ++st.counts.failed;
    return make_error(Errc::kIoError, "{}: write of {} bytes at offset {}: {} (injected)", path(),
                      buf.size(), offset, st.vanished ? "device vanished" : "EIO");
  }
  const std::uint64_t seq =
      st.capture(*inner_, MemberOp::kWrite, offset, static_cast<std::uint32_t>(buf.size()));
  Status status;
  if (st.tear_pending) {
    const bool report_success = st.tear_success;
    const std::uint32_t prefix = st.draw_tear(static_cast<std::uint32_t>(buf.size()));
    if (prefix > 0) status = inner_->write_sync(offset, buf.first(prefix));
    if (status.is_ok() && !report_success) {
      status = make_error(Errc::kIoError,
                          "{}: write of {} bytes at offset {}: torn after {} "
                          "(injected)",
                          path(), buf.size(), offset, prefix);
    }
  } else {
    status = inner_->write_sync(offset, buf);
    if (status) st.rewritten(offset, buf.size());
  }
  if (seq != 0) st.mark_completed(seq);
  return status;
}

Status FaultyMember::flush_sync() {
  State& st = *state_;
  std::vector<std::uint64_t> covers;
  {
    MutexLock lock(st.mu);
    ++st.counts.sync_flushes;
    if (st.vanished || st.should_fail(MemberOp::kFlush, 0, 0)) {
      ++st.counts.failed;
      return make_error(Errc::kIoError, "{}: flush: {} (injected)", path(),
                        st.vanished ? "device vanished" : "EIO");
    }
    covers = st.completed_entries();
  }
  Status status = inner_->flush_sync();
  if (status.is_ok()) {
    MutexLock lock(st.mu);
    st.make_durable(covers);
  }
  return status;
}

void FaultyMember::fail_next(std::uint32_t count) {
  MutexLock lock(state_->mu);
  state_->fail_next = count;
}

void FaultyMember::fail_op(MemberOp op, bool fail) {
  fail_op_with(op, fail ? EIO : 0);
}

void FaultyMember::fail_op_with(MemberOp op, int err) {
  MutexLock lock(state_->mu);
  state_->fail_ops[static_cast<int>(op)] = err;
}

void FaultyMember::bad_sectors(std::uint64_t offset, std::uint64_t len) {
  MutexLock lock(state_->mu);
  if (len > 0) state_->bad.emplace_back(offset, offset + len);
}

bool FaultyMember::has_bad_sectors() const {
  MutexLock lock(state_->mu);
  return !state_->bad.empty();
}

void FaultyMember::set_logical_block_size(std::uint32_t bytes) {
  MutexLock lock(state_->mu);
  state_->logical_block = bytes;
}

std::uint32_t FaultyMember::logical_block_size() const noexcept {
  {
    MutexLock lock(state_->mu);
    if (state_->logical_block != 0) return state_->logical_block;
  }
  return inner_->logical_block_size();
}

void FaultyMember::fail_range(std::uint64_t offset, std::uint64_t len, int err) {
  MutexLock lock(state_->mu);
  if (len > 0) state_->fail_ranges.push_back(State::FailRange{offset, offset + len, err});
}

void FaultyMember::clear_failures() {
  MutexLock lock(state_->mu);
  state_->fail_next = 0;
  std::fill(std::begin(state_->fail_ops), std::end(state_->fail_ops), 0);
  state_->fail_ranges.clear();
}

void FaultyMember::vanish() {
  MutexLock lock(state_->mu);
  state_->vanished = true;
}

// NO_THREAD_SAFETY_ANALYSIS: a run-time count of locks, held at once, is out of the analysis'
// reach. They are taken in address order, so two callers cannot deadlock.
void FaultyMember::vanish_together(const std::vector<FaultyMember*>& members)
    NO_THREAD_SAFETY_ANALYSIS {
  std::vector<Mutex*> locks;
  for (FaultyMember* m : members)
    locks.push_back(&m->state_->mu);
  std::sort(locks.begin(), locks.end());
  locks.erase(std::unique(locks.begin(), locks.end()), locks.end());
  for (Mutex* mu : locks)
    mu->lock();
  for (FaultyMember* m : members)
    m->state_->vanished = true;
  for (auto it = locks.rbegin(); it != locks.rend(); ++it)
    (*it)->unlock();
}

bool FaultyMember::vanished() const {
  MutexLock lock(state_->mu);
  return state_->vanished;
}

void FaultyMember::tear_next_write(std::uint64_t seed, bool report_success) {
  MutexLock lock(state_->mu);
  state_->tear_pending = true;
  state_->tear_success = report_success;
  state_->tear_rng.seed(seed);
}

std::uint32_t FaultyMember::last_torn_prefix() const {
  MutexLock lock(state_->mu);
  return state_->last_torn_prefix;
}

std::size_t FaultyMember::unflushed_writes() const {
  MutexLock lock(state_->mu);
  return state_->log.size();
}

FaultCounts FaultyMember::counts() const {
  MutexLock lock(state_->mu);
  return state_->counts;
}

Result<std::vector<PowerLossOutcome>> FaultyMember::power_loss(std::mt19937_64& rng,
                                                               PowerLossPolicy policy) {
  State& st = *state_;
  MutexLock lock(st.mu);
  if (!st.shims.empty()) {
    return make_error(Errc::kBusy, "{}: power_loss with {} writes/flushes in flight", path(),
                      st.shims.size());
  }
  std::vector<PowerLossOutcome> outcomes(st.log.size());
  Status first_error;
  for (std::size_t i = st.log.size(); i-- > 0;) {  // newest first
    UndoEntry& entry = st.log[i];
    std::uint32_t kept = 0;
    switch (policy) {
      case PowerLossPolicy::kLoseAll:
        break;
      case PowerLossPolicy::kLoseRandom:
        kept = (rng() & 1) != 0 ? entry.len : 0;
        break;
      case PowerLossPolicy::kTearRandom: {
        const std::uint32_t sectors = entry.len / kSector;
        switch (rng() % 3) {
          case 0:
            kept = entry.len;
            break;
          case 1:
            break;
          default:  // a tear needs two sectors; a one-sector write is lost instead
            if (sectors > 1) kept = static_cast<std::uint32_t>(1 + rng() % (sectors - 1)) * kSector;
            break;
        }
        break;
      }
    }
    outcomes[i] = PowerLossOutcome{entry.op, entry.offset, entry.len, kept};
    if (kept == entry.len) continue;
    Status status;
    if (kept == 0) {
      status = inner_->write_sync(entry.offset, entry.old.span());
    } else {
      // The suffix starts 512-aligned; the inner device wants a 4096-aligned buffer.
      auto suffix = AlignedBuffer::allocate(entry.len - kept, kUndoAlign);
      if (suffix.is_ok()) {
        std::memcpy(suffix->data(), entry.old.data() + kept, entry.len - kept);
        status = inner_->write_sync(entry.offset + kept, suffix->span());
      } else {
        status = suffix.status();
      }
    }
    if (!status.is_ok() && first_error.is_ok()) first_error = status;
  }
  if (first_error.is_ok()) first_error = inner_->flush_sync();
  st.log.clear();
  st.vanished = true;
  if (!first_error.is_ok()) {
    return make_error(Errc::kIoError, "{}: power_loss could not restore old contents: {}", path(),
                      first_error.to_string());
  }
  return outcomes;
}

}  // namespace graid
