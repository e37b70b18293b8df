#!/bin/sh
# run_tests.sh BUILD CPU_TEST... -- GPU_TEST...
# Runs each test program, reads its summary line ("name: N passed, N failed, N skipped"), and
# prints the totals last. A program that exits non-zero without a summary line (a crash, a
# sanitizer report) counts as one failure. GPU test programs skip themselves when no device is
# present; they print why. Exit status: 1 when anything failed.
build=$1
shift
passed=0 failed=0 skipped=0
phase=cpu
for t in "$@"; do
    if [ "$t" = "--" ]; then phase=gpu; continue; fi
    log=$(mktemp)
    "$t" >"$log" 2>&1
    rc=$?
    summary=$(grep -E '^[A-Za-z0-9_]+: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' "$log" | tail -n 1)
    if [ -z "$summary" ]; then
        cat "$log"
        echo "$(basename "$t"): crashed or printed no summary (exit $rc)"
        failed=$((failed + 1))
    else
        p=$(echo "$summary" | sed 's/.*: \([0-9]*\) passed.*/\1/')
        f=$(echo "$summary" | sed 's/.* \([0-9]*\) failed.*/\1/')
        s=$(echo "$summary" | sed 's/.* \([0-9]*\) skipped.*/\1/')
        if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
        if [ "$f" -ne 0 ] || [ -n "${VERBOSE:-}" ]; then cat "$log"; else grep -E '^  SKIP' "$log"; fi
        [ "$f" -ne 0 ] || echo "$summary"
        passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    fi
    rm -f "$log"
done
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
