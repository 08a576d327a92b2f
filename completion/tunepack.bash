# bash completion for tunepack: verbs, each verb's options, files for FILE,
# directories for DIR, and the values of options that take one of a list.
# tests/e2e/test_options.py checks it against the verbs' option tables
# (`tunepack __options`).
# Installed as share/bash-completion/completions/tunepack.

_tunepack_verbs="run status trials best export stop gpus place simulate plan nodes resize dashboard"
_tunepack_policies="vpack one-per-gpu ff ffd bf bfd wf wfd optimal"
# trials --sort: the columns (or a parameter's name)
_tunepack_sort_keys="id value time attempts failures retries promotions rung state where"

# The options of a verb, one table for all of them.
_tunepack_options() {
    case $1 in
        run) echo "--dir --fork --retry-failed --cluster --dashboard --plain --quiet --dry-run --show --help" ;;
        status | gpus) echo "--json --help" ;;
        trials) echo "--json --sort --help" ;;
        best) echo "--json --top --help" ;;
        export) echo "--format --help" ;;
        stop) echo "--no-wait --help" ;;
        nodes) echo "--json --help" ;;
        dashboard) echo "--listen --unix --no-token --every-local-user-may-read --help" ;;
        place) echo "--json --policy --time-limit --node-limit --timings --help" ;;
        simulate) echo "--space --cluster --policy --searcher --trials --seed --overhead" \
                       "--oversubscribe --json --csv --svg --scale-trials --scale-gpus" \
                       "--gpu-type --gpus-per-node --window --rounds --profile --contention" \
                       "--gpus --dir --seeds --unit-time --deadline --node-failures" \
                       "--queue-wait --trial-startup --help" ;;
        plan) echo "--deadline --space --gpu-type --policy --gpus-per-node --cpus-per-node" \
                   "--overhead --max-gpus --profile --json --dir --check --seeds --unit-time" \
                   "--from --node-failures --queue-wait --trial-startup --help" ;;
        agent | resize) echo "--help" ;;
    esac
}

# Files (-f) or directories (-d) matching the word being completed.
_tunepack_paths() {
    local IFS=$'\n'
    COMPREPLY=($(compgen "$1" -- "$2"))
    compopt -o filenames 2>/dev/null # outside a completion (a test), no matter
}

_tunepack() {
    local cur prev verb i
    COMPREPLY=()
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    if ((COMP_CWORD == 1)); then
        COMPREPLY=($(compgen -W "$_tunepack_verbs --help --version" -- "$cur"))
        return 0
    fi
    verb=${COMP_WORDS[1]}

    # the value of an option
    case $prev in
        --policy) COMPREPLY=($(compgen -W "$_tunepack_policies" -- "$cur")); return 0 ;;
        --format) COMPREPLY=($(compgen -W "csv tsv json" -- "$cur")); return 0 ;;
        --sort) COMPREPLY=($(compgen -W "$_tunepack_sort_keys" -- "$cur")); return 0 ;;
        --searcher) COMPREPLY=($(compgen -W "grid random" -- "$cur")); return 0 ;;
        --rounds) COMPREPLY=($(compgen -W "auto full incremental" -- "$cur")); return 0 ;;
        --contention) COMPREPLY=($(compgen -W "served capped" -- "$cur")); return 0 ;;
        --dir | --fork | --check) _tunepack_paths -d "$cur"; return 0 ;;
        --cluster)
            # run: where trials run; simulate and plan: a cluster of the workload file
            [[ $verb == run ]] && COMPREPLY=($(compgen -W "local slurm ssh:" -- "$cur"))
            [[ ${COMPREPLY[0]} == ssh: ]] && compopt -o nospace 2>/dev/null # the hosts follow
            return 0 ;;
        --csv | --svg | --unix) _tunepack_paths -f "$cur"; return 0 ;;
        --space | --gpu-type | --trials | --seed | --overhead | --oversubscribe | --profile | \
            --scale-trials | --scale-gpus | --gpus-per-node | --cpus-per-node | --window | \
            --deadline | --max-gpus | --time-limit | --node-limit | --listen | --show | --top | \
            --gpus | --seeds | --unit-time | --from | --node-failures | --queue-wait | \
            --trial-startup)
            return 0 ;;
    esac

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_tunepack_options "$verb")" -- "$cur"))
        return 0
    fi

    # the positional argument: FILE or DIR
    case $verb in
        run | place | simulate | plan) _tunepack_paths -f "$cur" ;;
        status | trials | best | export | stop | gpus | nodes | resize | dashboard) _tunepack_paths -d "$cur" ;;
    esac
    return 0
}

complete -F _tunepack tunepack
