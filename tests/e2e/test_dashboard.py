#!/usr/bin/env python3
"""The dashboard (issue 13) in a real browser: Debian's headless Chromium loads each page while an
ASHA experiment packs trials onto stand-in GPUs, and what the pages show is checked against the
store (trial count, best value, one trial's curve, the placements). Screenshots of every page go
to $TUNEPACK_SCREENSHOTS (default: <build>/screenshots). Also: the token on a non-loopback
address, `run --dashboard`, and errors that say what is wrong."""

import json
import os
import re
import subprocess
import sys
import time
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
ck = os.path.join(os.environ["TUNEPACK_CHECKPOINT_DIR"], "ckpt")
start = int(open(ck).read()) if os.path.exists(ck) else 0
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
for epoch in range(max(start, 0) + 1, budget + 1):
    time.sleep(sleep)
    print("epoch %d of trial x=%.3f" % (epoch, x), flush=True)
    rep.write(json.dumps({"step": epoch, "score": round((1 - (x - 0.3) ** 2) * (1 - math.exp(-epoch / 3.0)), 6)}) + "\n")
    with open(ck + ".tmp", "w") as f:
        f.write(str(epoch))
    os.rename(ck + ".tmp", ck)
'''


def get(url, headers=None):
    """(status, body text) of a GET."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Dashboard(GpuE2E):

    def setUp(self):
        super().setUp()
        self.fake_gpus([(80 * GIB, None), (40 * GIB, None)])
        os.makedirs(SHOTS, exist_ok=True)

    def exp(self, trials=12, sleep=0.25, concurrency=4):
        return self.experiment(
            "name: dash\n"
            "command: [%s, %s, \"{x}\", \"{epochs}\", \"%s\"]\n"
            "metric: {name: score, mode: max}\n"
            "space:\n  x: {uniform: [0, 1]}\n  width: {choice: [64, 128, 256]}\n"
            "search: {algorithm: random, trials: %d, seed: 3, scheduler: asha}\n"
            "budget: {name: epochs, min: 1, max: 9, eta: 3}\n"
            "concurrency: %d\n"
            "resources: {gpus: 1, gpu_memory: 10G, gpu_compute: 0.25}\n"
            "placement: {policy: wfd, reserve: 512M}\n"
            % (yaml_str(PY), yaml_str(self.write("trainer.py", TRAINER)), sleep, trials,
               concurrency))

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
        d = self.path("run")
        with Browser() as b:  # started first: it takes seconds on a busy machine
            run = self.start_run(self.exp(sleep=0.6), d, env=self.gpu_env())
            wait_for(lambda: self.poll_query(d, "SELECT value FROM meta WHERE key = 'name'"), 30)
            _, url = self.start_dashboard(d, "--listen", "127.0.0.1:0")
            # A value has been reported before the pages are looked at.
            wait_for(lambda: (self.poll_query(d, "SELECT count(*) AS n FROM metrics") or
                              [{"n": 0}])[0]["n"] >= 3, 60)
            b.goto(url + "#/e/0/trials")
            b.wait_for("document.querySelectorAll('#trials tr[data-trial-id]').length > 0")
            shown = b.eval("+document.getElementById('trials').dataset.total")
            with self.store(d) as s:
                in_store = s.q("SELECT count(*) AS n FROM trials")[0]["n"]
            self.assertGreater(shown, 0)
            self.assertLessEqual(shown, in_store)  # the store only grows between the two reads
            self.assertEqual(run.poll(), None, "the run ended before the pages were seen live")
            self.shot(b, "trials")
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
                # The best trial as `tunepack best` ranks it (the largest budget first).
                r = self.tp("best", d, "--json")
                self.assertExit(r, 0)
                ranked = json.loads(r.stdout)
                best = {"id": ranked["trial"], "value": ranked["value"]}
                curve = [(r["step"], r["value"]) for r in s.q(
                    "SELECT step, value FROM metrics WHERE trial = ?1 AND value IS NOT NULL "
                    "ORDER BY attempt, seq", best["id"])]
            # The node list the store keeps says, at the end, that nothing runs there.
            status, body = get(url + "api/e/0/nodes")
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
            b.goto(url)
            b.wait_for("document.querySelector('#experiments td.best a')")
            self.assertIn(str(best["id"]), b.eval("document.querySelector('#experiments td.best').textContent"))
            self.shot(b, "experiments")
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
            b.eval("[...document.querySelectorAll('#trials th')].find(t => t.textContent.startsWith('value')).click()")
            b.eval("[...document.querySelectorAll('#trials th')].find(t => t.textContent.startsWith('value')).click()")
            b.wait_for("document.querySelector('#trials tr[data-trial-id]').dataset.trialId == '%d'"
                       % best["id"])

    def test_an_address_beyond_loopback_needs_the_printed_token(self):
        d = self.path("run")
        self.assertExit(self.run_exp(self.exp(trials=3, sleep=0.01), d, env=self.gpu_env()), 0)
        p, url = self.start_dashboard(d, "--listen", "0.0.0.0:0")
        m = re.match(r"http://0\.0\.0\.0:(\d+)/\?token=([0-9a-f]{32})$", url)
        self.assertTrue(m, url)
        port, token = m.group(1), m.group(2)
        base = "http://127.0.0.1:%s" % port
        status, body = get(base + "/api/experiments")
        self.assertEqual(status, 401)
        self.assertIn("token", json.loads(body)["error"])
        self.assertEqual(get(base + "/api/experiments?token=" + "0" * 32)[0], 401)
        self.assertEqual(get(base + "/api/experiments?token=" + token[:-1])[0], 401)
        status, body = get(base + "/api/experiments?token=" + token)
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["experiments"][0]["total"], 3)
        self.assertEqual(get(base + "/api/e/0/summary",
                             {"Authorization": "Bearer " + token})[0], 200)
        p.terminate()
        out, _ = p.communicate(timeout=10)
        self.assertEqual(p.returncode, 0)
        self.assertEqual(out.count(token), 1, "the token is printed once: %r" % out)
        self.assertIn("not a loopback address", out)

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
        m = re.match(r"dashboard: (http://127\.0\.0\.1:\d+/)$", lines[-1].strip())
        self.assertTrue(m, lines)
        wait_for(lambda: get(m.group(1) + "api/e/0/summary")[0] == 200, 30)
        self.assertEqual(p.wait(timeout=120), 0, p.stderr.read())
        self.assertRaises(Exception, get, m.group(1) + "api/experiments")

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
        _, url = self.start_dashboard(d, "--listen", "127.0.0.1:0")
        for path, status in (("api/e/7/summary", 404), ("api/e/0/trial/999", 404),
                             ("api/e/0/nope", 404), ("api/e/0/log/0?stream=../../etc/passwd", 400),
                             ("api/e/0/trials?sort=value;DROP&limit=-5&offset=x", 200),
                             ("../../etc/passwd", 404)):
            self.assertEqual(get(url + path)[0], status, path)
        status, body = get(url + "api/e/0/trials?sort=nonsense&limit=100000")
        self.assertEqual(json.loads(body)["limit"], 500)
        req = urllib.request.Request(url + "api/experiments", method="POST", data=b"x")
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        self.assertEqual(e.exception.code, 405)


if __name__ == "__main__":
    main()
