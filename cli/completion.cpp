#include "completion.h"

#include <CLI/CLI.hpp>
#include <charconv>
#include <regex>

#include "command_tree.h"
#include "graid/geometry.h"

namespace graid::cli {

namespace {

std::vector<std::string> words_of(std::initializer_list<std::string_view> list) {
  return {list.begin(), list.end()};
}

template <std::size_t N>
std::vector<std::string> words_of(const std::array<std::string_view, N>& list) {
  return {list.begin(), list.end()};
}

std::optional<std::uint32_t> number(const std::string& word) {
  std::uint32_t n = 0;
  const char* end = word.data() + word.size();
  auto [ptr, ec] = std::from_chars(word.data(), end, n);
  if (word.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return n;
}

std::vector<std::string> levels() {
  std::vector<std::string> out;
  for (RaidLevel l : {RaidLevel::kRaid0, RaidLevel::kRaid1, RaidLevel::kRaid10, RaidLevel::kRaid5,
                      RaidLevel::kRaid6})
    out.emplace_back(raid_level_name(l));
  return out;
}

// The placeholders of a leaf's usage line in order ("describe vd <dg> <vd>": dg, vd), up to its
// first alternative; `repeats` when the last one takes several words ("<path>...", "<ids>").
struct Slots {
  std::vector<std::string> names;
  bool repeats = false;
};
Slots slots_of(const Leaf& leaf) {
  std::string usage = leaf.usage;
  if (const std::size_t bar = usage.find(" | "); bar != std::string::npos) usage.resize(bar);
  Slots s;
  static const std::regex kSlot(R"(<([^>]+)>(\.\.\.)?)");
  for (auto it = std::sregex_iterator(usage.begin(), usage.end(), kSlot);
       it != std::sregex_iterator(); ++it) {
    s.names.push_back((*it)[1].str());
    s.repeats = (*it)[2].matched || (*it)[1].str().ends_with("ids");
  }
  return s;
}

// What the word at positional index `at` of `leaf` may be, given the positionals before it.
Completion positional(const Leaf& leaf, const std::string& app_name,
                      const std::vector<std::string>& pos, const IdSource& ids) {
  const std::string_view verb = leaf.verb;
  const std::string_view object = leaf.object;
  const std::size_t at = pos.size();
  auto ids_of = [&](const char* what, std::optional<std::uint32_t> dg = std::nullopt) {
    return Completion{false, ids(what, dg)};
  };
  auto vds_of = [&](std::size_t dg_at) {
    return dg_at < pos.size() && number(pos[dg_at]) ? ids_of("vd", number(pos[dg_at]))
                                                    : Completion{};
  };
  if (verb == "edit") {
    if (object == "vd") {
      if (at == 0) return ids_of("dg");
      if (at == 1) return vds_of(0);
      if (at == 2) return {false, {"size"}};
      return {};
    }
    if (at == 0) return ids_of(object == "pd" ? "pd" : "dg");
    if (object == "pd") {
      if (at == 1) return {false, words_of({"marker", "io_mode", "hotspare"})};
      if (at != 2) return {};
      if (pos[1] == "marker") return {false, words_of({"offline", "online"})};
      if (pos[1] == "io_mode") return {false, words_of({"passthrough", "block"})};
      if (pos[1] == "hotspare") {
        Completion c = ids_of("dg");
        c.candidates.insert(c.candidates.begin(), {"global", "none"});
        return c;
      }
      return {};
    }
    if (at == 1) {
      std::vector<std::string> keys = words_of(kSpeedKeys);
      keys.insert(keys.end(), {"journal", "force_online"});
      return {false, keys};
    }
    if (at != 2) return {};
    if (pos[1] == "journal") return {false, words_of(kJournalValues)};
    for (std::string_view key : kSpeedKeys)
      if (pos[1] == key) return {false, words_of(kSpeedValues)};
    return {};
  }
  if (verb == "stats") {
    if (at == 0) return {false, words_of({"dg", "vd"})};
    if (pos[0] == "dg") return ids_of("dg");
    if (pos[0] == "vd") return at == 1 ? ids_of("dg") : vds_of(1);
    return {};
  }
  if (app_name == "events") return at == 0 ? Completion{false, {"test"}} : Completion{};

  const Slots slots = slots_of(leaf);
  if (slots.names.empty()) return {};
  if (at >= slots.names.size() && !slots.repeats) return {};
  const std::size_t slot = std::min(at, slots.names.size() - 1);
  const std::string& name = slots.names[slot];
  if (name == "path") return {true, {}};
  if (name == "level") return {false, levels()};
  if (name == "dg") return ids_of("dg");
  if (name == "vd") {
    for (std::size_t i = 0; i < slots.names.size(); ++i)
      if (slots.names[i] == "dg") return vds_of(i);
    return {};
  }
  if (name == "id") return ids_of(object == "dg" ? "dg" : "pd");
  if (name == "ids" || name.find("pd") != std::string::npos) return ids_of("pd");
  return {};
}

// The values an option takes, where they are known.
Completion option_values(const CLI::Option& o, const IdSource& ids) {
  if (o.check_lname("format")) return {false, words_of({"table", "json"})};
  if (o.check_lname("socket") || o.check_lname("tls-psk")) return {true, {}};
  if (o.check_lname("spare")) return {false, ids("pd", std::nullopt)};
  if (o.check_lname("nbd")) return {false, words_of({"unix:", "tcp:"})};
  return {};
}

// The long options of `app` and of the apps above it (global options reach every command).
std::vector<std::string> options_of(const CLI::App* app) {
  std::vector<std::string> out;
  for (; app != nullptr; app = app->get_parent()) {
    for (const CLI::Option* o : app->get_options()) {
      if (!o->nonpositional()) continue;
      for (const std::string& l : o->get_lnames())
        out.push_back("--" + l);
    }
  }
  return out;
}

const CLI::Option* find_option(const CLI::App* app, const std::string& word) {
  for (; app != nullptr; app = app->get_parent()) {
    for (const CLI::Option* o : app->get_options()) {
      if (o->nonpositional() && o->check_name(word)) return o;
    }
  }
  return nullptr;
}

}  // namespace

Completion complete(const std::vector<std::string>& words, std::size_t index, const IdSource& ids,
                    std::string* socket) {
  Inputs in;
  CommandTree tree = make_command_tree(in);
  CLI::App* at = tree.app.get();
  std::vector<std::string> pos;
  const CLI::Option* pending = nullptr;
  for (std::size_t i = 0; i < index && i < words.size(); ++i) {
    const std::string& w = words[i];
    if (pending != nullptr) {
      if (socket != nullptr && pending->check_lname("socket")) *socket = w;
      pending = nullptr;
      continue;
    }
    if (w.starts_with("-")) {
      if (w.find('=') != std::string::npos) {
        if (socket != nullptr && w.starts_with("--socket=")) *socket = w.substr(9);
        continue;
      }
      const CLI::Option* o = find_option(at, w);
      if (o != nullptr && o->get_expected_min() > 0) pending = o;
      continue;
    }
    CLI::App* sub = nullptr;
    if (pos.empty()) {
      for (CLI::App* s : at->get_subcommands([](CLI::App*) { return true; }))
        if (s->check_name(w)) sub = s;
    }
    if (sub != nullptr)
      at = sub;
    else
      pos.push_back(w);
  }
  const std::string current = index < words.size() ? words[index] : "";
  if (pending != nullptr) return option_values(*pending, ids);
  if (current.starts_with("-")) return {false, options_of(at)};

  auto subs = at->get_subcommands([](CLI::App*) { return true; });
  if (!subs.empty()) {
    if (!pos.empty()) return {};  // an unknown verb or object: nothing follows it
    Completion c;
    for (const CLI::App* s : subs)
      c.candidates.push_back(s->get_name());
    return c;
  }
  for (const auto& [leaf, app] : tree.leaves) {
    if (app == at) return positional(*leaf, at->get_name(), pos, ids);
  }
  return {};
}

}  // namespace graid::cli
