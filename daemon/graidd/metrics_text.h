// graidd's metrics in the Prometheus text format (version 0.0.4), from what the control verbs
// answer (describe controller, describe dg, list pd, stats): a pure function, so every series is
// unit-tested against canned answers and Prometheus's own parser. docs/monitoring.md lists the
// series.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace graid::daemon {

struct MetricsSnapshot {
  nlohmann::json controller = nlohmann::json::object();  // describe controller
  nlohmann::json dgs = nlohmann::json::array();          // describe dg, for every DG
  nlohmann::json pds = nlohmann::json::array();          // list pd
  nlohmann::json stats = nlohmann::json::object();       // stats
  std::array<std::uint64_t, 3> events{};  // events added this run: info, warning, critical
  std::uint64_t last_seq = 0;             // the newest event's sequence number
};

// The page: `# HELP` and `# TYPE` then the samples, family by family.
std::string render_metrics(const MetricsSnapshot& s);

// A label value as the text format wants it (backslash, double quote and newline escaped).
std::string escape_label(std::string_view value);

}  // namespace graid::daemon
