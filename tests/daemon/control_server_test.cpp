// The control socket's server loop (control/control_server.h): deferred replies (the long polls of
// `list event --wait`), watched descriptors and the periodic tick, with real unix sockets.
#include "control/control_server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "temp_dir.h"

namespace graid::testing {
namespace {

using namespace std::chrono_literals;
using control::ControlServer;
using control::Deferred;
using control::Reply;

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

int connect_to(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  EXPECT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0)
      << std::strerror(errno);
  return fd;
}

void send_text(int fd, const std::string& text) {
  ASSERT_EQ(::send(fd, text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
}

// One line (without its newline), or "" when none comes within `timeout`.
std::string read_line(int fd, std::chrono::milliseconds timeout, std::string& pending) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (const auto nl = pending.find('\n'); nl != std::string::npos) {
      std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return "";
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return "";
    pending.append(buf, static_cast<std::size_t>(n));
  }
}

// A server whose handler answers "now" at once and defers "wait" until `ready` is set (then
// "woken") or its deadline (then "timed out"); `trigger` is a watched eventfd that sets `ready`.
class ControlServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    control::ControlServerOptions o;
    o.path = dir_.file("ctl.sock");
    auto server = ControlServer::open(o);
    ASSERT_TRUE(server.is_ok()) << server.status().to_string();
    server_ = std::move(*server);
  }

  void start(std::chrono::milliseconds wait, std::chrono::milliseconds tick = 0ms) {
    control::ServeOptions o;
    o.stop_fd = stop_.get();
    o.watches.push_back({trigger_.get(), [this] {
                           std::uint64_t n = 0;
                           (void)!::read(trigger_.get(), &n, sizeof n);
                           ready_ = true;
                         }});
    if (tick.count() > 0) o.ticks.push_back({tick, [this] { ++ticks_; }});
    thread_ = std::thread([this, o, wait] {
      server_->serve(
          [this, wait](std::string_view line, const control::PeerCred&) -> Reply {
            if (line.starts_with("now")) return std::string("now\n");
            Deferred d;
            d.deadline = std::chrono::steady_clock::now() + wait;
            d.retry = [this](bool last) -> std::optional<std::string> {
              ++retries_;
              if (ready_) return std::string("woken\n");
              if (last) return std::string("timed out\n");
              return std::nullopt;
            };
            return d;
          },
          o);
    });
  }

  void TearDown() override {
    const std::uint64_t one = 1;
    (void)!::write(stop_.get(), &one, sizeof one);
    if (thread_.joinable()) thread_.join();
  }

  void fire() {
    const std::uint64_t one = 1;
    ASSERT_EQ(::write(trigger_.get(), &one, sizeof one), 8);
  }

  TempDir dir_;
  std::unique_ptr<ControlServer> server_;
  Fd stop_{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  Fd trigger_{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  std::atomic<bool> ready_{false};
  std::atomic<int> retries_{0};
  std::atomic<int> ticks_{0};
  std::thread thread_;
};

TEST_F(ControlServerTest, AWaitingRequestIsAnsweredWhenAWatchFiresAndBlocksNoOne) {
  start(30s);
  Fd a(connect_to(dir_.file("ctl.sock")));
  Fd b(connect_to(dir_.file("ctl.sock")));
  std::string pa, pb;
  send_text(a.get(), "wait\n");
  EXPECT_EQ(read_line(a.get(), 300ms, pa), "");  // nothing yet
  // Another client is served meanwhile.
  send_text(b.get(), "now\n");
  EXPECT_EQ(read_line(b.get(), 5s, pb), "now");
  fire();
  EXPECT_EQ(read_line(a.get(), 5s, pa), "woken");
}

TEST_F(ControlServerTest, AWaitingRequestIsAnsweredAtItsDeadline) {
  start(400ms);
  Fd a(connect_to(dir_.file("ctl.sock")));
  std::string pa;
  const auto t0 = std::chrono::steady_clock::now();
  send_text(a.get(), "wait\n");
  EXPECT_EQ(read_line(a.get(), 10s, pa), "timed out");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 400ms);
}

TEST_F(ControlServerTest, AClientsLaterLinesWaitForItsWaitingRequestInOrder) {
  start(30s);
  Fd a(connect_to(dir_.file("ctl.sock")));
  std::string pa;
  send_text(a.get(), "wait\nnow\n");
  EXPECT_EQ(read_line(a.get(), 300ms, pa), "");  // "now" waits behind "wait"
  fire();
  EXPECT_EQ(read_line(a.get(), 5s, pa), "woken");
  EXPECT_EQ(read_line(a.get(), 5s, pa), "now");
}

TEST_F(ControlServerTest, AClientThatHangsUpWhileWaitingIsDropped) {
  start(30s);
  {
    Fd a(connect_to(dir_.file("ctl.sock")));
    send_text(a.get(), "wait\n");
    std::string pa;
    EXPECT_EQ(read_line(a.get(), 200ms, pa), "");
  }
  // The server notices the hang-up: no retry after it, and others are served.
  Fd b(connect_to(dir_.file("ctl.sock")));
  std::string pb;
  send_text(b.get(), "now\n");
  EXPECT_EQ(read_line(b.get(), 5s, pb), "now");
  const int retries = retries_;
  fire();
  send_text(b.get(), "now\n");
  EXPECT_EQ(read_line(b.get(), 5s, pb), "now");
  EXPECT_EQ(retries_, retries);
}

TEST_F(ControlServerTest, TheTickRunsBetweenRequests) {
  start(30s, 50ms);
  std::this_thread::sleep_for(600ms);
  EXPECT_GE(ticks_, 3);
  Fd b(connect_to(dir_.file("ctl.sock")));
  std::string pb;
  send_text(b.get(), "now\n");
  EXPECT_EQ(read_line(b.get(), 5s, pb), "now");
}

}  // namespace
}  // namespace graid::testing
