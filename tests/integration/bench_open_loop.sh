#!/bin/sh
# graid-bench --rate: the open loop keeps to its schedule. Far below what the array can do (2,000
# requests per second on tmpfs members that give hundreds of thousands), the run completes what
# it was asked for: between 0.8 and 1.05 of the rate (the window's edges cost a few), with every
# request in a slot at once, so its latency is the array's own, not a queue's.
#   bench_open_loop.sh GRAID_BENCH SCRATCH_DIR_SH
set -eu
bench=$1
d=$(sh "$2")
trap 'rm -rf "$d"' EXIT
out=$("$bench" --level 5 --members 5 --strip 64K --dir "$d" --member-size 64M --backend cpu \
  --profile 4k-randwrite --qd 8 --seconds 1 --warmup 0.2 --rounds 1 --raw-qd 16 --rate 2000 \
  --format json 2>/dev/null)
echo "$out" | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)[0]
iops, p99 = r["iops"], r["lat_us"]["p99"]
print(f"rate 2000: {iops:.0f} IOPS, p99 {p99:.0f} us")
assert 1600 <= iops <= 2100, f"open loop at 2000/s completed {iops:.0f}/s"
assert p99 < 100000, f"p99 {p99:.0f} us: requests queued behind the schedule"
'
