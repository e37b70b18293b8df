#!/bin/sh
# check_sanitize_split.sh BUILD — `make sanitize` can split a program into one process per test
# case, each on one GPU: the harness lists a program's cases (PPSCHED_TEST_LIST=1) and runs one
# alone (PPSCHED_TEST_CASE), and mk/sanitize.sh, driven here by a stand-in for compute-sanitizer
# (no GPU needed), runs every case of a split program once per tool, deals the runs round the
# GPUs, names each run by program/case, and reports a failing case as a failure. Prints the
# summary line tests/run_tests.sh reads.
build=${1:-${PP_BUILD:-build}}
root=$(cd "$(dirname "$0")/.." && pwd)
prog=$build/tests/cpu/test_lower
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
passed=0 failed=0
ok() { passed=$((passed + 1)); }
no() { failed=$((failed + 1)); echo "  FAIL $*"; [ -f "$tmp/out" ] && sed 's/^/    /' "$tmp/out"; }

if [ ! -x "$prog" ]; then
    echo "check_sanitize_split: $prog not built"
    echo "check_sanitize_split: 0 passed, 1 failed, 0 skipped"
    exit 1
fi

# The harness: a list of every case, and one case run alone.
PPSCHED_TEST_LIST=1 "$prog" >"$tmp/out" 2>&1
n=$(grep -c '^CASE ' "$tmp/out")
if [ "$n" -ge 2 ] && grep -q ': 0 passed, 0 failed, 0 skipped' "$tmp/out"; then ok; else no "list: $n cases"; fi
first=$(sed -n 's/^CASE //p' "$tmp/out" | head -n 1)
PPSCHED_TEST_CASE=$first "$prog" >"$tmp/out" 2>&1
if grep -q ': 1 passed, 0 failed, 0 skipped' "$tmp/out"; then ok; else no "case $first alone"; fi

# The stand-in sanitizer: runs the program, then prints the tool's clean summary and the GPU it
# was given; with FAKE_FAIL=case it makes that case's run fail.
cat >"$tmp/san" <<'SAN'
#!/bin/sh
[ "$1" = "--version" ] && { echo "Version 0.0 (stand-in)"; exit 0; }
tool=$2
shift 4
while [ "${1#--}" != "$1" ]; do shift 2; done
"$@"
rc=$?
[ -n "$FAKE_FAIL" ] && [ "$PPSCHED_TEST_CASE" = "$FAKE_FAIL" ] && rc=3
if [ "$tool" = memcheck ]; then echo "= ERROR SUMMARY: 0 errors"; else echo "= RACECHECK SUMMARY: 0 hazards displayed"; fi
echo "gpu $CUDA_VISIBLE_DEVICES"
exit $rc
SAN
chmod +x "$tmp/san"
SANITIZE_GPUS=3 SANITIZE_SPLIT=test_lower sh "$root/mk/sanitize.sh" "$tmp/san" "$prog" >"$tmp/out" 2>&1
rc=$?
runs=$(grep -c '^ok   ' "$tmp/out")
if [ "$rc" -eq 0 ] && [ "$runs" -eq $((2 * n)) ]; then ok; else no "split: exit $rc, $runs runs of $((2 * n))"; fi
if grep -q "^ok   racecheck test_lower/$first: " "$tmp/out"; then ok; else no "run named by its case"; fi
if grep -q "sanitize: $((2 * n)) runs, 0 with reports" "$tmp/out"; then ok; else no "totals"; fi
FAKE_FAIL=$first SANITIZE_GPUS=3 SANITIZE_SPLIT=test_lower sh "$root/mk/sanitize.sh" "$tmp/san" "$prog" >"$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 1 ] && grep -q "^FAIL racecheck test_lower/$first" "$tmp/out" &&
    grep -q '^gpu [0-2]$' "$tmp/out"; then ok; else no "a failing case: exit $rc"; fi
echo "check_sanitize_split: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
