#!/bin/sh
# run_peer.sh BUILD [OUTDIR] — `make bench-peer`: ppsched next to PyTorch's
# torch.distributed.pipelining, the same model and schedules on the same GPUs, in one call.
#
# For the reference and the small model and m = 8, 32 on the first P GPUs (P = 4 with 4 or more,
# else 2): ppsched runs schedules/{gpipe,1f1b,interleaved,zb-h1}.yaml, one process per run; then
# one torchrun of bench/torch_peer.py per model (startup paid once) runs GPipe, 1F1B, interleaved
# 1F1B (v = 2) and interleaved zero-bubble (v = 2: PyTorch has no v = 1 ZB-H1 generator of its
# own). A torchrun that fails is rerun without the schedule that broke it. Every run is under
# `timeout`. Writes OUTDIR/peer.jsonl, OUTDIR/peer.md and the raw logs in OUTDIR/peer-logs/.
#
# Before the pipelines, bench/run_one_gpu.sh: the whole model on one GPU against PyTorch eager
# and torch.compile (OUTDIR/one_gpu.txt, one_gpu.jsonl). PEER= picks the parts: all (default),
# one-gpu (that part alone, on one GPU), pipelines (the pipelines alone).
#
# SHAPE=NAME (make bench-peer SHAPE=7b): the pipelines at that model preset (model/preset.c)
# instead of the reference and the small model. bench/peer_shape.sh reads the shape from ppsched
# itself; ppsched runs with --set model=NAME and torch_peer.py with the shape's keys, on the p GPUs
# and the m of schedules/NAME-1f1b.yaml where it is shipped (7b: 4 GPUs, m = 16), else as above.
# GPipe is left out at a preset: it holds all m micro-batches' activations (at 7b, m = 16, 87 GiB
# a device predicted). With SHAPE=, PEER=all runs the pipelines alone (the one-GPU part is the
# reference model's).
# Exit codes: 0 ok, 2 missing ppsched, PyTorch or GPUs (or an unknown SHAPE), 1 when any run
# failed.
set -u

peer=${PEER:-all}
case $peer in
all | pipelines | one-gpu) ;;
*) echo "run_peer.sh: PEER=$peer: allowed: all, one-gpu, pipelines" >&2; exit 2 ;;
esac
one_gpu_rc=0
# SHAPE= picks the pipelines' model; the one-GPU part is the reference model's, run alone by
# PEER=one-gpu.
[ "$peer" = all ] && [ -n "${SHAPE:-}" ] && peer=pipelines
if [ "$peer" != pipelines ]; then
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
    schedules="1f1b interleaved zb"
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
rm -f "$logs"/ppsched-*.json "$logs"/ppsched-*.err "$logs"/torch-*.jsonl "$logs"/torch-*.log
cd "$root" || exit 1

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
commit=${PPSCHED_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
torch_version=$(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)
echo "# run_peer.sh: ppsched vs torch.distributed.pipelining $torch_version"
echo "# on $p of ${n_gpu}x $gpu, commit $commit -> $out"

timeout_s=300
failed=0

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
    esac
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
                --set run.steps=10 --set run.warmup=2 >"$log.json" 2>"$log.err"
            rc=$?
            if [ $rc -ne 0 ]; then
                failed=1
                echo "# ppsched $preset $s m=$m failed (exit $rc): $(tail -n 1 "$log.err")" >&2
            else
                echo "# ppsched $preset $s m=$m done"
            fi
        done
    done

    # ---- PyTorch: one torchrun per model; a failed run is retried without the culprit ---------
    remaining=$(echo "$schedules" | tr ' ' ',')
    attempt=0
    while [ -n "$remaining" ]; do
        attempt=$((attempt + 1))
        log=$logs/torch-$preset-$attempt
        echo "# torchrun $preset: $remaining"
        # shellcheck disable=SC2086,SC2046
        timeout -k 20 "$timeout_s" $torchrun --standalone --nproc_per_node="$p" \
            bench/torch_peer.py $(torch_model "$preset") --schedules "$remaining" \
            --micro-batches "$(echo "$micro_batches" | tr ' ' ',')" --steps 8 --warmup 2 \
            --json "$log.jsonl" >"$log.log" 2>&1
        rc=$?
        [ $rc -eq 0 ] && break
        failed=1
        # Drop the first schedule that has not finished every m (the one that broke the run).
        remaining=$(python3 - "$remaining" "$micro_batches" "$logs"/torch-"$preset"-*.jsonl <<'EOF'
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
        echo "# torchrun $preset attempt $attempt failed (exit $rc, $log.log): $why" >&2
    done
done

# ---- one table from both sides ----------------------------------------------------------------
PEER_PRESETS=$presets PEER_SHAPE_LINE=$shape_line \
    python3 - "$logs" "$out" "$p" "$n_gpu" "$gpu" "$commit" "$torch_version" "$schedules" \
    "$micro_batches" <<'EOF' || failed=1
import glob, json, os, sys, time

logs, out, p, n_gpu, gpu, commit, torch_version = sys.argv[1:8]
schedules, micro_batches = sys.argv[8].split(), [int(x) for x in sys.argv[9].split()]
presets = os.environ["PEER_PRESETS"].split()
p = int(p)

def load_ppsched(path):
    """ppsched --json prints one report object (over several lines)."""
    try:
        text = open(path).read()
        start = text.index("{")
        return json.JSONDecoder().raw_decode(text[start:])[0]
    except (OSError, ValueError):
        return None

records = []
pps, pts = {}, {}
for preset in presets:
    for m in micro_batches:
        for s in schedules:
            r = load_ppsched(os.path.join(logs, f"ppsched-{preset}-{s}-m{m}.json"))
            if r is None:
                continue
            rec = {"framework": "ppsched", "schedule": s, "preset": preset, "p": p, "m": m,
                   "stages": r.get("stages"), "mode": r.get("mode"),
                   "step_ms": r.get("step_ms"), "step_ms_p10": r.get("step_ms_p10"),
                   "step_ms_p90": r.get("step_ms_p90"), "tokens_per_s": r.get("tokens_per_s"),
                   "report": r}
            records.append(rec)
            pps[(preset, s, m)] = rec
    for path in sorted(glob.glob(os.path.join(logs, f"torch-{preset}-*.jsonl"))):
        for line in open(path).read().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "error" in r or (preset, r["schedule"], r["m"]) in pts:
                continue
            records.append(r)
            pts[(preset, r["schedule"], r["m"])] = r

os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "peer.jsonl"), "w") as f:
    for r in records:
        f.write(json.dumps(r) + "\n")

def num(x, fmt):
    return format(x, fmt) if isinstance(x, (int, float)) else "-"

rows = []
for preset in presets:
    for s in schedules:
        for m in micro_batches:
            a, b = pps.get((preset, s, m)), pts.get((preset, s, m))
            a_ms = a and a.get("step_ms")
            b_ms = b and b.get("step_ms")
            ratio = None
            if isinstance(a_ms, (int, float)) and isinstance(b_ms, (int, float)) and a_ms > 0:
                ratio = b_ms / a_ms
            notes = []
            if a and a.get("mode") != "measure":
                notes.append(f"ppsched {a.get('mode')}")
            if b and b.get("p") != p:
                notes.append(f"pytorch on {b.get('p')} GPUs")
            note = "; ".join(notes)
            rows.append([preset, s, str(m), num(a_ms, ".2f"), num(b_ms, ".2f"),
                         num(ratio, ".2f") + ("x" if ratio else ""),
                         num(a and a.get("tokens_per_s"), ".4g"),
                         num(b and b.get("tokens_per_s"), ".4g"), note])

date = time.strftime("%Y-%m-%d", time.gmtime())
pre = [f"ppsched vs torch.distributed.pipelining {torch_version}, {p} of {n_gpu}x {gpu}, bf16, "
       f"commit {commit}, {date}",
       "step = median step time; speed-up = pytorch ms / ppsched ms; "
       "ppsched 2 warm-up + 10 timed steps, PyTorch 2 + 8",
       "ppsched: step start to the last device's end (device clock), peer copies; "
       "PyTorch: barrier to cuda.synchronize (host clock) on the slowest rank, NCCL",
       "neither side runs an optimizer step; both fuse attention (PyTorch: SDPA; ppsched: its own "
       "flash-style kernel in bf16)",
       os.environ["PEER_SHAPE_LINE"],
       "interleaved: v = 2 on both sides; zb: ppsched ZB-H1 (v = 1) vs PyTorch "
       "ScheduleInterleavedZeroBubble (v = 2)"]
names = ["preset", "schedule", "m", "ppsched", "pytorch", "speed-up", "ppsched", "pytorch", ""]
units = ["", "", "", "(ms)", "(ms)", "", "tokens/s", "tokens/s", ""]
widths = [10, 12, 4, 10, 10, 9, 11, 11, 0]
def line(cells):
    return " ".join(c.rjust(w) if w else c for c, w in zip(cells, widths)).rstrip()
for t in pre:
    print("# " + t)
print(line(names))
print(line(units))
for r in rows:
    print(line(r))
n_both = sum(1 for r in rows if r[3] != "-" and r[4] != "-")
print(f"# {n_both} of {len(rows)} rows measured on both sides; "
      f"results in {out}/peer.jsonl, peer.md")

with open(os.path.join(out, "peer.md"), "w") as f:
    f.write("# ppsched vs PyTorch pipelining\n\n")
    for t in pre:
        f.write(t + ".  \n")
    f.write("\n| preset | schedule | m | ppsched (ms) | PyTorch (ms) | speed-up "
            "| ppsched tokens/s | PyTorch tokens/s | note |\n")
    f.write("|---|---|---:|---:|---:|---:|---:|---:|---|\n")
    for r in rows:
        f.write("| " + " | ".join(r) + " |\n")
sys.exit(0 if n_both == len(rows) else 1)
EOF

[ $one_gpu_rc -ne 0 ] && failed=1
exit $failed
