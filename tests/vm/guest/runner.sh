#!/bin/bash
# Guest side of the harness, started by /init: mounts the host share, loads the NVMe driver,
# finds the drives, runs each scenario of /vm/config.sh and then the guest script, each in its
# own session with a time limit, and records how each ended. Console markers (the host echoes
# them and forwards @@QMP lines):
#   @@GUEST_START ...   @@SCENARIO_START name   @@SCENARIO_END name rc=N seconds=S   @@END ...
# The host's verdict is taken from the share (scenarios.txt, results.txt, END), not the console.
set -uo pipefail
# shellcheck disable=SC1091 # written by run.sh into the initramfs
. /vm/config.sh
# shellcheck source=common.sh
. /vm/common.sh

fatal() {
  echo "@@FATAL $*"
  echo "@@END fatal"
  exit 1
}

echo "@@GUEST_START uptime=$(up)s kernel=$(uname -r) cpus=$(nproc) mem=$(awk '/MemTotal/ {print $2}' /proc/meminfo)kB"
echo "guest cpu flags (subset): $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'sse4_2|avx|avx2|avx512f|gfni|pclmulqdq' | tr '\n' ' ')"

# Pitfall: msize=512K makes 9p much faster than the default 8K; cache=none keeps the host's
# writes (QMP answers) visible at once.
{ modprobe 9pnet_virtio && modprobe 9p; } || fatal "cannot load the 9p modules"
mkdir -p "$GRAID_SHARE"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288,cache=none graidshare "$GRAID_SHARE" ||
  fatal "cannot mount the host share"
mkdir -p "$GRAID_SHARE/logs" /run/mdadm /etc/nvme

# nvme and ublk_drv are loaded as a distribution would at boot: graidd does not load modules, it
# reports "/dev/ublk-control does not exist" instead. The rest is left to the scenarios.
modprobe nvme || fatal "cannot load nvme"
modprobe ublk_drv || fatal "cannot load ublk_drv"
for ((i = 0; i < 150; i++)); do
  vm_resolve_drives
  [[ -n ${GRAID_NVME0:-} && -n ${GRAID_NVME4:-} && -n ${GRAID_SPARE:-} && -n ${GRAID_NG4:-} ]] &&
    [[ -n ${GRAID_NVME1:-} && -n ${GRAID_NVME2:-} && -n ${GRAID_NVME3:-} ]] && break
  sleep 0.2
done
drives=$(vm_drive_vars | tr '\n' ' ')
echo "@@DRIVES $drives"
[[ -n ${GRAID_NVME4:-} && -n ${GRAID_SPARE:-} ]] || fatal "not all six NVMe drives appeared: $drives"

# nvme connect (the nvmet scenario) needs a host NQN and id.
nvme gen-hostnqn >/etc/nvme/hostnqn 2>/dev/null
cat /proc/sys/kernel/random/uuid >/etc/nvme/hostid

# What a scenario leaves behind must not spoil the next one: its processes (graidd, fio) are
# killed with its session; mounts, md arrays, fabrics connections and RAM disks are undone here.
tidy_up() {
  local m
  while read -r m; do
    umount -l "$m" 2>/dev/null
  done < <(awk '$2 ~ "^/mnt/" && $2 != "/mnt/host" {print $2}' /proc/mounts | sort -r)
  mdadm --stop --scan >/dev/null 2>&1
  nvme disconnect-all >/dev/null 2>&1
  # brd keeps the parameters of its first load (rd_nr, rd_size) and its pages: unloaded, the
  # next scenario can load it its own way and the memory comes back
  rmmod brd >/dev/null 2>&1
  return 0
}

passed=0 failed=0
# run_one NAME COMMAND...: runs COMMAND as scenario NAME in its own session (so that a time-out
# can kill everything it started), output on the console and in logs/NAME/output.log.
run_one() {
  local name=$1 t0 rc watchdog pid secs
  shift
  # The logs are written straight into the host's share, so that they survive a guest crash.
  export GRAID_SCENARIO=$name GRAID_LOG_DIR=$GRAID_SHARE/logs/$name
  mkdir -p "$GRAID_LOG_DIR"
  vm_resolve_drives
  echo "@@SCENARIO_START $name uptime=$(up)s"
  t0=$(up)
  # shellcheck disable=SC2016 # expanded by the inner bash
  setsid bash -c 'set -o pipefail; "$@" 2>&1 | tee "$GRAID_LOG_DIR/output.log"' run-one "$@" </dev/null &
  pid=$!
  (
    sleep "$GRAID_VM_SCENARIO_TIMEOUT"
    echo "@@TIMEOUT $name after ${GRAID_VM_SCENARIO_TIMEOUT}s: killing it"
    echo "$name FAIL timeout killed after ${GRAID_VM_SCENARIO_TIMEOUT}s" >>"$GRAID_RESULTS"
    kill -TERM -- "-$pid"
    sleep 10
    kill -KILL -- "-$pid"
  ) &
  watchdog=$!
  wait "$pid"
  rc=$?
  kill "$watchdog" 2>/dev/null
  wait "$watchdog" 2>/dev/null
  # graidd and anything else the scenario left running: SIGTERM, then SIGKILL
  if kill -TERM -- "-$pid" 2>/dev/null; then
    for ((i = 0; i < 50; i++)); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null
  fi
  tidy_up
  secs=$(awk -v a="$t0" -v b="$(up)" 'BEGIN {printf "%.1f", b - a}')
  dmesg >"$GRAID_LOG_DIR/dmesg.log"
  echo "$name $rc $secs" >>"$GRAID_SHARE/scenarios.txt"
  echo "@@SCENARIO_END $name rc=$rc seconds=$secs"
  if ((rc == 0)); then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}

# config.sh's variables (the harness's and every GRAID_VM_* of the host) reach the scenarios
# shellcheck disable=SC2046 # names only
export $(compgen -v | grep '^GRAID_VM_')
for s in $GRAID_VM_SCENARIOS; do
  run_one "$s" bash "/vm/scenarios/$s.sh"
done
if [[ -n $GRAID_VM_GUEST_SCRIPT ]]; then
  # run through its #! line when it has one (a /bin/sh script gets busybox sh), else bash
  if [[ $(head -c 2 "$GRAID_VM_GUEST_SCRIPT") == '#!' ]]; then
    run_one "guest:${GRAID_VM_GUEST_SCRIPT##*/}" "$GRAID_VM_GUEST_SCRIPT"
  else
    run_one "guest:${GRAID_VM_GUEST_SCRIPT##*/}" bash "$GRAID_VM_GUEST_SCRIPT"
  fi
fi

echo "passed=$passed failed=$failed uptime=$(up)s" >"$GRAID_SHARE/END"
echo "@@END passed=$passed failed=$failed uptime=$(up)s"
# Pitfall: sync can hang forever on a ublk device whose server died without recovery; give it
# 20 s (the results are already on the host: 9p writes are synchronous).
sync &
for ((i = 0; i < 100; i++)); do kill -0 $! 2>/dev/null || break; sleep 0.2; done
exit 0
