// graidctl's command line: argv in, the request to send (or the local thing to do) out. Pure: no
// I/O, no environment reads (the caller passes $GRAID_SOCKET and the working directory in), so
// every command of docs/cli.md and every refusal is unit-tested without a daemon.
//
// Client-side checks (unknown verb or object, missing or extra arguments, bad sizes and id lists,
// a bad level, strip or edit key, a dg/vd delete without --confirm) are refused here with one
// message shaped "<what is wrong>; <what to do>", printed by the caller after "graidctl: " with
// exit code 2 (kExitUsage). Nothing is sent for them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace graid::cli {

// The socket used when neither --socket nor $GRAID_SOCKET names one.
inline constexpr const char* kDefaultSocket = "/run/graid/graidd.sock";

enum class OutputFormat { kTable, kJson };

// What graidctl does with a command line that parsed.
enum class Action {
  kRequest,       // send `verb object args` once and print its result
  kStats,         // sample `stats {}` twice (or forever with --watch) and print rates
  kWatchDg,       // describe dg --watch: a progress line per sample until no job runs
  kFollowEvents,  // list event --follow: long polls (--wait 30) printing events until SIGINT
  kStatus,        // status: list dg, describe dg each, list pd; exit code by status_view.h
  kExamine,       // examine PATHS: read each drive's metadata locally (examine.h); no daemon
  kHelp,          // print help_text on stdout, exit 0; no daemon needed
  kVersion,       // print graidctl's own version, exit 0; no daemon needed
};

// Which rows `stats` prints. Both flags set: every DG and every VD.
struct StatsSelection {
  bool dgs = true;
  bool vds = true;
  std::vector<std::uint32_t> dg_ids;   // `stats dg IDS`: only these DGs (empty: all)
  std::optional<std::uint32_t> vd_dg;  // `stats vd DG [VDS]`: only VDs of this DG
  std::vector<std::uint32_t> vd_ids;   // ... and of those, only these (empty: all)
};

// One parsed command line.
struct Command {
  Action action = Action::kRequest;
  std::string verb;    // the wire verb ("create", "list", ..., "stats", "version")
  std::string object;  // the wire object ("pd", ...); empty for verbs without one
  nlohmann::json args = nlohmann::json::object();
  OutputFormat format = OutputFormat::kTable;
  std::string socket;
  std::optional<double> watch_s;  // stats --watch SECONDS, describe dg --watch SECONDS
  StatsSelection stats;
  std::string help_text;  // Action::kHelp
};

// What the command line cannot know by itself.
struct Environment {
  std::optional<std::string> graid_socket;  // $GRAID_SOCKET, when set and not empty
  std::string cwd;                          // for making `create pd` paths absolute
};

// parse_command_line()'s answer: a command, or the usage error. `format` is known even when the
// line is refused (best effort: a refused line still asking for --format json gets its error as
// JSON).
struct ParsedCommandLine {
  std::optional<Command> command;
  std::string error;  // "<what is wrong>; <what to do>" when command is empty
  OutputFormat format = OutputFormat::kTable;
};

// Parses graidctl's arguments (argv without argv[0]) into a Command, following docs/cli.md:
// global options (--socket, --format, --version, --help) anywhere on the line, verb and object
// aliases, and the per-command arguments checked and turned into the request's args. Optional
// arguments that were not given are left out of args; flags are always sent as booleans. Never
// throws (CLI11's exceptions are caught inside).
ParsedCommandLine parse_command_line(const std::vector<std::string>& args, const Environment& env);

}  // namespace graid::cli
