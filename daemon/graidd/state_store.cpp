#include "graidd/state_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "graidd/durable_file.h"

namespace graid::daemon {
namespace {

using nlohmann::json;

std::string state_path(const std::string& dir) {
  return dir + "/state.json";
}

// Everything that can throw (json access) stays inside; errors come back as a message.
Result<PersistedState> decode(const json& j) {
  PersistedState s;
  if (!j.is_object()) return make_error(Errc::kCorrupt, "not a JSON object");
  if (!j.contains("version") || !j["version"].is_number_integer())
    return make_error(Errc::kCorrupt, "no version");
  if (j["version"].get<int>() > kStateVersion)
    return make_error(Errc::kCorrupt, "version {} is newer than this graidd understands ({})",
                      j["version"].get<int>(), kStateVersion);
  std::set<std::uint32_t> pd_ids, dg_ids;
  std::set<std::string> paths;
  for (const auto& p : j.value("pds", json::array())) {
    PdEntry e;
    e.pd_id = p.at("pd_id").get<std::uint32_t>();
    e.path = p.at("path").get<std::string>();
    e.marker_offline = p.value("marker_offline", false);
    e.global_spare = p.value("global_spare", false);
    if (!pd_ids.insert(e.pd_id).second) return make_error(Errc::kCorrupt, "pd {} twice", e.pd_id);
    if (!paths.insert(e.path).second) return make_error(Errc::kCorrupt, "path {} twice", e.path);
    s.pds.push_back(std::move(e));
  }
  for (const auto& d : j.value("dgs", json::array())) {
    DgEntry e;
    e.dg_id = d.at("dg_id").get<std::uint32_t>();
    e.uuid = d.at("uuid").get<std::string>();
    if (!dg_ids.insert(e.dg_id).second) return make_error(Errc::kCorrupt, "dg {} twice", e.dg_id);
    s.dgs.push_back(std::move(e));
  }
  for (const auto& x : j.value("exports", json::array())) {
    ExportEntry e;
    e.dg_id = x.at("dg_id").get<std::uint32_t>();
    e.vd_id = x.at("vd_id").get<std::uint32_t>();
    e.kind = x.at("kind").get<std::string>();
    e.address = x.at("address").get<std::string>();
    e.name = x.value("name", std::string());
    e.read_only = x.value("read_only", false);
    e.tls_psk = x.value("tls_psk", std::string());
    e.insecure_tcp = x.value("insecure_tcp", false);
    if (e.kind != "nbd" && e.kind != "ublk")
      return make_error(Errc::kCorrupt, "export of dg {} vd {}: unknown kind \"{}\"", e.dg_id,
                        e.vd_id, e.kind);
    if (x.contains("dev_id") && !x.at("dev_id").is_null())
      e.dev_id = x.at("dev_id").get<std::uint32_t>();
    s.exports.push_back(std::move(e));
  }
  return s;
}

}  // namespace

Result<PersistedState> load_state(const std::string& dir) {
  const std::string path = state_path(dir);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return PersistedState{};
    return make_error(Errc::kIoError, "{}: {}", path, std::strerror(errno));
  }
  std::ifstream in(path);
  if (!in) return make_error(Errc::kIoError, "{}: cannot be read", path);
  std::stringstream text;
  text << in.rdbuf();
  try {
    auto decoded = decode(json::parse(text.str()));
    if (!decoded.is_ok())
      return make_error(Errc::kCorrupt, "{}: {}", path, decoded.status().message());
    return decoded;
  } catch (const std::exception& e) {
    return make_error(Errc::kCorrupt, "{}: {}", path, e.what());
  }
}

Status save_state(const std::string& dir, const PersistedState& state) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return make_error(Errc::kIoError, "mkdir {}: {}", dir, std::strerror(errno));
  json j;
  j["version"] = kStateVersion;
  j["pds"] = json::array();
  for (const auto& p : state.pds)
    j["pds"].push_back({{"pd_id", p.pd_id},
                        {"path", p.path},
                        {"marker_offline", p.marker_offline},
                        {"global_spare", p.global_spare}});
  j["dgs"] = json::array();
  for (const auto& d : state.dgs)
    j["dgs"].push_back({{"dg_id", d.dg_id}, {"uuid", d.uuid}});
  j["exports"] = json::array();
  for (const auto& x : state.exports) {
    j["exports"].push_back({{"dg_id", x.dg_id},
                            {"vd_id", x.vd_id},
                            {"kind", x.kind},
                            {"address", x.address},
                            {"name", x.name},
                            {"read_only", x.read_only},
                            {"tls_psk", x.tls_psk},
                            {"insecure_tcp", x.insecure_tcp},
                            {"dev_id", x.dev_id ? json(*x.dev_id) : json(nullptr)}});
  }
  const std::string text = j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  return replace_file(dir, state_path(dir), text);
}

}  // namespace graid::daemon
