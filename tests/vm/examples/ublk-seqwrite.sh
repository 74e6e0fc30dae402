#!/bin/bash
# A guest script (tests/vm/run.sh --kernel 6.12|7.3 --guest-script
# tests/vm/examples/ublk-seqwrite.sh): why graid's sequential writes through ublk differ between
# kernels. RAID5 over five brd RAM disks, 64 KiB strips, md beside graid, graid once per
# --ublk-copy mode (GRAID_VM_SEQ_COPY, default "kernel user zero"); for each target it records
# the block queue's limits and scheduler as the kernel set them, then runs fio 64K and 1M
# sequential writes and a 64K sequential read (QD32, one job) and reports, from the device's own
# counters (/sys/block/X/stat), the requests the kernel sent (count, average size, merges), the
# CPU time graidd's threads and the whole guest spent per request, and graidd's CPU by thread
# name. Asserts only that every run works; the figures are printed
# (share/logs/ublk-seqwrite/table.txt). Run it on an idle host: the guest's figures follow the
# host's load.
# shellcheck source=../guest/lib.sh
. /vm/lib.sh

runtime=${GRAID_VM_PERF_RUNTIME:-5}
rmmod brd 2>/dev/null || true
modprobe brd rd_nr=5 rd_size=131072
members=(/dev/ram0 /dev/ram1 /dev/ram2 /dev/ram3 /dev/ram4)
tick=100  # USER_HZ: what /proc/stat and /proc/PID/stat count in on Linux
rows=()

limits() {  # DEV: the queue settings that shape requests
  local q=/sys/block/$(basename "$1")/queue f out=""
  for f in scheduler max_sectors_kb max_hw_sectors_kb max_segments max_segment_size nr_requests \
    minimum_io_size optimal_io_size rotational write_cache wbt_lat_usec nomerges rq_affinity \
    chunk_sectors; do
    [[ -r $q/$f ]] && out+="$f=$(tr -d '\n' <"$q/$f") "
  done
  echo "$out"
}

busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }  # user nice sys irq softirq
thread_ticks() {  # PID: "comm ticks" per thread (user + system), threads of one name summed
  [[ -n ${1:-} && -d /proc/$1 ]] || return 0
  local t
  for t in /proc/"$1"/task/*; do
    printf '%s %s\n' "$(sed 's/[0-9]*$//' "$t/comm")" "$(awk '{print $14 + $15}' "$t/stat")"
  done | awk '{s[$1] += $2} END {for (n in s) print n, s[n]}' | sort
}
proc_ticks() {  # PID: user + system ticks of the process (threads that exited included)
  [[ -n ${1:-} && -d /proc/$1 ]] || { echo 0; return; }
  awk '{print $14 + $15}' /proc/"$1"/stat
}

# run TARGET DEV RW BS: one sequential read or write; prints a table row
run() {
  local target=$1 dev=$2 rw=$3 bs=$4 name s0 s1 b0 b1 p0 p1 out mbs
  name=$target-$rw-$bs
  out=$GRAID_LOG_DIR/$name.json
  s0=$(cat "/sys/block/$(basename "$dev")/stat")
  b0=$(busy_ticks) p0=$(proc_ticks "${GRAIDD_PID:-}")
  local t0 t1
  t0=$(thread_ticks "${GRAIDD_PID:-}")
  check "fio-$name" fio --name="$name" "${FIO_COMMON[@]}" --filename="$dev" --rw="$rw" --bs="$bs" \
    --iodepth=32 --numjobs=1 --size=256M --time_based --runtime="$runtime" \
    --output-format=json --output="$out"
  s1=$(cat "/sys/block/$(basename "$dev")/stat")
  b1=$(busy_ticks) p1=$(proc_ticks "${GRAIDD_PID:-}")
  t1=$(thread_ticks "${GRAIDD_PID:-}")
  # Where graidd's CPU went, by thread name (io_uring's async workers are iou-wrk-; those that
  # exited during the run are missing, so a name's figure can even be negative).
  [[ -n $t1 ]] && say "$name graidd ticks by thread: $(awk 'NR == FNR {a[$1] = $2; next}
    {printf "%s=%d ", $1, $2 - a[$1]}' <(echo "$t0") <(echo "$t1"))"
  ((CHECK_RC == 0)) || return 0
  mbs=$(jq '.jobs[0] | (.read.bw + .write.bw) / 1024 | floor' "$out")
  # stat fields: 1-3 reads completed, merged, sectors; 5-7 the same for writes
  local f=1
  [[ $rw == write ]] && f=5
  rows+=("$(awk -v a="$s0" -v b="$s1" -v mbs="$mbs" -v name="$name" -v db=$((b1 - b0)) \
    -v dp=$((p1 - p0)) -v tick="$tick" -v f="$f" 'BEGIN {
      split(a, x); split(b, y); w = y[f] - x[f]; m = y[f + 1] - x[f + 1]; s = y[f + 2] - x[f + 2]
      if (w == 0) w = 1
      printf "%-22s %8d %9d %8.1f %7d %10.1f %10.1f", name, mbs, w, s / w / 2, m,
        db / tick * 1e6 / w, dp / tick * 1e6 / w }')")
  say "${rows[-1]}"
}

require md-create mdadm --create /dev/md5 --run --level=5 --raid-devices=5 --chunk=64 \
  --assume-clean --bitmap=none --metadata=1.2 "${members[@]}"
say "md5 limits: $(limits /dev/md5)"
for bs in 64k 1m; do run md5 /dev/md5 write "$bs"; done
run md5 /dev/md5 read 64k
mdadm --stop /dev/md5 >/dev/null
mdadm --zero-superblock "${members[@]}" >/dev/null

# graid with each way of moving request data (--ublk-copy; zero falls back to user where the
# kernel has no AUTO_BUF_REG)
for mode in ${GRAID_VM_SEQ_COPY:-kernel user zero}; do
  require "graidd-start-$mode" graidd_start --ublk-copy "$mode"
  pds=$(graid_create_pds "${members[@]}") || die create-pd "$(graid_last_error)"
  dg=$(graid_create_dg raid5 "$pds" --strip 64K --assume-clean)
  vd=$(graid_create_vd "$dg" 256M --no-ublk)
  dev=$(graid_export_ublk "$dg" "$vd")
  say "graid5 limits: $(limits "$dev")"
  say "graid5-$mode export: $(gjson describe vd "$dg" "$vd" | jq -c '[.. | objects | select(has("copy"))][0] | {copy, features}')"
  for bs in 64k 1m; do run "graid5-$mode" "$dev" write "$bs"; done
  run "graid5-$mode" "$dev" read 64k
  graid_delete_dg "$dg" || fail "delete-dg-$mode" "$(graid_last_error)"
  gctl delete pd "$pds" >/dev/null || fail "delete-pd-$mode" "$(graid_last_error)"
  graidd_stop
done

{
  printf '\nkernel %s (clock %s): sequential I/O, QD32, one job, %ss (requests as /sys/block/X/stat counts them)\n' \
    "$(uname -r)" "$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)" "$runtime"
  printf '%-22s %8s %9s %8s %7s %10s %10s\n' run MB/s requests KiB/req merged 'guest us/r' 'graidd us/r'
  printf '%s\n' "${rows[@]}"
} | tee "$GRAID_LOG_DIR/table.txt"
