#!/bin/bash
# description: a mounted or open ublk device: unexport and delete vd refuse it, naming the user; SIGTERM leaves it to the next graidd and a file written without sync survives; --force syncs and removes it
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# docs/ublk.md, "Stopping and deleting"; docs/daemon.md, "Stopping". Removing a ublk device under
# a mounted filesystem fails the writeback that removal starts, and the filesystem loses what it
# had not written: graidd refuses unless told --force, and a SIGTERM (a package upgrade restarts
# graidd under mounted filesystems) leaves such a device for the next graidd to take back.
require graidd-start graidd_start
pds=$(graid_create_pds "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2") || die create-pd "$(graid_last_error)"
dg=$(graid_create_dg raid5 "$pds" --strip 64K) || die create-dg "$(graid_last_error)"
vd=$(graid_create_vd "$dg" 256M --no-ublk) || die create-vd "$(graid_last_error)"
dev=$(graid_export_ublk "$dg" "$vd") || die export-ublk "$(graid_last_error)"
info device "$dev"
mnt=/mnt/busy
mkdir -p "$mnt"
check mkfs mkfs.ext4 -q -F "$dev"
check mount mount -t ext4 "$dev" "$mnt"
((CHECK_RC == 0)) || die mount "cannot mount $dev"
on_exit umount -l "$mnt"

# A file in the page cache only: not synced, so a removal now would lose it.
dd if=/dev/urandom of=/tmp/busy-ref.bin bs=1M count=8 status=none
cp /tmp/busy-ref.bin "$mnt/file"

export_live() { [[ $(graid_export_state "$dg" "$vd" ublk) == live ]]; }
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
refused unexport-refused-while-mounted "mounted at $mnt" unexport vd "$dg" "$vd"
refused delete-refused-while-mounted "mounted at $mnt" delete vd "$dg" "$vd" --confirm
check still-exported export_live
check still-mounted grep -q " $mnt " /proc/mounts

# SIGTERM: the device is left to the kernel, which holds its I/O until the next graidd. Where
# the kernel has QUIESCE_DEV (6.16+) graidd quiesces it first and lets go of it, and the DG
# stops clean; elsewhere the DG runs until graidd exits and re-syncs at the next start.
quiesce=$(gjson describe vd "$dg" "$vd" | jq -r '[.exports[] | select(.kind == "ublk")][0].quiesce')
info quiesce "$quiesce"
graidd_stop  # and at once a new graidd, which waits for the kernel to release the drives
check graidd-left-it grep -q "left for the next graidd to take back" "$GRAIDD_LOG"
if [[ $quiesce == true ]]; then
  check handed-over-quiesced grep -q "quiesced (QUIESCE_DEV) and left for the next graidd" "$GRAIDD_LOG"
  check dg-stopped-clean grep -q "event dg_stopped dg $dg: stopped, marked clean" "$GRAIDD_LOG"
fi
check device-kept test -b "$dev"
check graidd-restart graidd_start
check export-live-again wait_until 30 export_live
check umount umount "$mnt"
check remount mount -t ext4 "$dev" "$mnt"
check file-intact cmp /tmp/busy-ref.bin "$mnt/file"
check umount-again umount "$mnt"
check fsck e2fsck -fn "$dev"

# Open by a process, not mounted: refused, naming the process.
sleep 300 <"$dev" &
holder=$!
refused unexport-refused-while-open "open in pid $holder (sleep)" unexport vd "$dg" "$vd" --ublk
kill "$holder"
wait "$holder" 2>/dev/null || true

# A loop device over it: no mount, no holder, no open file descriptor once losetup has exited,
# no exclusive claim. Where the kernel offers TRY_STOP_DEV (7.0+) it says the device is open and
# unexport is refused; on 6.12 graidd's look cannot see it (docs/ublk.md, "Stopping and
# deleting"), so there it is only noted.
safe_stop=$(gjson describe vd "$dg" "$vd" | jq -r '[.exports[] | select(.kind == "ublk")][0].safe_stop')
info safe-stop "$safe_stop"
modprobe loop 2>/dev/null || true
loop=$(losetup -f 2>/dev/null) || loop=""
if [[ -n $loop ]] && losetup "$loop" "$dev" 2>/dev/null; then
  if [[ $safe_stop == true ]]; then
    refused unexport-refused-under-a-loop-device "is open (the kernel says so)" unexport vd "$dg" "$vd"
    check still-exported-under-loop export_live
  else
    info loop-device-not-seen "$loop over $dev: Linux $(uname -r) has no TRY_STOP_DEV; not tried"
  fi
  losetup -d "$loop"
else
  info no-loop-device "losetup could not attach $dev"
fi

# --force while mounted: the filesystem and the device are synced, then the device is stopped;
# the kernel deletes it only once the filesystem lets go (as md will not stop a mounted array),
# so the answer says to unmount and ask again, which then finishes the removal.
check mount-for-force mount -t ext4 "$dev" "$mnt"
cp /tmp/busy-ref.bin "$mnt/file2"
refused forced-unexport-stops-it "is stopped (its users now get I/O errors) but not yet deleted" \
  unexport vd "$dg" "$vd" --force
check device-gone wait_until 30 bash -c "! test -b $dev"
umount -l "$mnt" || true
check unexport-after-umount gctl unexport vd "$dg" "$vd"
dev=$(graid_export_ublk "$dg" "$vd") || die export-ublk-again "$(graid_last_error)"
check mount-after-force mount -t ext4 "$dev" "$mnt"
check synced-file-intact cmp /tmp/busy-ref.bin "$mnt/file2"
check umount-last umount "$mnt"
check delete-dg graid_delete_dg "$dg"
rm -f /tmp/busy-ref.bin
