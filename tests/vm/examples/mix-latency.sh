#!/bin/bash
# A guest script (tests/vm/run.sh --guest-script tests/vm/examples/mix-latency.sh
# [--extra-bin /usr/bin/socat]): read and write latency of fio's 8K random 70/30 mix (QD32, one
# job) on md RAID5 and on graid RAID5 over five brd RAM disks, beside graid's 8K random read and
# 8K random write alone, to see where a mixed workload's time goes (docs/performance.md). With
# socat in the guest it also prints graidd's write plans (`stats`: write_plans). Asserts that
# every run works; speed is printed, never asserted.
# shellcheck source=../guest/lib.sh
. /vm/lib.sh

rmmod brd 2>/dev/null || true
modprobe brd rd_nr=5 rd_size=131072
members=(/dev/ram0 /dev/ram1 /dev/ram2 /dev/ram3 /dev/ram4)

# graidd's counters for DG 0, through its control socket (needs socat)
plans() {
  command -v socat >/dev/null || return 0
  (cd "$(dirname "$GRAID_SOCKET")" && echo '{"id":1,"verb":"stats"}' |
    socat -t 2 - UNIX-CONNECT:"$(basename "$GRAID_SOCKET")") |
    jq -c '.result.dgs[0] | {stripe_writes, write_plans}'
}

# run NAME DEV FIO-ARGS...: one fio run; prints IOPS and mean completion latency per direction
run() {
  local name=$1 dev=$2
  shift 2
  check "fio-$name" fio --name="$name" "${FIO_COMMON[@]}" --filename="$dev" "$@" \
    --iodepth=32 --numjobs=1 --size=256M --time_based --runtime=5 --ramp_time=1 \
    --output-format=json --output="$GRAID_LOG_DIR/$name.json"
  ((CHECK_RC == 0)) || return 0
  say "$name: $(jq -c '.jobs[0] | {read_iops: (.read.iops | floor),
    write_iops: (.write.iops | floor), read_lat_us: (.read.clat_ns.mean / 1000 | floor),
    write_lat_us: (.write.clat_ns.mean / 1000 | floor)}' "$GRAID_LOG_DIR/$name.json")"
}

require md-create mdadm --create /dev/md5 --run --level=5 --raid-devices=5 --chunk=64 \
  --assume-clean --bitmap=none --metadata=1.2 "${members[@]}"
run md5-mix8k /dev/md5 --rw=randrw --rwmixread=70 --bs=8k
mdadm --stop /dev/md5 >/dev/null
mdadm --zero-superblock "${members[@]}" >/dev/null

require graidd-start graidd_start
pds=$(graid_create_pds "${members[@]}") || die create-pd "$(graid_last_error)"
dg=$(graid_create_dg raid5 "$pds" --strip 64K --assume-clean)
vd=$(graid_create_vd "$dg" 256M --no-ublk)
dev=$(graid_export_ublk "$dg" "$vd")
run graid5-mix8k "$dev" --rw=randrw --rwmixread=70 --bs=8k
run graid5-read8k "$dev" --rw=randread --bs=8k
run graid5-write8k "$dev" --rw=randwrite --bs=8k
say "graid write plans: $(plans)"
graid_delete_dg "$dg" || fail delete-dg "$(graid_last_error)"
gctl delete pd "$pds" >/dev/null || fail delete-pd "$(graid_last_error)"
graidd_stop
