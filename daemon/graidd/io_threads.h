// graidd's I/O threads: each owns one IoContext (one io_uring) and sleeps in its poll(). Frontends
// (NBD servers now, ublk queues later) live on them; the control thread never does data I/O and
// reaches them only through call(), which runs a function on a thread and waits for it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "graid/member.h"
#include "graid/status.h"

namespace graid::daemon {

class IoThreads {
 public:
  // Starts `count` threads, each with an IoContext of `queue_depth` entries.
  static Result<std::unique_ptr<IoThreads>> start(std::uint32_t count, unsigned queue_depth = 512);
  // Stops and joins the threads: everything living on them must have been destroyed first.
  ~IoThreads();
  IoThreads(const IoThreads&) = delete;
  IoThreads& operator=(const IoThreads&) = delete;

  std::uint32_t count() const noexcept { return static_cast<std::uint32_t>(threads_.size()); }
  // Runs fn(thread i's context) on thread i and waits until it returned. Not from an I/O thread.
  void call(std::uint32_t i, const std::function<void(IoContext&)>& fn);

  struct Thread;
  IoThreads();

 private:
  std::vector<std::unique_ptr<Thread>> threads_;
};

}  // namespace graid::daemon
