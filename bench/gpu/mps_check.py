#!/usr/bin/env python3
"""How MPS's per-client limits behave on the driver at hand (GPU 0).

    mps_check.py [--out FILE.jsonl]

Starts an MPS control daemon as tunepack's agent does (pipe and log directories of its own),
then runs short PyTorch clients under different environments and prints, for each, what it
saw: whether a 512 MiB allocation and then a 2048 MiB one succeeded under
CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=<index>=1024M, the OOM message PyTorch gave (what tunepack's
OOM detector has to match), and the multiprocessor count the client sees under
CUDA_MPS_ACTIVE_THREAD_PERCENTAGE. The cases answer which device index the memory limit
takes when CUDA_VISIBLE_DEVICES names the GPU by UUID, with the daemon started without and
with CUDA_VISIBLE_DEVICES. Prints why when MPS cannot start.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from colocate import start_mps, stop_mps  # noqa: E402

CLIENT = r"""
import json, sys, torch
r = {"sms": torch.cuda.get_device_properties(0).multi_processor_count}
held = []
for mib in (512, 2048):
    try:
        held.append(torch.empty(mib * 2**20, dtype=torch.uint8, device="cuda"))
        torch.cuda.synchronize()
        r["alloc_%d" % mib] = "ok"
    except Exception as e:
        r["alloc_%d" % mib] = "failed"
        r["error"] = str(e).splitlines()[0][:300]
        break
print(json.dumps(r))
"""


def uuid0():
    """GPU 0's UUID, from nvidia-smi."""
    return subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader", "-i", "0"],
                          capture_output=True, text=True, check=True).stdout.strip()


def client(env, extra):
    e = dict(env)
    for name in ("CUDA_VISIBLE_DEVICES", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
                 "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"):
        e.pop(name, None)
    e.update(extra)
    p = subprocess.run([sys.executable, "-c", CLIENT], env=e, capture_output=True, text=True,
                       timeout=90)
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        return {"exit": p.returncode, "stderr": p.stderr.strip().splitlines()[-3:]}
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--uuid", help="GPU 0's UUID (default: asked of nvidia-smi)")
    args = ap.parse_args()
    out = open(args.out, "a") if args.out else None
    uuid = args.uuid or uuid0()
    print("GPU 0 UUID %s" % uuid, flush=True)
    cases = [
        ("daemon plain", {}, "no variables (the baseline: whole GPU)", {}),
        ("daemon plain", {}, "UUID, limit 0=1024M (tunepack's way)",
         {"CUDA_VISIBLE_DEVICES": uuid, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=1024M"}),
        ("daemon plain", {}, "no CUDA_VISIBLE_DEVICES, limit 0=1024M",
         {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=1024M"}),
        ("daemon plain", {}, "UUID, limit 1=1024M (a wrong index)",
         {"CUDA_VISIBLE_DEVICES": uuid, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "1=1024M"}),
        ("daemon plain", {}, "UUID, thread percentage 25",
         {"CUDA_VISIBLE_DEVICES": uuid, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25"}),
        ("daemon UUID", {"CUDA_VISIBLE_DEVICES": uuid}, "UUID, limit 0=1024M",
         {"CUDA_VISIBLE_DEVICES": uuid, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=1024M"}),
        ("daemon UUID", {"CUDA_VISIBLE_DEVICES": uuid}, "index 0, limit 0=1024M",
         {"CUDA_VISIBLE_DEVICES": "0", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=1024M"}),
    ]
    daemons = {}
    for daemon, denv, what, cenv in cases:
        if daemon not in daemons:
            for other in list(daemons):
                if daemons[other]:
                    stop_mps(daemons[other])
                daemons[other] = None
            saved = {k: os.environ.get(k) for k in denv}
            os.environ.update(denv)
            tmp = tempfile.mkdtemp(prefix="mps.")
            daemons[daemon] = start_mps(tmp)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            if daemons[daemon] is None:
                print("mps_check: MPS cannot run here; nothing to check", flush=True)
                return 1
        env = dict(daemons[daemon])
        for k in denv:  # the daemon's own variables are not the client's
            env.pop(k, None)
        r = client(env, cenv)
        row = {"daemon": daemon, "client": what, "result": r}
        print(json.dumps(row), flush=True)
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()
    for d in daemons.values():
        if d:
            stop_mps(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
