#!/bin/sh
# check_bench_p2p.sh — `make bench-p2p` without measuring anything: bench_p2p's command line (its
# help lists every variant; bad usage and a boundary without two GPUs exit 2, the GPUs hidden),
# and bench/run_p2p.sh driven by stand-ins (an nvidia-smi that reports N GPUs, a bench_p2p that
# prints a row, or fails; ppsched always under --simulate; an mpirun that runs one process): fewer
# than 2 GPUs exit 2; every transport setting ends as a row of the steps table or as a skip with
# its reason; 4 GPUs add the pairs 0 -> 2 and 0 -> 3; a failed bench exits 1 and the steps still
# run. Run by make test (PP_BUILD names the build folder); prints the summary line
# tests/run_tests.sh reads.
. "$(dirname "$0")/bench_check_lib.sh"
CUDA_VISIBLE_DEVICES=
export CUDA_VISIBLE_DEVICES

# 1. bench_p2p's command line, where it was built (with CUDA)
b=$build/bench/bench_p2p
if [ -x "$b" ]; then
    "$b" --help >"$tmp/help" 2>&1
    expect "bench_p2p --help exits 0" [ $? -eq 0 ]
    for v in peer peer-prio nccl nccl-ctas1 nccl-ctas8 nccl-efficiency nccl-zero nccl-registered; do
        expect "bench_p2p --help lists $v" grep -q "^ *$v " "$tmp/help"
    done
    for args in "--bogus" "--iters 0" "--sizes 1,x" "--variants nope" "--src 1 --dst 1" "--dst"; do
        # shellcheck disable=SC2086
        "$b" $args >/dev/null 2>"$tmp/err"
        expect "bench_p2p $args exits 2" [ $? -eq 2 ]
        expect "bench_p2p $args says why" grep -q '^bench_p2p: ' "$tmp/err"
    done
    "$b" >/dev/null 2>"$tmp/err"
    expect "bench_p2p with no GPU visible exits 2" [ $? -eq 2 ]
    expect "bench_p2p with no GPU visible says a boundary needs 2" grep -q 'needs 2' "$tmp/err"
else
    echo "  SKIP bench_p2p's command line: $b not built (CUDA=off)"
    skipped=$((skipped + 1))
fi

# 2. run_p2p.sh with stand-ins
fake=$tmp/fake
mkdir -p "$fake/bin" "$fake/build/bench"
cat >"$fake/bin/nvidia-smi" <<'EOF'
#!/bin/sh
case $1 in
-L) i=0; while [ "$i" -lt "$FAKE_GPUS" ]; do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-$i)"; i=$((i + 1)); done ;;
--query-gpu=name) echo "NVIDIA H100 80GB HBM3" ;;
*) echo "GPU0 X" ;;
esac
EOF
cat >"$fake/build/bench/bench_p2p" <<'EOF'
#!/bin/sh
echo "# bench_p2p stand-in $*" >>"$FAKE_LOG"
echo "  peer      default                 16     50.00     49.00     52.00    335.5    380.0      0.5      0.4"
echo '{"bench":"p2p","variant":"peer","mib":16}'
exit "${FAKE_BENCH_RC:-0}"
EOF
cat >"$fake/build/ppsched" <<EOF
#!/bin/sh
case " \$* " in *" --simulate "*) exec "$build/ppsched" "\$@" ;; esac
exec "$build/ppsched" "\$@" --simulate
EOF
cat >"$fake/bin/mpirun" <<'EOF'
#!/bin/sh
case $1 in --version) echo "mpirun (Open MPI) 4.1"; exit 0 ;; esac
while [ $# -gt 0 ]; do
    case $1 in -np | -x) shift 2 ;; *) break ;; esac
done
exec "$@"
EOF
echo "MPI := on" >"$fake/build/config.mk"
chmod +x "$fake/bin/nvidia-smi" "$fake/bin/mpirun" "$fake/build/bench/bench_p2p" "$fake/build/ppsched"

# p2p GPUS OUTDIR [BENCH_RC]: run_p2p.sh on the stand-ins; its exit status in $rc, its output in
# OUTDIR.log.
p2p() {
    (cd "$root" && PATH="$fake/bin:$PATH" FAKE_GPUS=$1 FAKE_LOG="$2.calls" FAKE_BENCH_RC=${3:-0} \
        PPSCHED_COMMIT=abc1234 sh bench/run_p2p.sh "$fake/build" "$2") >"$2.log" 2>&1
    rc=$?
}

p2p 1 "$tmp/one"
expect "run_p2p.sh on 1 GPU exits 2" [ "$rc" -eq 2 ]
expect "run_p2p.sh on 1 GPU says it needs 2" grep -q '1 GPU(s) found' "$tmp/one.log"
expect "run_p2p.sh on 1 GPU writes nothing" [ ! -e "$tmp/one" ]

p2p 2 "$tmp/two"
expect "run_p2p.sh on 2 GPUs exits 0" [ "$rc" -eq 0 ]
[ "$rc" -eq 0 ] || sed 's/^/    /' "$tmp/two.log" | tail -n 20
for s in 1f1b zb-v; do
    for t in peer nccl; do
        expect "the steps table has $s over $t" grep -q "^| $s | $t | [0-9]" "$tmp/two/steps.md"
    done
done
# Every setting is measured or skipped with a reason; none vanishes.
while IFS="$(printf '\t')" read -r name sets; do
    if grep -q "^| [^|]* | $name | [0-9]" "$tmp/two/steps.md" ||
        grep -q "^$name	..*" "$tmp/two/skipped.txt"; then
        passed=$((passed + 1))
    else
        echo "  FAIL setting $name ($sets): neither measured nor skipped with a reason"
        failed=$((failed + 1))
    fi
done <"$tmp/two/steps/settings.tsv"
expect "the shipped 1f1b under mpirun is a row" grep -q '^| 1f1b | mpirun | [0-9]' "$tmp/two/steps.md"
expect "summary.md names the GPU and the commit" \
    grep -q '^2x NVIDIA H100 80GB HBM3, .* commit abc1234' "$tmp/two/summary.md"
expect "p2p.jsonl holds the bench's JSON lines" grep -q '"bench":"p2p"' "$tmp/two/p2p.jsonl"
expect "2 GPUs: one boundary, 0 -> 1" [ "$(grep -c 'stand-in' "$tmp/two.calls")" -eq 1 ]

p2p 4 "$tmp/four"
expect "run_p2p.sh on 4 GPUs exits 0" [ "$rc" -eq 0 ]
expect "4 GPUs: 0 -> 2 and 0 -> 3 too" grep -q -- '--src 0 --dst 3 --sizes' "$tmp/four.calls"
expect "4 GPUs: the steps over 4 devices" grep -q 'steps over 4' "$tmp/four/summary.md"

p2p 2 "$tmp/bad" 1
expect "a failed bench_p2p: run_p2p.sh exits 1" [ "$rc" -eq 1 ]
expect "a failed bench_p2p is named" grep -q '^bench_p2p 0 -> 1: exit 1' "$tmp/bad/failed.txt"
expect "a failed bench_p2p: the steps still ran" grep -q '^| 1f1b | peer | [0-9]' "$tmp/bad/steps.md"

echo "check_bench_p2p: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
