#include "timed_run.h"

#include <sys/resource.h>

#include <atomic>
#include <exception>
#include <latch>
#include <mutex>
#include <thread>

#include "interrupt.h"

namespace graid::bench {

namespace {

// Time the coordinator leaves between everybody reaching the start line and the start itself,
// so no thread starts late because it was still being woken.
constexpr auto kStartSlack = std::chrono::milliseconds(20);

// How often the coordinator looks up from its sleep to see whether the run was abandoned.
constexpr auto kAbortCheck = std::chrono::milliseconds(50);

double to_seconds(const timeval& tv) noexcept {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

// What the threads of one run share. Written before `go` is counted down, read after waiting on
// it, so the latch orders every access.
struct Shared {
  explicit Shared(std::uint32_t threads) : ready(threads) {}
  std::latch ready;
  std::latch go{1};
  Window window;
  std::atomic<bool> abort{false};
  std::mutex error_mutex;
  Status first_error;

  void fail(Status status) {
    std::lock_guard lock(error_mutex);
    if (first_error.is_ok()) first_error = std::move(status);
    abort.store(true);
  }
};

void worker_thread(Shared& shared, const WorkerFactory& factory, std::uint32_t index,
                   ThreadTally& tally) noexcept {
  bool arrived = false;
  try {
    auto worker = factory(index);
    if (!worker.is_ok()) shared.fail(worker.status());
    shared.ready.count_down();
    arrived = true;
    shared.go.wait();
    if (!worker.is_ok() || shared.abort.load()) return;
    Status status = (*worker)->run(shared.window, tally);
    if (!status.is_ok()) shared.fail(std::move(status));
  } catch (const std::exception& e) {
    shared.fail(make_error(Errc::kInternal, "benchmark thread {}: {}", index, e.what()));
  } catch (...) {
    shared.fail(make_error(Errc::kInternal, "benchmark thread {}: unknown exception", index));
  }
  if (!arrived) shared.ready.count_down();
}

// Sleeps until `deadline`; false, early, when a worker failed or the user interrupted the run.
bool sleep_until_or_abort(Clock::time_point deadline, const Shared& shared) {
  while (true) {
    if (shared.abort.load() || interrupted()) return false;
    const auto now = Clock::now();
    if (now >= deadline) return true;
    std::this_thread::sleep_until(std::min(deadline, now + kAbortCheck));
  }
}

}  // namespace

bool Window::open_at(Clock::time_point now) const noexcept {
  return now < end && !interrupted();
}

double process_cpu_seconds() noexcept {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0.0;
  return to_seconds(usage.ru_utime) + to_seconds(usage.ru_stime);
}

Result<RunFigures> run_timed(const TimedRunConfig& config, const WorkerFactory& factory) {
  Shared shared(config.threads);
  std::vector<ThreadTally> tallies(config.threads);
  std::vector<std::thread> threads;
  threads.reserve(config.threads);
  for (std::uint32_t i = 0; i < config.threads; ++i) {
    try {
      threads.emplace_back(worker_thread, std::ref(shared), std::cref(factory), i,
                           std::ref(tallies[i]));
    } catch (const std::exception& e) {
      shared.fail(make_error(Errc::kInternal, "cannot start benchmark thread {}: {}", i, e.what()));
      // Stand in for the threads that will never arrive, so the others are not left waiting.
      for (std::uint32_t j = i; j < config.threads; ++j)
        shared.ready.count_down();
      break;
    }
  }

  shared.ready.wait();
  const auto start = Clock::now() + kStartSlack;
  const auto measure_from = start + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(config.warmup_seconds));
  const auto end = measure_from + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(config.seconds));
  shared.window = Window{start, measure_from, end};
  shared.go.count_down();

  double cpu_begin = 0;
  double cpu_end = 0;
  if (sleep_until_or_abort(measure_from, shared)) {
    cpu_begin = process_cpu_seconds();
    if (sleep_until_or_abort(end, shared)) cpu_end = process_cpu_seconds();
  }
  for (std::thread& t : threads)
    t.join();

  if (!shared.first_error.is_ok()) return shared.first_error;
  if (interrupted()) return make_error(Errc::kBusy, "interrupted");
  const double window_seconds = std::chrono::duration<double>(end - measure_from).count();
  return summarize(tallies, window_seconds, cpu_end - cpu_begin);
}

}  // namespace graid::bench
