#include "graidd/io_threads.h"

#include <sys/prctl.h>

#include <future>
#include <string>

namespace graid::daemon {

struct IoThreads::Thread {
  std::unique_ptr<IoContext> ctx;
  std::atomic<bool> stop{false};
  std::thread thread;
};

namespace {

// A function run once on an I/O thread, with a promise the caller waits on.
class CallTask final : public Task {
 public:
  CallTask(IoContext& ctx, const std::function<void(IoContext&)>& fn) : ctx_(ctx), fn_(fn) {}
  void run() override {
    fn_(ctx_);
    done_.set_value();
  }
  std::future<void> future() { return done_.get_future(); }

 private:
  IoContext& ctx_;
  const std::function<void(IoContext&)>& fn_;
  std::promise<void> done_;
};

}  // namespace

IoThreads::IoThreads() = default;

Result<std::unique_ptr<IoThreads>> IoThreads::start(std::uint32_t count, unsigned queue_depth) {
  if (count == 0 || count > 256)
    return make_error(Errc::kInvalidArgument, "--io-threads {}: must be 1..256", count);
  auto pool = std::make_unique<IoThreads>();
  for (std::uint32_t i = 0; i < count; ++i) {
    auto t = std::make_unique<Thread>();
    Thread* raw = t.get();
    // The context is created on its own thread: rings are set up single-issuer, so only the
    // thread that made one may submit on it.
    std::promise<Status> made;
    auto made_future = made.get_future();
    t->thread = std::thread([raw, i, queue_depth, &made] {
      const std::string name = "graidd-io" + std::to_string(i);
      ::prctl(PR_SET_NAME, name.c_str(), 0, 0, 0);
      // 128-byte SQEs and 32-byte CQEs carry NVMe passthrough commands (a normal ring where the
      // kernel refuses them); COOP_TASKRUN rather than DEFER_TASKRUN because ublk queues share
      // the ring, and the driver's teardown (STOP_DEV, a killed daemon) completes their commands
      // through task work that must run whenever the thread enters the kernel (what ublk servers
      // use).
      IoContextOptions options = member_ring_options(queue_depth);
      options.defer_taskrun = false;
      auto ctx = IoContext::create(options);
      if (!ctx.is_ok()) {
        made.set_value(ctx.status());
        return;
      }
      raw->ctx = std::move(*ctx);
      made.set_value(Status{});
      while (!raw->stop.load(std::memory_order_acquire))
        raw->ctx->poll(/*wait=*/true);
      raw->ctx.reset();
    });
    Status st = made_future.get();
    if (!st) {
      t->thread.join();
      return st;
    }
    pool->threads_.push_back(std::move(t));
  }
  return pool;
}

IoThreads::~IoThreads() {
  for (auto& t : threads_) {
    call(static_cast<std::uint32_t>(&t - threads_.data()),
         [&t](IoContext&) { t->stop.store(true, std::memory_order_release); });
    t->thread.join();
  }
}

void IoThreads::call(std::uint32_t i, const std::function<void(IoContext&)>& fn) {
  Thread& t = *threads_.at(i);
  CallTask task(*t.ctx, fn);
  auto done = task.future();
  t.ctx->post(task);
  done.wait();
}

}  // namespace graid::daemon
