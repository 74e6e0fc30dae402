#include "status_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "cli_parse.h"
#include "render_table.h"

namespace graid::cli {

namespace {

using nlohmann::json;

std::string text_of(const json& object, const char* key) {
  if (!object.is_object()) return "";
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

double number_of(const json& object, const char* key, double fallback = -1) {
  if (!object.is_object()) return fallback;
  const auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}

// A non-negative integer field (an id), or nullopt.
std::optional<std::uint64_t> id_of(const json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<std::uint64_t>();
  const auto v = it->get<std::int64_t>();
  if (v < 0) return std::nullopt;
  return static_cast<std::uint64_t>(v);
}

std::int64_t whole(const json& object, const char* key) {
  return static_cast<std::int64_t>(number_of(object, key, 0));
}

// "42.1 %, 80.0 MB/s, 4 min 12 s left" from a job object (what it has of those).
std::string progress_text(const json& job) {
  std::vector<std::string> parts;
  if (const double p = number_of(job, "percent"); p >= 0)
    parts.push_back(fmt::format("{:.1f} %", p));
  if (const double r = number_of(job, "bytes_per_second"); r > 0)
    parts.push_back(fmt::format("{:.1f} MB/s", r / 1e6));
  if (const double eta = number_of(job, "eta_seconds"); eta >= 0)
    parts.push_back(duration_text(eta) + " left");
  std::string out;
  for (const auto& p : parts)
    out += (out.empty() ? "" : ", ") + p;
  return out;
}

// Role members whose state is not `active`: what keeps the DG from being optimal.
bool member_out_of_sync(const std::string& state) {
  return state == "failed" || state == "removed" || state == "stale" || state == "rebuilding";
}

}  // namespace

const char* status_name(int code) {
  switch (code) {
    case kStatusOptimal:
      return "optimal";
    case kStatusDegraded:
      return "degraded";
    case kStatusFailed:
      return "failed";
    default:
      return "unknown";
  }
}

int dg_status_code(const json& dg) {
  const std::string state = text_of(dg, "state");
  if (state == "failed" || state == "offline") return kStatusFailed;
  if (state == "degraded" || state == "rebuilding") return kStatusDegraded;
  if (!array_field(dg, "lost_ranges").empty()) return kStatusDegraded;
  const double roles = number_of(dg, "member_count", 0);
  for (const json& m : array_field(dg, "members"))
    if (number_of(m, "slot") < roles && member_out_of_sync(text_of(m, "state")))
      return kStatusDegraded;
  return kStatusOptimal;
}

StatusReport build_status(const json& dgs, const json& pds) {
  std::map<std::uint64_t, const json*> pd_by_id;
  if (pds.is_array())
    for (const json& pd : pds)
      if (const auto id = id_of(pd, "pd_id")) pd_by_id[*id] = &pd;
  StatusReport report;
  for (const json& dg : dgs.is_array() ? dgs : json::array()) {
    DgStatus s;
    s.dg = dg;
    s.code = dg_status_code(dg);
    const std::string state = text_of(dg, "state");
    if ((state == "failed" || state == "offline") && !text_of(dg, "message").empty())
      s.problems.push_back(text_of(dg, "message"));
    const double roles = number_of(dg, "member_count", 0);
    for (const json& m : array_field(dg, "members")) {
      const std::string ms = text_of(m, "state");
      if (number_of(m, "slot") >= roles || !member_out_of_sync(ms)) continue;
      std::string who;
      std::string why;
      if (const auto pd_id = id_of(m, "pd_id")) {
        const std::uint64_t id = *pd_id;
        who = fmt::format(" (pd {}{})", id,
                          text_of(m, "path").empty() ? "" : ", " + text_of(m, "path"));
        if (auto it = pd_by_id.find(id); it != pd_by_id.end())
          why = text_of(*it->second, "message");
      } else if (ms == "removed" || ms == "failed") {
        who = " (no drive)";
      }
      std::string line = fmt::format("slot {}{}: {}", whole(m, "slot"), who, ms);
      if (ms == "rebuilding" && dg.contains("rebuild")) {
        if (const std::string p = progress_text(dg["rebuild"]); !p.empty()) line += ", " + p;
      }
      if (!why.empty()) line += ": " + why;
      s.problems.push_back(std::move(line));
    }
    if (dg.contains("rebuild") && !text_of(dg["rebuild"], "error").empty())
      s.problems.push_back("the last rebuild failed: " + text_of(dg["rebuild"], "error"));
    const json& lost = array_field(dg, "lost_ranges");
    if (!lost.empty()) {
      std::uint64_t bytes = 0;
      for (const json& r : lost)
        bytes += static_cast<std::uint64_t>(std::max(0.0, number_of(r, "bytes", 0)));
      s.problems.push_back(
          fmt::format("{} lost range(s), {} in all: reads there fail until "
                      "the data is written again",
                      lost.size(), format_size(bytes)));
    }
    for (const auto& [key, name] : {std::pair{"init", "initialising"},
                                    {"resync", "re-syncing"},
                                    {"check", "checking"},
                                    {"replace", "hot replace"}}) {
      if (!dg.contains(key) || !dg[key].is_object()) continue;
      const json& job = dg[key];
      if (job.contains("running") && job["running"].is_boolean() && !job["running"].get<bool>())
        continue;
      std::string line = name;
      if (std::string_view(key) == "replace")
        line += fmt::format(" of slot {}", whole(job, "slot"));
      if (const std::string p = progress_text(job); !p.empty()) line += ": " + p;
      s.jobs.push_back(std::move(line));
    }
    report.exit_code = std::max(report.exit_code, s.code);
    report.dgs.push_back(std::move(s));
  }
  return report;
}

std::string render_status(const StatusReport& report) {
  std::string out;
  if (report.dgs.empty()) out += "no drive groups\n";
  for (const DgStatus& s : report.dgs) {
    const json& dg = s.dg;
    const std::string name = text_of(dg, "name");
    out += fmt::format("dg {}{} {}, {} members: {}", whole(dg, "dg_id"),
                       name.empty() ? "" : " (" + name + ")", text_of(dg, "level"),
                       whole(dg, "member_count"), text_of(dg, "state"));
    if (s.code != kStatusOptimal && text_of(dg, "state") != status_name(s.code))
      out += fmt::format(" [{}]", status_name(s.code));
    out += '\n';
    for (const auto& p : s.problems)
      out += "  " + p + "\n";
    for (const auto& j : s.jobs)
      out += "  " + j + "\n";
  }
  out += fmt::format("status: {} (exit {})\n", status_name(report.exit_code), report.exit_code);
  return out;
}

json status_to_json(const StatusReport& report) {
  json dgs = json::array();
  for (const DgStatus& s : report.dgs) {
    dgs.push_back({{"dg_id", s.dg.value("dg_id", json(nullptr))},
                   {"name", s.dg.value("name", json(""))},
                   {"level", s.dg.value("level", json(""))},
                   {"state", s.dg.value("state", json(""))},
                   {"status", status_name(s.code)},
                   {"problems", s.problems},
                   {"jobs", s.jobs}});
  }
  return {{"status", status_name(report.exit_code)},
          {"exit_code", report.exit_code},
          {"dgs", std::move(dgs)}};
}

}  // namespace graid::cli
