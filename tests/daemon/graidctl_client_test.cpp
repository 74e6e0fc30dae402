// The real graidctl binary against a fake graidd: a unix socket in a temp dir whose server
// checks each request line graidctl sends and answers with canned lines. Covers success (exit 0,
// the result printed), every error code (its exit code, {"error":...} with --format json, one
// stderr line otherwise), no daemon (exit 4, "not running"), a daemon that hangs up (4), a reply
// with the wrong id (5), and stats sampling twice, once and with --watch until SIGINT.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "control/control_protocol.h"
#include "temp_dir.h"

#ifndef GRAIDCTL_PATH
#error "GRAIDCTL_PATH must name the graidctl binary"
#endif

namespace graid::cli {
namespace {

using nlohmann::json;

// A fake graidd: accepts connections on `path`, reads one line from each and answers with
// reply(request line, connection index); an empty answer closes the connection unanswered.
class FakeDaemon {
 public:
  using Reply = std::function<std::string(const std::string& line, int index)>;

  FakeDaemon(const std::string& path, Reply reply) : reply_(std::move(reply)) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd_, 0) << std::strerror(errno);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
        << std::strerror(errno);
    EXPECT_EQ(::listen(fd_, 8), 0) << std::strerror(errno);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeDaemon() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  FakeDaemon(const FakeDaemon&) = delete;
  FakeDaemon& operator=(const FakeDaemon&) = delete;

  // The request lines received so far, without newlines.
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 private:
  void serve() {
    for (int index = 0; !stop_; ++index) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) {
        --index;
        continue;
      }
      int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;
      std::string line;
      char c;
      while (::read(conn, &c, 1) == 1 && c != '\n')
        line.push_back(c);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        lines_.push_back(line);
      }
      std::string answer = reply_(line, index);
      if (!answer.empty()) {
        EXPECT_EQ(::send(conn, answer.data(), answer.size(), MSG_NOSIGNAL),
                  static_cast<ssize_t>(answer.size()));
      }
      ::close(conn);
    }
  }

  int fd_ = -1;
  Reply reply_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

struct Outcome {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts graidctl with `args` and GRAID_SOCKET=socket, output to files in `dir`; returns its pid.
pid_t start(const testing::TempDir& dir, const std::string& socket,
            const std::vector<std::string>& args) {
  const std::string out = dir.file("out"), err = dir.file("err");
  pid_t pid = ::fork();
  if (pid == 0) {
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::setenv("GRAID_SOCKET", socket.c_str(), 1);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(GRAIDCTL_PATH));
    for (const std::string& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(GRAIDCTL_PATH, argv.data());
    ::_exit(127);
  }
  return pid;
}

Outcome finish(const testing::TempDir& dir, pid_t pid) {
  Outcome run;
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << "status " << status;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = slurp(dir.file("out"));
  run.err = slurp(dir.file("err"));
  return run;
}

Outcome graidctl(const testing::TempDir& dir, const std::string& socket,
                 const std::vector<std::string>& args) {
  return finish(dir, start(dir, socket, args));
}

// The request's id, echoed into a canned reply.
json id_of(const std::string& line) {
  json request = json::parse(line, nullptr, false);
  return request.is_object() && request.contains("id") ? request["id"] : json(nullptr);
}

std::string ok_line(const std::string& request, const json& result) {
  return json{{"id", id_of(request)}, {"result", result}}.dump() + "\n";
}

std::string error_line(const std::string& request, const std::string& code,
                       const std::string& message) {
  return json{{"id", id_of(request)}, {"error", {{"code", code}, {"message", message}}}}.dump() +
         "\n";
}

class GraidctlClientTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
  std::string socket_ = dir_.file("graidd.sock");
};

TEST_F(GraidctlClientTest, SuccessPrintsTheResult) {
  const json dg = {{"dg_id", 1},
                   {"name", "fast"},
                   {"level", "raid5"},
                   {"strip", 65536},
                   {"state", "optimal"},
                   {"capacity", 3 * (1ull << 30)},
                   {"members", json::array()},
                   {"vds", json::array()}};
  FakeDaemon daemon(socket_, [&](const std::string& line, int) { return ok_line(line, dg); });

  Outcome run = graidctl(dir_, socket_, {"--format", "json", "describe", "dg", "1"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(json::parse(run.out), dg);

  // The request line as docs/daemon.md frames it, parsed by the daemon's own parser.
  ASSERT_EQ(daemon.lines().size(), 1u);
  auto request = control::parse_request(daemon.lines()[0]);
  ASSERT_TRUE(request.is_ok()) << request.status().to_string();
  EXPECT_EQ(request->id, control::RequestId(std::uint64_t{1}));
  EXPECT_EQ(request->verb, "describe");
  EXPECT_EQ(request->object, "dg");
  EXPECT_EQ(request->args, json({{"dg_id", 1}}));

  // Table format: a key: value block with the size formatted.
  run = graidctl(dir_, socket_, {"desc", "drive_group", "1"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("3 GiB"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("raid5"), std::string::npos) << run.out;
}

TEST_F(GraidctlClientTest, RequestsWithoutObjectLeaveItOut) {
  FakeDaemon daemon(socket_, [&](const std::string& line, int) {
    return ok_line(line, {{"version", "0.1.0"}, {"api", 1}});
  });
  Outcome run = graidctl(dir_, socket_, {"version"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "graidd 0.1.0 (control api 1)\n");
  ASSERT_EQ(daemon.lines().size(), 1u);
  EXPECT_EQ(json::parse(daemon.lines()[0]), json::parse(R"({"id":1,"verb":"version","args":{}})"));
}

TEST_F(GraidctlClientTest, EveryErrorCodeHasItsExitCode) {
  const std::pair<const char*, int> kCodes[] = {
      {"bad_request", 2},  {"not_found", 3}, {"refused", 1},      {"busy", 1},
      {"unauthorised", 1}, {"internal", 5},  {"no_such_code", 5},
  };
  for (const auto& [code, exit_code] : kCodes) {
    SCOPED_TRACE(code);
    const std::string message = std::string("canned ") + code;
    FakeDaemon daemon(socket_, [&, c = std::string(code)](const std::string& line, int) {
      return error_line(line, c, message);
    });
    Outcome run = graidctl(dir_, socket_, {"--format", "json", "describe", "pd", "3"});
    EXPECT_EQ(run.exit_code, exit_code);
    EXPECT_EQ(run.err, "");
    json doc = json::parse(run.out, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << run.out;
    EXPECT_EQ(doc["error"]["code"], code);
    EXPECT_NE(doc["error"]["message"].get<std::string>().find(message), std::string::npos);

    run = graidctl(dir_, socket_, {"describe", "pd", "3"});
    EXPECT_EQ(run.exit_code, exit_code);
    EXPECT_EQ(run.out, "");
    EXPECT_EQ(run.err.rfind("graidctl: ", 0), 0u) << run.err;
    EXPECT_NE(run.err.find(message), std::string::npos) << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    ::unlink(socket_.c_str());
  }
}

TEST_F(GraidctlClientTest, NoDaemonIsUnreachable) {
  Outcome run = graidctl(dir_, socket_, {"list", "pd"});
  EXPECT_EQ(run.exit_code, 4);
  EXPECT_EQ(run.out, "");
  EXPECT_NE(run.err.find("graidd is not running on " + socket_), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("start it with `graidd` or pass --socket"), std::string::npos);

  run = graidctl(dir_, socket_, {"list", "pd", "--format", "json"});
  EXPECT_EQ(run.exit_code, 4);
  json doc = json::parse(run.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << run.out;
  EXPECT_EQ(doc["error"]["code"], "unreachable");

  // --socket wins over $GRAID_SOCKET.
  run = graidctl(dir_, socket_, {"--socket", dir_.file("other.sock"), "list", "pd"});
  EXPECT_EQ(run.exit_code, 4);
  EXPECT_NE(run.err.find(dir_.file("other.sock")), std::string::npos) << run.err;
}

TEST_F(GraidctlClientTest, HangUpWithoutReplyIsUnreachable) {
  FakeDaemon daemon(socket_, [](const std::string&, int) { return std::string(); });
  Outcome run = graidctl(dir_, socket_, {"list", "dg"});
  EXPECT_EQ(run.exit_code, 4);
  EXPECT_NE(run.err.find("closed the connection without answering"), std::string::npos) << run.err;
}

TEST_F(GraidctlClientTest, WrongIdOrGarbageIsInternal) {
  {
    FakeDaemon daemon(socket_, [](const std::string&, int) {
      return std::string(R"({"id":99,"result":[]})") + "\n";
    });
    Outcome run = graidctl(dir_, socket_, {"--format", "json", "list", "dg"});
    EXPECT_EQ(run.exit_code, 5);
    json doc = json::parse(run.out, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << run.out;
    EXPECT_EQ(doc["error"]["code"], "internal");
    EXPECT_NE(doc["error"]["message"].get<std::string>().find("with id 99"), std::string::npos);
  }
  ::unlink(socket_.c_str());
  {
    FakeDaemon daemon(socket_, [](const std::string&, int) { return std::string("oops\n"); });
    Outcome run = graidctl(dir_, socket_, {"list", "dg"});
    EXPECT_EQ(run.exit_code, 5);
    EXPECT_NE(run.err.find("not JSON"), std::string::npos) << run.err;
  }
  ::unlink(socket_.c_str());
  {
    // An error for a request whose id the daemon could not read is still its error.
    FakeDaemon daemon(socket_, [](const std::string&, int) {
      return std::string(R"({"id":null,"error":{"code":"bad_request","message":"m"}})") + "\n";
    });
    Outcome run = graidctl(dir_, socket_, {"list", "dg"});
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_EQ(run.err, "graidctl: m\n");
  }
}

json stats_sample(std::uint64_t time_ns, std::uint64_t reads) {
  std::vector<std::uint64_t> buckets(32, 0);
  buckets[4] = reads;  // [8, 16) us
  return {{"time_ns", time_ns},
          {"dgs",
           {{{"dg_id", 0},
             {"reads", reads},
             {"writes", 0},
             {"read_bytes", reads * 4096},
             {"write_bytes", 0},
             {"degraded_reads", 0},
             {"stripe_writes", 0},
             {"latency_us_buckets", buckets}}}},
          {"vds", json::array()}};
}

TEST_F(GraidctlClientTest, StatsTakesTwoSamples) {
  FakeDaemon daemon(socket_, [](const std::string& line, int index) {
    // Each sample 1 s of daemon time and 1000 reads after the one before.
    const auto n = static_cast<std::uint64_t>(index);
    return ok_line(line, stats_sample(1'000'000'000 * (n + 1), 1000 * n));
  });
  Outcome run = graidctl(dir_, socket_, {"--format", "json", "stats"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  json doc = json::parse(run.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << run.out;
  EXPECT_EQ(doc["interval_s"], 1.0);
  ASSERT_EQ(doc["dgs"].size(), 1u);
  EXPECT_EQ(doc["dgs"][0]["read_iops"], 1000.0);
  EXPECT_EQ(doc["dgs"][0]["read_bps"], 4096000.0);
  EXPECT_EQ(doc["dgs"][0]["p50_us"], 12.0);
  // Two requests with increasing ids, both `stats {}` without an object.
  auto lines = daemon.lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(json::parse(lines[0]), json::parse(R"({"id":1,"verb":"stats","args":{}})"));
  EXPECT_EQ(json::parse(lines[1]), json::parse(R"({"id":2,"verb":"stats","args":{}})"));
}

TEST_F(GraidctlClientTest, StatsWatchRunsUntilInterrupted) {
  FakeDaemon daemon(socket_, [](const std::string& line, int index) {
    const auto n = static_cast<std::uint64_t>(index);
    return ok_line(line, stats_sample(1'000'000'000 * (n + 1), 1000 * n));
  });
  pid_t pid = start(dir_, socket_, {"stats", "dg", "0", "--watch", "0.1", "--format", "json"});
  // Wait for at least three samples (two intervals), then interrupt.
  for (int i = 0; i < 200 && daemon.lines().size() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  Outcome run = finish(dir_, pid);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  std::istringstream lines(run.out);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    json doc = json::parse(line, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << line;
    EXPECT_EQ(doc["dgs"][0]["read_iops"], 1000.0) << line;
  }
  EXPECT_GE(count, 2) << run.out;
}

}  // namespace
}  // namespace graid::cli
