# bash completion for vdnn-train, vdnn-plan, vdnn-bench, vdnn-predict
# and vdnn-loader-bench:
# flags, the words of flags such as --policy, file names, and the positional
# NET.yaml as a net name (the tool's --list-nets: the *.yaml files of the
# current directory and the installed nets) or a *.yaml file. meson installs
# it into bash-completion's directory once per tool name (completion/meson.build).

# ---- common: the same lines in vdnn.bash and _vdnn (tests/util/check-completion) ----
# Each tool's flags; one that takes a value ends in '='. The check fails when
# a tool accepts a flag missing here, or this lists one it does not accept.
_vdnn_flags() {
    case ${1##*/} in
    vdnn-train) echo '--analytic-profile --augment --backend= --batch= --budget= --chunks=
        --conv-api= --conv-debug= --conv-rtc --conv-split= --conv-topk= --conv-tune= --data=
        --betas= --deterministic --device= --early-stop= --epochs= --eps= --eval-every=
        --freeze= --gpus= --graph= --help
        --init= --init-skip= --iters= --keep= --list-nets --loader-threads= --log-every= --lr= --math=
        --mem-trace --metrics= --momentum= --mpi --nesterov --no-fuse --no-stage-input --optimizer=
        --plan-json= --poison
        --policy= --prefetch= --profile= --profile-out= --quiet --resume= --save=
        --save-best --save-dtype= --save-every= --seed= --step-times --step-times-out= --stop-at=
        --sync-debug --val-split= --version --wd= --weight-decay=' ;;
    vdnn-plan) echo '--analytic-profile --backend= --batch= --budget= --chunks= --conv-api=
        --conv-debug= --conv-rtc --conv-split= --conv-topk= --conv-tune= --deterministic
        --device= --format= --freeze= --gpu-model= --gpus= --graph= --help --list-gpu-models --list-nets
        --math= --min-budget --no-fuse --no-stage-input --optimizer= --policy= --prefetch= --profile=
        --profile-out= --quiet --save-profile= --summary --sync-debug --trace= --version' ;;
    vdnn-bench) echo '--analytic-profile --backend= --batch= --budgets= --chunks=
        --conv-api= --conv-debug= --conv-rtc --conv-split= --conv-topk= --conv-tune= --csv=
        --deterministic --device= --freeze= --graph= --help --iters= --json= --list-nets --math=
        --no-fuse --no-stage-input --optimizer= --plot= --policies= --prefetch= --profile=
        --profile-out= --quiet --rounds=
        --seed= --steps= --sync-debug --version --warmup=' ;;
    vdnn-predict) echo '--analytic-profile --backend= --batch= --budget= --conv-api=
        --conv-debug= --conv-rtc --conv-split= --conv-topk= --conv-tune= --data=
        --deterministic --device= --format= --help --init= --labels= --list-nets
        --loader-threads= --math= --no-fuse --profile= --profile-out= --quiet --sync-debug
        --top-k= --version' ;;
    vdnn-loader-bench) echo '--augment --batch= --batches= --bf16 --count= --data= --fp16
        --help --jpeg= --list-nets --make-folder= --quality= --seed= --size= --threads=' ;;
    esac
}
# The words flag $1's value is one of in tool $2 (nothing: any value).
# --policies takes a comma-separated list of them.
_vdnn_values() {
    case $1 in
    --policy|--policies) echo 'none all conv dyn auto' ;;
    --backend) echo 'cpu cuda auto' ;;
    --optimizer) echo 'sgd adamw' ;;
    --math) echo 'fp32 tf32 bf16 fp16' ;;
    --save-dtype) echo 'f32 bf16' ;;
    --prefetch) echo 'auto paper' ;;
    --conv-tune) echo 'on off retime' ;;
    --conv-api) echo 'auto graph legacy' ;;
    --conv-split) echo 'auto off force' ;;
    --graph) echo 'auto on off' ;;
    --format) case ${2##*/} in vdnn-predict) echo 'table jsonl' ;; *) echo 'table json' ;; esac ;;
    --jpeg) echo 'turbo turbo-full stb' ;;
    esac
}
# Does the flag's value name a file (or, --make-folder, a directory)?
_vdnn_takes_file() {
    case $1 in
    --save|--resume|--init|--labels|--profile|--profile-out|--save-profile|--metrics|--plan-json|--step-times-out|\
    --trace|--csv|--json|--plot|--make-folder) return 0 ;;
    esac
    return 1
}
# ---- end common ----

_vdnn() {
    local cmd=$1 cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]} w
    local flags=" $(echo $(_vdnn_flags "$cmd")) "   # one line, single spaces
    COMPREPLY=()
    if [[ $prev == --* && $flags == *" $prev= "* ]]; then
        if _vdnn_takes_file "$prev"; then
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$cur"))
        elif [[ $prev == --policies ]]; then   # a list: complete its last item
            COMPREPLY=($(compgen -P "${cur%"${cur##*,}"}" -W "$(_vdnn_values "$prev" "$cmd")" -- "${cur##*,}"))
        else
            COMPREPLY=($(compgen -W "$(_vdnn_values "$prev" "$cmd")" -- "$cur"))
        fi
        return 0
    fi
    if [[ $cur == -* ]]; then
        for w in $flags; do
            [[ ${w%=} == "$cur"* ]] && COMPREPLY+=("${w%=}")
        done
        return 0
    fi
    # NET.yaml: a net's name, a *.yaml file or a directory on the way to one
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -W "$("$cmd" --list-nets 2>/dev/null | cut -f1)" -- "$cur")
               $(compgen -f -X '!*.yaml' -- "$cur") $(compgen -d -- "$cur"))
    return 0
}
complete -F _vdnn vdnn-train vdnn-plan vdnn-bench vdnn-predict vdnn-loader-bench
