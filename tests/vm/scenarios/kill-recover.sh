#!/bin/bash
# description: kill -9 graidd during fio on a ublk device; a new graidd on the same state dir recovers it, fio finishes, data verifies
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# ublk user recovery: when the server dies the kernel keeps /dev/ublkbN (quiesced: I/O waits)
# until a new server takes the device over; fio must not see an error across that.
rounds=2
is_short && rounds=1

require graidd-start graidd_start
pds=$(graid_create_pds "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2" "$GRAID_NVME3" "$GRAID_NVME4") || die create-pd "$(graid_last_error)"
dg=$(graid_create_dg raid5 "$pds" --strip 64K) || die create-dg "$(graid_last_error)"
vd=$(graid_create_vd "$dg" 256M --no-ublk) || die create-vd "$(graid_last_error)"
dev=$(graid_export_ublk "$dg" "$vd") || die export-ublk "$(graid_last_error)"
info device "$dev"

for ((round = 1; round <= rounds; round++)); do
  job=(--filename="$dev" --rw=randwrite --bs=4k --size=32M --offset=$(((round - 1) * 64))M)
  fio_verify "round$round" "${job[@]}" --iodepth=16 --rate_iops=1000 >"$GRAID_LOG_DIR/round$round.out" 2>&1 &
  fio_pid=$!
  sleep 3
  if kill -0 "$fio_pid" 2>/dev/null; then
    pass "round$round-killed-during-io"
  else
    fail "round$round-killed-during-io" "fio ended before graidd was killed: make its job longer"
  fi
  graidd_kill
  say "graidd killed (round $round)"
  sleep 2
  check "round$round-device-kept" test -b "$dev"
  check "round$round-graidd-restart" graidd_start
  export_live() { [[ $(graid_export_state "$dg" "$vd" ublk) == live ]]; }
  check "round$round-export-live" wait_until 30 export_live
  rc=0
  wait "$fio_pid" || rc=$?
  cat "$GRAID_LOG_DIR/round$round.out"
  if ((rc == 0)); then pass "round$round-fio-across-restart"; else fail "round$round-fio-across-restart" "fio exit status $rc"; fi
  check "round$round-reread" fio_reverify "round$round-reread" "${job[@]}" --iodepth=32
done
# A kill during the DG's background initialisation resumes it too; optimal once it is done.
check init-finished graid_wait_initialised "$dg"
expect_eq dg-optimal "$(graid_dg_state "$dg")" optimal
