#!/usr/bin/env python3
"""Dashboard benchmark (issue 13); prints its figures, asserts nothing.

  python3 bench/dashboard.py [BUILD_DIR]             (default: build)
  python3 bench/dashboard.py [BUILD_DIR] --table     the trials table alone, on a store made in
                                                      seconds (below)
  python3 bench/dashboard.py [BUILD_DIR] --front     the Pareto front alone, likewise

1. scale: a real store of 10,000 trials and 1,000,000 metric rows (10,000 runs of
   bench/report_flood writing 100 lines each, packed four to a GPU on eight stand-in GPUs, the
   tests' fake NVML and MPS, so that the packing chart has 10,000 placements), served by
   `tunepack dashboard`: for every API
   route and chart, the time of the first (cold) request, the median of five, and the size of
   the answer; then each page's first render in headless Chromium, from navigation to its
   content on screen (targets: under 1 s, JSON under 500 KB).
2. the writer: one trial writing 1,000,000 report lines, ingested alone and while a client asks
   the dashboard for every route of that experiment in a loop (all fourteen, then 0.1 s of
   rest; an open page asks for two or three a second): lines per second both ways.
3. --table: the trials table's routes (sort by a parameter or a metric, filters by state, range
   and text, a deep page) on a store of 10,000 trials and 1,000,000 metric rows written by SQL
    in seconds (one real trial copied, with its schema and meta), not by a real run, under a
    constraint (loss <= 0.5: the table sorted and filtered by feasibility too); and there
    the importance (a random forest), parallel coordinates, slice and contour, and the brushed
    set (a range of x and two of hidden's values) filtering the table, the importance, history,
    curves, slice and contour.
4. --front: the Pareto front's routes (its JSON and its chart) on stores of 10,000 finished
   trials with two objectives (acc max, loss min; at odds with noise, then every trial on it, the
   worst case) and three (time min added), written by SQL likewise; and the page's first
   render in Chromium.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
BUILD = os.path.abspath(ARGS[0] if ARGS else os.path.join(ROOT, "build"))
BIN = os.path.join(BUILD, "tunepack")
FLOOD = os.path.join(BUILD, "bench", "report_flood")
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.dont_write_bytecode = True
from browser import Browser  # noqa: E402

ROUTES = ["api/experiments", "api/e/0/summary", "api/e/0/trials",
          "api/e/0/trials?sort=value&desc=1", "api/e/0/trials?q=hidden%22%3A%2064&state=completed",
          "api/e/0/trial/5000", "api/e/0/log/5000?stream=stdout", "api/e/0/nodes",
          "api/e/0/importance", "api/e/0/history.svg", "api/e/0/curves.svg",
          "api/e/0/parcoords.svg", "api/e/0/importance.svg", "api/e/0/packing.svg"]
# The trials table: a column per parameter and metric, sorted and filtered by the server.
TABLE_ROUTES = ["api/e/0/trials?sort=p%3Alr", "api/e/0/trials?sort=m%3Aloss&desc=1",
                "api/e/0/trials?state=completed&min.p%3Ax=0.2&max.p%3Ax=0.6&sort=value&desc=1",
                "api/e/0/trials?min.m%3Aloss=0.1&max.value=0.9&q=hidden%22%3A%2064",
                "api/e/0/trials?sort=p%3Ahidden&offset=9900", "api/e/0/columns"]
ROUTES[5:5] = TABLE_ROUTES
# Under constraints (the --table store has one, loss <= 0.5): sorted and filtered by feasibility,
# the rule run by SQLite on each trial's last report.
FEASIBLE_ROUTES = ["api/e/0/trials?sort=feasible", "api/e/0/trials?feasible=no&sort=value&desc=1"]
# The plots of issue 36: slice and contour of a parameter and a pair (the importance, a random
# forest, is in ROUTES above).
PLOT_ROUTES = ["api/e/0/slice.svg?param=lr", "api/e/0/contour.svg?x=lr&y=hidden"]
ROUTES.extend(PLOT_ROUTES)
# The brushed set (a range on x, a set of hidden's values) filtering the table and the charts of
# the trials, in SQL; beside them, the same charts unbrushed.
BRUSH = "min.p%3Ax=0.2&max.p%3Ax=0.6&in.p%3Ahidden=64&in.p%3Ahidden=128"
BRUSH_ROUTES = ["api/e/0/history.svg", "api/e/0/curves.svg", "api/e/0/importance.svg",
                "api/e/0/trials?" + BRUSH, "api/e/0/importance?" + BRUSH,
                "api/e/0/importance.svg?" + BRUSH, "api/e/0/history.svg?" + BRUSH,
                "api/e/0/curves.svg?" + BRUSH, "api/e/0/slice.svg?param=lr&" + BRUSH,
                "api/e/0/contour.svg?x=lr&y=hidden&" + BRUSH]
PAGES = [("experiments", "", "#experiments td"), ("trials", "#/e/0/trials", "#trials tr[data-trial-id]"),
         ("trial", "#/e/0/trial/5000", "#curve tr + tr"), ("history", "#/e/0/history", "#chart svg"),
         ("curves", "#/e/0/curves", "#chart svg"), ("parallel", "#/e/0/parallel", "#chart svg"),
         ("importance", "#/e/0/importance", "#chart svg"),
         ("slice and contour", "#/e/0/plots?param=lr&x=lr&y=hidden", "#contour svg"), ("packing", "#/e/0/packing", "#chart svg"),
         ("nodes", "#/e/0/nodes", "#gpus")]


def fake_gpus(tmp, n):
    """The tests' stand-in GPUs: n fake 80 GB GPUs for the fake NVML, and its MPS control."""
    procs = os.path.join(tmp, "nvml-procs")
    os.makedirs(procs, exist_ok=True)
    path = os.path.join(tmp, "nvml.json")
    with open(path, "w") as f:
        json.dump({"gpus": [{"name": "NVIDIA Fake 80G", "uuid": "GPU-fake-%d" % i,
                             "memory_mib": 81920, "util": 0} for i in range(n)],
                   "processes": [], "process_dir": procs}, f)
    fake = os.path.join(BUILD, "fake")
    return dict(os.environ, LD_LIBRARY_PATH=fake, TUNEPACK_FAKE_NVML=path,
                PATH=fake + os.pathsep + os.environ["PATH"], TUNEPACK_FAKE_MPS_MAX_S="600")


def run(tmp, name, body, env=None):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(body)
    d = os.path.join(tmp, name)
    t0 = time.monotonic()
    subprocess.run([BIN, "run", path, "--dir", d, "--quiet"], cwd=tmp, check=False, env=env)
    return d, time.monotonic() - t0


def serve(dirs):
    ready = tempfile.mktemp()
    # No token, so that every route is a plain URL: a benchmark's own throwaway stores.
    p = subprocess.Popen([BIN, "dashboard", *dirs, "--listen", "127.0.0.1:0", "--no-token",
                          "--every-local-user-may-read", "--ready-file=" + ready],
                         stdout=subprocess.DEVNULL)
    while not os.path.exists(ready):
        time.sleep(0.05)
    time.sleep(0.1)
    with open(ready) as f:
        return p, f.read().strip()


def fetch(url):
    t0 = time.monotonic()
    with urllib.request.urlopen(url, timeout=60) as r:
        body = r.read()
    return time.monotonic() - t0, len(body)


def timed(url, r):
    """A route's line: the first request's time, the median of five more, the answer's size."""
    first, size = fetch(url + r)
    med = statistics.median(fetch(url + r)[0] for _ in range(5))
    print(f"{r:70s} {first * 1000:6.0f}ms {med * 1000:6.0f}ms {size / 1000:7.1f}KB")


def experiment(name, trials):
    """The benchmark's experiment: trials of report_flood writing 100 lines, three parameters."""
    return f"""name: {name}
command: [{FLOOD}, "100", "{{x}}"]
metric: {{name: acc, mode: max}}
space:
  x: {{uniform: [0, 1]}}
  lr: {{loguniform: [1.0e-5, 1.0]}}
  hidden: {{choice: [16, 32, 64, 128]}}
search: {{algorithm: random, trials: {trials}, seed: 1}}
"""


def scale(tmp):
    d, wall = run(tmp, "big", experiment("big", 10000) + """concurrency: 32
resources: {gpus: 1, gpu_memory: 10G, gpu_compute: 0.25}
placement: {policy: wfd, max_per_gpu: 4}
""", env=fake_gpus(tmp, 8))
    print(f"store: 10,000 trials x 100 report lines, 4 to a GPU on 8 stand-in GPUs, written by a "
          f"real run in {wall:.0f} s; "
          f"{os.path.getsize(os.path.join(d, 'tunepack.db')) / 1e6:.0f} MB")
    p, url = serve([d])
    try:
        print(f"{'route':55s} {'first':>8s} {'median':>8s} {'size':>9s}")
        for r in ROUTES:
            first, size = fetch(url + r)
            med = statistics.median(fetch(url + r)[0] for _ in range(5))
            kind = "JSON" if not r.split("?")[0].endswith(".svg") else "SVG"
            print(f"{r:55s} {first * 1000:6.0f}ms {med * 1000:6.0f}ms {size / 1000:7.1f}KB {kind}")
        with Browser() as b:
            b.goto(url + "#/")  # the browser's own start-up is not the page's
            b.wait_for("document.body.dataset.loaded")
            print(f"{'page (first render in Chromium)':55s} {'time':>8s}")
            for name, frag, ready in PAGES:
                b.goto("about:blank")
                t0 = time.monotonic()
                b.goto(url + frag)
                b.wait_for("document.querySelector('%s')" % ready, timeout=60)
                print(f"{name:55s} {(time.monotonic() - t0) * 1000:6.0f}ms")
    finally:
        p.terminate()
        p.wait()


def table_store(tmp):
    """A store of 10,000 trials and 1,000,000 metric rows: one real trial (its schema and meta),
    then 9,999 more written by SQL, with states, rungs, promotions, failures and placements."""
    import random
    import sqlite3
    d, _ = run(tmp, "table", experiment("table", 1))
    rnd = random.Random(1)
    db = sqlite3.connect(os.path.join(d, "tunepack.db"))
    states = ["completed"] * 6 + ["stopped"] * 2 + ["failed"]
    trials, metrics, jobs, places = [], [], [], []
    for i in range(1, 10000):
        x, lr, hidden = rnd.random(), 10 ** rnd.uniform(-5, 0), rnd.choice([16, 32, 64, 128])
        state, rung = "running" if i >= 9968 else rnd.choice(states), rnd.randrange(3)
        failures = int(state == "failed") + (rnd.random() < 0.05)
        last = {"step": 99, "acc": x * 0.99, "loss": 1 - x}
        trials.append((i, json.dumps({"x": x, "lr": lr, "hidden": hidden}), state, 1 + rung + failures,
                       failures, None if state == "failed" else x * 0.99, 99,
                       None if state == "running" else json.dumps(last), rung, 3.0 ** rung,
                       1000.0 + i, rnd.uniform(1, 100)))
        metrics.extend((i, 1, k, k, x * (k + 1) / 100, json.dumps(
            {"step": k, "acc": round(x * (k + 1) / 100, 6), "loss": round(1 - k / 100 * x, 6)}))
            for k in range(100))
        jobs.extend((1000.0 + i, "job", i, r, 3.0 ** r) for r in range(rung + 1))
        places.append((i, 1, 1000.0 + i, "node%d" % (i % 4), "[%d]" % (i % 8)))
    db.executemany("INSERT INTO trials(id, params, state, attempts, failures, value, step, metrics, "
                   "rung, budget, created_at, run_s) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)", trials)
    db.executemany("INSERT INTO metrics(trial, attempt, seq, step, value, data) VALUES(?,?,?,?,?,?)",
                   metrics)
    db.executemany("INSERT INTO decisions(at, kind, trial, attempt, rung, budget) "
                   "VALUES(?,?,?,1,?,?)", jobs)
    db.executemany("INSERT INTO placements(trial, attempt, at, node, gpus, memory_mib, compute, "
                   "cpus, sharing) VALUES(?,?,?,?,?,0,0,1,'cpu')", places)
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('constraints', ?)",
               (json.dumps([{"metric": "loss", "max": 0.5}]),))
    db.commit()
    db.close()
    return d


def table(tmp):
    d = table_store(tmp)
    print("store: 10,000 trials and 1,000,000 metric rows (written by SQL)")
    p, url = serve([d])
    try:
        print(f"{'route':70s} {'first':>8s} {'median':>8s} {'size':>9s}")
        for r in ["api/e/0/trials", "api/e/0/trials?sort=value&desc=1", *TABLE_ROUTES,
                  *FEASIBLE_ROUTES, "api/e/0/importance", "api/e/0/parcoords.svg", *PLOT_ROUTES,
                  *BRUSH_ROUTES]:
            timed(url, r)
        # A parameter the experiment lacks: refused (400), after a read of every trial.
        for r in ["api/e/0/trials?sort=p%3Amomentum", "api/e/0/trials?min.m%3Aaccuracy=0"]:
            t0 = time.monotonic()
            try:
                fetch(url + r)
                status = 200
            except urllib.error.HTTPError as e:
                status = e.code
            print(f"{r + ' (' + str(status) + ')':70s} {(time.monotonic() - t0) * 1000:6.0f}ms")
        with Browser() as b:
            b.goto(url + "#/")
            b.wait_for("document.body.dataset.loaded")
            for frag in ("#/e/0/trials", "#/e/0/trials?sort=p%3Alr&state=completed&min.p%3Ax=0.2"):
                b.goto("about:blank")
                t0 = time.monotonic()
                b.goto(url + frag)
                b.wait_for("document.querySelectorAll('#trials tbody tr').length == 100", timeout=60)
                print(f"{'page ' + frag + ' (first render in Chromium)':70s} "
                      f"{(time.monotonic() - t0) * 1000:6.0f}ms")
            # What a user waits for after a click: the rows redrawn (in Chromium, by the clock of
            # the page itself, from the click to the new rows in the DOM).
            b.goto("about:blank")
            b.goto(url + "#/e/0/trials")
            b.wait_for("document.querySelectorAll('#trials tbody tr').length == 100", timeout=60)
            first = "document.querySelector('#trials tbody tr').dataset.trialId"
            for what, click, done in (
                    ("sort by a parameter (click its name)",
                     "document.querySelector('#trials th[data-key=\"p:lr\"]').click()",
                     "location.hash.includes('sort=p%3Alr') && document.querySelector('#trials th.sorted a')"),
                    ("the last page (click its number)",
                     "document.querySelector('#pages a:last-of-type').click()",
                     "document.querySelector('#pages b').textContent == '100'"),
                    ("sort by a metric, descending (two clicks)",
                     "(() => { const t = document.querySelector('#trials th[data-key=\"m:loss\"]');"
                     " t.click(); t.click(); })()",
                     "location.hash.includes('desc=1') && location.hash.includes('m%3Aloss')")):
                before = b.eval(first)
                # t1: the first redraw of the rows once the view is the one clicked for.
                b.eval("window.t0 = performance.now(); window.t1 = 0; window.mo = new "
                       "MutationObserver(() => { if (!window.t1 && (%s)) window.t1 = "
                       "performance.now(); }); window.mo.observe(document.querySelector("
                       "'#trials tbody'), {childList: true}); %s" % (done, click))
                b.wait_for("window.t1 > 0", timeout=60)
                b.eval("window.mo.disconnect()")
                ms = b.eval("window.t1 - window.t0")
                print(f"{'click: ' + what + ' (Chromium, to the rows drawn)':70s} {ms:6.0f}ms"
                      f"  (first row: trial {before} -> {b.eval(first)})")
    finally:
        p.terminate()
        p.wait()


def front_store(tmp, name, every_one_on_it=False, three=False):
    """10,000 finished trials of a real two-objective experiment's store (its schema and meta):
    acc (max) and loss (min) at odds, noisy or exactly (every trial on it);
    with three, a third objective (time, min) too."""
    import random
    import sqlite3
    body = experiment(name, 1).replace("metric: {name: acc, mode: max}",
                                       "metric: [{name: acc, mode: max}, {name: loss, mode: min}]")
    d, _ = run(tmp, name, body)
    rnd = random.Random(2)
    db = sqlite3.connect(os.path.join(d, "tunepack.db"))
    if three:
        db.execute("UPDATE meta SET value = ? WHERE key = 'objectives'", (json.dumps(
            [{"name": "acc", "mode": "max"}, {"name": "loss", "mode": "min"},
             {"name": "time", "mode": "min"}]),))
    rows = []
    for i in range(1, 10000):
        x = rnd.random()
        last = {"step": 99, "acc": x, "loss": x if every_one_on_it else
                x * x + rnd.uniform(0, 0.3), "time": rnd.uniform(1, 100)}
        rows.append((i, json.dumps({"x": x}), "completed", 1, 0, x, 99, json.dumps(last),
                     1000.0 + i, 1.0))
    db.executemany("INSERT INTO trials(id, params, state, attempts, failures, value, step, metrics, "
                   "created_at, run_s) VALUES(?,?,?,?,?,?,?,?,?,?)", rows)
    db.commit()
    db.close()
    return d


def front(tmp):
    stores = [("two objectives at odds, noisy", front_store(tmp, "front2")),
              ("two objectives, every trial on the front", front_store(tmp, "front2all", True)),
              ("three objectives", front_store(tmp, "front3", three=True))]
    p, url = serve([d for _, d in stores])
    try:
        print(f"{'route':70s} {'first':>8s} {'median':>8s} {'size':>9s}")
        for e, (what, _) in enumerate(stores):
            status = json.loads(urllib.request.urlopen(url + "api/e/%d/front" % e).read())
            print(f"{e}: {what}: {status['finished']} finished, {status['on_front']} on the front")
            for r in ("api/e/%d/front" % e, "api/e/%d/front.svg" % e):
                timed(url, r)
        with Browser() as b:
            b.goto(url + "#/")
            b.wait_for("document.body.dataset.loaded")
            for e in range(len(stores)):
                b.goto("about:blank")
                t0 = time.monotonic()
                b.goto(url + "#/e/%d/front" % e)
                b.wait_for("document.querySelectorAll('#front tr[data-trial]').length > 0 && "
                           "document.querySelector('#chart svg a.front')", timeout=60)
                print(f"{'page #/e/%d/front (first render in Chromium)' % e:70s} "
                      f"{(time.monotonic() - t0) * 1000:6.0f}ms")
    finally:
        p.terminate()
        p.wait()


def ingest(tmp, with_dashboard):
    name = "flood_dash" if with_dashboard else "flood"
    d = os.path.join(tmp, name)
    stop = threading.Event()
    asked = [0]
    poller = None
    server = None
    if with_dashboard:
        # The dashboard serves every experiment under ./runs, so it sees this one appear.
        os.makedirs(os.path.join(tmp, "runs"), exist_ok=True)
        d = os.path.join(tmp, "runs", name)
        server, url = serve([])

        def poll():
            while not stop.is_set():
                for r in ROUTES:
                    try:
                        fetch(url + r.replace("5000", "0"))
                        asked[0] += 1
                    except Exception:
                        pass
                time.sleep(0.1)
        poller = threading.Thread(target=poll)
        poller.start()
    body = f"""name: {name}
command: [{FLOOD}, "1000000"]
metric: {{name: acc, mode: max}}
search: {{algorithm: random, trials: 1, seed: 1}}
"""
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(body)
    t0 = time.monotonic()
    subprocess.run([BIN, "run", path, "--dir", d, "--quiet"], cwd=tmp)
    wall = time.monotonic() - t0
    stop.set()
    if poller:
        poller.join()
        server.terminate()
        server.wait()
    import sqlite3
    db = sqlite3.connect(f"file:{d}/tunepack.db?mode=ro", uri=True)
    rows = db.execute("select count(*) from metrics").fetchone()[0]
    start, end = db.execute("select started_at, ended_at from trials").fetchone()
    print(f"ingest {'with dashboard polled' if with_dashboard else 'alone':22s}: {rows} rows in "
          f"{end - start:.2f} s = {rows / (end - start):,.0f} lines/s (whole run {wall:.2f} s)"
          + (f"; {asked[0]} dashboard answers meanwhile" if with_dashboard else ""))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        print(f"tunepack dashboard benchmark ({BIN})")
        if "--table" in sys.argv:
            return table(tmp)
        if "--front" in sys.argv:
            return front(tmp)
        scale(tmp)
        for with_dashboard in (False, True, False, True):
            ingest(tmp, with_dashboard)
            subprocess.run(["rm", "-rf", os.path.join(tmp, "flood"), os.path.join(tmp, "runs")])


if __name__ == "__main__":
    main()
