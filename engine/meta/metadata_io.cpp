// Metadata I/O on every member at once. See metadata_io.h for the design and the lifetime rule.
#include "meta/metadata_io.h"

#include <spdlog/spdlog.h>
#include <sys/prctl.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <system_error>
#include <thread>

#include "graid/array.h"
#include "graid/thread_annotations.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

namespace graid::meta {
namespace {

std::atomic<bool> g_io_flusher{false};   // set_workers_io_flusher() was called
thread_local bool t_io_flusher = false;  // this worker has marked itself

// Before each operation: a worker of a process that serves a block device the kernel may write
// back through (ublk) must not wait on memory reclaim that needs that very device.
void become_io_flusher_if_asked() {
  if (t_io_flusher || !g_io_flusher.load(std::memory_order_acquire)) return;
  t_io_flusher = true;
  if (::prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) != 0)
    spdlog::warn("graid: metadata worker: PR_SET_IO_FLUSHER: {}", std::strerror(errno));
}

// What one call waits for: a status per slot and how many are still running. Shared by the
// caller and the workers, so a worker that finishes after the caller gave up writes into memory
// that is still alive.
struct Batch {
  // Slots with finished[m] false get a job; the others are finished (nothing to do) already.
  Batch(std::vector<bool> finished_slots, std::size_t jobs)
      : results(finished_slots.size()), finished(std::move(finished_slots)), running(jobs) {}

  Mutex mutex;
  std::condition_variable done_cv;
  std::vector<Status> results GUARDED_BY(mutex);
  std::vector<bool> finished GUARDED_BY(mutex);
  std::size_t running GUARDED_BY(mutex) = 0;
};

struct Job {
  std::shared_ptr<MemberDevice> member;
  std::uint32_t index = 0;
  std::shared_ptr<const MemberMetadataOp> op;
  std::shared_ptr<Batch> batch;
};

// The process-wide pool. Workers hold a shared_ptr to it, so it outlives static destruction for
// as long as any worker (say, one stuck in a hung member) still runs.
class Pool : public std::enable_shared_from_this<Pool> {
 public:
  static Pool& instance() {
    // Like any library with threads of its own, graid does not survive a bare fork(): a child
    // has none of these workers and may inherit locks they held. Fork, then exec.
    static const std::shared_ptr<Pool> pool = std::make_shared<Pool>();
    return *pool;
  }

  // Queues `jobs`; makes sure an idle worker is there for each (starting workers as needed).
  void submit(std::vector<Job> jobs) EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    for (Job& job : jobs)
      queue_.push_back(std::move(job));
    // Idle workers = threads - busy; each queued job needs one of its own.
    while (threads_ - busy_ < queue_.size()) {
      try {
        std::thread([self = shared_from_this()] { self->work(); }).detach();
      } catch (const std::system_error&) {
        break;  // out of threads: the jobs wait for a busy worker (and may time out)
      }
      ++threads_;
    }
    work_seq_.fetch_add(1);
    work_seq_.notify_all();
  }

  std::size_t threads() EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    return threads_;
  }

 private:
  void work() EXCLUDES(mutex_) {
    UniqueLock lock(mutex_);
    for (;;) {
      while (queue_.empty()) {
        const std::uint32_t seen = work_seq_.load();
        lock.unlock();
        work_seq_.wait(seen);  // returns at once if submit() bumped it since
        lock.lock();
      }
      Job job = std::move(queue_.front());
      queue_.pop_front();
      ++busy_;
      lock.unlock();
      become_io_flusher_if_asked();
      Status st = (*job.op)(*job.member, job.index);
      // Idle again before the caller can see the result: a caller that starts its next update at
      // once then finds this worker free and starts no thread.
      lock.lock();
      --busy_;
      lock.unlock();
      {
        MutexLock batch_lock(job.batch->mutex);
        job.batch->results[job.index] = std::move(st);
        job.batch->finished[job.index] = true;
        --job.batch->running;
        job.batch->done_cv.notify_all();  // under the lock: the caller may free nothing we use
      }
      job = {};  // drop the member, buffers and batch before idling
      lock.lock();
    }
  }

  Mutex mutex_;
  std::atomic<std::uint32_t> work_seq_{0};  // bumped by every submit()
  std::deque<Job> queue_ GUARDED_BY(mutex_);
  std::size_t threads_ GUARDED_BY(mutex_) = 0;
  std::size_t busy_ GUARDED_BY(mutex_) = 0;
};

}  // namespace

std::vector<Status> run_on_members(std::span<const std::shared_ptr<MemberDevice>> members,
                                   std::chrono::milliseconds timeout, MemberMetadataOp op) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<bool> finished(members.size(), true);
  std::size_t running = 0;
  for (std::uint32_t m = 0; m < members.size(); ++m) {
    if (members[m] == nullptr) continue;
    finished[m] = false;
    ++running;
  }
  if (running == 0) return std::vector<Status>(members.size());
  // Set up by its constructor: not yet shared, nothing to lock.
  auto batch = std::make_shared<Batch>(std::move(finished), running);
  auto shared_op = std::make_shared<const MemberMetadataOp>(std::move(op));
  std::vector<Job> jobs;
  for (std::uint32_t m = 0; m < members.size(); ++m)
    if (members[m] != nullptr) jobs.push_back(Job{members[m], m, shared_op, batch});
  Pool::instance().submit(std::move(jobs));

  UniqueLock lock(batch->mutex);
  while (batch->running != 0) {
    if (lock.wait_until(batch->done_cv, deadline) == std::cv_status::timeout) break;
  }
  std::vector<Status> out = batch->results;
  for (std::uint32_t m = 0; m < members.size(); ++m) {
    if (batch->finished[m]) continue;
    out[m] = make_error(Errc::kIoError,
                        "member {} ({}): metadata I/O did not finish within {} ms (hung device?)",
                        m, members[m]->path(), timeout.count());
  }
  return out;
}

std::size_t metadata_worker_threads() {
  return Pool::instance().threads();
}

void set_workers_io_flusher() {
  g_io_flusher.store(true, std::memory_order_release);
}

}  // namespace graid::meta

namespace graid {

void set_metadata_workers_io_flusher() {
  meta::set_workers_io_flusher();
}

}  // namespace graid
