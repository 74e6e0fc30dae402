#!/bin/bash
# description: RAID5 with a hot spare, a member pulled (QMP device_del) during fio through ublk: the spare rebuilds on its own, data verifies; md's rebuild timed beside it
# shellcheck source=../guest/lib.sh
. /vm/lib.sh
# Members NVME0..NVME3, hot spare SPARE; the member to pull is the drive with serial NVME3 (qemu
# device id nvme3 on root port rp3). NVME4 stays out of graid's part: with the survivors it makes
# md's five drives afterwards. At the end a blank drive with serial NVME3 goes into rp3 again,
# so rp6 and the first hot image stay free for hot-remove.
# GRAID_VM_SPARE_REBUILD_FAIL=offline fails the member with `graidctl edit pd <id> marker offline`
# instead of pulling it (the drive stays; nothing is hot-added at the end).
how=${GRAID_VM_SPARE_REBUILD_FAIL:-pull}
[[ $how == pull || $how == offline ]] || die usage "GRAID_VM_SPARE_REBUILD_FAIL=$how: write pull or offline"
members=("$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2" "$GRAID_NVME3")
spare=$GRAID_SPARE
victim=$GRAID_NVME3 victim_id=nvme3 victim_port=rp3
secs_since() { awk -v a="$1" -v b="$(up)" 'BEGIN {printf "%.1f", b - a}'; }

# ---------------------------------------------------------------------------------------------
# graid: RAID5 over four drives, a hot spare, unthrottled rebuild

require graidd-start graidd_start
graid_create_pds "${members[@]}" "$spare" >/dev/null || die create-pd "$(graid_last_error)"
pd_of() { gjson list pd | jq -r --arg p "$1" '.[] | select(.path == $p) | .pd_id'; }
member_pds=()
for p in "${members[@]}"; do member_pds+=("$(pd_of "$p")"); done
victim_pd=$(pd_of "$victim") spare_pd=$(pd_of "$spare") other_pd=${member_pds[0]}
dg=$(graid_create_dg raid5 "$(IFS=,; echo "${member_pds[*]}")" --strip 64K --spare "$spare_pd") ||
  die create-dg "$(graid_last_error)"
# The rebuild is what is timed here: the background initialisation finishes first.
check initialised graid_wait_initialised "$dg"
expect_eq spare-state "$(graid_pd_state "$spare_pd")" spare
expect_eq spare-count "$(gjson describe dg "$dg" | jq -r .spare_count)" 1
check rebuild-speed gctl edit dg "$dg" rebuild_speed extreme
vd=$(graid_create_vd "$dg" 256M --no-ublk) || die create-vd "$(graid_last_error)"
dev=$(graid_export_ublk "$dg" "$vd") || die export-ublk "$(graid_last_error)"
victim_slot=$(gjson describe pd "$victim_pd" | jq -r .slot)
info device "$dev over PDs ${member_pds[*]} (DG $dg), hot spare PD $spare_pd ($spare); failing PD $victim_pd ($victim, qemu id $victim_id) by $how"

# Rate-limited (1000 writes/s of 4K: 48 MiB take about 12 s, 96 MiB about 24 s, then the
# read-back) so that fio is surely writing when the drive goes and while the rebuild runs.
mb=96
is_short && mb=48
job=(--filename="$dev" --rw=randwrite --bs=4k --size="${mb}M")
fio_verify during-rebuild "${job[@]}" --iodepth=16 --rate_iops=1000 >"$GRAID_LOG_DIR/during-rebuild.out" 2>&1 &
fio_pid=$!
sleep 3
kill -0 "$fio_pid" 2>/dev/null || fail fio-still-running "fio ended before the member was failed: make its job longer"
t_fail=$(up)
if [[ $how == pull ]]; then
  check qmp-device-del qmp "{\"execute\":\"device_del\",\"arguments\":{\"id\":\"$victim_id\"}}"
  check drive-gone wait_until 60 bash -c "! test -e $victim"
  info removal-time "$(secs_since "$t_fail")s from device_del until $victim was gone"
else
  check marker-offline gctl edit pd "$victim_pd" marker offline
fi
if kill -0 "$fio_pid" 2>/dev/null; then
  pass failed-during-io "fio still running when $victim failed"
else
  fail failed-during-io "fio had ended before $victim failed: the failure was not tested under I/O"
fi

# Poll describe dg until optimal: it must go through rebuilding (the spare in the failed
# member's slot). Each poll is a graidctl and a jq (a few tenths of a second under TCG). Given up
# early when the DG has stayed degraded with neither a spare nor a member being rebuilt for 30 s:
# nothing would rebuild it then.
rel() { [[ -n $1 ]] && awk -v a="$t_fail" -v b="$1" 'BEGIN {printf "+%.1fs", b - a}' || echo never; }
dg_brief() { jq -c '{state, spare_count, rebuild, members: [.members[] | "\(.slot):pd\(.pd_id):\(.path):\(.state)"]}' <<<"$1"; }
saw_rebuilding=0 sample="" last="{}" state="" t_rebuilding="" t_optimal="" max_pct=0 fio_during_rebuild=0 stuck_since=""
deadline=$(($(printf '%.0f' "$(up)") + 600))
while (($(printf '%.0f' "$(up)") < deadline)); do
  t_q=$(up)
  d=$(gjson describe dg "$dg" 2>/dev/null) || { sleep 0.5; continue; }
  q_secs=$(secs_since "$t_q")
  last=$d
  state=$(jq -r .state <<<"$d")
  echo "$(up) describe-dg ${q_secs}s $(dg_brief "$d")" >>"$GRAID_LOG_DIR/poll.log"
  if [[ $state == rebuilding ]]; then
    # how long a graidctl round trip takes that asks nothing of the DG, beside describe dg's
    t_q=$(up)
    graidctl version >/dev/null 2>&1 || true
    echo "$(up) version ${t_q:+$(secs_since "$t_q")}s" >>"$GRAID_LOG_DIR/poll.log"
    if ((!saw_rebuilding)); then
      saw_rebuilding=1 t_rebuilding=$(up) sample=$(jq -c .rebuild <<<"$d")
    fi
    kill -0 "$fio_pid" 2>/dev/null && fio_during_rebuild=1
    max_pct=$(jq -r --argjson m "$max_pct" '[.rebuild.percent // 0, $m] | max' <<<"$d")
  elif [[ $state == optimal ]]; then
    t_optimal=$(up)
    break
  fi
  if jq -e '.state == "degraded" and .spare_count == 0 and ([.members[] | select(.state == "rebuilding")] | length == 0)' <<<"$d" >/dev/null; then
    [[ -n $stuck_since ]] || stuck_since=$(up)
    (($(printf '%.0f' "$(secs_since "$stuck_since")") < 30)) || break
  else
    stuck_since=""
  fi
  sleep 0.3
done
if ((saw_rebuilding)); then pass dg-rebuilding "first seen $(rel "$t_rebuilding") after the failure: $sample"; else fail dg-rebuilding "describe dg never showed rebuilding; last: $(dg_brief "$last")"; fi
if [[ -n $sample ]]; then
  expect_eq rebuild-slot "$(jq -r .slot <<<"$sample")" "$victim_slot"
  expect_eq rebuild-pd "$(jq -r .pd_id <<<"$sample")" "$spare_pd"
fi
info rebuild-progress "highest percent seen $max_pct; fio $( ((fio_during_rebuild)) && echo "was" || echo "was not") running while describe dg showed rebuilding"
if [[ -n $t_optimal ]]; then
  pass dg-optimal "$(rel "$t_optimal") after the failure"
elif [[ -n $stuck_since ]]; then
  fail dg-optimal "stuck: degraded, no spare left and no member being rebuilt; $(dg_brief "$last")"
else
  fail dg-optimal "not optimal 600 s after the failure; $(dg_brief "$last")"
fi
expect_eq spare-now-member "$(graid_pd_state "$spare_pd")" member
pd_out=$(graid_pd_state "$victim_pd")
case $pd_out in
  missing | failed | offline) pass victim-out "PD $victim_pd is $pd_out" ;;
  *) fail victim-out "PD $victim_pd is $pd_out, expected missing, failed or offline" ;;
esac
rc=0
wait "$fio_pid" || rc=$?
cat "$GRAID_LOG_DIR/during-rebuild.out"
if ((rc == 0)); then pass fio-across-rebuild "writes and their read-back went on through the failure and the rebuild"; else fail fio-across-rebuild "fio exit status $rc"; fi

# Events: they come from the array's notifier thread, a moment after the state changes (10 s
# of wall time at most: a graidctl call takes a good part of a second under TCG).
t_ev=$(up)
while :; do
  events=$(gjson list event) || events='{"events":[]}'
  jq -e '[.events[].kind] | index("rebuild_started") and index("rebuild_finished")' <<<"$events" >/dev/null && break
  (($(printf '%.0f' "$(secs_since "$t_ev")") < 10)) || break
  sleep 0.5
done
for k in rebuild_started rebuild_finished; do
  if jq -e --arg k "$k" '[.events[] | select(.kind == $k)] | length > 0' <<<"$events" >/dev/null; then
    pass "event-$k" "$(jq -r --arg k "$k" '[.events[] | select(.kind == $k)] | last | "\(.time) \(.message)"' <<<"$events")"
  else
    fail "event-$k" "no $k event"
  fi
done
info events "$(jq -r '.events[].kind' <<<"$events" | sort | uniq -c | tr -s ' \n' ' ')"
jq -r '.events[] | "\(.seq) \(.time) \(.kind) dg=\(.dg_id) pd=\(.pd_id) \(.message)"' <<<"$events" >"$GRAID_LOG_DIR/events.txt"
grep -E 'member_|rebuild_|spare|dg_' "$GRAID_LOG_DIR/events.txt" | sed 's/^/    /'

# The rebuild time: from rebuild_started to rebuild_finished (event times, RFC 3339 with ms).
graid_secs=$(jq -r '
  def t: .time | (sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601) + ((capture("\\.(?<f>[0-9]+)Z$").f // "0") | ("0." + .) | tonumber);
  ([.events[] | select(.kind == "rebuild_started")] | last) as $a
  | ([.events[] | select(.kind == "rebuild_finished")] | last) as $b
  | if $a and $b then (($b | t) - ($a | t)) * 10 | round / 10 else "?" end' <<<"$events" 2>/dev/null || echo "?")
graid_msg=$(jq -r '[.events[] | select(.kind == "rebuild_finished")] | last | .message // ""' <<<"$events")
member_bytes=$(gjson describe dg "$dg" | jq -r '.capacity / (.member_count - 1) | floor')
graid_rate=$(awk -v b="$member_bytes" -v s="$graid_secs" 'BEGIN {if (s + 0 > 0) printf "%.1f", b / s / 1e6; else print "?"}')
info graid-rebuild-time "${graid_secs}s from rebuild_started to rebuild_finished (\"$graid_msg\"; polled: rebuilding $(rel "$t_rebuilding"), optimal $(rel "$t_optimal") after the failure); $((member_bytes >> 20)) MiB per member, ${graid_rate} MB/s, rebuild_speed extreme"

# Every block fio wrote, read again after the rebuild; then with another original member
# offline, so that the rebuilt member's data is what answers for it. (Without a rebuild, taking
# another member offline would fail the array: skipped.)
if [[ -n $t_optimal ]]; then
  check fio-reread-rebuilt fio_reverify reread-rebuilt "${job[@]}" --iodepth=32
  check offline-other gctl edit pd "$other_pd" marker offline
  expect_eq dg-degraded "$(graid_dg_state "$dg")" degraded
  check fio-reread-other-offline fio_reverify reread-other-offline "${job[@]}" --iodepth=32
else
  check fio-reread-degraded fio_reverify reread-degraded "${job[@]}" --iodepth=32
fi

# ---------------------------------------------------------------------------------------------
# md: the same shape (RAID5 over four drives, 64K chunk, a spare, the rebuild unthrottled), a
# member failed with mdadm --fail while the same fio job runs; timed until /proc/mdstat shows
# the recovery done.

if ! is_short; then
  graid_delete_dg "$dg" || fail graid-delete-dg "$(graid_last_error)"
  for p in $(gjson list pd | jq -r '.[].pd_id'); do gctl delete pd "$p" >/dev/null || true; done
  graidd_stop
  md_drives=("$GRAID_NVME0" "$GRAID_NVME1" "$GRAID_NVME2" "$GRAID_NVME4" "$GRAID_SPARE")
  for p in "${md_drives[@]}"; do
    mdadm --zero-superblock "$p" >/dev/null 2>&1 || true
    dd if=/dev/zero of="$p" bs=1M count=4 conv=fsync status=none
  done
  modprobe raid456
  md=/dev/md7
  old_min=$(cat /proc/sys/dev/raid/speed_limit_min) old_max=$(cat /proc/sys/dev/raid/speed_limit_max)
  md_speed() { echo "$2" >/proc/sys/dev/raid/speed_limit_max && echo "$1" >/proc/sys/dev/raid/speed_limit_min; }
  on_exit md_speed "$old_min" "$old_max"
  # Both limits high: md throttles to speed_limit_min while the array has other I/O (fio here),
  # so both make it as unthrottled as graid's extreme.
  md_speed 10000000 10000000
  require md-create mdadm --create "$md" --run --level=5 --raid-devices=4 --spare-devices=1 --chunk=64 \
    --assume-clean --bitmap=none "${md_drives[@]}"
  on_exit mdadm --stop "$md"
  md_victim=${md_drives[3]}
  mjob=(--filename="$md" --rw=randwrite --bs=4k --size="${mb}M")
  fio_verify md-during-rebuild "${mjob[@]}" --iodepth=16 --rate_iops=1000 >"$GRAID_LOG_DIR/md-during-rebuild.out" 2>&1 &
  fio_pid=$!
  sleep 3
  t_fail=$(up)
  check md-fail mdadm "$md" --fail "$md_victim"
  md_name=${md##*/}
  md_rebuilt() { [[ $(cat /sys/block/"$md_name"/md/degraded) == 0 && $(cat /sys/block/"$md_name"/md/sync_action) == idle ]] && ! grep -q recovery /proc/mdstat; }
  md_sample=""
  md_done=0
  for ((i = 0; i < 3000; i++)); do
    if grep -q recovery /proc/mdstat; then
      [[ -n $md_sample ]] || md_sample=$(grep -m1 recovery /proc/mdstat | tr -s ' ')
    fi
    if md_rebuilt; then md_done=1; break; fi
    sleep 0.2
  done
  md_secs=$(secs_since "$t_fail")
  if ((md_done)); then pass md-rebuilt "${md_sample:-(recovery not caught in /proc/mdstat)}; done"; else fail md-rebuilt "no finished recovery in 600 s: $(tr '\n' ' ' </proc/mdstat)"; fi
  rc=0
  wait "$fio_pid" || rc=$?
  if ((rc == 0)); then pass md-fio-across-rebuild; else fail md-fio-across-rebuild "fio exit status $rc"; fi
  check md-reread-rebuilt fio_reverify md-reread-rebuilt "${mjob[@]}" --iodepth=32
  md_bytes=$(($(cat /sys/block/"$md_name"/md/component_size) * 1024))
  md_rate=$(awk -v b="$md_bytes" -v s="$md_secs" 'BEGIN {if (s + 0 > 0) printf "%.1f", b / s / 1e6; else print "?"}')
  info md-rebuild-time "${md_secs}s from mdadm --fail until /proc/mdstat showed the recovery done; $((md_bytes >> 20)) MiB per member, ${md_rate} MB/s, speed_limit_min/max 10000000"
  info rebuild-compare "$(printf 'RAID5 4+1 spare, 64K strip, fio 4K randwrite 1000 IOPS during: graid %ss (%s MB/s, extreme) | md %ss (%s MB/s, speed_limit unthrottled)' \
    "$graid_secs" "$graid_rate" "$md_secs" "$md_rate")"
  mdadm --stop "$md" >/dev/null 2>&1 || true
  for p in "${md_drives[@]}"; do mdadm --zero-superblock "$p" >/dev/null 2>&1 || true; done
fi

# ---------------------------------------------------------------------------------------------
# A blank drive with the pulled drive's serial into its own root port (rp6 and the first hot
# image stay for hot-remove), so that later scenarios find the six drives again.

[[ $how == pull ]] || exit 0
read -r _ hot_img _ <<<"$GRAID_VM_HOT_IMAGES"
check qmp-blockdev-add qmp "{\"execute\":\"blockdev-add\",\"arguments\":{\"driver\":\"raw\",\"node-name\":\"hot-$victim_id\",\"file\":{\"driver\":\"file\",\"filename\":\"$hot_img\"}}}"
# the old device's id is free once qemu has finished the unplug; retried a little in case not yet
add_back() { qmp "{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"nvme\",\"id\":\"$victim_id\",\"serial\":\"${victim_id^^}\",\"drive\":\"hot-$victim_id\",\"bus\":\"$victim_port\",\"logical_block_size\":$GRAID_VM_LBA,\"physical_block_size\":$GRAID_VM_LBA}}"; }
check qmp-device-add wait_until 30 add_back
replaced() { vm_resolve_drives; [[ -b ${GRAID_NVME3:-} ]]; }
check hot-add wait_until 60 replaced
vm_resolve_drives
info replacement "${GRAID_NVME3:-none} (serial NVME3, blank, on $victim_port)"
