#!/bin/sh
# check_bench_shape.sh — the part of `make bench-peer SHAPE=` that runs without a GPU:
# bench/peer_shape.sh, which reads a model preset's shape from ppsched for torch_peer.py. Its line
# for each preset is ppsched's own resolved config (a shipped schedules/NAME-1f1b.yaml giving p and
# m), an unknown name exits 2 with ppsched's message, and the scripts that take a preset parse.
# PP_BUILD names the build folder; prints the summary line tests/run_tests.sh reads.
P=${PP_BUILD:-build}/ppsched
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
passed=0 failed=0

# shape NAME P WANT: peer_shape.sh's line for NAME with P devices offered.
shape() {
    got=$(sh "$root/bench/peer_shape.sh" "$P" "$1" "$2" 2>"$tmp/err")
    rc=$?
    if [ $rc -eq 0 ] && [ "$got" = "$3" ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "  FAIL peer_shape.sh $1 $2 (exit $rc): got '$got', want '$3'"
        sed 's/^/    /' "$tmp/err" | head -3
    fi
}

#     name      P  p m  b layers hidden heads seq vocab
shape 7b        2 "4 16 1 32 4096 32 4096 32000"
shape 13b       4 "8 32 1 40 5120 40 4096 32000"
shape small     2 "2 8 2 16 512 8 256 8192"
shape reference 4 "4 8 4 24 1024 16 1024 8192"

sh "$root/bench/peer_shape.sh" "$P" 70b >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] &&
    grep -q "^--set model=70b: unknown preset '70b' (allowed: reference, small, 7b, 13b)$" "$tmp/err"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "  FAIL peer_shape.sh 70b: exit $rc (want 2), stderr: $(cat "$tmp/err")"
fi

for f in run_peer.sh peer_shape.sh run_one_gpu.sh predict_check.sh; do
    if sh -n "$root/bench/$f"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "  FAIL sh -n bench/$f"
    fi
done

rm -rf "$tmp"
echo "check_bench_shape: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
