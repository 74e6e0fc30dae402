#!/bin/bash
# An example guest script (tests/vm/run.sh --guest-script tests/vm/examples/md-hot-remove.sh):
# md RAID5 over four NVMe drives, one pulled with QMP device_del while fio writes, the spare
# added and rebuilt onto. It needs no graid and shows the harness's QMP path; the same steps
# with graidd are the hot-remove scenario.
# shellcheck source=../guest/lib.sh
. /vm/lib.sh

members=("$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2" "$GRAID_NVME3")
victim=$GRAID_NVME3 victim_id=nvme3
require mdadm-create mdadm --create /dev/md0 --run --level=5 --raid-devices=4 --chunk=64 \
  --assume-clean --bitmap=none "${members[@]}"
on_exit mdadm --stop /dev/md0

job=(--filename=/dev/md0 --rw=randwrite --bs=4k --size=48M)
fio_verify md-removal "${job[@]}" --iodepth=16 --rate_iops=1000 >"$GRAID_LOG_DIR/md-removal.out" 2>&1 &
fio_pid=$!
sleep 3
check qmp-device-del qmp "{\"execute\":\"device_del\",\"arguments\":{\"id\":\"$victim_id\"}}"
check drive-gone wait_until 60 bash -c "! test -e $victim"
if kill -0 "$fio_pid" 2>/dev/null; then pass removed-during-io; else fail removed-during-io "fio had ended"; fi
rc=0
wait "$fio_pid" || rc=$?
if ((rc == 0)); then pass fio-across-removal; else fail fio-across-removal "fio exit status $rc"; fi
# md notices a vanished member on its next I/O error; "detached" names members whose device is gone
mdadm /dev/md0 --fail detached --remove detached >/dev/null 2>&1 || true
degraded=$(cat /sys/block/md0/md/degraded)
expect_eq md-degraded "$degraded" 1
check reread-degraded fio_reverify md-reread "${job[@]}" --iodepth=32
check add-spare mdadm /dev/md0 --add "$GRAID_SPARE"
rebuilt() { [[ $(cat /sys/block/md0/md/sync_action) == idle && $(cat /sys/block/md0/md/degraded) == 0 ]]; }
check rebuild wait_until 300 rebuilt
check reread-rebuilt fio_reverify md-reread-rebuilt "${job[@]}" --iodepth=32
