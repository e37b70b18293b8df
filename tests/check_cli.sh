#!/bin/sh
# check_cli.sh — the command line's contract, run on build/ppsched (PP_BUILD names the build
# folder): a full output device makes every command exit 1; contradictory or repeated flags and
# --timeout values run.timeout refuses exit 2; an input error comes before the note that no GPU
# is present; compare counts its runs in 64 bits, reports an invalid --sweep combination as a
# failed row naming --sweep, quotes CSV labels and keeps chart names inside its folder; plan
# refuses numbers out of their range by name, counts AdamW unless told otherwise and says what its
# budget left out; a generated plan larger than the host memory allows is refused before it is
# built. Prints the summary line tests/run_tests.sh reads.
P=${PP_BUILD:-build}/ppsched
S=schedules/1f1b.yaml
# The schedules are checked as files, not against this machine's GPUs: hide them, so that a
# 4-device schedule passes `check` on a 1-GPU machine as it does on one without a GPU.
CUDA_VISIBLE_DEVICES=
export CUDA_VISIBLE_DEVICES
tmp=$(mktemp -d)
passed=0 failed=0

# expect RC GREP-PATTERN-ON-STDERR|- COMMAND...: the exit code, and a line of stderr.
expect() {
    want=$1 pat=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq "$want" ] && { [ "$pat" = - ] || grep -q -- "$pat" "$tmp/err"; }; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "  FAIL (exit $rc, want $want${pat:+, stderr ~ $pat}): $*"
        sed 's/^/    /' "$tmp/err" | head -5
    fi
}

# Output to a full device: exit 1, whatever the command.
if [ -c /dev/full ]; then
    for args in "--simulate --json $S" "--simulate $S" "check $S" "show $S" "show --emit csv $S" \
        "show --emit yaml $S" "compare --simulate --quiet $S" "compare --simulate --json $S" \
        "compare --simulate --csv $S" "--help"; do
        # shellcheck disable=SC2086
        expect 1 - sh -c "$P $args >/dev/full"
    done
fi

# Flags: contradictions, repeats, and --timeout through run.timeout's parser.
expect 2 "--json and --csv" "$P" compare --json --csv "$S"
expect 2 "--trace given twice" "$P" --simulate --trace "$tmp/a.json" --trace "$tmp/b.json" "$S"
expect 2 "--sync and --simulate" "$P" --simulate --sync "$S"
for t in inf 0x10 0 -1 abc; do
    expect 2 "^--timeout run.timeout=$t: " "$P" --simulate --timeout "$t" "$S"
done
expect 0 - "$P" --simulate --quiet --timeout 30 "$S"

# An input error first and alone: no note about GPUs before "No such file".
expect 2 "^nosuch.yaml: No such file or directory" "$P" nosuch.yaml
if grep -q "no CUDA device" "$tmp/err"; then
    failed=$((failed + 1))
    echo "  FAIL the no-GPU note came with an input error"
else passed=$((passed + 1)); fi

# compare: 64^6 runs counted exactly and refused; one bad combination is a failed row.
V=$(seq -s, 1 64)
expect 2 "68719476736 runs" "$P" compare --simulate "$S" --sweep model.layers="$V" \
    --sweep model.hidden="$V" --sweep model.heads="$V" --sweep pipeline.micro_batches="$V" \
    --sweep run.steps="$V" --sweep run.warmup="$V"
expect 2 "^--sweep pipeline.micro_batches=2: " "$P" compare --simulate --quiet "$S" \
    --sweep pipeline.micro_batches=2,8
if grep -q "micro_batches=8 .* 4 *8 " "$tmp/out" && grep -q "micro_batches=2 .*not run" "$tmp/out"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "  FAIL compare did not show the good row and the failed one"
    sed 's/^/    /' "$tmp/out"
fi

# A list value can be swept: the commas inside brackets belong to it.
expect 0 - "$P" compare --simulate --quiet --csv "$S" --sweep 'pipeline.devices=[0,1],[0,1,2,3]'
if [ "$(grep -c ',simulate,' "$tmp/out")" -eq 2 ] && grep -q ',simulate,2,' "$tmp/out"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "  FAIL a list value was not swept whole"
    sed 's/^/    /' "$tmp/out" "$tmp/err" | head -6
fi

# compare --csv: a label with a quote and a comma is one field; --svg names stay inside DIR.
expect 0 - "$P" compare --simulate --quiet --csv --set 'name=a"b,c' "$S"
if grep -q '^"a""b,c",simulate,' "$tmp/out"; then passed=$((passed + 1)); else
    failed=$((failed + 1))
    echo "  FAIL CSV label not quoted: $(tail -n 1 "$tmp/out")"
fi
mkdir -p "$tmp/charts"
expect 0 - "$P" compare --simulate --quiet --svg "$tmp/charts" --set 'name=../escape' "$S" \
    --sweep pipeline.micro_batches=4,8
n_out=$(find "$tmp" -name '*.svg' ! -path "$tmp/charts/*" | wc -l)
n_in=$(find "$tmp/charts" -name '*.svg' | wc -l)
if [ "$n_out" -eq 0 ] && [ "$n_in" -eq 3 ]; then passed=$((passed + 1)); else
    failed=$((failed + 1))
    echo "  FAIL charts: $n_in in the folder (want 3), $n_out outside it"
fi

# name: the one name of a schedule, in the table, the JSON and the check line.
expect 0 - "$P" --simulate --quiet --set name=try "$S"
grep -q "^# ppsched: schedule try (1f1b)" "$tmp/out" && passed=$((passed + 1)) ||
    { failed=$((failed + 1)); echo "  FAIL the table does not name the schedule 'try'"; }
expect 0 - "$P" --simulate --json --set name=try "$S"
grep -q '^{"schedule":"try","kind":"1f1b",' "$tmp/out" && passed=$((passed + 1)) ||
    { failed=$((failed + 1)); echo "  FAIL the JSON does not name the schedule 'try'"; }
expect 0 - "$P" check --set name=try "$S"
grep -q ": ok: try (1f1b), 4 devices" "$tmp/out" && passed=$((passed + 1)) ||
    { failed=$((failed + 1)); echo "  FAIL check does not name the schedule 'try'"; }

# plan: a number out of its option's range is refused naming the range, before the file is read.
for a in "--gpus 1e10:1..64" "--top 3e9:1..2147483647" "--verify 3e9:1..2147483647" \
    "--global-batch 1e19:1..16777216" "--memory 1e-300:0.1..100000" "--budget 1e9:0.01..86400"; do
    flag=${a%%:*} range=${a#*:}
    # shellcheck disable=SC2086
    expect 2 "^ppsched plan: $flag: out of range (allowed: $range)\$" "$P" plan $flag "$S"
done
expect 2 "^ppsched plan: --optimizer sgd: not a choice (allowed: adamw|none)" "$P" plan \
    --optimizer sgd "$S"
expect 2 "^plan: --set run.optimizer=none: plan counts the optimizer of --optimizer" "$P" plan \
    --set run.optimizer=none "$S"
# The header says which optimizer's state counts; --optimizer none leaves it out.
expect 0 - "$P" plan --quiet "$S"
grep -q "^# optimizer: adamw, its state counted in each GPU's memory (the default;" "$tmp/out" &&
    passed=$((passed + 1)) ||
    { failed=$((failed + 1)); echo "  FAIL plan does not say it counts AdamW"; }
expect 0 - "$P" plan --quiet --optimizer none "$S"
grep -q "^# optimizer: none, no optimizer state counted" "$tmp/out" && passed=$((passed + 1)) ||
    { failed=$((failed + 1)); echo "  FAIL plan --optimizer none does not say so"; }
# A budget that runs out: what it left is counted on stderr and in the header.
expect 0 "^plan: the budget of 0.01 s ran out: [0-9]* of [0-9]* candidates were not predicted" \
    "$P" plan --quiet --budget 0.01 --gpus 8 --global-batch 512 "$S"
grep -q "^# budget: 0.01 s ran out with [0-9]* of [0-9]* candidates not predicted" "$tmp/out" &&
    passed=$((passed + 1)) ||
    { failed=$((failed + 1)); echo "  FAIL the plan's header does not count what the budget left"; }

# A generated plan that would take more host memory than the process may have: refused (exit 2)
# naming the key, before it is built (64 x 16384 needs about 1.2 GiB).
big="64 stages x 16384 micro-batches take about .* GiB of host memory to lower and simulate"
expect 2 "^--set pipeline.micro_batches=16384: $big" \
    sh -c "ulimit -v 1048576 && exec $P check $S --set model.layers=64 --set pipeline.devices=64 \
        --set pipeline.micro_batches=16384"

rm -rf "$tmp"
echo "check_cli: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
