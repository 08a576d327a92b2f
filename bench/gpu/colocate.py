#!/usr/bin/env python3
"""k trials of one model on one GPU at once, by time-slicing and by MPS: aggregate throughput.

    colocate.py --jobs resnet18:128,mobilenet:64 --ks 1,2,4,8 --modes timeslice,mps
                --seconds 3 --out C.jsonl

For each job (model:batch), mode and k, it starts k `vision.py worker` processes on GPU 0,
waits until every one has built and warmed up, then lets all of them train for the same
--seconds window and adds up the samples they trained. In mode `mps` it starts its own MPS
control daemon first (pipe and log directories under a temporary directory; the
nvidia-cuda-mps-control on PATH, else TUNEPACK_MPS_CONTROL) and quits it at the end; workers
get CUDA_MPS_PIPE_DIRECTORY and no thread percentage (each may use the whole GPU). Each row
(printed and appended to --out as JSON) gives the aggregate samples/s, the ratio to k times
the k = 1 time-sliced figure of the same job (what k separate GPUs would do: 1.0 means
sharing one GPU loses nothing against k GPUs; 1/k means no gain over running them one after
another), NVML's GPU busy % over the window, and NVML's per-process SM % of each worker
(per_trial_sm_pct) and of any other process (other_pids_sm_pct: under MPS, the server):
whether a trial's compute share can be measured while it shares the GPU. With --tunepack,
also what `tunepack gpus --json` lists for each worker (MiB, SM %) halfway through the window.

--caps (MPS only) repeats each MPS row for each policy of CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:
`none` (no limit), `share` (100/k each: a Fluid share of 1/k as tunepack capped it before
6cbbb33), a number N (N% each) or a list a/b/... (worker i gets the i-th; its length is k).
The row's `caps` says which limits the workers had: whether a cap is binding when the worker
is alone (k = 1 at 25%), and how trials capped at their shares compare with uncapped ones
sharing the GPU.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from vision import Busy  # noqa: E402


def mps_control():
    return os.environ.get("TUNEPACK_MPS_CONTROL") or shutil.which("nvidia-cuda-mps-control")


def start_mps(tmp):
    """Start an MPS control daemon; returns its environment, or None (with the reason
    printed) when it cannot run."""
    ctl = mps_control()
    if not ctl:
        print("colocate: no nvidia-cuda-mps-control on PATH: no MPS rows", flush=True)
        return None
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=os.path.join(tmp, "pipe"),
               CUDA_MPS_LOG_DIRECTORY=os.path.join(tmp, "log"))
    os.makedirs(env["CUDA_MPS_PIPE_DIRECTORY"])
    os.makedirs(env["CUDA_MPS_LOG_DIRECTORY"])
    r = subprocess.run([ctl, "-d"], env=env, capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        print("colocate: %s -d failed (%d): %s%s" % (ctl, r.returncode, r.stdout, r.stderr),
              flush=True)
        return None
    for _ in range(100):
        if os.path.exists(os.path.join(env["CUDA_MPS_PIPE_DIRECTORY"], "control")):
            return env
        time.sleep(0.05)
    print("colocate: MPS daemon made no control pipe in 5 s", flush=True)
    return env


def stop_mps(env):
    ctl = mps_control()
    try:
        subprocess.run([ctl], input="quit\n", env=env, text=True, timeout=20,
                       capture_output=True)
    except subprocess.TimeoutExpired:
        print("colocate: MPS daemon did not quit in 20 s", flush=True)
    log = os.path.join(env["CUDA_MPS_LOG_DIRECTORY"], "control.log")
    if os.path.exists(log):
        with open(log) as f:
            tail = f.read().splitlines()[-8:]
        print("colocate: MPS control.log ends:\n  " + "\n  ".join(tail), flush=True)


def caps_of(policy, k):
    """The thread percentages of k workers under a --caps policy: a list of k ints, or None
    (no limit); ValueError when a list's length is not k."""
    if policy == "none":
        return None
    if policy == "share":
        return [-(-100 // k)] * k
    caps = [int(c) for c in policy.split("/")]
    if len(caps) == 1:
        return caps * k
    if len(caps) != k:
        raise ValueError("caps %s: %d values for k = %d" % (policy, len(caps), k))
    return caps


def one(model, batch, k, env, args, tmp, caps=None):
    """k workers side by side (worker i capped at caps[i]% of the GPU's threads under MPS);
    (aggregate samples/s, busy %, per-worker samples/s, per-worker NVML SM %, {other pid: SM
    %}, what `tunepack gpus` lists or None)."""
    d = tempfile.mkdtemp(dir=tmp)
    go = os.path.join(d, "go")
    procs = []
    for i in range(k):
        cmd = [sys.executable, os.path.join(HERE, "vision.py"), "worker", "--model", model,
               "--batch", str(batch), "--seconds", str(args.seconds),
               "--ready", os.path.join(d, "ready%d" % i), "--go", go,
               "--out", os.path.join(d, "out%d" % i)]
        wenv = env if caps is None else dict(env, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=str(caps[i]))
        procs.append(subprocess.Popen(cmd, env=wenv, stderr=subprocess.PIPE, text=True))
    deadline = time.time() + args.wait
    while not all(os.path.exists(os.path.join(d, "ready%d" % i)) for i in range(k)):
        dead = [p for p in procs if p.poll() is not None]
        if dead or time.time() > deadline:
            for p in procs:
                p.kill()
            err = dead[0].stderr.read() if dead else "timeout"
            raise RuntimeError("workers did not get ready: %s" % err[-2000:])
        time.sleep(0.05)
    start = time.time() + 0.3
    with open(go + ".tmp", "w") as f:
        f.write(repr(start))
    os.replace(go + ".tmp", go)
    busy = Busy()
    time.sleep(0.3)
    seen = None
    with busy:
        if args.tunepack:  # what tunepack's NVML code sees of the workers, mid-window
            time.sleep(args.seconds / 2)
            seen = tunepack_view(args.tunepack, [p.pid for p in procs])
            time.sleep(max(0.0, start + args.seconds - time.time()))
        else:
            time.sleep(args.seconds)
    rates = []
    for i, p in enumerate(procs):
        err = p.communicate(timeout=args.wait)[1]
        if p.returncode != 0:
            raise RuntimeError("worker %d failed: %s" % (i, err[-2000:]))
        with open(os.path.join(d, "out%d" % i)) as f:
            r = json.load(f)
        rates.append(r["samples"] / r["seconds"])
    procs_sm = busy.per_process() if busy.nvml else {}
    sm = [procs_sm.pop(p.pid, None) for p in procs]
    return sum(rates), busy.mean(), rates, sm, procs_sm, seen


def tunepack_view(tp, pids):
    """`tunepack gpus --json`'s processes on GPU 0: per worker (in order) its [MiB, SM %] or
    None when not listed, and {pid: [MiB, SM %]} of the others (the MPS server)."""
    try:
        r = subprocess.run([tp, "gpus", "--json"], capture_output=True, text=True, timeout=20)
        listed = {p["pid"]: [p["used_mib"], p["sm_util"]]
                  for p in json.loads(r.stdout)["gpus"][0]["processes"]}
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, IndexError) as e:
        return {"error": str(e)}
    return {"workers": [listed.pop(pid, None) for pid in pids], "others": listed}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="resnet18:128")
    ap.add_argument("--ks", default="1,2,4,8")
    ap.add_argument("--modes", default="timeslice,mps")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--wait", type=float, default=120.0)
    ap.add_argument("--caps", default="none",
                    help="MPS thread-percentage policies, comma-separated: none, share, N, a/b/...")
    ap.add_argument("--out")
    ap.add_argument("--tunepack", help="a tunepack binary: record what `tunepack gpus --json` "
                    "lists on GPU 0 mid-window (tunepack_gpus)")
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    tmp = tempfile.mkdtemp(prefix="colocate.")
    out = open(args.out, "a") if args.out else None
    alone = {}
    for job in args.jobs.split(","):  # job by job: a cut-off run still has whole jobs
        model, batch = job.split(":")
        for mode in args.modes.split(","):
            env = dict(os.environ)
            if mode == "mps":
                env = start_mps(tempfile.mkdtemp(dir=tmp))
                if env is None:
                    continue
            policies = args.caps.split(",") if mode == "mps" else ["none"]
            runs = [(k, p) for p in policies for k in ks]
            try:
                for k, policy in runs:
                    try:
                        caps = caps_of(policy, k)
                        if policy != "none" and caps is not None and k == 1 and caps[0] >= 100:
                            continue  # the same as no limit
                        agg, busy, rates, sm, others, seen = one(model, int(batch), k, env,
                                                                 args, tmp, caps)
                    except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
                        print("colocate: %s %s k=%d caps %s: %s" % (job, mode, k, policy, e),
                              flush=True)
                        continue
                    if mode == "timeslice" and k == 1:
                        alone[job] = agg
                    if mode == "mps" and k == 1 and caps is None:
                        alone.setdefault(job, agg)
                    row = {"model": model, "batch": int(batch), "mode": mode, "k": k,
                           "caps": caps,
                           "samples_per_s": round(agg, 1),
                           "per_trial": [round(r, 1) for r in rates],
                           "vs_k_gpus": round(agg / (k * alone[job]), 3) if job in alone
                           else None,
                           "busy_pct": None if busy is None else round(busy, 1),
                           "per_trial_sm_pct": sm, "other_pids_sm_pct": others}
                    if seen is not None:
                        row["tunepack_gpus"] = seen
                    print(json.dumps(row), flush=True)
                    if out:
                        out.write(json.dumps(row) + "\n")
                        out.flush()
            finally:
                if mode == "mps":
                    stop_mps(env)

if __name__ == "__main__":
    main()
