#include "graidd/metrics_text.h"

#include <fmt/format.h>

#include <initializer_list>
#include <map>
#include <utility>

namespace graid::daemon {

namespace {

using nlohmann::json;
using Labels = std::initializer_list<std::pair<std::string_view, std::string>>;

// The states `describe dg` and `list pd` give (docs/cli.md): one series each, 1 for the current.
constexpr std::array kDgStates{"optimal",   "degraded", "rebuilding", "initialising", "resyncing",
                               "replacing", "checking", "failed",     "offline"};
constexpr std::array kMemberStates{"active",  "failed", "spare",      "rebuilding",
                                   "removed", "stale",  "replacement"};
constexpr std::array kPdStates{"free",  "member",     "spare",     "offline",  "failed",
                               "stale", "rebuilding", "replacing", "replaced", "missing"};
// describe dg's job objects, by the `kind` label they get.
constexpr std::array<std::pair<const char*, const char*>, 5> kJobs{{{"rebuild", "rebuild"},
                                                                    {"init", "init"},
                                                                    {"resync", "resync"},
                                                                    {"check", "check"},
                                                                    {"replace", "replace"}}};
constexpr std::size_t kLatencyBuckets = 32;

std::string text(const json& o, const char* key) {
  if (!o.is_object()) return "";
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

double number(const json& o, const char* key, double fallback = 0) {
  if (!o.is_object()) return fallback;
  const auto it = o.find(key);
  return it != o.end() && it->is_number() ? it->get<double>() : fallback;
}

// A count as JSON holds it (unsigned from the wire, signed from a literal); 0 otherwise.
std::uint64_t count_value(const json& v) {
  if (!v.is_number_integer()) return 0;
  return v.is_number_unsigned()
             ? v.get<std::uint64_t>()
             : static_cast<std::uint64_t>(std::max<std::int64_t>(v.get<std::int64_t>(), 0));
}

std::uint64_t count(const json& o, const char* key) {
  if (!o.is_object()) return 0;
  const auto it = o.find(key);
  return it == o.end() ? 0 : count_value(*it);
}

const json& array_of(const json& o, const char* key) {
  static const json kEmpty = json::array();
  if (!o.is_object()) return kEmpty;
  const auto it = o.find(key);
  return it != o.end() && it->is_array() ? *it : kEmpty;
}

const json& list(const json& j) {
  static const json kEmpty = json::array();
  return j.is_array() ? j : kEmpty;
}

class Page {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(std::string_view name, Labels labels, double value) {
    start(name, labels);
    out_ += fmt::format(" {}\n", value);
  }
  void sample(std::string_view name, Labels labels, std::uint64_t value) {
    start(name, labels);
    out_ += fmt::format(" {}\n", value);
  }
  std::string take() { return std::move(out_); }

 private:
  void start(std::string_view name, Labels labels) {
    out_ += name;
    if (labels.size() == 0) return;
    out_ += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      out_ += fmt::format("{}{}=\"{}\"", first ? "" : ",", k, escape_label(v));
      first = false;
    }
    out_ += '}';
  }
  std::string out_;
};

// A latency histogram in graid's buckets (bucket 0: under 1 us; bucket i: [2^(i-1), 2^i) us) as
// Prometheus's cumulative `le` buckets in seconds.
void histogram(Page& page, std::string_view name, const std::string& dg, const std::string& vd,
               const json& buckets, std::uint64_t sum_us) {
  std::uint64_t cumulative = 0;
  const std::string bucket = std::string(name) + "_bucket";
  for (std::size_t i = 0; i < kLatencyBuckets; ++i) {
    if (buckets.is_array() && i < buckets.size()) cumulative += count_value(buckets[i]);
    const double le = static_cast<double>(std::uint64_t{1} << i) / 1e6;
    page.sample(bucket, {{"dg", dg}, {"vd", vd}, {"le", fmt::format("{}", le)}}, cumulative);
  }
  page.sample(bucket, {{"dg", dg}, {"vd", vd}, {"le", "+Inf"}}, cumulative);
  page.sample(std::string(name) + "_sum", {{"dg", dg}, {"vd", vd}},
              static_cast<double>(sum_us) / 1e6);
  page.sample(std::string(name) + "_count", {{"dg", dg}, {"vd", vd}}, cumulative);
}

void daemon_families(Page& p, const MetricsSnapshot& s) {
  const json& cx = s.controller;
  p.family("graid_info", "gauge", "graidd's version and parity backend (always 1)");
  p.sample("graid_info",
           {{"version", text(cx, "version")},
            {"parity", cx.contains("parity") ? text(cx["parity"], "backend") : ""}},
           std::uint64_t{1});
  p.family("graid_events_total", "counter", "Events logged since graidd started, by severity");
  const char* severities[] = {"info", "warning", "critical"};
  for (std::size_t i = 0; i < 3; ++i)
    p.sample("graid_events_total", {{"severity", severities[i]}}, s.events[i]);
  p.family("graid_events_last_seq", "gauge", "The sequence number of the newest event");
  p.sample("graid_events_last_seq", {}, s.last_seq);
  if (cx.contains("event_hooks") && cx["event_hooks"].is_object()) {
    const json& h = cx["event_hooks"];
    p.family("graid_event_hooks_total", "counter",
             "Alert hook runs by result (ran: exited 0; lost: the queue was full)");
    for (const char* r : {"ran", "failed", "timed_out", "lost"})
      p.sample("graid_event_hooks_total", {{"result", r}}, count(h, r));
  }
  p.family("graid_parity_batches_total", "counter", "Parity batches computed");
  p.sample("graid_parity_batches_total", {}, count(cx, "batches"));
  p.family("graid_parity_fallbacks_total", "counter",
           "Parity batches redone on the CPU after the GPU failed them");
  p.sample("graid_parity_fallbacks_total", {}, count(cx, "fallbacks"));
  p.family("graid_ublk_held_devices", "gauge",
           "ublk devices of this graidd's that it holds without serving (docs/ublk.md)");
  p.sample("graid_ublk_held_devices", {},
           static_cast<std::uint64_t>(array_of(cx, "held_ublk").size()));
}

void dg_families(Page& p, const MetricsSnapshot& s) {
  const json& dgs = list(s.dgs);
  p.family("graid_dg_info", "gauge", "A drive group (always 1)");
  for (const json& dg : dgs)
    p.sample("graid_dg_info",
             {{"dg", text(dg, "dg_id")},
              {"name", text(dg, "name")},
              {"level", text(dg, "level")},
              {"uuid", text(dg, "uuid")}},
             std::uint64_t{1});
  p.family("graid_dg_state", "gauge", "A drive group's state: 1 for the current one, else 0");
  for (const json& dg : dgs) {
    const std::string state = text(dg, "state");
    for (const char* st : kDgStates)
      p.sample("graid_dg_state",
               {{"dg", text(dg, "dg_id")}, {"name", text(dg, "name")}, {"state", st}},
               std::uint64_t{state == st ? 1u : 0u});
  }
  p.family("graid_dg_members", "gauge", "A drive group's member slots by state");
  for (const json& dg : dgs) {
    std::map<std::string, std::uint64_t> by_state;
    for (const json& m : array_of(dg, "members"))
      ++by_state[text(m, "state")];
    for (const char* st : kMemberStates)
      p.sample("graid_dg_members", {{"dg", text(dg, "dg_id")}, {"state", st}}, by_state[st]);
  }
  p.family("graid_dg_capacity_bytes", "gauge", "A drive group's data capacity");
  for (const json& dg : dgs)
    p.sample("graid_dg_capacity_bytes", {{"dg", text(dg, "dg_id")}}, count(dg, "capacity"));
  p.family("graid_dg_free_bytes", "gauge", "A drive group's capacity in no VD");
  for (const json& dg : dgs)
    p.sample("graid_dg_free_bytes", {{"dg", text(dg, "dg_id")}}, count(dg, "free"));
  p.family("graid_dg_lost_ranges", "gauge",
           "Ranges whose data was lost: reads fail there until rewritten");
  for (const json& dg : dgs)
    p.sample("graid_dg_lost_ranges", {{"dg", text(dg, "dg_id")}},
             static_cast<std::uint64_t>(array_of(dg, "lost_ranges").size()));
  p.family("graid_dg_lost_bytes", "gauge", "Bytes in the lost ranges");
  for (const json& dg : dgs) {
    std::uint64_t bytes = 0;
    for (const json& r : array_of(dg, "lost_ranges"))
      bytes += count(r, "bytes");
    p.sample("graid_dg_lost_bytes", {{"dg", text(dg, "dg_id")}}, bytes);
  }
  // Jobs: only those describe dg shows (a pending or running one).
  auto jobs = [&](const char* name, const char* type, const char* help, auto value) {
    p.family(name, type, help);
    for (const json& dg : dgs)
      for (const auto& [key, kind] : kJobs)
        if (dg.contains(key) && dg[key].is_object() && !dg[key].contains("error"))
          value(name, text(dg, "dg_id"), kind, dg[key]);
  };
  jobs("graid_job_running", "gauge", "1 while a background job runs, 0 while it is pending",
       [&](const char* n, const std::string& dg, const char* kind, const json& j) {
         const bool running =
             !j.contains("running") || (j["running"].is_boolean() && j["running"].get<bool>());
         p.sample(n, {{"dg", dg}, {"kind", kind}}, std::uint64_t{running ? 1u : 0u});
       });
  jobs("graid_job_progress_ratio", "gauge", "How far a background job is, 0 to 1",
       [&](const char* n, const std::string& dg, const char* kind, const json& j) {
         if (j.contains("percent"))
           p.sample(n, {{"dg", dg}, {"kind", kind}}, number(j, "percent") / 100.0);
       });
  jobs("graid_job_speed_bytes_per_second", "gauge", "A background job's speed",
       [&](const char* n, const std::string& dg, const char* kind, const json& j) {
         if (j.contains("bytes_per_second"))
           p.sample(n, {{"dg", dg}, {"kind", kind}}, number(j, "bytes_per_second"));
       });
  jobs("graid_job_eta_seconds", "gauge", "A background job's time left at its speed",
       [&](const char* n, const std::string& dg, const char* kind, const json& j) {
         if (j.contains("eta_seconds") && j["eta_seconds"].is_number())
           p.sample(n, {{"dg", dg}, {"kind", kind}}, number(j, "eta_seconds"));
       });

  const json& stat_dgs = array_of(s.stats, "dgs");
  p.family("graid_dg_degraded_reads_total", "counter",
           "Strip reads served by reconstruction from the other members");
  for (const json& d : stat_dgs)
    p.sample("graid_dg_degraded_reads_total", {{"dg", text(d, "dg_id")}},
             count(d, "degraded_reads"));
  p.family("graid_dg_write_plans_total", "counter",
           "Row extents written, by the plan that wrote them (docs/stripe-engine.md)");
  for (const json& d : stat_dgs)
    for (const char* plan :
         {"full_stripe", "reconstruct_write", "read_modify_write", "degraded_write"})
      p.sample("graid_dg_write_plans_total", {{"dg", text(d, "dg_id")}, {"plan", plan}},
               d.contains("write_plans") ? count(d["write_plans"], plan) : 0);

  // Members' I/O, by the PD in each slot.
  auto member_rows = [&](const char* name, const char* type, const char* help, auto each) {
    p.family(name, type, help);
    for (const json& d : stat_dgs)
      for (const json& m : array_of(d, "members"))
        each(name, text(d, "dg_id"), text(m, "slot"), text(m, "pd_id"), m);
  };
  member_rows("graid_pd_io_total", "counter", "I/Os sent to a member, by operation",
              [&](const char* n, const std::string& dg, const std::string& slot,
                  const std::string& pd, const json& m) {
                for (const auto& [op, key] : {std::pair{"read", "reads"},
                                              {"write", "writes"},
                                              {"flush", "flushes"},
                                              {"discard", "discards"}})
                  p.sample(n, {{"dg", dg}, {"slot", slot}, {"pd", pd}, {"op", op}}, count(m, key));
              });
  member_rows("graid_pd_io_bytes_total", "counter", "Bytes a member read and wrote",
              [&](const char* n, const std::string& dg, const std::string& slot,
                  const std::string& pd, const json& m) {
                p.sample(n, {{"dg", dg}, {"slot", slot}, {"pd", pd}, {"op", "read"}},
                         count(m, "read_bytes"));
                p.sample(n, {{"dg", dg}, {"slot", slot}, {"pd", pd}, {"op", "write"}},
                         count(m, "write_bytes"));
              });
  member_rows(
      "graid_pd_errors_total", "counter", "I/O errors of a member, by class",
      [&](const char* n, const std::string& dg, const std::string& slot, const std::string& pd,
          const json& m) {
        for (const auto& [cls, key] : {std::pair{"read", "read_errors"},
                                       {"write", "write_errors"},
                                       {"flush", "flush_errors"},
                                       {"discard", "discard_errors"}})
          p.sample(n, {{"dg", dg}, {"slot", slot}, {"pd", pd}, {"class", cls}}, count(m, key));
      });
}

void vd_families(Page& p, const MetricsSnapshot& s) {
  p.family("graid_vd_size_bytes", "gauge", "A virtual drive's size");
  for (const json& dg : list(s.dgs))
    for (const json& vd : array_of(dg, "vds"))
      p.sample("graid_vd_size_bytes",
               {{"dg", text(dg, "dg_id")}, {"vd", text(vd, "vd_id")}, {"name", text(vd, "name")}},
               count(vd, "size"));
  const json& vds = array_of(s.stats, "vds");
  // Requests as each export counted them: NBD's counters and the ublk device's.
  auto per_export = [&](const json& v, auto each) {
    each("nbd", v);
    if (v.contains("ublk") && v["ublk"].is_object()) each("ublk", v["ublk"]);
  };
  p.family("graid_vd_requests_total", "counter", "Requests a VD's exports served, by operation");
  for (const json& v : vds)
    per_export(v, [&](const char* exp, const json& c) {
      for (const auto& [op, key] : {std::pair{"read", "reads"},
                                    {"write", "writes"},
                                    {"flush", "flushes"},
                                    {"discard", "discards"},
                                    {"write_zeroes", "write_zeroes"}})
        if (c.contains(key))
          p.sample(
              "graid_vd_requests_total",
              {{"dg", text(v, "dg_id")}, {"vd", text(v, "vd_id")}, {"export", exp}, {"op", op}},
              count(c, key));
    });
  p.family("graid_vd_read_bytes_total", "counter", "Bytes a VD's exports read");
  for (const json& v : vds)
    per_export(v, [&](const char* exp, const json& c) {
      p.sample("graid_vd_read_bytes_total",
               {{"dg", text(v, "dg_id")}, {"vd", text(v, "vd_id")}, {"export", exp}},
               count(c, "read_bytes"));
    });
  p.family("graid_vd_written_bytes_total", "counter", "Bytes a VD's exports wrote");
  for (const json& v : vds)
    per_export(v, [&](const char* exp, const json& c) {
      p.sample("graid_vd_written_bytes_total",
               {{"dg", text(v, "dg_id")}, {"vd", text(v, "vd_id")}, {"export", exp}},
               count(c, "write_bytes"));
    });
  p.family("graid_vd_errors_total", "counter", "Requests a VD's exports answered with an error");
  for (const json& v : vds)
    per_export(v, [&](const char* exp, const json& c) {
      p.sample("graid_vd_errors_total",
               {{"dg", text(v, "dg_id")}, {"vd", text(v, "vd_id")}, {"export", exp}},
               count(c, "errors"));
    });
  p.family("graid_vd_request_latency_seconds", "histogram",
           "Latency of a VD's NBD requests, from the request to its answer");
  for (const json& v : vds)
    histogram(p, "graid_vd_request_latency_seconds", text(v, "dg_id"), text(v, "vd_id"),
              v.contains("latency_us_buckets") ? v["latency_us_buckets"] : json::array(),
              count(v, "latency_us_sum"));
}

void pd_families(Page& p, const MetricsSnapshot& s) {
  const json& pds = list(s.pds);
  p.family("graid_pd_info", "gauge", "A physical drive (always 1)");
  for (const json& pd : pds)
    p.sample("graid_pd_info",
             {{"pd", text(pd, "pd_id")},
              {"path", text(pd, "path")},
              {"kind", text(pd, "kind")},
              {"model", text(pd, "model")},
              {"serial", text(pd, "serial")}},
             std::uint64_t{1});
  p.family("graid_pd_state", "gauge", "A physical drive's state: 1 for the current one, else 0");
  for (const json& pd : pds) {
    const std::string state = text(pd, "state");
    for (const char* st : kPdStates)
      p.sample("graid_pd_state", {{"pd", text(pd, "pd_id")}, {"state", st}},
               std::uint64_t{state == st ? 1u : 0u});
  }
  p.family("graid_pd_size_bytes", "gauge", "A physical drive's size");
  for (const json& pd : pds)
    p.sample("graid_pd_size_bytes", {{"pd", text(pd, "pd_id")}}, count(pd, "size"));

  // Drive health (NVMe SMART / Health Information log), where graidd could read it.
  auto health_of = [](const json& pd) -> const json* {
    if (!pd.is_object() || !pd.contains("health") || !pd["health"].is_object()) return nullptr;
    const json& h = pd["health"];
    return h.value("available", false) ? &h : nullptr;
  };
  p.family("graid_pd_health_available", "gauge",
           "1 where graidd reads the drive's NVMe health log, else 0");
  for (const json& pd : pds)
    p.sample("graid_pd_health_available", {{"pd", text(pd, "pd_id")}},
             std::uint64_t{health_of(pd) != nullptr ? 1u : 0u});
  struct HealthSeries {
    const char* name;
    const char* type;
    const char* help;
    const char* key;
    double scale;
  };
  for (const HealthSeries& f : {
           HealthSeries{"graid_pd_health_critical_warning", "gauge",
                        "The NVMe Critical Warning bits (0: none; docs/monitoring.md)",
                        "critical_warning", 1},
           HealthSeries{"graid_pd_health_temperature_celsius", "gauge",
                        "The drive's composite temperature", "temperature_celsius", 1},
           HealthSeries{"graid_pd_health_available_spare_ratio", "gauge",
                        "Spare capacity left, 0 to 1", "available_spare", 0.01},
           HealthSeries{"graid_pd_health_available_spare_threshold_ratio", "gauge",
                        "The spare level below which the drive warns", "available_spare_threshold",
                        0.01},
           HealthSeries{"graid_pd_health_used_ratio", "gauge",
                        "Of the drive's rated endurance, used (may exceed 1)", "percentage_used",
                        0.01},
           HealthSeries{"graid_pd_health_media_errors_total", "counter",
                        "Media and data integrity errors the drive counted", "media_errors", 1},
           HealthSeries{"graid_pd_health_unsafe_shutdowns_total", "counter",
                        "Unsafe shutdowns the drive counted", "unsafe_shutdowns", 1},
           HealthSeries{"graid_pd_health_error_log_entries_total", "counter",
                        "Error information log entries", "error_log_entries", 1},
           HealthSeries{"graid_pd_health_power_on_seconds_total", "counter",
                        "Power-on time (counted by the drive in hours)", "power_on_hours", 3600},
       }) {
    p.family(f.name, f.type, f.help);
    for (const json& pd : pds)
      if (const json* h = health_of(pd))
        p.sample(f.name, {{"pd", text(pd, "pd_id")}}, number(*h, f.key) * f.scale);
  }
}

}  // namespace

std::string escape_label(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string render_metrics(const MetricsSnapshot& s) {
  Page page;
  daemon_families(page, s);
  dg_families(page, s);
  vd_families(page, s);
  pd_families(page, s);
  return page.take();
}

}  // namespace graid::daemon
