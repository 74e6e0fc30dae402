#!/usr/bin/env bash
# The benchmark report's NBD rows: graidd serving a RAID5 (5 members) and a RAID6 (6 members) VD
# over NBD on unix sockets, fio (--ioengine=nbd, one job at QD 32) through each for three profiles
# (1M sequential write, which also fills the region, 4K random write, 4K random read), written as
# graid-bench-report/1 rows with frontend "nbd" (docs/benchmarks.md). CPU per request is graidd's
# own user + system time over the fio run (/proc/PID/stat), not fio's.
#
#   nbd_frontend.sh GRAIDD GRAIDCTL WORK_DIR MEMBER_BYTES SECONDS PARITY OUT.json [LIMITS.json]
#
# LIMITS.json, the suite's own suite.json: each row then gets the members' limit of its level and
# profile from the suite's optimal in-process row (the same kind of member files, measured by the
# suite's raw runs) and its share of it.
# WORK_DIR must exist (member files, state dir and sockets go there, removed at the end); PARITY
# is graidd's --parity (auto, cuda, cpu). Prints one line per row. Exit 0, or 1 with the reason
# on stderr (graidd's log included when it did not start).
set -euo pipefail
if (($# != 7 && $# != 8)); then
  echo "usage: $0 GRAIDD GRAIDCTL WORK_DIR MEMBER_BYTES SECONDS PARITY OUT.json [LIMITS.json]" >&2
  exit 2
fi
graidd=$1 graidctl=$2 work=$3 member_bytes=$4 seconds=$5 parity=$6 out=$7 limits=${8:-}
here=$(cd "$(dirname "$0")" && pwd)  # fio_json.py lives beside this script
command -v fio >/dev/null || { echo "nbd_frontend: fio is not installed" >&2; exit 1; }
dir=$(mktemp -d "$work/nbd-XXXXXX")
sock="$dir/graidd.sock"
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
ctl() { "$graidctl" --socket "$sock" "$@"; }
"$graidd" --socket "$sock" --state-dir "$dir/state" --parity "$parity" --io-threads 2 \
  2>>"$dir/graidd.log" &
pid=$!
for _ in $(seq 200); do ctl version >/dev/null 2>&1 && break; sleep 0.05; done
ctl version >/dev/null 2>&1 || { echo "nbd_frontend: graidd did not start:" >&2; cat "$dir/graidd.log" >&2; exit 1; }
backend=$(ctl --format json describe controller |
  /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["parity"]["backend"])')
tick=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }

pds=()
for i in $(seq 0 10); do
  truncate -s "$member_bytes" "$dir/pd$i"
  pds+=("$dir/pd$i")
done
ctl create pd "${pds[@]}" >/dev/null
ctl create dg raid5 0-4 --strip 64K --assume-clean >/dev/null
ctl create dg raid6 5-10 --strip 64K --assume-clean >/dev/null
# The VD: what both arrays hold, at most 1 GiB.
vd=$((member_bytes * 4 / 2 / 1048576))
((vd > 1024)) && vd=1024
ctl create vd 0 --size "${vd}M" --no-ublk >/dev/null
ctl create vd 1 --size "${vd}M" --no-ublk >/dev/null
ctl export vd 0 0 --nbd "unix:$dir/r5.sock" >/dev/null
ctl export vd 1 0 --nbd "unix:$dir/r6.sock" >/dev/null

# fio's --runtime takes whole seconds unless given a unit: milliseconds.
runtime_ms=$(awk -v s="$seconds" 'BEGIN { ms = int(s * 1000); print (ms < 100 ? 100 : ms) }')
rows="$dir/rows.jsonl"
: >"$rows"
for lv in 5 6; do
  for p in "1m-seqwrite --rw=write --bs=1M" "4k-randwrite --rw=randwrite --bs=4k" \
    "4k-randread --rw=randread --bs=4k"; do
    read -r name args <<<"$p"
    c0=$(cpu_ticks)
    # shellcheck disable=SC2086 # args is a word list on purpose
    fio --name="r$lv-$name" --ioengine=nbd --uri="nbd+unix:///?socket=$dir/r$lv.sock" $args \
      --iodepth=32 --numjobs=1 --size="${vd}M" --time_based --runtime="${runtime_ms}ms" --randseed=42 \
      --group_reporting --output-format=json --output="$dir/fio.json" >/dev/null 2>"$dir/fio.err" ||
      { echo "nbd_frontend: fio $name on RAID$lv failed: $(head -c 300 "$dir/fio.err")" >&2; exit 1; }
    c1=$(cpu_ticks)
    /usr/bin/python3 - "$dir/fio.json" "$lv" "$name" "$backend" "$(((c1 - c0)))" "$tick" "$rows" \
      "$here" <<'PY'
import json, sys
path, lv, name, backend, ticks, tick, rows, here = sys.argv[1:]
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, here)
import fio_json
fio = fio_json.figures(path)
iops, seconds = fio["iops"], fio["seconds"]
cpu = int(ticks) / int(tick)
done = iops * seconds
block = {"1m-seqwrite": 1 << 20, "4k-randwrite": 4096, "4k-randread": 4096}[name]
row = {"engine": "graid", "backend": backend, "frontend": "nbd", "level": f"raid{lv}",
       "members": 5 if lv == "5" else 6, "strip_bytes": 65536, "state": "optimal", "profile": name,
       "block_bytes": block, "read_percent": 100 if name == "4k-randread" else 0,
       "threads": 1, "qd": 32, "seconds": seconds, "iops": iops, "mb_per_s": fio["mb_per_s"],
       "lat_us": fio["lat_us"],
       "cpu_us_per_io": cpu / done * 1e6 if done else None,
       "cores_per_miops": cpu / done * 1e6 if done else None,
       "limit_iops": None, "limit_share": None, "load_percent": None, "target_iops": None}
with open(rows, "a") as f:
    f.write(json.dumps(row) + "\n")
lat = row["lat_us"]
cpu_io = row["cpu_us_per_io"] or 0
print(f"{row['level']:<6} {backend:<7} {'nbd':<10} {name:<14} {'-':>6} {iops:10.0f} "
      f"{row['mb_per_s']:9.1f} {lat['mean']:9.1f} {lat['p99']:9.1f} {lat['p999']:9.1f} "
      f"{cpu_io:8.2f} {'-':>6}", flush=True)
PY
  done
done
/usr/bin/python3 - "$rows" "$out" "$seconds" "$member_bytes" "$limits" <<'PY'
import datetime, json, os, platform, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
if sys.argv[5]:
    suite = json.load(open(sys.argv[5]))
    for r in rows:
        ref = next((x for x in suite["rows"] if x["level"] == r["level"] and x["profile"] == r["profile"]
                    and x["state"] == "optimal" and x["frontend"] == "in-process"
                    and x.get("load_percent") is None and x.get("limit_iops")), None)
        if ref:
            r["limit_iops"] = ref["limit_iops"]
            r["limit_share"] = r["iops"] / ref["limit_iops"]
            if r["limit_share"] > 1.05:
                r["limit_reason"] = (f"the limit is the suite's, measured on its own members "
                                     f"({suite['host']['members']}), not this run's")
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
doc = {"schema": "graid-bench-report/1", "source": "graid-bench suite, through graidd over NBD",
       "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
       "command": "bench/report/nbd_frontend.sh (fio --ioengine=nbd, 1 job, QD 32)",
       "host": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
                "members": f"files, {int(sys.argv[4]) >> 20} MiB each"},
       "plan": {"quick": False, "seconds": float(sys.argv[3])}, "rows": rows}
json.dump(doc, open(sys.argv[2], "w"), indent=1)
PY
