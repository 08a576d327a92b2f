#!/usr/bin/env python3
"""The dashboard (issue 13) in a real browser: Debian's headless Chromium loads each page while an
ASHA experiment packs trials onto stand-in GPUs, and what the pages show is checked against the
store (trial count, best value, one trial's curve, the placements). Screenshots of every page go
to $TUNEPACK_SCREENSHOTS (default: <build>/screenshots). Also: a failed trial's page (its
traceback line by line, its stderr, no empty chart), the token every address needs (issue 33),
`--no-token` and `--unix`, `run --dashboard`, and errors that say what is wrong."""

import http.client
import socket
import stat

import json
import math
import os
import re
import shlex
import subprocess
import sys
import urllib.error
import urllib.request

sys.dont_write_bytecode = True

from browser import Browser
from helpers import BUILD, BIN, GpuE2E, PY, main, merged_env, wait_for, yaml_str

SHOTS = os.environ.get("TUNEPACK_SCREENSHOTS") or os.path.join(BUILD, "screenshots")
GIB = 1024

# A trainer with a learning curve that honours budgets and checkpoints (ASHA pauses it).
TRAINER = r'''
import json, math, os, sys, time
x = float(sys.argv[1]); budget = int(float(sys.argv[2])); sleep = float(sys.argv[3])
gate = sys.argv[4] if len(sys.argv) > 4 else ""  # epochs past the first wait until it exists
ck = os.path.join(os.environ["TUNEPACK_CHECKPOINT_DIR"], "ckpt")
start = int(open(ck).read()) if os.path.exists(ck) else 0
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
for epoch in range(max(start, 0) + 1, budget + 1):
    while gate and epoch > 1 and not os.path.exists(gate) and os.path.isdir(os.path.dirname(gate)):
        time.sleep(0.05)
    time.sleep(sleep)
    print("epoch %d of trial x=%.3f" % (epoch, x), flush=True)
    rep.write(json.dumps({"step": epoch, "score": round((1 - (x - 0.3) ** 2) * (1 - math.exp(-epoch / 3.0)), 6)}) + "\n")
    with open(ck + ".tmp", "w") as f:
        f.write(str(epoch))
    os.rename(ck + ".tmp", ck)
'''


# A trial that fails with a traceback three frames deep and prints nothing on stdout.
FAILING = r'''
import sys
def load(path):
    with open(path) as f:
        return f.read()
def train(lr):
    return load("/nonexistent/data-%s.csv" % lr)
train(float(sys.argv[1]))
'''


# A trial reporting its objective and a second metric; it fails at either end of x.
TABLE_TRAINER = r'''
import json, os, sys
x = float(sys.argv[1]); opt = sys.argv[2]; dropout = float(sys.argv[3])
if x < 0.15 or x > 0.85:
    sys.exit("diverged at x=%.3f" % x)
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
for step in (1, 2):
    rep.write(json.dumps({"step": step, "score": round(x * step - dropout, 6),
                          "loss": round((1 - x) / step + (opt == "sgd"), 6)}) + "\n")
'''


# Objectives at odds: acc (max) rises with x, cost (min) too; lat (min, a third objective) is
# least at x = 0.5; y makes every one worse.
TWO_OBJECTIVES = r'''
import json, os, sys
x, y = float(sys.argv[1]), float(sys.argv[2])
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
rep.write(json.dumps({"acc": round(x - y, 6), "cost": round(x * x + y, 6),
                      "lat": round(abs(x - 0.5) + 0.1 * y, 6)}) + "\n")
'''


# A constrained metric (mem_gb = 10 x, feasible up to 5), not reported at x = 0.9.
CONSTRAINED = r'''
import json, os, sys
x = float(sys.argv[1])
report = {"loss": (x - 1.0) ** 2}
if x < 0.85:
    report["mem_gb"] = round(10 * x, 6)
os.write(int(os.environ["TUNEPACK_REPORT_FD"]), (json.dumps(report) + "\n").encode())
'''

# A trial that reports once and ends, the first to start; the others wait for the test's word (a
# file), so that the run is seen going with one trial ended.
GATED = r'''
import json, os, sys, time
first, release = sys.argv[1], sys.argv[2]
try:
    os.close(os.open(first, os.O_CREAT | os.O_EXCL))
except FileExistsError:
    while not os.path.exists(release):
        time.sleep(0.05)
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
rep.write(json.dumps({"step": 1, "score": float(sys.argv[3])}) + "\n")
'''


def get(url, headers=None):
    """(status, body text) of a GET."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def tab_names(b):
    """The experiment's tabs as the page shows them."""
    return b.eval("[...document.querySelectorAll('#tabs a')].map(a => a.textContent)")


def split_url(url):
    """The printed URL -> (base URL, token)."""
    m = re.match(r"(http://[^/]+/)\?token=([0-9a-f]{32})$", url)
    assert m, "not a URL with a token: %r" % url
    return m.group(1), m.group(2)


def api(url, path):
    """GET an API path of the dashboard whose printed URL is url, with its token."""
    base, token = split_url(url)
    return get(base + path, {"Authorization": "Bearer " + token})


class UnixHTTP(http.client.HTTPConnection):
    """HTTP over a Unix socket."""

    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(self.unix_path)


def request(conn, path, headers=None):
    """(status, headers, body) of a GET on an http.client connection, redirects not followed."""
    conn.request("GET", path, headers=headers or {})
    r = conn.getresponse()
    return r.status, r.headers, r.read().decode()

# One report, then it waits for the gate file (the test kills the run before it opens), or
# until the test's folder is gone.
HELD = r'''
import json, os, sys, time
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
rep.write(json.dumps({"step": 1, "score": float(sys.argv[1])}) + "\n")
while not os.path.exists(sys.argv[2]) and os.path.isdir(os.path.dirname(sys.argv[2])):
    time.sleep(0.05)
'''

# The objective rises with x most, with y less, and z does nothing; two report lines (a curve).
PLOTS_TRAINER = r'''
import json, os, sys
x, y, z = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
for step in (1, 2):
    rep.write(json.dumps({"step": step, "score": round((2 * x + 0.5 * y) * step / 2, 6)}) + "\n")
'''


# The objective rises with x, is best under adam, worst under sgd; y adds a little. Two
# report lines (a curve).
BRUSH_TRAINER = r'''
import json, os, sys
x, opt, y = float(sys.argv[1]), sys.argv[2], float(sys.argv[3])
bonus = {"adam": 0.5, "rmsprop": 0.25, "sgd": 0.0}[opt]
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
for step in (1, 2):
    rep.write(json.dumps({"step": step, "score": round((x + bonus) * step / 2 + 0.01 * y, 6)}) + "\n")
'''


def axis_u(axis, value):
    """Where a value lies along a number's axis of the parallel coordinates, 0 (bottom) to 1,
    as the page scales it (the axis rect's data-lo, data-hi, data-log)."""
    lo, hi, log = axis["lo"], axis["hi"], axis["log"]
    if log:
        return math.log(value / lo) / math.log(hi / lo)
    return (value - lo) / ((hi - lo) or 1)


class Dashboard(GpuE2E):

    def setUp(self):
        super().setUp()
        self.fake_gpus([(80 * GIB, None), (40 * GIB, None)])
        os.makedirs(SHOTS, exist_ok=True)

    def exp(self, trials=12, sleep=0.25, concurrency=4, gate=""):
        return self.experiment(
            "name: dash\n"
            "command: [%s, %s, \"{x}\", \"{epochs}\", \"%s\", %s]\n"
            "metric: {name: score, mode: max}\n"
            "space:\n  x: {uniform: [0, 1]}\n  width: {choice: [64, 128, 256]}\n"
            "search: {algorithm: random, trials: %d, seed: 3, scheduler: asha}\n"
            "budget: {name: epochs, min: 1, max: 9, eta: 3}\n"
            "concurrency: %d\n"
            "resources: {gpus: 1, gpu_memory: 10G, gpu_compute: 0.25}\n"
            "placement: {policy: wfd, reserve: 512M}\n"
            % (yaml_str(PY), yaml_str(self.write("trainer.py", TRAINER)), sleep, yaml_str(gate),
               trials, concurrency))

    def start_dashboard(self, *args):
        ready = self.path("url-%d" % len(self.procs))
        p = subprocess.Popen([BIN, "dashboard", *args, "--ready-file=" + ready], cwd=self.tmp,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=merged_env(None), text=True)
        self.procs.append(p)
        wait_for(lambda: os.path.exists(ready) or p.poll() is not None, 20)
        if p.poll() is not None:
            self.fail("the dashboard ended: %s" % p.stderr.read())
        with open(ready) as f:
            return p, f.read().strip()

    def shot(self, b, name):
        b.screenshot(os.path.join(SHOTS, "dashboard-%s.png" % name))

    def test_every_page_shows_what_the_store_holds_while_it_runs(self):
        d, gate = self.path("run"), self.path("gate")
        with Browser() as b:  # started first: it takes seconds on a busy machine
            # No trial goes past its first epoch before the gate opens: the run is still going
            # when the first pages are looked at, however slow the machine.
            run = self.start_run(self.exp(sleep=0.6, gate=gate), d, env=self.gpu_env())
            wait_for(lambda: self.poll_query(d, "SELECT value FROM meta WHERE key = 'name'"), 30)
            _, printed = self.start_dashboard(d, "--listen", "127.0.0.1:0")
            url, token = split_url(printed)
            # Without the token the browser gets a page that says how to get in.
            b.goto(url + "#/e/0/trials")
            b.wait_for("document.body && document.body.textContent.includes('?token=')")
            self.assertIn("private", b.eval("document.title"))
            # A value has been reported before the pages are looked at.
            wait_for(lambda: (self.poll_query(d, "SELECT count(*) AS n FROM metrics") or
                              [{"n": 0}])[0]["n"] >= 3, 60)
            # The printed URL lets it in; the token leaves the address bar for a cookie that
            # the page's script cannot read, and every later page is let in by the cookie.
            b.goto(printed + "#/e/0/trials")
            b.wait_for("document.querySelectorAll('#trials tr[data-trial-id]').length > 0")
            self.assertEqual(b.eval("location.href"), url + "#/e/0/trials")
            self.assertNotIn(token, b.eval("document.cookie"))
            shown = b.eval("+document.getElementById('trials').dataset.total")
            with self.store(d) as s:
                in_store = s.q("SELECT count(*) AS n FROM trials")[0]["n"]
            self.assertGreater(shown, 0)
            self.assertLessEqual(shown, in_store)  # the store only grows between the two reads
            self.assertEqual(run.poll(), None, "the run ended before the pages were seen live")
            self.shot(b, "trials")
            open(gate, "w").close()
            for page, ready in (("history", "#chart svg circle"), ("curves", "#chart svg polyline"),
                                ("parallel", "#chart svg polyline"),
                                ("importance", "#chart svg rect"), ("packing", "#chart svg rect"),
                                ("nodes", "#gpus tr + tr")):
                b.goto(url + "#/e/0/" + page)
                b.wait_for("document.querySelector('%s')" % ready)
                self.shot(b, page)
            # The packing chart has a band per stand-in GPU that a trial was placed on.
            with self.store(d) as s:
                gpus = {g for r in s.q("SELECT gpus FROM placements") for g in json.loads(r["gpus"])}
            b.goto(url + "#/e/0/packing")
            b.wait_for("document.querySelector('#chart svg rect')")
            labels = b.eval("[...document.querySelectorAll('#chart svg text')].map(t => t.textContent)")
            for g in gpus:
                self.assertTrue(any(re.search(r"/gpu%d$" % g, t) for t in labels), (g, labels))

            self.assertEqual(run.wait(timeout=120), 0, run.stderr.read().decode())
            with self.store(d) as s:
                total = s.q("SELECT count(*) AS n FROM trials")[0]["n"]
                ended = s.q("SELECT count(*) AS n FROM trials WHERE state IN "
                            "('completed', 'stopped', 'failed')")[0]["n"]
                budgets = sorted({r["budget"] for r in s.q(
                    "SELECT budget FROM trials WHERE value IS NOT NULL AND state IN "
                    "('completed', 'stopped')")})
                # The best trial as `tunepack best` ranks it (the largest budget first).
                r = self.tp("best", d, "--json")
                self.assertExit(r, 0)
                ranked = json.loads(r.stdout)
                best = {"id": ranked["trial"], "value": ranked["value"]}
                curve = [(r["step"], r["value"]) for r in s.q(
                    "SELECT step, value FROM metrics WHERE trial = ?1 AND value IS NOT NULL "
                    "ORDER BY attempt, seq", best["id"])]
            # The node list the store keeps says, at the end, that nothing runs there.
            status, body = api(printed, "api/e/0/nodes")
            self.assertEqual(status, 200)
            nodes = json.loads(body)["nodes"]
            self.assertTrue(nodes, body)
            self.assertEqual([n["running"] for n in nodes], [0] * len(nodes), body)
            # Within a second of the end, the pages say what the store says.
            b.goto(url + "#/e/0/trials")
            b.wait_for("document.getElementById('summary').dataset.total == %d && "
                       "document.getElementById('summary').textContent.includes('finished')"
                       % total)
            self.assertAlmostEqual(b.eval("+document.getElementById('summary').dataset.best"),
                                   best["value"], places=9)
            # The same counts, in the same words, on every page.
            words = "%d of %d trials ended" % (ended, total)
            self.assertIn(words, b.eval("document.getElementById('summary').textContent"))
            b.wait_for("document.getElementById('pager').textContent.endsWith(' of %d')" % total)
            b.goto(url)
            b.wait_for("document.querySelector('#experiments td.best a')")
            self.assertIn(str(best["id"]), b.eval("document.querySelector('#experiments td.best').textContent"))
            self.assertEqual(b.eval("document.querySelector('#experiments td.progress')"
                                    ".textContent.trim()"), words)
            per_state = b.eval("[...document.querySelectorAll('#experiments tr[data-experiment] "
                               "td.num')].map(c => +c.textContent)")
            self.assertEqual(sum(per_state), total, per_state)  # every state has its column
            self.shot(b, "experiments")
            # History: a series per budget (rung 0's values apart from full-budget ones), and
            # the best so far among the largest budget's.
            self.assertGreater(len(budgets), 1, "ASHA stopped none early")
            b.goto(url + "#/e/0/history")
            b.wait_for("document.querySelector('#chart svg circle')")
            legend = b.eval("[...document.querySelectorAll('#chart svg text')]"
                            ".map(t => t.textContent)")
            for budget in budgets:
                self.assertIn("at budget %g" % budget, legend)
            self.assertIn("best so far at budget %g" % budgets[-1], legend)
            self.assertNotIn("trial value", legend)
            self.shot(b, "history")
            b.goto(url + "#/e/0/trial/%d" % best["id"])
            b.wait_for("document.querySelectorAll('#curve tr').length > 1 && "
                       "document.getElementById('log').textContent.includes('epoch')")
            rows = b.eval("[...document.querySelectorAll('#curve tr')].slice(1)"
                          ".map(r => [...r.cells].map(c => +c.textContent))")
            self.assertEqual(len(rows), len(curve))
            for (step, value), (s_step, s_value) in zip(rows, curve):
                self.assertEqual(step, s_step)
                self.assertAlmostEqual(value, s_value, places=6)
            self.shot(b, "trial")
            # Sorting by value puts the best first.
            b.goto(url + "#/e/0/trials")
            b.wait_for("document.querySelectorAll('#trials tr[data-trial-id]').length > 0")
            for _ in range(2):  # the objective's column, labelled with its name
                b.eval("document.querySelector('#trials th[data-key=value]').click()")
            b.wait_for("document.querySelector('#trials tr[data-trial-id]').dataset.trialId == '%d'"
                       % best["id"])
            # Promotions apart from attempts, for every trial, as `tunepack trials` counts them.
            r = self.tp("trials", d, "--json")
            self.assertExit(r, 0)
            cli = {t["id"]: t for t in json.loads(r.stdout)}
            self.assertTrue(any(t["promotions"] for t in cli.values()), "ASHA promoted none")
            shown = b.eval("[...document.querySelectorAll('#trials tbody tr')].map(r => "
                           "Object.fromEntries([...r.cells].filter(c => c.dataset.key)"
                           ".map(c => [c.dataset.key, c.textContent])))")
            self.assertEqual(len(shown), len(cli))
            for row in shown:
                t = cli[int(row["id"])]
                for key in ("attempts", "failures", "retries", "promotions"):
                    self.assertEqual(int(row[key]), t[key], (key, row, t))

    def test_trials_table_sorts_filters_and_pages_by_column_and_keeps_the_view_in_the_url(self):
        """Issue 36: a column per parameter and metric, sorted and filtered by the server, the
        view kept in the URL through a reload, paged forward; attempts apart from promotions as
        `tunepack trials` counts them."""
        d = self.path("run")
        exp = self.experiment(
            "name: table\ncommand: [%s, %s, \"{x}\", \"{opt}\", \"{dropout}\"]\n"
            "metric: {name: score, mode: max}\n"
            "space:\n  x: {uniform: [0, 1]}\n  opt: {choice: [adam, sgd]}\n"
            "  dropout: {uniform: [0, 0.5]}\n"
            "search: {algorithm: random, trials: 24, seed: 7}\nconcurrency: 4\n"
            % (yaml_str(PY), yaml_str(self.write("table.py", TABLE_TRAINER))), name="table.yaml")
        with Browser(width=1600) as b:
            self.run_exp(exp, d)
            with self.store(d) as s:
                trials = [dict(r, params=json.loads(r["params"])) for r in
                          s.q("SELECT id, state, params FROM trials ORDER BY id")]
            self.assertEqual(len(trials), 24)
            r = self.tp("trials", d, "--json")
            self.assertExit(r, 0)
            cli = {t["id"]: t for t in json.loads(r.stdout)}
            self.assertTrue(any(t["state"] == "failed" for t in trials), trials)
            _, printed = self.start_dashboard(d, "--listen", "127.0.0.1:0")
            url, _ = split_url(printed)
            b.goto(printed + "#/e/0/trials?limit=4")
            rows = ("[...document.querySelectorAll('#trials tbody tr')].map(r => +r.dataset.trialId)")
            b.wait_for("document.querySelectorAll('#trials tbody tr').length == 4")
            keys = b.eval("[...document.querySelectorAll('#trials th[data-key]')].map(t => t.dataset.key)")
            for k in ("value", "m:loss", "p:x", "p:opt", "p:dropout", "attempts", "failures",
                      "retries", "promotions"):
                self.assertIn(k, keys)
            self.assertEqual(b.eval("document.querySelector('#trials th[data-key=value]')"
                                    ".textContent"), "score")

            def cells(key):
                return b.eval("[...document.querySelectorAll('#trials tbody td[data-key=\"%s\"]')]"
                              ".map(c => c.textContent)" % key)

            # A choice is shown as it is, not quoted, each parameter in its own cell.
            self.assertEqual(cells("p:opt"), [t["params"]["opt"] for t in trials[:4]])
            # Sort by a parameter: the smallest x first.
            by_x = sorted(trials, key=lambda t: t["params"]["x"])
            b.eval("document.querySelector('#trials th[data-key=\"p:x\"]').click()")
            b.wait_for("JSON.stringify(%s) == '%s'" % (rows, json.dumps([t["id"] for t in by_x[:4]]).replace(" ", "")))
            self.assertIn("sort=p%3Ax", b.eval("location.hash"))
            # Filter by state and by a range of x: what the store holds, in x's order.
            lo, hi = 0.1, 0.9
            want = [t["id"] for t in by_x if t["state"] == "completed" and lo <= t["params"]["x"] <= hi]
            self.assertGreater(len(want), 4, "too few trials to page through")
            b.eval("(() => { const s = document.getElementById('state-filter'); s.value = 'completed';"
                   " s.dispatchEvent(new Event('change')); })()")
            for side, v in (("min", lo), ("max", hi)):
                b.eval("(() => { const i = document.querySelector('input[data-range=\"%s.p:x\"]');"
                       " i.value = '%s'; i.dispatchEvent(new Event('change')); })()" % (side, v))
            page1 = json.dumps(want[:4]).replace(" ", "")
            b.wait_for("JSON.stringify(%s) == '%s' && document.getElementById('pager').textContent"
                       ".startsWith('1–4 of %d matching')" % (rows, page1, len(want)))
            for x in cells("p:x"):
                self.assertTrue(lo <= float(x) <= hi, x)
            self.assertEqual(set(b.eval("[...document.querySelectorAll('#trials tbody td[data-key=state]')]"
                                        ".map(c => c.textContent)")), {"completed"})
            # Attempts apart from promotions, as `tunepack trials` counts them.
            for key in ("failures", "retries", "promotions", "attempts"):
                self.assertEqual([int(c) for c in cells(key)], [cli[i][key] for i in want[:4]], key)
            # A link per page: the last one's click shows its rows and puts it in the URL.
            npages = (len(want) + 3) // 4
            links = b.eval("[...document.querySelectorAll('#pages a, #pages b')].map(a => +a.dataset.page)")
            self.assertEqual(links[0], 1)
            self.assertEqual(links[-1], npages)
            self.assertEqual(b.eval("document.querySelector('#pages b').textContent"), "1")
            last = json.dumps(want[4 * (npages - 1):]).replace(" ", "")
            b.eval("document.querySelector('#pages a[data-page=\"%d\"]').click()" % npages)
            b.wait_for("JSON.stringify(%s) == '%s'" % (rows, last))
            self.assertIn("offset=%d" % (4 * (npages - 1)), b.eval("location.hash"))
            self.assertEqual(b.eval("document.querySelector('#pages b').textContent"), str(npages))
            b.eval("document.querySelector('#pages a[data-page=\"1\"]').click()")
            b.wait_for("JSON.stringify(%s) == '%s'" % (rows, page1))
            self.assertNotIn("offset=", b.eval("location.hash"))
            # Page forward.
            page2 = json.dumps(want[4:8]).replace(" ", "")
            b.eval("document.getElementById('next-page').click()")
            b.wait_for("JSON.stringify(%s) == '%s'" % (rows, page2))
            self.assertIn("offset=4", b.eval("location.hash"))
            # A reload (or the link shared) shows the same view, its filters filled in.
            shared = b.eval("location.href")
            self.assertTrue(shared.startswith(url), shared)
            b.eval("window.before_reload = 1; location.reload()")
            b.wait_for("!window.before_reload && JSON.stringify(%s) == '%s'" % (rows, page2))
            self.assertEqual(b.eval("location.href"), shared)
            self.assertEqual(b.eval("document.getElementById('state-filter').value"), "completed")
            self.assertEqual(b.eval("document.querySelector('input[data-range=\"min.p:x\"]').value"), str(lo))
            self.assertIn("▴", b.eval("document.querySelector('#trials th[data-key=\"p:x\"]').textContent"))
            # A column's label is a link to the view sorted by it: opened on its own (a new tab,
            # a bookmark), it shows the same filtered rows by dropout, from the first page.
            href = b.eval("document.querySelector('#trials th[data-key=\"p:dropout\"] a')"
                          ".getAttribute('href')")
            self.assertIn("sort=p%3Adropout", href)
            self.assertNotIn("offset=", href)
            dropout = {t["id"]: t["params"]["dropout"] for t in trials}
            by_dropout = sorted(want, key=lambda i: dropout[i])
            b.goto("about:blank")
            b.goto(url + href)
            b.wait_for("JSON.stringify(%s) == '%s'" % (rows, json.dumps(by_dropout[:4]).replace(" ", "")))
            # Sorting by a metric, descending; and a text match on a choice.
            # The screenshot: sorted by x, filtered by state and a range, three pages of rows.
            b.goto("about:blank")
            b.goto(url + "#/e/0/trials?limit=%d&sort=p%%3Ax&state=completed&min.p%%3Ax=%s"
                   "&max.p%%3Ax=%s" % ((len(want) + 2) // 3, lo, hi))
            b.wait_for("document.querySelectorAll('#pages a').length == 2")
            self.shot(b, "trials-table")
            b.goto(url + "#/e/0/trials?limit=50")
            b.wait_for("document.querySelectorAll('#trials tbody tr').length == 24")
            for _ in range(2):
                b.eval("document.querySelector('#trials th[data-key=\"m:loss\"]').click()")
            b.wait_for("location.hash.includes('desc=1') && document.querySelector("
                       "'#trials th[data-key=\"m:loss\"]').textContent.endsWith('▾')")
            losses = [float(c) for c in cells("m:loss") if c]
            self.assertEqual(losses, sorted(losses, reverse=True))
            self.assertEqual(len(losses), sum(t["state"] == "completed" for t in trials))
            b.eval("(() => { const i = document.getElementById('text-filter'); i.value = 'sgd';"
                   " i.dispatchEvent(new Event('input')); })()")
            sgd = sum(t["params"]["opt"] == "sgd" for t in trials)
            b.wait_for("document.getElementById('trials').dataset.matched == %d" % sgd)
            self.assertEqual(set(cells("p:opt")), {"sgd"})
            # A bound that is not a number is refused with a reason, not ignored.
            status, body = api(printed, "api/e/0/trials?min.p%3Ax=abc")
            self.assertEqual(status, 400)
            self.assertIn("must be a number", body)
            status, body = api(printed, "api/e/0/trials?sort=p%3Ax%22")
            self.assertEqual(status, 400)
            self.assertIn("no column", body)
            # Only the experiment's own parameters and metrics are columns; the error names them.
            for bad in ("sort=p%3Amomentum", "min.m%3Aaccuracy=0"):
                status, body = api(printed, "api/e/0/trials?" + bad)
                self.assertEqual(status, 400, bad)
                self.assertIn("no column", body)
                for name in ("x", "opt", "dropout", "score", "loss"):
                    self.assertIn(name, json.loads(body)["error"])

    def test_plots_importance_sorted_slice_and_contour_of_a_chosen_pair(self):
        """Issue 36: the importance page lists the parameters by a random forest's importance,
        the most important first, beside the one-way share; the chart's bars in that order.
        The slice and contour page draws the pair the user picks, kept in the URL."""
        d = self.path("run")
        exp = self.experiment(
            "name: plots\ncommand: [%s, %s, \"{x}\", \"{y}\", \"{z}\"]\n"
            "metric: {name: score, mode: max}\n"
            "space:\n  z: {uniform: [0, 1]}\n  y: {uniform: [0, 1]}\n  x: {uniform: [0, 1]}\n"
            "search: {algorithm: random, trials: 40, seed: 5}\nconcurrency: 8\n"
            % (yaml_str(PY), yaml_str(self.write("plots.py", PLOTS_TRAINER))), name="plots.yaml")
        self.assertExit(self.run_exp(exp, d), 0)
        _, printed = self.start_dashboard(d, "--listen", "127.0.0.1:0")
        url, _ = split_url(printed)
        with Browser(width=1400) as b:
            b.goto(printed + "#/e/0/trials")
            b.wait_for("document.querySelectorAll('#trials tbody tr').length > 0")
            b.eval("[...document.querySelectorAll('#tabs a')].find(a => a.textContent == "
                   "'Importance').click()")
            b.wait_for("document.querySelectorAll('#importance tr[data-param]').length == 3")
            names = b.eval("[...document.querySelectorAll('#importance tr[data-param]')]"
                           ".map(r => r.dataset.param)")
            values = b.eval("[...document.querySelectorAll('#importance tr[data-param]')]"
                            ".map(r => +r.children[1].textContent)")
            self.assertEqual(names[:2], ["x", "y"], values)
            self.assertEqual(values, sorted(values, reverse=True))
            b.wait_for("document.querySelector('#chart svg rect')")
            labels = b.eval("[...document.querySelectorAll('#chart svg text')].map(t => "
                            "t.textContent).filter(t => ['x', 'y', 'z'].includes(t))")
            self.assertEqual(labels, names)
            self.shot(b, "importance-forest")
            # Slice and contour: pick a parameter and a pair; the server draws them.
            b.eval("[...document.querySelectorAll('#tabs a')].find(a => a.textContent == "
                   "'Slice and contour').click()")
            b.wait_for("document.querySelector('#slice svg circle') && "
                       "document.querySelector('#contour svg rect.cell')")
            pick = ("(() => { const s = document.getElementById('%s'); s.value = '%s'; "
                    "s.dispatchEvent(new Event('change')); })()")
            b.eval(pick % ("contour-x", "z"))
            b.wait_for("location.hash.includes('x=z') && document.querySelector('#contour svg') "
                       "&& document.querySelector('#contour svg').textContent.includes('over z and')")
            b.eval(pick % ("contour-y", "x"))
            b.wait_for("location.hash.includes('y=x') && document.querySelector('#contour svg') "
                       "&& document.querySelector('#contour svg').textContent.includes('over z and x')")
            cells = b.eval("document.querySelectorAll('#contour svg rect.cell').length")
            self.assertGreater(cells, 10)  # 40 trials over a 12 x 12 grid
            tips = b.eval("[...document.querySelectorAll('#contour svg rect.cell title')]"
                          ".map(t => t.textContent)")
            self.assertEqual(sum(int(re.search(r"over (\d+) trial", t).group(1)) for t in tips), 40)
            b.wait_for("document.getElementById('slice-param').options.length == 3")
            b.eval(pick % ("slice-param", "y"))
            b.wait_for("document.querySelector('#slice svg') && document.querySelector("
                       "'#slice svg').textContent.includes('against y')")
            self.assertEqual(b.eval("document.querySelectorAll('#slice svg circle').length"), 40)
            # Reloaded, the page shows the same choice (the page before the reload shows it too:
            # wait for the new one).
            b.eval("window.before_reload = 1; location.reload()")
            b.wait_for("!window.before_reload && document.getElementById('contour-x') && "
                       "document.getElementById('contour-x').value == 'z' && "
                       "document.getElementById('slice-param').value == 'y'")
            b.wait_for("document.querySelector('#contour svg rect.cell')")
            self.shot(b, "slice-contour")
            # A parameter the experiment lacks: refused, naming those it has.
            # Compare: tick two trials in the table; the selection is in the URL; the link
            # shows their parameters, curves overlaid and the scheduler's decisions.
            b.goto(url + "#/e/0/trials")
            b.wait_for("document.querySelectorAll('#trials tbody input.pick').length > 3")
            b.eval("document.querySelector('#trials tbody tr:nth-child(2) input.pick').click()")
            b.eval("document.querySelector('#trials tbody tr:nth-child(4) input.pick').click()")
            b.wait_for("document.getElementById('compare-link').hasAttribute('href')")
            picked = b.eval("[...document.querySelectorAll('#trials tbody input.pick:checked')]"
                            ".map(c => +c.dataset.trial)")
            self.assertEqual(len(picked), 2)
            self.assertIn("pick=" + "%2C".join(map(str, picked)), b.eval("location.hash"))
            b.eval("document.getElementById('compare-link').click()")
            b.wait_for("document.querySelectorAll('#compare-params tr[data-param]').length == 3 && "
                       "document.querySelectorAll('#chart svg polyline').length >= 2 && "
                       "document.querySelectorAll('#compare-decisions [data-trial]').length == 2")
            heads = b.eval("[...document.querySelectorAll('#compare-params tr:first-child a')]"
                           ".map(a => +a.textContent)")
            self.assertEqual(heads, picked)
            with self.store(d) as s:
                for t in picked:
                    n = s.q("SELECT count(*) AS n FROM decisions WHERE trial = ?", t)[0]["n"]
                    self.assertGreater(n, 0)
                    self.assertEqual(b.eval("document.querySelectorAll('#compare-decisions "
                                            "[data-trial=\"%d\"] tr.decision').length" % t), n)
            # Every parameter differs between two random trials: each row is marked.
            self.assertEqual(b.eval("document.querySelectorAll('#compare-params tr.differs')"
                                    ".length"), 3)
            self.shot(b, "compare")
            # Parallel coordinates: brush the x axis (drag along it); the lines outside dim,
            # the brush goes into the URL, and the table it links to has only those trials.
            b.goto(url + "#/e/0/parallel")
            b.wait_for("document.querySelector('#chart rect.brush-axis[data-key=\"p:x\"]')")
            b.eval("""(() => {
                const r = document.querySelector('#chart rect.brush-axis[data-key="p:x"]');
                const box = r.getBoundingClientRect(), x = box.left + 4;
                const at = f => ({bubbles: true, button: 0, clientX: x, clientY: box.top + f * box.height});
                r.dispatchEvent(new MouseEvent('mousedown', at(0.2)));
                document.dispatchEvent(new MouseEvent('mousemove', at(0.5)));
                document.dispatchEvent(new MouseEvent('mouseup', at(0.6)));
            })()""")
            b.wait_for("document.getElementById('brushed-trials')")
            self.assertIn("min.p%3Ax=", b.eval("location.hash"))
            kept = b.eval("document.querySelectorAll('#chart polyline[data-v]:not(.out)').length")
            self.assertGreater(kept, 0)
            self.assertLess(kept, 40)
            self.assertTrue(b.eval("!!document.querySelector('#chart svg rect.brush')"))
            self.shot(b, "parallel-brushed")
            # The brushed set filters the slice plot too: a dot per trial kept.
            b.eval("document.getElementById('brushed-plots').click()")
            b.wait_for("location.hash.includes('/plots') && document.querySelector('#slice svg') "
                       "&& document.querySelector('#slice svg').textContent.includes('brushed')")
            self.assertEqual(b.eval("document.querySelectorAll('#slice svg circle').length"), kept)
            b.eval("history.back()")
            b.wait_for("document.getElementById('brushed-trials')")
            b.eval("document.getElementById('brushed-trials').click()")
            b.wait_for("document.getElementById('trials') && "
                       "document.getElementById('trials').dataset.matched !== undefined && "
                       "location.hash.includes('/trials')")
            b.wait_for("+document.getElementById('trials').dataset.matched == %d" % kept)
            self.assertEqual(b.eval("document.querySelectorAll('#trials tbody tr').length"), kept)
            code, body = get(printed.replace("/?", "/api/e/0/contour.svg?x=x&y=momentum&"))
            self.assertEqual(code, 400)
            self.assertIn("momentum", body)
            self.assertIn("x, y, z", body.replace("z, y, x", "x, y, z"))

    def test_brushing_a_choice_moving_and_clearing_filter_the_table_and_every_plot(self):
        """Issue 36: the parallel coordinates are brushed with the mouse as a user does: a
        drag along a choice's axis keeps the values it covers, a drag on a brush moves it, a
        click on an axis clears its brush and a button clears them all. The brush is in the
        URL, every page that draws trials carries it from tab to tab, and the server filters
        by it: the table's rows, the importance grown on the brushed set alone (with too few
        trials, none, and the page says why), the history's dots, the curves' trials."""
        d = self.path("run")
        exp = self.experiment(
            "name: brush\ncommand: [%s, %s, \"{x}\", \"{opt}\", \"{y}\"]\n"
            "metric: {name: score, mode: max}\n"
            "space:\n  x: {uniform: [0, 1]}\n  opt: {choice: [adam, rmsprop, sgd]}\n"
            "  y: {uniform: [0, 1]}\n"
            "search: {algorithm: random, trials: 45, seed: 7}\nconcurrency: 8\n"
            % (yaml_str(PY), yaml_str(self.write("brush.py", BRUSH_TRAINER))), name="brush.yaml")
        self.assertExit(self.run_exp(exp, d), 0)
        with self.store(d) as s:
            rows = s.q("SELECT id, json_extract(params, '$.opt') AS opt, "
                       "json_extract(params, '$.x') AS x FROM trials WHERE value IS NOT NULL "
                       "AND state IN ('completed', 'stopped')")
        self.assertEqual(len(rows), 45)
        by_opt = {o: {r["id"] for r in rows if r["opt"] == o} for o in ("adam", "rmsprop", "sgd")}
        _, printed = self.start_dashboard(d, "--listen", "127.0.0.1:0")
        url, _ = split_url(printed)
        kept = "document.querySelectorAll('#chart polyline[data-v]:not(.out)').length"
        hash_args = lambda: dict(re.findall(r"([^?&=]+)=([^&]*)", b.eval(
            "decodeURIComponent(location.hash)").split("?", 1)[-1]))
        with Browser(width=1400) as b:
            b.goto(printed + "#/e/0/parallel")
            b.wait_for("document.querySelector('#chart rect.brush-axis[data-key=\"p:opt\"]')")
            axis = lambda key: b.eval(
                "(() => { const a = document.querySelector('#chart rect.brush-axis[data-key=\"%s\"]'); "
                "return {cats: a.dataset.cats ? JSON.parse(a.dataset.cats) : null, lo: +a.dataset.lo, "
                "hi: +a.dataset.hi, log: a.dataset.log === '1'}; })()" % key)
            opt = axis("p:opt")
            self.assertEqual(sorted(opt["cats"]), ["adam", "rmsprop", "sgd"])
            n = len(opt["cats"])
            # A screen point on an axis at u (0 bottom, 1 top).
            def at(key, u):
                left, top, width, height = b.box('#chart rect.brush-axis[data-key="%s"]' % key)
                return left + width / 2, top + height * (1 - u)
            # Brush the choice most trials took: a drag over its label alone.
            chosen = max(by_opt, key=lambda o: len(by_opt[o]))
            k = opt["cats"].index(chosen)
            step = 1 / (n - 1)
            # (pressed inside the axis, dragged toward its end: past it when the label is there)
            toward = -1 if k < n - 1 else 1
            b.drag(*at("p:opt", k * step - toward * 0.2 * step), *at("p:opt", k * step + toward * 0.2 * step))
            b.wait_for("document.getElementById('brushed-trials')")
            self.assertEqual(b.eval("decodeURIComponent(location.hash)").count("in.p:opt="), 1)
            self.assertEqual(hash_args().get("in.p:opt"), chosen)
            b.wait_for("%s == %d" % (kept, len(by_opt[chosen])))
            self.assertTrue(b.eval("!!document.querySelector('#chart rect.brush[data-key=\"p:opt\"]')"))
            b.wait_for("document.getElementById('brushed').textContent.includes('%d trials in the table')"
                       % len(by_opt[chosen]))
            # The table it links to: those trials, each of that choice, the brush said above it.
            b.click("#brushed-trials")
            b.wait_for("location.hash.includes('/trials') && document.getElementById('trials') && "
                       "+document.getElementById('trials').dataset.matched == %d" % len(by_opt[chosen]))
            shown = b.eval("[...document.querySelectorAll('#trials tbody tr')].map(r => "
                           "[+r.dataset.trialId, r.querySelector('td[data-key=\"p:opt\"]').textContent])")
            self.assertEqual({t for t, _ in shown}, by_opt[chosen])
            self.assertEqual({o for _, o in shown}, {chosen})
            self.assertIn("opt is " + chosen, b.eval("document.getElementById('brush-note').textContent"))
            # The importance tab carries the brush: the forest is grown on those trials alone
            # (the choice is the same in all of them, so it explains nothing there).
            b.click('#tabs a[data-page="importance"]')
            b.wait_for("location.hash.includes('/importance?') && document.getElementById('importance') "
                       "&& document.getElementById('importance').dataset.trials == '%d'" % len(by_opt[chosen]))
            b.wait_for("document.querySelectorAll('#importance tr[data-param]').length == 3")
            names = b.eval("[...document.querySelectorAll('#importance tr[data-param]')]"
                           ".map(r => r.dataset.param)")
            self.assertEqual(names[0], "x")
            self.assertEqual(b.eval("+document.querySelector('#importance tr[data-param=opt]')"
                                    ".children[1].textContent"), 0)
            self.assertIn("in the brushed set", b.eval("document.querySelector('#chart svg').textContent"))
            self.assertIn("opt is " + chosen, b.eval("document.getElementById('brush-note').textContent"))
            self.shot(b, "importance-brushed")
            status, body = api(printed, "api/e/0/importance")
            self.assertEqual(json.loads(body)["trials"], 45)
            status, body = api(printed, "api/e/0/importance?in.p%3Aopt=" + chosen)
            self.assertEqual((status, json.loads(body)["trials"]), (200, len(by_opt[chosen])))
            status, body = api(printed, "api/e/0/history.svg?in.state=completed")
            self.assertEqual(status, 400)
            self.assertIn("in.p:NAME", body)
            # History: a dot per brushed trial. Curves: the best of the brushed set only.
            b.click('#tabs a[data-page="history"]')
            # (the importance chart, still shown until the history arrives, says "in the brushed set"
            # too: wait for the history's own words)
            b.wait_for("location.hash.includes('/history?') && document.querySelector('#chart svg') && "
                       "document.querySelector('#chart svg').textContent.includes('in the brushed set') && "
                       "document.querySelector('#chart svg').textContent.includes('the line is the best so far')")
            self.assertEqual(b.eval("document.querySelectorAll('#chart svg circle').length"),
                             len(by_opt[chosen]))
            b.click('#tabs a[data-page="curves"]')
            b.wait_for("location.hash.includes('/curves?') && document.querySelector('#chart svg') && "
                       "document.querySelector('#chart svg').textContent.includes('Learning curves') && "
                       "document.querySelector('#chart svg').textContent.includes('in the brushed set')")
            drawn = {int(t) for t in re.findall(r"trial (\d+)", " ".join(b.eval(
                "[...document.querySelectorAll('#chart svg title')].map(t => t.textContent)")))}
            self.assertEqual(len(drawn), min(10, len(by_opt[chosen])))
            self.assertLessEqual(drawn, by_opt[chosen])
            # Back to the parallel coordinates: the brush is still there, from the URL.
            b.click('#tabs a[data-page="parallel"]')
            b.wait_for("location.hash.includes('/parallel?') && "
                       "document.querySelector('#chart rect.brush[data-key=\"p:opt\"]')")
            b.wait_for("%s == %d" % (kept, len(by_opt[chosen])))
            # Move the choice's brush to the next value: press on it, drag one step along.
            k2 = k + 1 if k + 1 < n else k - 1
            press = min(0.98, max(0.02, k * step))
            b.drag(*at("p:opt", press), *at("p:opt", press + (k2 - k) * step))
            other = opt["cats"][k2]
            b.wait_for("decodeURIComponent(location.hash).includes('in.p:opt=%s')" % other)
            self.assertEqual(hash_args().get("in.p:opt"), other)
            self.assertNotIn("in.p:opt=" + chosen, b.eval("decodeURIComponent(location.hash)"))
            b.wait_for("%s == %d" % (kept, len(by_opt[other])))
            # A number's brush: drawn on x, then moved up by dragging it.
            x_axis = axis("p:x")
            b.drag(*at("p:x", 0.3), *at("p:x", 0.45))
            b.wait_for("decodeURIComponent(location.hash).includes('min.p:x=')")
            before = hash_args()
            lo0, hi0 = float(before["min.p:x"]), float(before["max.p:x"])
            b.drag(*at("p:x", 0.375), *at("p:x", 0.525))
            b.wait_for("decodeURIComponent(location.hash).includes('min.p:x=') && "
                       "!decodeURIComponent(location.hash).includes('min.p:x=%s&')" % before["min.p:x"])
            after = hash_args()
            lo1, hi1 = float(after["min.p:x"]), float(after["max.p:x"])
            self.assertGreater(lo1, lo0)
            self.assertGreater(hi1, hi0)
            width0 = axis_u(x_axis, hi0) - axis_u(x_axis, lo0)
            width1 = axis_u(x_axis, hi1) - axis_u(x_axis, lo1)
            self.assertAlmostEqual(width0, width1, delta=0.01)  # moved, not resized
            self.assertAlmostEqual(axis_u(x_axis, lo1) - axis_u(x_axis, lo0), 0.15, delta=0.03)
            both = {r["id"] for r in rows if r["opt"] == other and lo1 <= r["x"] <= hi1}
            b.wait_for("document.getElementById('brushed').textContent.includes('%s in the table')"
                       % ("%d trial%s" % (len(both), "" if len(both) == 1 else "s")))
            self.assertEqual(b.eval(kept), len(both))
            self.shot(b, "parallel-brushed-choice")
            # Reloaded, the page shows the same brushes (the page before the reload shows them
            # too: wait for the new one).
            b.eval("window.before_reload = 1; location.reload()")
            b.wait_for("!window.before_reload && "
                       "document.querySelector('#chart rect.brush[data-key=\"p:x\"]') && "
                       "document.querySelector('#chart rect.brush[data-key=\"p:opt\"]')")
            b.wait_for("%s == %d" % (kept, len(both)))
            # So few trials left that no importance is given: the page says why.
            self.assertLess(len(both), 10)
            b.click('#tabs a[data-page="importance"]')
            b.wait_for("document.getElementById('importance-note') && "
                       "!document.getElementById('importance-note').hidden")
            self.assertIn("only %d trial" % len(both),
                          b.eval("document.getElementById('importance-note').textContent").lower())
            self.assertIn("importance needs at least 10",
                          b.eval("document.getElementById('importance-note').textContent"))
            self.assertEqual(b.eval("document.querySelectorAll('#importance tr[data-param]').length"), 0)
            self.shot(b, "importance-too-few")
            # Clear: a click on x's axis clears its brush; the button clears every brush.
            b.click('#tabs a[data-page="parallel"]')
            b.wait_for("document.querySelector('#chart rect.brush[data-key=\"p:x\"]')")
            b.click_at(*at("p:x", 0.05))
            b.wait_for("!decodeURIComponent(location.hash).includes('.p:x=') && "
                       "!document.querySelector('#chart rect.brush[data-key=\"p:x\"]')")
            self.assertIn("in.p:opt=" + other, b.eval("decodeURIComponent(location.hash)"))
            b.wait_for("%s == %d" % (kept, len(by_opt[other])))
            b.click("#clear-brushes")
            b.wait_for("!location.hash.includes('in.') && !document.querySelector('#chart rect.brush')")
            self.assertEqual(b.eval(kept), 45)
            b.click('#tabs a[data-page="trials"]')
            b.wait_for("location.hash.endsWith('/trials') && document.getElementById('trials') && "
                       "+document.getElementById('trials').dataset.matched == 45")
            self.assertTrue(b.eval("document.getElementById('brush-note').hidden"))

    def test_a_killed_run_shows_its_running_trials_as_interrupted(self):
        d, gate = self.path("run"), self.path("gate")
        exp = self.experiment(
            "name: killed\ncommand: [%s, %s, \"{x}\", %s]\nmetric: {name: score, mode: max}\n"
            "space:\n  x: {uniform: [0, 1]}\nsearch: {algorithm: random, trials: 4, seed: 1}\n"
            "concurrency: 2\n"
            % (yaml_str(PY), yaml_str(self.write("held.py", HELD)), yaml_str(gate)),
            name="killed.yaml")
        run = self.start_run(exp, d)
        wait_for(lambda: run.poll() is not None or (self.poll_query(
            d, "SELECT count(*) AS n FROM metrics") or [{"n": 0}])[0]["n"] >= 2, 60)
        self.assertIsNone(run.poll(), "the run ended before both trials reported")
        run.kill()
        run.wait(timeout=30)
        with self.store(d) as s:  # what the store says: the run and two trials running
            self.assertEqual(s.meta()["state"], "running")
            self.assertEqual(s.q("SELECT count(*) AS n FROM trials WHERE state = 'running'")[0]["n"],
                             2)
        _, url = self.start_dashboard(d, "--listen", "127.0.0.1:0")
        listed = json.loads(api(url, "api/experiments")[1])["experiments"][0]
        summary = json.loads(api(url, "api/e/0/summary")[1])
        for v in (listed, summary):
            self.assertEqual(v["state"], "interrupted", v)
            self.assertEqual(v["counts"].get("interrupted"), 2, v)
            self.assertNotIn("running", v["counts"], v)
        rows = json.loads(api(url, "api/e/0/trials")[1])["rows"]
        self.assertEqual(sorted(r["state"] for r in rows), ["interrupted", "interrupted"])
        picked = json.loads(api(url, "api/e/0/trials?state=interrupted")[1])["rows"]
        self.assertEqual(len(picked), 2)
        self.assertEqual(json.loads(api(url, "api/e/0/trial/0")[1])["state"], "interrupted")

    def test_a_planned_run_shows_its_planned_end_beside_the_end_its_pace_points_to(self):
        d = self.path("run")
        first, release = self.path("first"), self.path("release")
        exp = self.experiment(
            "name: planned\ncommand: [%s, %s, %s, %s, \"{x}\"]\n"
            "metric: {name: score, mode: max}\nspace:\n  x: {uniform: [0, 1]}\n"
            "search: {algorithm: random, trials: 3, seed: 1}\nconcurrency: 1\n"
            % (yaml_str(PY), yaml_str(self.write("gated.py", GATED)), yaml_str(first),
               yaml_str(release)), name="planned.yaml")
        with Browser() as b:
            run = self.start_run(exp, d)
            wait_for(lambda: (self.poll_query(d, "SELECT count(*) AS n FROM trials WHERE state "
                                                 "= 'completed'") or [{"n": 0}])[0]["n"] == 1, 60)
            # Planned while it runs, from its one trial ended: the run keeps the plan.
            p = self.tp("plan", exp, "--deadline", "1h", "--dir", d, "--seeds", "2", "--json")
            self.assertExit(p, 0)
            planned = json.loads(p.stdout)
            self.assertIn("(it runs)", planned["kept"])
            with self.store(d) as s:
                created = float(s.q("SELECT value FROM meta WHERE key = 'created_at'")[0]["value"])
                self.assertEqual(s.q("SELECT count(*) AS n FROM plans")[0]["n"], 1)
            _, url = self.start_dashboard(d, "--listen", "127.0.0.1:0")
            b.goto(url)
            b.wait_for("document.querySelector('#experiments td.plan[data-estimate]')")
            self.assertIsNone(run.poll(), "the run ended before the page was seen")
            cell = "document.querySelector('#experiments td.plan')"
            self.assertAlmostEqual(b.eval("+%s.dataset.planned" % cell),
                                   created + planned["makespan_s"]["median"], places=1)
            text = b.eval("%s.textContent" % cell)
            self.assertIn("planned ", text)
            self.assertIn("now expected ", text)
            self.assertIn("1 of 3 trials ended", text)
            # by its pace: three trials take three times what one took so far
            self.assertGreater(b.eval("+%s.dataset.estimate" % cell), created)
            self.assertIn("trials ended so far", b.eval("document.getElementById('plan-note')"
                                                        ".textContent"))
            self.shot(b, "experiments-planned")
            with open(release, "w"):
                pass
            self.assertEqual(run.wait(timeout=120), 0, run.stderr.read().decode())
            with self.store(d) as s:
                end = float(s.q("SELECT value FROM meta WHERE key = 'ended_at'")[0]["value"])
            b.goto(url)
            # (the estimate by the pace says "1 of 3 trials ended in" too: wait for the end's own)
            b.wait_for("%s && %s.querySelector('.estimate').textContent.startsWith('ended ')"
                       % (cell, cell))
            self.assertAlmostEqual(b.eval("+%s.dataset.estimate" % cell), end, places=1)

    def test_a_failed_trial_shows_its_traceback_line_by_line_and_no_empty_chart(self):
        d = self.path("run")
        exp = self.experiment(
            "name: failing\ncommand: [%s, %s, \"{lr}\"]\nmetric: {name: loss, mode: min}\n"
            "space:\n  lr: {choice: [0.1]}\nsearch: {algorithm: random, trials: 1}\n"
            % (yaml_str(PY), yaml_str(self.write("fail.py", FAILING))), name="failing.yaml")
        with Browser() as b:
            r = self.run_exp(exp, d)
            self.assertNotEqual(r.returncode, 0, r.stderr)
            with self.store(d) as s:
                self.assertEqual(s.q("SELECT state FROM trials")[0]["state"], "failed")
                self.assertEqual(s.q("SELECT count(*) AS n FROM metrics")[0]["n"], 0)
            with open(os.path.join(d, "trials", "000000", "stdout.log")) as f:
                self.assertEqual(f.read(), "")
            _, url = self.start_dashboard(d, "--listen", "127.0.0.1:0")
            b.goto(url + "#/e/0/trial/0")
            b.wait_for("document.getElementById('stderr-tail').textContent.includes('Error') && "
                       "document.getElementById('log').textContent.includes('Traceback')")
            # No constraints: no word on feasibility.
            self.assertTrue(b.eval("document.getElementById('feasibility').hidden"))
            # Its lines as the browser lays them out: one per line, indentation kept. The log
            # holds the whole traceback; the trial's summary its last lines.
            with open(os.path.join(d, "trials", "000000", "stderr.log")) as f:
                written = f.read().rstrip("\n").split("\n")
            lines = b.eval("document.getElementById('log').innerText.split('\\n')")
            self.assertEqual([l for l in lines if l], written)
            self.assertIn("Traceback (most recent call last):", lines)
            self.assertTrue(any(re.match(r'  File ".*fail\.py", line \d+, in train$', l)
                                for l in lines), lines)
            self.assertIn('    return load("/nonexistent/data-%s.csv" % lr)', lines)
            tail = b.eval("document.getElementById('stderr-tail').innerText.split('\\n')")
            self.assertGreaterEqual(len(tail), 3, tail)
            self.assertEqual(tail, written[-len(tail):])
            self.assertTrue(tail[-1].startswith("FileNotFoundError: "), tail)
            self.assertTrue(any(l.startswith("    ") for l in tail), tail)
            # stdout is empty, so the log opens on stderr.
            self.assertEqual(b.eval("document.getElementById('stream').value"), "stderr")
            # No value, so a sentence and no chart or empty table.
            self.assertIn("no curve", b.eval("document.getElementById('no-curve').innerText"))
            self.assertEqual(b.eval("document.querySelectorAll('#chart svg').length"), 0)
            for hidden in ("chart", "curve"):
                self.assertIsNone(b.eval("document.getElementById('%s').offsetParent" % hidden))
            self.shot(b, "failed-trial")
            # The reader may still pick stdout, and sees it is empty.
            b.eval("const s = document.getElementById('stream'); s.value = 'stdout'; "
                   "s.dispatchEvent(new Event('change'))")
            b.wait_for("document.getElementById('log-path').textContent.endsWith('(empty)')")
            self.assertEqual(b.eval("document.getElementById('log').textContent"), "")

    def test_an_infeasible_trial_is_marked_with_the_constraint_it_broke_and_by_how_much(self):
        """Issue 32: under `constraints:` the trials table marks each infeasible trial, its
        tooltip naming the constraint broken and by how much (or that it was never reported),
        and the API's rows carry what `trials --json` says; the table sorts by feasibility and
        keeps one kind only, the view in the URL; a trial's page states its standing with
        each constraint's value, bound and margin."""
        d = self.path("run")
        exp = self.experiment(
            "name: cons\ncommand: [%s, %s, \"{x}\"]\nmetric: {name: loss, mode: min}\n"
            "space:\n  x: {choice: [0.2, 0.4, 0.7, 0.9]}\nsearch: {algorithm: grid}\n"
            "constraints: [{metric: mem_gb, max: 5}]\n"
            % (yaml_str(PY), yaml_str(self.write("cons.py", CONSTRAINED))), name="cons.yaml")
        with Browser() as b:
            self.assertExit(self.run_exp(exp, d), 0)
            r = self.tp("trials", d, "--json")
            self.assertExit(r, 0)
            cli = {t["id"]: t for t in json.loads(r.stdout)}
            x = {i: t["params"]["x"] for i, t in cli.items()}
            self.assertEqual(sorted(x.values()), [0.2, 0.4, 0.7, 0.9])
            self.assertEqual({i: t["feasible"] for i, t in cli.items()},
                             {i: v < 0.5 for i, v in x.items()})
            _, printed = self.start_dashboard(d, "--listen", "127.0.0.1:0")
            status, body = api(printed, "api/e/0/trials")
            self.assertEqual(status, 200, body)
            rows = {r["id"]: r for r in json.loads(body)["rows"]}
            for i, t in cli.items():
                self.assertEqual((rows[i]["feasible"], rows[i]["constraints"]),
                                 (t["feasible"], t["constraints"]), i)
            b.goto(printed + "#/e/0/trials")
            b.wait_for("document.querySelectorAll('#trials tbody tr').length == 4")
            self.assertIn("feasible", b.eval("[...document.querySelectorAll('#trials thead th')]"
                                             ".map(t => t.textContent)"))
            marks = b.eval("Object.fromEntries([...document.querySelectorAll('#trials tbody tr')]"
                           ".map(r => { const m = r.querySelector('.infeasible-mark');"
                           " return [r.dataset.trialId, m ? m.title : null]; }))")
            by_x = {x[int(i)]: tip for i, tip in marks.items()}
            self.assertIsNone(by_x[0.2])
            self.assertIsNone(by_x[0.4])
            self.assertEqual(by_x[0.7], "infeasible: mem_gb = 7, above its max 5 by 2")
            self.assertEqual(by_x[0.9], "infeasible: mem_gb never reported")
            self.assertEqual(b.eval("document.querySelectorAll('#trials .infeasible-mark').length"),
                             2)
            self.assertEqual(b.eval("document.querySelectorAll('#trials .feasible-mark').length"),
                             2)
            self.shot(b, "trials-infeasible")
            # Sorted by feasibility: the feasible first, then the infeasible (each by id);
            # descending, the other way round.
            good = sorted(i for i in x if x[i] < 0.5)
            bad = sorted(i for i in x if x[i] > 0.5)
            ids = "JSON.stringify([...document.querySelectorAll('#trials tbody tr')]" \
                  ".map(r => +r.dataset.trialId))"
            b.eval("document.querySelector('#trials th[data-key=feasible]').click()")
            # (the trials by id may be in that order already: wait for the rows sorted by it too)
            b.wait_for("%s == '%s' && document.querySelector('#trials th[data-key=feasible]')"
                       ".textContent.endsWith('▴')" % (ids, json.dumps(good + bad).replace(" ", "")))
            self.assertIn("sort=feasible", b.eval("location.hash"))
            b.eval("document.querySelector('#trials th[data-key=feasible]').click()")
            b.wait_for("%s == '%s'" % (ids, json.dumps(bad + good).replace(" ", "")))
            self.assertIn("desc=1", b.eval("location.hash"))
            # Filtered: the infeasible only, the filter kept in the URL through a reload.
            b.eval("(() => { const s = document.getElementById('feasible-filter'); s.value = 'no';"
                   " s.dispatchEvent(new Event('change')); })()")
            b.wait_for("%s == '%s' && document.getElementById('trials').dataset.matched == 2"
                       % (ids, json.dumps(bad).replace(" ", "")))
            self.assertIn("feasible=no", b.eval("location.hash"))
            b.eval("window.before_reload = 1; location.reload()")
            b.wait_for("!window.before_reload && %s == '%s'" % (ids, json.dumps(bad)
                                                                .replace(" ", "")))
            self.assertEqual(b.eval("document.getElementById('feasible-filter').value"), "no")
            self.shot(b, "trials-infeasible-only")
            for word, want in (("yes", good), ("unjudged", [])):
                status, body = api(printed, "api/e/0/trials?feasible=" + word)
                self.assertEqual(status, 200, body)
                self.assertEqual([r["id"] for r in json.loads(body)["rows"]], want)
            status, body = api(printed, "api/e/0/trials?feasible=maybe")
            self.assertEqual(status, 400)
            self.assertIn("feasible=maybe: name yes (feasible), no (infeasible) or unjudged",
                          json.loads(body)["error"])
            # A trial's own page: its standing in a sentence, and each constraint's value,
            # bound and margin (inside its bound; negative: outside it by that much).
            by_value = {v: i for i, v in x.items()}
            pages = {
                0.7: ("false", "Infeasible: mem_gb = 7, above its max 5 by 2.",
                      ["mem_gb", "7", "≤ 5", "-2", "✗ broken"]),
                0.9: ("false", "Infeasible: mem_gb never reported.",
                      ["mem_gb", "never reported", "≤ 5", "", "✗ never reported"]),
                0.2: ("true", "Feasible: every constraint holds in its last report.",
                      ["mem_gb", "2", "≤ 5", "3", "✓ holds"]),
            }
            for xv, (flag, sentence, cells) in pages.items():
                b.goto(printed + "#/e/0/trial/%d" % by_value[xv])
                b.wait_for("document.getElementById('feasibility').dataset.feasible == '%s' && "
                           "document.querySelectorAll('#constraints tr[data-metric]').length == 1"
                           % flag)
                self.assertEqual(b.eval("document.getElementById('feasibility').textContent"),
                                 sentence)
                self.assertEqual(b.eval("[...document.querySelector('#constraints "
                                        "tr[data-metric=mem_gb]').cells].map(c => c.textContent)"),
                                 cells, xv)
                if xv == 0.7:
                    self.shot(b, "trial-infeasible")

    def test_a_pareto_front_of_a_real_run_links_each_point_to_its_trial(self):
        trial = self.write("two.py", TWO_OBJECTIVES)
        mo, one, three = self.path("run-mo"), self.path("run-one"), self.path("run-three")
        exp = ("name: %s\ncommand: [%s, %s, \"{x}\", \"{y}\"]\nmetric: %s\n"
               "space:\n  x: {uniform: [0.0, 1.0]}\n  y: {uniform: [0.0, 0.3]}\n"
               "search: {algorithm: random, trials: 16, seed: 4}\nconcurrency: 4\n")
        with Browser() as b:
            self.assertExit(self.run_exp(self.experiment(exp % (
                "two-objectives", yaml_str(PY), yaml_str(trial),
                "[{name: acc, mode: max}, {name: cost, mode: min}]"), name="mo.yaml"), mo), 0)
            self.assertExit(self.run_exp(self.experiment(exp % (
                "one-objective", yaml_str(PY), yaml_str(trial), "{name: acc, mode: max}"),
                name="one.yaml"), one), 0)
            self.assertExit(self.run_exp(self.experiment(exp % (
                "three-objectives", yaml_str(PY), yaml_str(trial),
                "[{name: acc, mode: max}, {name: cost, mode: min}, {name: lat, mode: min}]"),
                name="three.yaml"), three), 0)
            r = self.tp("best", mo, "--json")
            self.assertExit(r, 0)
            best = {f["trial"]: f["values"] for f in json.loads(r.stdout)}
            with self.store(mo) as s:
                finished = s.q("SELECT count(*) AS n FROM trials WHERE state = 'completed'")[0]["n"]
            self.assertEqual(finished, 16)
            self.assertGreaterEqual(len(best), 2)
            _, printed = self.start_dashboard(mo, one, three, "--listen", "127.0.0.1:0")
            url, _ = split_url(printed)
            # The API's front is `best`'s; one objective has none.
            status, body = api(printed, "api/e/0/front")
            self.assertEqual(status, 200, body)
            front = json.loads(body)
            self.assertEqual({f["trial"]: f["values"] for f in front["front"]}, best)
            self.assertEqual(front["finished"], 16)
            for path in ("api/e/1/front", "api/e/1/front.svg"):
                status, body = api(printed, path)
                self.assertEqual(status, 404, body)
                self.assertIn("one objective", body)

            b.goto(printed + "#/e/0/front")
            b.wait_for("document.querySelectorAll('#chart svg a.front').length > 0")
            tabs = tab_names(b)
            self.assertIn("Pareto front", tabs)
            drawn = b.eval("[...document.querySelectorAll('#chart svg a.front')]"
                           ".map(a => +a.dataset.trial).sort((x, y) => x - y)")
            self.assertEqual(drawn, sorted(best))
            self.assertEqual(b.eval("document.querySelectorAll('#chart svg a.dominated').length"),
                             16 - len(best))
            self.assertEqual(b.eval("document.querySelectorAll('#front tr[data-trial]').length"),
                             len(best))
            axes = b.eval("[...document.querySelectorAll('#chart svg text')].map(t => t.textContent)")
            self.assertIn("acc (max)", axes)
            self.assertIn("cost (min)", axes)
            self.shot(b, "front")
            # A front point's tooltip has its values, and its link opens its trial's page.
            pick = sorted(best)[len(best) // 2]
            sel = "#chart svg a.front[data-trial='%d']" % pick
            tip = b.eval("document.querySelector(\"%s title\").textContent" % sel)
            self.assertTrue(tip.startswith("trial %d: acc=" % pick), tip)
            self.assertIn("cost=%g" % best[pick]["cost"], tip)
            b.click(sel)
            b.wait_for("location.hash === '#/e/0/trial/%d'" % pick)
            b.wait_for("document.getElementById('trial-info') && "
                       "document.getElementById('trial-info').textContent.includes('completed')")
            self.assertEqual(b.eval("document.querySelector('#view h2').textContent"),
                             "Trial %d" % pick)

            # Three objectives: a plot for each pair, every trial of `best`'s front in each.
            r = self.tp("best", three, "--json")
            self.assertExit(r, 0)
            best3 = sorted(f["trial"] for f in json.loads(r.stdout))
            self.assertLess(len(best3), 16)
            b.goto(url + "#/e/2/front")
            b.wait_for("document.querySelectorAll('#chart svg a.front').length > 0")
            drawn = b.eval("[...document.querySelectorAll('#chart svg a.front')]"
                           ".map(a => +a.dataset.trial).sort((x, y) => x - y)")
            self.assertEqual(drawn, sorted(best3 * 3))
            self.assertEqual(b.eval("document.querySelectorAll('#chart svg a.dominated').length"),
                             3 * (16 - len(best3)))
            axes = b.eval("[...document.querySelectorAll('#chart svg text')].map(t => t.textContent)")
            for name in ("acc (max)", "cost (min)", "lat (min)"):
                self.assertIn(name, axes)
            self.shot(b, "front-three")

            # One objective: no front tab, and the page, opened by hand, says why.
            b.goto(url + "#/e/1/trials")
            b.wait_for("document.querySelectorAll('#trials tr[data-trial-id]').length > 0")
            tabs = tab_names(b)
            self.assertIn("Trials", tabs)
            self.assertNotIn("Pareto front", tabs)
            b.goto(url + "#/e/1/front")
            b.wait_for("document.getElementById('front-note').textContent.includes('one objective')")
            self.assertEqual(b.eval("document.querySelectorAll('#chart svg').length"), 0)

    def test_a_pbt_lineage_draws_a_lane_per_trial_and_an_arrow_per_exploit(self):
        from test_pbt import N as PBT_TRIALS, PbtTest
        d = self.path("run-pbt")
        self.assertExit(self.run_exp(PbtTest.exp(self), d), 0)
        with self.store(d) as s:
            trials = sorted(t["id"] for t in s.trials())
            exploits = [(r["trial"], json.loads(r["detail"])) for r in
                        s.q("SELECT trial, detail FROM decisions WHERE kind = 'exploit' "
                            "ORDER BY seq")]
        self.assertEqual(len(trials), PBT_TRIALS)
        self.assertGreater(len(exploits), 0)
        plain = self.path("run-plain")
        self.assertExit(self.run_exp(self.exp(trials=2, sleep=0.01), plain,
                                     env=self.gpu_env()), 0)
        _, printed = self.start_dashboard(d, plain, "--listen", "127.0.0.1:0")
        url, _ = split_url(printed)
        # The JSON: a lane per trial, an exploit per decision, each segment after the first
        # starting at its donor's step.
        status, body = api(printed, "api/e/0/lineage")
        self.assertEqual(status, 200, body)
        lineage = json.loads(body)
        self.assertEqual([t["id"] for t in lineage["trials"]], trials)
        self.assertEqual([(e["trial"], e["donor"], e["donor_step"], sorted(e["changed"]))
                          for e in lineage["exploits"]],
                         [(t, x["donor"], x["donor_step"], ["lr"]) for t, x in exploits])
        for e, (_, x) in zip(lineage["exploits"], exploits):  # JSON numbers: 12 digits
            self.assertAlmostEqual(e["changed"]["lr"][1], x["new"]["lr"], places=9)
            self.assertAlmostEqual(e["changed"]["lr"][0], x["old"]["lr"], places=9)
        for t in lineage["trials"]:
            mine = [x for trial, x in exploits if trial == t["id"]]
            self.assertEqual([sg["segment"] for sg in t["segments"]],
                             list(range(len(mine) + 1)))
            self.assertEqual([sg["from"] for sg in t["segments"][1:]],
                             [x["donor_step"] for x in mine])
            self.assertEqual(t["segments"][-1]["points"][-1][0], 8)
        # A metric that is none, or an argument that is none, is a 400 that names it.
        status, body = api(printed, "api/e/0/lineage?metric=nonsense")
        self.assertEqual(status, 400, body)
        self.assertIn("nonsense", body)
        self.assertIn("score", body)
        status, body = api(printed, "api/e/0/lineage.svg?bogus=1")
        self.assertEqual(status, 400, body)
        self.assertIn("bogus", body)
        self.assertEqual(api(printed, "api/e/0/lineage?metric=lr")[0], 200)
        self.assertEqual(get(url + "api/e/0/lineage")[0], 403)  # token-private

        with Browser() as b:
            b.goto(printed + "#/e/0/lineage")
            b.wait_for("document.querySelectorAll('#chart svg g.lane').length > 0")
            tabs = tab_names(b)
            self.assertIn("Lineage", tabs)
            lanes = b.eval("[...document.querySelectorAll('#chart svg g.lane')]"
                           ".map(g => +g.dataset.trial)")
            self.assertEqual(lanes, trials)
            arrows = b.eval("[...document.querySelectorAll('#chart svg g.exploit')]"
                            ".map(g => [+g.dataset.trial, +g.dataset.donor])")
            self.assertEqual(arrows, [[t, x["donor"]] for t, x in exploits])
            self.assertGreater(b.eval("document.querySelectorAll('#chart svg line.piece')"
                                      ".length"), 0)
            # An arrow's tooltip names the donor, the step and the changed parameter.
            t, x = exploits[0]
            tip = b.eval("document.querySelector('#chart svg g.exploit title').textContent")
            self.assertIn("trial %d copies trial %d at step %g" % (t, x["donor"],
                                                                  x["donor_step"]), tip)
            self.assertIn("lr ", tip)
            self.assertIn("%g -> %g" % (x["old"]["lr"], x["new"]["lr"]), tip)
            self.assertIn("%d exploits" % len(exploits),
                          b.eval("document.getElementById('lineage-note').textContent"))
            self.shot(b, "lineage")
            # An experiment without exploits has no lineage tab.
            b.goto(url + "#/e/1/trials")
            b.wait_for("document.querySelectorAll('#trials tr[data-trial-id]').length > 0")
            tabs = tab_names(b)
            self.assertNotIn("Lineage", tabs)

    def test_a_machine_without_gpus_says_so_in_the_singular(self):
        self.fake_gpus([])
        d = self.path("run")
        exp = self.experiment(
            "name: cpu\ncommand: [sh, -c, 'echo \"{{\\\"acc\\\": {x}}}\" >&3']\n"
            "metric: {name: acc, mode: max}\nspace:\n  x: {choice: [1]}\n"
            "search: {algorithm: random, trials: 1}\n", name="cpu.yaml")
        self.assertExit(self.run_exp(exp, d, env=self.gpu_env()), 0)
        with Browser() as b:
            _, url = self.start_dashboard(d, "--listen", "127.0.0.1:0")
            b.goto(url + "#/e/0/nodes")
            b.wait_for("document.querySelector('#nodes tr + tr') && "
                       "document.getElementById('no-gpus').offsetParent")
            self.assertEqual(b.eval("document.getElementById('no-gpus').textContent"),
                             "This node has no GPU: the trials run on CPUs only.")
            self.assertIsNone(b.eval("document.getElementById('gpus').offsetParent"))
            cells = b.eval("[...document.querySelectorAll('#nodes tr + tr td')]"
                           ".map(c => c.textContent)")
            self.assertNotIn("", cells[:5], cells)  # no blank memory or GPU cell
            self.shot(b, "nodes-without-gpus")
            b.goto(url + "#/e/0/packing")
            b.wait_for("document.querySelector('#chart svg rect')")
            texts = b.eval("[...document.querySelectorAll('#chart svg text')].map(t => t.textContent)")
            self.assertTrue(any(re.match(r"1 placement on 1 device over ", t) for t in texts), texts)
            b.goto(url)
            b.wait_for("document.querySelector('#experiments td.progress')")
            self.assertEqual(b.eval("document.querySelector('#experiments td.progress')"
                                    ".textContent.trim()"), "1 of 1 trial ended")

    def test_every_address_needs_the_printed_token_and_the_cookie_keeps_it(self):
        d = self.path("run")
        self.assertExit(self.run_exp(self.exp(trials=3, sleep=0.01), d, env=self.gpu_env()), 0)
        for listen in ("127.0.0.1:0", "0.0.0.0:0"):
            p, url = self.start_dashboard(d, "--listen", listen)
            m = re.match(r"http://%s:(\d+)/\?token=([0-9a-f]{32})$" % re.escape(listen[:-2]), url)
            self.assertTrue(m, url)
            port, token = m.group(1), m.group(2)
            base = "http://127.0.0.1:%s" % port
            status, body = get(base + "/api/experiments")
            self.assertEqual(status, 403)
            self.assertIn("token", json.loads(body)["error"])
            status, body = get(base + "/")
            self.assertEqual(status, 403)
            self.assertIn("?token=", body)
            for wrong in ("0" * 32, token[:-1], token + "0", ""):
                self.assertEqual(get(base + "/api/experiments?token=" + wrong)[0], 403, wrong)
            status, body = get(base + "/api/experiments?token=" + token)
            self.assertEqual(status, 200)
            self.assertEqual(json.loads(body)["experiments"][0]["total"], 3)
            self.assertEqual(get(base + "/api/e/0/summary",
                                 {"Authorization": "Bearer " + token})[0], 200)
            # The page opened with the token: a cookie, and back to the page without the token.
            conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
            status, headers, _ = request(conn, "/?token=" + token)
            self.assertEqual(status, 302)
            self.assertEqual(headers["Location"], "/")
            cookie = headers["Set-Cookie"]
            name_value, *attrs = [a.strip() for a in cookie.split(";")]
            self.assertEqual(name_value, "tunepack-token-%s=%s" % (port, token))
            self.assertEqual(sorted(attrs), ["HttpOnly", "Path=/", "SameSite=Strict"])
            for path in ("/", "/app.js", "/api/e/0/summary"):
                self.assertEqual(request(conn, path, {"Cookie": name_value})[0], 200, path)
                self.assertEqual(request(conn, path, {"Cookie": name_value[:-1] + "x"})[0], 403)
            conn.close()
            p.terminate()
            out, _ = p.communicate(timeout=10)
            self.assertEqual(p.returncode, 0)
            self.assertEqual(out.count(token), 1, "the token is printed once: %r" % out)
            self.assertIn("this machine only" if listen.startswith("127.") else "any machine", out)

    def test_no_token_only_on_a_unix_socket_or_when_the_user_says_so(self):
        d = self.path("run")
        self.assertExit(self.run_exp(self.exp(trials=2, sleep=0.01), d, env=self.gpu_env()), 0)
        r = self.tp("dashboard", d, "--no-token")
        self.assertExit(r, 2)
        self.assertIn("--every-local-user-may-read", r.stderr)
        self.assertIn("every user of this machine", r.stderr)
        r = self.tp("dashboard", d, "--no-token", "--every-local-user-may-read", "--listen",
                    "0.0.0.0:0")
        self.assertExit(r, 2)
        self.assertIn("loopback", r.stderr)
        self.assertExit(self.tp("dashboard", d, "--every-local-user-may-read"), 2)
        # Acknowledged: no token on loopback, and it says what that exposes.
        p, url = self.start_dashboard(d, "--no-token", "--every-local-user-may-read",
                                      "--listen", "127.0.0.1:0")
        self.assertRegex(url, r"^http://127\.0\.0\.1:\d+/$")
        self.assertEqual(get(url + "api/e/0/summary")[0], 200)
        p.terminate()
        out, _ = p.communicate(timeout=10)
        self.assertIn("no token", out)
        self.assertIn("every user of this machine", out)
        self.assertIn("logs, parameters and results", out)
        # A Unix socket is its owner's alone: a token by default, none asked with --no-token.
        sock = self.path("dash.sock")
        for extra, needs_token in (((), True), (("--no-token",), False)):
            p, url = self.start_dashboard(d, "--unix", sock, *extra)
            self.assertEqual(stat.S_IMODE(os.stat(sock).st_mode), 0o600)
            conn = UnixHTTP(sock)
            status, _, body = request(conn, "/api/e/0/summary")
            self.assertEqual(status, 403 if needs_token else 200, body)
            if needs_token:
                token = re.search(r"\?token=([0-9a-f]{32})$", url).group(1)
                status, _, body = request(conn, "/api/e/0/summary?token=" + token)
                self.assertEqual(status, 200)
            self.assertEqual(json.loads(body)["total"], 2)
            conn.close()
            p.terminate()
            out, _ = p.communicate(timeout=10)
            self.assertEqual(p.returncode, 0)
            self.assertIn("0600: you alone", out)
            self.assertFalse(os.path.exists(sock), "the socket is removed at the end")

    def test_run_with_dashboard_serves_it_beside_the_run_and_ends_with_it(self):
        d = self.path("run")
        self.run_dirs.append(d)
        p = subprocess.Popen([BIN, "run", self.exp(trials=4, sleep=0.3), "--dir", d, "--plain",
                              "--dashboard=127.0.0.1:0"], cwd=self.tmp, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=merged_env(self.gpu_env()))
        self.procs.append(p)
        lines = []
        while not lines or not lines[-1].startswith("dashboard:"):
            lines.append(p.stdout.readline())
            self.assertTrue(lines[-1], "no dashboard line in the run's output: %r" % lines)
        m = re.match(r"dashboard: (http://127\.0\.0\.1:\d+/\?token=[0-9a-f]{32})$",
                     lines[-1].strip())
        self.assertTrue(m, lines)
        # Its URL comes first: the run starts once it is printed, so that no live view can
        # draw over the one line that carries the token.
        self.assertEqual(len(lines), 1, lines)
        wait_for(lambda: api(m.group(1), "api/e/0/summary")[0] == 200, 30)
        self.assertEqual(p.wait(timeout=120), 0, p.stderr.read())
        self.assertRaises(Exception, api, m.group(1), "api/experiments")

    def test_run_with_dashboard_in_a_terminal_keeps_its_url_on_the_screen(self):
        # The live view must not draw over the one line that carries the token: the run
        # starts once the dashboard has printed it.
        d = self.path("run")
        self.run_dirs.append(d)
        exp = self.experiment(
            "name: quick\ncommand: [sh, -c, 'echo \"{{\\\"acc\\\": {x}}}\" >&3']\n"
            "metric: {name: acc, mode: max}\nspace:\n  x: {uniform: [0, 1]}\n"
            "search: {algorithm: random, trials: 20}\n", name="quick.yaml")
        sock = "tp-dash-%d" % os.getpid()
        tmux = ["tmux", "-L", sock]
        self.addCleanup(subprocess.run, tmux + ["kill-server"], capture_output=True)
        cmd = "%s run %s --dir %s --dashboard=127.0.0.1:0; echo EXIT=$?; sleep 600" % (
            shlex.quote(BIN), shlex.quote(exp), shlex.quote(d))
        subprocess.run(tmux + ["-f", "/dev/null", "new-session", "-d", "-s", "dash", "-x", "150",
                               "-y", "40", cmd], check=True)

        def screen():
            return subprocess.run(tmux + ["capture-pane", "-p", "-t", "dash"],
                                  capture_output=True, text=True, check=True).stdout
        self.assertTrue(wait_for(lambda: "EXIT=" in screen(), 120), screen())
        self.assertIn("EXIT=0", screen())
        self.assertRegex(screen(), r"dashboard: http://127\.0\.0\.1:\d+/\?token=[0-9a-f]{32}\n")

    def test_bad_arguments_are_named(self):
        r = self.tp("dashboard", self.path("nothing-here"))
        self.assertExit(r, 4)
        self.assertIn("nothing-here", r.stderr)
        r = self.tp("dashboard", "--listen", "8080")
        self.assertExit(r, 2)
        self.assertIn("HOST:PORT", r.stderr)
        r = self.tp("dashboard", "--bogus")
        self.assertExit(r, 2)
        self.assertIn("--bogus", r.stderr)

    def test_requests_the_store_cannot_answer_get_errors_not_crashes(self):
        d = self.path("run")
        self.assertExit(self.run_exp(self.exp(trials=2, sleep=0.01), d, env=self.gpu_env()), 0)
        _, printed = self.start_dashboard(d, "--listen", "127.0.0.1:0")
        url, token = split_url(printed)
        for path, status in (("api/e/7/summary", 404), ("api/e/0/trial/999", 404),
                             ("api/e/0/nope", 404), ("api/e/0/log/0?stream=../../etc/passwd", 400),
                             ("api/e/0/trials?sort=value;DROP&limit=-5&offset=x", 400),
                             ("api/e/0/trials?sort=value&limit=-5&offset=x", 200),
                             ("../../etc/passwd", 404)):
            self.assertEqual(api(printed, path)[0], status, path)
        # A column that is none is named back, with the ones there are.
        status, body = api(printed, "api/e/0/trials?sort=nonsense")
        self.assertEqual(status, 400)
        self.assertIn('no column \\"nonsense\\"', body)
        self.assertIn("p:PARAMETER", body)
        status, body = api(printed, "api/e/0/trials?sort=rung&limit=100000")
        self.assertEqual(json.loads(body)["limit"], 500)
        req = urllib.request.Request(url + "api/experiments", method="POST", data=b"x",
                                     headers={"Authorization": "Bearer " + token})
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        self.assertEqual(e.exception.code, 405)


if __name__ == "__main__":
    main()
