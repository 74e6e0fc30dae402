"""One fio job's figures from its JSON output (--output-format=json), as the benchmark report's
rows carry them: IOPS and MB/s of both directions together, latency in µs (the mean weighted by
each direction's I/Os; p50, p99 and p99.9 the larger of the two directions' completion-latency
percentiles, an upper bound for a mixed job; the max of both). Used by md_compare_to_report.py
and nbd_frontend.sh."""

import json


class FioJsonError(Exception):
    pass


def _percentile(clat, key):
    for k, v in clat.get("percentile", {}).items():
        if abs(float(k) - key) < 1e-6:
            return v / 1000.0
    return None


def figures(path):
    """{"iops", "mb_per_s", "seconds", "lat_us": {mean, p50, p99, p999, max}} of the first job."""
    try:
        with open(path, encoding="utf-8") as f:
            job = json.load(f)["jobs"][0]
    except (OSError, ValueError, KeyError, IndexError) as e:
        raise FioJsonError(f"{path}: not fio JSON output ({e})") from None
    sides = [job[d] for d in ("read", "write") if job.get(d, {}).get("total_ios", 0) > 0]
    if not sides:
        raise FioJsonError(f"{path}: no I/O in the job")
    ios = sum(s["total_ios"] for s in sides)
    lat = {"mean": sum(s["lat_ns"]["mean"] * s["total_ios"] for s in sides) / ios / 1000.0,
           "max": max(s["lat_ns"]["max"] for s in sides) / 1000.0}
    for name, key in (("p50", 50.0), ("p99", 99.0), ("p999", 99.9)):
        vals = [_percentile(s.get("clat_ns", {}), key) for s in sides]
        vals = [v for v in vals if v is not None]
        if not vals:
            raise FioJsonError(f"{path}: no {key} percentile in clat_ns")
        lat[name] = max(vals)
    return {"iops": sum(s["iops"] for s in sides),
            "mb_per_s": sum(s["bw_bytes"] for s in sides) / 1e6,
            "seconds": job.get("job_runtime", 0) / 1000.0,
            "lat_us": lat}
