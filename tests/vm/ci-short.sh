#!/usr/bin/env bash
# CI entry point of the VM tests: builds graidd, graidctl and graid-bench (release preset; a
# no-op when they are up to date) and runs the short form of tests/vm/run.sh (short ublk-raid and
# hot-remove). Needs root and the network the first time (Debian packages, the guest kernel),
# takes a few minutes on two cores. GRAID_VM_SKIP=1 skips it (prints SKIP, exits 0); nothing else
# does: where qemu cannot run, this fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ ${GRAID_VM_SKIP:-0} == 1 ]]; then
  echo "SKIP: graid VM tests (GRAID_VM_SKIP=1)"
  exit 0
fi
if [[ -z ${GRAID_VM_BUILD:-} ]]; then
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$(nproc)" --target graidd graidctl graid-bench >/dev/null
fi
exec tests/vm/run.sh --short "$@"
