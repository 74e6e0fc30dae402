// graid-manpage: writes graidd(8) or graidctl(8) from the programs' own CLI11 trees
// (cli/man_page.h), at build time. Not installed; its pages are.
//
//   graid-manpage graidctl|graidd VERSION DATE OUTPUT
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "command_tree.h"
#include "graidd/graidd_options.h"
#include "man_page.h"

namespace {

using graid::cli::ManPage;
using graid::cli::ManSection;

ManPage graidctl_page() {
  ManPage p;
  p.name = "graidctl";
  p.summary = "manage graid drive groups and virtual drives through graidd";
  p.synopsis = {"graidctl [--socket PATH] [--format table|json] VERB OBJECT [ARGUMENTS] [OPTIONS]",
                "graidctl status", "graidctl examine PATH...", "graidctl events --follow"};
  p.description =
      "graidctl manages graid, the GPU-offloaded software RAID engine, through the control socket "
      "of graidd(8): physical drives (pd), drive groups (dg: RAID 0, 1, 10, 5, 6 over pds), "
      "virtual drives (vd: ranges of a dg, exported as ublk block devices or over NBD), events "
      "and background jobs. Every command is one request and one answer; graidctl keeps no "
      "state. examine reads a drive's metadata directly and needs no graidd.\n"
      "\n"
      "Tables are for people and JSON (--format json) for programs: a table shows sizes in "
      "binary units (KiB, MiB, GiB), rates in decimal MB/s (10^6 bytes per second) and progress "
      "in percent; JSON gives exact numbers (bytes, bytes per second, seconds). Sizes on the "
      "command line take binary units (64K, 1.5G); id lists take ranges (0-3,5).\n"
      "\n"
      "A typical session:\n"
      "\n"
      "  graidctl create pd /dev/nvme0n1 /dev/nvme1n1 /dev/nvme2n1 /dev/nvme3n1\n"
      "  graidctl create dg raid5 0-3 --name data\n"
      "  graidctl create vd 0 --size 1T --name db\n"
      "  graidctl status";
  p.sections = {
      ManSection{"EXIT STATUS",
                 "0: done. 1: refused (the daemon would not do it: bad input, in use, no space); "
                 "for examine, a path without a superblock this build reads. 2: usage (a bad "
                 "command line). 3: not found (the named pd, dg or vd does not exist). 4: graidd "
                 "could not be reached. 5: internal error.\n"
                 "\n"
                 "graidctl status exits as mdadm --detail --test: 0 every dg optimal, 1 a dg "
                 "degraded or rebuilding, 2 a dg failed or offline, 4 graidd not answering."},
      ManSection{"ENVIRONMENT",
                 "GRAID_SOCKET: the control socket when --socket is not given "
                 "(default /run/graid/graidd.sock)."},
      ManSection{"FILES",
                 "/run/graid/graidd.sock: graidd's control socket.\n"
                 "\n"
                 "/usr/share/bash-completion/completions/graidctl: completion of verbs, objects, "
                 "options and the ids graidd knows, for bash."},
      ManSection{"SEE ALSO",
                 "graidd(8), mdadm(8), nvme(1); docs/cli.md and docs/monitoring.md in the graid "
                 "sources."},
  };
  return p;
}

ManPage graidd_page() {
  ManPage p;
  p.name = "graidd";
  p.summary = "the graid daemon: GPU-offloaded software RAID for NVMe";
  // The synopsis names each option's value (PATH, N); an option it lacks still gets its entry
  // under OPTIONS, from the tree.
  p.synopsis = {
      "graidd [--socket PATH] [--socket-group NAME] [--state-dir DIR] [--parity auto|cuda|cpu] "
      "[--io-threads N] [--ublk-depth N] [--ublk-memory MIB] [--ublk-copy auto|kernel|user|zero] "
      "[--ublk-affinity any|queue] [--ublk-spread off|on] [--ublk-batch off|on] "
      "[--nbd-handshake-timeout S] [--nbd-idle-timeout S] [--nbd-io-timeout S] "
      "[--nbd-max-clients N] [--nbd-max-handshakes N] [--nbd-max-handshakes-per-peer N] "
      "[--speed-limit-max MB] [--event-program PATH] [--event-program-timeout S] "
      "[--metrics-listen ADDR:PORT] [--health-interval S] "
      "[--log-level trace|debug|info|warn|error]"};
  p.description =
      "graidd owns the physical drives it is given, assembles their drive groups from the "
      "superblocks on them, computes parity on the GPU (CUDA) or the CPU (ISA-L), and serves "
      "the virtual drives as ublk block devices (/dev/ublkbN) and over NBD. It is managed with "
      "graidctl(8) over its control socket, keeps what it was told in its state directory, and "
      "runs in the foreground (under systemd: Type=notify, with a watchdog).\n"
      "\n"
      "Events (a drive failed, a rebuild finished) are kept on disk in the state directory; "
      "--event-program runs a program for each warning and critical one, as mdadm --monitor "
      "--program does; --metrics-listen serves Prometheus metrics; NVMe drives' health logs are "
      "read every --health-interval seconds.";
  p.sections = {
      ManSection{"SIGNALS",
                 "SIGTERM, SIGINT: stop cleanly (drive groups marked clean, exports "
                 "closed; ublk devices in use are left to the kernel for the next "
                 "graidd to take back)."},
      ManSection{"FILES",
                 "/var/lib/graid: the state directory (state.json, events.jsonl).\n"
                 "\n"
                 "/run/graid/graidd.sock: the control socket."},
      ManSection{"SEE ALSO",
                 "graidctl(8), systemd.service(5); docs/daemon.md and docs/monitoring.md in the "
                 "graid sources."},
  };
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: graid-manpage graidctl|graidd VERSION DATE OUTPUT\n";
    return 2;
  }
  const std::string which = argv[1];
  std::string page;
  if (which == "graidctl") {
    graid::cli::Inputs in;
    graid::cli::CommandTree tree = graid::cli::make_command_tree(in);
    ManPage p = graidctl_page();
    p.version = std::string("graid ") + argv[2];
    p.date = argv[3];
    page = graid::cli::render_man_page(*tree.app, p);
  } else if (which == "graidd") {
    graid::daemon::GraiddOptions o;
    auto app = graid::daemon::make_graidd_app(o);
    ManPage p = graidd_page();
    p.version = std::string("graid ") + argv[2];
    p.date = argv[3];
    page = graid::cli::render_man_page(*app, p);
  } else {
    std::cerr << "graid-manpage: unknown program \"" << which << "\"; graidctl or graidd\n";
    return 2;
  }
  std::ofstream out(argv[4]);
  out << page;
  out.close();
  if (!out) {
    std::cerr << "graid-manpage: cannot write " << argv[4] << "\n";
    return 1;
  }
  return 0;
}
