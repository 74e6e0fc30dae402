#include "graidd/graidd_options.h"

#include <CLI/CLI.hpp>

#ifndef GRAID_VERSION
#define GRAID_VERSION "unknown"
#endif

namespace graid::daemon {

std::unique_ptr<CLI::App> make_graidd_app(GraiddOptions& o) {
  auto made = std::make_unique<CLI::App>(
      "graidd: the graid daemon (GPU-offloaded software RAID); see docs/daemon.md", "graidd");
  CLI::App& app = *made;
  app.add_option("--socket", o.socket, "control socket path")->capture_default_str();
  app.add_option("--socket-group", o.socket_group,
                 "group allowed on the control socket (mode 0660); default: owner only");
  app.add_option("--state-dir", o.state_dir, "state directory")->capture_default_str();
  app.add_option("--parity", o.parity, "parity backend: auto, cuda or cpu")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->capture_default_str();
  app.add_option("--job-parity-threads", o.job_parity_threads,
                 "with the cpu backend: threads that compute the background jobs' parity while "
                 "their own threads do the I/O (0: on the job's thread)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--io-threads", o.io_threads, "I/O threads")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--ublk-depth", o.ublk_depth, "ublk queue depth (tags per queue), at most")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--ublk-memory", o.ublk_memory_mib,
                 "MiB of request buffers per ublk device (shapes its depth and request size)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--ublk-copy", o.ublk_copy,
                 "who copies ublk request data: kernel (per-tag buffers), user (USER_COPY), zero "
                 "(none where the kernel has AUTO_BUF_REG: reads, RAID0/1/10 writes; else user) "
                 "or auto (zero for RAID0/1/10 where the kernel has it, else kernel)")
      ->check(CLI::IsMember({"kernel", "user", "zero", "auto"}))
      ->capture_default_str();
  app.add_option("--ublk-affinity", o.ublk_affinity,
                 "CPUs of the I/O threads serving ublk queues: any (the scheduler's choice) or "
                 "queue (thread i pinned to the CPUs of queue i)")
      ->check(CLI::IsMember({"any", "queue"}))
      ->capture_default_str();
  app.add_option("--ublk-spread", o.ublk_spread,
                 "on: each ublk queue is served by every I/O thread, its tags split over them "
                 "where the kernel has PER_IO_DAEMON (6.16+), else by a helper lane taking part "
                 "of a busy queue's requests (docs/ublk.md); off: each queue by its own thread")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--ublk-batch", o.ublk_batch,
                 "on: serve each ublk queue with BATCH_IO's per-queue commands (PREP, a multishot "
                 "FETCH, one COMMIT per poll pass) where the kernel has them (7.0+), else a "
                 "command per request; off: a command per request (docs/ublk.md)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--speed-limit-max", o.speed_limit_max_mb,
                 "MB/s per member: a ceiling on every background job's speed, whatever its DG's "
                 "setting (md's speed_limit_max); 0 = none (docs/cli.md)")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1'000'000}))
      ->capture_default_str();
  app.add_option("--nbd-handshake-timeout", o.nbd_handshake_timeout_s,
                 "seconds an NBD client may take from connecting to its first request (TLS "
                 "included) before it is disconnected; 0: no limit")
      ->capture_default_str();
  app.add_option("--nbd-idle-timeout", o.nbd_idle_timeout_s,
                 "seconds an NBD connection may go without a request before it is closed; 0 "
                 "(default): never, as the kernel's NBD client under a mounted filesystem "
                 "expects")
      ->capture_default_str();
  app.add_option("--nbd-io-timeout", o.nbd_io_timeout_s,
                 "seconds an NBD request's data may stop arriving, or a client leave its "
                 "replies unread, before its connection is closed (what it held goes back to "
                 "the others); 0: no limit")
      ->capture_default_str();
  app.add_option("--nbd-max-clients", o.nbd_max_clients,
                 "NBD clients (connections past their handshake) each export serves at most")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  app.add_option("--nbd-max-handshakes", o.nbd_max_handshakes,
                 "NBD connections still in their handshake each export keeps at most: a newer "
                 "one closes the oldest")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  app.add_option("--nbd-max-handshakes-per-peer", o.nbd_max_handshakes_per_peer,
                 "of those, from one peer (a TCP address, a unix socket's uid): a newer one "
                 "closes that peer's oldest")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  app.add_option("--event-program", o.event_program,
                 "an absolute path: run it for every warning or critical event as PROGRAM KIND "
                 "DG [PD], with GRAID_EVENT_* in its environment (as mdadm --monitor --program; "
                 "docs/monitoring.md)");
  app.add_option("--event-program-timeout", o.event_program_timeout_s,
                 "seconds an alert hook may run before it is killed with its process group")
      ->check(CLI::Range(1u, 3600u))
      ->capture_default_str();
  app.add_option("--metrics-listen", o.metrics_listen,
                 "ADDR:PORT: serve Prometheus metrics at http://ADDR:PORT/metrics (off by "
                 "default; bind loopback or a management network: no TLS, no authentication)");
  app.add_option("--health-interval", o.health_interval_s,
                 "seconds between reads of each NVMe drive's SMART / health log (as smartd); 0: "
                 "none")
      ->check(CLI::Range(0u, 86400u * 7))
      ->capture_default_str();
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
  app.set_version_flag("--version", std::string("graidd ") + GRAID_VERSION);
  return made;
}

}  // namespace graid::daemon
