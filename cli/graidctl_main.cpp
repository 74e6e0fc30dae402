// graidctl: the CLI of graidd (docs/cli.md).
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "graidctl.h"

int main(int argc, char** argv) {
  graid::cli::Environment env;
  if (const char* socket = std::getenv("GRAID_SOCKET"); socket != nullptr && *socket != '\0') {
    env.graid_socket = socket;
  }
  std::string cwd(4096, '\0');
  if (::getcwd(cwd.data(), cwd.size()) != nullptr) env.cwd = cwd.c_str();
  std::vector<std::string> args(argv + 1, argv + argc);
  return graid::cli::run_graidctl(args, env, std::cout, std::cerr);
}
