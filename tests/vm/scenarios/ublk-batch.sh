#!/bin/bash
# description: graidd --ublk-batch on: RAID5 (driver copies) and RAID1 (zero copy) ublk devices served with BATCH_IO's per-queue commands where the kernel has them (7.0+), a command per tag elsewhere; fio verify, every request committed once, a clean removal
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# With BATCH_IO the driver refuses the per-tag FETCH_REQ, so a device made with the flag that
# serves fio at all is served by PREP_IO_CMDS / FETCH_IO_CMDS / COMMIT_IO_CMDS (daemon/ublk/
# ublk_batch_queue.h). The device must say batch where the kernel offers BATCH_IO (7.3) and not
# where it does not (6.12); the data must verify and graidd's removal line must count every
# request committed once, none with an error.
graidd_args=(--ublk-batch on)
[[ ${GRAID_VM_GRAIDD_ARGS:-} == *--ublk-batch* ]] && graidd_args=()  # given for every graidd already
require graidd-start graidd_start "${graidd_args[@]}"
features=$(gjson describe controller | jq -r '.ublk.features | join(" ")')
want=false
[[ " $features " == *" BATCH_IO "* ]] && want=true

# serve NAME LEVEL PD...: a VD of LEVEL over the PDs exported as a ublk device, fio verified
# (4K random at QD32, 256K sequential at QD16, each read again), unexported; its removal line
# checked.
serve() {
  local name=$1 level=$2
  shift 2
  local pds dg vd dev flags line
  pds=$(graid_create_pds "$@") || die "$name-create-pd" "$(graid_last_error)"
  dg=$(graid_create_dg "$level" "$pds" --strip 64K) || die "$name-create-dg" "$(graid_last_error)"
  vd=$(graid_create_vd "$dg" 192M --no-ublk) || die "$name-create-vd" "$(graid_last_error)"
  dev=$(graid_export_ublk "$dg" "$vd") || die "$name-export-ublk" "$(graid_last_error)"
  info "$name-device" "$dev"
  expect_eq "$name-batch" "$(gjson describe vd "$dg" "$vd" | jq -r '[.exports[] | select(.kind == "ublk")][0].batch')" "$want"
  flags=$(gjson describe vd "$dg" "$vd" | jq -r '[.exports[] | select(.kind == "ublk")][0] | "\(.copy) \(.features | join(" "))"')
  info "$name-copy-and-features" "$flags"
  local rand_job=(--filename="$dev" --rw=randwrite --bs=4k --size=32M)
  local seq_job=(--filename="$dev" --rw=write --bs=256k --offset=32M --size=64M)
  check "$name-fio-randwrite-verify" fio_verify "$name-rand" "${rand_job[@]}" --iodepth=32
  check "$name-fio-seqwrite-verify" fio_verify "$name-seq" "${seq_job[@]}" --iodepth=16
  check "$name-fio-randwrite-reread" fio_reverify "$name-rand-reread" "${rand_job[@]}" --iodepth=32
  check "$name-fio-seqwrite-reread" fio_reverify "$name-seq-reread" "${seq_job[@]}" --iodepth=16
  check "$name-unexport" gctl unexport vd "$dg" "$vd" --ublk
  check "$name-device-gone" wait_until 30 bash -c "! test -e $dev"
  line=$(grep -E "dg $dg vd $vd: /dev/ublkb[0-9]+ removed" "$GRAIDD_LOG" | tail -n 1)
  info "$name-removal-log" "$line"
  if [[ $line =~ served\ ([0-9]+)\ requests\ \(([0-9]+)\ committed,\ ([0-9]+)\ with\ an\ error ]]; then
    local requests=${BASH_REMATCH[1]} commits=${BASH_REMATCH[2]} errors=${BASH_REMATCH[3]}
    expect_eq "$name-every-request-committed" "$commits" "$requests"
    expect_eq "$name-no-errors" "$errors" 0
    if ((requests < 1000)); then fail "$name-requests" "only $requests requests served"; else pass "$name-requests" "$requests"; fi
  else
    fail "$name-removal-log-parsed" "no removal line with counters: $line"
  fi
}

serve raid5 raid5 "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2"
serve raid1 raid1 "$GRAID_NVME3" "$GRAID_NVME4"
