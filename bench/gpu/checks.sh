#!/bin/bash
# The GPU checks (docs/gpu-checks.md): what tunepack's GPU path does on a real NVIDIA GPU.
#
#   bash bench/gpu/checks.sh OUTDIR [SECONDS]
#
# Run from the repository root on a machine with an NVIDIA GPU, its driver, and a python3
# that holds PyTorch and torchvision (timm and nvidia-ml-py when present). tunepack is the
# first of: .gpu/bin/tunepack (bench/gpu/bundle.sh makes it on a Debian machine: the binary
# and its libraries, for a machine without Debian's packages), build/tunepack, tunepack on
# PATH. Sections, in order of value; each one is cut off by its own limit and by what is left
# of SECONDS (default 450) in all, so a slow one never takes the rest with it:
#   env       the driver's and the GPU's own words (nvidia-smi), versions, MPS control
#   nvml      `tunepack gpus` (text and JSON) before and while a PyTorch process holds 3 GiB,
#             beside nvidia-smi's view of the same
#   mps       bench/gpu/mps_check.py: MPS memory limit and thread percentage semantics
#   oom       bench/gpu/oom.yaml through `tunepack run`: a trial over its MPS memory limit
#   profile   bench/gpu/vision.py profile: six models x batch 64..512 alone
#   packing   bench/gpu/packing.yaml through `tunepack run`, wfd against one-per-gpu
#   fluid     bench/gpu/fluid.yaml through `tunepack run`, Fluid dynamic shares against plain
#   fusion    bench/fuse/throughput.py --device cuda: K fused against K processes
#   colocate  bench/gpu/colocate.py: k = 1, 2, 4, 8 on one GPU, time-sliced and under MPS
#             (the jobs: CHECKS_COLOCATE_JOBS, default resnet18:128,mobilenet:64)
# Everything goes to OUTDIR/log.txt (and stdout); the measurements also to OUTDIR/*.jsonl,
# and the runs' directories to OUTDIR/runs.tgz. CHECKS_ONLY="packing fusion" runs only the
# sections named; CHECKS_CAP_<section>=SECONDS gives one another limit.
set -u
out=${1:?usage: checks.sh OUTDIR [SECONDS]}
total=${2:-450}
mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1
t0=$(date +%s)
root=$(pwd)
export PYTHONUNBUFFERED=1
runs=runs/gpu-checks
mkdir -p "$runs"

python3 -c 'import sklearn' 2>/dev/null ||  # the fusion workload's data (bench/gpu/bundle.sh)
    export PYTHONPATH=$root/.gpu/py${PYTHONPATH:+:$PYTHONPATH}
export PATH=$PATH:/usr/local/nvidia/bin  # where some images keep nvidia-smi and MPS control
if [ -x .gpu/bin/tunepack ]; then tp=$root/.gpu/bin/tunepack
elif [ -x build/tunepack ]; then tp=$root/build/tunepack
else tp=$(command -v tunepack || echo tunepack); fi

# NVML outside the loader's cache (a driver mounted at /usr/local/nvidia): say so, name it
if ! "$tp" gpus --json 2>/dev/null | grep -q '"nvml":"ok"'; then
    for lib in /usr/local/nvidia/lib64/libnvidia-ml.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1; do
        if [ -e "$lib" ]; then
            echo "tunepack gpus found no NVML; TUNEPACK_NVML_LIB=$lib from here on"
            export TUNEPACK_NVML_LIB=$lib
            break
        fi
    done
fi

# Quit MPS daemons that a cut-off section left behind (mps_check.py's, colocate.py's).
quit_stray_mps() {
    for pipe in /tmp/mps.*/pipe /tmp/colocate.*/*/pipe; do
        [ -p "$pipe/control" ] || continue
        echo quit | CUDA_MPS_PIPE_DIRECTORY=$pipe timeout 10 nvidia-cuda-mps-control
        echo "quit a stray MPS daemon at $pipe"
    done
}

# section NAME CAP COMMAND...: run COMMAND for at most CAP seconds and what is left of the
# total (less 15 s kept for packing up); skipped when under 10 s would be left.
section() {
    local name=$1 cap=$2; shift 2
    eval "cap=\${CHECKS_CAP_$name:-\$cap}"  # CHECKS_CAP_fusion=300: another limit
    case " ${CHECKS_ONLY:-$name} " in *" $name "*) ;; *) return ;; esac
    local left=$((total - ($(date +%s) - t0) - 15))
    [ "$cap" -lt "$left" ] || cap=$left
    echo
    echo "=== $name (limit ${cap}s, at +$(($(date +%s) - t0))s) ==="
    if [ "$cap" -lt 10 ]; then echo "skipped: no time left"; return; fi
    local s
    s=$(date +%s.%N)
    timeout -k 5 "$cap" bash -c '"$@"' section "$@"  # bash -c: functions too (exported)
    local rc=$?
    quit_stray_mps
    echo "=== $name: exit $rc after $(awk "BEGIN{print $(date +%s.%N) - $s}")s ==="
}

env_section() {
    date -u
    nvidia-smi
    nvidia-smi -L
    nvidia-smi -q | head -80
    nvidia-smi --format=csv --query-gpu=index,name,uuid,memory.total,memory.used,\
utilization.gpu,compute_mode,driver_version
    uname -a; head -3 /etc/os-release; ldd --version | head -1; nproc
    python3 -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision",
        torchvision.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
    python3 -c 'import timm; print("timm", timm.__version__)' || true
    python3 -c 'import pynvml; print("nvidia-ml-py present")' || true
    echo "tunepack: $tp"; ldd "$tp" | grep -i "not found" || echo "every library found"
    command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin 2>/dev/null
    ldconfig -p | grep -i nvidia-ml || true
}

nvml_section() {
    "$tp" gpus; "$tp" gpus --json
    python3 -c 'import torch, time
x = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
print("holding 3 GiB", flush=True)
time.sleep(12)' &
    local holder=$!
    sleep 8
    echo "--- while a PyTorch process (pid $holder) holds 3 GiB:"
    "$tp" gpus; "$tp" gpus --json
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
    nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv
    wait $holder
}

run_exp() { # run_exp NAME YAML: tunepack run it, with `tunepack gpus DIR` part way
    local dir=$runs/$1
    local s
    s=$(date +%s.%N)
    rm -rf "$dir"
    "$tp" run --plain --dir "$dir" "$2" &
    local pid=$!
    sleep 10
    echo "--- tunepack gpus $dir (at 10 s):"; "$tp" gpus "$dir"
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
    wait $pid
    echo "$1: tunepack run exit $?, wall $(awk "BEGIN{print $(date +%s.%N) - $s}")s"
    "$tp" trials "$dir" | head -20
}

packing_section() {
    for policy in wfd one-per-gpu; do
        sed "s/POLICY/$policy/" bench/gpu/packing.yaml > "$runs/$policy.yaml"
        run_exp "$policy" "$runs/$policy.yaml"
    done
    store_dump "$runs/wfd" | grep -v "^events" | head -40
}

store_dump() { # store_dump DIR: the journal's events, placements and profiles
    python3 - "$1/tunepack.db" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for table in ("events", "placements", "profiles"):
    for row in c.execute("SELECT * FROM %s" % table):
        print(table, row)
EOF
}

fluid_section() { # bench/gpu/fluid.yaml: Fluid dynamic shares against plain packing
    sed 's/^GROUPS$/groups: {shares: dynamic, min: 0.25, max: 1}/' bench/gpu/fluid.yaml \
        > "$runs/fluid.yaml"
    sed 's/^GROUPS$//' bench/gpu/fluid.yaml > "$runs/fluid-plain.yaml"
    run_exp fluid "$runs/fluid.yaml"
    run_exp fluid-plain "$runs/fluid-plain.yaml"
    store_dump "$runs/fluid" | grep -E "^placements|fluid-share|resize" | cut -c1-400 | head -60
}

oom_section() {
    run_exp oom bench/gpu/oom.yaml
    store_dump "$runs/oom"
    grep -ril "out of memory" "$runs/oom" | head -5
}

export tp runs root
export -f env_section nvml_section run_exp store_dump oom_section packing_section fluid_section
section env 60 env_section
section nvml 45 nvml_section
section mps 90 python3 bench/gpu/mps_check.py --out "$out/mps.jsonl"
section oom 90 oom_section
rm_profile() { rm -f "$runs/profile.jsonl"; python3 bench/gpu/vision.py profile "$@"; }
export -f rm_profile
section profile 110 rm_profile --seconds 1.5 --warmup 0.5 --out "$runs/profile.jsonl"
cp "$runs/profile.jsonl" "$out/profile.jsonl" 2>/dev/null
section packing 170 packing_section
section fluid 200 fluid_section
section fusion 120 python3 bench/fuse/throughput.py --device cuda --python python3 \
    --epochs "${CHECKS_FUSION_EPOCHS:-8}" --hidden 256
section colocate 150 python3 bench/gpu/colocate.py --ks 1,2,4,8 --modes timeslice,mps --seconds 2 \
    --jobs "${CHECKS_COLOCATE_JOBS:-resnet18:128,mobilenet:64}" --out "$out/colocate.jsonl"
echo
echo "=== done at +$(($(date +%s) - t0))s"
tar czf "$out/runs.tgz" "$runs" 2>/dev/null
ls -la "$out"
