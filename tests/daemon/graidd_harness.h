// A real graidd for tests: started as its own process on a temporary socket and state dir, with
// file-backed PDs, and driven through the real graidctl binary (--format json). Paths of both
// binaries come from the build (GRAIDD_PATH, GRAIDCTL_PATH).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "temp_dir.h"

extern char** environ;

namespace graid::testing {

struct CtlRun {
  int exit = -1;
  std::string out, err;
  nlohmann::json json;  // stdout parsed (null if it was not JSON)
};

// Runs argv with stdout and stderr captured; returns the exit code (-1 if killed).
inline int run_capture(const std::vector<std::string>& argv, std::string* out, std::string* err) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return -1;
  }
  // Read both pipes to the end (stderr is small; read stdout first in a thread to avoid a stall).
  std::thread t([&] {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(err_pipe[0], buf, sizeof buf)) > 0)
      err->append(buf, static_cast<std::size_t>(n));
  });
  char buf[4096];
  ssize_t n;
  while ((n = ::read(out_pipe[0], buf, sizeof buf)) > 0)
    out->append(buf, static_cast<std::size_t>(n));
  t.join();
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

class Graidd {
 public:
  explicit Graidd(const TempDir& dir, std::string parity = "cpu")
      : socket_(dir.file("graidd.sock")),
        state_(dir.file("state")),
        log_(dir.file("graidd.log")),
        parity_(std::move(parity)) {}
  ~Graidd() {
    if (pid_ > 0) stop(SIGKILL);
  }

  const std::string& socket() const { return socket_; }
  const std::string& state_dir() const { return state_; }
  pid_t pid() const { return pid_; }

  // Starts graidd and waits until it answers `graidctl version` (false after 20 s or if it
  // exited: log() says why).
  bool start(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {GRAIDD_PATH, "--socket",    socket_, "--state-dir",
                                     state_,      "--parity",    parity_, "--io-threads",
                                     "2",         "--log-level", "debug"};
    for (auto& e : extra)
      argv.push_back(std::move(e));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    std::vector<char*> args;
    for (const auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        exit_status_ = st;
        return false;
      }
      if (ctl({"version"}).exit == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    stop(SIGKILL);  // never leave a daemon behind
    return false;
  }

  // Sends `sig` and waits for the process; returns its wait status. A daemon that has not exited
  // 60 s after the signal is killed (and the status says so: not a clean exit).
  int stop(int sig = SIGTERM) {
    if (pid_ <= 0) return exit_status_;
    ::kill(pid_, sig);
    int st = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (::waitpid(pid_, &st, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "graidd did not exit after signal " << sig << "; killing it";
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &st, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
    exit_status_ = st;
    return st;
  }

  // graidctl --socket S --format json ARGS...
  CtlRun ctl(const std::vector<std::string>& args, bool json = true) const {
    std::vector<std::string> argv = {GRAIDCTL_PATH, "--socket", socket_};
    if (json) {
      argv.push_back("--format");
      argv.push_back("json");
    }
    argv.insert(argv.end(), args.begin(), args.end());
    CtlRun r;
    r.exit = run_capture(argv, &r.out, &r.err);
    if (json) r.json = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    return r;
  }

  std::string log() const {
    std::ifstream in(log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  std::string socket_, state_, log_, parity_;
  pid_t pid_ = -1;
  int exit_status_ = 0;
};

// A sparse file of `bytes` (reads zeroes: a fresh member needs no initialisation).
inline std::string make_pd_file(const TempDir& dir, const std::string& name, std::uint64_t bytes) {
  const std::string path = dir.file(name);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0) << path;
  EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(bytes)), 0);
  ::close(fd);
  return path;
}

// Formats a CtlRun for failure messages.
inline std::string describe(const CtlRun& r) {
  return "exit " + std::to_string(r.exit) + "\nstdout: " + r.out + "\nstderr: " + r.err;
}

// A graidd on a temp state dir for each test, driven through graidctl.
inline constexpr std::uint64_t kPdBytes = 64u << 20;

class GraiddTest : public ::testing::Test {
 protected:
  using json = nlohmann::json;

  void SetUp() override {
    d_ = std::make_unique<Graidd>(dir_);
    ASSERT_TRUE(d_->start()) << d_->log();
  }
  void TearDown() override {
    if (HasFailure()) std::fprintf(stderr, "--- graidd log ---\n%s\n", d_->log().c_str());
  }

  // graidctl that must succeed; returns its JSON.
  json ok(const std::vector<std::string>& args) {
    const CtlRun r = d_->ctl(args);
    EXPECT_EQ(r.exit, 0) << "graidctl " << ::testing::PrintToString(args) << "\n" << describe(r);
    return r.json;
  }
  // describe of `object` `id` (dg, pd) every 50 ms until `done` says so or `tries` run out;
  // the last answer.
  json wait_for(const std::string& object, const std::string& id,
                const std::function<bool(const json&)>& done, int tries = 600) {
    json j;
    for (int i = 0; i < tries; ++i) {
      j = ok({"describe", object, id});
      if (done(j)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return j;
  }
  // Registers `n` file PDs; returns their paths.
  std::vector<std::string> make_pds(int n, std::uint64_t bytes = kPdBytes) {
    std::vector<std::string> args = {"create", "pd"};
    std::vector<std::string> paths;
    for (int i = 0; i < n; ++i) {
      paths.push_back(make_pd_file(dir_, "pd" + std::to_string(pd_files_++), bytes));
      args.push_back(paths.back());
    }
    ok(args);
    return paths;
  }
  std::string nbd_uri(const std::string& socket) const { return "nbd+unix:///?socket=" + socket; }
  // Everything graidctl can list: what a refused command must leave as it was.
  json snapshot() {
    json s;
    s["pd"] = ok({"list", "pd"});
    s["dg"] = ok({"list", "dg"});
    s["vd"] = ok({"list", "vd"});
    return s;
  }

  TempDir dir_;
  std::unique_ptr<Graidd> d_;
  int pd_files_ = 0;
};

}  // namespace graid::testing
