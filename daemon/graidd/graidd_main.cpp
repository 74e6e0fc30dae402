// graidd: owns the drives, assembles the arrays, serves their VDs (NBD), takes commands from
// graidctl over the control socket. Runs in the foreground; see docs/daemon.md.
#include <grp.h>
#include <signal.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>

#include "control/control_server.h"
#include "graidd/dispatcher.h"
#include "graidd/event_hooks.h"
#include "graidd/event_log.h"
#include "graidd/graidd_options.h"
#include "graidd/io_threads.h"
#include "graidd/job_pace.h"
#include "graidd/metrics_server.h"
#include "graidd/parity_choice.h"
#include "graidd/registry.h"
#include "graidd/sd_notify.h"
#include "kernels/cuda_backend.h"

namespace {

using namespace graid;
using namespace graid::daemon;

int run(const GraiddOptions& o) {
  // Signals arrive through a signalfd the control loop polls; every thread inherits the mask,
  // so it is set before any thread starts (the jobs' parity workers, the CUDA runtime's).
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  ParityRequest parity_request;
  parity_request.backend = o.parity;
  parity_request.job_threads = o.job_parity_threads;
  auto parity = choose_parity(parity_request);
  if (!parity.is_ok()) {
    spdlog::error("{}", parity.status().message());
    return 2;
  }
  const ParityChoice& choice = (*parity)->choice;
  spdlog::info(
      "graidd {} starting: parity {} ({}; foreground {}, jobs {}), {} I/O threads, state dir {}",
      GRAID_VERSION, choice.backend->name(), choice.reason, choice.foreground, choice.jobs,
      o.io_threads, o.state_dir);

  control::ControlServerOptions so;
  so.path = o.socket;
  if (!o.socket_group.empty()) {
    const group* g = ::getgrnam(o.socket_group.c_str());
    if (g == nullptr) {
      spdlog::error("--socket-group {}: no such group", o.socket_group);
      return 2;
    }
    so.group = g->gr_gid;
  }

  const int sigfd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd < 0) {
    spdlog::error("signalfd: {}", std::strerror(errno));
    return 1;
  }

  // The socket first: a second graidd stops here, before it touches any drive.
  auto server = control::ControlServer::open(so);
  if (!server.is_ok()) {
    spdlog::error("control socket: {}", server.status().message());
    return 1;
  }
  auto threads = IoThreads::start(o.io_threads);
  if (!threads.is_ok()) {
    spdlog::error("{}", threads.status().message());
    return 2;
  }
  EventLog events;
  // Alert hooks before the registry starts: what start-up finds (a member found failed, a DG
  // that cannot start) is alerted too.
  std::unique_ptr<EventHooks> hooks;
  if (!o.event_program.empty()) {
    EventHookOptions ho;
    ho.program = o.event_program;
    ho.socket = o.socket;
    ho.timeout = std::chrono::seconds(o.event_program_timeout_s);
    auto started = EventHooks::start(ho, events);
    if (!started.is_ok()) {
      spdlog::error("{}", started.status().message());
      return 2;
    }
    hooks = std::move(*started);
  }
  RegistryOptions ro;
  ro.state_dir = o.state_dir;
  ro.socket_path = o.socket;
  ro.parity = choice;
  ro.version = GRAID_VERSION;
  ro.ublk.depth = o.ublk_depth;
  ro.ublk.memory_budget = o.ublk_memory_mib << 20;
  ro.ublk.copy = o.ublk_copy == "kernel" ? ublk::CopyMode::kKernel
                 : o.ublk_copy == "user" ? ublk::CopyMode::kUser
                 : o.ublk_copy == "zero" ? ublk::CopyMode::kZero
                                         : ublk::CopyMode::kAuto;
  ro.ublk.pin_to_queue = o.ublk_affinity == "queue";
  ro.ublk.spread = o.ublk_spread == "on";
  ro.ublk.batch = o.ublk_batch == "on";
  ro.nbd.handshake_timeout = std::chrono::seconds(o.nbd_handshake_timeout_s);
  set_speed_limit_max(o.speed_limit_max_mb * 1'000'000);
  ro.nbd.idle_timeout = std::chrono::seconds(o.nbd_idle_timeout_s);
  ro.nbd.io_timeout = std::chrono::seconds(o.nbd_io_timeout_s);
  ro.nbd.max_clients = o.nbd_max_clients;
  ro.nbd.max_handshakes = o.nbd_max_handshakes;
  ro.nbd.max_handshakes_per_peer = o.nbd_max_handshakes_per_peer;
  ro.event_hooks = hooks.get();
  // Drive health (SMART logs of the NVMe drives), read on a thread of its own.
  std::unique_ptr<HealthMonitor> health;
  if (o.health_interval_s > 0) {
    health = std::make_unique<HealthMonitor>(events, std::chrono::seconds(o.health_interval_s));
    ro.health = health.get();
  }
  // Prometheus metrics, rendered on the control thread when scraped (graidd/metrics_server.h):
  // listening before the drives are touched, so an address that cannot be used stops graidd
  // first. Nothing is scraped before the control loop runs.
  std::unique_ptr<Registry> registry;
  std::unique_ptr<MetricsServer> metrics;
  if (!o.metrics_listen.empty()) {
    auto started = MetricsServer::start(o.metrics_listen, [&] { return registry->metrics(); });
    if (!started.is_ok()) {
      spdlog::error("{}", started.status().message());
      return 2;
    }
    metrics = std::move(*started);
    ro.metrics_address = metrics->address();
  }
  registry = std::make_unique<Registry>(ro, **threads, events);
  if (auto st = registry->start(); !st) {
    spdlog::error("cannot start: {}", st.to_string());
    return 1;
  }
  registry->refresh();  // the health monitor's first targets
  spdlog::info("ready: control socket {}", o.socket);
  sd_notify("READY=1\nSTATUS=serving");

  const std::string version = GRAID_VERSION;
  control::ServeOptions serve;
  serve.stop_fd = sigfd;
  serve.watches.push_back({registry->wake_fd(), [&] {
                             drain_eventfd(registry->wake_fd());
                             registry->housekeeping();
                           }});
  // An event wakes the loop, which retries the long polls waiting for one (list event --wait).
  serve.watches.push_back({events.wake_fd(), [&] { drain_eventfd(events.wake_fd()); }});
  // systemd's watchdog (WatchdogSec= in the unit): pinged from this loop, so a control thread
  // that stops serving is found out, at half the interval systemd asks for.
  if (const auto watchdog = watchdog_interval()) {
    serve.ticks.push_back({*watchdog / 2, [] { sd_notify("WATCHDOG=1"); }});
    spdlog::info("systemd watchdog: pinging every {} ms", (*watchdog / 2).count());
  }
  if (metrics) {
    serve.watches.push_back({metrics->fd(), [&] { metrics->run(); }});
    serve.ticks.push_back({std::chrono::seconds(1), [&] { metrics->run(); }});
  }
  (*server)->serve([&](std::string_view line,
                       const control::PeerCred&) { return dispatch(*registry, line, version); },
                   serve);

  signalfd_siginfo info{};
  if (::read(sigfd, &info, sizeof info) == sizeof info)
    spdlog::info("signal {}: stopping", info.ssi_signo);
  sd_notify("STOPPING=1");
  events.add("daemon_stopping", std::nullopt, std::nullopt, std::nullopt, "stopping");
  server->reset();  // no more requests
  registry->shutdown();
  if (const std::uint32_t left = registry->devices_left(); left != 0) {
    // Ends as a kill would, every file at once (Registry::devices_left): the kernel then holds
    // the devices' I/O until the next graidd takes them back.
    ::close(sigfd);
    spdlog::info("stopped, leaving {} ublk device(s) in use to the kernel", left);
    spdlog::shutdown();
    std::_Exit(0);
  }
  registry.reset();
  threads->reset();
  ::close(sigfd);
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  GraiddOptions o;
  std::unique_ptr<CLI::App> made = make_graidd_app(o);
  CLI::App& app = *made;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // Plain lines on stderr: journald adds time and unit; by hand a timestamp helps.
  auto logger = spdlog::stderr_logger_mt("graidd");
  if (std::getenv("JOURNAL_STREAM") != nullptr)
    logger->set_pattern("<%l> %v");
  else
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e graidd[%P] %l: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  return run(o);
}
