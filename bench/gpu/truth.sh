#!/bin/bash
# The GPU truth table (issue 31; docs/gpu-checks.md "The truth table"): on whatever NVIDIA GPU
# is here, in at most 8 minutes, what packing and fusion gain on a mixed workload nobody tuned
# tunepack for.
#
#   bash bench/gpu/truth.sh OUTDIR [SECONDS]     (default 450; TRUTH_ONLY="default fusion")
#
# Needs what bench/gpu/checks.sh needs (a python3 with PyTorch; tunepack from .gpu/, made by
# bench/gpu/bundle.sh, or build/). Sections, each cut off by its own limit and what is left:
#   env       GPU, driver, PyTorch, commit
#   alone     bench/gpu/colocate.py: each model alone and TRUTH_K copies side by side under MPS,
#             uncapped (the steps an epoch is, and the bound's aggregate throughput)
#   serial    the six trials one at a time, outside tunepack, uncapped (their times alone)
#   onepergpu bench/gpu/truth.yaml through `tunepack run`, placement one-per-gpu
#   default   the same with tunepack's defaults, profile_time 3 s
#   profile30 one trial per model, long enough to be profiled for 30 s: the demand a 30 s
#             profile measures, against the 3 s profile of `default`
#   fusion    bench/fuse/throughput.py on the GPU, 150 epochs: fused K = 1, 2, 4, 8 (horizontal)
#             against 8 separate processes
# then bench/gpu/truth_table.py writes OUTDIR/truth.md (the table) from what they left.
set -u
out=${1:?usage: truth.sh OUTDIR [SECONDS]}
total=${2:-450}
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec > >(tee -a "$out/log.txt") 2>&1
t0=$(date +%s)
root=$(pwd)
export PYTHONUNBUFFERED=1 TRUTH_EPOCHS=${TRUTH_EPOCHS:-6} TRUTH_K=${TRUTH_K:-6}
runs=$out/runs
mkdir -p "$runs"
python3 -c 'import sklearn' 2>/dev/null ||  # the fusion workload's data (bench/gpu/bundle.sh)
    export PYTHONPATH=$root/.gpu/py${PYTHONPATH:+:$PYTHONPATH}
export PATH=$PATH:/usr/local/nvidia/bin
if [ -x .gpu/bin/tunepack ]; then tp=$root/.gpu/bin/tunepack
elif [ -x build/tunepack ]; then tp=$root/build/tunepack
else tp=$(command -v tunepack || echo tunepack); fi
if ! "$tp" gpus --json 2>/dev/null | grep -q '"nvml":"ok"'; then
    for lib in /usr/local/nvidia/lib64/libnvidia-ml.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1; do
        [ -e "$lib" ] && { export TUNEPACK_NVML_LIB=$lib; break; }
    done
fi

section() { # section NAME CAP COMMAND...
    local name=$1 cap=$2; shift 2
    case " ${TRUTH_ONLY:-$name} " in *" $name "*) ;; *) return ;; esac
    local left=$((total - ($(date +%s) - t0) - 10))
    [ "$cap" -lt "$left" ] || cap=$left
    echo; echo "=== $name (limit ${cap}s, at +$(($(date +%s) - t0))s) ==="
    if [ "$cap" -lt 10 ]; then echo "skipped: no time left"; return; fi
    local s; s=$(date +%s.%N)
    timeout -k 5 "$cap" bash -c '"$@"' section "$@"
    echo "=== $name: exit $? after $(awk "BEGIN{print $(date +%s.%N) - $s}")s ==="
    echo "$name $(awk "BEGIN{print $(date +%s.%N) - $s}")" >> "$out/sections.txt"
}

env_section() {
    nvidia-smi --format=csv --query-gpu=name,driver_version,memory.total,compute_mode |
        tee "$out/gpu.csv"
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' |
        tee "$out/torch.txt"
    { cat "$root/.gpu/commit" 2>/dev/null || git -C "$root" rev-parse --short HEAD; } |
        tee "$out/commit.txt"
}

steps_file() { # the steps each model trained in one second alone (vision.py's --steps-from)
    python3 - "$out/colocate.jsonl" "$out/steps.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
with open(sys.argv[2], "w") as f:
    for r in rows:
        if r["k"] == 1 and not r.get("caps"):
            f.write(json.dumps({"model": r["model"], "batch": r["batch"], "seconds": 1.0,
                                "steps": r["samples_per_s"] / r["batch"]}) + "\n")
PY
}

serial_section() { # each trial alone, outside tunepack, one after another
    local m lr s
    for m in mlp convnet tinyformer; do
        for lr in 0.01 0.05; do
            s=$(date +%s.%N)
            python3 bench/gpu/vision.py trial --model $m --batch 128 --lr $lr \
                --epochs "$TRUTH_EPOCHS" --steps-from "$out/steps.jsonl" --epoch-s 1.0 >/dev/null
            echo "{\"model\": \"$m\", \"lr\": $lr, \"rc\": $?, \"wall_s\": $(awk "BEGIN{print $(date +%s.%N) - $s}")}" |
                tee -a "$out/serial.jsonl"
        done
    done
}

run_exp() { # run_exp NAME POLICY PROFILE EPOCHS LRS
    local dir=$runs/$1 s
    sed -e "s|^POLICY$|$2|" -e "s|PROFILE|$3|" -e "s|EPOCHS|$4|g" -e "s|LRS|$5|" \
        -e "s|STEPS|$out/steps.jsonl|" bench/gpu/truth.yaml > "$runs/$1.yaml"
    rm -rf "$dir"
    s=$(date +%s.%N)
    "$tp" run --plain --dir "$dir" "$runs/$1.yaml" > "$runs/$1.out" 2>&1
    local rc=$?
    echo "{\"run\": \"$1\", \"rc\": $rc, \"wall_s\": $(awk "BEGIN{print $(date +%s.%N) - $s}")}" |
        tee -a "$out/runs.jsonl"
    tail -5 "$runs/$1.out"
    "$tp" trials "$dir" | head -12
}

fusion_section() { # K = 1, 2, 4, 8 fused (horizontal), and K = 8 as separate processes
    python3 bench/fuse/throughput.py --device cuda --python python3 --json --hidden 256 \
        --epochs "${TRUTH_FUSION_EPOCHS:-150}" --ks 1,2,4,8 --mode horizontal |
        tee -a "$out/fusion.jsonl"
    python3 bench/fuse/throughput.py --device cuda --python python3 --json --hidden 256 \
        --epochs "${TRUTH_FUSION_EPOCHS:-150}" --ks 8 --mode separate | tee -a "$out/fusion.jsonl"
}

export tp runs root out
export -f env_section steps_file serial_section run_exp fusion_section
section env 30 env_section
section alone 70 python3 bench/gpu/colocate.py --jobs mlp:128,convnet:128,tinyformer:128 \
    --ks "1,$TRUTH_K" --modes mps --seconds "${TRUTH_WINDOW:-2}" --out "$out/colocate.jsonl"
steps_file
section default 60 run_exp default "" 3s "$TRUTH_EPOCHS" "[0.01, 0.05]"
section serial 90 serial_section
section onepergpu 90 run_exp onepergpu "placement: {policy: one-per-gpu}" 3s "$TRUTH_EPOCHS" "[0.01, 0.05]"
section profile30 60 run_exp profile30 "" 30s 34 "[0.01]"
section fusion 110 fusion_section
echo; echo "=== done at +$(($(date +%s) - t0))s"
python3 bench/gpu/truth_table.py "$out" | tee "$out/truth.md"
tar czf "$out/runs.tgz" -C "$out" runs 2>/dev/null
