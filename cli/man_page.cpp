#include "man_page.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <sstream>

namespace graid::cli {

namespace {

// A paragraph of the page's own text: examples (lines starting with two spaces) kept as they
// are, the rest filled.
std::string paragraphs(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  bool in_example = false;
  bool at_paragraph_start = true;
  auto end_example = [&] {
    if (in_example) out += ".fi\n.RE\n";
    in_example = false;
  };
  while (std::getline(in, line)) {
    if (line.empty()) {
      end_example();
      at_paragraph_start = true;
      continue;
    }
    const bool example = line.starts_with("  ");
    if (at_paragraph_start) out += ".PP\n";
    at_paragraph_start = false;
    if (example && !in_example) {
      out += ".RS 4\n.nf\n";
      in_example = true;
    } else if (!example) {
      end_example();
    }
    out += roff_escape(example ? line.substr(2) : line) + "\n";
  }
  end_example();
  return out;
}

// The value an option takes, as its synopsis names it: from a usage text ("[--strip SIZE]")
// where one is given, else from its check ("auto|cuda|cpu") or type ("N", "VALUE").
std::string metavar(const CLI::Option& o, const std::string& usage) {
  for (const std::string& name : o.get_lnames()) {
    const std::string flag = "--" + name + " ";
    const std::size_t at = usage.find(flag);
    if (at == std::string::npos) continue;
    std::size_t end = at + flag.size();
    while (end < usage.size() &&
           (std::isalnum(static_cast<unsigned char>(usage[end])) != 0 || usage[end] == '_' ||
            usage[end] == ':' || usage[end] == '|' || usage[end] == '.'))
      ++end;
    if (end > at + flag.size()) return usage.substr(at + flag.size(), end - at - flag.size());
  }
  const std::string type = o.get_type_name();
  if (const std::size_t open = type.find('{'); open != std::string::npos) {
    std::string set = type.substr(open + 1, type.find('}', open) - open - 1);
    for (char& c : set)
      if (c == ',') c = '|';
    return set;
  }
  if (type.starts_with("UINT") || type.starts_with("INT") || type.starts_with("FLOAT")) return "N";
  return "VALUE";
}

// One option as a tagged paragraph: "-h, --help" or "--socket PATH", then its description and
// default.
std::string option_item(const CLI::Option& o, const std::string& usage) {
  std::string names;
  for (const std::string& s : o.get_snames())
    names += (names.empty() ? "" : ", ") + fmt::format("\\fB{}\\fR", roff_escape("-" + s));
  for (const std::string& l : o.get_lnames())
    names += (names.empty() ? "" : ", ") + fmt::format("\\fB{}\\fR", roff_escape("--" + l));
  if (o.get_expected_min() > 0) names += " \\fI" + roff_escape(metavar(o, usage)) + "\\fR";
  std::string text = o.get_description();
  if (!o.get_default_str().empty()) text += fmt::format(" (default: {})", o.get_default_str());
  return ".TP\n" + names + "\n" + roff_escape(text) + "\n";
}

std::string options_of(const CLI::App& app, const std::string& usage) {
  std::string out;
  for (const CLI::Option* o : app.get_options()) {
    if (!o->nonpositional()) continue;  // the words after the command are in its usage line
    // Every subcommand takes --help; OPTIONS says it once.
    if (app.get_parent() != nullptr && o->check_lname("help")) continue;
    out += option_item(*o, usage);
  }
  return out;
}

std::string aliases_text(const CLI::App& app) {
  const auto& aliases = app.get_aliases();
  if (aliases.empty()) return "";
  std::string text;
  for (const std::string& a : aliases)
    text += (text.empty() ? "" : ", ") + a;
  return fmt::format(" (also: {})", text);
}

// A subcommand's description split into its help and, where there is one, its usage line
// ("usage: graidctl stats ..." on a line of its own, or the whole text when it is the usage).
std::pair<std::string, std::string> help_and_usage(const std::string& description) {
  if (const std::size_t at = description.find("\nusage: "); at != std::string::npos)
    return {description.substr(0, at), description.substr(at + 8)};
  return {"", description};
}

// A usage line, in bold.
std::string usage_line(const std::string& usage) {
  return "\\fB" + roff_escape(usage) + "\\fR\n";
}

// A command's usage line and, indented under it, its options.
std::string usage_block(const CLI::App& app, const std::string& usage) {
  std::string out = ".PP\n" + usage_line(usage);
  const std::string opts = options_of(app, usage);
  if (!opts.empty()) out += ".RS\n" + opts + ".RE\n";
  return out;
}

}  // namespace

std::string roff_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (char c : text) {
    if (c == '\\')
      out += "\\e";
    else if (c == '-')
      out += "\\-";
    else
      out += c;
  }
  // A line that starts with a dot or a quote would be a request.
  std::string guarded;
  bool line_start = true;
  for (char c : out) {
    if (line_start && (c == '.' || c == '\'')) guarded += "\\&";
    guarded += c;
    line_start = c == '\n';
  }
  return guarded;
}

std::string render_man_page(const CLI::App& app, const ManPage& page) {
  std::string out;
  out += fmt::format(
      ".TH {} {} \"{}\" \"{}\" \"System Administration\"\n",
      [&] {
        std::string upper = page.name;
        for (char& c : upper)
          c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        return upper;
      }(),
      page.section, page.date, page.version);
  out += ".nh\n";  // no hyphenation: option names and paths break only at spaces
  out += ".SH NAME\n" + roff_escape(page.name) + " \\- " + roff_escape(page.summary) + "\n";
  out += ".SH SYNOPSIS\n";
  for (const std::string& line : page.synopsis)
    out += ".br\n" + usage_line(line);
  out += ".SH DESCRIPTION\n" + paragraphs(page.description);
  std::string synopsis;
  for (const std::string& line : page.synopsis)
    synopsis += line + "\n";
  out += ".SH OPTIONS\n" + options_of(app, synopsis);

  const auto verbs = app.get_subcommands([](const CLI::App*) { return true; });
  if (!verbs.empty()) {
    out += ".SH COMMANDS\n";
    for (const CLI::App* verb : verbs) {
      out += ".SS " + roff_escape(verb->get_name()) + "\n";
      const auto objects = verb->get_subcommands([](const CLI::App*) { return true; });
      // A verb without objects carries its usage line in its description; one with objects
      // describes itself, and each object's description is its usage line.
      const auto [help, usage] = help_and_usage(verb->get_description());
      const std::string summary =
          (objects.empty() ? help : verb->get_description()) + aliases_text(*verb);
      if (!summary.empty()) out += roff_escape(summary) + "\n";
      if (objects.empty()) out += usage_block(*verb, usage);
      for (const CLI::App* object : objects)
        out += usage_block(*object, object->get_description());
    }
  }
  for (const ManSection& s : page.sections)
    out += ".SH " + roff_escape(s.title) + "\n" + paragraphs(s.text);
  return out;
}

}  // namespace graid::cli
