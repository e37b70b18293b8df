#!/bin/sh
# predict_check.sh [--profile] [BUILD] [PROFILE] — the cost and memory model against measurement,
# on one GPU.
#
# --profile: first make PROFILE on this GPU (`ppsched profile schedules/1f1b.yaml --set
# pipeline.devices=1`: the passes, the whole model's steps and DualPipeV's pairs, about 30 s), so
# one call measures the profile and checks it.
#
# Every generated schedule kind's shipped file (schedules/<kind>.yaml) at the reference and the small model,
# m = 8 and 32, all stages on the first GPU (pipeline.devices=1). Each case is measured once (5
# timed steps after 2 warm-up); the measured run's JSON carries what the model predicted before
# running on the GPU's description alone (a priori); a second, simulated run prices the same plan
# with PROFILE (a file written by `ppsched profile`, default profiles/<gpu>.yaml). Prints one table:
# measured step and fullest device's peak memory, each prediction and its error. Targets: step
# within 10% (profile) and 15% (a priori), memory within 5%. A case the model says does not fit is
# still run: the executor's own check must refuse it too, and the row says so.
# Writes the raw JSON under bench/results/predict-<date>-<gpu>/ (-2, -3, ... appended when that
# day's has a table already) and the table to table.txt there, headed by the device, commit and
# profile, with each prediction's cost-model line (step factor, pair overlap) and the time the call
# took at the end. Needs python3 for the table.
set -eu
make_profile=0
if [ "${1:-}" = --profile ]; then
    make_profile=1
    shift
fi
build=${1:-build}
ppsched="$build/ppsched"
[ -x "$ppsched" ] || { echo "predict_check.sh: $ppsched not built (run make first)" >&2; exit 2; }
if ! command -v nvidia-smi >/dev/null 2>&1 || [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -eq 0 ]; then
    echo "predict_check.sh: no GPU found: this compares predictions with measurements." >&2
    exit 2
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
case "$gpu" in
*H100*) tag=h100 ;;
*H200*) tag=h200 ;;
*A100*) tag=a100 ;;
*B200*) tag=b200 ;;
*) tag=unknown ;;
esac
profile=${2:-profiles/$tag.yaml}
out=bench/results/predict-$(date -u +%Y-%m-%d)-$tag
n=2
base=$out
while [ -e "$out/table.txt" ]; do # a second call the same day keeps the first one's table
    out=$base-$n
    n=$((n + 1))
done
mkdir -p "$out"
start=$(date +%s)
made="shipped"
if [ "$make_profile" = 1 ]; then
    echo "# predict_check: making $profile on $gpu"
    "$ppsched" profile schedules/1f1b.yaml --set pipeline.devices=1 -o "$profile" 2>"$out/profile.err" ||
        { cat "$out/profile.err" >&2; echo "predict_check.sh: ppsched profile failed" >&2; exit 1; }
    made="made in the same call, $(($(date +%s) - start)) s"
fi
[ -f "$profile" ] || { echo "predict_check.sh: no profile $profile (make one: $ppsched profile schedules/1f1b.yaml --set pipeline.devices=1 -o $profile, or pass --profile)" >&2; exit 2; }
# --set cost.profile is relative to the schedule's folder: give it the profile's absolute path
profile_set=$(cd "$(dirname "$profile")" && pwd)/$(basename "$profile")
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "# predict_check: $gpu, profile $profile, commit $commit -> $out"

small="--set model=small" # the preset: 16 layers, hidden 512, 8 heads, seq 256, micro-batch 2
common="--set pipeline.devices=1 --set run.steps=5 --set run.warmup=2 --quiet --json"
kinds="gpipe 1f1b interleaved zb-h1 zb-h2 zb-v dualpipe-v looped-bfs interleaved-zb auto"
for model in reference small; do
    extra=""
    [ "$model" = small ] && extra=$small
    for kind in $kinds; do
        for m in 8 32; do
            base="$out/$model-$kind-m$m"
            # shellcheck disable=SC2086
            "$ppsched" schedules/$kind.yaml $common $extra --set pipeline.micro_batches=$m \
                >"$base.measured.json" 2>"$base.measured.err" || true
            # shellcheck disable=SC2086
            "$ppsched" schedules/$kind.yaml $common $extra --set pipeline.micro_batches=$m \
                --simulate --gpu "$tag" --set cost.profile="$profile_set" >"$base.profile.json" 2>"$base.profile.err" || true
            # shellcheck disable=SC2086
            "$ppsched" schedules/$kind.yaml $common $extra --set pipeline.micro_batches=$m \
                --simulate --gpu "$tag" >"$base.gpu.json" 2>"$base.gpu.err" || true
        done
    done
done

{
echo "# bench/predict_check.sh on one $gpu, $(date -u +%Y-%m-%d), tree at $commit, profile $profile ($made)"
# shellcheck disable=SC2086
python3 - "$out" $kinds <<'EOF'
import json, os, sys
out = sys.argv[1]
def load(p):
    try:
        with open(p) as f:
            return json.load(f)
    except Exception:
        return None
def peak(r, key):
    return max((d.get(key) or 0) for d in r["per_device"]) / 2**30 if r else None
def err(pred, meas):
    return "-" if not pred or not meas else "%+.1f" % (100 * (pred - meas) / meas)
def num(v, fmt):
    return "-" if v is None else fmt % v
hdr = ("model", "schedule", "m", "meas", "profile", "err", "a priori", "err", "meas", "profile", "err", "a priori", "err", "")
units = ("", "", "", "ms", "ms", "%", "ms", "%", "GiB", "GiB", "%", "GiB", "%", "")
fmt = "%-9s %-15s %3s %9s %9s %6s %9s %6s %7s %7s %6s %8s %6s %s"
print(fmt % hdr)
print(fmt % units)
worst = {"step_profile": 0, "step_gpu": 0, "mem_profile": 0, "mem_gpu": 0}
for model in ("reference", "small"):
    for kind in sys.argv[2:]:
        for m in (8, 32):
            base = os.path.join(out, "%s-%s-m%d" % (model, kind, m))
            meas, prof, gpu = (load(base + s) for s in (".measured.json", ".profile.json", ".gpu.json"))
            note = ""
            if meas is None:
                e = open(base + ".measured.err").read().strip().splitlines()
                note = "did not run: " + (e[-1] if e else "?")
            ms = meas["step_ms"] if meas else None
            mm = peak(meas, "peak_mem_bytes")
            ps, gs = (prof or {}).get("step_ms"), (gpu or {}).get("step_ms")
            pm, gm = peak(prof, "peak_mem_bytes"), peak(gpu, "peak_mem_bytes")
            if ms:
                worst["step_profile"] = max(worst["step_profile"], abs((ps or 0) - ms) / ms)
                worst["step_gpu"] = max(worst["step_gpu"], abs((gs or 0) - ms) / ms)
            if mm:
                worst["mem_profile"] = max(worst["mem_profile"], abs((pm or 0) - mm) / mm)
                worst["mem_gpu"] = max(worst["mem_gpu"], abs((gm or 0) - mm) / mm)
            print(fmt % (model, kind, m, num(ms, "%.2f"), num(ps, "%.2f"), err(ps, ms), num(gs, "%.2f"),
                         err(gs, ms), num(mm, "%.2f"), num(pm, "%.2f"), err(pm, mm), num(gm, "%.2f"),
                         err(gm, mm), note))
print("# worst |error| over the runs that ran: step %.1f%% (profile, target 10%%), %.1f%% (a priori, target 15%%); "
      "peak memory %.1f%% (profile, target 5%%), %.1f%% (a priori)"
      % (100 * worst["step_profile"], 100 * worst["step_gpu"], 100 * worst["mem_profile"], 100 * worst["mem_gpu"]))
EOF
# What each prediction applied (the profile's step factor, the pair overlap), DualPipeV at m = 8.
for model in reference small; do
    extra=""
    [ "$model" = small ] && extra=$small
    for src in profile gpu; do
        set -- --gpu "$tag"
        [ "$src" = profile ] && set -- "$@" --set cost.profile="$profile_set"
        # shellcheck disable=SC2086
        line=$("$ppsched" schedules/dualpipe-v.yaml --simulate --set pipeline.devices=1 $extra "$@" 2>/dev/null |
            grep '^# cost model:' | sed 's/; ms per micro-batch.*//') || line="# cost model: ?"
        echo "# $model, $src: ${line#\# }"
    done
done
echo "# the call took $(($(date +%s) - start)) s"
} | tee "$out/table.txt"
