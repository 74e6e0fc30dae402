#!/usr/bin/python3
"""md-compare's results (the VM scenario tests/vm/scenarios/md-compare.sh) as a benchmark report
document (schema graid-bench-report/1), so md and graid through ublk stand beside the suite's
rows in one report:

    md_compare_to_report.py LOGDIR --kernel 6.12 --out md-compare.json

LOGDIR is the scenario's log folder (the run's share/logs/md-compare/ on the host): one fio JSON
per target and profile (perf-TARGET-PROFILE.json, TARGET md5-nvme, graid6-brd, raw-nvme, ...) and
graid-bench --raw-only JSON per member set and level (limits-SET-raidN.json), the member-bound
limit of that shape.

Each fio run becomes a row: engine md (frontend "kernel"), graid (frontend "ublk", backend cpu)
or raw (the reference drive alone, frontend "block"); members_kind "nvme" (qemu's emulated NVMe)
or "brd" (RAM disks). Latency: the mean over both directions weighted by their I/Os; p50, p99 and
p99.9 the larger of the two directions' completion-latency percentiles (an upper bound for a
mixed job). CPU per request is null: fio sees only its own process, not the kernel's or graidd's
work. Share of the limit: graid and md rows against limits-SET-raidN.json's limit_iops.
"""

import argparse
import glob
import json
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fio_json  # noqa: E402  (beside this script)

SCHEMA = "graid-bench-report/1"
PROFILES = {  # md-compare's name -> (the suite's name, block bytes, read percent)
    "1m-seqwrite": ("1m-seqwrite", 1 << 20, 0),
    "64k-seqwrite": ("64k-seqwrite", 64 << 10, 0),
    "4k-randwrite": ("4k-randwrite", 4 << 10, 0),
    "4k-randread": ("4k-randread", 4 << 10, 100),
    "8k-mix70": ("8k-randrw70", 8 << 10, 70),
}
TARGET = re.compile(r"^perf-(md|graid)([56])-(nvme|brd)-(.+)\.json$|^perf-raw-(nvme|brd)-(.+)\.json$")
LIMIT_REASON = ("the limit is one 2 s raw run in the TCG guest (graid-bench --raw-only): a single "
                "sample, which the guest's noise can put below what an array run then gets")


class ConvertError(Exception):
    pass


def figures(path):
    try:
        return fio_json.figures(path)
    except fio_json.FioJsonError as e:
        raise ConvertError(str(e)) from None


def limits(logdir):
    """limit_iops per (set, level, suite profile) from graid-bench --raw-only JSON."""
    out = {}
    for path in glob.glob(os.path.join(logdir, "limits-*-raid*.json")):
        m = re.match(r"^limits-(nvme|brd)-raid([56])\.json$", os.path.basename(path))
        if not m:
            continue
        try:
            with open(path, encoding="utf-8") as f:
                entries = json.load(f)
        except (OSError, ValueError) as e:
            raise ConvertError(f"{path}: not graid-bench JSON ({e})") from None
        for e in entries:
            if e.get("limit_iops"):
                out[(m.group(1), "raid" + m.group(2), e["profile"])] = e["limit_iops"]
    return out


def convert(logdir, kernel, generated):
    limit = limits(logdir)
    rows = []
    for path in sorted(glob.glob(os.path.join(logdir, "perf-*.json"))):
        m = TARGET.match(os.path.basename(path))
        if not m:
            continue
        if m.group(1):
            engine, level, kind, name = m.group(1), "raid" + m.group(2), m.group(3), m.group(4)
        else:
            engine, level, kind, name = "raw", "raw", m.group(5), m.group(6)
        if name not in PROFILES:
            continue
        profile, block, read = PROFILES[name]
        row = {"engine": engine,
               "backend": "cpu" if engine == "graid" else "",
               "frontend": {"graid": "ublk", "md": "kernel", "raw": "block"}[engine],
               "members_kind": kind,
               "level": level,
               "members": 1 if engine == "raw" else 5,
               "strip_bytes": 0 if engine == "raw" else 64 << 10,
               "state": "optimal",
               "profile": profile,
               "block_bytes": block,
               "read_percent": read,
               "threads": 1,
               "qd": 32,
               "cpu_us_per_io": None,
               "cores_per_miops": None,
               "limit_iops": None,
               "limit_share": None,
               "load_percent": None,
               "target_iops": None}
        row.update(figures(path))
        lim = limit.get((kind, level, profile))
        if lim and engine != "raw":
            row["limit_iops"] = lim
            row["limit_share"] = row["iops"] / lim
            if row["limit_share"] > 1.05:
                row["limit_reason"] = LIMIT_REASON
        rows.append(row)
    if not rows:
        raise ConvertError(f"{logdir}: no perf-TARGET-PROFILE.json of md-compare there")
    return {"schema": SCHEMA,
            "source": "md-compare (tests/vm)",
            "generated": generated,
            "command": "tests/vm/run.sh --scenario md-compare",
            "host": {"cpu": "qemu TCG guest", "cores": 2, "kernel": kernel,
                     "members": "five emulated NVMe drives (nvme) and five brd RAM disks (brd)"},
            "plan": {"quick": False},
            "rows": rows}


def main(argv):
    parser = argparse.ArgumentParser(prog="md_compare_to_report.py", description=__doc__.split("\n")[0])
    parser.add_argument("logdir")
    parser.add_argument("--kernel", required=True, help="the guest's kernel (6.12, 7.3)")
    parser.add_argument("--generated", default="", help="when the VM ran (UTC, ISO 8601)")
    parser.add_argument("--out", required=True, help="the JSON document to write")
    args = parser.parse_args(argv)
    try:
        doc = convert(args.logdir, args.kernel, args.generated)
    except ConvertError as e:
        print(f"md_compare_to_report: {e}", file=sys.stderr)
        return 2
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    print(f"md_compare_to_report: {len(doc['rows'])} rows in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
