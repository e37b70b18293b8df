#!/bin/sh
# run_bench.sh BUILD [OUTDIR] — `make bench`: what the schedules cost on the GPUs present.
#
#   1. the stage benchmark (one stage's forward + backward against cuBLAS's GEMM rate, per
#      run.recompute setting) and the host link for offload (pinned against pageable)
#   2. GPipe, 1F1B, interleaved 1F1B (v = 2) and ZB-H1 at the reference model and the small model,
#      m = 4, 8, 16, 32, on up to 4 GPUs (ppsched compare --sweep)
#   3. the cost of per-op timing: 1F1B with timing on vs off, alternated, 3 pairs
#   4. the overlap speed-up: the same plans with --sync (host sync after every op) vs without
#
# Results go to OUTDIR (default bench/results/<date>-<gpu>-<commit>/): the raw tables, JSON/CSV
# twins, one Gantt chart per run, and summary.md, which names the device, date and commit
# (PPSCHED_COMMIT names the commit where the tree has no .git).
set -eu
build=${1:-build}
ppsched="$build/ppsched"
[ -x "$ppsched" ] || { echo "run_bench.sh: $ppsched not built (run make first)" >&2; exit 2; }
if ! command -v nvidia-smi >/dev/null 2>&1 || [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -eq 0 ]; then
    echo "run_bench.sh: no GPU found: make bench measures on GPUs." >&2
    echo "  (to predict instead: $ppsched compare schedules/*.yaml --simulate)" >&2
    exit 2
fi
n_gpu=$(nvidia-smi -L | grep -c '^GPU')
p=$n_gpu
[ "$p" -gt 4 ] && p=4
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
gpu_tag=$(echo "$gpu" | sed 's/NVIDIA //; s/[^A-Za-z0-9]/-/g; s/--*/-/g; s/-$//')
commit=${PPSCHED_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
date=$(date -u +%Y-%m-%d)
out=${2:-bench/results/$date-${n_gpu}x$gpu_tag-$commit}
mkdir -p "$out"
echo "# make bench: ${n_gpu}x $gpu (pipeline over $p), commit $commit, $date -> $out"

small="--set model.layers=16 --set model.hidden=512 --set model.heads=8 --set model.seq_len=256 --set pipeline.micro_batch_size=2"
schedules="schedules/gpipe.yaml schedules/1f1b.yaml schedules/interleaved.yaml schedules/zb-h1.yaml"
# BENCH_M overrides the micro-batch counts (a comma list), e.g. BENCH_M=8,32 for a quicker run.
sweep="--sweep pipeline.micro_batches=${BENCH_M:-4,8,16,32}"
common="--set pipeline.devices=$p --quiet"

# 1. stage benchmark
if [ -x "$build/bench/bench_stage" ]; then
    echo "## stage benchmark"
    "$build/bench/bench_stage" | tee "$out/stage.txt"
fi
if [ -x "$build/bench/bench_attention" ]; then
    echo "## attention kernels"
    "$build/bench/bench_attention" --shape model | tee "$out/attention.txt"
fi
if [ -x "$build/bench/bench_offload" ]; then
    echo "## host link for offload: pinned against pageable"
    "$build/bench/bench_offload" | tee "$out/offload.txt"
fi

# 2. schedules side by side
for model in reference small; do
    extra=""
    [ "$model" = small ] && extra=$small
    echo "## schedules, $model model, p = $p"
    # shellcheck disable=SC2086
    "$ppsched" compare $schedules $common $extra $sweep --svg "$out/charts-$model" --json >"$out/compare-$model.json"
    python3 - "$out/compare-$model.json" <<'EOF' | tee "$out/compare-$model.txt"
import json, sys
runs = json.load(open(sys.argv[1]))
pct = lambda v: "-" if v is None else "%.1f" % (100 * v)
print("%-18s %3s %4s %9s %9s %9s %10s %8s %7s %7s %7s %8s %5s" % ("schedule", "p", "m", "step", "p10", "p90", "tokens/s", "TFLOP/s", "bubble", "sim", "theory", "mem", "peak"))
print("%-18s %3s %4s %9s %9s %9s %10s %8s %7s %7s %7s %8s %5s" % ("", "", "", "(ms)", "(ms)", "(ms)", "", "", "(%)", "(%)", "(%)", "(GiB)", "mb"))
for r in runs:
    mem = max(d["peak_mem_bytes"] or 0 for d in r["per_device"]) / 2**30
    infl = max(d["peak_inflight_microbatches"] or 0 for d in r["per_device"])
    print("%-18s %3d %4d %9.3f %9.3f %9.3f %10.0f %8.1f %7s %7s %7s %8.2f %5d" % (r["schedule"], r["devices"], r["micro_batches"], r["step_ms"], r["step_ms_p10"], r["step_ms_p90"], r["tokens_per_s"], r["tflops"], pct(r["bubble"]), pct(r["bubble_simulated"]), pct(r["bubble_theory"]), mem, infl))
EOF
done

# 3. timing overhead and 4. sync baseline, read from the JSON reports
step_ms() { python3 -c 'import json,sys; print(json.load(sys.stdin)["step_ms"])'; }
echo "## timing overhead (1F1B, reference model, m = 32): step ms with per-op timing on / off"
: >"$out/timing.txt"
for i in 1 2 3; do
    on=$("$ppsched" schedules/1f1b.yaml $common --set pipeline.micro_batches=32 --json | step_ms)
    off=$("$ppsched" schedules/1f1b.yaml $common --set pipeline.micro_batches=32 --set run.timing=false --json | step_ms)
    echo "$on $off" >>"$out/timing.txt"
done
python3 - "$out/timing.txt" <<'EOF' | tee "$out/timing.md"
import sys, statistics
pairs = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
on = statistics.median(p[0] for p in pairs)
off = statistics.median(p[1] for p in pairs)
print("| timing | step ms (median of %d runs) |" % len(pairs))
print("|---|---|")
print("| on | %.3f |" % on)
print("| off | %.3f |" % off)
print("\ntiming overhead: %+.2f%% (runs: %s)" % ((on / off - 1) * 100, ", ".join("%.2f/%.2f" % p for p in pairs)))
EOF

echo "## overlap: the real executor vs a host sync after every op (--sync)"
: >"$out/sync.txt"
for model in reference small; do
    extra=""
    [ "$model" = small ] && extra=$small
    for m in 8 32; do
        # shellcheck disable=SC2086
        a=$("$ppsched" schedules/1f1b.yaml $common $extra --set pipeline.micro_batches=$m --json | step_ms)
        # shellcheck disable=SC2086
        s=$("$ppsched" schedules/1f1b.yaml $common $extra --set pipeline.micro_batches=$m --sync --json | step_ms)
        echo "$model $m $a $s" >>"$out/sync.txt"
    done
done
python3 - "$out/sync.txt" <<'EOF' | tee "$out/sync.md"
import sys
print("| model | schedule | m | async step ms | --sync step ms | overlap speed-up |")
print("|---|---|---|---|---|---|")
for l in open(sys.argv[1]):
    model, m, a, s = l.split()
    print("| %s | 1f1b | %s | %.3f | %.3f | %.2fx |" % (model, m, float(a), float(s), float(s) / float(a)))
EOF

python3 - "$out" "$gpu" "$n_gpu" "$p" "$commit" "$date" <<'EOF'
import json, sys, os
out, gpu, n_gpu, p, commit, date = sys.argv[1:]
lines = ["# ppsched benchmark", "", "%sx %s, pipeline over %s GPUs, commit %s, %s" % (n_gpu, gpu, p, commit, date), ""]
for model in ("reference", "small"):
    path = os.path.join(out, "compare-%s.json" % model)
    if not os.path.exists(path):
        continue
    runs = json.load(open(path))
    lines += ["## %s model" % model, "",
              "| schedule | p | m | step ms | p10 | p90 | tokens/s | TFLOP/s | bubble % | simulated % | theory % | peak mem GiB | peak in-flight |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        pct = lambda v: "-" if v is None else "%.1f" % (100 * v)
        mem = max(d["peak_mem_bytes"] or 0 for d in r["per_device"]) / 2**30
        infl = max(d["peak_inflight_microbatches"] or 0 for d in r["per_device"])
        lines.append("| %s | %d | %d | %.2f | %.2f | %.2f | %.0f | %.1f | %s | %s | %s | %.1f | %d |" % (
            r["schedule"], r["devices"], r["micro_batches"], r["step_ms"], r["step_ms_p10"], r["step_ms_p90"],
            r["tokens_per_s"], r["tflops"], pct(r["bubble"]), pct(r["bubble_simulated"]), pct(r["bubble_theory"]), mem, infl))
    lines.append("")
for name, title in (("timing.md", "Timing overhead"), ("sync.md", "Overlap vs host sync")):
    path = os.path.join(out, name)
    if os.path.exists(path):
        lines += ["## " + title, "", open(path).read().strip(), ""]
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
echo "# results: $out"
