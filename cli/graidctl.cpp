#include "graidctl.h"

#include <signal.h>
#include <time.h>

#include <charconv>
#include <chrono>
#include <csignal>
#include <limits>
#include <optional>
#include <utility>

#include "completion.h"
#include "control/control_protocol.h"
#include "control_client.h"
#include "examine.h"
#include "render_table.h"
#include "stats_view.h"
#include "status_view.h"

#ifndef GRAIDCTL_VERSION
#define GRAIDCTL_VERSION "unknown"
#endif

namespace graid::cli {

namespace {

using nlohmann::json;

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_interrupt(int /*signal*/) {
  g_interrupted = 1;
}

// SIGINT sets g_interrupted instead of killing graidctl, so --watch stops between samples and
// exits 0. No SA_RESTART: a wait in progress returns EINTR and sees the flag.
void catch_interrupt() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  ::sigaction(SIGINT, &action, nullptr);
}

// Sleeps `seconds` unless interrupted; false when interrupted.
bool sleep_unless_interrupted(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(seconds));
  while (g_interrupted == 0) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return true;
    const auto step = std::min<std::chrono::nanoseconds>(left, std::chrono::milliseconds(100));
    timespec ts{static_cast<time_t>(step.count() / 1'000'000'000),
                static_cast<long>(step.count() % 1'000'000'000)};
    ::nanosleep(&ts, nullptr);
  }
  return false;
}

std::string dump(const json& value, int indent) {
  return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

int report(const CallError& error, OutputFormat format, std::ostream& out, std::ostream& err) {
  if (format == OutputFormat::kJson) {
    json doc = {{"error", {{"code", error.code}, {"message", error.message}}}};
    out << dump(doc, 2) << '\n' << std::flush;
  } else {
    err << "graidctl: " << error.message << '\n' << std::flush;
  }
  return error.exit_code;
}

int run_stats(const Command& cmd, std::ostream& out, std::ostream& err) {
  if (cmd.watch_s) catch_interrupt();
  ControlClient client(cmd.socket, kDefaultCallTimeout, &g_interrupted);
  const double period = cmd.watch_s.value_or(1.0);

  CallResult previous = client.call("stats", "", json::object());
  if (auto* e = std::get_if<CallError>(&previous)) {
    if (e->code == "interrupted") return control::kExitOk;
    return report(*e, cmd.format, out, err);
  }
  if (Status st = check_selection(std::get<json>(previous), cmd.stats); !st) {
    const bool missing = st.code() == Errc::kNotFound;
    return report(CallError{missing ? "not_found" : "internal", st.message(),
                            missing ? control::kExitNotFound : control::kExitInternal},
                  cmd.format, out, err);
  }
  for (bool first = true;; first = false) {
    if (!sleep_unless_interrupted(period)) return control::kExitOk;
    CallResult current = client.call("stats", "", json::object());
    if (auto* e = std::get_if<CallError>(&current)) {
      if (e->code == "interrupted") return control::kExitOk;
      return report(*e, cmd.format, out, err);
    }
    auto interval = compute_interval(std::get<json>(previous), std::get<json>(current), cmd.stats);
    if (!interval.is_ok()) {
      return report(CallError{"internal", interval.status().message(), control::kExitInternal},
                    cmd.format, out, err);
    }
    if (cmd.format == OutputFormat::kJson) {
      out << dump(interval_to_json(*interval), cmd.watch_s ? -1 : 2) << '\n';
    } else {
      if (!first) out << '\n';
      out << render_stats(*interval);
    }
    out << std::flush;
    if (!cmd.watch_s) return control::kExitOk;
    previous = std::move(current);
  }
}

// describe dg <id> --watch SECONDS: one progress line (table) or one compact dg object (json)
// per sample, until no job runs (that last sample printed too) or SIGINT (exit 0).
int run_watch_dg(const Command& cmd, std::ostream& out, std::ostream& err) {
  catch_interrupt();
  ControlClient client(cmd.socket, kDefaultCallTimeout, &g_interrupted);
  for (;;) {
    CallResult result = client.call(cmd.verb, cmd.object, cmd.args);
    if (auto* e = std::get_if<CallError>(&result)) {
      if (e->code == "interrupted") return control::kExitOk;
      return report(*e, cmd.format, out, err);
    }
    const json& dg = std::get<json>(result);
    if (cmd.format == OutputFormat::kJson) {
      out << dump(dg, -1) << '\n';
    } else {
      out << dg_progress_line(dg);
    }
    out << std::flush;
    if (!dg_job_running(dg)) return control::kExitOk;
    if (!sleep_unless_interrupted(cmd.watch_s.value_or(1.0))) return control::kExitOk;
  }
}

// list event --follow: long polls of 30 s, each event printed as it comes (a line, or a compact
// JSON object per line), until SIGINT (exit 0). graidd going away is waited out: its sequence
// numbers continue across restarts.
int run_follow_events(const Command& cmd, std::ostream& out, std::ostream& err) {
  catch_interrupt();
  ControlClient client(cmd.socket, kDefaultCallTimeout, &g_interrupted);
  std::optional<std::uint64_t> since;
  if (cmd.args.contains("since")) since = cmd.args["since"].get<std::uint64_t>();
  bool waiting_for_graidd = false;
  while (g_interrupted == 0) {
    json args = json::object();
    // Without --since, the first call only learns where the log stands: new events from there.
    args["since"] = since.value_or(std::numeric_limits<std::uint64_t>::max());
    if (since) args["wait"] = 30;
    CallResult result = client.call("list", "event", args);
    if (auto* e = std::get_if<CallError>(&result)) {
      if (e->code == "interrupted") return control::kExitOk;
      if (e->exit_code != control::kExitUnreachable) return report(*e, cmd.format, out, err);
      if (!waiting_for_graidd)
        err << "graidctl: " << e->message << "; waiting for graidd to come back\n" << std::flush;
      waiting_for_graidd = true;
      if (!sleep_unless_interrupted(1.0)) return control::kExitOk;
      continue;
    }
    if (waiting_for_graidd) err << "graidctl: graidd is back\n" << std::flush;
    waiting_for_graidd = false;
    const json& value = std::get<json>(result);
    const std::uint64_t next = value.value("next_seq", std::uint64_t{1});
    if (!since) {
      since = next - 1;
      continue;
    }
    if (next <= *since) {
      // A log that went back (its files were removed): follow it from its start.
      err << "graidctl: graidd's event log restarted at " << next << "\n" << std::flush;
      since = 0;
      continue;
    }
    if (const std::uint64_t dropped = value.value("dropped", std::uint64_t{0}); dropped > 0)
      err << "graidctl: " << dropped << " events were dropped before these\n" << std::flush;
    for (const json& e : value.value("events", json::array())) {
      if (cmd.format == OutputFormat::kJson) {
        out << dump(e, -1) << '\n';
      } else {
        out << event_line(e);
      }
      since = e.value("seq", *since);
    }
    out << std::flush;
  }
  return control::kExitOk;
}

// status: every DG described, the PDs' reasons, one screen; exits with status_view.h's codes
// (graidd unreachable or failing to answer: 4, "unknown").
int run_status(const Command& cmd, std::ostream& out, std::ostream& err) {
  ControlClient client(cmd.socket);
  auto unknown = [&](const CallError& e) {
    CallError as_unknown = e;
    as_unknown.exit_code = kStatusUnknown;
    return report(as_unknown, cmd.format, out, err);
  };
  CallResult listed = client.call("list", "dg", json::object());
  if (auto* e = std::get_if<CallError>(&listed)) return unknown(*e);
  json dgs = json::array();
  for (const json& dg : std::get<json>(listed)) {
    CallResult described = client.call("describe", "dg", {{"dg_id", dg.value("dg_id", 0)}});
    if (auto* e = std::get_if<CallError>(&described)) {
      if (e->code == "not_found") continue;  // deleted meanwhile
      return unknown(*e);
    }
    dgs.push_back(std::get<json>(described));
  }
  CallResult pds = client.call("list", "pd", json::object());
  if (auto* e = std::get_if<CallError>(&pds)) return unknown(*e);
  const StatusReport status = build_status(dgs, std::get<json>(pds));
  if (cmd.format == OutputFormat::kJson) {
    out << dump(status_to_json(status), 2) << '\n';
  } else {
    out << render_status(status);
  }
  out << std::flush;
  return status.exit_code;
}

// examine PATHS: each drive's metadata, read here (examine.h); exits 0 when every path holds a
// superblock this build reads, 1 otherwise (blank, damaged, newer, unreadable).
int run_examine(const Command& cmd, std::ostream& out) {
  json all = json::array();
  bool ok = true;
  for (const json& path : cmd.args.value("paths", json::array())) {
    json examined = examine_path(path.get<std::string>());
    ok = ok && examined_ok(examined);
    all.push_back(std::move(examined));
  }
  if (cmd.format == OutputFormat::kJson) {
    out << dump(all, 2) << '\n';
  } else {
    for (std::size_t i = 0; i < all.size(); ++i)
      out << (i == 0 ? "" : "\n") << render_examine(all[i]);
  }
  out << std::flush;
  return ok ? control::kExitOk : control::kExitRefused;
}

// __complete INDEX WORDS...: the shell completion's candidates (completion.h), "files" or "words"
// on the first line, the words after it. Ids come from graidd, asked briefly; none when it does
// not answer.
int run_complete(const std::vector<std::string>& args, const Environment& env, std::ostream& out) {
  std::size_t index = 0;
  if (args.size() < 2) return control::kExitUsage;
  const std::string& text = args[1];
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), index);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size())
    return control::kExitUsage;
  const std::vector<std::string> words(args.begin() + 2, args.end());
  std::string socket = env.graid_socket.value_or(kDefaultSocket);
  auto ids = [&socket](const std::string& object, std::optional<std::uint32_t> dg) {
    std::vector<std::string> found;
    ControlClient client(socket, std::chrono::milliseconds(2000));
    CallResult r = client.call("list", object, dg ? json{{"dg_id", *dg}} : json::object());
    const json* list = std::get_if<json>(&r);
    if (list == nullptr || !list->is_array()) return found;
    for (const json& item : *list) {
      auto it = item.find(object + "_id");
      if (it != item.end() && it->is_number_unsigned())
        found.push_back(std::to_string(it->get<std::uint64_t>()));
    }
    return found;
  };
  const Completion c = complete(words, index, ids, &socket);
  out << (c.files ? "files" : "words") << '\n';
  for (const std::string& w : c.candidates)
    out << w << '\n';
  out << std::flush;
  return control::kExitOk;
}

}  // namespace

int run_graidctl(const std::vector<std::string>& args, const Environment& env, std::ostream& out,
                 std::ostream& err) {
  if (!args.empty() && args[0] == "__complete") return run_complete(args, env, out);
  ParsedCommandLine parsed = parse_command_line(args, env);
  if (!parsed.command) {
    return report(CallError{"usage", parsed.error, control::kExitUsage}, parsed.format, out, err);
  }
  const Command& cmd = *parsed.command;
  switch (cmd.action) {
    case Action::kHelp:
      out << cmd.help_text << std::flush;
      return control::kExitOk;
    case Action::kVersion:
      if (cmd.format == OutputFormat::kJson) {
        out << dump(json{{"version", GRAIDCTL_VERSION}}, 2) << '\n' << std::flush;
      } else {
        out << "graidctl " << GRAIDCTL_VERSION << '\n' << std::flush;
      }
      return control::kExitOk;
    case Action::kStats:
      return run_stats(cmd, out, err);
    case Action::kWatchDg:
      return run_watch_dg(cmd, out, err);
    case Action::kFollowEvents:
      return run_follow_events(cmd, out, err);
    case Action::kStatus:
      return run_status(cmd, out, err);
    case Action::kExamine:
      return run_examine(cmd, out);
    case Action::kRequest:
      break;
  }
  ControlClient client(cmd.socket);
  CallResult result = client.call(cmd.verb, cmd.object, cmd.args);
  if (auto* e = std::get_if<CallError>(&result)) return report(*e, cmd.format, out, err);
  const json& value = std::get<json>(result);
  if (cmd.format == OutputFormat::kJson) {
    out << dump(value, 2) << '\n';
  } else {
    out << render_result(cmd.verb, cmd.object, value);
  }
  out << std::flush;
  return control::kExitOk;
}

}  // namespace graid::cli
