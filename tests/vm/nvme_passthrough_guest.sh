#!/bin/sh
# Guest side of the NVMe passthrough check (TEST= for the VM probe, shared/vm-probe/run-vm.sh, with
# EXTRA_BINS naming nvme_passthrough_device_test and, optionally, graidd and graidctl). Runs inside
# a qemu guest with six emulated NVMe drives (serials NVME0..NVME4, SPARE); prints RESULT lines.
up() { cut -d' ' -f1 /proc/uptime; }
r() { echo "RESULT $*"; }
echo "@@TEST_START guest_uptime=$(up)s"
r "kernel $(uname -r) cpus=$(nproc)"
i=0; while [ "$(ls /sys/class/nvme-generic 2>/dev/null | wc -l)" -lt 6 ] && [ $i -lt 60 ]; do
  sleep 0.5; i=$((i+1)); done
# serial -> generic node
for n in /sys/class/nvme-generic/*; do
  s=$(cat $n/device/serial 2>/dev/null); s=$(echo $s)
  eval "NG_$s=/dev/${n##*/}"
  echo "  ${n##*/} serial=$s mdts_kb=$(cat /sys/block/nvme${n##*/ng}/queue/max_hw_sectors_kb 2>/dev/null)"
done
r "generic nodes: $(ls /dev | grep -E '^ng[0-9]+n[0-9]+$' | tr '\n' ' ')"
export GRAID_NVME_TEST_DEVICE=$NG_NVME1
export GRAID_NVME_RAID_DEVICES="$NG_NVME0 $NG_NVME2 $NG_NVME3 $NG_NVME4 $NG_SPARE"
echo "  test device $GRAID_NVME_TEST_DEVICE, raid devices $GRAID_NVME_RAID_DEVICES"
if command -v nvme_passthrough_device_test >/dev/null; then
  t=$(up)
  nvme_passthrough_device_test --gtest_color=no >/tmp/gtest.log 2>&1; rc=$?
  cat /tmp/gtest.log
  r "nvme_passthrough_device_test rc=$rc ($(awk -v a=$t -v b=$(up) 'BEGIN{print b-a}')s): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' /tmp/gtest.log | tr -s ' \n' ' ')"
fi
# --- graidd and graidctl on /dev/ngXnY (after the engine test, which left the drives with data)
if command -v graidd >/dev/null && command -v graidctl >/dev/null; then
  export GRAID_SOCKET=/tmp/graidd.sock
  start_graidd() {
    graidd --socket $GRAID_SOCKET --state-dir /tmp/graid-state --io-threads 2 --parity cpu \
      >>/tmp/graidd.log 2>&1 &
    GPID=$!
    i=0; while ! graidctl version >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.2; i=$((i+1)); done
  }
  ok() { if "$@" >/tmp/out 2>&1; then echo "  ok: $*"; else echo "  FAILED: $*"; cat /tmp/out; FAILS=$((FAILS+1)); fi; }
  refused() { if "$@" >/tmp/out 2>&1; then echo "  NOT refused: $*"; FAILS=$((FAILS+1)); else echo "  refused as expected: $* -> $(cat /tmp/out)"; fi; }
  FAILS=0
  start_graidd
  ok graidctl create pd $GRAID_NVME_RAID_DEVICES --force
  graidctl --format json describe pd 0 | tee /tmp/pd0.json
  grep -q '"io_mode": *"passthrough"' /tmp/pd0.json || { echo "  FAILED: pd 0 io_mode"; FAILS=$((FAILS+1)); }
  grep -q '"model": *"QEMU NVMe Ctrl"' /tmp/pd0.json || { echo "  FAILED: pd 0 model"; FAILS=$((FAILS+1)); }
  graidctl list pd
  refused graidctl create pd /dev/null
  refused graidctl create pd /dev/$(basename $(echo $GRAID_NVME_RAID_DEVICES | cut -d' ' -f1) | sed 's/^ng/nvme/')
  grep -q "same NVMe namespace as pd 0" /tmp/out || { echo "  FAILED: sibling not named"; FAILS=$((FAILS+1)); }
  ok graidctl edit pd 4 io_mode block
  graidctl --format json describe pd 4 | tee /tmp/pd4.json
  grep -q '"io_mode": *"direct"' /tmp/pd4.json && grep -q '"path": *"/dev/nvme' /tmp/pd4.json ||
    { echo "  FAILED: pd 4 on its block device"; FAILS=$((FAILS+1)); }
  ok graidctl edit pd 4 io_mode passthrough
  graidctl --format json describe pd 4 | grep -q '"io_mode": *"passthrough"' ||
    { echo "  FAILED: pd 4 back to passthrough"; FAILS=$((FAILS+1)); }
  ok graidctl edit pd 4 io_mode block   # the DG below mixes a block member with passthrough ones
  ok graidctl create dg raid5 0-4 --strip 64K
  refused graidctl edit pd 0 io_mode block
  ok graidctl create vd 0 --size 512M
  ok graidctl export vd 0 0 --nbd unix:/tmp/vd.sock
  graidctl list pd; graidctl describe dg 0
  t=$(up)
  fio --name=nbd-verify --ioengine=nbd --uri='nbd+unix:///?socket=/tmp/vd.sock' --rw=randwrite \
      --bsrange=4k-256k --iodepth=16 --size=256M --verify=crc32c --do_verify=1 \
      --verify_fatal=1 >/tmp/fio.nbd 2>&1
  rc=$?; r "fio over NBD on a RAID5 of passthrough members (randwrite 4k-256k + crc32c verify) rc=$rc ($(awk -v a=$t -v b=$(up) 'BEGIN{print b-a}')s) $(grep -oE 'IOPS=[^,]+' /tmp/fio.nbd | tr '\n' ' ')"
  [ $rc = 0 ] || { tail -20 /tmp/fio.nbd; FAILS=$((FAILS+1)); }
  kill $GPID; wait $GPID; echo "  graidd stopped: rc=$?"
  start_graidd   # the state dir names the ng paths; the DG assembles from them
  graidctl list pd; graidctl list dg
  # optimal, or still initialising in the background (create dg does not wait for it)
  graidctl --format json describe dg 0 | grep -qE '"state": *"(optimal|initialising)"' ||
    { echo "  FAILED: dg 0 after restart"; FAILS=$((FAILS+1)); }
  fio --name=nbd-verify --ioengine=nbd --uri='nbd+unix:///?socket=/tmp/vd.sock' --rw=randwrite \
      --bsrange=4k-256k --iodepth=16 --size=256M --verify=crc32c --do_verify=1 \
      --verify_only=1 --verify_fatal=1 >/tmp/fio.nbd2 2>&1
  rc=$?; r "fio verify_only after graidd restart rc=$rc"; [ $rc = 0 ] || { tail -20 /tmp/fio.nbd2; FAILS=$((FAILS+1)); }
  kill $GPID; wait $GPID
  grep -iE "error|warn|passthrough" /tmp/graidd.log | head -20
  r "graidd/graidctl on /dev/ngXnY: $FAILS failure(s)$([ $FAILS = 0 ] || echo ' FAIL')"
fi
echo "@@TEST_END guest_uptime=$(up)s"
