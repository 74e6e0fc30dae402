// graidctl as a function: the command line in, output on the given streams, the exit code out.
// graidctl_main.cpp only gathers argv and the environment; tests call this directly or run the
// binary.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "command_line.h"

namespace graid::cli {

// Runs one graidctl command line (argv without argv[0]): parses it, talks to graidd, prints the
// result (tables, or one JSON document with --format json; one JSON line per interval with
// stats --watch) on `out` and errors on `err` (on `out` as {"error":...} with --format json).
// Returns the exit code of docs/cli.md: 0 done, 1 refused, 2 usage, 3 not found, 4 unreachable,
// 5 internal. `stats --watch` runs until SIGINT (exit 0); it installs its own SIGINT handler.
int run_graidctl(const std::vector<std::string>& args, const Environment& env, std::ostream& out,
                 std::ostream& err);

}  // namespace graid::cli
