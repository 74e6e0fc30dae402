#!/usr/bin/python3
"""bench/report/graid_report.py on a small fixture: every plot is written and is a PNG, the
Markdown holds the rows; a document off the schema is refused with the file, row and field
named, and nothing is written."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "report", "graid_report.py")
MD_COMPARE = os.path.join(HERE, "..", "..", "bench", "report", "md_compare_to_report.py")
MD_FIXTURE = os.path.join(HERE, "md_compare")
FIXTURE = os.path.join(HERE, "report_fixture.json")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          check=False)


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "report")
        with open(FIXTURE, encoding="utf-8") as f:
            self.doc = json.load(f)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, doc):
        path = os.path.join(self.tmp.name, "in.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        return path

    def refused(self, doc, *words):
        r = run("--out", self.out, self.write(doc))
        self.assertEqual(r.returncode, 2, r.stderr)
        for w in words:
            self.assertIn(w, r.stderr)
        self.assertFalse(os.path.exists(self.out), "a refused input wrote a report")

    def test_fixture_gives_every_plot_as_png_and_the_tables(self):
        r = run("--out", self.out, FIXTURE)
        self.assertEqual(r.returncode, 0, r.stderr)
        expected = ["iops-raid5.png", "iops-raid6.png", "states-raid5.png", "states-raid6.png",
                    "latency-vs-load.png", "cpu-per-request.png"]
        for name in expected:
            path = os.path.join(self.out, name)
            self.assertTrue(os.path.isfile(path), name)
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), PNG_MAGIC, name)
            self.assertGreater(os.path.getsize(path), 5000, f"{name} looks empty")
        with open(os.path.join(self.out, "report.md"), encoding="utf-8") as f:
            md = f.read()
        for name in expected:
            self.assertIn(f"]({name})", md)
        self.assertIn("| raid6 | rebuilding | 4k-randwrite | graid cpu (in process) |", md)
        self.assertIn("1.08 (the raw baseline ran at QD 32 only)", md)
        self.assertIn("## Latency against load", md)

    def test_wrong_schema_is_refused(self):
        self.doc["schema"] = "graid-bench-report/0"
        self.refused(self.doc, "schema is 'graid-bench-report/0'", "graid-bench-report/1")

    def test_missing_field_names_the_row(self):
        del self.doc["rows"][3]["iops"]
        self.refused(self.doc, "row 3", '"iops"')

    def test_bad_state_and_latency_are_refused(self):
        self.doc["rows"][0]["state"] = "broken"
        self.refused(self.doc, "row 0", "state")
        with open(FIXTURE, encoding="utf-8") as f:
            doc = json.load(f)
        doc["rows"][1]["lat_us"]["p999"] = "slow"
        self.refused(doc, "row 1", "lat_us.p999")

    def test_a_share_above_the_limit_needs_its_reason(self):
        self.doc["rows"][0]["limit_share"] = 1.2
        self.refused(self.doc, "row 0", "above 1.05")

    def test_not_json_is_refused(self):
        path = os.path.join(self.tmp.name, "bad.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write("{ not json")
        r = run("--out", self.out, path)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not JSON", r.stderr)
        self.assertFalse(os.path.exists(self.out))

    def test_check_validates_and_writes_nothing(self):
        r = run("--check", FIXTURE)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("rows follow graid-bench-report/1", r.stdout)
        self.doc["rows"][2]["lat_us"] = {}
        path = self.write(self.doc)
        r = run("--check", path)
        self.assertEqual(r.returncode, 2)
        self.assertIn("row 2", r.stderr)

    def test_md_compare_results_join_the_report(self):
        doc = os.path.join(self.tmp.name, "md.json")
        r = subprocess.run([sys.executable, MD_COMPARE, MD_FIXTURE, "--kernel", "6.12", "--out",
                            doc], capture_output=True, text=True, check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(doc, encoding="utf-8") as f:
            md = json.load(f)
        rows = {(x["engine"], x["profile"]): x for x in md["rows"]}
        self.assertEqual(len(md["rows"]), 4, "an unknown profile is left out")
        g = rows[("graid", "4k-randwrite")]
        self.assertEqual((g["frontend"], g["members_kind"], g["level"]), ("ublk", "brd", "raid5"))
        self.assertAlmostEqual(g["iops"], 15000)
        self.assertAlmostEqual(g["lat_us"]["p99"], 5000)
        self.assertAlmostEqual(g["limit_share"], 15000 / 14000)
        self.assertIn("limit_reason", g)
        mix = rows[("graid", "8k-randrw70")]  # both directions: mean weighted, percentiles the larger
        self.assertAlmostEqual(mix["iops"], 33333.3, places=0)
        self.assertAlmostEqual(mix["lat_us"]["mean"], (0.7 * 1000000 + 0.3 * 2000000) / 1000)
        self.assertAlmostEqual(mix["lat_us"]["p999"], 9000)
        self.assertEqual(rows[("md", "4k-randwrite")]["frontend"], "kernel")
        self.assertIsNone(rows[("raw", "4k-randwrite")]["limit_share"])
        # Merged with the suite's rows into one report.
        r = run("--out", self.out, FIXTURE, doc)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.out, "report.md"), encoding="utf-8") as f:
            report = f.read()
        self.assertIn("| raid5 | optimal | 4k-randwrite | md (kernel, brd) |", report)
        self.assertIn("| raw | optimal | 4k-randwrite | raw (block, brd) |", report)
        self.assertFalse(os.path.exists(os.path.join(self.out, "iops-raw.png")))
        empty = os.path.join(self.tmp.name, "empty")
        os.mkdir(empty)
        r = subprocess.run([sys.executable, MD_COMPARE, empty, "--kernel", "6.12", "--out", doc],
                           capture_output=True, text=True, check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no perf-TARGET-PROFILE.json", r.stderr)

    def test_no_input_is_a_usage_error(self):
        r = run("--out", self.out)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("FILE.json", r.stderr)


if __name__ == "__main__":
    unittest.main()
