#!/bin/sh
# run_peer.sh BUILD [OUTDIR] — `make bench-peer`: ppsched next to PyTorch's
# torch.distributed.pipelining and Megatron-Core, the same model and schedules on the same GPUs, in
# one call.
#
# For the reference and the small model and m = 8, 32 on the first P GPUs (P = 4 with 4 or more,
# else 2): ppsched runs schedules/{gpipe,1f1b,interleaved,zb-h1}.yaml, one process per run; then
# one torchrun of bench/torch_peer.py per model (startup paid once) runs GPipe, 1F1B, interleaved
# 1F1B (v = 2) and interleaved zero-bubble (v = 2: PyTorch has no v = 1 ZB-H1 generator of its
# own); then one torchrun of bench/megatron_peer.py per model runs Megatron-Core's 1F1B and
# interleaved (v = 2) schedules (its local layer spec with PyTorch SDPA as the core attention, or
# TransformerEngine's spec where transformer_engine imports: the table says which). A torchrun
# that fails is rerun without the schedule that broke it. Every run is under `timeout`. AdamW is
# inside every step on every side (PEER_OPTIMIZER=none: no optimizer step anywhere). Writes
# OUTDIR/peer.jsonl, OUTDIR/peer.md (bench/peer_table.py, which also prints the table) and the raw
# logs in OUTDIR/peer-logs/.
#
# Megatron-Core is not part of PyTorch. Where python3 cannot import it, the table says so and how
# to carry it, and the rest runs. To carry it to a machine without network: on one with network
# `sh bench/peer_wheels.sh DIR` downloads its wheels (megatron-core, numpy, packaging for Python
# 3.12); copy DIR over and run with PEER_WHEELS=DIR: those python3 lacks are installed into a
# temporary folder put on PYTHONPATH for the run (bench/peer_wheels.sh --install).
# PEER_MEGATRON_ARGS adds arguments for megatron_peer.py (e.g. --fusions off, --attention local).
#
# Before the pipelines, bench/run_one_gpu.sh: the whole model on one GPU against PyTorch eager
# and torch.compile (OUTDIR/one_gpu.txt, one_gpu.jsonl). PEER= picks the parts: all (default),
# one-gpu (that part alone, on one GPU), pipelines (the pipelines alone), megatron (ppsched and
# Megatron-Core alone: 1F1B and interleaved, no PyTorch).
#
# SHAPE=NAME (make bench-peer SHAPE=7b): the pipelines at that model preset (model/preset.c)
# instead of the reference and the small model. bench/peer_shape.sh reads the shape from ppsched
# itself; ppsched runs with --set model=NAME and the peers with the shape's keys, on the p GPUs
# and the m of schedules/NAME-1f1b.yaml where it is shipped (7b: 4 GPUs, m = 16), else as above.
# At a preset ppsched also runs ZB-V (no peer has it; the table compares it with Megatron-Core's
# 1F1B of the same call). GPipe is left out at a preset: it holds all m micro-batches'
# activations (at 7b, m = 16, 87 GiB a device predicted). With SHAPE=, PEER=all runs the
# pipelines alone (the one-GPU part is the reference model's).
# Exit codes: 0 ok, 2 missing ppsched, PyTorch or GPUs (or an unknown SHAPE, or PEER=megatron
# without Megatron-Core), 1 when any run failed.
set -u

peer=${PEER:-all}
case $peer in
all | pipelines | one-gpu | megatron) ;;
*) echo "run_peer.sh: PEER=$peer: allowed: all, one-gpu, pipelines, megatron" >&2; exit 2 ;;
esac
optimizer=${PEER_OPTIMIZER:-adamw}
case $optimizer in
adamw | none) ;;
*) echo "run_peer.sh: PEER_OPTIMIZER=$optimizer: allowed: adamw, none" >&2; exit 2 ;;
esac
one_gpu_rc=0
failed=0
# SHAPE= picks the pipelines' model; the one-GPU part is the reference model's, run alone by
# PEER=one-gpu.
[ "$peer" = all ] && [ -n "${SHAPE:-}" ] && peer=pipelines
if [ "$peer" = all ] || [ "$peer" = one-gpu ]; then
    sh "$(dirname "$0")/run_one_gpu.sh" "$@"
    one_gpu_rc=$?
    [ "$peer" = one-gpu ] && exit $one_gpu_rc
    [ $one_gpu_rc -eq 2 ] && exit 2
fi

here=$(pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$here/$build ;; esac
out=${2:-$root/bench/results}
case $out in /*) ;; *) out=$here/$out ;; esac
ppsched=$build/ppsched

[ -x "$ppsched" ] || { echo "run_peer.sh: $ppsched not built (run make first)" >&2; exit 2; }
if ! python3 -c 'import torch, torch.distributed.pipelining' >/dev/null 2>&1; then
    echo "run_peer.sh: PyTorch with torch.distributed.pipelining is not importable by python3:" >&2
    echo "  the peer comparison needs it (pip install torch), nothing was run." >&2
    exit 2
fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "run_peer.sh: nvidia-smi not found: the peer comparison runs on 2 or more GPUs." >&2
    exit 2
fi
n_gpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$n_gpu" -lt 2 ]; then
    echo "run_peer.sh: $n_gpu GPU(s) found: the pipeline comparison needs 2 or more" \
        "(PEER=one-gpu runs the one-GPU part alone)." >&2
    exit 2
fi
# 2 or 4: both models' layers (24, 16) split into p and 2p stages, and m = 8, 32 divide by p.
p=2
[ "$n_gpu" -ge 4 ] && p=4
schedules="gpipe 1f1b interleaved zb"
[ "$peer" = megatron ] && schedules="1f1b interleaved"
micro_batches="8 32"
presets="reference small"
shape_line="reference: 24 layers, hidden 1024, 16 heads, seq 1024, vocab 8192, micro-batch 4; \
small: 16, 512, 8, 256, 8192, 2"
shape=${SHAPE:-}
if [ -n "$shape" ]; then
    # p m b layers hidden heads seq_len vocab, as ppsched resolves the preset
    line=$(sh "$root/bench/peer_shape.sh" "$ppsched" "$shape" "$p") || exit $?
    # shellcheck disable=SC2086
    set -- $line
    if [ -f "$root/schedules/$shape-1f1b.yaml" ]; then
        p=$1
        micro_batches=$2
    fi
    if [ "$n_gpu" -lt "$p" ]; then
        echo "run_peer.sh: SHAPE=$shape runs on $p GPUs; $n_gpu found." >&2
        exit 2
    fi
    [ "$peer" = megatron ] || schedules="1f1b interleaved zb"
    # ZB-V, ppsched alone (no peer has it): at a preset it is ppsched's best, and the table's
    # "vs Megatron-Core 1F1B" needs it in the same call
    schedules="$schedules zb-v"
    presets=$shape
    torch_shape="--layers $4 --hidden $5 --heads $6 --seq-len $7 --vocab $8 --micro-batch-size $3"
    shape_line="$shape: $4 layers, hidden $5, $6 heads, seq $7, vocab $8, micro-batch $3"
fi

# NVLink SHARP and multicast memory stay off on these machines (for NCCL and PyTorch alike).
export NCCL_NVLS_ENABLE=0
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
if command -v torchrun >/dev/null 2>&1; then
    torchrun="torchrun"
else
    torchrun="python3 -m torch.distributed.run"
fi

logs=$out/peer-logs
mkdir -p "$logs" || exit 1
rm -f "$logs"/ppsched-*.json "$logs"/ppsched-*.err "$logs"/torch-*.jsonl "$logs"/torch-*.log \
    "$logs"/megatron-*.jsonl "$logs"/megatron-*.log "$logs"/megatron-import.err

# Megatron-Core: carried as wheels (PEER_WHEELS=DIR) where python3 lacks it, then imported once
# to learn whether it runs here; without it the rest runs and the table says why.
site=""
trap '[ -z "$site" ] || rm -rf "$site"' EXIT
trap 'exit 1' INT TERM
wheels=${PEER_WHEELS:-}
if [ -n "$wheels" ]; then
    case $wheels in /*) ;; *) wheels=$here/$wheels ;; esac
    site=$(mktemp -d "${TMPDIR:-/tmp}/ppsched-peer-site.XXXXXX") || exit 1
    added=$(sh "$root/bench/peer_wheels.sh" --install "$wheels" "$site") || failed=1
    if [ -n "$added" ]; then
        PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
        export PYTHONPATH
    fi
fi
megatron_version=""
megatron_missing=""
carry="to carry it: on a machine with network \`sh bench/peer_wheels.sh DIR\` downloads its \
wheels; copy DIR here and run with PEER_WHEELS=DIR"
if ! megatron_version=$(python3 -c 'import megatron.core as m; print(m.__version__)' \
    2>"$logs/megatron-import.err"); then
    why=$(grep -E '[A-Za-z]+Error' "$logs/megatron-import.err" | tail -n 1 | cut -c 1-160)
    megatron_missing="python3 cannot import megatron.core (${why:-see peer-logs/megatron-import.err}); $carry"
    echo "# Megatron-Core: $megatron_missing" >&2
    if [ "$peer" = megatron ]; then
        echo "run_peer.sh: PEER=megatron: Megatron-Core is not importable; nothing was run." >&2
        exit 2
    fi
fi
frameworks=""
[ "$peer" = megatron ] || frameworks="pytorch"
[ -z "$megatron_missing" ] && frameworks="$frameworks megatron-core"
cd "$root" || exit 1

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
commit=${PPSCHED_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
torch_version=$(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)
echo "# run_peer.sh: ppsched vs torch.distributed.pipelining $torch_version and Megatron-Core" \
    "${megatron_version:-(not importable)}, optimizer $optimizer"
echo "# on $p of ${n_gpu}x $gpu, commit $commit -> $out"

timeout_s=300

# A model for ppsched: its preset (model/preset.c), which sets the micro-batch size too.
model_sets() {
    echo "--set model=$1"
}

# torch_peer.py's arguments for a preset: its own, or the shape ppsched read (SHAPE=).
torch_model() {
    case $1 in
    reference | small) echo "--preset $1" ;;
    *) echo "--name $1 $torch_shape" ;;
    esac
}

yaml_of() {
    case $1 in
    gpipe) echo schedules/gpipe.yaml ;;
    1f1b) echo schedules/1f1b.yaml ;;
    interleaved) echo schedules/interleaved.yaml ;;
    zb) echo schedules/zb-h1.yaml ;;
    zb-v) echo schedules/zb-v.yaml ;;
    esac
}

# torch_schedules: those of the schedules run that torch_peer.py has, comma-separated.
torch_schedules() {
    for s in $schedules; do
        case $s in gpipe | 1f1b | interleaved | zb) printf '%s\n' "$s" ;; esac
    done | paste -s -d , -
}

# megatron_schedules: those of the schedules run that Megatron-Core has, comma-separated.
megatron_schedules() {
    for s in $schedules; do
        case $s in 1f1b | interleaved) printf '%s\n' "$s" ;; esac
    done | paste -s -d , -
}

# torchrun_retry TAG SCRIPT PRESET SCHEDULES [ARG...]: one torchrun of SCRIPT (a peer) for PRESET
# over the comma-separated SCHEDULES and every m (the ARGs added), its JSON lines in
# $logs/TAG-PRESET-N.jsonl; a failed run is rerun without the first schedule that has not
# finished every m (the one that broke it).
torchrun_retry() {
    tag=$1
    script=$2
    preset_=$3
    remaining=$4
    shift 4
    attempt=0
    while [ -n "$remaining" ]; do
        attempt=$((attempt + 1))
        log=$logs/$tag-$preset_-$attempt
        echo "# torchrun $tag $preset_: $remaining"
        # shellcheck disable=SC2086,SC2046
        timeout -k 20 "$timeout_s" $torchrun --standalone --nproc_per_node="$p" \
            "$script" $(torch_model "$preset_") --schedules "$remaining" \
            --micro-batches "$(echo "$micro_batches" | tr ' ' ',')" --steps 8 --warmup 2 \
            --optimizer "$optimizer" "$@" --json "$log.jsonl" >"$log.log" 2>&1
        rc=$?
        [ $rc -eq 0 ] && break
        failed=1
        remaining=$(python3 - "$remaining" "$micro_batches" "$logs/$tag-$preset_"-*.jsonl <<'EOF'
import json, sys
order = sys.argv[1].split(",")
ms = {int(x) for x in sys.argv[2].split()}
done = {}
for path in sys.argv[3:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        try:
            r = json.loads(line)
        except ValueError:
            continue
        done.setdefault(r["schedule"], set()).add(r["m"])
missing = [s for s in order if not ms <= done.get(s, set())]
print(",".join(missing[1:]))
EOF
)
        why=$(grep -m 1 -E '[A-Za-z]+Error:' "$log.log" | cut -c 1-200)
        echo "# torchrun $tag $preset_ attempt $attempt failed (exit $rc, $log.log): $why" >&2
    done
}

for preset in $presets; do
    # ---- ppsched: one process per run ---------------------------------------------------------
    for m in $micro_batches; do
        for s in $schedules; do
            log=$logs/ppsched-$preset-$s-m$m
            # shellcheck disable=SC2046
            timeout -k 10 "$timeout_s" "$ppsched" "$(yaml_of "$s")" --json --quiet \
                $(model_sets "$preset") --set model.dtype=bf16 \
                --set pipeline.devices="$p" --set pipeline.micro_batches="$m" \
                --set run.optimizer="$optimizer" --set run.steps=10 --set run.warmup=2 \
                >"$log.json" 2>"$log.err"
            rc=$?
            if [ $rc -ne 0 ]; then
                failed=1
                echo "# ppsched $preset $s m=$m failed (exit $rc): $(tail -n 1 "$log.err")" >&2
            else
                echo "# ppsched $preset $s m=$m done"
            fi
        done
    done

    # ---- the peers: a torchrun per model each ------------------------------------------------
    if [ "$peer" != megatron ]; then
        torchrun_retry torch bench/torch_peer.py "$preset" "$(torch_schedules)"
    fi
    if [ -z "$megatron_missing" ]; then
        # shellcheck disable=SC2086
        torchrun_retry megatron bench/megatron_peer.py "$preset" "$(megatron_schedules)" \
            ${PEER_MEGATRON_ARGS:-}
    fi
done

# ---- one table from every side ------------------------------------------------------------------
PEER_PRESETS=$presets PEER_SCHEDULES=$schedules PEER_MICRO_BATCHES=$micro_batches \
    PEER_FRAMEWORKS=$frameworks PEER_P=$p PEER_N_GPU=$n_gpu PEER_GPU=$gpu PEER_COMMIT=$commit \
    PEER_TORCH_VERSION=$torch_version PEER_SHAPE_LINE=$shape_line PEER_OPTIMIZER=$optimizer \
    PEER_MEGATRON_MISSING=$megatron_missing python3 "$root/bench/peer_table.py" "$logs" "$out" ||
    failed=1

[ $one_gpu_rc -ne 0 ] && failed=1
exit $failed
