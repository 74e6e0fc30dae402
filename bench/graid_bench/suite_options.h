// `graid-bench suite`'s command line: parsing (CLI11) and validation, with messages that name the
// argument and say what would work. The suite itself is suite.h.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "graid/geometry.h"
#include "graid/status.h"

namespace graid::bench {

struct SuiteOptions {
  bool quick = false;                      // the short plan (the README demo's)
  std::string out = "graid-bench-report";  // report directory: suite.json, report.md, *.png
  std::string dir = "/dev/shm";            // where member files are made (and removed)
  std::uint64_t member_size = 0;           // bytes per member; 0 = the plan's (256M quick, 1G)
  std::vector<std::string> backends;       // parity backends to compare; empty = auto
  std::vector<RaidLevel> levels;           // only these of the plan's levels; empty = all
  double seconds = 0;                      // measured seconds per run; 0 = the plan's
  std::uint32_t threads = 1;
  std::uint32_t queue_depth = 32;
  std::uint64_t rebuild_bytes_per_second = 100'000'000;  // per member, the rebuilding state's
  std::string report_script;  // the plotting script; empty = the build's bench/report copy
  bool plots = true;          // run the plotting script on suite.json
  bool nbd = true;            // also through graidd over NBD (three profiles; nbd.json)
  std::uint64_t seed = 1;
};

// Parses `graid-bench suite ARGS...` (argv[0] the program, argv[1] "suite"). Returns the
// options, or the exit status to leave with after help (0) or an error (2) went to stderr.
std::variant<SuiteOptions, int> parse_suite_command_line(int argc, char** argv);

// The checks behind it, for options built in code: kInvalidArgument naming the argument.
Status validate_suite_options(const SuiteOptions& o);

}  // namespace graid::bench
