#!/bin/bash
# description: a ublk device another graidd left quiesced, whose id our state dir records for one of our VDs, is left alone at our restart: the VD gets a device of its own, and the other graidd takes its device back with its data
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# Issue 48 item 5 (docs/ublk.md, "Owned-device discovery"). A device id in the state dir may name
# another server's device by now (ublk del, then another server took the id). graidd recovers or
# adopts a device only when its owner tag carries graidd's own instance id (32 random bits in its
# state dir) and graidd's user made it; before, recovery went by the recorded id alone and would
# have served our VD into the other server's device.
require graidd-start graidd_start
pds=$(graid_create_pds "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2") || die create-pd "$(graid_last_error)"
dg=$(graid_create_dg raid5 "$pds" --strip 64K) || die create-dg "$(graid_last_error)"
vd=$(graid_create_vd "$dg" 32M --no-ublk) || die create-vd "$(graid_last_error)"
ours=$(graid_export_ublk "$dg" "$vd") || die export-ublk "$(graid_last_error)"
dd if=/dev/urandom of=/tmp/ours.bin bs=1M count=4 status=none
check write-ours dd if=/tmp/ours.bin of="$ours" bs=1M oflag=direct status=none

# Another graidd with a state dir of its own, on two other drives: a RAID1 VD exported as ublk,
# written, then the graidd killed: its device waits, quiesced, for it to come back.
other=/tmp/graid/$GRAID_SCENARIO-other
mkdir -p "$other"
other_start() {
  graidd --socket "$other/graidd.sock" --state-dir "$other/state" >>"$GRAID_LOG_DIR/other-graidd.log" 2>&1 &
  other_pid=$!
  wait_until 30 graidctl --socket "$other/graidd.sock" version
}
octl() { graidctl --socket "$other/graidd.sock" --format json "$@"; }
other_stop() {
  kill -TERM "$other_pid" 2>/dev/null || true
  wait "$other_pid" 2>/dev/null || true
}
require other-start other_start
on_exit other_stop
octl create pd --force "$GRAID_NVME3" "$GRAID_NVME4" >/dev/null || die other-pds "create pd"
odg=$(octl create dg raid1 0,1 | jq -r .dg_id) || die other-dg "create dg"
ovd=$(octl create vd "$odg" --size 32M --no-ublk | jq -r .vd_id) || die other-vd "create vd"
theirs=$(octl export vd "$odg" "$ovd" --ublk | jq -r '[.exports[] | select(.kind == "ublk")][0].device')
check their-device wait_until 30 test -b "$theirs"
info devices "ours $ours, theirs $theirs"
dd if=/dev/urandom of=/tmp/theirs.bin bs=1M count=4 status=none
check write-theirs dd if=/tmp/theirs.bin of="$theirs" bs=1M oflag=direct status=none
kill -KILL "$other_pid"
wait "$other_pid" 2>/dev/null || true
check their-device-kept test -b "$theirs"
theirs_id=${theirs#/dev/ublkb}

# Our graidd stops cleanly (our device goes), and our state dir is made to record their device's
# id for our VD.
graidd_stop
state=$GRAID_STATE_DIR/state.json
jq --argjson dg "$dg" --argjson vd "$vd" --argjson id "$theirs_id" \
  '.exports |= map(if .kind == "ublk" and .dg_id == $dg and .vd_id == $vd then .dev_id = $id else . end)' \
  "$state" >"$state.new"
mv "$state.new" "$state"
check graidd-restart graidd_start
live() { [[ $(graid_export_state "$dg" "$vd" ublk) == live ]]; }
check ours-live wait_until 30 live
mine=$(graid_ublk_device "$dg" "$vd") || die our-device "$(graid_last_error)"
if [[ $mine != "$theirs" ]]; then pass own-device; else fail own-device "our VD was served into $theirs"; fi
check ours-intact timeout 60 cmp -n 4194304 /tmp/ours.bin "$mine"
check said-not-ours grep -q "not ours any more" "$GRAIDD_LOG"
# Their device still waits for its own server: a read of it does not come back (the reader sits
# in the kernel until the device's server returns).
dd if="$theirs" of=/tmp/theirs-read.bin bs=1M count=1 iflag=direct status=none 2>"$GRAID_LOG_DIR/reader.err" &
reader=$!
sleep 3
check theirs-still-waiting kill -0 "$reader"
expect_eq nothing-held "$(gjson describe controller | jq '.held_ublk | length')" 0

# The other graidd comes back and takes its device back, with its data.
check other-restart other_start
their_live() { [[ $(octl describe vd "$odg" "$ovd" | jq -r '[.exports[] | select(.kind == "ublk")][0].state') == live ]]; }
check theirs-live wait_until 30 their_live
expect_eq their-same-device "$(octl describe vd "$odg" "$ovd" | jq -r '[.exports[] | select(.kind == "ublk")][0].device')" "$theirs"
rc=0
wait "$reader" || rc=$?
expect_eq waiting-read-done "$rc" 0
check waiting-read-their-data cmp -n 1048576 /tmp/theirs.bin /tmp/theirs-read.bin
check theirs-intact timeout 60 cmp -n 4194304 /tmp/theirs.bin "$theirs"
