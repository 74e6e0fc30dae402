#!/usr/bin/python3
"""graid's benchmark report: tables (Markdown) and PNG plots from benchmark JSON.

    graid_report.py --out DIR FILE.json [FILE.json ...]
    graid_report.py --check FILE.json [FILE.json ...]     (validate only)

Every input is a report document of schema "graid-bench-report/1" (docs/benchmarks.md, "The
JSON"): what graid-bench's suite writes, md-compare's results from the VM, or a device run's.
Rows of all inputs are merged into one report: DIR/report.md and DIR/*.png. The plots read only
this JSON. A document that does not follow the schema is refused with the file, the row and the
field named, and nothing is written.
"""

import argparse
import json
import math
import os
import sys

SCHEMA = "graid-bench-report/1"
STATES = ("optimal", "degraded", "rebuilding")
# Field -> type(s) every row must carry ("number" fields may be null where not measured).
REQUIRED = {
    "engine": str,  # "graid", "md", "raw"
    "backend": str,  # "cpu", "cuda", "ref", "" for md and raw
    "frontend": str,  # "in-process", "nbd", "ublk"
    "level": str,
    "members": int,
    "state": str,
    "profile": str,
    "block_bytes": int,
    "read_percent": int,
    "iops": (int, float),
    "mb_per_s": (int, float),
    "lat_us": dict,
}
OPTIONAL_NUMBERS = ("cpu_us_per_io", "cores_per_miops", "limit_share", "load_percent",
                    "target_iops")
LATENCY_KEYS = ("mean", "p50", "p99", "p999")


class ReportError(Exception):
    pass


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise ReportError(f"{path}: cannot read: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not JSON: {e.msg} at line {e.lineno}") from None
    if not isinstance(doc, dict):
        raise ReportError(f"{path}: expected an object with \"schema\" and \"rows\"")
    if doc.get("schema") != SCHEMA:
        raise ReportError(f"{path}: schema is {doc.get('schema')!r}, expected {SCHEMA!r}")
    rows = doc.get("rows")
    if not isinstance(rows, list):
        raise ReportError(f"{path}: \"rows\" must be a list")
    for i, row in enumerate(rows):
        check_row(path, i, row)
        row["_source"] = doc.get("source", os.path.basename(path))
    return doc


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_row(path, i, row):
    where = f"{path}: row {i}"
    if not isinstance(row, dict):
        raise ReportError(f"{where}: not an object")
    for key, kind in REQUIRED.items():
        if key not in row:
            raise ReportError(f"{where}: missing \"{key}\"")
        v = row[key]
        if kind in ((int, float),):
            if not is_number(v) or v < 0:
                raise ReportError(f"{where}: \"{key}\" must be a number >= 0, not {v!r}")
        elif not isinstance(v, kind) or isinstance(v, bool):
            raise ReportError(f"{where}: \"{key}\" must be {kind.__name__}, not {v!r}")
    if row["state"] not in STATES:
        raise ReportError(f"{where}: \"state\" is {row['state']!r}, expected one of {STATES}")
    for key in LATENCY_KEYS:
        v = row["lat_us"].get(key)
        if not is_number(v):
            raise ReportError(f"{where}: \"lat_us.{key}\" must be a number, not {v!r}")
    for key in OPTIONAL_NUMBERS:
        v = row.get(key)
        if v is not None and not is_number(v):
            raise ReportError(f"{where}: \"{key}\" must be a number or null, not {v!r}")
    share = row.get("limit_share")
    if share is not None and share > 1.05 and not row.get("limit_reason"):
        raise ReportError(f"{where}: limit_share {share:.2f} above 1.05 without \"limit_reason\"")


def series(row):
    """The name a row is plotted under: what ran it."""
    if row["engine"] == "graid":
        name = f"graid {row['backend']}"
    else:
        name = row["engine"]
    where = [row["frontend"].replace("in-process", "in process")]
    if row.get("members_kind"):
        where.append(row["members_kind"])
    if where:
        name += f" ({', '.join(where)})"
    return name


def offered(row):
    """The rate a load point was asked for (its achieved IOPS where the target is missing)."""
    return row.get("target_iops") if row.get("target_iops") is not None else row["iops"]


def is_load_point(row):
    return row.get("load_percent") is not None


def short(v):
    """1234567 -> '1.2M', 45678 -> '46K'."""
    if v >= 1e6:
        return f"{v / 1e6:.1f}M"
    if v >= 1e3:
        return f"{v / 1e3:.0f}K"
    return f"{v:.0f}"


def fmt_num(v, digits=0):
    if v is None:
        return "-"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def plot_bars(plt, rows, level, out_dir):
    """IOPS per profile, one bar per series, optimal arrays at full load."""
    chosen = [r for r in rows if r["level"] == level and r["state"] == "optimal"
              and not is_load_point(r)]
    if not chosen:
        return None
    profiles = sorted({r["profile"] for r in chosen}, key=profile_order(chosen))
    names = sorted({series(r) for r in chosen})
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(profiles) + 2), 4.5))
    width = 0.8 / len(names)
    for n, name in enumerate(names):
        xs, ys = [], []
        for p, profile in enumerate(profiles):
            match = [r for r in chosen if r["profile"] == profile and series(r) == name]
            if match:
                xs.append(p - 0.4 + width * (n + 0.5))
                ys.append(match[0]["iops"])
        bars = ax.bar(xs, ys, width, label=name)
        ax.bar_label(bars, labels=[short(y) for y in ys], fontsize="x-small", rotation=90,
                     padding=2)
    ax.set_xticks(range(len(profiles)))
    ax.set_xticklabels(profiles, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.margins(y=0.25)
    ax.set_ylabel("IOPS (log scale)")
    ax.set_title(f"{level}, optimal: IOPS per profile")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    return save(fig, plt, out_dir, f"iops-{level}.png")


def plot_states(plt, rows, level, out_dir):
    """Degraded and rebuilding IOPS as a share of optimal, per profile and series."""
    full = [r for r in rows if r["level"] == level and not is_load_point(r)]
    optimal = {(series(r), r["profile"]): r["iops"] for r in full if r["state"] == "optimal"}
    bars = []
    for r in full:
        base = optimal.get((series(r), r["profile"]))
        if r["state"] != "optimal" and base:
            bars.append((r["profile"], f"{series(r)}, {r['state']}", r["iops"] / base))
    if not bars:
        return None
    profiles = sorted({b[0] for b in bars}, key=profile_order(full))
    names = sorted({b[1] for b in bars})
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(profiles) + 2), 4.5))
    width = 0.8 / len(names)
    for n, name in enumerate(names):
        xs = [profiles.index(p) - 0.4 + width * (n + 0.5) for p, s, _ in bars if s == name]
        ys = [v for _, s, v in bars if s == name]
        ax.bar(xs, ys, width, label=name)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(profiles)))
    ax.set_xticklabels(profiles, rotation=30, ha="right")
    ax.set_ylabel("IOPS / optimal")
    ax.set_title(f"{level}: degraded and rebuilding against optimal")
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    return save(fig, plt, out_dir, f"states-{level}.png")


def plot_latency(plt, rows, out_dir):
    """p99 and mean latency against the offered load of the rate-limited runs (open loop,
    latency counted from when each request was due), one line per series."""
    points = [r for r in rows if is_load_point(r)]
    if not points:
        return None
    groups = sorted({(r["level"], r["state"], r["profile"]) for r in points})
    cols = min(3, len(groups))
    rows_n = (len(groups) + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(5 * cols, 4 * rows_n), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(groups):]:
        ax.set_visible(False)
    for ax, (level, state, profile) in zip(flat, groups):
        chosen = [r for r in points
                  if (r["level"], r["state"], r["profile"]) == (level, state, profile)]
        for name in sorted({series(r) for r in chosen}):
            line = sorted((r for r in chosen if series(r) == name),
                          key=lambda r: r["load_percent"])
            xs = [offered(r) for r in line]
            ax.plot(xs, [r["lat_us"]["p99"] for r in line], marker="o", label=f"{name} p99")
            ax.plot(xs, [r["lat_us"]["mean"] for r in line], linestyle="--", marker=".",
                    label=f"{name} mean")
            for r, x in zip(line, xs):
                ax.annotate(f"{r['load_percent']:.0f}%", (x, r["lat_us"]["p99"]),
                            textcoords="offset points", xytext=(0, 5), ha="center",
                            fontsize="x-small")
        ax.set_yscale("log")
        ax.set_xlabel("offered load (IOPS; % of the measured maximum)")
        ax.set_ylabel("latency (µs, log scale)")
        ax.set_title(f"{profile}, {level} {state}", fontsize="medium")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small")
    return save(fig, plt, out_dir, "latency-vs-load.png")


def plot_cpu(plt, rows, out_dir):
    """Host CPU per request (µs), optimal arrays at full load."""
    chosen = [r for r in rows if r["state"] == "optimal" and not is_load_point(r)
              and r.get("cpu_us_per_io") is not None]
    if not chosen:
        return None
    keys = sorted({(r["level"], r["profile"]) for r in chosen},
                  key=lambda k: (k[0], profile_order(chosen)(k[1])))
    names = sorted({series(r) for r in chosen})
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(keys) + 2), 4.5))
    width = 0.8 / len(names)
    for n, name in enumerate(names):
        xs, ys = [], []
        for k, (level, profile) in enumerate(keys):
            match = [r for r in chosen if (r["level"], r["profile"]) == (level, profile)
                     and series(r) == name]
            if match:
                xs.append(k - 0.4 + width * (n + 0.5))
                ys.append(match[0]["cpu_us_per_io"])
        ax.bar(xs, ys, width, label=name)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"{p}\n{lv}" for lv, p in keys], rotation=45, ha="right",
                       fontsize="small")
    ax.set_yscale("log")
    ax.set_ylabel("CPU µs per request, log (= cores per million IOPS)")
    ax.set_title("Host CPU per request, optimal")
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    return save(fig, plt, out_dir, "cpu-per-request.png")


def profile_order(rows):
    """Profiles in the order they first appear in the input."""
    order = {}
    for r in rows:
        order.setdefault(r["profile"], len(order))
    return lambda p: order.get(p, len(order))


def save(fig, plt, out_dir, name):
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return name


def markdown(docs, rows, plots):
    out = ["# graid benchmark report", ""]
    for doc in docs:
        host = doc.get("host", {})
        out.append(f"- **{doc.get('source', '?')}**, {doc.get('generated', '?')}: "
                   f"`{doc.get('command', '?')}`; {host.get('cpu', '?')}, "
                   f"{host.get('cores', '?')} cores, kernel {host.get('kernel', '?')}, "
                   f"members: {host.get('members', '?')}")
    out.append("")
    for plot in plots:
        out.append(f"![{plot}]({plot})")
        out.append("")
    header = ("| level | state | profile | series | IOPS | MB/s | mean µs | p99 µs | p99.9 µs "
              "| CPU µs/IO | of limit |")
    full = [r for r in rows if not is_load_point(r)]
    if full:
        out += ["## Full load", "", header, "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in full:
            share = fmt_num(r.get("limit_share"), 2)
            if r.get("limit_reason"):
                share += f" ({r['limit_reason']})"
            out.append(f"| {r['level']} | {r['state']} | {r['profile']} | {series(r)} | "
                       f"{fmt_num(r['iops'])} | {fmt_num(r['mb_per_s'], 1)} | "
                       f"{fmt_num(r['lat_us']['mean'], 1)} | {fmt_num(r['lat_us']['p99'], 1)} | "
                       f"{fmt_num(r['lat_us']['p999'], 1)} | "
                       f"{fmt_num(r.get('cpu_us_per_io'), 2)} | {share} |")
        out.append("")
    load = [r for r in rows if is_load_point(r)]
    if load:
        out += ["## Latency against load", "",
                "| level | state | profile | series | load % | IOPS | mean µs | p99 µs | p99.9 µs |",
                "|---|---|---|---|---:|---:|---:|---:|---:|"]
        for r in load:
            out.append(f"| {r['level']} | {r['state']} | {r['profile']} | {series(r)} | "
                       f"{fmt_num(r['load_percent'])} | {fmt_num(r['iops'])} | "
                       f"{fmt_num(r['lat_us']['mean'], 1)} | {fmt_num(r['lat_us']['p99'], 1)} | "
                       f"{fmt_num(r['lat_us']['p999'], 1)} |")
        out.append("")
    return "\n".join(out)


def main(argv):
    parser = argparse.ArgumentParser(
        prog="graid_report.py",
        description="Tables and PNG plots from graid benchmark JSON (schema " + SCHEMA + ").")
    parser.add_argument("--out", help="report directory (created)")
    parser.add_argument("--check", action="store_true",
                        help="only check the inputs against the schema; write nothing")
    parser.add_argument("inputs", nargs="+", metavar="FILE.json")
    args = parser.parse_args(argv)
    try:
        docs = [load(path) for path in args.inputs]
    except ReportError as e:
        print(f"graid_report: {e}", file=sys.stderr)
        return 2
    rows = [row for doc in docs for row in doc["rows"]]
    # The plots show arrays; a raw reference drive (md-compare's) is in the tables only.
    arrays = [row for row in rows if row["engine"] != "raw"]
    if not rows:
        print("graid_report: no rows in the input", file=sys.stderr)
        return 2
    if args.check:
        print(f"graid_report: {len(rows)} rows follow {SCHEMA}")
        return 0
    if not args.out:
        parser.error("--out DIR is needed to write the report (or --check)")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("graid_report: needs matplotlib (Debian: apt install python3-matplotlib)",
              file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    plots = []
    for level in sorted({r["level"] for r in arrays}):
        plots.append(plot_bars(plt, arrays, level, args.out))
        plots.append(plot_states(plt, arrays, level, args.out))
    plots.append(plot_latency(plt, arrays, args.out))
    plots.append(plot_cpu(plt, arrays, args.out))
    plots = [p for p in plots if p]
    with open(os.path.join(args.out, "report.md"), "w", encoding="utf-8") as f:
        f.write(markdown(docs, rows, plots) + "\n")
    print(f"graid_report: {len(rows)} rows, {len(plots)} plots in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
