#!/bin/sh
# run_one_gpu.sh BUILD [OUTDIR] — the one-GPU part of `make bench-peer` (alone:
# `make bench-peer PEER=one-gpu`): the whole reference model on GPU 0, ppsched against PyTorch
# eager and torch.compile, in one call, one table.
#
# ppsched runs schedules/1f1b.yaml with pipeline.devices=1 (one stage, every block), m = 8, bf16,
# AdamW inside the step, 3 warm-up + 10 timed steps; then bench/torch_one_gpu.py runs the same
# model, m, dtype and optimizer step in PyTorch, eager then compiled (3 warm-up steps, the first
# compiling, + 10 timed), and prints the side-by-side table with ppsched's report, the step-0
# loss check (ppsched's from a second, one-step run) and one JSON line (prefixed ONE_GPU_JSON). About 2-3 minutes on one H100, most of it compiling.
# Writes OUTDIR/one_gpu.txt (the table), appends the JSON line to OUTDIR/one_gpu.jsonl, and keeps
# the raw logs in OUTDIR/peer-logs/. Every run is under `timeout`.
# ONE_GPU_TORCH_ARGS adds arguments for torch_one_gpu.py (e.g. --modes eager).
# Exit codes: 0 ok, 2 missing ppsched, PyTorch or a GPU, 1 when a run failed.
set -u

here=$(pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$here/$build ;; esac
out=${2:-$root/bench/results}
case $out in /*) ;; *) out=$here/$out ;; esac
ppsched=$build/ppsched
m=${ONE_GPU_M:-8}

[ -x "$ppsched" ] || { echo "run_one_gpu.sh: $ppsched not built (run make first)" >&2; exit 2; }
if ! python3 -c 'import torch' >/dev/null 2>&1; then
    echo "run_one_gpu.sh: PyTorch is not importable by python3: nothing was run" >&2
    exit 2
fi
if ! command -v nvidia-smi >/dev/null 2>&1 || [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -lt 1 ]; then
    echo "run_one_gpu.sh: no GPU found (nvidia-smi): the one-GPU comparison needs one" >&2
    exit 2
fi

logs=$out/peer-logs
mkdir -p "$logs" || exit 1
cd "$root" || exit 1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
commit=${PPSCHED_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
date=$(date -u +%Y-%m-%d)
echo "# run_one_gpu.sh: the reference model on one $gpu, m = $m, commit $commit -> $out"
failed=0

# The reference model (torch_one_gpu.py --preset reference): ppsched's preset of the same name,
# micro-batch 4 included.
model="--set model=reference --set model.dtype=bf16"
ours=$logs/one-gpu-ppsched.json
start=$(date +%s)
# shellcheck disable=SC2086
CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} timeout -k 10 180 "$ppsched" schedules/1f1b.yaml \
    --json --quiet $model --set pipeline.devices=1 --set pipeline.micro_batches="$m" \
    --set run.optimizer=adamw --set run.steps=10 --set run.warmup=3 >"$ours" 2>"$logs/one-gpu-ppsched.err"
rc=$?
if [ $rc -ne 0 ]; then
    failed=1
    echo "# ppsched failed (exit $rc): $(tail -n 1 "$logs/one-gpu-ppsched.err")" >&2
else
    echo "# ppsched done in $(($(date +%s) - start)) s"
fi
# Step 0's loss (the report carries the last step's): one step, no warm-up.
step0=$logs/one-gpu-ppsched-step0.json
# shellcheck disable=SC2086
CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} timeout -k 10 120 "$ppsched" schedules/1f1b.yaml \
    --json --quiet $model --set pipeline.devices=1 --set pipeline.micro_batches="$m" \
    --set run.optimizer=adamw --set run.steps=1 --set run.warmup=0 >"$step0" 2>"$logs/one-gpu-ppsched-step0.err" ||
    echo "# ppsched's step-0 run failed: $(tail -n 1 "$logs/one-gpu-ppsched-step0.err")" >&2

start=$(date +%s)
# shellcheck disable=SC2086
CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} timeout -k 20 420 python3 bench/torch_one_gpu.py \
    --preset reference --micro-batches "$m" --steps 10 --warmup 3 --ours "$ours" --ours-step0 "$step0" \
    --label "commit $commit, $date" --json "$out/one_gpu.jsonl" ${ONE_GPU_TORCH_ARGS:-} \
    >"$out/one_gpu.txt" 2>"$logs/one-gpu-torch.err"
rc=$?
cat "$out/one_gpu.txt"
if [ $rc -ne 0 ]; then
    failed=1
    echo "# torch_one_gpu.py failed (exit $rc, $logs/one-gpu-torch.err):" \
        "$(tail -n 1 "$logs/one-gpu-torch.err" | cut -c 1-300)" >&2
fi
echo "# PyTorch side done in $(($(date +%s) - start)) s; table in $out/one_gpu.txt"
exit $failed
