#!/bin/sh
# shellcheck disable=SC1091 # $state/env: written by tests/cluster/slurm.py serve
# local-slurm.sh: try tunepack on a real Slurm cluster of this one machine.
#
#   scripts/local-slurm.sh start [--nodes N] [--cpus N] [--gpus N]
#   scripts/local-slurm.sh run FILE [tunepack run options...]
#   scripts/local-slurm.sh exec COMMAND [ARGS...]
#   scripts/local-slurm.sh status
#   scripts/local-slurm.sh stop
#
# start: munged, slurmctld and one slurmd per node (n1..nN, default 2 nodes of 2 CPUs)
#        from Debian's packages (scripts/install-deps.sh), configured by
#        tests/cluster/slurm.py in a directory of their own; nothing under /etc is read or
#        written. Run as root (slurmd runs as root), e.g. in a container or a VM.
# run:   `salloc -N<all nodes> tunepack run FILE --cluster slurm ...`: one agent per node.
# exec:  any command with the cluster's SLURM_CONF, e.g. sinfo, or `tunepack run FILE`
#        for a file that asks Slurm itself (cluster: {slurm: {nodes: {min: 1, max: 2}}}).
# stop:  cancels every job, stops the daemons and removes the cluster's directory.
#
# The cluster lives in $TUNEPACK_LOCAL_SLURM (default ${TMPDIR:-/tmp}/tunepack-local-slurm);
# tunepack is $TUNEPACK, else build/tunepack of this checkout, else the one on PATH.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
state=${TUNEPACK_LOCAL_SLURM:-${TMPDIR:-/tmp}/tunepack-local-slurm}
harness="$root/tests/cluster/slurm.py"
if [ -n "${TUNEPACK:-}" ]; then
    tunepack=$TUNEPACK
elif [ -x "$root/build/tunepack" ]; then
    tunepack="$root/build/tunepack"
else
    tunepack=tunepack
fi

usage() {
    echo "usage:" >&2
    sed -n '5,9p' "$0" | sed 's/^#  *//' >&2
    exit 2
}

# The cluster's environment, or a message and exit 1 when none runs.
load() {
    if [ ! -f "$state/env" ]; then
        echo "local-slurm: no cluster runs in $state; start one with: $0 start" >&2
        exit 1
    fi
    . "$state/env"
}

start() {
    if [ -f "$state/env" ]; then
        . "$state/env"
        unset SLURM_CONF
        if kill -0 "$LOCAL_SLURM_PID" 2>/dev/null; then
            echo "local-slurm: already up in $state (stop it with: $0 stop)"
            return 0
        fi
        rm -f "$state/env"
    fi
    mkdir -p "$state"
    setsid python3 "$harness" serve --dir "$state" "$@" \
        >"$state/serve.log" 2>&1 </dev/null &
    pid=$!
    # Up once serve writes env (after every node is idle); gone if it failed.
    while [ ! -f "$state/env" ]; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "local-slurm: the cluster did not start:" >&2
            cat "$state/serve.log" >&2
            exit 1
        fi
        sleep 0.2
    done
    cat "$state/serve.log"
    load
    echo "run an experiment on it:  $0 run FILE"
    echo "stop it:                  $0 stop"
}

stop() {
    if [ ! -f "$state/env" ]; then
        python3 "$harness" clean --dir "$state"
        echo "local-slurm: no cluster was running in $state"
        return 0
    fi
    . "$state/env"
    # Not in our children's environment: serve's teardown kills every process whose
    # environment names the cluster.
    unset SLURM_CONF
    kill -TERM "$LOCAL_SLURM_PID" 2>/dev/null || true
    # serve cancels the jobs, stops the daemons and removes the cluster, then exits.
    while kill -0 "$LOCAL_SLURM_PID" 2>/dev/null; do sleep 0.2 || true; done
    python3 "$harness" clean --dir "$state"
    rm -f "$state/env" "$state/serve.log"
    rmdir "$state" 2>/dev/null || true
    echo "local-slurm: stopped"
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
start) start "$@" ;;
run)
    [ $# -ge 1 ] || usage
    load
    file=$1
    shift
    exec salloc -N"$LOCAL_SLURM_NODES" --immediate=60 "$tunepack" run "$file" --cluster slurm "$@"
    ;;
exec)
    [ $# -ge 1 ] || usage
    load
    exec "$@"
    ;;
status)
    load
    sinfo -N
    squeue
    ;;
stop) stop ;;
*) usage ;;
esac
