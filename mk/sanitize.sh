#!/bin/sh
# sanitize.sh SANITIZER TEST... — every GPU test program under compute-sanitizer memcheck and
# racecheck (shared-memory hazards), in bounded time: `make sanitize`.
#
# - The programs run their reduced cases (PPSCHED_TEST_QUICK=1, tests/check.h): smaller shapes,
#   fewer cases and steps, every kernel path still taken; the tools slow kernels 10-100x.
# - racecheck traces every kernel, cuBLAS's included: with cuBLAS's Hopper GEMMs excluded
#   (--kernel-name-exclude kns=nvjet, kns=sm90_xmma; SANITIZE_RACECHECK_SKIP names them)
#   compute-sanitizer 2025.3 stops every program that runs one with "Internal Sanitizer Error:
#   The Sanitizer failed to handle a hardware exception" (on an H100, bench/NOTES.md), so the
#   exclusion is off by default. Racecheck's reports inside those kernels (they order shared memory with
#   asynchronous barriers racecheck does not follow) are listed apart, not counted (below).
# - The programs named in SANITIZE_SPLIT (default: test_pipeline test_profile, whose whole runs
#   outlast any bound under racecheck) run one test case per process (PPSCHED_TEST_LIST=1 lists
#   the cases, PPSCHED_TEST_CASE=name runs one: tests/check.h); the others run whole.
# - Every run sees one GPU (CUDA_VISIBLE_DEVICES), the runs dealt round the GPUs present
#   (SANITIZE_GPUS to say how many), so cases that need several GPUs over nccl skip, and cases of
#   several pipeline devices share the one (test_pipeline wraps them).
# - SANITIZE_JOBS runs go at once (default: one per CPU core, at most 8 a GPU, at least 10; the
#   tools spend most of their time on the host, so the runs overlap well on a GPU, but 64 at once
#   on four GPUs lost one run to a kill), each under SANITIZE_TIMEOUT
#   seconds (default 420). A run that reaches the limit is a TIMEOUT, never a pass, and its line
#   names the test case it was in (PPSCHED_TEST_TRACE=1) and how many it had started.
# - SANITIZE_RACECHECK_SKIP overrides the list of cuBLAS kernel-name substrings racecheck skips.
#
# A run passes when the program exits 0 and the tool's summary reports nothing: memcheck
# "ERROR SUMMARY: 0 errors", racecheck "0 hazards displayed" (racecheck counts warnings apart from
# errors, and --error-exitcode sees only errors). Racecheck reports that all lie inside cuBLAS's
# kernels (should one reach the tool despite the exclusion) are listed, not counted. One line per
# run in a fixed order, the whole log of any run that did not pass, and the totals last.
# Exit status: 0 clean, 1 any run reported, failed or timed out, 2 no compute-sanitizer.
#
# Internal: sanitize.sh --one SANITIZER TOOL TEST CASE GPU LOG runs one program (one case of it,
# unless CASE is "-") on GPU into LOG and writes its exit status to LOG.rc (xargs -P calls it).
set -u

# cuBLAS's kernels, by the substring of their names, that racecheck skips.
LIB_KERNELS=${SANITIZE_RACECHECK_SKIP-}

if [ "${1:-}" = "--one" ]; then
    san=$2 tool=$3 t=$4 case=$5 gpu=$6 log=$7
    [ "$case" = - ] && case=
    set --
    if [ "$tool" = racecheck ] && [ -n "${SANITIZE_EXCLUDE:-}" ]; then
        for k in $LIB_KERNELS; do
            set -- "$@" --kernel-name-exclude "kns=$k"
        done
    fi
    CUDA_VISIBLE_DEVICES=$gpu PPSCHED_TEST_CASE=$case PPSCHED_TEST_QUICK=1 PPSCHED_TEST_TRACE=1 \
        timeout -k 10 "${SANITIZE_TIMEOUT:-420}" \
        "$san" --tool "$tool" --error-exitcode 3 "$@" "$t" >"$log" 2>&1
    echo $? >"$log.rc"
    exit 0
fi

san=${1:-}
[ $# -gt 0 ] && shift
if [ -z "$san" ] || ! [ -x "$san" ]; then
    echo "make sanitize: compute-sanitizer not found; install the CUDA toolkit's compute-sanitizer" \
        "or pass SANITIZER=/path/to/compute-sanitizer" >&2
    exit 2
fi
command -v timeout >/dev/null 2>&1 || { echo "make sanitize: needs timeout (coreutils)" >&2; exit 2; }
gpus=${SANITIZE_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
[ "${gpus:-0}" -ge 1 ] || gpus=1
cores=$(nproc 2>/dev/null || echo 10)
[ "$cores" -le $((8 * gpus)) ] || cores=$((8 * gpus))
[ "$cores" -ge 10 ] || cores=10
jobs=${SANITIZE_JOBS:-$cores}
split=${SANITIZE_SPLIT-test_pipeline test_profile}
limit=${SANITIZE_TIMEOUT:-420}
self=$0
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM

# Does this compute-sanitizer take the exclusion? Probed on a program without CUDA, and only
# where the same probe without the option passes.
SANITIZE_EXCLUDE=1
[ -n "$(echo $LIB_KERNELS)" ] || SANITIZE_EXCLUDE=
for k in $LIB_KERNELS; do
    if "$san" --tool racecheck true >/dev/null 2>&1 &&
        ! "$san" --tool racecheck --kernel-name-exclude "kns=$k" true >"$dir/probe" 2>&1; then
        SANITIZE_EXCLUDE=
        echo "# this compute-sanitizer refuses --kernel-name-exclude kns=$k: racecheck traces" \
            "cuBLAS's kernels too (slower): $(head -n 1 "$dir/probe")"
        break
    fi
done
export SANITIZE_EXCLUDE SANITIZE_TIMEOUT="$limit"
skips="nothing"
[ -n "$SANITIZE_EXCLUDE" ] && skips="cuBLAS's kernels named *$(echo $LIB_KERNELS | sed 's/ /* and */g')*"
# What runs: each program whole, or one line per case for those in SANITIZE_SPLIT.
for t in "$@"; do
    if echo " $split " | grep -q " $(basename "$t") "; then
        PPSCHED_TEST_LIST=1 "$t" 2>/dev/null | sed -n "s|^CASE \(.*\)|$t \1|p"
    else
        echo "$t -"
    fi
done >"$dir/units"
echo "# compute-sanitizer $("$san" --version 2>/dev/null | sed -n 's/.*Version \(.*\)/\1/p' | head -n 1):" \
    "$# programs ($(wc -l <"$dir/units" | tr -d ' ') runs each; one case a run for: ${split:-none})" \
    "x memcheck, racecheck; PPSCHED_TEST_QUICK=1; $jobs at once over $gpus GPU(s)," \
    "${limit} s each; racecheck skips $skips"

# Runs, racecheck (the slower tool) first, each tool over the units in the order given:
# index tool program case gpu.
i=0
for tool in racecheck memcheck; do
    while read -r t c; do
        echo "$((i + 1)) $tool $t $c $((i % gpus))"
        i=$((i + 1))
    done <"$dir/units"
done >"$dir/runs"
start=$(date +%s)
while read -r n tool t c g; do
    printf '%s\n%s\n%s\n%s\n%s\n%s\n' "$san" "$tool" "$t" "$c" "$g" "$dir/$n.log"
done <"$dir/runs" |
    xargs -d '\n' -n 6 -P "$jobs" sh -c 'exec sh "$0" --one "$1" "$2" "$3" "$4" "$5" "$6"' "$self"

# One line per run, in the order of the runs file: memcheck's, then racecheck's.
bad=0 runs=0
for tool in memcheck racecheck; do
    while read -r n rtool t c g; do
        [ "$rtool" = "$tool" ] || continue
        log=$dir/$n.log
        rc=$(cat "$log.rc" 2>/dev/null || echo 255)
        name=$(basename "$t")
        [ "$c" = - ] || name="$name/$c"
        runs=$((runs + 1))
        case $tool in
        memcheck) clean='ERROR SUMMARY: 0 errors' ;;
        racecheck) clean='RACECHECK SUMMARY: 0 hazards displayed' ;;
        esac
        summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1 | sed 's/^=* *//')
        tests=$(grep -E '^[A-Za-z0-9_]+: [0-9]+ passed' "$log" | tail -n 1)
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            started=$(grep -c '^  RUN ' "$log")
            last=$(grep '^  RUN ' "$log" | tail -n 1 | sed 's/^  RUN //')
            tail -n 20 "$log"
            echo "TIMEOUT $tool $name: stopped after ${limit} s in ${last:-its start-up}" \
                "($started cases started)"
            bad=$((bad + 1))
            continue
        fi
        # Racecheck reports inside cuBLAS's own kernels only: the library's, not ours.
        lib=""
        if [ "$tool" = racecheck ] && [ "$rc" -eq 3 ] && echo "$tests" | grep -q " 0 failed"; then
            where=$(sed -n 's/.*Race reported between [A-Za-z]* access at \([A-Za-z0-9_]*\)+.*/\1/p' "$log" | sort -u)
            if [ -n "$where" ] && ! echo "$where" | grep -qvE '^(nvjet_|sm90_xmma)'; then
                lib=$(echo "$where" | wc -l | tr -d ' ')
            fi
        fi
        if [ -n "$lib" ]; then
            echo "ok   $tool $name: $summary, all in $lib cuBLAS kernels, none in ours; $tests"
        elif [ "$rc" -ne 0 ] || ! grep -q "$clean" "$log"; then
            grep -v '^  RUN ' "$log"
            echo "FAIL $tool $name (exit $rc): $summary"
            bad=$((bad + 1))
        else
            echo "ok   $tool $name: $summary; $tests"
        fi
    done <"$dir/runs"
done
echo "sanitize: $runs runs, $bad with reports, failures or timeouts, $(($(date +%s) - start)) s"
[ "$bad" -eq 0 ]
