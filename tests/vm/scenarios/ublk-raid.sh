#!/bin/bash
# description: RAID5 and RAID6 over the five NVMe drives exported through ublk: fio verify, ext4 round trip
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# shellcheck source=../guest/raid-suite.sh
. /vm/raid-suite.sh
raid_suite "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2" "$GRAID_NVME3" "$GRAID_NVME4"
