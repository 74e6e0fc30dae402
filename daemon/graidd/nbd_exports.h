// The NBD exports graidd serves: one NbdServer per export, each living on one I/O thread (chosen
// round-robin), listening on its own unix socket or TCP address with that one VD (so the empty
// export name, which fio and qemu send, selects it).
//
// Called from the control thread only; servers are created, stopped and destroyed on their I/O
// thread through IoThreads::call.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graid/array.h"
#include "graidd/io_threads.h"
#include "nbd/nbd_server.h"

namespace graid::daemon {

// An NBD listening address as graidctl writes it: "unix:/path" or "tcp:ADDR:PORT" (ADDR an IPv4
// literal or a bracketed IPv6 one, "tcp:[::1]:10809"; "tcp:PORT" listens on loopback).
struct NbdAddress {
  bool tcp = false;
  std::string path;                // unix
  std::string host = "127.0.0.1";  // tcp
  std::uint16_t port = 0;          // tcp
};
Result<NbdAddress> parse_nbd_address(std::string_view text);

// The limits of every NBD server graidd runs (graidd options; docs/nbd.md, "Limits"): what
// NbdServerOptions of the same names say.
struct NbdLimits {
  std::chrono::milliseconds handshake_timeout{10000};
  std::chrono::milliseconds idle_timeout{0};
  std::chrono::milliseconds io_timeout{30000};
  std::uint32_t max_clients = 64;  // NbdServerOptions::max_connections
  std::uint32_t max_handshakes = 16;
  std::uint32_t max_handshakes_per_peer = 8;
};

// How an export is reached and who may use it (export vd --nbd ... [--tls-psk FILE]
// [--insecure-tcp]; docs/nbd.md, "TLS").
struct NbdAccess {
  std::string address;        // unix:PATH or tcp:ADDR:PORT
  std::string tls_psk;        // a PSK file: clients must start TLS with one of its keys
  bool insecure_tcp = false;  // TCP without TLS, asked for explicitly
  NbdLimits limits;           // the server's limits (graidd options)
};
// Refuses what the access does not allow: TCP without TLS unless insecure_tcp, insecure_tcp
// with TLS or with a unix socket. kInvalidArgument saying what to give instead.
Status check_nbd_access(const NbdAccess& access);

struct NbdExportInfo {
  std::uint32_t dg_id = 0, vd_id = 0;
  std::string address;  // as given
  std::string name;
  bool read_only = false;
  std::string tls_psk;  // "" without TLS
  bool insecure_tcp = false;
  std::uint16_t tcp_port = 0;  // the port listened on (when the address asked for port 0)
  // The size clients are told: the VD's when it was exported (NBD has no message for a new
  // size; a VD grown since is served at its new size once exported again).
  std::uint64_t size = 0;
  std::uint32_t connections = 0;
};

class NbdExports {
 public:
  explicit NbdExports(IoThreads& threads) : threads_(threads) {}
  // Stops every export first.
  ~NbdExports();
  NbdExports(const NbdExports&) = delete;
  NbdExports& operator=(const NbdExports&) = delete;

  // Starts serving `handle` (an open VD of `array`) at `address`. kBusy when the VD already has
  // an NBD export or another export listens there; the listener's errors otherwise.
  // Refused as check_nbd_access() says, and when the PSK file cannot be used (nbd_tls.h).
  Status add(std::uint32_t dg_id, std::uint32_t vd_id, Array& array, VdHandle handle,
             const NbdAccess& access, const std::string& name, bool read_only,
             std::shared_ptr<nbd::NbdExportCounters> counters);
  // Stops the VD's export: no new connections, requests in flight are answered, then the
  // connections close and the server goes. False when it had none.
  bool remove(std::uint32_t dg_id, std::uint32_t vd_id);
  void remove_all();

  std::optional<NbdExportInfo> find(std::uint32_t dg_id, std::uint32_t vd_id) const;
  // The clients using the VD's export now (connections past their handshake); none without one.
  std::vector<nbd::NbdClientInfo> clients(std::uint32_t dg_id, std::uint32_t vd_id) const;

 private:
  struct Entry {
    NbdExportInfo info;
    std::uint32_t thread = 0;
    std::unique_ptr<nbd::NbdServer> server;  // created and destroyed on `thread`
  };
  using Key = std::pair<std::uint32_t, std::uint32_t>;
  void stop_entry(Entry& entry);

  IoThreads& threads_;
  std::map<Key, Entry> exports_;
  std::uint32_t next_thread_ = 0;
};

}  // namespace graid::daemon
