#!/usr/bin/env python3
"""Clean output (docs/output.md): the escape and OSC sequences a trial prints on stderr, puts
in a metric's name, in a parameter's value and so in its error, reach no output raw: not the
run's log lines (written to a pipe, as a CI log is), not `trials`, `status`, `best`, not the
CSV, TSV and JSON exports, not the dashboard's JSON and charts. Each shows them escaped
(ESC as \\x1b), and a spreadsheet runs no cell as a formula."""

import csv
import io
import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import BIN, E2E, PY, main, merged_env, wait_for, yaml_str

# A screen clear, an OSC 52 clipboard write, an OSC window title, an 8-bit CSI (as UTF-8: a C1
# control), a right-to-left override, and a bare 8-bit CSI byte (not UTF-8) on stderr.
EVIL = "\x1b[2J\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x1b\\\u009b31m\u202e"
TRIAL = r"""
import json, os, sys
evil = %r
x = int(sys.argv[1])
f = os.fdopen(int(os.environ['TUNEPACK_REPORT_FD']), 'w')
f.write(json.dumps({"acc": x, "m" + evil: 1, "neg": -0.5, "=cmd": "=1+1"}) + "\n")
f.flush()
sys.stderr.buffer.write(b"before\n" + ("boom " + evil).encode() + b" \x9b2J\n")
sys.stderr.flush()
sys.exit(0 if x else 3)
""" % EVIL

# Visible forms each output must show (the sequences arrived, escaped, not dropped).
SHOWN = ("\\x1b[2J", "\\x1b]52;c;cHduZWQ=\\x07", "\\u009b31m")


class CleanOutput(E2E):

    def assertClean(self, text, what, allow="\n"):
        """No control character (C0 but allow, DEL, C1) and no bidirectional override."""
        for c in text:
            bad = (ord(c) < 0x20 and c not in allow) or 0x7f <= ord(c) <= 0x9f \
                or 0x202a <= ord(c) <= 0x202e or 0x2066 <= ord(c) <= 0x2069
            self.assertFalse(bad, "%s has %r raw: %r" % (what, c, text[:3000]))

    def assertShown(self, text, what):
        for s in SHOWN:
            self.assertIn(s, text, what)

    def finished(self):
        exp = self.experiment(
            "name: evil\ncommand: [%s, %s, \"{x}\", \"{tag}\"]\n"
            "metric: {name: acc, mode: max}\n"
            "space:\n  x: {choice: [0, 1]}\n  tag: {choice: [%s]}\n"
            "search: {algorithm: grid}\nfail_fast: false\n"
            % (yaml_str(PY), yaml_str(self.write("trial.py", TRIAL)), yaml_str("=tag" + EVIL)))
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 0)
        return r, run_dir

    def test_no_escape_sequence_from_a_trial_reaches_any_output_raw(self):
        r, run_dir = self.finished()
        # the run's log lines, written to a pipe (not a terminal): the failure with its last line
        self.assertClean(r.stdout + r.stderr, "run output")
        self.assertIn("boom \\x1b[2J", r.stdout)
        for args in (("trials",), ("status",), ("best",), ("best", "--top", "2"),
                     ("trials", "--sort", "value")):
            out = self.tp(args[0], run_dir, *args[1:])
            self.assertExit(out, 0)
            self.assertClean(out.stdout + out.stderr, " ".join(args))
        trials = self.tp("trials", run_dir).stdout
        self.assertShown(trials, "trials")  # its error and the tail of its stderr
        self.assertIn("| before", trials)
        self.assertIn("tag==tag\\x1b[2J", self.tp("status", run_dir).stdout)
        self.assertIn("tag: =tag\\x1b[2J", self.tp("best", run_dir).stdout)

        # the exports: CSV and TSV escaped and safe in a spreadsheet; JSON exact, escaped by JSON
        csv_out = self.tp("export", run_dir, "--format", "csv").stdout
        self.assertClean(csv_out, "csv")
        self.assertShown(csv_out, "csv")
        rows = list(csv.DictReader(io.StringIO(csv_out, newline="")))
        self.assertEqual(len(rows), 2, csv_out)
        self.assertIn("metric.m" + SHOWN[0] + SHOWN[1], "".join(rows[0].keys()))
        for row in rows:
            self.assertTrue(row["tag"].startswith("'=tag\\x1b"), row)  # a formula: neutralised
            self.assertEqual(row["metric.neg"], "-0.5")                # a number stays one
            self.assertEqual(row["metric.=cmd"], "'=1+1")
        failed = [row for row in rows if row["state"] == "failed"][0]
        self.assertIn("before\nboom \\x1b[2J", failed["stderr_tail"])  # its lines stay lines
        self.assertIn("\\x9b2J", failed["stderr_tail"])                 # the bare 8-bit CSI
        tsv = self.tp("export", run_dir, "--format", "tsv").stdout
        self.assertClean(tsv, "tsv", allow="\n\t")
        self.assertShown(tsv, "tsv")
        lines = tsv.splitlines()
        self.assertEqual(len(lines), 3, tsv)  # a header and one line per trial: no break inside
        self.assertEqual(len({line.count("\t") for line in lines}), 1, tsv)
        self.assertIn("before\\nboom", tsv)
        raw = subprocess.run([BIN, "export", run_dir, "--format", "json"], capture_output=True,
                             check=True).stdout
        self.assertFalse([b for b in raw if b < 0x20 and b != 0x0a], raw[:2000])
        exported = json.loads(raw)
        self.assertIn("m" + EVIL, exported[0]["metrics"])  # UTF-8 text: exact, escaped by JSON
        self.assertIn("\\x9b2J", exported[0]["stderr_tail"])  # not UTF-8: shown, not lost

        # the dashboard: its JSON and its charts
        ready = self.path("url")
        p = subprocess.Popen([BIN, "dashboard", run_dir, "--listen", "127.0.0.1:0",
                              "--ready-file=" + ready], cwd=self.tmp, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=merged_env(None))
        self.procs.append(p)
        wait_for(lambda: os.path.exists(ready) and os.path.getsize(ready) or p.poll() is not None,
                 20)
        with open(ready) as f:
            url = urllib.parse.urlsplit(f.read().strip())
        token = urllib.parse.parse_qs(url.query).get("token", [None])[0]
        headers = {"Authorization": "Bearer " + token} if token else {}

        def get(path):
            req = urllib.request.Request("http://%s%s" % (url.netloc, path), headers=headers)
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.read().decode()

        for path in ("/api/experiments", "/api/e/0/summary", "/api/e/0/trials", "/api/e/0/trial/0",
                     "/api/e/0/log/0?stream=stderr", "/api/e/0/curves.svg",
                     "/api/e/0/parcoords.svg", "/api/e/0/history.svg"):
            body = get(path)
            self.assertClean(body, path)
            if path.endswith(".svg"):
                continue
            self.assertClean(json.dumps(json.loads(body), ensure_ascii=False), path + " (decoded)")
        log = json.loads(get("/api/e/0/log/0?stream=stderr"))["text"]
        self.assertShown(log, "the dashboard's log")
        self.assertIn("before\n", log)


if __name__ == "__main__":
    main()
