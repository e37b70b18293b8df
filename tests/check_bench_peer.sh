#!/bin/sh
# check_bench_peer.sh — `make bench-peer`'s pipelines without a GPU, PyTorch or Megatron-Core:
# bench/run_peer.sh driven by stand-ins (an nvidia-smi that reports 4 GPUs, a torch package that
# only imports, a torchrun that writes each peer's JSON lines, ppsched always under --simulate).
# Without Megatron-Core the rest runs and the table says how to carry it (PEER=megatron exits 2);
# carried as a wheel (PEER_WHEELS=DIR, bench/peer_wheels.sh --install) it runs beside the others
# and the table's "vs Megatron-Core 1F1B" is its 1F1B step over each row's ppsched step; a peer
# run that fails is rerun without its schedule and the run exits 1; SHAPE=7b hands the shape to
# the Megatron peer, and PEER_MEGATRON_ARGS its arguments. Also bench/megatron_peer.py's and
# bench/peer_wheels.sh's refusals, which need no PyTorch, and, where python3 imports PyTorch and
# Megatron-Core, megatron_peer.py itself on the CPU (tests/megatron_cpu.py). Run by make test
# (PP_BUILD names the build folder); prints the summary line tests/run_tests.sh reads.
. "$(dirname "$0")/bench_check_lib.sh"
CUDA_VISIBLE_DEVICES=
export CUDA_VISIBLE_DEVICES

if ! command -v python3 >/dev/null 2>&1; then
    echo "  SKIP bench-peer's scripts: no python3"
    echo "check_bench_peer: 0 passed, 0 failed, 1 skipped"
    exit 0
fi

# 1. the scripts' refusals, with no PyTorch and no Megatron-Core needed
for f in run_peer.sh peer_wheels.sh; do
    expect "sh -n bench/$f" sh -n "$root/bench/$f"
done
for f in megatron_peer.py peer_table.py torch_peer.py; do
    expect "bench/$f compiles" python3 -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" \
        "$root/bench/$f"
done
mp=$root/bench/megatron_peer.py
python3 "$mp" >/dev/null 2>"$tmp/err"
expect "megatron_peer.py outside torchrun exits 2" [ $? -eq 2 ]
expect "megatron_peer.py outside torchrun says to use torchrun" grep -q 'run under torchrun' "$tmp/err"
python3 "$mp" --schedules zb >/dev/null 2>"$tmp/err"
expect "megatron_peer.py --schedules zb exits 2" [ $? -eq 2 ]
expect "megatron_peer.py --schedules zb names the allowed ones" \
    grep -q "unknown schedule 'zb' (allowed: 1f1b, interleaved)" "$tmp/err"
if python3 -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("megatron") is None)'; then
    echo "  SKIP megatron_peer.py without Megatron-Core: this python3 has it"
    skipped=$((skipped + 1))
else
    WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 python3 "$mp" >/dev/null 2>"$tmp/err"
    expect "megatron_peer.py without Megatron-Core exits 2" [ $? -eq 2 ]
    expect "megatron_peer.py without Megatron-Core says how to carry it" \
        grep -q '^megatron_peer.py: Megatron-Core (megatron.core) is not importable .*bench/peer_wheels.sh DIR.*PEER_WHEELS=DIR' \
        "$tmp/err"
fi
sh "$root/bench/peer_wheels.sh" >/dev/null 2>&1
expect "peer_wheels.sh without a folder exits 2" [ $? -eq 2 ]
sh "$root/bench/peer_wheels.sh" --install "$tmp/none" "$tmp/site" >/dev/null 2>"$tmp/err"
expect "peer_wheels.sh --install from a missing folder exits 2" [ $? -eq 2 ]

# 2. run_peer.sh on stand-ins
if [ ! -x "$build/ppsched" ]; then
    echo "  SKIP run_peer.sh on stand-ins: $build/ppsched not built"
    echo "check_bench_peer: $passed passed, $failed failed, $((skipped + 1)) skipped"
    [ "$failed" -eq 0 ]
    exit
fi
fake=$tmp/fake
mkdir -p "$fake/bin" "$fake/build" "$fake/py/torch/distributed/pipelining" "$fake/py/numpy" \
    "$fake/py/packaging" "$fake/wheels"
cat >"$fake/bin/nvidia-smi" <<'EOF'
#!/bin/sh
case $1 in
-L) for i in 0 1 2 3; do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-$i)"; done ;;
*) echo "NVIDIA H100 80GB HBM3" ;;
esac
EOF
cat >"$fake/build/ppsched" <<EOF
#!/bin/sh
case " \$* " in *" --simulate "*) exec "$build/ppsched" "\$@" ;; esac
exec "$build/ppsched" "\$@" --simulate
EOF
# torchrun: the peer's JSON lines for every schedule and m asked (PyTorch 100 + m ms, Megatron-Core
# 1F1B 50 + m, interleaved 40 + m); FAKE_FAIL=TAG:SCHEDULE fails that peer once it reaches it.
cat >"$fake/bin/torchrun" <<'EOF'
#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write("torchrun " + " ".join(args) + "\n")
nproc = int(next(a.split("=")[1] for a in args if a.startswith("--nproc_per_node=")))
script = next(a for a in args if a.endswith(".py"))
opt = dict(zip(args[args.index(script) + 1::2], args[args.index(script) + 2::2]))
mega = script.endswith("megatron_peer.py")
fail = os.environ.get("FAKE_FAIL", "")
preset = opt.get("--name") or opt["--preset"]
with open(opt["--json"], "w") as out:
    for s in opt["--schedules"].split(","):
        if fail == ("megatron:" if mega else "torch:") + s:
            print("RuntimeError: stand-in failure", file=sys.stderr)
            sys.exit(1)
        for m in [int(x) for x in opt["--micro-batches"].split(",")]:
            step = (50.0 if s == "1f1b" else 40.0) + m if mega else 100.0 + m
            r = {"framework": "megatron-core" if mega else "pytorch", "schedule": s,
                 "preset": preset, "p": nproc, "m": m, "step_ms": step, "tokens_per_s": 1e5,
                 "optimizer": opt["--optimizer"]}
            if mega:
                r.update(spec="local", attention="sdpa (F.scaled_dot_product_attention, causal)",
                         fusions="on", megatron_core_version="0.19.2", te_version=None,
                         optimizer_impl="Float16OptimizerWithFloat16Params(torch.optim.adamw.AdamW)")
            out.write(json.dumps(r) + "\n")
EOF
echo '__version__ = "2.11.0-stand-in"' >"$fake/py/torch/__init__.py"
: >"$fake/py/torch/distributed/__init__.py"
: >"$fake/py/torch/distributed/pipelining/__init__.py"
: >"$fake/py/numpy/__init__.py"
: >"$fake/py/packaging/__init__.py"
chmod +x "$fake/bin/nvidia-smi" "$fake/bin/torchrun" "$fake/build/ppsched"
# a wheel of a stand-in megatron.core, as bench/peer_wheels.sh downloads the real one
python3 - "$fake/wheels/megatron_core-0.19.2-py3-none-any.whl" <<'EOF'
import sys, zipfile
files = {
    "megatron/core/__init__.py": '__version__ = "0.19.2"\n',
    "megatron_core-0.19.2.dist-info/METADATA":
        "Metadata-Version: 2.1\nName: megatron-core\nVersion: 0.19.2\n",
    "megatron_core-0.19.2.dist-info/WHEEL":
        "Wheel-Version: 1.0\nGenerator: stand-in\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
files["megatron_core-0.19.2.dist-info/RECORD"] = "".join(f"{k},,\n" for k in files) + \
    "megatron_core-0.19.2.dist-info/RECORD,,\n"
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for name, text in files.items():
        z.writestr(name, text)
EOF

# peer OUT [VAR=VALUE...]: run_peer.sh on the stand-ins, its output in OUT.log, exit status in $rc.
peer() {
    o=$1
    shift
    (cd "$root" && env PATH="$fake/bin:$PATH" PYTHONPATH="$fake/py" FAKE_LOG="$o.calls" \
        PPSCHED_COMMIT=abc1234 TMPDIR="$tmp" PEER=pipelines "$@" \
        sh bench/run_peer.sh "$fake/build" "$o") >"$o.log" 2>&1
    rc=$?
}

# row OUT PRESET SCHEDULE M: the row of OUT/peer.md as "ppsched|pytorch|megatron|vs pt|vs mc".
row() {
    grep "^| $2 | $3 | $4 |" "$1/peer.md" | awk -F ' *[|] *' '{print $5 "|" $6 "|" $7 "|" $8 "|" $9}'
}

peer "$tmp/without"
expect "without Megatron-Core run_peer.sh exits 0" [ "$rc" -eq 0 ]
[ "$rc" -eq 0 ] || tail -n 15 "$tmp/without.log" | sed 's/^/    /'
expect "without Megatron-Core the table says it was not run and how to carry it" \
    grep -q 'Megatron-Core: not run: python3 cannot import megatron.core (ModuleNotFoundError.*peer_wheels.sh DIR.*PEER_WHEELS=DIR' \
    "$tmp/without/peer.md"
expect "without Megatron-Core no Megatron peer ran" sh -c "! grep -q megatron_peer.py '$tmp/without.calls'"
expect "without Megatron-Core the PyTorch peer ran with AdamW" \
    grep -q 'torch_peer.py --preset reference --schedules gpipe,1f1b,interleaved,zb .*--optimizer adamw' \
    "$tmp/without.calls"
r=$(row "$tmp/without" reference 1f1b 8)
expect "without Megatron-Core a 1f1b row has PyTorch's step and no Megatron-Core's ($r)" \
    sh -c "echo '$r' | grep -q '^[0-9.]*|108.00|-|[0-9.]*x|-\$'"

peer "$tmp/alone" PEER=megatron
expect "PEER=megatron without Megatron-Core exits 2" [ "$rc" -eq 2 ]
expect "PEER=megatron without Megatron-Core says so" grep -q 'Megatron-Core is not importable' "$tmp/alone.log"

peer "$tmp/with" PEER_WHEELS="$fake/wheels"
expect "with PEER_WHEELS run_peer.sh exits 0" [ "$rc" -eq 0 ]
[ "$rc" -eq 0 ] || tail -n 15 "$tmp/with.log" | sed 's/^/    /'
expect "with PEER_WHEELS the Megatron peer ran 1f1b and interleaved" \
    grep -q 'megatron_peer.py --preset small --schedules 1f1b,interleaved --micro-batches 8,32' \
    "$tmp/with.calls"
expect "the table names Megatron-Core's spec and attention" \
    grep -q 'Megatron-Core 0.19.2: local layer spec, attention sdpa' "$tmp/with/peer.md"
expect "the temporary site of the wheels is gone" sh -c "! ls -d '$tmp'/ppsched-peer-site.* 2>/dev/null"
# Every row of peer.md against peer.jsonl: the steps, vs PyTorch and vs Megatron-Core 1F1B.
python3 - "$tmp/with" >"$tmp/rows" 2>&1 <<'EOF'
import json, sys
d = sys.argv[1]
steps = {}
for line in open(d + "/peer.jsonl"):
    r = json.loads(line)
    steps[(r["framework"], r["preset"], r["schedule"], r["m"])] = r["step_ms"]
n = bad = 0
for line in open(d + "/peer.md"):
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(c) != 10 or not c[2].isdigit():
        continue
    preset, s, m = c[0], c[1], int(c[2])
    pp = steps[("ppsched", preset, s, m)]
    pt = steps.get(("pytorch", preset, s, m))
    mc = steps.get(("megatron-core", preset, s, m))
    m1 = steps[("megatron-core", preset, "1f1b", m)]
    want = ["%.2f" % pp, "%.2f" % pt, "%.2f" % mc if mc else "-", "%.2fx" % (pt / pp),
            "%.2fx" % (m1 / pp)]
    want_mc = "%.2f" % ((50.0 if s == "1f1b" else 40.0) + m) if s in ("1f1b", "interleaved") else "-"
    n += 1
    if c[3:8] != want or c[5] != want_mc:
        bad += 1
        print("row %s: got %s, want %s" % (c[:3], c[3:8], want))
print("rows %d bad %d" % (n, bad))
sys.exit(1 if bad or n != 16 else 0)
EOF
rc=$?
expect "every row's steps and ratios match the runs ($(tail -n 1 "$tmp/rows"))" [ "$rc" -eq 0 ]
[ "$rc" -eq 0 ] || sed 's/^/    /' "$tmp/rows" | head -5
# shellcheck disable=SC2016
expect "gpipe and zb rows have no Megatron-Core step" \
    sh -c "[ \"\$(grep -c '^| reference | \(gpipe\|zb\) | [0-9]* | [0-9.]* | [0-9.]* | - |' '$tmp/with/peer.md')\" -eq 4 ]"
expect "peer.jsonl holds Megatron-Core's records" grep -q '"framework": "megatron-core"' "$tmp/with/peer.jsonl"

peer "$tmp/fail" PEER_WHEELS="$fake/wheels" FAKE_FAIL=megatron:interleaved
expect "a failing Megatron-Core schedule: run_peer.sh exits 1" [ "$rc" -eq 1 ]
expect "a failing Megatron-Core schedule is named" \
    grep -q '# torchrun megatron reference attempt 1 failed (exit 1, .*RuntimeError: stand-in failure' \
    "$tmp/fail.log"
r=$(row "$tmp/fail" reference interleaved 8)
expect "a failing Megatron-Core interleaved: its cell is empty, vs its 1F1B stays ($r)" \
    sh -c "echo '$r' | grep -q '^[0-9.]*|108.00|-|[0-9.]*x|[0-9.]*x\$'"

peer "$tmp/seven" PEER=megatron SHAPE=7b PEER_WHEELS="$fake/wheels" PEER_MEGATRON_ARGS="--fusions off"
expect "SHAPE=7b PEER=megatron exits 0" [ "$rc" -eq 0 ]
[ "$rc" -eq 0 ] || tail -n 15 "$tmp/seven.log" | sed 's/^/    /'
expect "SHAPE=7b hands the shape to the Megatron peer on 4 GPUs, m = 16" \
    grep -q -- '--nproc_per_node=4 bench/megatron_peer.py --name 7b --layers 32 --hidden 4096 --heads 32 --seq-len 4096 --vocab 32000 --micro-batch-size 1 --schedules 1f1b,interleaved --micro-batches 16' \
    "$tmp/seven.calls"
expect "PEER_MEGATRON_ARGS reaches the Megatron peer" \
    grep -q -- 'megatron_peer.py .*--optimizer adamw --fusions off --json' "$tmp/seven.calls"
expect "PEER=megatron runs no PyTorch peer" sh -c "! grep -q torch_peer.py '$tmp/seven.calls'"
expect "SHAPE=7b: the 1f1b row has vs Megatron-Core 1F1B" \
    grep -q '^| 7b | 1f1b | 16 | [0-9.]* | - | 66.00 | - | [0-9.]*x |' "$tmp/seven/peer.md"
expect "SHAPE=7b: ppsched's ZB-V alone, against Megatron-Core's 1F1B" \
    grep -q '^| 7b | zb-v | 16 | [0-9.]* | - | - | - | [0-9.]*x |' "$tmp/seven/peer.md"
expect "SHAPE=7b: no peer is asked for ZB-V" \
    sh -c "grep -q -- '--schedules' '$tmp/seven.calls' && ! grep -q -- '--schedules [^ ]*zb-v' '$tmp/seven.calls'"

# 3. megatron_peer.py itself, on the CPU (tests/megatron_cpu.py), where python3 imports PyTorch
# and Megatron-Core (not where the tests usually run: then skipped)
if python3 -c 'import torch, megatron.core' >/dev/null 2>&1; then
    # cpu NAME ARGS...: two ranks of megatron_cpu.py at the tiny shape, m = 4, 1 + 1 steps.
    cpu() {
        n=$1
        shift
        (cd "$root" && OMP_NUM_THREADS=1 timeout 300 python3 -m torch.distributed.run \
            --standalone --nproc_per_node=2 tests/megatron_cpu.py bench --preset tiny \
            --device cpu --micro-batches 4 --steps 1 --warmup 1 --fusions off \
            --json "$tmp/$n.jsonl" "$@") >"$tmp/$n.log" 2>&1
        rc=$?
    }
    # loss NAME SCHEDULE: the loss of that schedule's line, 4 decimals.
    loss() {
        python3 -c "import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r['schedule'] == sys.argv[2]: print('%.4f' % r['loss'])" "$tmp/$1.jsonl" "$2"
    }
    cpu sdpa --optimizer adamw --print-groups
    expect "megatron_peer.py on the CPU exits 0" [ "$rc" -eq 0 ]
    [ "$rc" -eq 0 ] || grep -E 'Error|error' "$tmp/sdpa.log" | head -n 5 | sed 's/^/    /'
    expect "both schedules ran, with ppsched's parameter count (434816)" \
        [ "$(grep -c '"parameters": 434816' "$tmp/sdpa.jsonl")" -eq 2 ]
    expect "AdamW: decay 0.1 on matrices" \
        grep -q '^group lr 0.0003 betas (0.9, 0.95) eps 1e-08 weight_decay 0.1 dims \[2\]$' "$tmp/sdpa.log"
    expect "AdamW: no decay on biases and LayerNorm" \
        grep -q '^group lr 0.0003 betas (0.9, 0.95) eps 1e-08 weight_decay 0.0 dims \[1\]$' "$tmp/sdpa.log"
    cpu f32-sdpa --optimizer adamw --dtype fp32 --attention sdpa
    cpu f32-local --optimizer adamw --dtype fp32 --attention local
    for s in 1f1b interleaved; do
        a=$(loss f32-sdpa $s) b=$(loss f32-local $s)
        expect "fp32 $s: the SDPA core attention and Megatron's own give one loss ($a, $b)" \
            [ "${a:-none}" = "${b:-other}" ]
    done
else
    echo "  SKIP megatron_peer.py on the CPU: python3 does not import torch and megatron.core"
    skipped=$((skipped + 1))
fi

echo "check_bench_peer: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
