// Test harness for the NBD server: arrays with a VD on tmpfs files, the server on a thread of its
// own (as graidd will run it), a raw-socket NBD client, and running external tools.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "array_harness.h"
#include "nbd/nbd_protocol.h"
#include "nbd/nbd_server.h"

namespace graid::testing {

// An array of `members` files on tmpfs with one VD of `vd_bytes`.
struct TestArray {
  ArrayFiles files;
  std::unique_ptr<ParityBackend> parity = make_cpu_backend();
  std::unique_ptr<Array> array;
  VdInfo vd;

  TestArray(RaidLevel level, std::uint32_t members, std::uint64_t member_bytes,
            std::uint64_t vd_bytes, std::uint32_t strip = 64 * 1024) {
    auto devs = files.open(members, member_bytes, true);
    EXPECT_TRUE(devs.is_ok()) << devs.status().to_string();
    if (!devs) return;
    CreateOptions c;
    c.level = level;
    c.strip_bytes = strip;
    ArrayOptions o;
    o.parity = parity.get();
    auto a = Array::create(std::move(*devs), c, o);
    EXPECT_TRUE(a.is_ok()) << a.status().to_string();
    if (!a) return;
    array = std::move(*a);
    auto v = array->create_vd("vd0", vd_bytes);
    EXPECT_TRUE(v.is_ok()) << v.status().to_string();
    if (v) vd = *v;
  }

  // The VD's bytes [offset, +len), read through a queue of a context of this thread.
  std::vector<std::byte> read(std::uint64_t offset, std::uint32_t len) {
    auto ctx = IoContext::create(64);
    auto queue = array->attach(**ctx);
    auto buf = AlignedBuffer::allocate(len, 4096);
    TestIo io;
    io.kind = IoKind::kRead;
    io.offset = offset;
    io.len = len;
    io.buf = buf->data();
    TestIo* p = &io;
    (*queue)->submit(io, vd);
    while (!io.done)
      (*ctx)->poll(true);
    (void)p;
    EXPECT_TRUE(io.status.is_ok()) << io.status.to_string();
    return std::vector<std::byte>(buf->data(), buf->data() + len);
  }
};

// The server on a thread of its own; stop() (or the destructor) stops and joins it.
class ServerThread {
 public:
  ServerThread(std::vector<nbd::NbdExport> exports, nbd::NbdServerOptions options) {
    thread_ = std::thread([this, ex = std::move(exports), options]() mutable {
      auto ctx = IoContext::create(256);
      std::unique_ptr<nbd::NbdServer> server;
      Status status = ctx.status();
      if (ctx) {
        auto s = nbd::NbdServer::create(**ctx, std::move(ex), options);
        status = s.status();
        if (s) server = std::move(*s);
      }
      {
        std::lock_guard lock(mu_);
        status_ = status;
        server_ = server.get();
        if (server) {
          path_ = server->unix_path();
          port_ = server->tcp_port();
        }
        ready_ = true;
      }
      cv_.notify_all();
      if (!server) return;
      server->run();
      stats_ = server->stats();
      server.reset();
    });
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return ready_; });
  }
  ~ServerThread() { stop(); }

  const Status& status() const { return status_; }
  const std::string& path() const { return path_; }
  std::uint16_t port() const { return port_; }
  std::string uri() const { return "nbd+unix:///?socket=" + path_; }

  void stop() {
    if (!thread_.joinable()) return;
    if (server_ != nullptr) server_->stop();
    thread_.join();
  }
  // After stop().
  const nbd::NbdServerStats& stats() const { return stats_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  Status status_;
  nbd::NbdServer* server_ = nullptr;
  std::string path_;
  std::uint16_t port_ = 0;
  nbd::NbdServerStats stats_;
  std::thread thread_;
};

inline nbd::NbdExport export_of(TestArray& a, std::string name = "vd0", bool read_only = false) {
  nbd::NbdExport e;
  e.name = std::move(name);
  e.description = "test export";
  e.array = a.array.get();
  e.vd = a.vd;
  e.read_only = read_only;
  return e;
}

// A vector of exports (NbdExport is move-only: an initializer list would copy).
template <typename... E>
std::vector<nbd::NbdExport> exports_of(E&&... e) {
  std::vector<nbd::NbdExport> v;
  (v.push_back(std::forward<E>(e)), ...);
  return v;
}

// Runs a shell command with a time limit; returns its exit status and output.
struct ToolRun {
  int status = -1;
  std::string output;
};
inline ToolRun run_tool(const std::string& command, int timeout_s = 60) {
  ToolRun r;
  const std::string full = "timeout " + std::to_string(timeout_s) + " " + command + " 2>&1";
  FILE* p = ::popen(full.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0)
    r.output.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline bool have_tool(const std::string& name) {
  return run_tool("sh -c 'command -v " + name + "'").status == 0;
}

// fio with crc32c verification over the NBD export at `uri`: 24 MiB in 4 KiB blocks at depth 16,
// plus `extra` options (the workload: --rw=..., --verify_only=1).
inline ToolRun fio_over_nbd(const std::string& uri, int seed, const std::string& extra,
                            int timeout_s) {
  return run_tool("fio --name=graid --ioengine=nbd --uri='" + uri +
                      "' --bs=4k --size=24M --iodepth=16 --verify=crc32c --verify_fatal=1"
                      " --verify_state_save=0 --randseed=" +
                      std::to_string(seed) + " " + extra,
                  timeout_s);
}

}  // namespace graid::testing
