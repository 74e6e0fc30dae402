// A man page (roff, man(7) macros) written from a program's own CLI11 App tree: its options with
// their values, checks and defaults, and every subcommand with its options, walked to the leaves
// (help2man sees only the top-level --help). graid-manpage uses it for graidd(8) and graidctl(8)
// at build time, so the pages cannot drift from the programs.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace graid::cli {

// Text the App tree does not hold. Paragraphs are separated by blank lines; a line that starts
// with two spaces is shown as it is (an example), others are filled.
struct ManSection {
  std::string title;  // "EXIT STATUS"
  std::string text;
};

struct ManPage {
  std::string name;                   // "graidctl"
  int section = 8;                    // administration commands
  std::string summary;                // the NAME line after "\-": "manage graid through graidd"
  std::string version;                // "graid 0.1.0"
  std::string date;                   // "2026-12-07"
  std::vector<std::string> synopsis;  // lines, without roff
  std::string description;
  std::vector<ManSection> sections;  // after OPTIONS and COMMANDS
};

// The page: NAME, SYNOPSIS, DESCRIPTION, OPTIONS (the App's), COMMANDS (each subcommand with its
// aliases and description, each of its subcommands with theirs and their options), then
// `page.sections`.
std::string render_man_page(const CLI::App& app, const ManPage& page);

// Text made safe for roff: backslashes and hyphens escaped, a leading dot or quote guarded.
std::string roff_escape(const std::string& text);

}  // namespace graid::cli
