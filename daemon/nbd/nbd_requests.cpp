// NbdSession's transmission phase: request headers, payloads, ArrayIos and replies.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "nbd/nbd_session.h"

namespace graid::nbd {
namespace {

constexpr std::size_t kDrainChunk = 64 * 1024;

}  // namespace

void NbdSession::Slot::on_complete(Status status) {
  session->on_array_done(*this, std::move(status));
}

void NbdSession::read_next_header() {
  if (done_reading_) return;
  read_into(req_in_, Recv::kRequestHeader);
}

void NbdSession::on_request_header() {
  auto h = parse_request_header(req_in_);
  if (!h) {
    // The stream is out of step (or hostile): nothing after this can be trusted.
    spdlog::info("nbd: {}: closing a connection: {}", peer_, h.status().to_string());
    return hard_close();
  }
  ++shared_.stats->requests;
  last_request_ = std::chrono::steady_clock::now();
  pending_ = *h;
  admit();
}

void NbdSession::admit() {
  const RequestHeader r = pending_;
  const RequestCheck check = check_request(r, export_->limits);
  if (check.error == 0 && r.type == kCmdDisc) {
    // The client is done: answer what is in flight, then close.
    waiting_ = false;
    done_reading_ = true;
    return;
  }
  const bool needs_buffer =
      check.error == 0 && (r.type == kCmdRead || r.type == kCmdWrite) && r.length > 0;
  const std::uint64_t buffer_bytes = needs_buffer ? BufferPool::class_bytes(r.length) : 0;
  // The server's budget, shared fairly: a connection that holds no buffer may always take one
  // request of any size; one that holds some waits while the next would take it past its share
  // (the budget over the clients served) or the server past the budget. So no client pins what
  // another needs for its one request (nbd_server.h, max_bytes_total). Its own release() or
  // another connection's (budget_released()) calls admit() again.
  const NbdServerOptions& o = shared_.options;
  const bool holds_none = bytes_in_use_ == 0;
  const std::uint64_t share = std::min<std::uint64_t>(
      o.max_bytes_per_connection, o.max_bytes_total / std::max<std::uint32_t>(1, shared_.serving));
  const bool over_total =
      buffer_bytes > 0 && !holds_none && shared_.bytes_in_use + buffer_bytes > o.max_bytes_total;
  const bool over_share = buffer_bytes > 0 && !holds_none && bytes_in_use_ + buffer_bytes > share;
  if (free_slots_.empty() || over_total || over_share) {
    waiting_ = true;  // a release() calls admit() again; the socket is not read meanwhile
    if (over_total && !waiting_budget_) {
      waiting_budget_ = true;
      shared_.budget_waiters.push_back(this);
    }
    return;
  }
  waiting_ = false;
  Slot& s = *slots_[free_slots_.back()];
  free_slots_.pop_back();
  ++slots_in_use_;
  s.request = r;
  s.error = check.error;
  s.message.clear();
  if (needs_buffer) {
    auto buffer = shared_.pool.take(r.length);
    if (buffer) {
      s.data = std::move(*buffer);
      bytes_in_use_ += s.data.size();
      shared_.bytes_in_use += s.data.size();
    } else {
      s.error = kErrNoMem;
      s.message = buffer.status().message();
    }
  }
  if (s.error != 0) {
    ++shared_.stats->errors;
    if (check.close) {
      // A WRITE too long to take: answer it, then close without reading its data.
      done_reading_ = true;
      return reply(s);
    }
    if (r.type == kCmdWrite && r.length > 0) {
      // Refused, but its data follows: read and drop it to stay in step.
      receiving_ = &s;
      recv_progress_ = std::chrono::steady_clock::now();
      drain_left_ = r.length;
      drain_buf_.resize(kDrainChunk);
      return read_into(std::span(drain_buf_).first(std::min<std::size_t>(drain_left_, kDrainChunk)),
                       Recv::kDrain);
    }
    reply(s);
    return read_next_header();
  }
  if (r.type == kCmdWrite && r.length > 0) {
    receiving_ = &s;
    recv_progress_ = std::chrono::steady_clock::now();  // io_timeout counts from here
    return read_into(std::span(s.data.data(), r.length), Recv::kPayload);
  }
  submit(s);
  read_next_header();
}

void NbdSession::on_payload() {
  Slot& s = *receiving_;
  receiving_ = nullptr;
  submit(s);
  read_next_header();
}

void NbdSession::on_drained() {
  drain_left_ -= static_cast<std::uint32_t>(recv_dst_.size());
  if (drain_left_ > 0) {
    return read_into(std::span(drain_buf_).first(std::min<std::size_t>(drain_left_, kDrainChunk)),
                     Recv::kDrain);
  }
  Slot& s = *receiving_;
  receiving_ = nullptr;
  reply(s);
  read_next_header();
}

void NbdSession::submit(Slot& s) {
  const RequestHeader& r = s.request;
  if (r.length == 0 && r.type != kCmdFlush) return reply(s);  // nothing to do
  s.offset = r.offset;
  s.len = r.length;
  s.buf = nullptr;
  s.flags = 0;
  switch (r.type) {
    case kCmdRead:
      s.kind = IoKind::kRead;
      s.buf = s.data.data();
      break;
    case kCmdWrite:
      s.kind = IoKind::kWrite;
      s.buf = s.data.data();
      if ((r.flags & kCmdFlagFua) != 0) s.flags |= kIoFua;
      break;
    case kCmdFlush:
      s.kind = IoKind::kFlush;
      s.offset = 0;
      s.len = 0;
      break;
    case kCmdTrim:
      s.kind = IoKind::kDiscard;
      break;
    case kCmdWriteZeroes:
      s.kind = IoKind::kWriteZeroes;
      if ((r.flags & kCmdFlagNoHole) != 0) s.flags |= kIoNoUnmap;
      break;
    default:
      s.error = kErrInval;  // check_request lets nothing else through
      return reply(s);
  }
  s.started = std::chrono::steady_clock::now();
  export_->queue->submit(s, export_->vd);
}

void NbdSession::count(const Slot& s, bool ok) {
  NbdExportCounters* c = export_->spec.counters.get();
  if (c == nullptr) return;
  const auto add = [](std::atomic<std::uint64_t>& a, std::uint64_t v) {
    a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
  };
  const RequestHeader& r = s.request;
  switch (r.type) {
    case kCmdRead:
      add(c->reads, 1);
      if (ok) add(c->read_bytes, r.length);
      break;
    case kCmdWrite:
      add(c->writes, 1);
      if (ok) add(c->write_bytes, r.length);
      break;
    case kCmdFlush:
      add(c->flushes, 1);
      break;
    case kCmdTrim:
      add(c->trims, 1);
      break;
    default:
      add(c->write_zeroes, 1);
      break;
  }
  if (!ok) add(c->errors, 1);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - s.started)
                      .count();
  add(c->latency[latency_bucket(static_cast<std::uint64_t>(us))], 1);
  add(c->latency_sum_us, static_cast<std::uint64_t>(us));
}

void NbdSession::on_array_done(Slot& s, Status status) {
  const RequestHeader& r = s.request;
  if (!status) {
    s.error = nbd_error_for(status.code());
    s.message = status.message();
    ++shared_.stats->errors;
  } else if ((r.type == kCmdTrim || r.type == kCmdWriteZeroes) && (r.flags & kCmdFlagFua) != 0 &&
             s.kind != IoKind::kFlush) {
    // The engine's kIoFua covers writes only: make a FUA trim or write-zeroes durable with a
    // flush after it, before answering.
    s.kind = IoKind::kFlush;
    s.offset = 0;
    s.len = 0;
    s.flags = 0;
    export_->queue->submit(s, export_->vd);
    return;
  }
  count(s, s.error == 0);
  if (broken_) {
    release(s);
  } else {
    reply(s);
  }
  maybe_finish();
}

void NbdSession::reply(Slot& s) {
  const RequestHeader& r = s.request;
  OutMessage& m = s.out;
  m.iovcnt = 1;
  std::size_t head = 0;
  if (s.error != 0 && structured_) {
    head = encode_error_chunk(s.head, r.handle, s.error, s.message);
  } else if (structured_ && r.type == kCmdRead) {
    if (r.length == 0) {
      const auto none = encode_none_chunk(r.handle);
      head = none.size();
      std::memcpy(s.head.data(), none.data(), head);
    } else {
      // The whole read as one chunk: the data is complete before it is sent, so no error can
      // follow and the chunk may be the final one (also what NBD_CMD_FLAG_DF asks).
      const auto h = encode_offset_data_header(r.handle, r.offset, r.length, /*done=*/true);
      head = h.size();
      std::memcpy(s.head.data(), h.data(), head);
      m.iov[1] = iovec{s.data.data(), r.length};
      m.iovcnt = 2;
    }
  } else {
    const auto h = encode_simple_reply(s.error, r.handle);
    head = h.size();
    std::memcpy(s.head.data(), h.data(), head);
    if (r.type == kCmdRead && s.error == 0 && r.length > 0) {
      m.iov[1] = iovec{s.data.data(), r.length};
      m.iovcnt = 2;
    }
  }
  m.iov[0] = iovec{s.head.data(), head};
  queue_send(m);
}

void NbdSession::release(Slot& s) {
  const std::size_t freed = s.data.size();
  bytes_in_use_ -= freed;
  shared_.bytes_in_use -= freed;
  shared_.pool.give(std::move(s.data));
  s.data = AlignedBuffer();
  free_slots_.push_back(s.index);
  --slots_in_use_;
  // Connections waiting for the server's budget try again; each one still short registers
  // again.
  std::vector<NbdSession*> waiters;
  if (freed > 0) waiters.swap(shared_.budget_waiters);
  for (NbdSession* w : waiters)
    w->waiting_budget_ = false;
  if (waiting_ && !done_reading_) admit();
  for (NbdSession* w : waiters)
    if (w != this) w->budget_released();
}

}  // namespace graid::nbd
