#!/bin/bash
# A guest script (tests/vm/run.sh --kernel 6.12|7.3|both --guest-script tests/vm/examples/md-jobs.sh):
# md-compare's five profiles (4K random write and read, 64K and 1M sequential write, 8K 70/30) on
# RAID5 and RAID6 over five brd RAM disks, fio QD32 per job at one job and at two (both vCPUs,
# so both ublk queues), for md and for graidd in several configurations, with the CPU each
# request cost: fio's, the RAID server's (md's raid thread; graidd) in user space and in the
# kernel, and the rest of the kernel's, from /proc over the same window as fio's figures.
#
# graidd configurations: GRAID_VM_JOBS_CONFIGS, a list of NAME=ARGS separated by ';' (ARGS with
# commas for spaces), default "kernel=--ublk-copy,kernel;zero=--ublk-copy,zero;zero-spread=--ublk-copy,zero,--ublk-spread,on"
# (graidd's default, auto, is zero on RAID0/1/10 where the kernel has AUTO_BUF_REG, else kernel).
# GRAID_VM_JOBS (default "1 2") the job counts, GRAID_VM_PERF_RUNTIME (default 5) seconds per run.
# Asserts only that every run works; figures are printed (table.txt), never asserted.
# docs/performance.md shows what it measured.
# shellcheck source=../guest/lib.sh
. /vm/lib.sh

runtime=${GRAID_VM_PERF_RUNTIME:-5}
ramp=1
jobs_list=${GRAID_VM_JOBS:-1 2}
configs=${GRAID_VM_JOBS_CONFIGS:-kernel=--ublk-copy,kernel;zero=--ublk-copy,zero;zero-spread=--ublk-copy,zero,--ublk-spread,on}
rmmod brd 2>/dev/null || true
modprobe brd rd_nr=5 rd_size=131072
members=(/dev/ram0 /dev/ram1 /dev/ram2 /dev/ram3 /dev/ram4)
# Every page of the RAM disks allocated up front (a first write to a brd page allocates it).
for m in "${members[@]}"; do
  dd if=/dev/zero of="$m" bs=1M oflag=direct status=none 2>/dev/null || true
done
ncpu=$(nproc)
hz=100  # USER_HZ, the unit of /proc/stat and /proc/PID/stat times
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
# thread_ticks PID...: "TID USER SYSTEM" ticks, one line per thread of the given processes
thread_ticks() {
  local p t
  for p in "$@"; do
    for t in /proc/"$p"/task/*; do
      awk -v tid="${t##*/}" '{print tid, $14, $15}' "$t/stat" 2>/dev/null || true
    done
  done
}
# ticks_delta BEFORE AFTER: "USER SYSTEM" ticks spent between two thread_ticks samples by the
# threads in both (a thread that ended in between takes its times with it: not counted, rather
# than counted negative)
ticks_delta() {
  awk 'NR == FNR { u[$1] = $2; s[$1] = $3; next }
       ($1 in u) { du += $2 - u[$1]; ds += $3 - s[$1] }
       END { printf "%d %d\n", du, ds }' <(echo "$1") <(echo "$2")
}

# PROFILES: name, unit, fio arguments. Sequential writes first, so the reads read written blocks.
PROFILES=(
  "1m-seqwrite MB/s --rw=write --bs=1M"
  "64k-seqwrite MB/s --rw=write --bs=64k"
  "4k-randwrite IOPS --rw=randwrite --bs=4k"
  "4k-randread IOPS --rw=randread --bs=4k"
  "8k-mix70 IOPS --rw=randrw --rwmixread=70 --bs=8k"
)
SHOWN=(4k-randwrite 4k-randread 8k-mix70 64k-seqwrite 1m-seqwrite)

# run KEY DEV JOBS UNIT SERVER_PIDS FIO-ARGS...: one fio run; FIG[KEY/*]: the figure in UNIT, and
# us of CPU per request (fio, server user, server kernel, other kernel, all)
run() {
  local key=$1 dev=$2 jobs=$3 unit=$4 server=$5 out fio_pid b0 b1 f0 f1 s0 s1 fu fs su ss
  shift 5
  out=$GRAID_LOG_DIR/${key//\//_}.json
  # Each job its own 128 MiB of the first 256 MiB.
  fio --name=run "${FIO_COMMON[@]}" --filename="$dev" "$@" --iodepth=32 --numjobs="$jobs" \
    --size=$((256 / jobs))M --offset_increment=$((256 / jobs))M --time_based \
    --runtime=$((runtime + 2)) --ramp_time="$ramp" --output-format=json --output="$out" \
    >"$out.err" 2>&1 &
  fio_pid=$!
  sleep "$ramp"
  local fios
  fios=$(pids_named fio | tr '\n' ' ')
  read -r b0 _ < <(busy_idle)
  # shellcheck disable=SC2086
  f0=$(thread_ticks $fios)
  # shellcheck disable=SC2086
  s0=$(thread_ticks $server)
  sleep "$runtime"
  read -r b1 _ < <(busy_idle)
  # shellcheck disable=SC2086
  f1=$(thread_ticks $fios)
  # shellcheck disable=SC2086
  s1=$(thread_ticks $server)
  read -r fu fs < <(ticks_delta "$f0" "$f1")
  read -r su ss < <(ticks_delta "$s0" "$s1")
  check "fio-${key//\//-}" wait "$fio_pid"
  ((CHECK_RC == 0)) || return 0
  local iops fig
  iops=$(jq '.jobs[0] | .read.iops + .write.iops' "$out")
  if [[ $unit == IOPS ]]; then
    fig=$(jq '.jobs[0] | .read.iops + .write.iops | floor' "$out")
  else
    fig=$(jq '.jobs[0] | (.read.bw_bytes + .write.bw_bytes) / 1000000 | floor' "$out")
  fi
  FIG[$key/fig]=$fig
  local vals keys=(fio suser ssys other total) i
  read -r -a vals < <(awk -v iops="$iops" -v t="$runtime" \
    -v hz="$hz" -v fu=$((fu + fs)) -v su="$su" -v ss="$ss" \
    -v busy=$((b1 - b0)) 'BEGIN {
      k = 1e6 / hz / (iops * t)
      other = busy - fu - su - ss; if (other < 0) other = 0
      printf "%.1f %.1f %.1f %.1f %.1f\n", fu * k, su * k, ss * k, other * k, busy * k
    }')
  for i in "${!keys[@]}"; do FIG[$key/${keys[$i]}]=${vals[$i]}; done
  say "$key: $fig $unit; us of CPU per request: fio ${FIG[$key/fio]}, server user" \
    "${FIG[$key/suser]} kernel ${FIG[$key/ssys]}, other ${FIG[$key/other]}, all ${FIG[$key/total]}"
}

# all_profiles WHO LEVEL DEV SERVER_PIDS: every profile at every job count
all_profiles() {
  local who=$1 level=$2 dev=$3 server=$4 p name unit args jobs
  for jobs in $jobs_list; do
    for p in "${PROFILES[@]}"; do
      read -r name unit args <<<"$p"
      # shellcheck disable=SC2086
      run "r$level/$jobs/$who/$name" "$dev" "$jobs" "$unit" "$server" $args
    done
  done
}

IFS=';' read -r -a CONFIGS <<<"$configs"
whos=(md)
for c in "${CONFIGS[@]}"; do whos+=("${c%%=*}"); done

for level in 5 6; do
  require "md$level-create" mdadm --create /dev/md$level --run --level=$level --raid-devices=5 \
    --chunk=64 --assume-clean --bitmap=none --metadata=1.2 "${members[@]}"
  all_profiles md "$level" /dev/md$level "$(pids_named "md${level}_raid${level}")"
  mdadm --stop /dev/md$level >/dev/null
  mdadm --zero-superblock "${members[@]}" >/dev/null
  for c in "${CONFIGS[@]}"; do
    who=${c%%=*} args=${c#*=}
    read -r -a gargs <<<"${args//,/ }"
    require "graidd-start-$level-$who" graidd_start "${gargs[@]}"
    pds=$(graid_create_pds "${members[@]}") || die create-pd "$(graid_last_error)"
    dg=$(graid_create_dg raid$level "$pds" --strip 64K --assume-clean)
    vd=$(graid_create_vd "$dg" 256M --no-ublk)
    dev=$(graid_export_ublk "$dg" "$vd")
    info "r$level-$who-device" "$(gjson describe vd "$dg" "$vd" | jq -c '[.exports[] | select(.kind == "ublk")][0] | {queues, depth, copy, spread}')"
    all_profiles "$who" "$level" "$dev" "$GRAIDD_PID"
    graid_delete_dg "$dg" || fail "delete-dg-$level-$who" "$(graid_last_error)"
    gctl delete pd "$pds" >/dev/null || fail "delete-pd-$level-$who" "$(graid_last_error)"
    graidd_stop
  done
done

{
  printf '\n%s, %s vCPUs, five brd members, 64 KiB strip, fio QD32 per job, %ss per run\n' \
    "$(uname -r)" "$ncpu" "$runtime"
  printf 'figure (IOPS or MB/s), ratio to md at the same job count, and us of CPU per request:\n'
  printf 'fio / server user / server kernel / other kernel / all\n'
  for level in 5 6; do
    for jobs in $jobs_list; do
      printf '\nRAID%s, %s job(s)\n' "$level" "$jobs"
      printf '%-14s' profile
      for who in "${whos[@]}"; do printf ' %34s' "$who"; done
      printf '\n'
      for name in "${SHOWN[@]}"; do
        printf '%-14s' "$name"
        for who in "${whos[@]}"; do
          k=r$level/$jobs/$who/$name m=r$level/$jobs/md/$name
          if [[ -z ${FIG[$k/fig]:-} ]]; then
            printf ' %34s' -
            continue
          fi
          ratio=$(awk -v a="${FIG[$k/fig]}" -v b="${FIG[$m/fig]:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }')
          printf ' %34s' "${FIG[$k/fig]} ${ratio}x ${FIG[$k/fio]}/${FIG[$k/suser]}/${FIG[$k/ssys]}/${FIG[$k/other]}/${FIG[$k/total]}"
        done
        printf '\n'
      done
    done
  done
} | tee "$GRAID_LOG_DIR/table.txt"
pass table "$GRAID_LOG_DIR/table.txt"
