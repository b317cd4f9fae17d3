#!/usr/bin/env bash
# Session 21, first call: (1) CUDA tests of session 20's two review commits
# (run on no GPU before) and of this session's timing marks inside a captured
# iteration (test_step_times_graph); (2) the profile timing each op queued
# whole behind a spin kernel (time_op): no-offload predictions of the
# captured iteration, bf16 b256, and GoogLeNet beside torch.compile; (3)
# where the time goes at ResNet-152 bf16 10 / 8 GiB and ResNet-50 4 GiB,
# --step-times now timing the replayed iteration.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-a.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s21a}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-560}
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
PY=/opt/torch/.venv/bin/python
left() { echo $(( DEADLINE - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
echo "== tests (at ${SECONDS} s)"
CK_FORK=no timeout 150 "$B/tests/cuda/cuda_test_cuda_ops" > "$O/ops.log" 2>&1
echo "cuda_test_cuda_ops: exit $? ($SECONDS s)"; grep -E 'Checks|:F:|:E:' "$O/ops.log" | tail -4
for t in test_step_times_graph test_graph_vs_eager test_bn_add_fused test_pool_relu_fused test_deterministic_and_offload_invariance; do
    CK_RUN_CASE=$t CK_FORK=no timeout 120 "$B/tests/cuda/cuda_test_cuda_train" > "$O/$t.log" 2>&1
    echo "$t: exit $? ($SECONDS s)"; grep -E 'Checks|:F:|:E:|graph \+ step' "$O/$t.log" | tail -3
done
bench() {   # net budgets policies need
    [ "$(left)" -lt "$4" ] && { echo "== bench $1 $2: skipped"; return; }
    timeout "$4" $B/vdnn-bench nets/$1.yaml --batch 256 --math bf16 --budgets $2 --policies $3 \
        --warmup 4 --iters 8 > "$O/$1-bench.txt" 2>&1
    echo "-- vdnn-bench $1 $2 $3: exit $? (at $SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/$1-bench.txt" | cut -c1-150
}
steps() {   # net budget
    [ "$(left)" -lt 70 ] && { echo "== steps $1 $2: skipped"; return; }
    timeout 70 $B/vdnn-train nets/$1.yaml --batch 256 --math bf16 --budget $2 --iters 12 \
        --step-times > "$O/$1-$2-steps.log" 2>&1
    echo "-- vdnn-train $1 $2 --step-times: exit $? (at $SECONDS s)"
    grep -E '^iteration time|^  all|^  D2H|^  H2D|^vdnn-train: plan' "$O/$1-$2-steps.log"
}
echo "== no offload, bf16 b256, predictions (at ${SECONDS} s)"
bench resnet50 peak none 60
bench vgg16 peak none 60
bench alexnet peak none 40
echo "== GoogLeNet beside torch.compile (at ${SECONDS} s)"
timeout 200 $PY tools/torch_compare.py --net googlenet --batch 256 --math bf16 \
    --modes bf16-cl,compile-bf16-cl --iters 10 --warmup 6 --vdnn-bin "$B/vdnn-bench" \
    --vdnn-args "--budgets peak --policies none" --vdnn-out "$O/googlenet-bench.json" \
    --json "$O/googlenet-compare.json" > "$O/googlenet-compare.txt" 2>&1
echo "exit $?"; grep -E "x speed|first iteration" "$O/googlenet-compare.txt" | grep -v Warn | tail -4
grep -E '^[0-9.]+ GiB +none' "$O/googlenet-compare.txt" | head -1 | cut -c1-150
echo "== offload points, step times of the replayed iteration (at ${SECONDS} s)"
steps resnet50 4G
steps resnet152 8G
steps resnet152 10G
bench resnet152 10G,8G,peak none,auto 150
echo "== done at ${SECONDS} s"
