#include "graidd/event_hooks.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "graidd/event_log.h"

extern char** environ;

namespace graid::daemon {

namespace {

constexpr std::size_t kOutputKept = 4096;

int open_pidfd(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

std::string id_text(const std::optional<std::uint32_t>& id) {
  return id ? std::to_string(*id) : std::string("-");
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  return fmt::format("ended with status {:#x}", status);
}

}  // namespace

EventHooks::EventHooks(Key, EventHookOptions options, EventLog& log)
    : options_(std::move(options)), log_(log) {}

Result<std::unique_ptr<EventHooks>> EventHooks::start(EventHookOptions options, EventLog& log) {
  const std::string& p = options.program;
  if (p.empty() || p.front() != '/')
    return make_error(Errc::kInvalidArgument,
                      "--event-program \"{}\": give the program's absolute path", p);
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0)
    return make_error(Errc::kInvalidArgument, "--event-program {}: {}", p, std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return make_error(Errc::kInvalidArgument, "--event-program {}: not a regular file", p);
  if (::access(p.c_str(), X_OK) != 0)
    return make_error(Errc::kInvalidArgument, "--event-program {}: not executable ({})", p,
                      std::strerror(errno));
  if (options.max_queued == 0) options.max_queued = 1;
  auto hooks = std::make_unique<EventHooks>(Key{}, std::move(options), log);
  EventHooks* h = hooks.get();
  h->thread_ = std::thread([h] { h->loop(); });
  log.set_listener([h](const Event& e) { h->enqueue(e); });
  spdlog::info("alert hooks: {} runs for warning and critical events", h->options_.program);
  return hooks;
}

EventHooks::~EventHooks() {
  log_.set_listener({});
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

EventHookStats EventHooks::stats() const {
  MutexLock lock(mutex_);
  return stats_;
}

void EventHooks::enqueue(const Event& e) {
  if (e.severity == Severity::kInfo) return;
  {
    MutexLock lock(mutex_);
    if (stopping_) return;
    if (queue_.size() >= options_.max_queued) {
      ++stats_.lost;
      if (lost_unreported_++ == 0)
        spdlog::error("alert hooks: the queue of {} events is full: event {} ({}) gets no hook",
                      options_.max_queued, e.seq, e.kind);
      return;
    }
    queue_.push_back(e);
  }
  wake_.notify_one();
}

void EventHooks::loop() {
  UniqueLock lock(mutex_);
  for (;;) {
    while (!stopping_ && queue_.empty())
      lock.wait(wake_);
    if (stopping_) {
      if (!queue_.empty())
        spdlog::warn("alert hooks: stopping: {} event(s) left without their hook", queue_.size());
      return;
    }
    const Event e = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    run_one(e);
    lock.lock();
    if (lost_unreported_ > 0 && queue_.size() < options_.max_queued) {
      // Said as an event of its own (which gets its hook in turn) once there is room again.
      const std::uint64_t lost = lost_unreported_;
      lost_unreported_ = 0;
      lock.unlock();
      log_.add("events_lost", std::nullopt, std::nullopt, std::nullopt,
               fmt::format("{} event(s) got no alert hook: the queue of {} was full", lost,
                           options_.max_queued));
      lock.lock();
    }
  }
}

void EventHooks::run_one(const Event& e) {
  // Everything the child needs is built here: after fork() it only makes system calls.
  std::vector<std::string> args = {options_.program, e.kind, id_text(e.dg_id)};
  if (e.pd_id) args.push_back(std::to_string(*e.pd_id));
  std::vector<std::string> env;
  for (char** v = environ; v != nullptr && *v != nullptr; ++v) {
    const std::string_view entry(*v);
    if (entry.starts_with("GRAID_EVENT_") || entry.starts_with("GRAID_SOCKET=")) continue;
    env.emplace_back(entry);
  }
  auto set = [&env](const char* name, const std::string& value) {
    env.push_back(fmt::format("{}={}", name, value));
  };
  auto set_id = [&set](const char* name, const std::optional<std::uint32_t>& id) {
    if (id) set(name, std::to_string(*id));
  };
  set("GRAID_EVENT_SEQ", std::to_string(e.seq));
  set("GRAID_EVENT_TIME", rfc3339(e.time));
  set("GRAID_EVENT_SEVERITY", std::string(severity_name(e.severity)));
  set("GRAID_EVENT_KIND", e.kind);
  set_id("GRAID_EVENT_DG", e.dg_id);
  set_id("GRAID_EVENT_PD", e.pd_id);
  set_id("GRAID_EVENT_VD", e.vd_id);
  set_id("GRAID_EVENT_SLOT", e.slot);
  set("GRAID_EVENT_MESSAGE", e.message);
  if (!options_.socket.empty()) set("GRAID_SOCKET", options_.socket);
  std::vector<char*> argv, envp;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& v : env)
    envp.push_back(v.data());
  envp.push_back(nullptr);
  static constexpr char kZero[] = "0\n";

  auto fail = [&](std::string why) {
    spdlog::warn("alert hook {} for event {} ({}): {}", options_.program, e.seq, e.kind, why);
    MutexLock lock(mutex_);
    ++stats_.failed;
  };
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return fail(fmt::format("pipe: {}", std::strerror(errno)));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The child: a process group of its own (killed whole at the timeout), default signals,
    // an ordinary OOM score, stdin /dev/null, stdout and stderr to graidd, nothing else.
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (const int oom = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); oom >= 0) {
      (void)!::write(oom, kZero, sizeof kZero - 1);
      ::close(oom);
    }
    ::dup2(null_fd, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::close_range(3, ~0U, 0);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(out[1]);
  if (null_fd >= 0) ::close(null_fd);
  if (pid < 0) {
    ::close(out[0]);
    return fail(fmt::format("fork: {}", std::strerror(fork_errno)));
  }
  ::setpgid(pid, pid);  // also here, so the group exists before any kill below
  const int pidfd = open_pidfd(pid);
  std::string output;
  bool exited = false;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  int read_fd = out[0];
  while (!exited) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{pidfd, POLLIN, 0}, {read_fd, POLLIN, 0}};
    // Without a pidfd (an old kernel), poll the output and look at the child every 100 ms.
    const int wait_ms =
        static_cast<int>(std::min<std::int64_t>(left.count(), pidfd < 0 ? 100 : left.count()));
    const int rc = ::poll(fds, 2, wait_ms);
    if (rc < 0 && errno != EINTR) break;
    if (fds[1].revents != 0) {
      char buf[4096];
      const ssize_t n = ::read(read_fd, buf, sizeof buf);
      if (n > 0) {
        output.append(buf, std::min(static_cast<std::size_t>(n),
                                    kOutputKept - std::min(kOutputKept, output.size())));
      } else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        ::close(read_fd);
        read_fd = -1;  // poll() ignores it from now on
      }
    }
    if (pidfd < 0 || fds[0].revents != 0) {
      int st = 0;
      if (::waitpid(pid, &st, WNOHANG) == pid) {
        exited = true;
        if (read_fd >= 0) ::close(read_fd);
        read_fd = -1;
        if (pidfd >= 0) ::close(pidfd);
        const bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (ok) {
          spdlog::debug("alert hook {} for event {} ({}): exited 0", options_.program, e.seq,
                        e.kind);
          MutexLock lock(mutex_);
          ++stats_.ran;
        } else {
          const std::string why = WIFEXITED(st) && WEXITSTATUS(st) == 127
                                      ? "exited 127 (could it run? execve failed or the shell "
                                        "found no command)"
                                      : describe_status(st);
          fail(output.empty() ? why : fmt::format("{}; it said: {}", why, output));
        }
        return;
      }
    }
  }
  // Timed out (or poll failed): the whole process group goes.
  ::kill(-pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (read_fd >= 0) ::close(read_fd);
  if (pidfd >= 0) ::close(pidfd);
  fail(timed_out ? fmt::format("still running after {} ms: killed with its process group",
                               options_.timeout.count())
                 : fmt::format("waiting for it failed ({}): killed", std::strerror(errno)));
  if (timed_out) {
    MutexLock lock(mutex_);
    ++stats_.timed_out;
  }
}

}  // namespace graid::daemon
