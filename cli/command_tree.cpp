#include "command_tree.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "command_line.h"

namespace graid::cli {

std::string see_help(std::string_view verb, std::string_view object) {
  if (verb.empty()) return "see graidctl --help";
  if (object.empty()) return fmt::format("see graidctl {} --help", verb);
  return fmt::format("see graidctl {} {} --help", verb, object);
}

namespace {

constexpr Leaf kLeaves[] = {
    {"create", "pd", "create pd <path>... [--force]"},
    {"create", "dg",
     "create dg <level> <pd ids> [--strip SIZE] [--spare IDS] [--assume-clean] [--name NAME] "
     "[--force]"},
    {"create", "vd", "create vd <dg> [--size SIZE] [--name NAME] [--ublk|--no-ublk]"},
    {"list", "pd", "list pd"},
    {"list", "dg", "list dg"},
    {"list", "vd", "list vd [<dg>]"},
    {"list", "event", "list event [--since SEQ] [--wait SECONDS | --follow]"},
    {"describe", "pd", "describe pd <id>"},
    {"describe", "dg", "describe dg <id> [--watch SECONDS]"},
    {"describe", "vd", "describe vd <dg> <vd>"},
    {"describe", "controller", "describe controller"},
    {"delete", "pd", "delete pd <ids>"},
    {"delete", "dg", "delete dg <id> --confirm [--force]"},
    {"delete", "vd", "delete vd <dg> <vd> --confirm [--force]"},
    {"edit", "dg", "edit dg <id> <key> <value> | edit dg <id> force_online --confirm"},
    {"edit", "pd",
     "edit pd <id> marker offline|online | io_mode passthrough|block | hotspare "
     "<dg>|global|none [--force]"},
    {"edit", "vd", "edit vd <dg> <vd> size SIZE (grows it; shrinking is refused)"},
    {"export", "vd",
     "export vd <dg> <vd> --ublk | --nbd unix:PATH|tcp:ADDR:PORT [--read-only] [--name NAME] "
     "[--tls-psk FILE | --insecure-tcp]"},
    {"unexport", "vd", "unexport vd <dg> <vd> [--nbd] [--ublk] [--force]"},
    {"replace", "pd", "replace pd <dg> <old pd> <new pd> [--force]"},
    {"start", "check", "start check <dg> [--repair]"},
    {"stop", "check", "stop check <dg>"},
    {"stats", "", "stats [dg [<dg ids>] | vd [<dg> [<vd ids>]]] [--watch SECONDS]"},
    {"status", "", "status"},
    {"examine", "", "examine <path>..."},
    {"version", "", "version"},
};

struct VerbSpec {
  const char* name;
  const char* alias;  // "" for none
  const char* help;
};
constexpr VerbSpec kVerbs[] = {
    {"create", "", "create a pd, dg or vd"},
    {"list", "ls", "list pds, dgs, vds or events"},
    {"describe", "desc", "show one pd, dg, vd or the controller in full"},
    {"delete", "del", "delete pds, a dg or a vd"},
    {"edit", "e", "change a dg setting, a pd marker, io_mode or hot spare role, a vd's size"},
    {"export", "", "serve a vd as a ublk block device or over NBD"},
    {"unexport", "", "stop serving a vd"},
    {"replace", "", "put a free pd into a failed member's place (then rebuilt)"},
    {"start", "", "start a dg's consistency check"},
    {"stop", "", "stop a dg's consistency check (it resumes where it stopped)"},
    {"stats", "", "I/O rates and latency of dgs and vds"},
    {"status", "",
     "every dg's health on one screen; exits 0 optimal, 1 degraded, 2 failed, 4 no graidd"},
    {"examine", "",
     "read a drive's graid metadata straight from it, without graidd (read-only; as mdadm "
     "--examine)"},
    {"version", "", "graidd's version and control API"},
};

struct ObjectSpec {
  const char* name;
  const char* alias;
};
constexpr ObjectSpec kObjects[] = {
    {"pd", "physical_drive"}, {"dg", "drive_group"}, {"vd", "virtual_drive"},
    {"controller", "cx"},     {"event", "events"},   {"check", ""},
};

const char* object_alias(std::string_view object) {
  for (const ObjectSpec& o : kObjects) {
    if (object == o.name) return o.alias;
  }
  return "";
}

// The options each leaf takes, bound into `in`.
void add_leaf_options(CLI::App* sub, const Leaf& leaf, Inputs& in) {
  const std::string_view verb = leaf.verb;
  const std::string_view object = leaf.object;
  auto text = [sub](const char* name, std::optional<std::string>& dest, const char* help) {
    sub->add_option_function<std::string>(
        name, [&dest](const std::string& value) { dest = value; }, help);
  };
  sub->add_option("ARGS", in.words, "see the usage line above")->expected(0, 1 << 20);
  if (verb == "create") {
    sub->add_flag("--force", in.force,
                  "take drives that carry graid metadata or other software's signatures "
                  "(filesystems, partition tables, md, LVM...): erases and wipes them");
  }
  if ((verb == "replace" && object == "pd") || (verb == "edit" && object == "pd")) {
    sub->add_flag("--force", in.force,
                  "take a drive that holds other software's signatures (filesystems, partition "
                  "tables, md, LVM...): wipes them");
  }
  if (verb == "create" && object == "dg") {
    text("--strip", in.strip, "strip size, a power of two 4K..1M");
    text("--spare", in.spare, "hot spare pd ids");
    sub->add_flag("--assume-clean", in.assume_clean, "skip the initial parity sync");
  }
  if ((verb == "create" && object != "pd") || verb == "export") {
    text("--name", in.name, "a name");
  }
  if (verb == "create" && object == "vd") {
    text("--size", in.size, "size (default: largest free)");
    sub->add_flag("--ublk", in.ublk_flag, "export it as /dev/ublkbN (default where ublk exists)");
    sub->add_flag("--no-ublk", in.no_ublk_flag, "do not export it as a ublk device");
  }
  if (verb == "list" && object == "event") {
    text("--since", in.since, "list the events after this sequence number");
    text("--wait", in.wait,
         "when there is none yet, wait up to SECONDS (at most 300) for one to come");
    sub->add_flag("--follow,-f", in.follow, "print events as they come, until interrupted");
  }
  if (verb == "delete" && object != "pd") {
    sub->add_flag("--confirm,--confirm-to-delete", in.confirm, "yes, destroy the data");
  }
  if ((verb == "delete" || verb == "unexport") && object == "vd") {
    sub->add_flag("--force", in.force,
                  "also while in use: disconnects its NBD clients, and removes its ublk device "
                  "even while mounted or open (syncs first; unwritten data of its users is lost)");
  }
  if (verb == "delete" && object == "dg") {
    sub->add_flag("--force", in.force,
                  "release ublk devices held for its VDs even while mounted or open: the I/O "
                  "waiting on them fails");
  }
  if (verb == "edit" && object == "dg") {
    sub->add_flag("--confirm", in.confirm, "force_online: yes, start it with stale members");
  }
  if (verb == "export") {
    text("--nbd", in.nbd, "unix:PATH or tcp:ADDR:PORT");
    sub->add_flag("--ublk", in.ublk_flag, "as a ublk block device, /dev/ublkbN");
    sub->add_flag("--read-only", in.read_only, "refuse writes");
    text("--tls-psk", in.tls_psk,
         "TLS with pre-shared keys: a file of identity:hexkey lines (psktool); clients must "
         "use one of them");
    sub->add_flag("--insecure-tcp", in.insecure_tcp,
                  "serve --nbd tcp: without TLS: anyone who reaches the address can read and "
                  "write the vd");
  }
  if (verb == "unexport") {
    sub->add_flag("--nbd", in.nbd_flag, "stop the NBD export");
    sub->add_flag("--ublk", in.ublk_flag, "stop the ublk export");
  }
  if (verb == "stats") text("--watch", in.watch, "repeat every SECONDS until interrupted");
  if (verb == "describe" && object == "dg") {
    text("--watch", in.watch, "a progress line every SECONDS while a job runs");
  }
  if (verb == "start" && object == "check") {
    sub->add_flag("--repair", in.repair, "rewrite parity (or mirror copies) that do not match");
  }
}

}  // namespace

CommandTree make_command_tree(Inputs& in) {
  CommandTree tree;
  tree.app = std::make_unique<CLI::App>(
      "graidctl: manage graid through graidd's control socket (docs/cli.md)", "graidctl");
  CLI::App& app = *tree.app;
  app.fallthrough();
  app.allow_extras();
  in.socket_option = app.add_option(
      "--socket", in.socket,
      fmt::format("graidd's control socket (default: $GRAID_SOCKET, else {})", kDefaultSocket));
  app.add_option("--format", in.format, "table or json");
  app.add_flag("--version", in.version, "graidctl's own version");

  auto& leaves = tree.leaves;
  CLI::App* events = nullptr;
  for (const VerbSpec& v : kVerbs) {
    CLI::App* verb = app.add_subcommand(v.name, v.help);
    verb->allow_extras();
    if (*v.alias != '\0') verb->alias(v.alias);
    for (const Leaf& leaf : kLeaves) {
      if (std::string_view(leaf.verb) != v.name) continue;
      if (*leaf.object == '\0') {
        verb->description(fmt::format("{}\nusage: graidctl {}", v.help, leaf.usage));
        add_leaf_options(verb, leaf, in);
        leaves.emplace_back(&leaf, verb);
        continue;
      }
      CLI::App* sub = verb->add_subcommand(leaf.object, fmt::format("graidctl {}", leaf.usage));
      if (const char* alias = object_alias(leaf.object); *alias != '\0') sub->alias(alias);
      add_leaf_options(sub, leaf, in);
      leaves.emplace_back(&leaf, sub);
    }
  }
  // `graidctl events` = `graidctl list event`, and `graidctl events test`.
  events = app.add_subcommand("events",
                              "graidctl events [--since SEQ] [--wait SECONDS | --follow] (= list "
                              "event) | graidctl events test [MESSAGE]");
  add_leaf_options(events, kEvents, in);
  leaves.emplace_back(&kEvents, events);
  return tree;
}

std::string objects_of(std::string_view verb) {
  std::vector<std::string> names;
  for (const Leaf& leaf : kLeaves) {
    if (verb == leaf.verb) names.emplace_back(leaf.object);
  }
  if (names.size() == 1) return names[0];
  std::string last = names.back();
  names.pop_back();
  return fmt::format("{} or {}", fmt::join(names, ", "), last);
}

}  // namespace graid::cli
