#!/bin/sh
# check_mpi_gpu.sh — ppsched under mpirun on the GPUs present (make test runs it with the GPU
# tests; it skips itself, saying why, without MPI, mpirun or a GPU). A small fp32 model, nccl at
# every boundary in both runs, so the numbers are bitwise comparable:
#   1 GPU and more: mpirun -np 1 gives the loss of the run without mpirun (the MPI group of one
#     process, four pipeline devices on GPU 0), and -np 2 --simulate the single process's report;
#   2 GPUs and more: -np 2 (a GPU each) gives bitwise the loss of one process over the same two
#     GPUs, for gpipe, 1f1b, interleaved-1f1b and zb-h1 (the report's loss), and tests/gpu/test_mpi
#     under mpirun -np 2 the same loss and gradients, bitwise;
#   4 GPUs and more: the same with -np 2 (two GPUs each) and -np 4 over four GPUs.
# pipeline.data_parallel=2 under AdamW (1f1b, zb-h1, and 1f1b with run.optimizer_sharding zero1):
# one process against one per replica (-np 2) and one per GPU (-np 4), bitwise.
# And the shipped 1f1b as it is (transport auto: peer copies within a process, nccl between)
# under -np 2 (and -np 4) gives bitwise the loss of one process (peer copies only).
# A measured run over an explicit run.memory_limit is refused before it runs, with and without
# mpirun. The step times of each pair are printed side by side, never asserted. Prints the summary line
# tests/run_tests.sh reads.
P=${PP_BUILD:-build}/ppsched
MPIRUN=${PP_MPIRUN:-$(command -v mpirun 2>/dev/null)}
tmp=$(mktemp -d)
passed=0 failed=0 skipped=0
finish() {
    rm -rf "$tmp"
    echo "check_mpi_gpu: $passed passed, $failed failed, $skipped skipped"
    [ "$failed" -eq 0 ]
    exit
}
skip() {
    echo "  SKIP $*"
    skipped=$((skipped + 1))
}
[ "${PP_MPI:-}" = on ] || { skip "ppsched was built without MPI"; finish; }
[ -n "$MPIRUN" ] && [ -x "$MPIRUN" ] || { skip "no mpirun"; finish; }
n_gpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "${n_gpu:-0}" -ge 1 ] || { skip "no GPU"; finish; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpi() { timeout 600 "$MPIRUN" "$@"; }
SMALL="--set model.layers=8 --set model.hidden=256 --set model.heads=4 --set model.seq_len=128
 --set model.vocab=1024 --set model.dtype=fp32 --set pipeline.micro_batch_size=2
 --set run.steps=5 --set run.warmup=2 --quiet --json"
field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" "$2" | head -n 1; }

# same_loss WHAT FILE_A FILE_B: both runs gave one loss, bitwise (printed with %.9g), and their
# step times are printed side by side.
same_loss() {
    la=$(field loss "$2") lb=$(field loss "$3")
    if [ -n "$la" ] && [ "$la" != null ] && [ "$la" = "$lb" ]; then ok=1; else ok=0; fi
    printf '  %-44s loss %s | %s   step ms %s | %s\n' "$1" "$la" "$lb" "$(field step_ms "$2")" \
        "$(field step_ms "$3")"
    if [ "$ok" = 1 ]; then passed=$((passed + 1)); else
        failed=$((failed + 1))
        echo "  FAIL $1: the losses differ"
        sed 's/^/    /' "$tmp/err" | head -6
    fi
}

# One GPU: the group of one process, and the simulated split.
S=schedules/1f1b.yaml
# shellcheck disable=SC2086
"$P" $SMALL --set 'pipeline.devices=[0,0,0,0]' $S >"$tmp/a" 2>"$tmp/err" &&
    mpi -np 1 "$P" $SMALL --set 'pipeline.devices=[0,0,0,0]' $S >"$tmp/b" 2>>"$tmp/err"
same_loss "1f1b [0,0,0,0]: -np 1 vs plain" "$tmp/a" "$tmp/b"
# shellcheck disable=SC2086
"$P" --simulate --json --set pipeline.transport=nccl $S >"$tmp/a" 2>"$tmp/err" &&
    mpi -np 2 "$P" --simulate --json --set pipeline.transport=nccl $S >"$tmp/b" 2>>"$tmp/err"
if cmp -s "$tmp/a" "$tmp/b"; then passed=$((passed + 1)); else
    failed=$((failed + 1))
    echo "  FAIL -np 2 --simulate: the report differs from one process's"
fi

# A measured run whose predicted memory is over an explicit run.memory_limit is refused before it
# runs (exit 1, no report), as the simulated one is after its report; under mpirun too.
# (under mpirun a GPU a process, nccl between them: shared boundaries cannot cross processes)
refuse_layouts="[0,0,0,0]"
[ "$n_gpu" -ge 2 ] && refuse_layouts="$refuse_layouts [0,1]"
for devs in $refuse_layouts; do
    launch="" transport=""
    [ "$devs" = "[0,1]" ] && launch="mpi -np 2" transport="--set pipeline.transport=nccl"
    # shellcheck disable=SC2086
    $launch "$P" $SMALL --set "pipeline.devices=$devs" $transport --set run.memory_limit=0.05 $S \
        >"$tmp/a" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq 1 ] && [ ! -s "$tmp/a" ] && grep -q "would not fit: device 0 needs" "$tmp/err" &&
        [ "$(grep -c "would not fit" "$tmp/err")" -eq 1 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "  FAIL ${launch:-one process} $devs: a run over run.memory_limit=0.05 gave exit $rc"
        sed 's/^/    /' "$tmp/err" | head -6
    fi
done

# grads NPROC: tests/gpu/test_mpi under mpirun (loss and gradients, bitwise); its counts are ours.
T=${PP_BUILD:-build}/tests/gpu/test_mpi
grads() {
    mpi -np "$1" "$T" >"$tmp/t" 2>"$tmp/err"
    rc=$?
    sed 's/^/  /' "$tmp/err" | grep -v '^  *$' | grep -v '^  --' | head -20
    line=$(grep -E '^test_mpi: [0-9]+ passed' "$tmp/t" | tail -n 1)
    if [ -z "$line" ]; then
        failed=$((failed + 1))
        echo "  FAIL test_mpi -np $1: no summary (exit $rc)"
        return
    fi
    echo "  (-np $1) $line"
    passed=$((passed + $(echo "$line" | sed 's/.*: \([0-9]*\) passed.*/\1/')))
    failed=$((failed + $(echo "$line" | sed 's/.* \([0-9]*\) failed.*/\1/')))
    skipped=$((skipped + $(echo "$line" | sed 's/.* \([0-9]*\) skipped.*/\1/')))
    [ "$rc" -eq 0 ] || { failed=$((failed + 1)); echo "  FAIL test_mpi -np $1: exit $rc"; }
}

# pairs NPROC DEVICES: each kind, one process against NPROC over the same GPUs, over nccl and over
# ipc (copies into the other process's slot).
pairs() {
    for tr in nccl ipc; do
        for k in gpipe 1f1b interleaved zb-h1; do
            # shellcheck disable=SC2086
            "$P" $SMALL --set pipeline.transport=$tr --set "pipeline.devices=$2" \
                schedules/$k.yaml >"$tmp/a" 2>"$tmp/err" &&
                mpi -np "$1" "$P" $SMALL --set pipeline.transport=$tr --set "pipeline.devices=$2" \
                    schedules/$k.yaml >"$tmp/b" 2>>"$tmp/err"
            same_loss "$k $2 $tr: -np $1 vs one process" "$tmp/a" "$tmp/b"
        done
    done
}
# auto_pair NPROC DEVICES: the shipped 1f1b with its transport auto, one process against NPROC.
auto_pair() {
    # shellcheck disable=SC2086
    "$P" $SMALL --set "pipeline.devices=$2" $S >"$tmp/a" 2>"$tmp/err" &&
        mpi -np "$1" "$P" $SMALL --set "pipeline.devices=$2" $S >"$tmp/b" 2>>"$tmp/err"
    same_loss "1f1b auto $2: -np $1 vs one process" "$tmp/a" "$tmp/b"
}
# dp_pair NPROC DEVICES: pipeline.data_parallel=2 over DEVICES (the gradients reduced over nccl),
# one process against NPROC (one per replica, or one per GPU).
dp_pair() {
    for k in 1f1b zb-h1 zero1; do
        opt="--set run.optimizer=adamw"
        [ $k = zero1 ] && opt="$opt --set run.optimizer_sharding=zero1"
        f=schedules/$k.yaml
        [ $k = zero1 ] && f=schedules/1f1b.yaml
        # shellcheck disable=SC2086
        "$P" $SMALL $opt --set "pipeline.devices=$2" --set pipeline.data_parallel=2 \
            $f >"$tmp/a" 2>"$tmp/err" &&
            mpi -np "$1" "$P" $SMALL $opt --set "pipeline.devices=$2" \
                --set pipeline.data_parallel=2 $f >"$tmp/b" 2>>"$tmp/err"
        same_loss "$k $2 d=2 adamw: -np $1 vs one process" "$tmp/a" "$tmp/b"
    done
}
if [ "$n_gpu" -ge 2 ]; then
    pairs 2 '[0,1]'
    dp_pair 2 '[0,1]'
    auto_pair 2 '[0,1]'
    [ "$n_gpu" -ge 4 ] || grads 2
else skip "2 processes x 1 GPU: $n_gpu GPU present"; fi
if [ "$n_gpu" -ge 4 ]; then
    pairs 2 '[0,1,2,3]'
    pairs 4 '[0,1,2,3]'
    auto_pair 2 '[0,1,2,3]'
    auto_pair 4 '[0,1,2,3]'
    dp_pair 2 '[0,1,2,3]'
    dp_pair 4 '[0,1,2,3]'
    grads 2
    grads 4
else skip "2 processes x 2 GPUs and 4 x 1: $n_gpu GPUs present"; fi
finish
