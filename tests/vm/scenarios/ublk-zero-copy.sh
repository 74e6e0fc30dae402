#!/bin/bash
# description: graidd --ublk-copy zero: RAID5, RAID1, and both over NVMe passthrough, ublk devices whose reads (and RAID1's writes) go straight to and from the requests' pages (AUTO_BUF_REG, 6.16+; USER_COPY on older kernels); fio verify optimal and with a member offline, the counters
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# Where the kernel offers AUTO_BUF_REG, a device exported with --ublk-copy zero must say "zero",
# serve reads without a copy, and serve the reads a degraded RAID5 can only reconstruct in memory
# through a copy instead; a degraded RAID1 reads the live copy without one. RAID1 writes every
# copy straight from the request's pages too (RAID5's writes are copied: parity is computed from
# them). Over NVMe passthrough members (/dev/ngXnY: their commands carry a buffer address, which
# the requests' pages have not) every read and write goes through a copy and no member fails. Where the kernel has no AUTO_BUF_REG (6.12)
# the device says "user" and no read is zero-copy. The data must verify throughout; the counters
# come from graidd's log line for the removed device.
require graidd-start graidd_start --ublk-copy zero
features=$(gjson describe controller | jq -r '.ublk.features | join(" ")')
want=user
[[ " $features " == *" AUTO_BUF_REG "* ]] && want=zero
info kernel-features "$features"

for name in raid5 raid1 raid5-ng raid1-ng; do
  level=${name%-ng}
  case $name in
    raid5) pds=$(graid_create_pds "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2" "$GRAID_NVME3" "$GRAID_NVME4") ;;
    raid1) pds=$(graid_create_pds "$GRAID_NVME0" "$GRAID_NVME1") ;;
    raid5-ng) pds=$(graid_create_pds "$GRAID_NG0" "$GRAID_NG1" "$GRAID_NG2" "$GRAID_NG3" "$GRAID_NG4") ;;
    raid1-ng) pds=$(graid_create_pds "$GRAID_NG0" "$GRAID_NG1") ;;
  esac
  [[ -n $pds ]] || die "$name-create-pd" "$(graid_last_error)"
  # Not --assume-clean: the drives hold the earlier DGs' data, and a degraded read reconstructs
  # from parity that must be consistent.
  dg=$(graid_create_dg "$level" "$pds" --strip 64K) || die create-dg "$(graid_last_error)"
  vd=$(graid_create_vd "$dg" 128M --no-ublk) || die create-vd "$(graid_last_error)"
  dev=$(graid_export_ublk "$dg" "$vd") || die export-ublk "$(graid_last_error)"
  expect_eq "$name-copy" "$(gjson describe vd "$dg" "$vd" | jq -r '[.exports[] | select(.kind == "ublk")][0].copy')" "$want"

  rand_job=(--filename="$dev" --rw=randwrite --bs=4k --size=16M)
  seq_job=(--filename="$dev" --rw=write --bs=256k --offset=16M --size=48M)
  check "$name-fio-randwrite-verify" fio_verify "$name-rand" "${rand_job[@]}" --iodepth=32
  check "$name-fio-seqwrite-verify" fio_verify "$name-seq" "${seq_job[@]}" --iodepth=16
  check "$name-initialised" graid_wait_initialised "$dg"
  expect_eq "$name-optimal" "$(graid_dg_state "$dg")" optimal
  victim_pd=${pds##*,}
  check "$name-member-offline" gctl edit pd "$victim_pd" marker offline
  expect_eq "$name-degraded" "$(graid_dg_state "$dg")" degraded
  check "$name-fio-randwrite-reread-degraded" fio_reverify "$name-rand-degraded" "${rand_job[@]}" --iodepth=32
  check "$name-fio-seqwrite-reread-degraded" fio_reverify "$name-seq-degraded" "${seq_job[@]}" --iodepth=16

  check "$name-unexport" gctl unexport vd "$dg" "$vd" --ublk
  check "$name-device-gone" wait_until 30 bash -c "! test -e $dev"
  line=$(grep -E "dg $dg vd $vd: /dev/ublkb[0-9]+ removed" "$GRAIDD_LOG" | tail -n 1)
  info "$name-removal-log" "$line"
  if [[ $line =~ ([0-9]+)\ with\ an\ error.*\ ([0-9]+)\ reads\ and\ ([0-9]+)\ writes\ zero-copy,\ ([0-9]+)\ copied ]]; then
    errors=${BASH_REMATCH[1]} zero=${BASH_REMATCH[2]} zw=${BASH_REMATCH[3]} copied=${BASH_REMATCH[4]}
    expect_eq "$name-no-errors" "$errors" 0
    case $want/$name in
      zero/raid5) ok=$((zero > 1000 && zw == 0 && copied > 0)) ;;    # degraded reads reconstructed
      zero/raid1) ok=$((zero > 1000 && zw > 1000 && copied == 0)) ;; # the live copy: never a copy
      zero/*-ng) ok=$((zero == 0 && zw == 0 && copied > 1000)) ;;    # passthrough: always a copy
      *) ok=$((zero == 0 && zw == 0)) ;;                             # no AUTO_BUF_REG: nothing
    esac
    ((ok)) && pass "$name-counters" "$zero reads and $zw writes zero-copy, $copied copied" ||
      fail "$name-counters" "$zero reads and $zw writes zero-copy, $copied copied (kernel: $want)"
  else
    fail "$name-counters" "no removal line in graidd's log"
  fi
  check "$name-delete-dg" graid_delete_dg "$dg"
  check "$name-delete-pd" gctl delete pd "$pds"
done
check graidd-stop graidd_stop
