#!/bin/bash
# description: graidd --ublk-spread on: a RAID5 ublk device whose queues are served by two I/O threads (tags split over them where the kernel has PER_IO_DAEMON, 6.16+; helper lanes before); fio verify, the counters, a clean removal
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# One fio job submits to one ublk queue; with --ublk-spread on, where the kernel lets any task
# serve any tag (PER_IO_DAEMON, 6.16+), the queue's odd tags are fetched and served by the other
# I/O thread ("tags"); before, the queue's thread hands the requests of odd stripes to the other
# thread while it is busy ("helper"; docs/ublk.md). The data must verify, and graidd's log line
# for the removed device must show that requests were served on the other thread, each committed
# once, none with an error.
graidd_args=(--ublk-spread on)
[[ ${GRAID_VM_GRAIDD_ARGS:-} == *--ublk-spread* ]] && graidd_args=()  # given for every graidd already
require graidd-start graidd_start "${graidd_args[@]}"
pds=$(graid_create_pds "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2" "$GRAID_NVME3" "$GRAID_NVME4") || die create-pd "$(graid_last_error)"
dg=$(graid_create_dg raid5 "$pds" --strip 64K) || die create-dg "$(graid_last_error)"
vd=$(graid_create_vd "$dg" 256M --no-ublk) || die create-vd "$(graid_last_error)"
dev=$(graid_export_ublk "$dg" "$vd") || die export-ublk "$(graid_last_error)"
info device "$dev"
features=$(gjson describe controller | jq -r '.ublk.features | join(" ")')
want=helper
[[ " $features " == *" PER_IO_DAEMON "* ]] && want=tags
# A kernel may not list PER_IO_DAEMON in GET_FEATURES yet set it on every device (6.16+): the
# device's own flags decide.
flags=$(gjson describe vd "$dg" "$vd" | jq -r '[.exports[] | select(.kind == "ublk")][0].features | join(" ")')
[[ " $flags " == *" PER_IO_DAEMON "* ]] && want=tags
expect_eq spread-mode "$(gjson describe vd "$dg" "$vd" | jq -r '[.exports[] | select(.kind == "ublk")][0].spread')" "$want"

rand_job=(--filename="$dev" --rw=randwrite --bs=4k --size=32M)
seq_job=(--filename="$dev" --rw=write --bs=256k --offset=32M --size=64M)
check fio-randwrite-verify fio_verify spread-rand "${rand_job[@]}" --iodepth=32
check fio-seqwrite-verify fio_verify spread-seq "${seq_job[@]}" --iodepth=16
check fio-randwrite-reread fio_reverify spread-rand-reread "${rand_job[@]}" --iodepth=32
check fio-seqwrite-reread fio_reverify spread-seq-reread "${seq_job[@]}" --iodepth=16

check unexport gctl unexport vd "$dg" "$vd" --ublk
check device-gone wait_until 30 bash -c "! test -e $dev"
line=$(grep -E "dg $dg vd $vd: /dev/ublkb[0-9]+ removed" "$GRAIDD_LOG" | tail -n 1)
info removal-log "$line"
if [[ $line =~ served\ ([0-9]+)\ requests\ \(([0-9]+)\ committed,\ ([0-9]+)\ with\ an\ error,\ ([0-9]+)\ on\ another ]]; then
  requests=${BASH_REMATCH[1]} commits=${BASH_REMATCH[2]} errors=${BASH_REMATCH[3]} spread=${BASH_REMATCH[4]}
  if ((requests > 1000 && commits == requests && errors == 0 && spread > 0 && spread < requests)); then
    pass counters "$requests requests, $spread of them on the other I/O thread"
  else
    fail counters "requests $requests, commits $commits, errors $errors, spread $spread"
  fi
else
  fail counters "no removal line in graidd's log"
fi
check delete-dg graid_delete_dg "$dg"
check delete-pd gctl delete pd "$pds"
