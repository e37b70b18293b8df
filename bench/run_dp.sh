#!/bin/sh
# run_dp.sh [BUILD] [OUTDIR] — `make bench-dp`: pipeline x data parallelism measured on the GPUs
# present, next to the prediction and the planner's ranking.
#
# N GPUs (4 with four or more, else 2; CUDA_VISIBLE_DEVICES limits them) split every way into p
# pipeline devices x d replicas, p x d = N, at one global batch (GLOBAL micro-batches of the
# shipped file's size, default 32: m = GLOBAL / d per replica), for 1F1B and ZB-H1
# (schedules/1f1b.yaml, zb-h1.yaml; KINDS= changes them) at the reference model (SHAPE=NAME for a
# preset). A split that does not fit the GPUs is listed as such (the executor refuses it). Each case
# runs once, 5 timed steps after 2 warm-up, one process over the N GPUs: its JSON carries the
# measured step and, a priori, what the model predicted before running (step_ms_predicted), and
# the reductions (per stage: the time and what the pipeline hid of it).
#
# Prints one table: p, d, kind, m, the measured step, the a-priori step and its error, the
# reductions (replica 0's, every stage's added up), the share of them the pipeline hid (while any
# device still computed) and the longest exposed one; then the splits ranked by measured step
# against the predicted ranking, and whether they agree. Writes the JSON of every run and
# table.txt to OUTDIR (default bench/results/dp-<date>-<gpu>/). Needs python3 for the table.
# Exit: 0 every case ran (a split that does not fit is no failure); 1 a run failed; 2 no GPU,
# no ppsched, no python3.
set -u
here=$(pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$here/$build ;; esac
P=$build/ppsched
[ -x "$P" ] || { echo "run_dp.sh: $P not built (run make first)" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || { echo "run_dp.sh: python3 is needed for the table" >&2; exit 2; }
n_gpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    v=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
    [ "$v" -lt "$n_gpu" ] && n_gpu=$v
fi
[ "${n_gpu:-0}" -ge 2 ] || { echo "run_dp.sh: ${n_gpu:-0} GPU(s): p x d needs 2 or more" >&2; exit 2; }
n=2
[ "$n_gpu" -ge 4 ] && n=4
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
global=${GLOBAL:-32}
kinds=${KINDS:-1f1b zb-h1}
shape=${SHAPE:-}
out=${2:-$root/bench/results/dp-$(date +%Y-%m-%d)-$(echo "$gpu" | tr -c 'A-Za-z0-9\n' '-' | tr -s '-')}
case $out in /*) ;; *) out=$here/$out ;; esac
mkdir -p "$out"
failed=0
echo "# bench-dp: $n x $gpu, global batch $global micro-batches, kinds: $kinds${shape:+, model $shape}"
for k in $kinds; do
    d=1
    while [ "$d" -le "$n" ]; do
        p=$((n / d))
        m=$((global / d))
        f=$out/$k-p$p-d$d.json
        set -- --set pipeline.devices=$n --set pipeline.data_parallel=$d \
            --set pipeline.micro_batches=$m --set run.steps=5 --set run.warmup=2
        [ -n "$shape" ] && set -- "$@" --set model="$shape"
        printf '  %s p=%d d=%d m=%d ...\n' "$k" "$p" "$d" "$m"
        if ! timeout 600 "$P" "$root/schedules/$k.yaml" "$@" --json >"$f" 2>"$f.err"; then
            rm -f "$f"
            if grep -q "does not fit in device memory" "$f.err"; then
                echo "  $k p=$p d=$d: does not fit the GPUs (the executor refused it); not run"
            else
                echo "  $k p=$p d=$d: the run failed:"; sed 's/^/    /' "$f.err" | tail -5
                failed=1
            fi
        fi
        d=$((d * 2))
    done
done
python3 - "$out" <<'EOF' | tee "$out/table.txt"
import glob, json, os, sys
out = sys.argv[1]
rows = []
for f in sorted(glob.glob(os.path.join(out, "*-p*-d*.json"))):
    r = json.load(open(f))
    red = r.get("reductions") or []
    rows.append(dict(kind=r["kind"], p=r["devices"] // r.get("data_parallel", 1),
                     d=r.get("data_parallel", 1), m=r["micro_batches"], step=r["step_ms"],
                     pred=r.get("step_ms_predicted"), red=sum(x["ms"] for x in red),
                     hid=sum(x["hidden_ms"] for x in red),
                     exposed=max((x["ms"] - x["hidden_ms"] for x in red), default=0.0)))
print("%-6s %2s %2s %4s %12s %12s %8s %10s %8s %10s" % ("kind", "p", "d", "m", "measured ms",
      "a priori ms", "error", "reduce ms", "hidden", "exposed"))
for x in rows:
    err = (x["pred"] / x["step"] - 1) * 100 if x["pred"] else float("nan")
    hid = "%7.1f%%" % (100 * x["hid"] / x["red"]) if x["red"] > 0 else "%8s" % "-"
    print("%-6s %2d %2d %4d %12.3f %12.3f %+7.1f%% %10.3f %s %10.3f" % (x["kind"], x["p"],
          x["d"], x["m"], x["step"], x["pred"] or float("nan"), err, x["red"], hid,
          x["exposed"]))
meas = [f"{x['kind']} {x['p']}x{x['d']}" for x in sorted(rows, key=lambda x: x["step"])]
pred = [f"{x['kind']} {x['p']}x{x['d']}" for x in sorted(rows, key=lambda x: x["pred"] or 1e30)]
print("ranked by measured step:  " + ", ".join(meas))
print("ranked by the prediction: " + ", ".join(pred))
print("the ranking %s" % ("agrees" if meas == pred else "differs"))
EOF
# What the planner makes of the same GPUs and batch (its global batch: the file's m x b at
# m = GLOBAL; its ranking is the prediction's).
echo "# ppsched plan --gpus $n, global batch $global micro-batches (the top 6)"
# shellcheck disable=SC2086
"$P" plan "$root/schedules/1f1b.yaml" --gpus "$n" --set pipeline.micro_batches="$global" --top 6 \
    --quiet ${shape:+--set model=$shape} >"$out/plan.txt" 2>&1
sed -n '1,14p' "$out/plan.txt"
exit $failed
