"""Scrapes a Prometheus endpoint and parses it with Prometheus's own parser
(python3-prometheus-client); prints the samples as JSON, {"name{label=value,...}": value}, labels
sorted. Exits 1, saying why, when the page cannot be fetched or does not parse.

Usage: scrape_metrics.py URL
"""
import json
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def main():
    url = sys.argv[1]
    with urllib.request.urlopen(url, timeout=10) as r:
        if r.status != 200:
            sys.exit(f"{url}: HTTP {r.status}")
        ctype = r.headers.get("Content-Type", "")
        if not ctype.startswith("text/plain; version=0.0.4"):
            sys.exit(f"{url}: Content-Type {ctype!r}")
        text = r.read().decode("utf-8")
    out = {}
    types = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    print(json.dumps({"samples": out, "types": types}))


if __name__ == "__main__":
    main()
