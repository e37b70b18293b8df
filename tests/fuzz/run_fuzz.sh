#!/bin/sh
# run_fuzz.sh DIR SECONDS — replay the seeds of the three fuzz targets in DIR, then fuzz each for
# SECONDS. Seeds: every YAML (or CSV) in schedules/ and tests/data/, every profile in profiles/,
# and tests/data/fuzz/config (or csv, profile), the inputs that once broke a reader. New inputs go to a temporary folder, never into
# the repository; a crash is kept as DIR/crash-* and fails the run. Prints each target's summary.
dir=$1
secs=${2:-20}
fail=0
for target in config csv profile; do
    bin=$dir/fuzz_$target
    case $target in
    config) seeds="schedules/*.yaml tests/data/*.yaml" ;;
    csv) seeds="schedules/*.csv tests/data/*.csv" ;;
    profile) seeds="profiles/*.yaml" ;;
    esac
    corpus=$(mktemp -d)
    # shellcheck disable=SC2086
    for f in $seeds tests/data/fuzz/$target/*; do [ -f "$f" ] && cp "$f" "$corpus/"; done
    n_seeds=$(ls "$corpus" | wc -l)
    log=$(mktemp)
    "$bin" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 -seed=1 \
        -close_fd_mask=2 -print_final_stats=0 -artifact_prefix="$dir/" \
        -dict=tests/fuzz/$target.dict "$corpus" >"$log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ]; then
        cat "$log"
        echo "fuzz_$target: FAILED (exit $rc); the input is kept in $dir/"
        fail=1
    else
        summary=$(grep -E '^#[0-9]+.*DONE|^Done|^fuzz_main:' "$log" | tail -n 2 | tr '\n' ' ')
        echo "fuzz_$target: $n_seeds seeds, ${secs} s: $summary"
    fi
    rm -rf "$corpus" "$log"
done
exit $fail
