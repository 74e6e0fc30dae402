#!/bin/bash
# description: RAID6 ublk device survives two members marked offline
# An example guest script (tests/vm/run.sh --guest-script tests/vm/examples/raid6-two-offline.sh),
# the one docs/testing.md shows.
# shellcheck source=../guest/lib.sh
. /vm/lib.sh                                   # strict mode, results, cleanups, graid helpers
require graidd-start graidd_start              # a FAIL here ends the script
pds=$(graid_create_pds "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2" "$GRAID_NVME3" "$GRAID_NVME4") ||
  die create-pd "$(graid_last_error)"
dg=$(graid_create_dg raid6 "$pds" --strip 64K)
vd=$(graid_create_vd "$dg" 128M --no-ublk)
dev=$(graid_export_ublk "$dg" "$vd")
job=(--filename="$dev" --rw=randwrite --bs=4k --size=32M)
check write fio_verify w "${job[@]}"
check offline gctl edit pd 0 marker offline
check offline2 gctl edit pd 1 marker offline
expect_eq degraded "$(graid_dg_state "$dg")" degraded
check reread fio_reverify r "${job[@]}"
