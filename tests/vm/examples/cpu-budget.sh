#!/bin/bash
# A guest script (tests/vm/run.sh --guest-script tests/vm/examples/cpu-budget.sh): where the CPU
# goes per request, md against graid, on the profiles where issue 10's targets are not met (RAID5
# 4K random write, RAID5 8K 70/30, RAID6 4K random write), over five brd RAM disks, fio QD32, one
# job, as md-compare runs them.
#
# For each run it samples, over the same window, the CPU time of fio, of graidd (user and kernel
# apart), of md's raid thread, and of the whole guest (/proc/stat), and divides by the requests
# done: microseconds of CPU per request. Then, per profile, it prints the CPU a request may take
# at the target rate (the guest's CPUs / (target x md's IOPS)) beside graid's kernel-side floor:
# fio's share plus graidd's kernel time plus the rest of the kernel's (softirqs, kworkers), which
# no change to graid's user-space code removes while the member I/O per request stays the same.
# With GRAID_VM_BUDGET_BASE=NAME (a second graidd copied in with --extra-bin, e.g. an older build
# renamed graidd-base, or graidd itself) and optionally GRAID_VM_BUDGET_BASE_ARGS (graidd options
# for it), graid's runs are repeated with that binary, alternating, for an A/B of two builds or
# two settings in one boot. Asserts only that every run works; figures are printed, never asserted.
# docs/performance.md shows what it measured. (Counting graidd's system calls with `perf stat -e
# raw_syscalls:sys_enter` crashed the guest kernel once under TCG, in the int3 patching that
# enables the tracepoint, so the script does not.)
# shellcheck source=../guest/lib.sh
. /vm/lib.sh

runtime=${GRAID_VM_PERF_RUNTIME:-5}
ramp=1
rmmod brd 2>/dev/null || true
modprobe brd rd_nr=5 rd_size=131072
members=(/dev/ram0 /dev/ram1 /dev/ram2 /dev/ram3 /dev/ram4)
# Every page of the RAM disks allocated up front: a first write to a brd page allocates and
# clears it, which is not what either RAID layer costs.
for m in "${members[@]}"; do
  dd if=/dev/zero of="$m" bs=1M oflag=direct status=none 2>/dev/null || true
done
ncpu=$(nproc)
hz=100  # USER_HZ, the unit of /proc/stat and /proc/PID/stat times (100 on every Linux ABI)
declare -A FIG=()

# pids_named NAME: the processes whose comm is NAME (the guest has no pgrep)
pids_named() {
  local d c
  for d in /proc/[0-9]*; do
    read -r c <"$d/comm" 2>/dev/null || continue
    [[ $c == "$1" ]] && echo "${d#/proc/}"
  done
  return 0
}
# busy_idle: "BUSY IDLE" ticks of all CPUs
busy_idle() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6}' /proc/stat; }
# ticks_of PID...: "USER SYSTEM" ticks of every thread of the given processes
ticks_of() {
  local p t u=0 s=0 a b
  for p in "$@"; do
    for t in /proc/"$p"/task/*; do
      read -r a b < <(awk '{print $14, $15}' "$t/stat" 2>/dev/null) || continue
      u=$((u + a)) s=$((s + b))
    done
  done
  echo "$u $s"
}

# run NAME DEV SERVER_PIDS FIO-ARGS...: one fio run; FIG[NAME/*] = IOPS and us of CPU per request
run() {
  local name=$1 dev=$2 server=$3 out fio_pid b0 i0 b1 i1 fu0 fs0 fu1 fs1 su0 ss0 su1 ss1
  shift 3
  out=$GRAID_LOG_DIR/$name.json
  fio --name="$name" "${FIO_COMMON[@]}" --filename="$dev" "$@" --iodepth=32 --numjobs=1 \
    --size=256M --time_based --runtime=$((runtime + 1)) --ramp_time="$ramp" --output-format=json \
    --output="$out" >/dev/null 2>&1 &
  fio_pid=$!
  # The window: $runtime seconds after the ramp, ending a second before fio does (a process
  # that has gone takes its times with it).
  sleep "$ramp"
  local fios
  fios=$(pids_named fio | tr '\n' ' ')
  read -r b0 i0 < <(busy_idle)
  # shellcheck disable=SC2086
  read -r fu0 fs0 < <(ticks_of $fios)
  # shellcheck disable=SC2086
  read -r su0 ss0 < <(ticks_of $server)
  sleep "$runtime"
  read -r b1 i1 < <(busy_idle)
  # shellcheck disable=SC2086
  read -r fu1 fs1 < <(ticks_of $fios)
  # shellcheck disable=SC2086
  read -r su1 ss1 < <(ticks_of $server)
  check "fio-$name" wait "$fio_pid"
  ((CHECK_RC == 0)) || return 0
  local iops
  iops=$(jq '.jobs[0] | .read.iops + .write.iops' "$out")
  # us per request = ticks / hz / (iops x seconds) x 1e6
  local vals keys=(iops fio suser ssys other idle total) i
  read -r -a vals < <(awk -v iops="$iops" -v t="$runtime" \
    -v hz="$hz" -v fu=$((fu1 - fu0 + fs1 - fs0)) -v su=$((su1 - su0)) -v ss=$((ss1 - ss0)) \
    -v busy=$((b1 - b0)) -v idle=$((i1 - i0)) 'BEGIN {
      k = 1e6 / hz / (iops * t)
      other = busy - fu - su - ss; if (other < 0) other = 0
      printf "%d %.1f %.1f %.1f %.1f %.0f %.1f\n", iops, fu * k, su * k, ss * k, other * k,
        100 * idle / (busy + idle), busy * k
    }')
  for i in "${!keys[@]}"; do FIG[$name/${keys[$i]}]=${vals[$i]}; done
  say "$name: ${FIG[$name/iops]} IOPS; us of CPU per request: fio ${FIG[$name/fio]}," \
    "server user ${FIG[$name/suser]} kernel ${FIG[$name/ssys]}, other kernel ${FIG[$name/other]}," \
    "all ${FIG[$name/total]}; idle ${FIG[$name/idle]}%"
}

# PROFILES: name, RAID level, fio arguments
PROFILES=(
  "r5-4k-randwrite 5 --rw=randwrite --bs=4k"
  "r5-8k-mix70 5 --rw=randrw --rwmixread=70 --bs=8k"
  "r6-4k-randwrite 6 --rw=randwrite --bs=4k"
)
declare -A TARGETS=([r5-4k-randwrite]=1.5 [r5-8k-mix70]=1.0 [r6-4k-randwrite]=1.0)

for level in 5 6; do
  require "md$level-create" mdadm --create /dev/md$level --run --level=$level --raid-devices=5 \
    --chunk=64 --assume-clean --bitmap=none --metadata=1.2 "${members[@]}"
  mdthread=$(pids_named "md${level}_raid${level}")
  for p in "${PROFILES[@]}"; do
    read -r pname plevel pargs <<<"$p"
    [[ $plevel == "$level" ]] || continue
    # shellcheck disable=SC2086
    run "md-$pname" /dev/md$level "$mdthread" $pargs
  done
  mdadm --stop /dev/md$level >/dev/null
  mdadm --zero-superblock "${members[@]}" >/dev/null

  builds=(graid)
  [[ -n ${GRAID_VM_BUDGET_BASE:-} ]] && builds=(graid base graid base)
  round=0
  for who in "${builds[@]}"; do
    round=$((round + 1))
    if [[ $who == base ]]; then
      # The other build, started under graidd's name so graidd_start finds it
      mkdir -p /tmp/base-bin && ln -sf "$(command -v "$GRAID_VM_BUDGET_BASE")" /tmp/base-bin/graidd
      local_args=()
      read -r -a local_args <<<"${GRAID_VM_BUDGET_BASE_ARGS:-}"
      PATH=/tmp/base-bin:$PATH require "graidd-start-$level-$round" graidd_start "${local_args[@]}"
    else
      require "graidd-start-$level-$round" graidd_start
    fi
    pds=$(graid_create_pds "${members[@]}") || die create-pd "$(graid_last_error)"
    dg=$(graid_create_dg raid$level "$pds" --strip 64K --assume-clean)
    vd=$(graid_create_vd "$dg" 256M --no-ublk)
    dev=$(graid_export_ublk "$dg" "$vd")
    for p in "${PROFILES[@]}"; do
      read -r pname plevel pargs <<<"$p"
      [[ $plevel == "$level" ]] || continue
      name=$who-$pname
      ((round > 2)) && name=$who-$pname-2
      # shellcheck disable=SC2086
      run "$name" "$dev" "$GRAIDD_PID" $pargs
    done
    graid_delete_dg "$dg" || fail "delete-dg-$level-$round" "$(graid_last_error)"
    gctl delete pd "$pds" >/dev/null || fail "delete-pd-$level-$round" "$(graid_last_error)"
    graidd_stop
  done
done

{
  printf '\nus of CPU per request (%s vCPUs, fio QD32 one job, %ss): fio, the RAID server (md: its\n' "$ncpu" "$runtime"
  printf 'raid thread; graid: graidd) in user space and in the kernel, the rest of the kernel, all\n'
  printf '%-24s %8s %6s %6s %6s %6s %6s %5s\n' run IOPS fio s-user s-kern other all idle%
  for p in "${PROFILES[@]}"; do
    read -r pname _ <<<"$p"
    for n in md-$pname graid-$pname base-$pname graid-$pname-2 base-$pname-2; do
      [[ -n ${FIG[$n/iops]:-} ]] || continue
      printf '%-24s %8s %6s %6s %6s %6s %6s %5s\n' "$n" "${FIG[$n/iops]}" "${FIG[$n/fio]}" \
        "${FIG[$n/suser]}" "${FIG[$n/ssys]}" "${FIG[$n/other]}" "${FIG[$n/total]}" \
        "${FIG[$n/idle]}"
    done
  done
  printf '\nAt the target rate a request may take (vCPUs / (target x md IOPS)); graid'"'"'s kernel-side floor\n'
  printf '(fio + graidd kernel + other kernel, as measured, with zero user-space cost and perfect spread):\n'
  printf '%-18s %7s %10s %10s %8s %s\n' profile target 'budget us' 'floor us' 'now us' verdict
  for p in "${PROFILES[@]}"; do
    read -r pname _ <<<"$p"
    m=${FIG[md-$pname/iops]:-} g=graid-$pname
    [[ -n $m && -n ${FIG[$g/iops]:-} ]] || continue
    awk -v name="$pname" -v f="${TARGETS[$pname]}" -v m="$m" -v n="$ncpu" -v fio="${FIG[$g/fio]}" \
      -v ks="${FIG[$g/ssys]}" -v ko="${FIG[$g/other]}" -v all="${FIG[$g/total]}" 'BEGIN {
        budget = n * 1e6 / (f * m); floor = fio + ks + ko
        printf "%-18s %6.1fx %10.1f %10.1f %8.1f %s\n", name, f, budget, floor, all,
          (floor > budget ? "out of reach without fewer kernel cycles per request" : "reachable in principle")
      }'
  done
} | tee "$GRAID_LOG_DIR/table.txt"
