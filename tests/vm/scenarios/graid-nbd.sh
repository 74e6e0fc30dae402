#!/bin/bash
# description: graidd on the NVMe drives exported over NBD (fio nbd engine): verify optimal, with a member offline, after a restart
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# What graid can do without ublk: graidd and graidctl on real NVMe block devices (O_EXCL opens,
# the drives' own logical block size), a RAID5 VD served by graidd's NBD server and driven by
# fio's nbd engine (libnbd), a member taken offline, a clean restart that restores the export.
vd_size=512M rand=64M seq=128M
is_short && vd_size=256M rand=16M seq=32M
sock=$GRAID_DIR/vd.sock

require graidd-start graidd_start
pds=$(graid_create_pds "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2" "$GRAID_NVME3" "$GRAID_NVME4") || die create-pd "$(graid_last_error)"
info pds "$(gjson list pd | jq -r '[.[] | "\(.pd_id):\(.path):\(.kind):lbs=\(.logical_block_size)"] | join(" ")')"
dg=$(graid_create_dg raid5 "$pds" --strip 64K) || die create-dg "$(graid_last_error)"
vd=$(graid_create_vd "$dg" "$vd_size" --no-ublk) || die create-vd "$(graid_last_error)"
check export-nbd gctl export vd "$dg" "$vd" --nbd "unix:$sock"
((CHECK_RC == 0)) || exit 1

nbd=(--ioengine=nbd "--uri=nbd+unix:///?socket=$sock" --direct=0)
rand_job=("${nbd[@]}" --rw=randwrite --bs=4k --size="$rand")
seq_job=("${nbd[@]}" --rw=write --bs=1M --offset="$rand" --size="$seq")
check fio-randwrite-verify fio_verify rand "${rand_job[@]}" --iodepth=32
check fio-seqwrite-verify fio_verify seq "${seq_job[@]}" --iodepth=8

victim_pd=${pds##*,}
check member-offline gctl edit pd "$victim_pd" marker offline
expect_eq dg-degraded "$(graid_dg_state "$dg")" degraded
check fio-randwrite-reread-degraded fio_reverify rand-degraded "${rand_job[@]}" --iodepth=32
check fio-seqwrite-reread-degraded fio_reverify seq-degraded "${seq_job[@]}" --iodepth=8

check graidd-stop graidd_stop
check graidd-restart graidd_start
nbd_back() { [[ $(gjson describe vd "$dg" "$vd" | jq -r '[.exports[] | select(.kind == "nbd")] | length') == 1 ]]; }
check export-restored wait_until 30 nbd_back
expect_eq dg-still-degraded "$(graid_dg_state "$dg")" degraded
check fio-randwrite-reread-restart fio_reverify rand-restart "${rand_job[@]}" --iodepth=32
check fio-seqwrite-reread-restart fio_reverify seq-restart "${seq_job[@]}" --iodepth=8
