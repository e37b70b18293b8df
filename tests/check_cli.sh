#!/bin/sh
# check_cli.sh — the command line's contract, run on build/ppsched (PP_BUILD names the build
# folder): a full output device makes every command exit 1; contradictory or repeated flags and
# --timeout values run.timeout refuses exit 2, and a flag of one key is named as typed; an
# unknown command is named so; an input error comes before the note that no GPU is present;
# every --help lists the exit codes; a simulated run that does not fit exits 1 after its report;
# every output path is checked before anything loads (exit 2), none may be another output or an
# input; compare checks every file before running any, counts its runs in 64 bits, reports an
# invalid --sweep combination as a failed row naming --sweep, quotes CSV labels and keeps chart
# names inside its folder; plan refuses numbers out of their range by name, counts AdamW unless
# told otherwise and says what its budget left out, and prints for its best plan the step, bubble
# and memory `--simulate` prints for the file it emits; a generated plan larger than the host
# memory allows is refused before it is built. Prints the summary line tests/run_tests.sh reads.
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

# verify WHAT COMMAND...: one more check, which passes when COMMAND succeeds.
verify() {
    what=$1
    shift
    if "$@"; then passed=$((passed + 1)); else
        failed=$((failed + 1))
        echo "  FAIL $what"
    fi
}
# absent PATTERN FILE: no line of FILE matches.
absent() { ! grep -q -- "$1" "$2"; }

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
    expect 2 "^--timeout $t: " "$P" --simulate --timeout "$t" "$S"
done
expect 0 - "$P" --simulate --quiet --timeout 30 "$S"
# run.offload auto under a limit nothing meets: the report, then the refusal with what is needed.
expect 1 "^ppsched: run.offload: auto: device 0 needs .* GiB, over the limit of 1.00 GiB" "$P" --simulate \
    --quiet --set run.offload=auto --set run.memory_limit=1 "$S"
expect 1 "run.memory_limit is 1.00 GiB" "$P" --simulate --quiet --set run.offload=auto \
    --set run.memory_limit=1 "$S"
expect 2 "run.memory_limit" "$P" --simulate --set run.memory_limit=0 "$S"
# a plan too large to lower: the message counts the data-parallel replicas it multiplies by
expect 2 "256 stages x 65536 micro-batches x 16 replicas make a plan of up to" "$P" --simulate \
    --set pipeline.devices=64 --set pipeline.data_parallel=16 --set pipeline.micro_batches=65536 \
    --set model.layers=1024 --set pipeline.chunks=64 schedules/interleaved.yaml
# A flag that stands for one key is named as typed, not as the --set it is read as.
expect 2 "^--gpu h1000: unknown GPU 'h1000' (allowed: a100, " "$P" --simulate --gpu h1000 "$S"
expect 2 "^--gpu zz: unknown GPU" "$P" plan --gpu zz "$S"

# A mistyped command is named unknown, with the closest command and every command; a bare word
# that is a file here still runs.
all="compare, show, check, profile, plan, or a schedule FILE.yaml to run it"
expect 2 "^ppsched: unknown command 'plna'; did you mean 'plan'? (allowed: $all)" "$P" plna "$S"
verify "an unknown command was taken for a schedule file" absent "one schedule file" "$tmp/err"
expect 2 "^ppsched: unknown command 'xyz' (allowed: $all)" "$P" xyz
cp tests/data/minimal.yaml "$tmp/sched"
case $P in /*) abs=$P ;; *) abs=$PWD/$P ;; esac
expect 0 - sh -c "cd '$tmp' && '$abs' sched --simulate --quiet"

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
# A bad environment variable is the user's to fix: its message carries no source location.
expect 2 "^ppsched: PPSCHED_THREADS=x: expected a whole number" env PPSCHED_THREADS=x "$P" \
    --simulate "$(dirname "$S")/auto.yaml"
verify "a source location in the message" absent '\.c:[0-9]' "$tmp/err"
# `devices: all` with no GPU counted is 4 devices, and a simulated run says so.
expect 0 "^# pipeline.devices: all is 4 devices when simulating with no GPU counted" "$P" \
    --simulate "$S"
# compare --svg makes a new chart folder, named with or without its trailing slash.
expect 0 - "$P" compare --simulate --quiet --svg "$tmp/newcharts/" "$S"
verify "compare --svg DIR/ made no DIR" [ -d "$tmp/newcharts" ]

# profile without a GPU: a condition of the machine, said without a source place; exit 1.
expect 1 "^ppsched profile: " "$P" profile "$S"
verify "profile without a GPU names a source file" absent '\.c:[0-9]' "$tmp/err"

# Every command's --help ends with its exit codes, one line each for 0, 1 and 2.
for c in "" compare show check profile plan; do
    # shellcheck disable=SC2086
    "$P" $c --help >"$tmp/out"
    verify "'ppsched $c --help' does not list the exit codes 0, 1 and 2 once each" \
        [ "$(grep -c -e '^exit status:$' -e '^  0  ok$' -e '^  1  ' -e '^  2  ' "$tmp/out")" = 4 ]
done

# A simulated run that would not fit: the report, then exit 1 saying what it needs.
big="--set model.hidden=8192 --set model.heads=64 --set model.layers=48"
# shellcheck disable=SC2086
expect 1 "^ppsched: the run would not fit: device 0 needs 140.98 GiB, the h100 has 79.2 GiB" \
    "$P" --simulate --quiet $big "$S"
verify "the report did not come before the refusal" grep -q '^# memory: does not fit' "$tmp/out"
# shellcheck disable=SC2086
expect 1 "would not fit" "$P" --simulate --json $big "$S"
verify "the JSON report did not come before the refusal" grep -q '^{"schedule":"1f1b"' "$tmp/out"

# Output paths, checked before anything loads: exit 2 naming the option, nothing printed or run.
for args in "--simulate --svg $tmp/no/x.svg" "--simulate --trace $tmp/no/x.json" \
    "compare --simulate --svg $tmp/no/charts" "profile -o $tmp/no/p.yaml" \
    "plan --emit $tmp/no/x.yaml"; do
    # shellcheck disable=SC2086
    expect 2 "^--[a-z]* $tmp/no/[a-z.]*: no such folder '$tmp/no' (allowed: " "$P" $args "$S"
    verify "$args: the work began before the path was checked" [ "$(wc -l <"$tmp/err")" = 1 ]
    verify "$args: printed a report" [ ! -s "$tmp/out" ]
done
expect 2 "^--svg $tmp: a folder (allowed: a file path)" "$P" --simulate --svg "$tmp" "$S"
expect 2 "^--emit $S/x.yaml: '$S' is not a folder" "$P" plan --emit "$S/x.yaml" "$S"

# Two outputs into one file, or an output onto an input: refused, the input untouched. A device
# may take several.
expect 2 "^--svg $tmp/x: --trace writes there too" "$P" -s --trace "$tmp/x" --svg "$tmp/x" "$S"
expect 2 "^--svg ./x: --trace writes there too" sh -c "cd '$tmp' && '$abs' -s -t x -g ./x sched"
cp tests/data/minimal.yaml "$tmp/in.yaml"
ln -s in.yaml "$tmp/link.yaml"
for out in "$tmp/in.yaml" "$tmp/link.yaml"; do
    expect 2 "^--trace $out: that is the schedule file $tmp/in.yaml" "$P" -s --trace "$out" \
        "$tmp/in.yaml"
done
expect 2 "^--emit $tmp/in.yaml: that is the schedule file" "$P" plan --emit "$tmp/in.yaml" \
    "$tmp/in.yaml"
verify "an output overwrote the schedule file" cmp -s tests/data/minimal.yaml "$tmp/in.yaml"
expect 0 - "$P" --simulate --quiet --trace /dev/null --svg /dev/null "$S"
# A host link so slow that an offload lasts forever is refused as input, and nothing is written.
expect 2 "^--set cost.host_link_gbps=1e-310: 1e-310 is out of range (allowed: 0 for" "$P" -s \
    --set run.offload=activations --set cost.host_link_gbps=1e-310 --trace "$tmp/h.json" \
    --svg "$tmp/h.svg" "$S"
verify "a trace was written for a refused run" [ ! -e "$tmp/h.json" ]
verify "a chart was written for a refused run" [ ! -e "$tmp/h.svg" ]

# compare checks every file before running any: every bad one named, nothing run, no chart left.
printf 'model: {layers: x}\n' >"$tmp/bad1.yaml"
printf 'pipeline: {devices: 4, micro_batches: 2}\n' >"$tmp/bad2.yaml"
mkdir "$tmp/kept"
for dir in "$tmp/made" "$tmp/kept"; do
    expect 2 "^ppsched: compare: 2 of 4 files not valid" "$P" compare --simulate --svg "$dir" "$S" \
        "$tmp/bad1.yaml" schedules/zb-h1.yaml "$tmp/bad2.yaml"
    verify "compare did not name both bad files" \
        [ "$(grep -c -e "^$tmp/bad1.yaml:1:" -e "^$tmp/bad2.yaml:1:" "$tmp/err")" = 2 ]
    verify "compare ran before every file was checked" [ ! -s "$tmp/out" ]
    verify "compare left charts in $dir" [ "$(find "$dir" -type f 2>/dev/null | wc -l)" = 0 ]
done
verify "the chart folder made for a failed comparison is left" [ ! -e "$tmp/made" ]

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

# The CPU-only build's refusal of a GPU command lists every command that works without CUDA.
"$P" profile "$S" -o "$tmp/profile.yaml" >/dev/null 2>"$tmp/err"
if grep -q "built without CUDA" "$tmp/err"; then
    if grep -q "(CPU-only: simulate, show, check, compare, plan)" "$tmp/err"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "  FAIL the CPU-only build's message leaves out a command: $(cat "$tmp/err")"
    fi
fi
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

# plan and --simulate give one plan the same numbers: the best plan's step, bubble and peak memory
# in `plan --json` are those `--simulate --json` prints for the file `plan --emit` wrote, digit for
# digit. Twice: DualPipeV wins at a batch of 33 (an odd batch leaves one replica: its overlapped
# pairs are where the two once differed), and a plan of data-parallel replicas wins at the file's.
# field NAME FILE: every value of the JSON key NAME in FILE, one a line.
field() { grep -o "\"$1\":[^,}]*" "$2" | cut -d: -f2; }
for batch in 33 0; do
    set -- --global-batch $batch
    [ "$batch" = 0 ] && set --
    expect 0 - "$P" plan --quiet --gpu h100 --json --top 1 --emit "$tmp/best.yaml" "$@" \
        schedules/dualpipe-v.yaml
    mv "$tmp/out" "$tmp/plan.json"
    expect 0 - "$P" "$tmp/best.yaml" --simulate --json
    if [ "$batch" = 33 ]; then
        grep -q '"schedule":"dualpipe-v"' "$tmp/plan.json" && passed=$((passed + 1)) ||
            { failed=$((failed + 1)); echo "  FAIL plan's best for dualpipe-v.yaml is not DualPipeV"; }
    else
        grep -q '"data_parallel":[2-9]' "$tmp/plan.json" && grep -q '"data_parallel":' "$tmp/out" &&
            passed=$((passed + 1)) ||
            { failed=$((failed + 1)); echo "  FAIL plan's best at the file's batch has no replicas"; }
    fi
    for key in step_ms tokens_per_s bubble; do
        a=$(field $key "$tmp/plan.json" | head -1) b=$(field $key "$tmp/out" | head -1)
        [ -n "$a" ] && [ "$a" = "$b" ] && passed=$((passed + 1)) ||
            { failed=$((failed + 1)); echo "  FAIL plan's $key $a, --simulate's $b (batch $batch)"; }
    done
    a=$(field peak_mem_bytes "$tmp/plan.json") b=$(field peak_mem_bytes "$tmp/out" | sort -n | tail -1)
    [ -n "$a" ] && [ "$a" = "$b" ] && passed=$((passed + 1)) ||
        { failed=$((failed + 1)); echo "  FAIL plan's peak memory $a, --simulate's $b (batch $batch)"; }
done

# The same for every kind plan generates, one at a time (--kinds K): the best plan of that kind
# gives the same numbers through plan and through --simulate of the file it emits.
for kind in gpipe 1f1b interleaved-1f1b zb-h1 zb-h2 zb-v dualpipe-v looped-bfs interleaved-zb auto; do
    expect 0 - "$P" plan --quiet --gpu h100 --json --top 1 --kinds "$kind" --emit "$tmp/best.yaml" \
        schedules/1f1b.yaml
    mv "$tmp/out" "$tmp/plan.json"
    expect 0 - "$P" "$tmp/best.yaml" --simulate --json
    grep -q "\"schedule\":\"$kind\"" "$tmp/plan.json" && passed=$((passed + 1)) ||
        { failed=$((failed + 1)); echo "  FAIL plan --kinds $kind's best is not $kind"; }
    for key in step_ms tokens_per_s bubble; do
        a=$(field $key "$tmp/plan.json" | head -1) b=$(field $key "$tmp/out" | head -1)
        [ -n "$a" ] && [ "$a" = "$b" ] && passed=$((passed + 1)) ||
            { failed=$((failed + 1)); echo "  FAIL $kind: plan's $key $a, --simulate's $b"; }
    done
    a=$(field peak_mem_bytes "$tmp/plan.json") b=$(field peak_mem_bytes "$tmp/out" | sort -n | tail -1)
    [ -n "$a" ] && [ "$a" = "$b" ] && passed=$((passed + 1)) ||
        { failed=$((failed + 1)); echo "  FAIL $kind: plan's peak memory $a, --simulate's $b"; }
done
expect 2 "^ppsched plan: --kinds 1f1b,steps: 'steps' is not a schedule kind plan can generate" \
    "$P" plan --quiet --kinds 1f1b,steps schedules/1f1b.yaml

# pipeline.data_parallel: bad values named at their place; d > 1 simulates with a replica column.
# (A measured run with d > 1 is refused in the run chain, run_execute: test_data_parallel.c checks
# it through a stand-in executor, as this script hides the GPUs and so always simulates.)
printf 'pipeline:\n  devices: 8\n  data_parallel: 3\n' >"$tmp/dp.yaml"
expect 2 "^$tmp/dp.yaml:3:18: pipeline.data_parallel: 3 replicas do not split the 8 devices" \
    "$P" "$tmp/dp.yaml" --simulate
expect 2 "^--set pipeline.data_parallel=0: " "$P" "$S" --simulate --set pipeline.data_parallel=0
expect 0 - "$P" "$S" --simulate --set pipeline.devices=8 --set pipeline.data_parallel=2
grep -q "^# device replica" "$tmp/out" && grep -q "^# reduce per stage" "$tmp/out" &&
    passed=$((passed + 1)) || { failed=$((failed + 1)); echo "  FAIL d = 2 shows no replicas"; }

# A generated plan that would take more host memory than the process may have: refused (exit 2)
# naming the key, before it is built (64 x 16384 needs about 1.2 GiB).
big="64 stages x 16384 micro-batches take about .* GiB of host memory to lower and simulate"
expect 2 "^--set pipeline.micro_batches=16384: $big" \
    sh -c "ulimit -v 1048576 && exec $P check $S --set model.layers=64 --set pipeline.devices=64 \
        --set pipeline.micro_batches=16384"

rm -rf "$tmp"
echo "check_cli: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
