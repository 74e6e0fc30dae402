#!/bin/bash
# description: NVMe-oF target (nvmet, loop transport) exporting a graid ublk device; nvme connect -t loop; fio verify through it
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# First a RAM disk (brd) behind the target, to show the target path works by itself, then a
# graid RAID5 VD's ublk device. Configfs attribute names as in blktests (common/nvme).
modprobe nvmet
modprobe nvme_loop
CFS=/sys/kernel/config/nvmet
[[ -d $CFS ]] || die configfs "$CFS missing (configfs not mounted or nvmet not loaded)"
size=32M
is_short && size=16M
rand_job=(--rw=randwrite --bs=4k --size="$size")

# nvmet_export NQN PORT DEV: serves DEV as namespace 1 of subsystem NQN on loop port PORT
nvmet_export() {
  local nqn=$1 port=$2 dev=$3 s=$CFS/subsystems/$1 p=$CFS/ports/$2
  mkdir "$s"
  echo 1 >"$s/attr_allow_any_host"
  mkdir "$s/namespaces/1"
  printf '%s' "$dev" >"$s/namespaces/1/device_path"
  echo 1 >"$s/namespaces/1/enable"
  mkdir "$p"
  echo loop >"$p/addr_trtype"
  ln -s "$s" "$p/subsystems/$nqn"
}

# nvmet_remove NQN PORT: the reverse of nvmet_export
nvmet_remove() {
  local nqn=$1 s=$CFS/subsystems/$1 p=$CFS/ports/$2
  rm -f "$p/subsystems/$nqn"
  rmdir "$p" 2>/dev/null
  echo 0 >"$s/namespaces/1/enable" 2>/dev/null
  rmdir "$s/namespaces/1" "$s" 2>/dev/null
  return 0
}

# nvmet_device NQN: the host's block device of a connected subsystem (its namespace 1)
nvmet_device() {
  local b
  for b in /sys/block/nvme*; do
    [[ ${b##*/} =~ ^nvme[0-9]+n1$ ]] || continue
    [[ $(cat "$b/device/subsysnqn" 2>/dev/null) == "$1" ]] && echo "/dev/${b##*/}" && return 0
  done
  return 1
}

# through_target NAME PORT DEV: exports DEV, connects over loop, runs fio verify through the
# fabrics device, disconnects and removes the export
through_target() {
  local name=$1 port=$2 dev=$3 nqn=nqn.2024-01.io.graid:vm-$1 fdev
  check "$name-target" nvmet_export "$nqn" "$port" "$dev"
  ((CHECK_RC == 0)) || return 0
  on_exit nvmet_remove "$nqn" "$port"
  check "$name-connect" nvme connect -t loop -n "$nqn"
  ((CHECK_RC == 0)) || return 0
  on_exit nvme disconnect -n "$nqn"
  if ! wait_until 30 nvmet_device "$nqn"; then
    fail "$name-fabrics-device" "no block device for $nqn"
    return 0
  fi
  fdev=$(nvmet_device "$nqn")
  info "$name-fabrics-device" "$fdev for $dev ($(blockdev --getsize64 "$fdev") bytes)"
  check "$name-fio-randwrite-verify" fio_verify "$name-rand" --filename="$fdev" "${rand_job[@]}" --iodepth=32
  check "$name-fio-seqwrite-verify" fio_verify "$name-seq" --filename="$fdev" --rw=write --bs=1M --offset="$size" --size="$size" --iodepth=8
  check "$name-disconnect" nvme disconnect -n "$nqn"
  check "$name-target-removed" nvmet_remove "$nqn" "$port"
}

# 1. brd behind the target
[[ -b /dev/ram0 ]] || modprobe brd rd_nr=1 rd_size=131072
[[ -b /dev/ram0 ]] || die brd "no /dev/ram0"
through_target brd 1 /dev/ram0

# 2. a graid VD's ublk device behind the target; afterwards the data written through NVMe-oF is
# read back on the ublk device itself
require graidd-start graidd_start
pds=$(graid_create_pds "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2" "$GRAID_NVME3" "$GRAID_NVME4") || die create-pd "$(graid_last_error)"
dg=$(graid_create_dg raid5 "$pds" --strip 64K) || die create-dg "$(graid_last_error)"
vd=$(graid_create_vd "$dg" 256M --no-ublk) || die create-vd "$(graid_last_error)"
dev=$(graid_export_ublk "$dg" "$vd") || die export-ublk "$(graid_last_error)"
through_target graid 2 "$dev"
check graid-reread-on-ublk fio_reverify graid-reread --filename="$dev" "${rand_job[@]}" --iodepth=32
