#!/bin/sh
# bench/report/nbd_frontend.sh end to end with this build's graidd and graidctl and fio: six rows
# (RAID5 and RAID6, three profiles) through NBD that the report's schema check accepts, each with
# requests done and graidd's CPU per request, the limit taken from the suite's JSON where it has
# the row; nothing left in the work dir.
#   bench_nbd_frontend.sh SCRIPT GRAIDD GRAIDCTL REPORT_SCRIPT SCRATCH_DIR_SH
set -eu
d=$(sh "$5")
trap 'rm -rf "$d"' EXIT
# The suite's JSON as the limits: a RAID5 4K random write row with a limit of 1,000,000 IOPS.
cat >"$d/limits.json" <<'JSON'
{"schema": "graid-bench-report/1", "host": {"members": "files"}, "rows": [
 {"level": "raid5", "profile": "4k-randwrite", "state": "optimal", "frontend": "in-process",
  "load_percent": null, "limit_iops": 1000000}]}
JSON
bash "$1" "$2" "$3" "$d" 67108864 0.5 cpu "$d/nbd.json" "$d/limits.json"
rm "$d/limits.json"
/usr/bin/python3 "$4" --check "$d/nbd.json"
/usr/bin/python3 - "$d/nbd.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
assert len(rows) == 6, f"{len(rows)} rows"
assert {(r["level"], r["profile"]) for r in rows} == {
    (lv, p) for lv in ("raid5", "raid6") for p in ("1m-seqwrite", "4k-randwrite", "4k-randread")}
for r in rows:
    assert r["frontend"] == "nbd" and r["backend"] == "cpu", r
    assert r["iops"] > 0 and r["cpu_us_per_io"] and r["cpu_us_per_io"] > 0, r
    if (r["level"], r["profile"]) == ("raid5", "4k-randwrite"):
        assert r["limit_iops"] == 1000000 and abs(r["limit_share"] - r["iops"] / 1e6) < 1e-12, r
    else:
        assert r["limit_share"] is None, r
PY
left=$(find "$d" -mindepth 1 ! -name nbd.json | head -n 1)
[ -z "$left" ] || { echo "left behind: $left"; exit 1; }
echo "nbd_frontend: OK"
