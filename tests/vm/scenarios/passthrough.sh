#!/bin/bash
# description: ublk-raid with NVMe passthrough members (/dev/ngXnY generic char devices as PDs)
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# shellcheck source=../guest/raid-suite.sh
. /vm/raid-suite.sh
for v in GRAID_NG0 GRAID_NG1 GRAID_NG2 GRAID_NG3 GRAID_NG4; do
  [[ -c ${!v:-} ]] || die ng-devices "$v=${!v:-unset} is not a character device"
done
raid_suite "$GRAID_NG0" "$GRAID_NG1" "$GRAID_NG2" "$GRAID_NG3" "$GRAID_NG4"
