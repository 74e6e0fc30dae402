#include "command_line.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <string_view>
#include <utility>

#include "cli_parse.h"
#include "command_tree.h"
#include "graid/geometry.h"
#include "graid/status.h"

namespace graid::cli {

namespace {

using nlohmann::json;

Status usage(std::string message) {
  return Status(Errc::kInvalidArgument, std::move(message));
}

// One id 0..kMaxId, `what` naming it for the message ("dg id").
Result<std::uint32_t> parse_one_id(std::string_view text, std::string_view what) {
  auto ids = parse_id_list(text);
  if (!ids.is_ok()) {
    return usage(fmt::format("bad {} \"{}\": {}; give one number 0..{}", what, text,
                             ids.status().message(), kMaxId));
  }
  if (ids->size() != 1) {
    return usage(fmt::format("\"{}\" names {} ids where one {} is wanted; give one number 0..{}",
                             text, ids->size(), what, kMaxId));
  }
  return ids->front();
}

// Ids given as one or more words, each an id list ("0-3,5" or "0 1 2 3"), merged.
Result<std::vector<std::uint32_t>> parse_ids(const std::vector<std::string>& words,
                                             std::size_t first, std::string_view what) {
  std::string joined;
  for (std::size_t i = first; i < words.size(); ++i) {
    if (!joined.empty()) joined += ',';
    joined += words[i];
  }
  auto ids = parse_id_list(joined);
  if (!ids.is_ok()) {
    return usage(
        fmt::format("bad {}: {}; write ids and ranges like 0-3,5", what, ids.status().message()));
  }
  return std::move(*ids);
}

Result<std::uint64_t> parse_size_option(std::string_view option, std::string_view text) {
  auto bytes = parse_size(text);
  if (!bytes.is_ok()) {
    return usage(fmt::format("bad {}: {}; write a size like 4096, 64K or 1.5G", option,
                             bytes.status().message()));
  }
  return *bytes;
}

Result<std::uint64_t> parse_count(std::string_view option, std::string_view text) {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return usage(fmt::format("bad {} \"{}\": not a whole number; give a sequence number like 42",
                             option, text));
  }
  return value;
}

// A path as the daemon must see it: absolute (graidd runs in another directory), normalised.
Result<std::string> absolute_path(std::string_view path, const Environment& env) {
  std::filesystem::path p{std::string(path)};
  if (p.is_absolute()) return p.lexically_normal().string();
  if (env.cwd.empty()) {
    return usage(fmt::format(
        "cannot make \"{}\" absolute: the working directory is unknown; pass an absolute path",
        path));
  }
  return (std::filesystem::path(env.cwd) / p).lexically_normal().string();
}

// --nbd unix:PATH | tcp:ADDR:PORT, with a relative unix path made absolute.
Result<std::string> parse_nbd_address(std::string_view text, const Environment& env) {
  constexpr std::string_view kHint =
      "write --nbd unix:/run/graid/vd0.sock or --nbd tcp:0.0.0.0:10809";
  if (text.starts_with("unix:")) {
    std::string_view path = text.substr(5);
    if (path.empty()) return usage(fmt::format("--nbd \"{}\" has no socket path; {}", text, kHint));
    auto abs = absolute_path(path, env);
    if (!abs.is_ok()) return abs.status();
    return "unix:" + *abs;
  }
  if (text.starts_with("tcp:")) {
    std::string_view rest = text.substr(4);
    std::size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      return usage(fmt::format("--nbd \"{}\" needs an address and a port; {}", text, kHint));
    }
    std::string_view port_text = rest.substr(colon + 1);
    unsigned port = 0;
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() ||
        port > 65535) {
      return usage(fmt::format("--nbd \"{}\": port \"{}\" is not 0..65535 (0: any free port); {}",
                               text, port_text, kHint));
    }
    return std::string(text);
  }
  return usage(fmt::format("--nbd \"{}\" is neither unix:PATH nor tcp:ADDR:PORT; {}", text, kHint));
}

template <std::size_t N>
bool one_of(const std::array<std::string_view, N>& names, std::string_view text) {
  return std::find(names.begin(), names.end(), text) != names.end();
}

template <std::size_t N>
std::string listed(const std::array<std::string_view, N>& names) {
  return fmt::format("{}", fmt::join(names, ", "));
}

// --watch SECONDS: 0.1 to 86400.
Result<double> parse_watch(const std::string& w) {
  double seconds = 0;
  auto [ptr, ec] = std::from_chars(w.data(), w.data() + w.size(), seconds);
  if (w.empty() || ec != std::errc() || ptr != w.data() + w.size() || !std::isfinite(seconds) ||
      seconds < 0.1 || seconds > 86400) {
    return usage(fmt::format(
        "bad --watch \"{}\": want seconds from 0.1 to 86400; write --watch 1 or --watch 0.5", w));
  }
  return seconds;
}

// Checks the number of positional words; `names` is the synopsis of the positionals.
Status want_words(const Inputs& in, std::size_t min, std::size_t max, const Leaf& leaf) {
  if (in.words.size() < min) {
    return usage(fmt::format("{} {} needs more arguments (usage: graidctl {}); {}", leaf.verb,
                             leaf.object, leaf.usage, see_help(leaf.verb, leaf.object)));
  }
  if (in.words.size() > max) {
    return usage(fmt::format("{} {} does not take \"{}\" (usage: graidctl {}); {}", leaf.verb,
                             leaf.object, in.words[max], leaf.usage,
                             see_help(leaf.verb, leaf.object)));
  }
  return Status::ok();
}

constexpr std::size_t kMany = ~std::size_t{0};

constexpr std::uint64_t kMaxEventWait = 300;

// Builds the request args for one leaf from what CLI11 collected. Fills cmd.args (and, for
// stats, cmd.stats and cmd.watch_s).
Status build_args(const Leaf& leaf, const Inputs& in, const Environment& env, Command& cmd) {
  const std::string_view verb = leaf.verb;
  const std::string_view object = leaf.object;
  json& args = cmd.args;

  if (verb == "create" && object == "pd") {
    GRAID_RETURN_IF_ERROR(want_words(in, 1, kMany, leaf));
    json paths = json::array();
    for (const std::string& p : in.words) {
      auto abs = absolute_path(p, env);
      if (!abs.is_ok()) return abs.status();
      paths.push_back(*abs);
    }
    args["paths"] = std::move(paths);
    args["force"] = in.force;
    return Status::ok();
  }
  if (verb == "create" && object == "dg") {
    GRAID_RETURN_IF_ERROR(want_words(in, 2, kMany, leaf));
    auto level = parse_raid_level(in.words[0]);
    if (!level.is_ok()) {
      return usage(fmt::format("{}; {}", level.status().message(), see_help(verb, object)));
    }
    auto pds = parse_ids(in.words, 1, "pd ids");
    if (!pds.is_ok()) return pds.status();
    args["level"] = std::string(raid_level_name(*level));
    args["pd_ids"] = *pds;
    if (in.strip) {
      auto strip = parse_size_option("--strip", *in.strip);
      if (!strip.is_ok()) return strip.status();
      const std::uint64_t s = *strip;
      if (s < kMinStripBytes || s > kMaxStripBytes || (s & (s - 1)) != 0) {
        return usage(fmt::format(
            "--strip {} is not a power of two from 4 KiB to 1 MiB; use one of 4K, 8K, ..., 1M",
            *in.strip));
      }
      args["strip"] = s;
    }
    if (in.spare) {
      auto spares = parse_ids({*in.spare}, 0, "--spare ids");
      if (!spares.is_ok()) return spares.status();
      for (std::uint32_t id : *spares) {
        if (std::find(pds->begin(), pds->end(), id) != pds->end()) {
          return usage(fmt::format(
              "pd {} is named both as a member and as a spare; take it out of one of the lists",
              id));
        }
      }
      args["spare_ids"] = *spares;
    }
    args["assume_clean"] = in.assume_clean;
    if (in.name) args["name"] = *in.name;
    args["force"] = in.force;
    return Status::ok();
  }
  if (verb == "create" && object == "vd") {
    GRAID_RETURN_IF_ERROR(want_words(in, 1, 1, leaf));
    auto dg = parse_one_id(in.words[0], "dg id");
    if (!dg.is_ok()) return dg.status();
    args["dg_id"] = *dg;
    if (in.size) {
      auto size = parse_size_option("--size", *in.size);
      if (!size.is_ok()) return size.status();
      if (*size == 0) {
        return usage("--size 0 is an empty vd; leave --size out for the largest free extent");
      }
      args["size"] = *size;
    }
    if (in.name) args["name"] = *in.name;
    if (in.ublk_flag && in.no_ublk_flag)
      return usage("create vd takes --ublk or --no-ublk, not both; pick one");
    if (in.ublk_flag) args["ublk"] = true;
    if (in.no_ublk_flag) args["ublk"] = false;
    return Status::ok();
  }
  if (verb == "list") {
    if (object == "vd") {
      GRAID_RETURN_IF_ERROR(want_words(in, 0, 1, leaf));
      if (!in.words.empty()) {
        auto dg = parse_one_id(in.words[0], "dg id");
        if (!dg.is_ok()) return dg.status();
        args["dg_id"] = *dg;
      }
      return Status::ok();
    }
    if (object == "event" && !in.words.empty() && in.words[0] == "test" && &leaf == &kEvents) {
      // graidctl events test [MESSAGE]
      if (in.since || in.wait || in.follow)
        return usage(
            "events test takes no --since, --wait or --follow; see graidctl events --help");
      cmd.verb = "test";
      std::string message;
      for (std::size_t i = 1; i < in.words.size(); ++i)
        message += (i > 1 ? " " : "") + in.words[i];
      if (!message.empty()) args["message"] = message;
      return Status::ok();
    }
    GRAID_RETURN_IF_ERROR(want_words(in, 0, 0, leaf));
    if (object == "event" && in.since) {
      auto since = parse_count("--since", *in.since);
      if (!since.is_ok()) return since.status();
      args["since"] = *since;
    }
    if (object == "event" && in.wait && in.follow)
      return usage(
          "--wait and --follow do not go together (--follow waits by itself); see "
          "graidctl events --help");
    if (object == "event" && in.wait) {
      auto wait = parse_count("--wait", *in.wait);
      if (!wait.is_ok() || *wait > kMaxEventWait) {
        return usage(fmt::format("bad --wait \"{}\": want seconds from 0 to {}; write --wait 30",
                                 *in.wait, kMaxEventWait));
      }
      args["wait"] = *wait;
    }
    if (object == "event" && in.follow) cmd.action = Action::kFollowEvents;
    return Status::ok();
  }
  if (verb == "describe" && object == "controller") return want_words(in, 0, 0, leaf);
  if (verb == "replace" && object == "pd") {
    GRAID_RETURN_IF_ERROR(want_words(in, 3, 3, leaf));
    const char* what[] = {"dg id", "old pd id", "new pd id"};
    const char* keys[] = {"dg_id", "old_pd_id", "new_pd_id"};
    for (int i = 0; i < 3; ++i) {
      auto id = parse_one_id(in.words[static_cast<std::size_t>(i)], what[i]);
      if (!id.is_ok()) return id.status();
      args[keys[i]] = *id;
    }
    if (in.force) args["force"] = true;
    return Status::ok();
  }
  if ((verb == "start" || verb == "stop") && object == "check") {
    GRAID_RETURN_IF_ERROR(want_words(in, 1, 1, leaf));
    auto id = parse_one_id(in.words[0], "dg id");
    if (!id.is_ok()) return id.status();
    args["dg_id"] = *id;
    if (verb == "start") args["repair"] = in.repair;
    return Status::ok();
  }
  if ((verb == "describe" || verb == "delete") && (object == "pd" || object == "dg")) {
    const bool list = verb == "delete" && object == "pd";
    GRAID_RETURN_IF_ERROR(want_words(in, 1, list ? kMany : 1, leaf));
    if (list) {
      auto ids = parse_ids(in.words, 0, "pd ids");
      if (!ids.is_ok()) return ids.status();
      args["pd_ids"] = *ids;
      return Status::ok();
    }
    const std::string key = std::string(object) + "_id";
    auto id = parse_one_id(in.words[0], std::string(object) + " id");
    if (!id.is_ok()) return id.status();
    args[key] = *id;
    if (verb == "describe" && in.watch) {
      auto seconds = parse_watch(*in.watch);
      if (!seconds.is_ok()) return seconds.status();
      cmd.watch_s = *seconds;
      cmd.action = Action::kWatchDg;
    }
    if (verb == "delete") {
      if (!in.confirm) {
        return usage(fmt::format(
            "refusing to delete dg {} without --confirm; add --confirm (or --confirm-to-delete) "
            "to stop it and erase its members' superblocks (a dg that still has VDs is refused: "
            "delete them first)",
            *id));
      }
      args["confirm"] = true;
      if (object == "dg" && in.force) args["force"] = true;
    }
    return Status::ok();
  }
  if (object == "vd" &&
      (verb == "describe" || verb == "delete" || verb == "export" || verb == "unexport")) {
    GRAID_RETURN_IF_ERROR(want_words(in, 2, 2, leaf));
    auto dg = parse_one_id(in.words[0], "dg id");
    if (!dg.is_ok()) return dg.status();
    auto vd = parse_one_id(in.words[1], "vd id");
    if (!vd.is_ok()) return vd.status();
    args["dg_id"] = *dg;
    args["vd_id"] = *vd;
    if (verb == "delete") {
      if (!in.confirm) {
        return usage(
            fmt::format("refusing to delete vd {} of dg {} without --confirm; add --confirm (or "
                        "--confirm-to-delete) to destroy it and its data",
                        *vd, *dg));
      }
      args["confirm"] = true;
      if (in.force) args["force"] = true;
    } else if (verb == "export") {
      if (in.ublk_flag && in.nbd)
        return usage("export vd takes --ublk or --nbd, not both; export twice for both");
      if (in.ublk_flag) {
        if (in.read_only || in.name || in.tls_psk || in.insecure_tcp)
          return usage(
              "--read-only, --name, --tls-psk and --insecure-tcp are for --nbd exports; drop "
              "them with --ublk");
        args["ublk"] = true;
        return Status::ok();
      }
      if (!in.nbd) {
        return usage(
            "export vd needs --ublk or --nbd unix:PATH|tcp:ADDR:PORT; say how to serve the vd");
      }
      auto address = parse_nbd_address(*in.nbd, env);
      if (!address.is_ok()) return address.status();
      args["nbd"] = *address;
      args["read_only"] = in.read_only;
      if (in.name) args["name"] = *in.name;
      if (in.tls_psk) {
        auto abs = absolute_path(*in.tls_psk, env);
        if (!abs.is_ok()) return abs.status();
        args["tls_psk"] = *abs;
      }
      if (in.insecure_tcp) args["insecure_tcp"] = true;
    } else if (verb == "unexport") {
      args["nbd"] = in.nbd_flag;
      args["ublk"] = in.ublk_flag;
      if (in.force) args["force"] = true;
    }
    return Status::ok();
  }
  if (verb == "edit" && object == "vd") {
    // edit vd <dg> <vd> size SIZE: the one setting of a VD.
    GRAID_RETURN_IF_ERROR(want_words(in, 4, 4, leaf));
    auto dg = parse_one_id(in.words[0], "dg id");
    if (!dg.is_ok()) return dg.status();
    auto vd = parse_one_id(in.words[1], "vd id");
    if (!vd.is_ok()) return vd.status();
    if (in.words[2] != "size")
      return usage(fmt::format("vd has no setting \"{}\"; the one setting is size", in.words[2]));
    auto size = parse_size_option("size", in.words[3]);
    if (!size.is_ok()) return size.status();
    args["dg_id"] = *dg;
    args["vd_id"] = *vd;
    args["key"] = "size";
    args["size"] = *size;
    return Status::ok();
  }
  if (verb == "edit") {
    // `edit dg <id> force_online --confirm` is the one edit without a value.
    const bool force_online =
        object == "dg" && in.words.size() >= 2 && in.words[1] == "force_online";
    GRAID_RETURN_IF_ERROR(want_words(in, force_online ? 2 : 3, force_online ? 2 : 3, leaf));
    auto id = parse_one_id(in.words[0], std::string(object) + " id");
    if (!id.is_ok()) return id.status();
    const std::string& key = in.words[1];
    const std::string value = force_online ? std::string() : in.words[2];
    if (force_online) {
      args["dg_id"] = *id;
      args["key"] = key;
      args["value"] = value;
      args["confirm"] = in.confirm;
      return Status::ok();
    }
    if (in.confirm) return usage("--confirm is for edit dg <id> force_online only; drop it");
    if (in.force && !(object == "pd" && key == "hotspare" && value != "none"))
      return usage("--force is for edit pd <id> hotspare <dg>|global only; drop it");
    if (object == "pd") {
      if (key == "io_mode") {
        if (value != "passthrough" && value != "block") {
          return usage(fmt::format("bad io_mode \"{}\"; write passthrough or block", value));
        }
      } else if (key == "hotspare") {
        if (value != "global" && value != "none" && !parse_one_id(value, "dg id").is_ok()) {
          return usage(fmt::format("bad hotspare \"{}\"; write a dg id, global or none", value));
        }
      } else if (key != "marker") {
        return usage(fmt::format(
            "pd has no setting \"{}\"; the settings are marker, io_mode, hotspare", key));
      } else if (value != "offline" && value != "online") {
        return usage(fmt::format("bad marker \"{}\"; write offline or online", value));
      }
    } else if (one_of(kSpeedKeys, key)) {
      if (!one_of(kSpeedValues, value)) {
        return usage(
            fmt::format("bad {} \"{}\"; write one of {}", key, value, listed(kSpeedValues)));
      }
    } else if (key == "journal") {
      if (!one_of(kJournalValues, value)) {
        return usage(
            fmt::format("bad journal \"{}\"; write one of {}", value, listed(kJournalValues)));
      }
    } else {
      return usage(fmt::format(
          "dg has no setting \"{}\"; the settings are {}, journal (and force_online --confirm)",
          key, listed(kSpeedKeys)));
    }
    args[std::string(object) + "_id"] = *id;
    args["key"] = key;
    args["value"] = value;
    if (in.force) args["force"] = true;
    return Status::ok();
  }
  if (verb == "stats") {
    cmd.action = Action::kStats;
    if (in.watch) {
      auto seconds = parse_watch(*in.watch);
      if (!seconds.is_ok()) return seconds.status();
      cmd.watch_s = *seconds;
    }
    if (in.words.empty()) return Status::ok();
    const std::string& what = in.words[0];
    if (what == "dg" || what == "drive_group") {
      cmd.stats.vds = false;
      if (in.words.size() > 1) {
        auto ids = parse_ids(in.words, 1, "dg ids");
        if (!ids.is_ok()) return ids.status();
        cmd.stats.dg_ids = std::move(*ids);
      }
      return Status::ok();
    }
    if (what == "vd" || what == "virtual_drive") {
      cmd.stats.dgs = false;
      if (in.words.size() > 1) {
        auto dg = parse_one_id(in.words[1], "dg id");
        if (!dg.is_ok()) return dg.status();
        cmd.stats.vd_dg = *dg;
      }
      if (in.words.size() > 2) {
        auto ids = parse_ids(in.words, 2, "vd ids");
        if (!ids.is_ok()) return ids.status();
        cmd.stats.vd_ids = std::move(*ids);
      }
      return Status::ok();
    }
    return usage(fmt::format("stats does not take \"{}\" (usage: graidctl {}); {}", what,
                             leaf.usage, see_help("stats", "")));
  }
  if (verb == "examine") {
    GRAID_RETURN_IF_ERROR(want_words(in, 1, kMany, leaf));
    cmd.args["paths"] = in.words;
    cmd.action = Action::kExamine;
    return Status::ok();
  }
  if (verb == "status") {
    if (!in.words.empty()) {
      return usage(
          fmt::format("status does not take \"{}\"; {}", in.words[0], see_help("status", "")));
    }
    cmd.action = Action::kStatus;
    return Status::ok();
  }
  if (verb == "version") {
    if (!in.words.empty()) {
      return usage(
          fmt::format("version does not take \"{}\"; {}", in.words[0], see_help("version", "")));
    }
    return Status::ok();
  }
  return Status(Errc::kInternal, fmt::format("no builder for {} {}", verb, object));
}

OutputFormat prescan_format(const std::vector<std::string>& args) {
  OutputFormat format = OutputFormat::kTable;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--format=json" ||
        (args[i] == "--format" && i + 1 < args.size() && args[i + 1] == "json")) {
      format = OutputFormat::kJson;
    } else if (args[i] == "--format=table" ||
               (args[i] == "--format" && i + 1 < args.size() && args[i + 1] == "table")) {
      format = OutputFormat::kTable;
    }
  }
  return format;
}

// The words of the line that name no option or option value: what was meant as verb and object.
const CLI::App* selected(const CLI::App* app) {
  auto subs = app->get_subcommands();
  return subs.empty() ? nullptr : subs.front();
}

}  // namespace

ParsedCommandLine parse_command_line(const std::vector<std::string>& args, const Environment& env) {
  ParsedCommandLine out;
  out.format = prescan_format(args);
  if (args.empty()) {
    out.error = "no command given; see graidctl --help";
    return out;
  }

  Inputs in;
  CommandTree tree = make_command_tree(in);
  CLI::App& app = *tree.app;
  const auto& leaves = tree.leaves;

  try {
    std::vector<const char*> argv;
    argv.push_back("graidctl");
    for (const std::string& a : args)
      argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    Command cmd;
    cmd.action = Action::kHelp;
    cmd.help_text = app.help();
    cmd.format = out.format;
    out.command = std::move(cmd);
    return out;
  } catch (const CLI::ParseError& e) {
    const CLI::App* verb = selected(&app);
    const CLI::App* object = verb != nullptr ? selected(verb) : nullptr;
    out.error = fmt::format("{}; {}", e.what(),
                            see_help(verb != nullptr ? verb->get_name() : "",
                                     object != nullptr ? object->get_name() : ""));
    return out;
  } catch (const std::exception& e) {
    out.error = fmt::format("cannot parse the command line: {}; see graidctl --help", e.what());
    return out;
  }

  if (in.format == "json") {
    out.format = OutputFormat::kJson;
  } else if (in.format == "table") {
    out.format = OutputFormat::kTable;
  } else {
    out.error =
        fmt::format("unknown --format \"{}\"; write --format table or --format json", in.format);
    return out;
  }

  Command cmd;
  cmd.format = out.format;
  if (in.version) {
    cmd.action = Action::kVersion;
    out.command = std::move(cmd);
    return out;
  }

  const CLI::App* verb = selected(&app);
  const CLI::App* object = verb != nullptr ? selected(verb) : nullptr;
  // Words CLI11 could not place: an unknown verb, an unknown object, or an unknown option.
  std::vector<std::string> extras = app.remaining(true);
  if (!extras.empty()) {
    const std::string& first = extras.front();
    if (first.starts_with("-")) {
      out.error = fmt::format("unknown option \"{}\"; {}", first,
                              see_help(verb != nullptr ? verb->get_name() : "",
                                       object != nullptr ? object->get_name() : ""));
    } else if (verb == nullptr) {
      out.error = fmt::format("unknown command \"{}\"; see graidctl --help", first);
    } else {
      out.error = fmt::format("{} does not take \"{}\" (expected {}); {}", verb->get_name(), first,
                              objects_of(verb->get_name()), see_help(verb->get_name(), ""));
    }
    return out;
  }
  if (verb == nullptr) {
    out.error = "no command given; see graidctl --help";
    return out;
  }

  const CLI::App* leaf_app = nullptr;
  for (const auto& [leaf, sub] : leaves) {
    if (sub == verb || sub == object) leaf_app = sub;
  }
  const Leaf* leaf = nullptr;
  for (const auto& [l, sub] : leaves) {
    if (sub == leaf_app) leaf = l;
  }
  if (leaf == nullptr) {
    out.error = fmt::format("{} needs an object ({}); {}", verb->get_name(),
                            objects_of(verb->get_name()), see_help(verb->get_name(), ""));
    return out;
  }

  cmd.verb = leaf->verb;
  cmd.object = leaf->object;
  if (in.socket_option->count() > 0) {
    cmd.socket = in.socket;
  } else {
    cmd.socket = env.graid_socket.value_or(kDefaultSocket);
  }
  if (cmd.socket.empty()) {
    out.error = "--socket is empty; pass the path of graidd's control socket";
    return out;
  }
  Status built = build_args(*leaf, in, env, cmd);
  if (!built.is_ok()) {
    out.error = built.message();
    return out;
  }
  out.command = std::move(cmd);
  return out;
}

}  // namespace graid::cli
