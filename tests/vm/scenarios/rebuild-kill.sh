#!/bin/bash
# description: kill -9 graidd in the middle of a rebuild onto a hot spare while fio writes through a ublk device: the new graidd resumes the rebuild from its checkpoint (not from 0), the device recovers, fio finishes and verifies
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# The rebuild runs at rebuild_speed low: with fio writing it keeps to low's minimum, 10 MB/s per
# member (about 25 s for these drives; idle it would run at up to 200 MB/s), so
# graidd is surely killed with the rebuild under way and past its first checkpoint (recorded
# every 2 s). ublk user recovery keeps /dev/ublkbN while no graidd serves it; fio must not see an
# error across the restart.
require graidd-start graidd_start
pds=$(graid_create_pds "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2" "$GRAID_NVME3") || die create-pd "$(graid_last_error)"
spare=$(graid_create_pds "$GRAID_SPARE") || die create-spare-pd "$(graid_last_error)"
dg=$(graid_create_dg raid5 "$pds" --strip 64K --spare "$spare") || die create-dg "$(graid_last_error)"
check initialised graid_wait_initialised "$dg"
check rebuild-speed-low gctl edit dg "$dg" rebuild_speed low
vd=$(graid_create_vd "$dg" 256M --no-ublk) || die create-vd "$(graid_last_error)"
dev=$(graid_export_ublk "$dg" "$vd") || die export-ublk "$(graid_last_error)"
victim=${pds%%,*}
info device "$dev over PDs $pds (DG $dg), hot spare PD $spare; PD $victim marked offline"

# 500 writes/s of 4K: 48 MiB take about 24 s, across the kill and the restart.
job=(--filename="$dev" --rw=randwrite --bs=4k --size=48M)
fio_verify during-rebuild "${job[@]}" --iodepth=16 --rate_iops=500 >"$GRAID_LOG_DIR/during-rebuild.out" 2>&1 &
fio_pid=$!
sleep 2
check marker-offline gctl edit pd "$victim" marker offline

rebuild_percent() { gjson describe dg "$dg" | jq -r '.rebuild.percent // 0'; }
past_checkpoint() { awk -v p="$(rebuild_percent)" 'BEGIN { exit !(p >= 30) }'; }
check rebuild-under-way wait_until 120 past_checkpoint
before=$(rebuild_percent)
if kill -0 "$fio_pid" 2>/dev/null; then
  pass killed-during-io "fio still writing, rebuild at ${before}%"
else
  fail killed-during-io "fio ended before graidd was killed: make its job longer"
fi
graidd_kill
say "graidd killed with the rebuild at ${before}%"
sleep 2
check device-kept test -b "$dev"
check graidd-restart graidd_start
export_live() { [[ $(graid_export_state "$dg" "$vd" ublk) == live ]]; }
check export-live wait_until 30 export_live
after=$(gjson describe dg "$dg")
expect_eq dg-rebuilding "$(jq -r .state <<<"$after")" rebuilding
resumed_pct=$(jq -r '.rebuild.percent // 0' <<<"$after")
if awk -v p="$resumed_pct" 'BEGIN { exit !(p >= 10) }'; then
  pass resumed-not-restarted "at ${resumed_pct}% after the restart (${before}% before the kill)"
else
  fail resumed-not-restarted "at ${resumed_pct}% after the restart, ${before}% before: started again from 0"
fi
resumed_event() {
  gjson list event | jq -e '[.events[] | select(.kind == "rebuild_started" and (.message // "" | test("resumed at")))] | length > 0'
}
check resumed-event resumed_event
check rebuild-speed-extreme gctl edit dg "$dg" rebuild_speed extreme
rc=0
wait "$fio_pid" || rc=$?
cat "$GRAID_LOG_DIR/during-rebuild.out"
if ((rc == 0)); then pass fio-across-kill; else fail fio-across-kill "fio exit status $rc"; fi
optimal() { [[ $(graid_dg_state "$dg") == optimal ]]; }
check dg-optimal wait_until 300 optimal
expect_eq spare-is-member "$(graid_pd_state "$spare")" member
check reread fio_reverify reread "${job[@]}" --iodepth=32
# The rebuilt member answers for the one marked offline... and for another one taken away now.
second=$(cut -d, -f2 <<<"$pds")
check second-offline gctl edit pd "$second" marker offline
check reread-degraded fio_reverify reread-degraded "${job[@]}" --iodepth=32
