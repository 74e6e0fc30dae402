// Test harness for arrays on file-backed members: a temp dir (tmpfs when available), member files
// wrapped in FaultyMember, a byte model of the array, and helpers to drive I/O synchronously.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "forwarding_member.h"
#include "graid/array.h"
#include "graid/member.h"
#include "graid/parity.h"
#include "graid/parity_worker.h"
#include "io/faulty_member.h"
#include "temp_dir.h"

namespace graid::testing {

// A request that records its outcome.
struct TestIo final : ArrayIo {
  bool done = false;
  Status status;
  void on_complete(Status s) override {
    done = true;
    status = std::move(s);
  }
};

// `n` bytes drawn from mt19937_64(seed): test data that differs per seed.
inline std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937_64 rng(seed);
  for (auto& b : v)
    b = static_cast<std::byte>(rng());
  return v;
}

// Runs `ios` on `queue` and polls until every one has completed.
inline void run_all(ArrayQueue& queue, std::span<TestIo*> ios) {
  for (TestIo* io : ios) {
    io->done = false;
    queue.submit(*io);
  }
  auto all_done = [&] {
    for (TestIo* io : ios) {
      if (!io->done) return false;
    }
    return true;
  };
  while (!all_done())
    queue.context().poll(true);
}

inline Status run_one(ArrayQueue& queue, IoKind kind, std::uint64_t offset, std::uint32_t len,
                      std::byte* buf) {
  TestIo io;
  io.kind = kind;
  io.offset = offset;
  io.len = len;
  io.buf = buf;
  TestIo* p = &io;
  run_all(queue, std::span(&p, 1));
  return io.status;
}

// The power goes on every member of `members` at once: all are pulled at one instant
// (FaultyMember::vanish_together, so no member still takes a write, a superblock update about the
// others included, once the first is gone); then, once the I/O in flight on each completed, the
// writes it held unflushed are undone as `policy` says. Cutting member by member instead lets the
// array see one member fail while the others still work, which no power loss does.
inline void cut_power(const std::vector<FaultyMember*>& members, std::uint64_t seed,
                      PowerLossPolicy policy = PowerLossPolicy::kLoseAll) {
  FaultyMember::vanish_together(members);  // at one instant: see vanish_together
  std::mt19937_64 loss(seed);
  for (FaultyMember* f : members) {
    auto undone = f->power_loss(loss, policy);
    for (int tries = 0; !undone.is_ok() && undone.status().code() == Errc::kBusy && tries < 5000;
         ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // I/O in flight completes
      undone = f->power_loss(loss, policy);
    }
    ASSERT_TRUE(undone.is_ok()) << undone.status().to_string();
  }
}

// A write that holds one stripe's lock from a second queue (its own ring, polled only by
// release()), so that the test queue's writes to that stripe have to wait for the lock.
struct StripeHolder {
  std::unique_ptr<IoContext> ctx;
  std::unique_ptr<ArrayQueue> queue;
  std::unique_ptr<AlignedBuffer> buf;
  TestIo io;

  // Writes 4 KiB of `data` at array byte `offset` and polls once: the write's stripe operation
  // takes the lock and issues its reads, whose completions wait for release().
  void hold(Array& array, std::uint64_t offset, const std::vector<std::byte>& data) {
    ctx = std::move(*IoContext::create(64));
    queue = std::move(*array.attach(*ctx));
    buf = std::make_unique<AlignedBuffer>(std::move(*AlignedBuffer::allocate(4096, 4096)));
    std::memcpy(buf->data(), data.data(), 4096);
    io.kind = IoKind::kWrite;
    io.offset = offset;
    io.len = 4096;
    io.buf = buf->data();
    queue->submit(io);
    ctx->poll(false);
  }
  void release() {
    while (!io.done)
      ctx->poll(true);
  }
};

// Members on files in a temp dir, each behind a FaultyMember the test can poke.
struct ArrayFiles {
  TempDir dir;
  std::vector<std::string> paths;
  std::vector<FaultyMember*> faulty;  // owned by the array

  Result<std::vector<std::unique_ptr<MemberDevice>>> open(std::uint32_t n, std::uint64_t bytes,
                                                          bool create) {
    std::vector<std::unique_ptr<MemberDevice>> out;
    faulty.clear();
    for (std::uint32_t i = 0; i < n; ++i) {
      if (create) paths.push_back(dir.path() + "/member-" + std::to_string(i) + ".img");
      OpenOptions o;
      o.create = create;
      o.create_size = bytes;
      auto dev = open_member(paths[i], o);
      if (!dev) return dev.status();
      auto f = std::make_unique<FaultyMember>(std::move(*dev));
      faulty.push_back(f.get());
      out.push_back(std::move(f));
    }
    return out;
  }
};

// An AsyncParity for tests: the engine's ParityWorker (a worker thread runs each batch and posts
// the completion back to the submitting thread, as the GPU batcher does) over a backend that,
// every `fail_every`-th batch (0: none), reports a failure after scribbling over the outputs it
// was given, so the queue's redo path runs too.
class ThreadedAsyncParity final : public AsyncParity {
 public:
  ThreadedAsyncParity(ParityBackend& backend, unsigned fail_every)
      : failing_(backend, fail_every), worker_(failing_) {}

  std::string_view name() const noexcept override { return "threaded-test"; }
  void submit(IoContext& ctx, std::span<StripeJob> jobs, ParityCompletion& done) override {
    worker_.submit(ctx, jobs, done);
  }

  std::uint64_t batches() const { return worker_.batches(); }
  std::uint64_t failed() const { return failing_.failed.load(); }

 private:
  struct FailingBackend final : ParityBackend {
    FailingBackend(ParityBackend& inner_backend, unsigned every)
        : inner(inner_backend), fail_every(every) {}
    std::string_view name() const noexcept override { return "failing-test"; }
    ParityCaps caps() const noexcept override { return inner.caps(); }
    Status execute(std::span<StripeJob> jobs) override {
      const std::uint64_t n = ++executed;
      if (fail_every == 0 || n % fail_every != 0) return inner.execute(jobs);
      for (StripeJob& job : jobs) {
        for (std::uint32_t c = 0; c < job.chunk_count(); ++c) {
          const bool written =
              job.op == ParityOp::kEncode ? c >= job.k
              : job.op == ParityOp::kReconstruct
                  ? (c == job.missing[0] || (job.missing_count == 2 && c == job.missing[1]))
                  : false;
          if (written) std::memset(job.chunk[c].data(), 0xA5, job.len);
        }
      }
      ++failed;
      return make_error(Errc::kIoError, "injected device failure");
    }
    ParityBackend& inner;
    const unsigned fail_every;
    std::atomic<std::uint64_t> executed{0};  // the worker's thread only, read by the test after
    std::atomic<std::uint64_t> failed{0};
  };

  FailingBackend failing_;
  ParityWorker worker_;  // after the backend it runs on; joined first
};

}  // namespace graid::testing
