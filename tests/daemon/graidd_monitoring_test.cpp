// Being told when a drive dies, end to end with real graidd and graidctl processes: events that
// survive a kill with their sequence numbers, failures found at start, long polls and
// `events --follow` (docs/monitoring.md, docs/cli.md).
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "graidd_harness.h"

namespace graid::testing {
namespace {

using nlohmann::json;

// A graidctl left running (events --follow), its stdout read line by line.
class RunningCtl {
 public:
  RunningCtl(const Graidd& d, const std::vector<std::string>& args) {
    int out[2];
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    std::vector<std::string> argv = {GRAIDCTL_PATH, "--socket", d.socket()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargs;
    for (auto& a : argv)
      cargs.push_back(a.data());
    cargs.push_back(nullptr);
    EXPECT_EQ(::posix_spawn(&pid_, cargs[0], &fa, nullptr, cargs.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    fd_ = out[0];
  }
  ~RunningCtl() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(fd_);
  }
  // The next line of its stdout, or "" when none comes within `timeout`.
  std::string line(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto nl = pending_.find('\n'); nl != std::string::npos) {
        std::string l = pending_.substr(0, nl);
        pending_.erase(0, nl + 1);
        return l;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return "";
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
      char buf[4096];
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) return "";
      pending_.append(buf, static_cast<std::size_t>(n));
    }
  }
  // SIGINT, then its exit code (-1: killed or still running after 10 s).
  int interrupt() {
    ::kill(pid_, SIGINT);
    for (int i = 0; i < 1000; ++i) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string pending_;
};

class GraiddMonitoringTest : public GraiddTest {
 protected:
  json events(std::uint64_t since = 0) {
    return ok({"events", "--since", std::to_string(since)})["events"];
  }
  static std::vector<json> of_kind(const json& list, const std::string& kind) {
    std::vector<json> out;
    for (const json& e : list)
      if (e["kind"] == kind) out.push_back(e);
    return out;
  }
};

// Issue 49 item 1: a member failure's event is on disk before graidd answers the command that
// caused it; killed right after, the next graidd shows it, with the sequence going on.
TEST_F(GraiddMonitoringTest, AFailureEventSurvivesAKillRightAfterIt) {
  make_pds(3);
  ok({"create", "dg", "raid5", "0-2"});
  ok({"edit", "pd", "1", "marker", "offline"});
  d_->stop(SIGKILL);
  ASSERT_TRUE(d_->start()) << d_->log();
  const json list = events();
  const auto failed = of_kind(list, "member_failed");
  ASSERT_FALSE(failed.empty()) << list.dump(1);
  EXPECT_EQ(failed.front()["severity"], "critical");
  EXPECT_EQ(failed.front()["dg_id"], 0);
  EXPECT_EQ(failed.front()["pd_id"], 1);
  EXPECT_EQ(failed.front()["slot"], 1);
  // Two runs, each opened by daemon_started; sequence numbers increase by one throughout.
  const auto starts = of_kind(list, "daemon_started");
  ASSERT_EQ(starts.size(), 2u) << list.dump(1);
  EXPECT_EQ(list.front()["seq"], 1);
  for (std::size_t i = 1; i < list.size(); ++i)
    EXPECT_EQ(list[i]["seq"].get<std::uint64_t>(), list[i - 1]["seq"].get<std::uint64_t>() + 1);
  EXPECT_GT(starts[1]["seq"].get<std::uint64_t>(), failed.front()["seq"].get<std::uint64_t>());
  // The restart found the failure logged: no second member_failed for it.
  EXPECT_EQ(failed.size(), 1u) << list.dump(1);
  EXPECT_EQ(of_kind(list, "dg_degraded").size(), 1u) << list.dump(1);
  EXPECT_EQ(of_kind(list, "dg_degraded").front()["severity"], "warning");
}

// A failure the log does not hold (here: its files removed while graidd was down) is logged at
// the next start, once: later restarts find it logged.
TEST_F(GraiddMonitoringTest, AFailureTheLogLacksIsLoggedAtStartOnce) {
  make_pds(3);
  ok({"create", "dg", "raid5", "0-2"});
  ok({"edit", "pd", "2", "marker", "offline"});
  d_->stop();
  std::filesystem::remove(d_->state_dir() + "/events.jsonl");
  ASSERT_TRUE(d_->start()) << d_->log();
  auto failed = of_kind(events(), "member_failed");
  ASSERT_EQ(failed.size(), 1u) << events().dump(1);
  EXPECT_EQ(failed.front()["slot"], 2);
  EXPECT_EQ(failed.front()["severity"], "critical");
  EXPECT_NE(failed.front()["message"].get<std::string>().find("found failed at start"),
            std::string::npos)
      << failed.front().dump();
  d_->stop();
  ASSERT_TRUE(d_->start()) << d_->log();
  EXPECT_EQ(of_kind(events(), "member_failed").size(), 1u) << events().dump(1);
}

// list event --wait answers as soon as an event comes; with nothing to wait for, at once; with
// nothing coming, after the wait (an empty list).
TEST_F(GraiddMonitoringTest, AWaitingListAnswersWhenAnEventComes) {
  const std::uint64_t next = ok({"events"})["next_seq"].get<std::uint64_t>();
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ok({"events", "test", "from", "the", "test"});
  });
  const auto t0 = std::chrono::steady_clock::now();
  const json waited = ok({"events", "--since", std::to_string(next - 1), "--wait", "60"});
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  later.join();
  ASSERT_EQ(waited["events"].size(), 1u) << waited.dump(1);
  EXPECT_EQ(waited["events"][0]["kind"], "test");
  EXPECT_EQ(waited["events"][0]["severity"], "warning");
  EXPECT_EQ(waited["events"][0]["message"], "from the test");
  EXPECT_LT(took, 30.0) << "answered when the event came, not at the end of the wait";
  const json nothing = ok({"events", "--since", std::to_string(next), "--wait", "1"});
  EXPECT_TRUE(nothing["events"].empty()) << nothing.dump(1);
  const CtlRun bad = d_->ctl({"events", "--wait", "301"});
  EXPECT_EQ(bad.exit, 2) << describe(bad);
  const CtlRun both = d_->ctl({"events", "--wait", "5", "--follow"});
  EXPECT_EQ(both.exit, 2) << describe(both);
}

// events --follow prints each event as it comes, one line each, and ends 0 on SIGINT.
TEST_F(GraiddMonitoringTest, FollowPrintsEventsAsTheyCome) {
  RunningCtl follow(*d_, {"events", "--follow"});
  // Nothing from before it started.
  EXPECT_EQ(follow.line(std::chrono::milliseconds(500)), "");
  ok({"events", "test", "first"});
  const std::string first = follow.line(std::chrono::seconds(20));
  EXPECT_NE(first.find("warning test: first"), std::string::npos) << first;
  make_pds(1);
  const std::string second = follow.line(std::chrono::seconds(20));
  EXPECT_NE(second.find("info pd_added pd 0: "), std::string::npos) << second;
  EXPECT_EQ(follow.interrupt(), 0);
}

// Issue 49 item 3: graidctl status exits as mdadm --detail --test: optimal 0, degraded 1, back to
// 0 once rebuilt, 2 for a DG that cannot be assembled, 4 without graidd.
TEST_F(GraiddMonitoringTest, StatusExitCodesFollowTheWorstDg) {
  const auto paths = make_pds(3);
  auto status = [&] { return d_->ctl({"status"}, /*json=*/false); };
  CtlRun r = status();
  EXPECT_EQ(r.exit, 0) << describe(r);
  EXPECT_NE(r.out.find("no drive groups"), std::string::npos) << r.out;
  ok({"create", "dg", "raid5", "0-2", "--name", "data"});
  r = status();
  EXPECT_EQ(r.exit, 0) << describe(r);
  EXPECT_NE(r.out.find("dg 0 (data) raid5, 3 members: "), std::string::npos) << r.out;
  ok({"edit", "pd", "1", "marker", "offline"});
  r = status();
  EXPECT_EQ(r.exit, 1) << describe(r);
  EXPECT_NE(r.out.find("slot 1 (pd 1, " + paths[1] + "): failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("status: degraded (exit 1)"), std::string::npos) << r.out;
  const CtlRun j = d_->ctl({"status"});
  EXPECT_EQ(j.exit, 1) << describe(j);
  EXPECT_EQ(j.json["status"], "degraded") << j.out;
  EXPECT_EQ(j.json["dgs"][0]["status"], "degraded") << j.out;
  ok({"edit", "pd", "1", "marker", "online"});
  wait_for("dg", "0", [](const json& dg) { return dg["state"] == "optimal"; });
  r = status();
  EXPECT_EQ(r.exit, 0) << describe(r);
  // Two of three RAID5 members gone while graidd was down: the DG cannot be assembled.
  d_->stop();
  std::filesystem::remove(paths[1]);
  std::filesystem::remove(paths[2]);
  ASSERT_TRUE(d_->start()) << d_->log();
  r = status();
  EXPECT_EQ(r.exit, 2) << describe(r);
  EXPECT_NE(r.out.find("offline [failed]"), std::string::npos) << r.out;
  d_->stop();
  r = status();
  EXPECT_EQ(r.exit, 4) << describe(r);
}

// Issue 49 item 4: --metrics-listen serves /metrics, which Prometheus's own parser reads, during
// a rebuild whose progress rises from one scrape to the next; other paths and methods are
// refused.
TEST_F(GraiddMonitoringTest, MetricsParseAndShowARebuildProgressing) {
  make_pds(4);
  d_->stop();
  // 4 MB/s per member: the rebuild of a 64 MiB member takes about 15 s.
  ASSERT_TRUE(d_->start({"--metrics-listen", "127.0.0.1:0", "--speed-limit-max", "4"}))
      << d_->log();
  const std::string url = ok({"describe", "controller"})["metrics"].get<std::string>();
  // Files have no health log: describe pd says so once the monitor has looked.
  const json pd0 = wait_for(
      "pd", "0", [](const json& pd) { return pd["health"].value("reason", "") != "not read yet"; });
  EXPECT_EQ(pd0["health"]["available"], false) << pd0.dump(1);
  EXPECT_EQ(pd0["health"]["reason"], "a file, not an NVMe drive") << pd0.dump(1);
  ASSERT_TRUE(url.starts_with("http://127.0.0.1:")) << url;
  ok({"create", "dg", "raid5", "0-2", "--name", "data", "--assume-clean"});
  ok({"create", "vd", "0", "--size", "16M", "--no-ublk"});
  ok({"edit", "pd", "1", "marker", "offline"});
  ok({"replace", "pd", "0", "1", "3"});
  wait_for("dg", "0", [](const json& dg) { return dg["state"] == "rebuilding"; });
  auto scrape = [&] {
    CtlRun r;
    r.exit = run_capture({GRAID_SYSTEM_PYTHON, SCRAPE_METRICS_PY, url}, &r.out, &r.err);
    EXPECT_EQ(r.exit, 0) << describe(r);
    return json::parse(r.out, nullptr, false);
  };
  const json first = scrape();
  ASSERT_TRUE(first.is_object()) << first;
  const json& s1 = first["samples"];
  EXPECT_EQ(s1.value("graid_dg_state{dg=0,name=data,state=rebuilding}", -1.0), 1.0) << s1.dump(1);
  EXPECT_EQ(s1.value("graid_dg_state{dg=0,name=data,state=optimal}", -1.0), 0.0);
  EXPECT_EQ(s1.value("graid_dg_members{dg=0,state=rebuilding}", -1.0), 1.0);
  EXPECT_GE(s1.value("graid_events_total{severity=critical}", -1.0), 1.0);
  EXPECT_EQ(s1.value("graid_job_running{dg=0,kind=rebuild}", -1.0), 1.0);
  EXPECT_EQ(first["types"].value("graid_dg_state", ""), "gauge");
  EXPECT_EQ(first["types"].value("graid_events", ""), "counter");
  EXPECT_EQ(first["types"].value("graid_vd_request_latency_seconds", ""), "histogram");
  EXPECT_TRUE(s1.contains("graid_vd_request_latency_seconds_bucket{dg=0,le=+Inf,vd=0}"))
      << s1.dump(1);
  const double p1 = s1.value("graid_job_progress_ratio{dg=0,kind=rebuild}", -1.0);
  ASSERT_GE(p1, 0.0) << s1.dump(1);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const json second = scrape();
  const double p2 = second["samples"].value("graid_job_progress_ratio{dg=0,kind=rebuild}", -1.0);
  EXPECT_GT(p2, p1) << "the rebuild's progress did not rise between two scrapes 2 s apart";
  EXPECT_LT(p2, 1.0);
  EXPECT_GT(second["samples"].value("graid_job_speed_bytes_per_second{dg=0,kind=rebuild}", 0.0),
            0.0);
  // curl, as an administrator would try it: other paths 404, other methods 405.
  std::string out, err;
  if (run_capture({"/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                   url.substr(0, url.size() - 8) + "/"},
                  &out, &err) == 0) {
    EXPECT_EQ(out, "404");
    out.clear();
    EXPECT_EQ(run_capture({"/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X",
                           "POST", url},
                          &out, &err),
              0);
    EXPECT_EQ(out, "405");
  }
  // An address that cannot be used stops graidd at start, saying so.
  d_->stop();
  EXPECT_FALSE(d_->start({"--metrics-listen", "localhost:9633"}));
  EXPECT_NE(d_->log().find("is not an IP address"), std::string::npos);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Issue 49 item 2: --event-program runs for each warning and critical event, as
// `PROGRAM KIND DG [PD]` with GRAID_EVENT_* set, in a process group of its own with an ordinary
// OOM score and none of graidd's descriptors; info events run nothing.
TEST_F(GraiddMonitoringTest, TheAlertHookRunsWithTheEventInItsArgumentsAndEnvironment) {
  const std::string out = dir_.file("hook.out");
  const std::string hook = dir_.file("hook.sh");
  {
    std::ofstream f(hook);
    f << "#!/bin/sh\n"
      << "{ echo \"args: $*\"; env | grep -E '^GRAID_(EVENT_|SOCKET=)' | sort;\n"
      << "  echo \"oom: $(cat /proc/self/oom_score_adj)\";\n"
      << "  echo \"pgid: $(cut -d' ' -f5 /proc/$$/stat) pid: $$\";\n"
      << "  for fd in /proc/$$/fd/*; do echo \"fd: ${fd##*/} $(readlink $fd)\"; done;\n"
      << "  echo end; } >> " << out << "\n";
  }
  ::chmod(hook.c_str(), 0755);
  d_->stop();
  ASSERT_TRUE(d_->start({"--event-program", hook})) << d_->log();
  // graidd runs at -1000 under its unit; as root, so does this one: the hook must not.
  const bool root = ::geteuid() == 0;
  if (root) {
    std::ofstream adj("/proc/" + std::to_string(d_->pid()) + "/oom_score_adj");
    adj << "-1000\n";
  }
  make_pds(3);  // info: no hook
  ok({"events", "test", "wiring check"});
  ok({"create", "dg", "raid5", "0-2"});
  ok({"edit", "pd", "1", "marker", "offline"});
  // Three hooks: test, member_failed, dg_degraded, each finished with "end".
  std::string text;
  for (int i = 0; i < 400; ++i) {
    text = slurp(out);
    std::size_t ends = 0;
    for (std::size_t p = text.find("end\n"); p != std::string::npos; p = text.find("end\n", p + 1))
      ++ends;
    if (ends >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(text.find("args: test -\n"), std::string::npos) << text;
  EXPECT_NE(text.find("GRAID_EVENT_MESSAGE=wiring check\n"), std::string::npos) << text;
  EXPECT_NE(text.find("GRAID_EVENT_SEVERITY=warning\n"), std::string::npos) << text;
  EXPECT_NE(text.find("GRAID_SOCKET=" + d_->socket() + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("args: member_failed 0 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("GRAID_EVENT_KIND=member_failed\n"), std::string::npos) << text;
  EXPECT_NE(text.find("GRAID_EVENT_SEVERITY=critical\n"), std::string::npos) << text;
  EXPECT_NE(text.find("GRAID_EVENT_DG=0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("GRAID_EVENT_PD=1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("GRAID_EVENT_SLOT=1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("args: dg_degraded 0\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("args: pd_added"), std::string::npos) << "info events run no hook\n" << text;
  EXPECT_EQ(text.find("args: dg_created"), std::string::npos) << text;
  if (root) {
    EXPECT_EQ(text.find("oom: -1000"), std::string::npos) << text;
  }
  EXPECT_NE(text.find("oom: 0\n"), std::string::npos) << text;
  // Its own process group (pgid = its pid).
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("pgid: ")) {
      std::istringstream w(line);
      std::string a, pgid, b, pid;
      w >> a >> pgid >> b >> pid;
      EXPECT_EQ(pgid, pid) << line;
    }
    // Nothing of graidd's: no sockets, eventfds, io_uring, drives or state files.
    if (line.starts_with("fd: ")) {
      EXPECT_EQ(line.find("socket:"), std::string::npos) << line;
      EXPECT_EQ(line.find("anon_inode"), std::string::npos) << line;
      EXPECT_EQ(line.find(dir_.path() + "/pd"), std::string::npos) << line;
      EXPECT_EQ(line.find("events.jsonl"), std::string::npos) << line;
    }
  }
  const json cx = ok({"describe", "controller"});
  EXPECT_EQ(cx["event_hooks"]["program"], hook);
  EXPECT_GE(cx["event_hooks"]["ran"].get<int>(), 3) << cx.dump(1);
  EXPECT_EQ(cx["event_hooks"]["failed"], 0) << cx.dump(1);
}

// A hook that does not finish is killed at the timeout with everything it started; a program
// that is not there or not executable stops graidd at start, saying so.
TEST_F(GraiddMonitoringTest, AHookPastItsTimeoutIsKilledWithItsProcessGroup) {
  const std::string pids = dir_.file("hook.pids");
  const std::string hook = dir_.file("hang.sh");
  {
    std::ofstream f(hook);
    f << "#!/bin/sh\nsleep 1000 &\necho $! >> " << pids << "\necho $$ >> " << pids << "\nwait\n";
  }
  ::chmod(hook.c_str(), 0755);
  d_->stop();
  ASSERT_TRUE(d_->start({"--event-program", hook, "--event-program-timeout", "1"})) << d_->log();
  ok({"events", "test", "hang"});
  json cx;
  for (int i = 0; i < 200; ++i) {
    cx = ok({"describe", "controller"});
    if (cx["event_hooks"]["timed_out"].get<int>() >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(cx["event_hooks"]["timed_out"], 1) << cx.dump(1);
  std::istringstream in(slurp(pids));
  int count = 0;
  for (pid_t pid; in >> pid; ++count) {
    // Gone, or a zombie that nobody reaps until graidd's own exit (a child of a killed shell
    // is re-parented): either way not running.
    const std::string state = slurp("/proc/" + std::to_string(pid) + "/stat");
    if (state.empty()) continue;
    const auto close = state.rfind(')');
    ASSERT_NE(close, std::string::npos);
    EXPECT_EQ(state.substr(close + 2, 1), "Z") << "pid " << pid << " still runs: " << state;
  }
  EXPECT_EQ(count, 2);
  EXPECT_NE(d_->log().find("killed with its process group"), std::string::npos);

  d_->stop();
  EXPECT_FALSE(d_->start({"--event-program", dir_.file("no-such-hook")}));
  EXPECT_NE(d_->log().find("no-such-hook"), std::string::npos);
  EXPECT_FALSE(d_->start({"--event-program", "relative/hook.sh"}));
  EXPECT_NE(d_->log().find("give the program's absolute path"), std::string::npos);
}

// Issue 49 item 7: cli/graidctl.bash sourced in plain bash (no bash-completion package) offers
// verbs, objects, options and the ids this graidd knows, through `graidctl __complete`.
TEST_F(GraiddMonitoringTest, BashCompletionOffersVerbsObjectsAndLiveIds) {
  make_pds(4);
  ok({"create", "dg", "raid5", "0-2"});
  ok({"create", "vd", "0", "--size", "1M", "--no-ublk"});
  ok({"create", "vd", "0", "--size", "1M", "--no-ublk"});
  const std::string dir = std::filesystem::path(GRAIDCTL_PATH).parent_path().string();
  auto offered = [&](const std::string& words, int cword) {
    const std::string script = "source '" GRAIDCTL_BASH "'; COMP_WORDS=(" + words +
                               "); COMP_CWORD=" + std::to_string(cword) +
                               "; _graidctl; printf '%s\\n' \"${COMPREPLY[@]}\"";
    std::string out, err;
    const int rc = run_capture(
        {"/usr/bin/env", "PATH=" + dir + ":/usr/bin:/bin", "GRAID_SOCKET=" + d_->socket(),
         "/bin/bash", "--norc", "--noprofile", "-c", script},
        &out, &err);
    EXPECT_EQ(rc, 0) << err;
    std::vector<std::string> lines;
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);)
      if (!l.empty()) lines.push_back(l);
    std::sort(lines.begin(), lines.end());
    return lines;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(offered("graidctl de", 1), (V{"delete", "describe"}));
  EXPECT_EQ(offered("graidctl ex", 1), (V{"examine", "export"}));
  EXPECT_EQ(offered("graidctl desc ''", 2), (V{"controller", "dg", "pd", "vd"}));
  // Live ids: the four pds, the one dg, its two vds.
  EXPECT_EQ(offered("graidctl describe pd ''", 3), (V{"0", "1", "2", "3"}));
  EXPECT_EQ(offered("graidctl replace pd 0 1 ''", 5), (V{"0", "1", "2", "3"}));
  EXPECT_EQ(offered("graidctl delete dg ''", 3), (V{"0"}));
  EXPECT_EQ(offered("graidctl describe vd 0 ''", 4), (V{"0", "1"}));
  EXPECT_EQ(offered("graidctl create dg raid''", 3),
            (V{"raid0", "raid1", "raid10", "raid5", "raid6"}));
  EXPECT_EQ(offered("graidctl edit dg 0 journal ''", 5), (V{"always", "degraded-only", "off"}));
  EXPECT_EQ(offered("graidctl --format ''", 2), (V{"json", "table"}));
  EXPECT_EQ(offered("graidctl start check 0 --re", 4), (V{"--repair"}));
  // A path: file names from the shell.
  EXPECT_EQ(offered("graidctl examine '" + dir + "/libgraidctl_li'", 2),
            (V{dir + "/libgraidctl_lib.a"}));
  // graidd gone: no ids, and no error on the terminal.
  d_->stop(SIGKILL);
  EXPECT_EQ(offered("graidctl describe pd ''", 3), V{});
}

}  // namespace
}  // namespace graid::testing
