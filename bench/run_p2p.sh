#!/bin/sh
# run_p2p.sh BUILD [OUTDIR] — `make bench-p2p`: what one boundary costs on each transport and
# NCCL knob, and what the 1F1B and ZB-V steps cost on each transport setting, in one call.
#
#   1. bench_p2p between GPUs 0 and 1: every transport and knob at 1-64 MiB, with the GEMM
#      slowdown at 16 and 64 MiB (p2p-0-1.txt); with 4 GPUs or more also 0 -> 2 and 0 -> 3 at 4,
#      16 and 64 MiB (peer, nccl, nccl at maxCTAs 4), in case their links differ (topo.txt holds
#      nvidia-smi topo -m). Every JSON line goes to p2p.jsonl.
#   2. schedules/1f1b.yaml and schedules/zb-v.yaml on p = min(4, GPUs) devices, m = 32, once per
#      transport setting below: one `ppsched compare` of both files per setting (steps/NAME.json),
#      after the same with --simulate (steps/NAME.sim.json): that is the prediction, and the
#      check: a setting whose keys this ppsched refuses is skipped, saying why (skipped.txt).
#      The settings: peer with and without priorities; ipc; nccl as shipped; nccl as it ran before the
#      levers ("today": one communicator per device, no wait for the peer, NCCL's own CTAs and
#      policy, no priorities); today with each lever alone (pair communicators, wait_for_peer,
#      max_ctas = each of P2P_CTAS, default 2,4,8, cta_policy efficiency and zero, priorities);
#      and, where P2P_TOGETHER gives --set options, that combination too (what ships is `nccl`:
#      pair, wait on, NCCL's own CTAs, priorities on).
#   3. mpirun -np p of schedules/1f1b.yaml as shipped (no transport set), where ppsched was built
#      with MPI and mpirun is found (steps/mpirun.json).
#
# Then one table (steps.md): schedule, setting, measured step ms, device 0's compute busy ms, each
# device's idle ms waiting on communication, the simulator's step ms for the same setting and its
# error. Results go to OUTDIR (default bench/results/<date>-<N>x<gpu>-<commit>-p2p/), with
# summary.md naming the device, date and commit (PPSCHED_COMMIT names the commit where the tree
# has no .git). The simulator prices the GPU found (h100, h200, a100 or b200 by its name;
# P2P_SIM_GPU overrides). Every measured run is under `timeout` where it exists.
# Exit: 0 ok; 2 a missing program or fewer than 2 GPUs (nothing ran); 1 when a run failed (the
# others still ran).
set -eu
build=${1:-build}
ppsched=$build/ppsched
bench=$build/bench/bench_p2p
for f in "$ppsched" "$bench"; do
    [ -x "$f" ] || { echo "run_p2p.sh: $f not built (make $f)" >&2; exit 2; }
done
command -v python3 >/dev/null 2>&1 || { echo "run_p2p.sh: python3 is needed for the tables" >&2; exit 2; }
n_gpu=0
command -v nvidia-smi >/dev/null 2>&1 && n_gpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "$n_gpu" -lt 2 ]; then
    echo "run_p2p.sh: $n_gpu GPU(s) found: make bench-p2p measures a boundary between 2 GPUs." >&2
    exit 2
fi
p=$n_gpu
[ "$p" -gt 4 ] && p=4
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
gpu_tag=$(echo "$gpu" | sed 's/NVIDIA //; s/[^A-Za-z0-9]/-/g; s/--*/-/g; s/-$//')
case $gpu in
*H200*) sim_gpu=h200 ;;
*A100*) sim_gpu=a100 ;;
*B200*) sim_gpu=b200 ;;
*) sim_gpu=h100 ;;
esac
sim_gpu=${P2P_SIM_GPU:-$sim_gpu}
commit=${PPSCHED_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
date=$(date -u +%Y-%m-%d)
out=${2:-bench/results/$date-${n_gpu}x$gpu_tag-$commit-p2p}
mkdir -p "$out/steps"
: >"$out/skipped.txt"
: >"$out/failed.txt"
: >"$out/p2p.jsonl"
to=""
command -v timeout >/dev/null 2>&1 && to="timeout 900"
# NVLink SHARP (multicast) stays off: send/recv never uses it, and these hosts' GPUs are shared.
export NCCL_NVLS_ENABLE=0
echo "# make bench-p2p: ${n_gpu}x $gpu (steps over $p), commit $commit, $date -> $out"
nvidia-smi topo -m >"$out/topo.txt" 2>&1 || true

# fail WHAT: one failed run, remembered (the script goes on and exits 1 at the end).
fail() {
    echo "  FAIL $*"
    echo "$*" >>"$out/failed.txt"
}

# tee_run FILE CMD...: CMD's output on the terminal and in FILE; its exit status in $rc.
tee_run() {
    f=$1
    shift
    { rc_=0; "$@" 2>&1 </dev/null || rc_=$?; echo "$rc_" >"$out/.rc"; } | tee "$f"
    rc=$(cat "$out/.rc")
    rm -f "$out/.rc"
}

# 1. one boundary, every transport and knob
echo "## bench_p2p: GPU 0 -> GPU 1, every transport and knob"
# shellcheck disable=SC2086
tee_run "$out/p2p-0-1.txt" $to "$bench" --src 0 --dst 1
[ "$rc" -eq 0 ] || fail "bench_p2p 0 -> 1: exit $rc"
if [ "$n_gpu" -ge 4 ]; then
    for d in 2 3; do
        echo "## bench_p2p: GPU 0 -> GPU $d, a few sizes"
        # shellcheck disable=SC2086
        tee_run "$out/p2p-0-$d.txt" $to "$bench" --src 0 --dst "$d" --sizes 4,16,64 \
            --slowdown 16 --variants peer,nccl,nccl-ctas4
        [ "$rc" -eq 0 ] || fail "bench_p2p 0 -> $d: exit $rc"
    done
fi
cat "$out"/p2p-0-*.txt | grep '^{' >>"$out/p2p.jsonl" || true

# 2. the steps, one `compare` of both schedules per transport setting
files="schedules/1f1b.yaml schedules/zb-v.yaml"
common="--set pipeline.micro_batches=32 --set pipeline.devices=$p --quiet"
levers="nccl.communicators=device nccl.wait_for_peer=off nccl.max_ctas=0 nccl.cta_policy=default
run.priorities=off"

# today_with [KEY=VALUE]: the --set options of nccl before the levers, with KEY set to VALUE.
today_with() {
    s="--set pipeline.transport=nccl"
    for kv in $levers; do
        [ $# -gt 0 ] && [ "${kv%%=*}" = "${1%%=*}" ] && kv=$1
        s="$s --set $kv"
    done
    echo "$s"
}

# The settings, one a line: NAME<TAB>--set options.
tab=$(printf '\t')
{
    echo "peer${tab}--set pipeline.transport=peer"
    echo "peer-noprio${tab}--set pipeline.transport=peer --set run.priorities=off"
    echo "ipc${tab}--set pipeline.transport=ipc"
    echo "nccl${tab}--set pipeline.transport=nccl"
    echo "nccl-today${tab}$(today_with)"
    echo "today+pair${tab}$(today_with nccl.communicators=pair)"
    echo "today+wait${tab}$(today_with nccl.wait_for_peer=on)"
    for n in $(echo "${P2P_CTAS:-2,4,8}" | tr ',' ' '); do
        echo "today+ctas$n${tab}$(today_with "nccl.max_ctas=$n")"
    done
    echo "today+efficiency${tab}$(today_with nccl.cta_policy=efficiency)"
    echo "today+zero${tab}$(today_with nccl.cta_policy=zero)"
    echo "today+prio${tab}$(today_with run.priorities=on)"
    [ -z "${P2P_TOGETHER:-}" ] || echo "nccl-together${tab}$P2P_TOGETHER"
} >"$out/steps/settings.tsv"

# step NAME SETS: simulate (the check and the prediction), then measure.
step() {
    name=$1 sets=$2
    # shellcheck disable=SC2086
    if ! "$ppsched" compare $files $common $sets --simulate --gpu "$sim_gpu" --json \
        >"$out/steps/$name.sim.json" 2>"$out/steps/$name.sim.err" </dev/null; then
        why=$(grep -v '^ppsched: compare:' "$out/steps/$name.sim.err" | head -n 1)
        echo "  skip $name: ${why:-refused}"
        printf '%s\t%s\n' "$name" "${why:-refused}" >>"$out/skipped.txt"
        rm -f "$out/steps/$name.sim.json"
        return 0
    fi
    echo "  $name: $sets"
    # shellcheck disable=SC2086
    if $to "$ppsched" compare $files $common $sets --json >"$out/steps/$name.json" \
        2>"$out/steps/$name.err" </dev/null; then :; else
        r=$?
        fail "steps $name: exit $r: $(grep -v '^ *$' "$out/steps/$name.err" | tail -n 1)"
        rm -f "$out/steps/$name.json"
    fi
}

echo "## steps: 1F1B and ZB-V, p = $p, m = 32, one compare per transport setting"
while IFS="$tab" read -r name sets; do
    step "$name" "$sets"
done <"$out/steps/settings.tsv"

# 3. mpirun -np p of the shipped schedule, no transport set
mpirun=$(command -v mpirun 2>/dev/null || true)
if [ -n "$mpirun" ] && grep -q '^MPI := on' "$build/config.mk" 2>/dev/null; then
    echo "## mpirun -np $p schedules/1f1b.yaml (as shipped)"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    xenv=""
    "$mpirun" --version 2>/dev/null | grep -q 'Open MPI' && xenv="-x NCCL_NVLS_ENABLE"
    # shellcheck disable=SC2086
    "$ppsched" schedules/1f1b.yaml $common --simulate --gpu "$sim_gpu" --json \
        >"$out/steps/mpirun.sim.json" 2>"$out/steps/mpirun.sim.err" </dev/null || true
    # shellcheck disable=SC2086
    if $to "$mpirun" -np "$p" $xenv "$ppsched" schedules/1f1b.yaml $common --json \
        >"$out/steps/mpirun.json" 2>"$out/steps/mpirun.err" </dev/null; then
        echo "  mpirun: done"
    else
        r=$?
        why=$(grep -v '^ *$' "$out/steps/mpirun.err" | grep -v '^--' | head -n 1)
        rm -f "$out/steps/mpirun.json"
        if [ "$r" -eq 2 ]; then
            echo "  mpirun refused the shipped schedule (exit 2): $why"
            printf 'mpirun\trefused: %s\n' "$why" >>"$out/skipped.txt"
        else
            fail "mpirun -np $p: exit $r: $why"
        fi
    fi
else
    echo "## mpirun: skipped (no mpirun, or ppsched built without MPI)"
fi

python3 - "$out" "$gpu" "$n_gpu" "$p" "$commit" "$date" "$sim_gpu" <<'EOF'
import json, os, sys
out, gpu, n_gpu, p, commit, date, sim_gpu = sys.argv[1:]
steps = os.path.join(out, "steps")

def load(name):
    try:
        with open(os.path.join(steps, name)) as f:
            v = json.load(f)
        return v if isinstance(v, list) else [v]
    except (OSError, ValueError):
        return None

settings = [l.rstrip("\n").split("\t", 1) for l in open(os.path.join(steps, "settings.tsv"))]
names = [s[0] for s in settings] + ["mpirun"]
def f1(v):
    return "-" if v is None else "%.1f" % v

rows = []
for name in names:
    meas, sim = load(name + ".json"), load(name + ".sim.json")
    if meas is None:
        continue
    pred = {r["schedule"]: r.get("step_ms") for r in sim or []}
    for r in meas:
        dev = r.get("per_device") or []
        comm = "/".join(f1((d.get("idle_ms_by_reason") or {}).get("comm")) for d in dev) or "-"
        st, pr = r.get("step_ms"), pred.get(r["schedule"])
        err = "%+.1f" % (100.0 * (pr - st) / st) if pr and st else "-"
        rows.append((r["schedule"], name, f1(st), f1(dev[0].get("busy_ms") if dev else None),
                     comm, f1(pr), err))
rows.sort(key=lambda x: x[0])
head = ("schedule", "setting", "step ms", "dev0 busy ms", "comm idle ms (per device)",
        "predicted ms", "error %")
fmt = "%-8s %-17s %9s %12s %26s %12s %8s"
print("\n" + fmt % head)
md = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
for row in rows:
    print(fmt % row)
    md.append("| " + " | ".join(row) + " |")
skipped = [l.rstrip("\n").split("\t", 1) for l in open(os.path.join(out, "skipped.txt")) if l.strip()]
failed = [l.strip() for l in open(os.path.join(out, "failed.txt")) if l.strip()]
legend = ["- `%s`: `%s`" % (s[0], s[1]) for s in settings]
notes = ["- %s: %s" % (s[0], s[1]) for s in skipped] + ["- failed: %s" % f for f in failed]
with open(os.path.join(out, "steps.md"), "w") as f:
    f.write("\n".join(md) + "\n")
p2p = []
for name in sorted(os.listdir(out)):
    if name.startswith("p2p-0-") and name.endswith(".txt"):
        p2p += [l.rstrip("\n") for l in open(os.path.join(out, name)) if not l.startswith("{")]
lines = ["# make bench-p2p", "",
         "%sx %s, steps over %s GPUs, m = 32, commit %s, %s; predictions priced on `--gpu %s`"
         % (n_gpu, gpu, p, commit, date, sim_gpu), "",
         "## One boundary (bench_p2p)", "", "```"] + p2p + ["```", "",
         "## 1F1B and ZB-V on each transport setting", ""] + md + ["", "Settings (`--set` options "
         "beside `pipeline.micro_batches=32 pipeline.devices=%s`):" % p, ""] + legend
if notes:
    lines += ["", "Not measured:", ""] + notes
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
for n in notes:
    print(n)
EOF
echo "# results: $out"
[ ! -s "$out/failed.txt" ] || exit 1
