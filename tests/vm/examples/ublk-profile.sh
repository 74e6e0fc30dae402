#!/bin/bash
# A guest script (tests/vm/run.sh --guest-script tests/vm/examples/ublk-profile.sh
# [--extra-bin /usr/bin/perf]): where the time goes on small random I/O through ublk, beside md.
# RAID5 over five brd RAM disks, 64 KiB strips; fio 4K random write and read (QD32, one job)
# and 4K random write with two jobs, on md RAID5, graid with its default thread placement
# (--ublk-affinity any) and graid with every I/O thread pinned to its queue's CPUs
# (--ublk-affinity queue). With perf in the guest (--extra-bin), a system-wide profile of graid's
# one-job random write goes to share/logs/<script>/perf-*.txt. Asserts that every run works and
# that the two affinity modes place the I/O threads as documented; speed is printed, never
# asserted. docs/ublk.md ("Threads and CPUs") shows what it measured.
# shellcheck source=../guest/lib.sh
. /vm/lib.sh

runtime=${GRAID_VM_PERF_RUNTIME:-5}
rmmod brd 2>/dev/null || true
modprobe brd rd_nr=5 rd_size=131072
members=(/dev/ram0 /dev/ram1 /dev/ram2 /dev/ram3 /dev/ram4)
have_perf=0
if command -v perf >/dev/null; then
  have_perf=1
  echo 0 >/proc/sys/kernel/kptr_restrict
  echo -1 >/proc/sys/kernel/perf_event_paranoid
fi
declare -A FIG=()

# run TARGET DEV RW JOBS [perf]: one fio run; FIG[TARGET/RW/JOBS] = IOPS
run() {
  local target=$1 dev=$2 rw=$3 jobs=$4 profile=${5:-} name out perf_pid=""
  name=$target-$rw-j$jobs
  out=$GRAID_LOG_DIR/$name.json
  if [[ -n $profile && $have_perf == 1 ]]; then
    # three seconds in the middle of the run, every CPU (cpu-clock: TCG has no PMU)
    (sleep 2 && perf record -a -F 1999 -o "/tmp/$name.data" -- sleep 3 >/dev/null 2>&1) &
    perf_pid=$!
  fi
  check "fio-$name" fio --name="$name" "${FIO_COMMON[@]}" --filename="$dev" --rw="$rw" --bs=4k \
    --iodepth=32 --numjobs="$jobs" --size=256M --time_based --runtime="$runtime" --ramp_time=1 \
    --output-format=json --output="$out"
  if [[ -n $perf_pid ]]; then
    wait "$perf_pid" || true
    perf report -i "/tmp/$name.data" --no-children --sort comm,dso,sym --stdio 2>/dev/null |
      grep -v '^#' | grep -v '^$' | sed -n 1,60p >"$GRAID_LOG_DIR/perf-$name.txt" || true
    perf report -i "/tmp/$name.data" --no-children --sort comm --stdio 2>/dev/null |
      grep -v '^#' | grep -v '^$' | sed -n 1,10p >>"$GRAID_LOG_DIR/perf-$name.txt" || true
  fi
  ((CHECK_RC == 0)) || return 0
  FIG[$target/$rw/$jobs]=$(jq '.jobs[0] | .read.iops + .write.iops | floor' "$out")
  say "$name: ${FIG[$target/$rw/$jobs]} IOPS"
}

workload() {  # TARGET DEV [perf]
  run "$1" "$2" randwrite 1 "${3:-}"
  run "$1" "$2" randread 1
  run "$1" "$2" randwrite 2
}

# cpus_of TASK_DIR: the task's allowed CPUs
cpus_of() { awk '/^Cpus_allowed_list/ {print $2}' "$1/status"; }

# affinity_ok MODE DEV: the I/O threads placed as --ublk-affinity MODE says
affinity_ok() {
  local mode=$1 dev=$2 t name all i want
  all=$(cpus_of "/proc/$GRAIDD_PID")
  for t in /proc/"$GRAIDD_PID"/task/*; do
    name=$(cat "$t/comm")
    [[ $name == graidd-io* ]] || continue
    i=${name#graidd-io}
    want=$all
    [[ $mode == queue ]] && want=$(cat "/sys/block/$(basename "$dev")/mq/$i/cpu_list")
    echo "$name: $(cpus_of "$t") (want $want)"
    [[ $(cpus_of "$t") == "$want" ]] || return 1
  done
}

require md-create mdadm --create /dev/md5 --run --level=5 --raid-devices=5 --chunk=64 \
  --assume-clean --bitmap=none --metadata=1.2 "${members[@]}"
workload md5 /dev/md5
mdadm --stop /dev/md5 >/dev/null
mdadm --zero-superblock "${members[@]}" >/dev/null

for mode in any queue; do
  require "graidd-start-$mode" graidd_start --ublk-affinity "$mode"
  pds=$(graid_create_pds "${members[@]}") || die create-pd "$(graid_last_error)"
  dg=$(graid_create_dg raid5 "$pds" --strip 64K --assume-clean)
  vd=$(graid_create_vd "$dg" 256M --no-ublk)
  dev=$(graid_export_ublk "$dg" "$vd")
  check "affinity-$mode" affinity_ok "$mode" "$dev"
  workload "graid5-$mode" "$dev" "$([[ $mode == any ]] && echo perf)"
  graid_delete_dg "$dg" || fail "delete-dg-$mode" "$(graid_last_error)"
  gctl delete pd "$pds" >/dev/null || fail "delete-pd-$mode" "$(graid_last_error)"
  graidd_stop
done

ratio() { awk -v g="${1:-}" -v m="${2:-}" 'BEGIN { if (g == "" || m == "" || m == 0) print "n/a"; else printf "%.2f", g / m }'; }
{
  printf '\nRAID5 over 5 brd RAM disks, fio 4K QD32, %ss runs (IOPS; ratio to md)\n' "$runtime"
  printf '%-18s %10s %10s %7s %10s %7s\n' workload md5 graid-any ratio graid-queue ratio
  for w in randwrite/1 randread/1 randwrite/2; do
    m=${FIG[md5/$w]:-} a=${FIG[graid5-any/$w]:-} q=${FIG[graid5-queue/$w]:-}
    printf '%-18s %10s %10s %7s %10s %7s\n' "${w%/*} x${w#*/} job(s)" "${m:-n/a}" "${a:-n/a}" \
      "$(ratio "$a" "$m")" "${q:-n/a}" "$(ratio "$q" "$m")"
  done
} | tee "$GRAID_LOG_DIR/table.txt"
