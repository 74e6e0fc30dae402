# shellcheck shell=bash
# tests/vm/guest/raid-suite.sh: the body shared by the ublk-raid and passthrough scenarios
# (sourced after lib.sh).

# raid_suite MEMBER...: registers the MEMBERs as PDs, then for RAID5 and RAID6 (RAID5 alone in
# the short form) makes a DG over all of them with one VD, exported through ublk, and checks
# the block device: fio random 4K and sequential 1M writes, each read back with crc32c, both
# read again afterwards; ext4 made, mounted, files copied and checksummed, unmounted, mounted
# again and checksummed again, fsck'd; the ublk device unexported (it must go away) and the DG
# deleted.
raid_suite() {
  local levels=(raid5 raid6) vd_size=512M rand=64M seq=128M
  if is_short; then
    levels=(raid5) vd_size=256M rand=16M seq=32M
  fi
  require graidd-start graidd_start
  local pds level dg vd dev
  pds=$(graid_create_pds "$@") || die create-pd "$(graid_last_error)"
  info pds "PDs $pds over $*: kind $(gjson list pd | jq -r '[.[].kind] | unique | join(",")')"
  for level in "${levels[@]}"; do
    say "$level over PDs $pds"
    dg=$(graid_create_dg "$level" "$pds" --strip 64K) || die "$level-create-dg" "$(graid_last_error)"
    # Both ways to a ublk device: create vd's default export (RAID5), then --no-ublk and an
    # explicit export vd --ublk (RAID6).
    if [[ $level == raid5 ]]; then
      vd=$(graid_create_vd "$dg" "$vd_size") || die "$level-create-vd" "create vd with its default ublk export"
      dev=$(graid_ublk_device "$dg" "$vd") || die "$level-ublk-device" "$(graid_last_error)"
    else
      vd=$(graid_create_vd "$dg" "$vd_size" --no-ublk) || die "$level-create-vd" "$(graid_last_error)"
      dev=$(graid_export_ublk "$dg" "$vd") || die "$level-export-ublk" "$(graid_last_error)"
    fi
    info "$level-device" "$dev: $(blockdev --getsize64 "$dev") bytes, logical block $(blockdev --getss "$dev")"

    local rand_job=(--filename="$dev" --rw=randwrite --bs=4k --size="$rand")
    local seq_job=(--filename="$dev" --rw=write --bs=1M --offset="$rand" --size="$seq")
    check "$level-fio-randwrite-verify" fio_verify "$level-rand" "${rand_job[@]}" --iodepth=32
    check "$level-fio-seqwrite-verify" fio_verify "$level-seq" "${seq_job[@]}" --iodepth=8
    check "$level-fio-randwrite-reread" fio_reverify "$level-rand-reread" "${rand_job[@]}" --iodepth=32
    check "$level-fio-seqwrite-reread" fio_reverify "$level-seq-reread" "${seq_job[@]}" --iodepth=8

    fs_roundtrip "$level-ext4" "$dev"

    check "$level-unexport" gctl unexport vd "$dg" "$vd" --ublk
    check "$level-device-gone" wait_until 30 bash -c "! test -e $dev"
    check "$level-delete-dg" graid_delete_dg "$dg"
  done
}
