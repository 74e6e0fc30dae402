#!/bin/bash
# description: ublk devices a killed graidd leaves behind: one it had not recorded is taken back with its data; ones whose DG cannot start are held and shown, and unexport vd --force and delete dg release them, failing the I/O waiting on them
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# docs/ublk.md, "Owned-device discovery". A killed graidd leaves its ublk devices quiesced (the
# kernel holds their I/O for the next server). graidd tags every device it adds; the next graidd
# finds its own by that tag: one the state dir does not name (a crash between ADD_DEV and saving
# the state) is taken back for its VD, and one whose DG cannot start is held until the DG comes
# back or the administrator releases it.
require graidd-start graidd_start
pds=$(graid_create_pds "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2") || die create-pd "$(graid_last_error)"
dg=$(graid_create_dg raid5 "$pds" --strip 64K) || die create-dg "$(graid_last_error)"
vd0=$(graid_create_vd "$dg" 64M --no-ublk) || die create-vd "$(graid_last_error)"
vd1=$(graid_create_vd "$dg" 64M --no-ublk) || die create-vd "$(graid_last_error)"
dev0=$(graid_export_ublk "$dg" "$vd0") || die export-ublk "$(graid_last_error)"
dev1=$(graid_export_ublk "$dg" "$vd1") || die export-ublk "$(graid_last_error)"
info devices "$dev0 $dev1"
dd if=/dev/urandom of=/tmp/held-ref.bin bs=1M count=4 status=none
check write dd if=/tmp/held-ref.bin of="$dev0" bs=1M oflag=direct status=none
state=$GRAID_STATE_DIR/state.json

# 1. Killed between ADD_DEV and saving the state dir: the state file does not name the device.
graidd_kill
jq --argjson dg "$dg" --argjson vd "$vd0" \
  '.exports |= map(select(.kind != "ublk" or .dg_id != $dg or .vd_id != $vd))' "$state" >"$state.new"
mv "$state.new" "$state"
check unrecorded-device-kept test -b "$dev0"
check graidd-restart graidd_start
live0() { [[ $(graid_export_state "$dg" "$vd0" ublk) == live ]]; }
check unrecorded-taken-back wait_until 30 live0
expect_eq same-device "$(graid_ublk_device "$dg" "$vd0")" "$dev0"
# shellcheck disable=SC2016 # jq variables
check recorded-again jq -e --argjson vd "$vd0" '.exports[] | select(.kind == "ublk" and .vd_id == $vd)' "$state"
check data-intact timeout 60 cmp -n 4194304 /tmp/held-ref.bin "$dev0"
check event-says-taken-back bash -c "graidctl list event | grep -q 'taken back'"

# 2. Killed again, and the DG can no longer start: its members' superblocks are gone. A reader
# waits on each quiesced device.
graidd_kill
for m in "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2"; do
  dd if=/dev/zero of="$m" bs=1M count=1 oflag=direct conv=notrunc status=none
done
dd if="$dev0" of=/dev/null bs=4k count=1 skip=100 iflag=direct 2>"$GRAID_LOG_DIR/reader0.err" &
reader0=$!
dd if="$dev1" of=/dev/null bs=4k count=1 skip=100 iflag=direct 2>"$GRAID_LOG_DIR/reader1.err" &
reader1=$!
check graidd-restart-dg-offline graidd_start
expect_eq dg-offline "$(graid_dg_state "$dg")" offline
expect_eq held-shown "$(gjson describe dg "$dg" | jq -r '[.held_ublk[].device] | sort | join(" ")')" \
  "$(printf '%s\n' "$dev0" "$dev1" | sort | xargs)"
expect_eq held-quiesced "$(gjson describe dg "$dg" | jq -r '[.held_ublk[].state] | unique | join(",")')" quiesced
expect_eq held-in-controller "$(gjson describe controller | jq '.held_ublk | length')" 2
check held-event bash -c "graidctl list event | grep -q 'is held for vd $vd0'"
check readers-wait kill -0 "$reader0" "$reader1"

# refused NAME PATTERN COMMAND...: the graidctl command fails and its error matches PATTERN.
refused() {
  local name=$1 pattern=$2
  shift 2
  if gctl "$@" >/dev/null 2>&1; then
    fail "$name" "graidctl $* succeeded"
  elif graid_last_error | grep -q -- "$pattern"; then
    pass "$name"
  else
    fail "$name" "$(graid_last_error)"
  fi
}
refused unexport-refused-while-open "open in pid $reader0 (dd)" unexport vd "$dg" "$vd0"
expect_eq still-held "$(gjson describe controller | jq '.held_ublk | length')" 2
check unexport-force gctl unexport vd "$dg" "$vd0" --force
rc=0
wait "$reader0" || rc=$?
if ((rc != 0)); then pass reader0-failed; else fail reader0-failed "dd read a block of a released device"; fi
check device0-gone wait_until 30 bash -c "! test -e $dev0"
expect_eq one-held "$(gjson describe dg "$dg" | jq -r '[.held_ublk[].device] | join(" ")')" "$dev1"

refused delete-dg-refused-while-open "open in pid $reader1 (dd)" delete dg "$dg" --confirm
check dg-still-there gctl describe dg "$dg"
check delete-dg-force gctl delete dg "$dg" --confirm --force
rc=0
wait "$reader1" || rc=$?
if ((rc != 0)); then pass reader1-failed; else fail reader1-failed "dd read a block of a released device"; fi
check device1-gone wait_until 30 bash -c "! test -e $dev1"
expect_eq nothing-held "$(gjson describe controller | jq '.held_ublk | length')" 0
check deleted-in-the-kernel bash -c "! test -e /sys/class/ublk-char/ublkc${dev0#/dev/ublkb} && ! test -e /sys/class/ublk-char/ublkc${dev1#/dev/ublkb}"
# Nothing comes back at the next start.
graidd_stop
check graidd-restart-clean graidd_start
expect_eq nothing-held-after-restart "$(gjson describe controller | jq '.held_ublk | length')" 0
rm -f /tmp/held-ref.bin
