// graidctl's command tree: every verb, object and option as a CLI11 App tree, bound into one
// Inputs. parse_command_line (command_line.h) parses with it; the man page (man_page.h) and the
// shell completion (completion.h) walk the same tree, so none of them can drift from the others.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace graid::cli {

// Everything CLI11 writes into. Only the selected leaf's options are filled, so leaves share the
// fields; string options are optional to tell "not given" from "given empty".
struct Inputs {
  std::string socket;
  CLI::Option* socket_option = nullptr;
  std::string format = "table";
  bool version = false;
  std::vector<std::string> words;  // the leaf's positional arguments
  bool force = false;
  bool assume_clean = false;
  bool confirm = false;
  bool read_only = false;
  std::optional<std::string> tls_psk;  // export --tls-psk
  bool insecure_tcp = false;           // export --insecure-tcp
  bool nbd_flag = false;               // unexport --nbd
  bool ublk_flag = false;              // unexport/export/create vd --ublk
  bool no_ublk_flag = false;           // create vd --no-ublk
  bool repair = false;                 // start check --repair
  bool follow = false;                 // list event --follow
  std::optional<std::string> strip, spare, name, size, nbd, since, watch, wait;
};

// One verb/object pair graidctl knows. `usage` is its synopsis without "graidctl".
struct Leaf {
  const char* verb;
  const char* object;  // "" for verbs without an object (stats, version)
  const char* usage;
};

// `graidctl events`: list event under a name of its own, which also takes `events test`.
inline constexpr Leaf kEvents = {"list", "event",
                                 "list event [--since SEQ] [--wait SECONDS | --follow]"};

// "see graidctl VERB OBJECT --help", as refusals end.
std::string see_help(std::string_view verb, std::string_view object);

// The settings `edit dg` takes and their values (docs/cli.md).
inline constexpr std::array<std::string_view, 4> kSpeedKeys = {"rebuild_speed", "init_speed",
                                                               "check_speed", "resync_speed"};
inline constexpr std::array<std::string_view, 4> kSpeedValues = {"low", "normal", "high",
                                                                 "extreme"};
inline constexpr std::array<std::string_view, 3> kJournalValues = {"off", "degraded-only",
                                                                   "always"};

// The CLI11 tree of graidctl, options bound into the Inputs it was made with, and each leaf's
// App (a verb without objects, or a verb's object; `events` too).
struct CommandTree {
  std::unique_ptr<CLI::App> app;
  std::vector<std::pair<const Leaf*, CLI::App*>> leaves;
};
CommandTree make_command_tree(Inputs& in);

// The objects a verb takes, as a person lists them: "pd, dg or vd".
std::string objects_of(std::string_view verb);

}  // namespace graid::cli
