#!/bin/bash
# description: QMP device_del of a RAID5 member during fio through ublk: I/O goes on degraded, data verifies; a blank drive hot-added; full version: it replaces the pulled member (replace pd), is rebuilt, and answers
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# The member to pull: the drive with serial NVME4, qemu device id nvme4 on root port rp4.
victim=$GRAID_NVME4 victim_id=nvme4

require graidd-start graidd_start
pds=$(graid_create_pds "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2" "$GRAID_NVME3" "$victim") || die create-pd "$(graid_last_error)"
victim_pd=$(gjson list pd | jq -r --arg p "$victim" '.[] | select(.path == $p) | .pd_id')
dg=$(graid_create_dg raid5 "$pds" --strip 64K) || die create-dg "$(graid_last_error)"
vd=$(graid_create_vd "$dg" 256M --no-ublk) || die create-vd "$(graid_last_error)"
dev=$(graid_export_ublk "$dg" "$vd") || die export-ublk "$(graid_last_error)"
info device "$dev over PDs $pds; pulling PD $victim_pd ($victim, qemu id $victim_id)"

# Rate-limited (48 MiB at 1000 writes/s: about 12 s, plus the read-back) so that fio is surely
# still writing when the drive goes; the removal takes about a second after device_del here (the
# guest's pciehp has to let the device go), and that fio was still running is checked.
job=(--filename="$dev" --rw=randwrite --bs=4k --size=48M)
fio_verify during-removal "${job[@]}" --iodepth=16 --rate_iops=1000 >"$GRAID_LOG_DIR/during-removal.out" 2>&1 &
fio_pid=$!
sleep 3
kill -0 "$fio_pid" 2>/dev/null || fail fio-still-running "fio ended before the drive was pulled: make its job longer"
t0=$(up)
check qmp-device-del qmp "{\"execute\":\"device_del\",\"arguments\":{\"id\":\"$victim_id\"}}"
check drive-gone wait_until 60 bash -c "! test -e $victim"
info removal-time "$(awk -v a="$t0" -v b="$(up)" 'BEGIN {printf "%.1f", b - a}')s from device_del until $victim was gone"
if kill -0 "$fio_pid" 2>/dev/null; then
  pass removed-during-io "fio still running when $victim went"
else
  fail removed-during-io "fio had ended before $victim went: the removal was not tested under I/O"
fi
rc=0
wait "$fio_pid" || rc=$?
cat "$GRAID_LOG_DIR/during-removal.out"
if ((rc == 0)); then pass fio-across-removal "writes and their read-back went on degraded"; else fail fio-across-removal "fio exit status $rc"; fi

expect_eq dg-degraded "$(graid_dg_state "$dg")" degraded
pd_state=$(graid_pd_state "$victim_pd")
case $pd_state in
  missing | failed | offline) pass pd-out "PD $victim_pd is $pd_state" ;;
  *) fail pd-out "PD $victim_pd is $pd_state, expected missing, failed or offline" ;;
esac
check fio-reread-degraded fio_reverify reread "${job[@]}" --iodepth=32
if ! is_short; then
  job2=(--filename="$dev" --rw=write --bs=1M --offset=64M --size=64M)
  check fio-seqwrite-degraded fio_verify seq-degraded "${job2[@]}" --iodepth=8
  fs_roundtrip ext4-degraded "$dev"
fi
info events "$(gjson list event | jq -r '.events[].kind' | sort | uniq -c | tr -s ' \n' ' ')"

# A blank drive into the free root port rp6, with the pulled drive's serial, so that later
# scenarios find five drives again.
read -r hot_img _ <<<"$GRAID_VM_HOT_IMAGES"
check qmp-blockdev-add qmp "{\"execute\":\"blockdev-add\",\"arguments\":{\"driver\":\"raw\",\"node-name\":\"hot-$victim_id\",\"file\":{\"driver\":\"file\",\"filename\":\"$hot_img\"}}}"
check qmp-device-add qmp "{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"nvme\",\"id\":\"$victim_id-new\",\"serial\":\"${victim_id^^}\",\"drive\":\"hot-$victim_id\",\"bus\":\"rp6\",\"logical_block_size\":$GRAID_VM_LBA,\"physical_block_size\":$GRAID_VM_LBA}}"
replaced() { vm_resolve_drives; [[ -b ${GRAID_NVME4:-} ]]; }
check hot-add wait_until 60 replaced
vm_resolve_drives
info replacement "${GRAID_NVME4:-none} (serial NVME4, blank)"

# Full version: the new drive replaces the pulled one (graidctl replace pd), is rebuilt while the
# DG serves the device, and data written degraded (after the ext4 round trip above, which
# overwrote the device) reads back from the rebuilt DG, also with another original member offline
# (so the new drive answers).
if ! is_short && [[ -b ${GRAID_NVME4:-} ]]; then
  job3=(--filename="$dev" --rw=randwrite --bs=4k --size=32M)
  check fio-write-degraded fio_verify write-degraded "${job3[@]}" --iodepth=16
  new_pd=$(graid_create_pds "$GRAID_NVME4") || die create-new-pd "$(graid_last_error)"
  check rebuild-speed gctl edit dg "$dg" rebuild_speed extreme
  check replace gctl replace pd "$dg" "$victim_pd" "$new_pd"
  optimal() { [[ $(graid_dg_state "$dg") == optimal ]]; }
  check replaced-optimal wait_until 300 optimal
  expect_eq new-pd-member "$(graid_pd_state "$new_pd")" member
  check fio-reread-replaced fio_reverify reread-replaced "${job3[@]}" --iodepth=32
  other_pd=${pds%%,*}
  check other-offline gctl edit pd "$other_pd" marker offline
  check fio-reread-new-drive fio_reverify reread-new-drive "${job3[@]}" --iodepth=32
fi
