#include "suite.h"

#include <fmt/format.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "array_run.h"
#include "array_session.h"
#include "backend.h"
#include "cost_model.h"
#include "graid/array.h"
#include "graid/member.h"
#include "member_files.h"
#include "profile_run.h"
#include "suite_report.h"
#include "units.h"

#ifndef GRAID_REPORT_SCRIPT
#define GRAID_REPORT_SCRIPT ""
#endif
#ifndef GRAID_NBD_SCRIPT
#define GRAID_NBD_SCRIPT ""
#define GRAID_GRAIDD ""
#define GRAID_GRAIDCTL ""
#endif

namespace graid::bench {

namespace {

constexpr std::uint32_t kStrip = 64 * 1024;

const Profile& profile_named(std::string_view name) {
  const auto all = all_profiles();
  const auto it =
      std::find_if(all.begin(), all.end(), [&](const Profile& p) { return p.name == name; });
  return *it;  // every name below is one of all_profiles()
}

std::vector<Profile> profiles_named(std::initializer_list<std::string_view> names) {
  std::vector<Profile> out;
  for (std::string_view n : names)
    out.push_back(profile_named(n));
  return out;
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

std::string kernel_release() {
  utsname u{};
  return uname(&u) == 0 ? std::string(u.release) : std::string("unknown");
}

// The python that has matplotlib on Debian: the system one, not one a user's PATH puts first.
std::string python() {
  return ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

// Runs argv, waits; its exit status, or -1 when it could not be started.
int run_program(const std::vector<std::string>& argv) {
  std::fflush(stdout);  // what was printed comes before the child's output
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class Suite {
 public:
  // `workdir`: a directory of the suite's own under --dir, for member files.
  Suite(const SuiteOptions& o, std::string command, std::string workdir = {})
      : o_(o), workdir_(std::move(workdir)) {
    host_.generated = now_utc();
    host_.command = std::move(command);
    host_.cpu = cpu_model();
    host_.cores = std::thread::hardware_concurrency();
    host_.kernel = kernel_release();
    host_.quick = o.quick;
    seconds_ = o.seconds > 0 ? o.seconds : (o.quick ? 0.5 : 2.0);
    member_bytes_ = o.member_size != 0 ? o.member_size : (o.quick ? 256ull << 20 : 1ull << 30);
    host_.seconds = seconds_;
    host_.members = fmt::format("files on {}, {} each", o.dir, format_size(member_bytes_));
  }

  Result<std::vector<SuiteCase>> plan() const {
    std::vector<std::string> backends = o_.backends;
    bool ref_for_scale = false;
    if (backends.empty()) {
      if (open_backend("cuda").is_ok()) backends.push_back("cuda");
      backends.push_back("cpu");
      ref_for_scale = true;
    }
    std::vector<SuiteCase> cases;
    const auto profiles =
        o_.quick ? profiles_named(
                       {"4k-randread", "4k-randwrite", "1m-seqread", "1m-seqwrite", "8k-randrw70"})
                 : profiles_named({"4k-randread", "4k-randwrite", "64k-randwrite", "64k-seqread",
                                   "64k-seqwrite", "1m-seqread", "1m-seqwrite", "8k-randrw70",
                                   "8k-randrw90", "16k-randrw60"});
    const auto load = o_.quick ? profiles_named({"4k-randwrite"})
                               : profiles_named({"4k-randread", "4k-randwrite", "8k-randrw70"});
    const std::vector<double> points = o_.quick ? std::vector<double>{25, 50, 90, 120}
                                                : std::vector<double>{10, 25, 50, 75, 90, 100, 120};
    for (const std::string& backend : backends) {
      for (auto [level, n] : {std::pair{RaidLevel::kRaid5, 5u}, std::pair{RaidLevel::kRaid6, 6u}}) {
        SuiteCase c{level, n, backend, true, profiles, {}, {}};
        if (backend == backends.back() && (level == RaidLevel::kRaid5 || !o_.quick)) {
          c.load_profiles = load;  // latency against load: one backend (the last, cpu by default)
          c.load_points = points;
        }
        cases.push_back(std::move(c));
      }
    }
    if (!o_.quick) {
      for (auto [level, n] : {std::pair{RaidLevel::kRaid10, 4u}, std::pair{RaidLevel::kRaid0, 4u}})
        cases.push_back(SuiteCase{level, n, backends.back(), false, profiles, {}, {}});
    }
    if (!o_.levels.empty()) {
      std::erase_if(cases, [&](const SuiteCase& c) {
        return std::find(o_.levels.begin(), o_.levels.end(), c.level) == o_.levels.end();
      });
      ref_for_scale = ref_for_scale && std::find(o_.levels.begin(), o_.levels.end(),
                                                 RaidLevel::kRaid5) != o_.levels.end();
    }
    if (ref_for_scale) {
      cases.push_back(
          SuiteCase{RaidLevel::kRaid5, 5, "ref", false, profiles_named({"4k-randwrite"}), {}, {}});
    }
    return cases;
  }

  Status run_case(const SuiteCase& c) {
    auto geometry = Geometry::make(c.level, c.members, kStrip);
    if (!geometry.is_ok()) return geometry.status();
    auto members = MemberSet::create_in_dir(workdir_, c.members, member_bytes_, false);
    if (!members.is_ok()) return members.status();
    ArraySpec spec;
    spec.paths = members->paths();
    spec.level = c.level;
    spec.strip_bytes = kStrip;
    spec.backend = c.backend;
    auto created = ArraySession::create(spec);
    if (!created.is_ok()) return created.status();
    ArraySession& session = **created;
    RunSetup setup;
    setup.level = std::string(raid_level_name(c.level));
    setup.members = c.members;
    setup.strip_bytes = kStrip;
    setup.member_bytes = member_bytes_;
    setup.backend = session.backend_name();
    setup.device = session.parity_device();
    setup.threads = o_.threads;
    setup.queue_depth = o_.queue_depth;
    setup.span = std::min(session.capacity(), geometry->data_capacity(member_bytes_));

    MeasureConfig measure;
    measure.paths = members->paths();
    measure.raw_offset = session.data_offset();
    measure.raw_bytes = member_bytes_ - session.data_offset();
    measure.session = &session;
    measure.span = setup.span;
    measure.queue_depth = o_.queue_depth;
    measure.timing = {o_.threads, std::min(1.0, seconds_ / 5), seconds_};
    measure.rounds = o_.quick ? 1 : 3;  // raw and array alternate: drift hits both alike
    measure.seed = o_.seed;

    std::vector<double> optimal_iops;
    for (const Profile& p : c.profiles) {
      auto r = measure_profile(measure, p, member_ios_per_array_io(*geometry, p));
      if (!r.is_ok()) return r.status();
      optimal_iops.push_back(r->array ? r->array->iops() : 0);
      add(row_from(*r, setup, ArrayState::kOptimal));
    }
    for (const Profile& p : c.load_profiles) {
      const auto at = std::find_if(c.profiles.begin(), c.profiles.end(),
                                   [&](const Profile& q) { return q.name == p.name; });
      const double max = at == c.profiles.end() ? 0 : optimal_iops[at - c.profiles.begin()];
      if (max <= 0) continue;
      for (const double pct : c.load_points) {
        ArrayRunConfig run{p, setup.span, o_.queue_depth, measure.timing, o_.seed};
        run.target_iops = max * pct / 100;
        auto figures = run_array_workload(session, run);
        if (!figures.is_ok()) return figures.status();
        ProfileReport report;
        report.profile = p;
        report.array = *figures;
        SuiteRow row = row_from(report, setup, ArrayState::kOptimal);
        row.load_percent = pct;
        row.target_iops = run.target_iops;
        add(std::move(row));
      }
    }
    if (c.states) {
      // Degraded: one member failed, two for RAID6 (what each level survives).
      std::vector<std::uint32_t> victims = {1};
      if (c.level == RaidLevel::kRaid6) victims.push_back(3);
      for (const std::uint32_t v : victims)
        GRAID_RETURN_IF_ERROR(session.array().fail_member(v, "benchmark suite: degraded state"));
      measure.raw = false;
      measure.rounds = 1;
      for (const Profile& p : c.profiles) {
        auto r = measure_profile(measure, p, member_ios_per_array_io(*geometry, p));
        if (!r.is_ok()) return r.status();
        add(row_from(*r, setup, ArrayState::kDegraded));
      }
      for (const Profile& p : c.profiles) {
        auto row = rebuilding_run(session, setup, measure, *geometry, p, victims);
        if (!row.is_ok()) return row.status();
        add(std::move(*row));
      }
    }
    return session.stop();
  }

  // Fresh members in the failed roles and a rebuild onto them held at the set pace for the whole
  // measurement; then the rebuild is stopped and the roles failed again, ready for the next
  // profile's fresh start.
  Result<SuiteRow> rebuilding_run(ArraySession& session, const RunSetup& setup,
                                  const MeasureConfig& measure, const Geometry& g, const Profile& p,
                                  const std::vector<std::uint32_t>& victims) {
    Array& a = session.array();
    for (const std::uint32_t v : victims) {
      const std::string path = fmt::format("{}/fresh-{}.img", workdir_, v);
      OpenOptions open;
      open.create = true;
      open.create_size = member_bytes_;
      auto fresh = open_member(path, open);
      std::error_code ec;
      std::filesystem::remove(path, ec);  // the array holds it open; nothing is left behind
      if (!fresh.is_ok()) return fresh.status();
      GRAID_RETURN_IF_ERROR(a.replace_failed(v, std::move(*fresh)));
    }
    std::atomic<bool> stop{false};
    Result<bool> rebuilt = false;
    RebuildControl control;
    control.stop = &stop;
    control.bytes_per_second = o_.rebuild_bytes_per_second;
    std::atomic<bool> finished{false};
    std::thread job([&] {
      rebuilt = a.rebuild(control);
      finished = true;
    });
    auto r = measure_profile(measure, p, member_ios_per_array_io(g, p));
    const bool ran_throughout = !finished.load();
    stop = true;
    job.join();
    if (!r.is_ok()) return r.status();
    if (!rebuilt.is_ok()) return rebuilt.status();
    SuiteRow row = row_from(*r, setup, ArrayState::kRebuilding);
    row.rebuild_bytes_per_second = o_.rebuild_bytes_per_second;
    row.rebuild_ran_throughout = ran_throughout;
    for (const std::uint32_t v : victims)
      GRAID_RETURN_IF_ERROR(a.fail_member(v, "benchmark suite: next rebuilding run"));
    return row;
  }

  void add(SuiteRow row) {
    print_suite_rows(stdout, std::span(&row, 1), rows_.empty());
    rows_.push_back(std::move(row));
  }

  Status write(const std::string& path) const {
    std::ofstream out(path);
    out << to_report_json(host_, rows_) << '\n';
    out.close();
    if (!out) return make_error(Errc::kIoError, "{}: cannot write", path);
    return Status::ok();
  }

  const std::vector<SuiteRow>& rows() const { return rows_; }
  std::uint64_t member_bytes() const { return member_bytes_; }
  double seconds() const { return seconds_; }

 private:
  const SuiteOptions& o_;
  const std::string workdir_;
  SuiteHost host_;
  double seconds_ = 0;
  std::uint64_t member_bytes_ = 0;
  std::vector<SuiteRow> rows_;
};

}  // namespace

Result<std::vector<SuiteCase>> suite_plan(const SuiteOptions& options) {
  return Suite(options, "").plan();
}

int run_suite(const SuiteOptions& o, const std::string& command) {
  const auto fail = [](const Status& s) {
    std::fprintf(stderr, "graid-bench suite: %s\n", s.message().c_str());
    return 1;
  };
  // Member files go to a directory of the suite's own, removed at the end whatever happens.
  std::string work = o.dir + "/graid-suite-XXXXXX";
  if (::mkdtemp(work.data()) == nullptr) {
    return fail(make_error(Errc::kIoError, "--dir {}: cannot make a directory there: {}", o.dir,
                           std::strerror(errno)));
  }
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_work{work};
  Suite suite(o, command, work);
  auto cases = suite.plan();
  if (!cases.is_ok()) return fail(cases.status());
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) return fail(make_error(Errc::kIoError, "--out {}: {}", o.out, ec.message()));
  for (const SuiteCase& c : *cases) {
    if (Status s = suite.run_case(c); !s.is_ok()) {
      return fail(make_error(s.code(), "{} x{} on {}: {}", raid_level_name(c.level), c.members,
                             c.backend, s.message()));
    }
  }
  const std::string json = o.out + "/suite.json";
  if (Status s = suite.write(json); !s.is_ok()) return fail(s);
  std::printf("graid-bench suite: %zu rows in %s\n", suite.rows().size(), json.c_str());
  std::vector<std::string> inputs = {json};
  int status = 0;
  if (o.nbd) {
    // Through graidd over NBD: this build's daemon and CLI, fio as the client.
    const std::string nbd_json = o.out + "/nbd.json";
    std::string parity = "auto";
    if (!o.backends.empty()) {
      parity = std::find(o.backends.begin(), o.backends.end(), "cuda") != o.backends.end() ? "cuda"
                                                                                           : "cpu";
    }
    const int rc =
        run_program({"bash", GRAID_NBD_SCRIPT, GRAID_GRAIDD, GRAID_GRAIDCTL, work,
                     std::to_string(std::min<std::uint64_t>(suite.member_bytes(), 256ull << 20)),
                     fmt::format("{:g}", suite.seconds()), parity, nbd_json, json});
    if (rc == 0) {
      inputs.push_back(nbd_json);
      std::printf("graid-bench suite: the NBD rows in %s\n", nbd_json.c_str());
    } else {
      status = fail(make_error(Errc::kIoError,
                               "the rows through NBD failed ({} exited with {}); --no-nbd leaves "
                               "them out",
                               GRAID_NBD_SCRIPT, rc));
    }
  }
  if (!o.plots) return status;
  const std::string script = o.report_script.empty() ? GRAID_REPORT_SCRIPT : o.report_script;
  std::vector<std::string> argv = {python(), script, "--out", o.out};
  argv.insert(argv.end(), inputs.begin(), inputs.end());
  const int rc = run_program(argv);
  if (rc != 0) {
    return fail(make_error(Errc::kIoError,
                           "the plots failed ({} --out {} ... exited with {}); the JSON is "
                           "complete",
                           script, o.out, rc));
  }
  return status;
}

}  // namespace graid::bench
