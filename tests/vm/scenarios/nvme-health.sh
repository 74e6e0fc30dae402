#!/bin/bash
# description: drive health: describe pd shows each NVMe drive's SMART / health log (block and passthrough members); QMP qom-set of smart_critical_warning on a running drive raises one pd_health_critical event naming the bit and describe pd shows it; setting it back raises one pd_health_cleared; the metrics page carries it; graidctl examine reads a member's block device while graidd serves it
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# Issue 49 item 5 (docs/monitoring.md, "Drive health"). graidd reads each controller's log every
# --health-interval seconds (2 here; 30 minutes by default). qemu's NVMe device reports the
# Critical Warning byte its smart_critical_warning property holds (qemu 7.2 takes bits
# 0x01-0x10), which qom-set changes on the running drive; 0x04 is "NVM subsystem reliability
# degraded".
require graidd-start graidd_start --health-interval 2 --metrics-listen 127.0.0.1:9633
pds=$(graid_create_pds "$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NG2") || die create-pd "$(graid_last_error)"
dg=$(graid_create_dg raid5 "$pds" --strip 64K) || die create-dg "$(graid_last_error)"
pd_of() { gjson list pd | jq -r --arg p "$1" '.[] | select(.path == $p) | .pd_id'; }
pd1=$(pd_of "$GRAID_NVME1")
pd2=$(pd_of "$GRAID_NG2")
info pds "dg $dg: pd $pd1 is $GRAID_NVME1 (qemu nvme1), pd $pd2 is $GRAID_NG2 (passthrough)"
health() { gjson describe pd "$1" | jq -c .health; }
available() { [[ $(gjson describe pd "$1" | jq -r .health.available) == true ]]; }
check block-health wait_until 30 available "$pd1"
check passthrough-health wait_until 30 available "$pd2"
info health-pd1 "$(health "$pd1")"
expect_eq no-warning "$(gjson describe pd "$pd1" | jq -r .health.critical_warning)" 0
t=$(gjson describe pd "$pd1" | jq -r .health.temperature_celsius)
if ((t > 0 && t < 100)); then pass temperature "$t C"; else fail temperature "$t C"; fi
# The drive's own word, through nvme-cli where it is installed: the same controller.
if command -v nvme >/dev/null; then
  info nvme-cli "$(nvme smart-log "$GRAID_NVME1" 2>&1 | head -3 | tr '\n' ' ')"
fi

events_of() { gjson list event | jq --arg k "$1" --argjson pd "$2" '[.events[] | select(.kind == $k and .pd_id == $pd)] | length'; }
check qom-set-warning qmp '{"execute":"qom-set","arguments":{"path":"/machine/peripheral/nvme1","property":"smart_critical_warning","value":4}}'
raised() { [[ $(events_of pd_health_critical "$pd1") -ge 1 ]]; }
check critical-event wait_until 30 raised
msg=$(gjson list event | jq -r --argjson pd "$pd1" '[.events[] | select(.kind == "pd_health_critical" and .pd_id == $pd)][0] | "\(.severity): \(.message)"')
info critical-event-text "$msg"
case $msg in
  critical:*reliability\ degraded*) pass critical-event-says "$msg" ;;
  *) fail critical-event-says "$msg" ;;
esac
expect_eq describe-shows-bit "$(gjson describe pd "$pd1" | jq -r .health.critical_warning)" 4
# A scrape with bash's /dev/tcp (the guest has no curl).
scrape() {
  exec 3<>/dev/tcp/127.0.0.1/9633 || return 1
  printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
  tr -d '\r' <&3
  exec 3<&-
}
scrape >"$GRAID_LOG_DIR/metrics.txt" || true
if grep -q "^graid_pd_health_critical_warning{pd=\"$pd1\"} 4$" "$GRAID_LOG_DIR/metrics.txt"; then
  pass metrics-show-bit
else
  fail metrics-show-bit "$(grep graid_pd_health_critical_warning "$GRAID_LOG_DIR/metrics.txt" | tr '\n' ' ')"
fi
# Three more reads of the same log: no second event.
sleep 7
expect_eq raised-once "$(events_of pd_health_critical "$pd1")" 1
expect_eq others-quiet "$(events_of pd_health_critical "$pd2")" 0

check qom-set-clear qmp '{"execute":"qom-set","arguments":{"path":"/machine/peripheral/nvme1","property":"smart_critical_warning","value":0}}'
cleared() { [[ $(events_of pd_health_cleared "$pd1") -ge 1 ]]; }
check cleared-event wait_until 30 cleared
expect_eq describe-clear "$(gjson describe pd "$pd1" | jq -r .health.critical_warning)" 0
sleep 5
expect_eq cleared-once "$(events_of pd_health_cleared "$pd1")" 1
expect_eq still-raised-once "$(events_of pd_health_critical "$pd1")" 1
# graidctl examine reads a member straight from its block device while graidd serves it
# (read-only, O_DIRECT, no lock): the DG's uuid and this drive's slot, and graidd unmoved.
uuid=$(gjson describe dg "$dg" | jq -r .uuid)
ex=$(graidctl --format json examine "$GRAID_NVME1")
expect_eq examine-running-uuid "$(jq -r '.[0].superblock.array_uuid' <<<"$ex")" "$uuid"
expect_eq examine-running-slot "$(jq -r '.[0].members[.[0].superblock.member_index].state' <<<"$ex")" active
expect_eq examine-graidd-unmoved "$(gjson describe dg "$dg" | jq -r .state)" optimal
if graidctl examine "$GRAID_NG2" >"$GRAID_LOG_DIR/examine-ng.txt" 2>&1; then
  fail examine-char-device "exit 0: $(cat "$GRAID_LOG_DIR/examine-ng.txt")"
else
  grep -q "block device" "$GRAID_LOG_DIR/examine-ng.txt" && pass examine-char-device || fail examine-char-device "$(cat "$GRAID_LOG_DIR/examine-ng.txt")"
fi
check delete-dg graidctl --socket "$GRAID_SOCKET" delete dg "$dg" --confirm
