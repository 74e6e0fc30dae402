// graidd's command line: its options (docs/daemon.md) as a CLI11 App bound into GraiddOptions.
// graidd parses with it and the graidd(8) man page is written from it (cli/man_page.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace graid::daemon {

struct GraiddOptions {
  std::string socket = "/run/graid/graidd.sock";
  std::string socket_group;
  std::string state_dir = "/var/lib/graid";
  std::string parity = "auto";
  std::uint32_t job_parity_threads = 2;
  std::uint32_t io_threads = 2;
  std::string log_level = "info";
  std::uint32_t ublk_depth = 128;
  std::uint64_t ublk_memory_mib = 256;
  std::string ublk_copy = "auto";
  std::string ublk_affinity = "any";
  std::string ublk_spread = "off";
  std::string ublk_batch = "off";
  std::uint32_t nbd_handshake_timeout_s = 10;
  std::uint32_t nbd_idle_timeout_s = 0;
  std::uint32_t nbd_io_timeout_s = 30;
  std::uint32_t nbd_max_clients = 64;
  std::uint32_t nbd_max_handshakes = 16;
  std::uint32_t nbd_max_handshakes_per_peer = 8;
  std::uint64_t speed_limit_max_mb = 0;
  std::string event_program;
  std::string metrics_listen;
  std::uint32_t health_interval_s = 1800;
  std::uint32_t event_program_timeout_s = 30;
};

// graidd's App: every option with its check and default, and --version.
std::unique_ptr<CLI::App> make_graidd_app(GraiddOptions& o);

}  // namespace graid::daemon
