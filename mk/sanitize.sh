#!/bin/sh
# sanitize.sh SANITIZER TEST... — every GPU test program under compute-sanitizer memcheck, then
# racecheck (shared-memory hazards). A run passes when the program exits 0 and the tool's summary
# reports nothing: memcheck "ERROR SUMMARY: 0 errors", racecheck "0 hazards displayed" (racecheck
# counts warnings apart from errors, and --error-exitcode sees only errors). Prints one line per
# run and the totals; exit status 1 when any run reported something.
san=$1
shift
if [ -z "$san" ] || ! [ -x "$san" ]; then
    echo "make sanitize: compute-sanitizer not found; install the CUDA toolkit's compute-sanitizer" \
        "or pass SANITIZER=/path/to/compute-sanitizer" >&2
    exit 2
fi
bad=0 runs=0
for tool in memcheck racecheck; do
    for t in "$@"; do
        log=$(mktemp)
        "$san" --tool "$tool" --error-exitcode 3 "$t" >"$log" 2>&1
        rc=$?
        case $tool in
        memcheck) clean='ERROR SUMMARY: 0 errors' ;;
        racecheck) clean='RACECHECK SUMMARY: 0 hazards displayed' ;;
        esac
        summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)
        tests=$(grep -E '^[A-Za-z0-9_]+: [0-9]+ passed' "$log" | tail -n 1)
        runs=$((runs + 1))
        if [ "$rc" -ne 0 ] || ! grep -q "$clean" "$log"; then
            cat "$log"
            echo "FAIL $tool $(basename "$t") (exit $rc): $summary"
            bad=$((bad + 1))
        else
            echo "ok   $tool $(basename "$t"): $summary; $tests"
        fi
        rm -f "$log"
    done
done
echo "sanitize: $runs runs, $bad with reports"
[ "$bad" -eq 0 ]
