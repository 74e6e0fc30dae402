#include "graidd/nbd_exports.h"

#include <charconv>
#include <chrono>
#include <thread>

#include "nbd/nbd_tls.h"

namespace graid::daemon {

Result<NbdAddress> parse_nbd_address(std::string_view text) {
  NbdAddress a;
  if (text.starts_with("unix:")) {
    a.path = std::string(text.substr(5));
    if (a.path.empty() || a.path[0] != '/')
      return make_error(Errc::kInvalidArgument,
                        "nbd address \"{}\": a unix socket needs an absolute path", text);
    if (a.path.size() >= 108)
      return make_error(Errc::kInvalidArgument, "nbd address \"{}\": the path is too long", text);
    return a;
  }
  if (!text.starts_with("tcp:"))
    return make_error(Errc::kInvalidArgument,
                      "nbd address \"{}\": expected unix:PATH or tcp:ADDR:PORT", text);
  a.tcp = true;
  std::string_view rest = text.substr(4);
  std::string_view port_text = rest;
  if (!rest.empty() && rest[0] == '[') {
    const auto close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      return make_error(Errc::kInvalidArgument, "nbd address \"{}\": expected tcp:[IPV6]:PORT",
                        text);
    a.host = std::string(rest.substr(1, close - 1));
    port_text = rest.substr(close + 2);
  } else if (const auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    a.host = std::string(rest.substr(0, colon));
    port_text = rest.substr(colon + 1);
  }
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535)
    return make_error(Errc::kInvalidArgument, "nbd address \"{}\": bad port \"{}\"", text,
                      port_text);
  a.port = static_cast<std::uint16_t>(port);
  if (a.host.empty()) a.host = "127.0.0.1";
  return a;
}

Status check_nbd_access(const NbdAccess& access) {
  auto addr = parse_nbd_address(access.address);
  if (!addr.is_ok()) return addr.status();
  if (access.insecure_tcp && !access.tls_psk.empty())
    return make_error(Errc::kInvalidArgument, "--insecure-tcp and --tls-psk exclude each other");
  if (access.insecure_tcp && !addr->tcp)
    return make_error(Errc::kInvalidArgument,
                      "--insecure-tcp is for tcp: addresses (a unix socket is mode 0600 already)");
  if (addr->tcp && access.tls_psk.empty() && !access.insecure_tcp)
    return make_error(Errc::kInvalidArgument,
                      "an NBD export over TCP needs TLS: --tls-psk FILE (a PSK file, one "
                      "identity:hexkey per line, as psktool makes it), or --insecure-tcp to "
                      "serve it without any access control, readable and writable by every "
                      "local user and every host that reaches {}",
                      access.address);
  return {};
}

NbdExports::~NbdExports() {
  remove_all();
}

Status NbdExports::add(std::uint32_t dg_id, std::uint32_t vd_id, Array& array, VdHandle handle,
                       const NbdAccess& access, const std::string& name, bool read_only,
                       std::shared_ptr<nbd::NbdExportCounters> counters) {
  const std::string& address = access.address;
  const Key key{dg_id, vd_id};
  if (auto it = exports_.find(key); it != exports_.end())
    return make_error(Errc::kBusy, "vd {} of dg {} is already exported over nbd at {}", vd_id,
                      dg_id, it->second.info.address);
  GRAID_RETURN_IF_ERROR(check_nbd_access(access));
  auto addr = parse_nbd_address(address);
  if (!addr.is_ok()) return addr.status();
  std::shared_ptr<const nbd::TlsPskKeys> keys;
  if (!access.tls_psk.empty()) {
    auto loaded = nbd::TlsPskKeys::load(access.tls_psk);
    if (!loaded.is_ok()) return make_error(Errc::kInvalidArgument, "{}", loaded.status().message());
    keys = std::move(*loaded);
  }
  for (const auto& [k, e] : exports_) {
    auto other = parse_nbd_address(e.info.address);
    if (other.is_ok() && other->tcp == addr->tcp &&
        (addr->tcp ? other->port == addr->port && other->port != 0 && other->host == addr->host
                   : other->path == addr->path))
      return make_error(Errc::kBusy, "{} is already used by the export of vd {} of dg {}", address,
                        k.second, k.first);
  }
  nbd::NbdServerOptions options;
  options.tls = std::move(keys);
  options.handshake_timeout = access.limits.handshake_timeout;
  options.idle_timeout = access.limits.idle_timeout;
  options.io_timeout = access.limits.io_timeout;
  options.max_connections = access.limits.max_clients;
  options.max_handshakes = access.limits.max_handshakes;
  options.max_handshakes_per_peer = access.limits.max_handshakes_per_peer;
  if (addr->tcp) {
    options.tcp = true;
    options.tcp_address = addr->host;
    options.tcp_port = addr->port;
  } else {
    options.unix_path = addr->path;
  }
  std::vector<nbd::NbdExport> specs(1);
  specs[0].name = name;
  specs[0].description = fmt::format("graid dg {} vd {}", dg_id, vd_id);
  specs[0].array = &array;
  specs[0].vd = handle.info();
  const std::uint64_t size = handle.info().size;
  specs[0].handle = std::move(handle);
  specs[0].read_only = read_only;
  specs[0].counters = std::move(counters);

  Entry entry;
  entry.thread = next_thread_++ % threads_.count();
  Status status;
  threads_.call(entry.thread, [&](IoContext& ctx) {
    auto server = nbd::NbdServer::create(ctx, std::move(specs), options);
    if (!server.is_ok()) {
      // Listening failed (no such directory, address in use, ...): the request's problem.
      const Errc code = server.status().code() == Errc::kIoError ? Errc::kInvalidArgument
                                                                 : server.status().code();
      status = make_error(code, "cannot listen at {}: {}", address, server.status().message());
      return;
    }
    entry.server = std::move(*server);
    entry.server->start();
    entry.info.tcp_port = entry.server->tcp_port();
  });
  if (!status) return status;
  entry.info.dg_id = dg_id;
  entry.info.vd_id = vd_id;
  entry.info.address = address;
  entry.info.name = name;
  entry.info.read_only = read_only;
  entry.info.tls_psk = access.tls_psk;
  entry.info.insecure_tcp = access.insecure_tcp;
  entry.info.size = size;
  exports_.emplace(key, std::move(entry));
  return {};
}

void NbdExports::stop_entry(Entry& entry) {
  if (!entry.server) return;
  entry.server->stop();
  // The server finishes its requests and closes its connections on its own thread; poll for that
  // from here (each call is a round trip to the thread, never inside its poll loop).
  for (;;) {
    bool finished = false;
    threads_.call(entry.thread, [&](IoContext&) {
      if (entry.server->finished()) {
        entry.server.reset();
        finished = true;
      }
    });
    if (finished) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

bool NbdExports::remove(std::uint32_t dg_id, std::uint32_t vd_id) {
  auto it = exports_.find(Key{dg_id, vd_id});
  if (it == exports_.end()) return false;
  stop_entry(it->second);
  exports_.erase(it);
  return true;
}

void NbdExports::remove_all() {
  // Ask every server to stop first, so their connections drain in parallel.
  for (auto& [k, e] : exports_)
    if (e.server) e.server->stop();
  for (auto& [k, e] : exports_)
    stop_entry(e);
  exports_.clear();
}

std::optional<NbdExportInfo> NbdExports::find(std::uint32_t dg_id, std::uint32_t vd_id) const {
  auto it = exports_.find(Key{dg_id, vd_id});
  if (it == exports_.end()) return std::nullopt;
  NbdExportInfo info = it->second.info;
  if (it->second.server) {
    threads_.call(it->second.thread, [&](IoContext&) {
      info.connections = static_cast<std::uint32_t>(it->second.server->sessions());
    });
  }
  return info;
}

std::vector<nbd::NbdClientInfo> NbdExports::clients(std::uint32_t dg_id,
                                                    std::uint32_t vd_id) const {
  auto it = exports_.find(Key{dg_id, vd_id});
  if (it == exports_.end() || !it->second.server) return {};
  std::vector<nbd::NbdClientInfo> out;
  threads_.call(it->second.thread, [&](IoContext&) { out = it->second.server->clients(); });
  return out;
}

}  // namespace graid::daemon
