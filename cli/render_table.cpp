#include "render_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "cli_parse.h"

namespace graid::cli {

namespace {

using nlohmann::json;

std::string dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Fields of a block printed as sizes.
bool is_size_key(std::string_view key) {
  return key == "size" || key == "capacity" || key == "free" || key == "strip" || key == "start" ||
         key == "previous_size" || key == "bytes" || key == "copied" ||
         (key.ends_with("_bytes") && key != "bytes_per_second");
}

// Fields of a block printed as durations ("uptime_s", "eta_seconds", "metadata_timeout_s").
bool is_duration_key(std::string_view key) {
  return key.ends_with("_s") || key.ends_with("_seconds");
}

// A value (not a field) as table text.
std::string value_text(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    return s.empty() ? "-" : s;
  }
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  return dump(v);
}

// A field's value as table text: rates, ETAs and percentages in human units (the JSON keeps the
// exact numbers), sizes as sizes, the rest as value_text().
std::string field_value_text(const json& object, const std::string& key, const json& v) {
  if (is_size_key(key)) return size_text(object, key);
  if (v.is_number() && !v.is_boolean()) {
    const double d = v.get<double>();
    if (key == "bytes_per_second") return fmt::format("{:.1f} MB/s", d / 1e6);
    if (is_duration_key(key) && d >= 0) return duration_text(d);
    if (key == "percent") return fmt::format("{:.1f} %", d);
    if (v.is_number_float()) return fmt::format("{:.2f}", d);
  }
  return value_text(v);
}

// key: value lines for an object's scalar fields, `first` in that order and then the rest
// alphabetically; nested objects are flattened as parent.child; arrays are left to the caller.
void add_block(TextTable& table, const json& object, const std::vector<std::string>& first,
               const std::string& prefix = "") {
  std::vector<std::string> keys = first;
  for (const auto& [key, value] : object.items()) {
    if (std::find(first.begin(), first.end(), key) == first.end()) keys.push_back(key);
  }
  for (const std::string& key : keys) {
    auto it = object.find(key);
    if (it == object.end() || it->is_array()) continue;
    if (it->is_object()) {
      add_block(table, *it, {}, prefix + key + ".");
      continue;
    }
    table.add_row({prefix + key + ":", field_value_text(object, key, *it)});
  }
}

std::string block(const json& object, const std::vector<std::string>& first) {
  TextTable table({{"", false}, {"", false}});
  add_block(table, object, first);
  std::string text = table.render();
  // Drop the (empty) header line.
  const std::size_t newline = text.find('\n');
  return newline == std::string::npos ? text : text.substr(newline + 1);
}

// The JSON object of the job a state names ("rebuild", "init", "check", "replace", "resync"), or
// null.
const char* job_key(const std::string& state) {
  return state == "rebuilding"     ? "rebuild"
         : state == "checking"     ? "check"
         : state == "initialising" ? "init"
         : state == "replacing"    ? "replace"
         : state == "resyncing"    ? "resync"
                                   : nullptr;
}

// "rebuilding 42% (ETA 1m05s)", "checking 7%", "initialising 3%", or the plain state.
std::string dg_state_text(const json& dg) {
  const std::string state = field_text(dg, "state");
  const char* job = job_key(state);
  if (job == nullptr || !dg.contains(job) || !dg[job].is_object()) return state;
  const json& j = dg[job];
  std::string out = state;
  if (j.contains("percent") && j["percent"].is_number())
    out += fmt::format(" {:.0f}%", j["percent"].get<double>());
  if (j.contains("eta_seconds") && j["eta_seconds"].is_number()) {
    const auto eta = static_cast<std::uint64_t>(j["eta_seconds"].get<double>());
    out += eta >= 60 ? fmt::format(" (ETA {}m{:02}s)", eta / 60, eta % 60)
                     : fmt::format(" (ETA {}s)", eta);
  }
  return out;
}

}  // namespace

const json& array_field(const json& object, std::string_view key) {
  static const json kEmpty = json::array();
  if (!object.is_object()) return kEmpty;
  auto it = object.find(key);
  return it != object.end() && it->is_array() ? *it : kEmpty;
}

bool dg_job_running(const json& dg) {
  return job_key(field_text(dg, "state")) != nullptr;
}

std::string dg_progress_line(const json& dg) {
  const std::string state = field_text(dg, "state");
  std::string out = fmt::format("dg {} {}", field_text(dg, "dg_id"), state);
  const char* job = job_key(state);
  if (job != nullptr && dg.contains(job) && dg[job].is_object()) {
    const json& j = dg[job];
    double percent = 0;
    if (j.contains("percent") && j["percent"].is_number())
      percent = std::clamp(j["percent"].get<double>(), 0.0, 100.0);
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(percent / 100.0 * kWidth);
    out += fmt::format(" [{}{}] {:3.0f}%", std::string(static_cast<std::size_t>(filled), '#'),
                       std::string(static_cast<std::size_t>(kWidth - filled), '.'), percent);
    if (j.contains("bytes_per_second") && j["bytes_per_second"].is_number() &&
        j["bytes_per_second"].get<double>() > 0) {
      out += fmt::format("  {:.1f} MB/s", j["bytes_per_second"].get<double>() / 1e6);
    }
    if (j.contains("eta_seconds") && j["eta_seconds"].is_number()) {
      const auto eta = static_cast<std::uint64_t>(j["eta_seconds"].get<double>());
      out += eta >= 60 ? fmt::format("  ETA {}m{:02}s", eta / 60, eta % 60)
                       : fmt::format("  ETA {}s", eta);
    }
  }
  return out + "\n";
}

namespace {

std::string pd_table(const json& pds) {
  TextTable t({{"ID", true},
               {"PATH"},
               {"STATE"},
               {"DG", true},
               {"SLOT", true},
               {"SIZE", true},
               {"KIND"},
               {"IO"},
               {"MODEL"},
               {"SERIAL"},
               {"MESSAGE"}});
  for (const json& pd : pds) {
    t.add_row({field_text(pd, "pd_id"), field_text(pd, "path"), field_text(pd, "state"),
               field_text(pd, "dg_id"), field_text(pd, "slot"), size_text(pd, "size"),
               field_text(pd, "kind"), field_text(pd, "io_mode"), field_text(pd, "model"),
               field_text(pd, "serial"), field_text(pd, "message")});
  }
  return t.render();
}

std::string dg_table(const json& dgs) {
  TextTable t({{"ID", true},
               {"NAME"},
               {"LEVEL"},
               {"STRIP", true},
               {"MEMBERS", true},
               {"SPARES", true},
               {"STATE"},
               {"CAPACITY", true},
               {"FREE", true},
               {"VDS", true},
               {"MESSAGE"}});
  for (const json& dg : dgs) {
    t.add_row({field_text(dg, "dg_id"), field_text(dg, "name"), field_text(dg, "level"),
               size_text(dg, "strip"), field_text(dg, "member_count"),
               field_text(dg, "spare_count"), dg_state_text(dg), size_text(dg, "capacity"),
               size_text(dg, "free"), field_text(dg, "vd_count"), field_text(dg, "message")});
  }
  return t.render();
}

std::string exports_text(const json& vd) {
  std::vector<std::string> parts;
  for (const json& e : array_field(vd, "exports")) {
    parts.push_back(field_text(e, "address") +
                    (e.is_object() && e.value("read_only", false) == true ? " (ro)" : ""));
  }
  return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, ", "));
}

std::string vd_table(const json& vds) {
  TextTable t({{"DG", true},
               {"VD", true},
               {"NAME"},
               {"START", true},
               {"SIZE", true},
               {"STATE"},
               {"EXPORTS"}});
  for (const json& vd : vds) {
    t.add_row({field_text(vd, "dg_id"), field_text(vd, "vd_id"), field_text(vd, "name"),
               size_text(vd, "start"), size_text(vd, "size"), field_text(vd, "state"),
               exports_text(vd)});
  }
  return t.render();
}

std::string member_table(const json& members) {
  TextTable t({{"SLOT", true}, {"PD", true}, {"PATH"}, {"STATE"}});
  for (const json& m : members) {
    t.add_row({field_text(m, "slot"), field_text(m, "pd_id"), field_text(m, "path"),
               field_text(m, "state")});
  }
  return t.render();
}

std::string export_table(const json& exports) {
  TextTable t({{"KIND"},
               {"ADDRESS"},
               {"NAME"},
               {"READ ONLY"},
               {"ACCESS"},
               {"CONNECTIONS", true},
               {"TCP PORT", true}});
  for (const json& e : exports) {
    t.add_row({field_text(e, "kind"), field_text(e, "address"), field_text(e, "name"),
               field_text(e, "read_only"), field_text(e, "access"), field_text(e, "connections"),
               field_text(e, "tcp_port")});
  }
  return t.render();
}

// ublk devices graidd owns but does not serve (docs/ublk.md, "Owned-device discovery").
std::string held_table(const json& held, bool with_dg) {
  std::vector<TextTable::Column> cols;
  if (with_dg) cols.push_back({"DG", true});
  for (TextTable::Column c : {TextTable::Column{"VD", true}, TextTable::Column{"DEVICE"},
                              TextTable::Column{"STATE"}, TextTable::Column{"WHY"}})
    cols.push_back(c);
  TextTable t(std::move(cols));
  for (const json& h : held) {
    std::vector<std::string> row;
    if (with_dg) row.push_back(field_text(h, "dg_id"));
    for (const char* key : {"vd_id", "device", "state", "reason"})
      row.push_back(field_text(h, key));
    t.add_row(std::move(row));
  }
  return t.render();
}

std::string event_table(const json& events) {
  TextTable t({{"SEQ", true},
               {"TIME"},
               {"SEVERITY"},
               {"KIND"},
               {"DG", true},
               {"PD", true},
               {"VD", true},
               {"MESSAGE"}});
  for (const json& e : events) {
    t.add_row({field_text(e, "seq"), field_text(e, "time"), field_text(e, "severity"),
               field_text(e, "kind"), field_text(e, "dg_id"), field_text(e, "pd_id"),
               field_text(e, "vd_id"), field_text(e, "message")});
  }
  return t.render();
}

// The NVMe SMART / health log of describe pd in a person's units; the JSON keeps the counts.
std::string health_text(const json& h) {
  if (!h.is_object()) return "";
  if (!h.value("available", false))
    return fmt::format("health: not available ({})\n", field_text(h, "reason"));
  auto count = [&](const char* key) -> std::uint64_t {
    auto it = h.find(key);
    return it != h.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
  };
  // Data units are thousands of 512-byte blocks (NVMe base specification, SMART log).
  auto units = [&](const char* key) { return format_size(count(key) * 512'000); };
  TextTable t({{"", false}, {"", false}});
  t.add_row({"  critical warning:", count("critical_warning") == 0
                                        ? std::string("none")
                                        : fmt::format("0x{:02x} {}", count("critical_warning"),
                                                      field_text(h, "critical_warning_text"))});
  t.add_row({"  temperature:", field_text(h, "temperature_celsius") + " °C"});
  t.add_row({"  available spare:", fmt::format("{} % (threshold {} %)", count("available_spare"),
                                               count("available_spare_threshold"))});
  t.add_row({"  used:", fmt::format("{} % of rated endurance", count("percentage_used"))});
  t.add_row({"  media errors:", field_text(h, "media_errors")});
  t.add_row({"  error log entries:", field_text(h, "error_log_entries")});
  t.add_row({"  unsafe shutdowns:", field_text(h, "unsafe_shutdowns")});
  t.add_row({"  power on:",
             fmt::format("{} h, {} power cycles", count("power_on_hours"), count("power_cycles"))});
  t.add_row({"  data read:", units("data_units_read")});
  t.add_row({"  data written:", units("data_units_written")});
  t.add_row({"  read at:",
             field_text(h, "read_at") + " (controller " + field_text(h, "controller") + ")"});
  std::string text = t.render();
  const std::size_t newline = text.find('\n');
  return "health:\n" + (newline == std::string::npos ? text : text.substr(newline + 1));
}

std::string describe_pd(const json& pd) {
  json rest = pd;
  if (rest.is_object()) rest.erase("health");
  return block(rest, {"pd_id", "path", "state", "dg_id", "slot", "size", "logical_block_size",
                      "kind", "io_mode", "model", "serial", "superblock", "message"}) +
         (pd.is_object() && pd.contains("health") ? health_text(pd["health"]) : "");
}

std::string describe_dg(const json& dg) {
  std::string out = block(
      dg, {"dg_id", "name",     "uuid",    "level",       "strip",    "member_count", "spare_count",
           "state", "rebuild",  "replace", "resync",      "init",     "check",        "capacity",
           "free",  "vd_count", "clean",   "init_method", "settings", "journal",      "message"});
  if (dg.contains("members")) out += "\nmembers:\n" + member_table(array_field(dg, "members"));
  if (dg.contains("vds")) out += "\nvds:\n" + vd_table(array_field(dg, "vds"));
  if (!array_field(dg, "held_ublk").empty())
    out += "\nheld ublk devices:\n" + held_table(array_field(dg, "held_ublk"), false);
  return out;
}

std::string describe_vd(const json& vd) {
  std::string out =
      block(vd, {"dg_id", "vd_id", "name", "start", "size", "previous_size", "state"});
  out += "\nexports:\n" + export_table(array_field(vd, "exports"));
  // What each export's users see after edit vd size.
  const json& notes = array_field(vd, "notes");
  if (!notes.empty()) {
    out += "\nnotes:\n";
    for (const json& n : notes)
      out += "  " + value_text(n) + "\n";
  }
  return out;
}

std::string describe_controller(const json& c) {
  std::string out = block(c, {"version", "pid", "uptime_s", "io_threads", "socket", "state_dir",
                              "parity", "batches", "jobs", "fallbacks"});
  if (!array_field(c, "held_ublk").empty())
    out += "\nheld ublk devices:\n" + held_table(array_field(c, "held_ublk"), true);
  return out;
}

std::string ids_text(const json& ids) {
  if (!ids.is_array()) return value_text(ids);
  std::vector<std::string> parts;
  for (const json& id : ids)
    parts.push_back(value_text(id));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string fallback(const json& result) {
  return result.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string fmt_rate(double value, double scale, int decimals) {
  return fmt::format("{:.{}f}", value / scale, decimals);
}

std::string fmt_latency(const std::optional<double>& us) {
  return us ? fmt::format("{:.1f}", *us) : std::string("-");
}

}  // namespace

TextTable::TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

void TextTable::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::render() const {
  std::vector<std::size_t> width(columns_.size(), 0);
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    width[c] = columns_[c].header.size();
    for (const auto& row : rows_)
      width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      if (c > 0) out += "  ";
      const std::size_t pad = width[c] - cells[c].size();
      if (columns_[c].right) out.append(pad, ' ');
      out += cells[c];
      if (!columns_[c].right) out.append(pad, ' ');
    }
    while (!out.empty() && out.back() == ' ')
      out.pop_back();
    return out + "\n";
  };
  std::vector<std::string> headers;
  for (const Column& c : columns_)
    headers.push_back(c.header);
  std::string out = line(headers);
  for (const auto& row : rows_)
    out += line(row);
  return out;
}

std::string event_line(const json& e) {
  std::string where;
  for (const auto& [key, name] : {std::pair{"dg_id", "dg"}, {"vd_id", "vd"}, {"pd_id", "pd"}}) {
    if (e.is_object() && e.contains(key) && !e[key].is_null())
      where += fmt::format(" {} {}", name, field_text(e, key));
  }
  return fmt::format("{} {} {} {}{}: {}\n", field_text(e, "seq"), field_text(e, "time"),
                     field_text(e, "severity"), field_text(e, "kind"), where,
                     field_text(e, "message"));
}

std::string duration_text(double seconds) {
  const auto s = static_cast<std::uint64_t>(std::max(0.0, seconds) + 0.5);
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} min {:02} s", s / 60, s % 60);
  return fmt::format("{} h {:02} min", s / 3600, s % 3600 / 60);
}

std::string field_text(const json& object, std::string_view key) {
  if (!object.is_object()) return "-";
  auto it = object.find(key);
  if (it == object.end()) return "-";
  return value_text(*it);
}

std::string size_text(const json& object, std::string_view key) {
  if (!object.is_object()) return "-";
  auto it = object.find(key);
  const bool count =
      it != object.end() &&
      (it->is_number_unsigned() || (it->is_number_integer() && it->get<std::int64_t>() >= 0));
  if (!count) return field_text(object, key);
  return format_size(it->get<std::uint64_t>());
}

std::string render_result(std::string_view verb, std::string_view object, const json& result) {
  if (verb == "version" && result.is_object()) {
    return fmt::format("graidd {} (control api {})\n", field_text(result, "version"),
                       field_text(result, "api"));
  }
  if (verb == "delete" && result.is_object() && result.contains("deleted")) {
    const json& deleted = result["deleted"];
    std::string out = fmt::format("deleted {} {}\n", object, ids_text(deleted));
    if (auto kept = result.find("not_erased"); kept != result.end() && kept->is_array())
      for (const auto& why : *kept)
        if (why.is_string()) out += fmt::format("  not erased: {}\n", why.get<std::string>());
    return out;
  }
  if (verb == "test" && object == "event" && result.is_object()) {
    return fmt::format("test event {} logged (severity warning: alert hooks run for it)\n",
                       field_text(result, "seq"));
  }
  if (verb == "list") {
    if (object == "event" && result.is_object()) {
      std::string out = event_table(array_field(result, "events"));
      auto dropped = result.find("dropped");
      if (dropped != result.end() && dropped->is_number_unsigned() &&
          dropped->get<std::uint64_t>() > 0) {
        out += fmt::format("({} older events were dropped before these)\n", dump(*dropped));
      }
      return out;
    }
    if (!result.is_array()) return fallback(result);
    if (object == "pd") return pd_table(result);
    if (object == "dg") return dg_table(result);
    if (object == "vd") return vd_table(result);
  }
  if (verb == "create" && object == "pd" && result.is_object()) {
    return pd_table(array_field(result, "pds"));
  }
  if (!result.is_object()) return fallback(result);
  if (object == "pd") return describe_pd(result);
  if (object == "dg" || object == "check" || verb == "replace") return describe_dg(result);
  if (object == "vd") return describe_vd(result);
  if (object == "controller") return describe_controller(result);
  return fallback(result);
}

std::string render_stats(const StatsInterval& interval) {
  TextTable t({{"DG", true},
               {"VD", true},
               {"READ IOPS", true},
               {"WRITE IOPS", true},
               {"READ MB/s", true},
               {"WRITE MB/s", true},
               {"P50 us", true},
               {"P99 us", true}});
  auto add = [&](const RateRow& row) {
    t.add_row({std::to_string(row.dg_id), row.vd_id ? std::to_string(*row.vd_id) : "-",
               fmt_rate(row.read_iops, 1, 0), fmt_rate(row.write_iops, 1, 0),
               fmt_rate(row.read_bps, 1e6, 1), fmt_rate(row.write_bps, 1e6, 1),
               fmt_latency(row.p50_us), fmt_latency(row.p99_us)});
  };
  for (const RateRow& row : interval.dgs)
    add(row);
  for (const RateRow& row : interval.vds)
    add(row);
  return fmt::format("interval {:.2f} s\n", interval.interval_s) + t.render();
}

}  // namespace graid::cli
