# shellcheck shell=bash
# tests/vm/guest/lib.sh: helpers for guest scenarios and guest scripts (bash). Start a scenario
# with
#     . /vm/lib.sh
# which turns on strict mode (set -Eeuo pipefail: an unexpected failure aborts the scenario and
# is recorded as a FAIL with its line), runs the cleanups registered with on_exit when the
# scenario ends, and makes it exit non-zero when any check failed. docs/testing.md lists it all.
#
# Results: one line per check, "RESULT <scenario> PASS|FAIL|INFO <check> [detail]" on the console
# and "<scenario> PASS|FAIL|INFO <check> [detail]" in the host's share/results.txt.

# shellcheck source=common.sh
. /vm/common.sh
set -Eeuo pipefail

GRAID_SCENARIO=${GRAID_SCENARIO:-$(basename "$0" .sh)}
GRAID_LOG_DIR=${GRAID_LOG_DIR:-$GRAID_SHARE/logs/$GRAID_SCENARIO}
GRAID_VM_SHORT=${GRAID_VM_SHORT:-0}
mkdir -p "$GRAID_LOG_DIR"

vm_failures=0
vm_cleanups=()

# say TEXT...: a progress line on the console
say() { echo "[$GRAID_SCENARIO $(up)s] $*"; }

# result PASS|FAIL|INFO NAME [DETAIL...]: records one result
result() {
  local status=$1 name=$2
  shift 2
  local line="$GRAID_SCENARIO $status $name${*:+ $*}"
  line=${line//$'\n'/ }
  echo "RESULT $line"
  echo "$line" >>"$GRAID_RESULTS"
  [[ $status != FAIL ]] || vm_failures=$((vm_failures + 1))
  return 0
}
pass() { result PASS "$@"; }
fail() { result FAIL "$@"; }
info() { result INFO "$@"; }

# die NAME DETAIL...: a FAIL that ends the scenario (for steps everything after depends on)
die() {
  fail "$@"
  exit 1
}

# is_short: true in the CI short form (--short); scenarios then use smaller sizes
is_short() { [[ $GRAID_VM_SHORT == 1 ]]; }

# check NAME COMMAND...: runs COMMAND (its output in $GRAID_LOG_DIR/NAME.log) and records PASS
# when it exits 0, else FAIL with the log's last lines on the console. Returns 0 either way, so
# the scenario goes on; CHECK_RC holds COMMAND's exit status.
CHECK_RC=0
check() {
  local name=$1 log=$GRAID_LOG_DIR/$1.log t0
  shift
  t0=$(up)
  CHECK_RC=0
  "$@" >"$log" 2>&1 || CHECK_RC=$?
  local secs
  secs=$(awk -v a="$t0" -v b="$(up)" 'BEGIN {printf "%.1f", b - a}')
  if ((CHECK_RC == 0)); then
    pass "$name" "(${secs}s)"
  else
    fail "$name" "exit status $CHECK_RC after ${secs}s: $*"
    tail -n 15 "$log" | sed 's/^/    | /'
  fi
  return 0
}

# require NAME COMMAND...: check, but a failure ends the scenario
require() {
  check "$@"
  ((CHECK_RC == 0)) || exit 1
}

# expect_eq NAME ACTUAL EXPECTED: PASS when the two strings are equal
expect_eq() {
  if [[ $2 == "$3" ]]; then pass "$1" "($2)"; else fail "$1" "got '$2', expected '$3'"; fi
}

# on_exit COMMAND [ARGS...]: runs COMMAND when the scenario ends (last registered, first run)
on_exit() {
  local q
  printf -v q '%q ' "$@"
  vm_cleanups+=("$q")
}

# wait_until SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds; 1 on time-out
wait_until() {
  local deadline=$(($1 * 5)) i
  shift
  for ((i = 0; i < deadline; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

vm_on_err() {
  local rc=$1 where=$2 cmd=$3
  # report once, from the scenario's own shell (subshells inherit the trap)
  [[ $BASHPID == "$$" && -z ${vm_aborted:-} ]] || return 0
  vm_aborted=1
  fail aborted "$where: '$cmd' exited $rc"
}

vm_on_exit() {
  local rc=$? i
  set +eE
  trap - ERR
  for ((i = ${#vm_cleanups[@]} - 1; i >= 0; i--)); do
    eval "${vm_cleanups[i]}" >>"$GRAID_LOG_DIR/cleanup.log" 2>&1 || true
  done
  if ((rc != 0)) && [[ -z ${vm_aborted:-} ]] && ((vm_failures == 0)); then
    fail aborted "exit status $rc"
  fi
  ((vm_failures == 0 && rc == 0)) || exit 1
  exit 0
}
trap 'vm_on_err $? "${BASH_SOURCE[0]##*/}:$LINENO" "$BASH_COMMAND"' ERR
trap vm_on_exit EXIT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------------------------
# graidd and graidctl. One daemon per scenario, with its own socket and state dir under
# /tmp/graid/<scenario>/ (graidctl finds the socket through $GRAID_SOCKET), so a scenario never
# sees an earlier one's PDs; the drives may still carry an earlier scenario's superblocks, which
# is why graid_create_pds passes --force.

GRAID_DIR=/tmp/graid/$GRAID_SCENARIO
export GRAID_SOCKET=$GRAID_DIR/graidd.sock
GRAID_STATE_DIR=$GRAID_DIR/state
GRAIDD_LOG=$GRAID_LOG_DIR/graidd.log
GRAIDD_PID=""

# graidd_start [graidd options...]: starts graidd (log: $GRAIDD_LOG, appended) and waits until it
# answers on its socket. Started again after a stop or kill, it finds the same state dir. The
# host's GRAID_VM_GRAIDD_ARGS come before the options given here.
graidd_start() {
  local extra=()
  read -r -a extra <<<"${GRAID_VM_GRAIDD_ARGS:-}"
  set -- "${extra[@]}" "$@"
  mkdir -p "$GRAID_DIR"
  if [[ -z ${vm_graidd_cleanup:-} ]]; then
    on_exit graidd_stop
    vm_graidd_cleanup=1
  fi
  echo "=== graidd_start $(up)s: graidd --socket $GRAID_SOCKET --state-dir $GRAID_STATE_DIR $*" >>"$GRAIDD_LOG"
  graidd --socket "$GRAID_SOCKET" --state-dir "$GRAID_STATE_DIR" "$@" >>"$GRAIDD_LOG" 2>&1 &
  GRAIDD_PID=$!
  local i
  for ((i = 0; i < 150; i++)); do
    graidctl version >/dev/null 2>&1 && return 0
    kill -0 "$GRAIDD_PID" 2>/dev/null || break
    sleep 0.2
  done
  echo "graidd did not come up; its log:" >&2
  tail -n 20 "$GRAIDD_LOG" >&2
  return 1
}

# graidd_stop: SIGTERM (a clean stop), SIGKILL after 60 s
graidd_stop() {
  [[ -n $GRAIDD_PID ]] || return 0
  kill -TERM "$GRAIDD_PID" 2>/dev/null || true
  local i
  for ((i = 0; i < 300; i++)); do
    kill -0 "$GRAIDD_PID" 2>/dev/null || break
    sleep 0.2
  done
  kill -KILL "$GRAIDD_PID" 2>/dev/null || true
  wait "$GRAIDD_PID" 2>/dev/null || true
  GRAIDD_PID=""
}

# graidd_kill: SIGKILL, as a crash would
graidd_kill() {
  [[ -n $GRAIDD_PID ]] || return 0
  kill -KILL "$GRAIDD_PID"
  wait "$GRAIDD_PID" 2>/dev/null || true
  GRAIDD_PID=""
}

# gctl ARGS...: graidctl ARGS, logged (command, output, exit status) in graidctl.log; when it
# fails, graid_last_error prints why in one line
gctl() {
  local rc=0 out err=$GRAID_LOG_DIR/.graidctl.err
  out=$(graidctl "$@" 2>"$err") || rc=$?
  {
    echo "+ graidctl $* (exit $rc)"
    [[ -z $out ]] || printf '%s\n' "$out"
    cat "$err"
  } >>"$GRAID_LOG_DIR/graidctl.log"
  [[ -z $out ]] || printf '%s\n' "$out"
  if ((rc != 0)); then
    # with --format json the reason is the error object on stdout, else a line on stderr
    {
      echo -n "graidctl $* (exit $rc): "
      jq -r '.error.message? // empty' <<<"$out" 2>/dev/null || true
      cat "$err"
    } | tr '\n' ' ' >"$GRAID_LOG_DIR/.graidctl.last"
    cat "$GRAID_LOG_DIR/.graidctl.last" >&2
    echo >&2
  fi
  return "$rc"
}

# graid_last_error: why the last failed graidctl command failed (one line)
graid_last_error() { cat "$GRAID_LOG_DIR/.graidctl.last" 2>/dev/null || echo "(no graidctl failure recorded)"; }

# gjson ARGS...: graidctl --format json ARGS, the result on stdout (compact JSON)
gjson() {
  local out
  out=$(gctl --format json "$@") || return
  jq -c 'if type == "object" and has("Result") then .Result else . end' <<<"$out"
}

# graid_create_pds PATH...: registers the paths as PDs (--force: erasing a graid superblock an
# earlier scenario left on them); prints their ids, comma-separated
graid_create_pds() {
  local out
  out=$(gjson create pd --force "$@") || return
  jq -r '[.pds[].pd_id | tostring] | join(",")' <<<"$out"
}

# graid_create_dg LEVEL PD_IDS [create dg options...]: prints the new DG's id
graid_create_dg() {
  local out
  out=$(gjson create dg "$@") || return
  jq -r .dg_id <<<"$out"
}

# graid_create_vd DG SIZE [create vd options...]: prints the new VD's id. Without --ublk or
# --no-ublk graidd also exports it as a ublk device (its default where the kernel has ublk).
graid_create_vd() {
  local dg=$1 size=$2 out
  shift 2
  out=$(gjson create vd "$dg" --size "$size" "$@") || return
  jq -r .vd_id <<<"$out"
}

# graid_ublk_device DG VD: prints the VD's ublk block device (describe vd: the "ublk" entry of
# "exports") once the node exists
graid_ublk_device() {
  local out dev
  out=$(gjson describe vd "$1" "$2") || return
  dev=$(jq -r '[.exports[] | select(.kind == "ublk")][0].device // empty' <<<"$out")
  if [[ -z $dev ]]; then
    echo "describe vd $1 $2 shows no ublk export: $out" >&2
    return 1
  fi
  wait_until 30 test -b "$dev" || { echo "$dev did not appear" >&2; return 1; }
  echo "$dev"
}

# graid_export_ublk DG VD: exports the VD as a ublk block device (graidctl export vd --ublk);
# prints its path once it exists
graid_export_ublk() {
  gctl export vd "$1" "$2" --ublk >/dev/null || return
  graid_ublk_device "$1" "$2"
}

# graid_export_state DG VD KIND: the state of the VD's export of KIND (ublk, nbd), e.g. live
graid_export_state() {
  gjson describe vd "$1" "$2" | jq -r --arg k "$3" '[.exports[] | select(.kind == $k)][0].state // "none"'
}

# graid_dg_state DG: optimal, initialising, degraded, rebuilding, checking, failed or offline
graid_dg_state() { gjson describe dg "$1" | jq -r .state; }

# graid_wait_initialised DG [SECONDS]: waits until the DG's background initialisation (which
# create dg leaves running on drives not known to read zeroes) is done: describe dg has no
# "init" object. Fails after SECONDS (default 300).
graid_wait_initialised() {
  local dg=$1
  graid_initialised_now() { [[ $(gjson describe dg "$dg" | jq -r '.init == null') == true ]]; }
  wait_until "${2:-300}" graid_initialised_now
}

# graid_pd_state PD: free, member, spare, offline, failed or missing
graid_pd_state() { gjson describe pd "$1" | jq -r .state; }

# graid_delete_dg DG: unexports and deletes its VDs, then the DG (its PDs become free)
graid_delete_dg() {
  local vd
  for vd in $(gjson describe dg "$1" | jq -r '.vds[]?.vd_id'); do
    gctl delete vd "$1" "$vd" --confirm >/dev/null
  done
  gctl delete dg "$1" --confirm >/dev/null
}

# ---------------------------------------------------------------------------------------------
# fio. Jobs run with io_uring and O_DIRECT; the full output of job NAME is in fio-NAME.log.

FIO_COMMON=(--ioengine=io_uring --direct=1 --randrepeat=1 --group_reporting --verify_state_save=0)

# fio_job NAME FIO_ARGS...: runs one fio job; returns fio's exit status; prints a summary line
fio_job() {
  local name=$1 rc=0 log=$GRAID_LOG_DIR/fio-$1.log
  shift
  fio --name="$name" "${FIO_COMMON[@]}" "$@" >"$log" 2>&1 || rc=$?
  echo "fio $name exit $rc: $(grep -oE '(read|write): IOPS=[^,]+, BW=[^ ]+' "$log" | tr '\n' ' ')"
  ((rc == 0)) || grep -iE 'error|bad|fail|verify' "$log" | head -n 10 >&2
  return "$rc"
}

# fio_verify NAME FIO_ARGS...: writes with a crc32c in every block, then reads it all back
# and checks it (fio --verify); e.g. fio_verify rw --filename=/dev/ublkb0 --rw=randwrite --bs=4k --size=64M
fio_verify() {
  local name=$1
  shift
  fio_job "$name" --verify=crc32c --do_verify=1 --verify_fatal=1 "$@"
}

# fio_reverify NAME FIO_ARGS...: reads back and checks what fio_verify wrote with the same
# FIO_ARGS (fio --verify_only), e.g. after a restart or with a member gone
fio_reverify() {
  local name=$1
  shift
  fio_job "$name" --verify=crc32c --verify_only=1 --verify_fatal=1 "$@"
}

# ---------------------------------------------------------------------------------------------
# file system round trip

# fs_roundtrip PREFIX DEV: mkfs.ext4 on DEV, mount, copy files, checksum, unmount, mount again,
# checksum again, unmount, e2fsck -fn. One result per step, named PREFIX-....
fs_roundtrip() {
  local p=$1 dev=$2 mnt=/mnt/fs-$1 mb=64
  is_short && mb=16
  mkdir -p "$mnt"
  check "$p-mkfs" mkfs.ext4 -q -F "$dev"
  ((CHECK_RC == 0)) || return 0
  check "$p-mount" mount -t ext4 "$dev" "$mnt"
  ((CHECK_RC == 0)) || return 0
  on_exit umount -l "$mnt"
  dd if=/dev/urandom of=/tmp/fs-data.bin bs=1M count="$mb" status=none
  check "$p-copy" cp -a /tmp/fs-data.bin /usr/local/bin /vm /usr/lib/modules "$mnt/"
  rm -f /tmp/fs-data.bin
  (cd "$mnt" && find . -type f -exec sha256sum {} + | sort -k 2) >"$GRAID_LOG_DIR/$p-sums"
  check "$p-umount" umount "$mnt"
  check "$p-remount" mount -t ext4 "$dev" "$mnt"
  ((CHECK_RC == 0)) || return 0
  check "$p-checksums" bash -c "cd $mnt && find . -type f -exec sha256sum {} + | sort -k 2 | diff -u $GRAID_LOG_DIR/$p-sums -"
  info "$p-files" "$(wc -l <"$GRAID_LOG_DIR/$p-sums") files, $(du -sm "$mnt" | cut -f1) MiB"
  check "$p-umount2" umount "$mnt"
  check "$p-fsck" e2fsck -fn "$dev"
}
