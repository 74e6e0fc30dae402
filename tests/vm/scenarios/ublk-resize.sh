#!/bin/bash
# description: edit vd size grows a VD under its mounted ublk device: live where the kernel has UPDATE_SIZE (6.16+), else on the next export; ext4 grows online with resize2fs and keeps its files
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# docs/cli.md, "edit vd"; docs/ublk.md, "Live resize".
require graidd-start graidd_start
pds=$(graid_create_pds "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2") || die create-pd "$(graid_last_error)"
dg=$(graid_create_dg raid5 "$pds" --strip 64K) || die create-dg "$(graid_last_error)"
vd=$(graid_create_vd "$dg" 64M --no-ublk) || die create-vd "$(graid_last_error)"
dev=$(graid_export_ublk "$dg" "$vd") || die export-ublk "$(graid_last_error)"
live=$(gjson describe vd "$dg" "$vd" | jq -r '[.exports[] | select(.kind == "ublk")][0].update_size')
info device "$dev"
info update-size "$live (Linux $(uname -r))"
features=$(gjson describe controller | jq -r '.ublk.features | join(",")')
info driver-features "$features"
if [[ $live == true ]]; then
  check controller-lists-update-size grep -q UPDATE_SIZE <<<"$features"
fi
size_is() { [[ $(blockdev --getsize64 "$dev") == "$1" ]]; }
check size-before size_is $((64 << 20))
mnt=/mnt/resize
mkdir -p "$mnt"
check mkfs mkfs.ext4 -q -F "$dev"
check mount mount -t ext4 "$dev" "$mnt"
((CHECK_RC == 0)) || die mount "cannot mount $dev"
on_exit umount -l "$mnt"
dd if=/dev/urandom of=/tmp/resize-a.bin bs=1M count=16 status=none
check write-a cp /tmp/resize-a.bin "$mnt/a"
sync

check grow gctl edit vd "$dg" "$vd" size 192M
expect_eq vd-size "$(gjson describe vd "$dg" "$vd" | jq -r .size)" $((192 << 20))
if [[ $live == true ]]; then
  # The kernel was told at once: the mounted device is bigger now.
  check device-grew-live wait_until 10 size_is $((192 << 20))
else
  # No UPDATE_SIZE: the device keeps its size (and says so) until it is exported again.
  check device-kept-its-size size_is $((64 << 20))
  check umount-for-reexport umount "$mnt"
  check unexport gctl unexport vd "$dg" "$vd" --ublk
  dev=$(graid_export_ublk "$dg" "$vd") || die export-again "$(graid_last_error)"
  check device-grew-on-reexport size_is $((192 << 20))
  check mount-again mount -t ext4 "$dev" "$mnt"
fi
# ext4 grows online into the new space, and a file bigger than the old device fits.
check resize2fs resize2fs "$dev"
dd if=/dev/urandom of=/tmp/resize-b.bin bs=1M count=96 status=none
check write-b cp /tmp/resize-b.bin "$mnt/b"
check sync sync
check umount umount "$mnt"
check fsck e2fsck -fn "$dev"
check remount mount -t ext4 "$dev" "$mnt"
check file-a-intact cmp /tmp/resize-a.bin "$mnt/a"
check file-b-intact cmp /tmp/resize-b.bin "$mnt/b"
check umount-last umount "$mnt"
# Shrinking is refused and changes nothing.
if gctl edit vd "$dg" "$vd" size 64M >/dev/null 2>&1; then
  fail shrink-refused "edit vd size 64M succeeded"
else
  pass shrink-refused
fi
check size-unchanged size_is $((192 << 20))
check unexport-last gctl unexport vd "$dg" "$vd"
