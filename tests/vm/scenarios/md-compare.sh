#!/bin/bash
# description: md RAID5/RAID6 and graid (ublk) on the same NVMe drives and on brd RAM disks: the same fio jobs, a table with graid/md ratios
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# Assertions are on function only (every fio run exits 0, a short crc32c-verified write per
# array); speed is printed, never asserted: TCG makes absolute figures meaningless, the ratios
# are what the performance targets speak of. md gets its defaults
# (stripe_cache_size 256, no group threads), created with --assume-clean --bitmap=none so no
# resync runs underneath, graid the daemon's defaults with --assume-clean for the same reason (no
# background initialisation under the figures); both 64 KiB strips over five members.
runtime=${GRAID_VM_PERF_RUNTIME:-5}
is_short && runtime=3
region=256M  # every job works in the first 256 MiB of the array (brd arrays hold 381 MiB or more)

# profile name, unit, fio arguments. Sequential writes first: they fill the region, so that the
# random reads read written blocks.
PROFILES=(
  "1m-seqwrite MB/s --rw=write --bs=1M"
  "64k-seqwrite MB/s --rw=write --bs=64k"
  "4k-randwrite IOPS --rw=randwrite --bs=4k"
  "4k-randread IOPS --rw=randread --bs=4k"
  "8k-mix70 IOPS --rw=randrw --rwmixread=70 --bs=8k"
)
SHOWN=(4k-randwrite 4k-randread 64k-seqwrite 1m-seqwrite 8k-mix70)
declare -A FIG=()

# perf TARGET DEV: runs every profile on DEV (QD32, one job, time based); FIG[TARGET/profile]
perf() {
  local target=$1 dev=$2 p name unit args out rc
  for p in "${PROFILES[@]}"; do
    read -r name unit args <<<"$p"
    out=$GRAID_LOG_DIR/perf-$target-$name.json
    rc=0
    # shellcheck disable=SC2086 # args is a word list on purpose
    fio --name="$target-$name" "${FIO_COMMON[@]}" --filename="$dev" $args --iodepth=32 --numjobs=1 \
      --size="$region" --time_based --runtime="$runtime" --ramp_time=1 \
      --output-format=json --output="$out" >"$GRAID_LOG_DIR/perf-$target-$name.err" 2>&1 || rc=$?
    if ((rc != 0)); then
      fail "perf-$target-$name" "fio exit status $rc: $(head -c 300 "$GRAID_LOG_DIR/perf-$target-$name.err")"
      continue
    fi
    if [[ $unit == IOPS ]]; then
      FIG[$target/$name]=$(jq '.jobs[0] | .read.iops + .write.iops | floor' "$out")
    else
      FIG[$target/$name]=$(jq '.jobs[0] | (.read.bw_bytes + .write.bw_bytes) / 1000000 | . * 10 | floor / 10' "$out")
    fi
    say "$target $name: ${FIG[$target/$name]} $unit"
  done
  pass "perf-$target" "every profile ran"
}

# limits SET LEVEL: the member-bound limit of RAID LEVEL over SET's five members (64 KiB strip),
# measured by graid-bench --raw-only: io_uring straight on the members at the member-level mix
# each profile costs at that level, its queue depth swept to saturation, two threads (the
# vCPUs). LIMIT[LEVEL-SET/profile], in the profile's unit: the most the members allow an array
# of that shape, the figure graid-bench's own ratios use. Run before any array exists on the
# members (it overwrites them).
declare -A LIMIT=()
limits() {
  local set=$1 level=$2 out=$GRAID_LOG_DIR/limits-$set-raid$2 d name bench_name unit v
  local args=()
  for d in $(members "$set"); do args+=(--member "$d"); done
  if ! graid-bench --raw-only --force --level "$level" "${args[@]}" --strip 64K \
    --profile 4k-randwrite,4k-randread,64k-seqwrite,1m-seqwrite,8k-randrw70 --threads 2 \
    --seconds 2 --rounds 1 --format json >"$out.json" 2>"$out.err"; then
    fail "limits-$set-raid$level" "graid-bench --raw-only failed: $(tail -n 2 "$out.err")"
    return 0
  fi
  for name in "${SHOWN[@]}"; do
    bench_name=$name unit=IOPS
    [[ $name == 8k-mix70 ]] && bench_name=8k-randrw70
    [[ $name == *seqwrite ]] && unit=MB/s
    v=$(jq -r --arg p "$bench_name" --arg u "$unit" '.[] | select(.profile == $p) |
      if $u == "IOPS" then .limit_iops | floor else .limit_iops * .block_bytes / 1000000 | . * 10 | floor / 10 end' "$out.json")
    [[ -n $v ]] && LIMIT[$level-$set/$name]=$v
  done
  say "limits raid$level over $set: $(jq -c '[.[] | {profile, limit_iops: (.limit_iops | floor), raw_qd, raw_sweep: [.raw_sweep[] | [.qd, (.member_iops | floor)]]}]' "$out.json")"
  pass "limits-$set-raid$level" "graid-bench --raw-only"
}

# verify TARGET DEV: a short crc32c-verified random write, so a fast but wrong array cannot pass
verify() {
  check "verify-$1" fio_verify "verify-$1" --filename="$2" --rw=randwrite --bs=4k --size=8M --iodepth=32
}

md_run() {  # LEVEL MD_DEV TARGET MEMBERS...
  local level=$1 md=$2 target=$3
  shift 3
  if ! mdadm --create "$md" --run --level="$level" --raid-devices=$# --chunk=64 --assume-clean \
    --bitmap=none --metadata=1.2 "$@" </dev/null >>"$GRAID_LOG_DIR/mdadm.log" 2>&1; then
    fail "md-$target-create" "mdadm --create $md failed: $(tail -n 2 "$GRAID_LOG_DIR/mdadm.log")"
    return 0
  fi
  perf "$target" "$md"
  verify "$target" "$md"
  mdadm --stop "$md" >>"$GRAID_LOG_DIR/mdadm.log" 2>&1
  mdadm --zero-superblock "$@" >>"$GRAID_LOG_DIR/mdadm.log" 2>&1
}

graid_run() {  # LEVEL PD_IDS TARGET
  local dg vd dev
  dg=$(graid_create_dg "$1" "$2" --strip 64K --assume-clean) || { fail "graid-$3-create" "create dg $1 $2"; return 0; }
  if vd=$(graid_create_vd "$dg" "$region" --no-ublk) && dev=$(graid_export_ublk "$dg" "$vd"); then
    perf "$3" "$dev"
    verify "$3" "$dev"
  else
    fail "graid-$3-export" "no ublk device: $(graid_last_error)"
  fi
  graid_delete_dg "$dg" || fail "graid-$3-delete" "delete dg $dg"
}

# members SET: the five member devices of SET (nvme or brd)
members() {
  if [[ $1 == nvme ]]; then
    echo "$GRAID_NVME0 $GRAID_NVME1 $GRAID_NVME2 $GRAID_NVME3 $GRAID_NVME4"
  else
    echo /dev/ram0 /dev/ram1 /dev/ram2 /dev/ram3 /dev/ram4
  fi
}

# ram0..ram4 members of 128 MiB, ram5 the raw reference (brd allocates pages as they are
# written). brd takes its parameters only when loaded: unload it first in case a guest script
# loaded it with others.
rmmod brd 2>/dev/null || true
modprobe brd rd_nr=6 rd_size=131072
[[ -b /dev/ram5 ]] || die brd "no /dev/ram5 after modprobe brd rd_nr=6 (brd loaded and in use?)"
require graidd-start graidd_start
for set in nvme brd; do
  read -r -a devs <<<"$(members "$set")"
  # the raw member-bound reference: the spare drive for NVMe, an unused RAM disk for brd
  raw=$GRAID_SPARE
  [[ $set == brd ]] && raw=/dev/ram5
  perf "raw-$set" "$raw"
  limits "$set" 5
  limits "$set" 6
  md_run 5 /dev/md5 "md5-$set" "${devs[@]}"
  md_run 6 /dev/md6 "md6-$set" "${devs[@]}"
  if pds=$(graid_create_pds "${devs[@]}"); then
    graid_run raid5 "$pds" "graid5-$set"
    graid_run raid6 "$pds" "graid6-$set"
    gctl delete pd "$pds" >/dev/null || fail "graid-$set-delete-pd" "delete pd $pds"
  else
    fail "graid-$set-create-pd" "create pd ${devs[*]}"
  fi
done

# The table: one block per member set; graid/md = graid / md of the same level; /lim = graid's
# share of the member-bound limit of its shape (limits above).
ratio() { awk -v g="${1:-}" -v m="${2:-}" 'BEGIN { if (g == "" || m == "" || m == 0) print "n/a"; else printf "%.2f", g / m }'; }
table() {
  local set=$1 name unit g5 m5 g6 m6 l5 l6
  printf '\n%s members (fio QD32, 1 job, %ss runs; raw = one %s; limit = graid-bench --raw-only of the shape, QD swept)\n' \
    "$set" "$runtime" "$([[ $set == nvme ]] && echo 'emulated NVMe drive' || echo 'RAM disk')"
  printf '%-13s %-5s %10s | %10s %10s %10s %7s %6s | %10s %10s %10s %7s %6s\n' profile unit raw \
    md5 graid5 limit5 g5/md5 g5/lim md6 graid6 limit6 g6/md6 g6/lim
  for name in "${SHOWN[@]}"; do
    unit=IOPS
    [[ $name == *seqwrite ]] && unit=MB/s
    m5=${FIG[md5-$set/$name]:-} g5=${FIG[graid5-$set/$name]:-} l5=${LIMIT[5-$set/$name]:-}
    m6=${FIG[md6-$set/$name]:-} g6=${FIG[graid6-$set/$name]:-} l6=${LIMIT[6-$set/$name]:-}
    printf '%-13s %-5s %10s | %10s %10s %10s %7s %6s | %10s %10s %10s %7s %6s\n' "$name" "$unit" \
      "${FIG[raw-$set/$name]:-n/a}" "${m5:-n/a}" "${g5:-n/a}" "${l5:-n/a}" "$(ratio "$g5" "$m5")" \
      "$(ratio "$g5" "$l5")" "${m6:-n/a}" "${g6:-n/a}" "${l6:-n/a}" "$(ratio "$g6" "$m6")" \
      "$(ratio "$g6" "$l6")"
  done
}
r=$(ratio "${FIG[graid5-brd/4k-randwrite]:-}" "${FIG[md5-brd/4k-randwrite]:-}")
{
  table nvme
  table brd
  echo
  echo "performance target: graid RAID5 4K random write on brd >= 1.5x md RAID5; measured ratio $r"
} | tee "$GRAID_LOG_DIR/table.txt"
cp "$GRAID_LOG_DIR/table.txt" "$GRAID_SHARE/md-compare-table.txt"
for k in "${!FIG[@]}"; do echo "$k ${FIG[$k]}"; done | sort >"$GRAID_LOG_DIR/figures.txt"
info raid5-brd-4k-randwrite-ratio "graid/md = $r (target >= 1.5; speed is not asserted)"
