#!/bin/sh
# check_mpi.sh — ppsched under mpirun, on CPU (a simulated run per process): with -np 2 and -np 4
# each process simulates the ops of its own devices in plan order and meets its peers at every
# transfer between processes; rank 0 merges the parts. The merged report (table and JSON) and
# timeline (the Chrome trace: every op's start and end) must equal the single-process
# simulation's, byte for byte, for gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-v (V placement) and
# dualpipe-v (overlapped pairs), nccl at every boundary in both. The shipped 1f1b as it is
# (transport auto) runs under -np 2 and 4, with nccl between processes and peer within one, and
# the report and the JSON say which boundary got which; processes map to hosts by the MPI
# shared-memory split, played as two hosts (PPSCHED_TEST_HOSTS=2): each rank's host and local rank
# in the banner. show and check run under mpirun (rank 0 prints what one process prints); compare
# is refused, saying what to run instead. A failure on one rank (a bad file only rank 1 reads, a
# plan that differs, a boundary an explicit peer cannot carry, a split
# that does not divide) ends every rank with the same exit code and rank 0 names the rank; a
# transfer whose sender never posts (an injected fault) times out on the rank that waits, naming
# its pending op and the rank it waits for. Every mpirun is bounded (timeout), so a deadlock fails
# here, not hangs.
# Without MPI (PP_MPI is not `on`, or no mpirun) only the refusal of a launch the build cannot
# serve is checked, and the rest is reported skipped. Prints the summary line run_tests.sh reads.
P=${PP_BUILD:-build}/ppsched
MPIRUN=${PP_MPIRUN:-$(command -v mpirun 2>/dev/null)}
tmp=$(mktemp -d)
passed=0 failed=0 skipped=0
NCCL="--set pipeline.transport=nccl"

ok() { passed=$((passed + 1)); }
bad() {
    failed=$((failed + 1))
    echo "  FAIL $*"
}

# Without MPI: a launcher's environment with several processes is refused (exit 2), not run
# as several whole pipelines.
if [ "${PP_MPI:-}" != on ]; then
    OMPI_COMM_WORLD_SIZE=2 "$P" --simulate --quiet schedules/1f1b.yaml >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq 2 ] && grep -q "built without MPI" "$tmp/err"; then ok; else
        bad "a 2-process launch of a build without MPI: exit $rc"
        sed 's/^/    /' "$tmp/err" | head -3
    fi
    echo "  SKIP mpirun runs: ppsched was built without MPI (no mpicc found, or MPI=off)"
    rm -rf "$tmp"
    echo "check_mpi: $passed passed, $failed failed, 1 skipped"
    [ "$failed" -eq 0 ]
    exit
fi
if [ -z "$MPIRUN" ] || [ ! -x "$MPIRUN" ]; then
    echo "  SKIP mpirun runs: no mpirun found"
    rm -rf "$tmp"
    echo "check_mpi: 0 passed, 0 failed, 1 skipped"
    exit 0
fi

# Open MPI: more processes than cores, and as root in containers; every launch bounded.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_rmaps_base_oversubscribe=1
LIMIT=${PP_MPI_TIMEOUT:-120}
mpi() { timeout "$LIMIT" "$MPIRUN" "$@"; }

# Each rank's exit code into $tmp/rc.RANK (the wrapper itself exits 0, so mpirun does not abort
# the other ranks before they have written theirs).
WRAP='"$0" "$@"; echo $? >"'"$tmp"'/rc.${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-x}}"; exit 0'

# same_rc N WANT WHAT: every one of N ranks left with WANT.
same_rc() {
    n=$1 want=$2 what=$3 codes=""
    for r in $(seq 0 $((n - 1))); do codes="$codes $(cat "$tmp/rc.$r" 2>/dev/null || echo none)"; done
    if [ "$codes" = "$(printf " $want%.0s" $(seq 1 "$n"))" ]; then ok; else
        bad "$what: rank exit codes$codes (want $want on every rank)"
        sed 's/^/    /' "$tmp/err" | grep -v '^    -\|^    $' | head -6
    fi
    rm -f "$tmp"/rc.*
}

# expect_err PATTERN WHAT: a line of the launch's stderr.
expect_err() {
    if grep -q -- "$1" "$tmp/err"; then ok; else
        bad "$2: no '$1' on stderr"
        sed 's/^/    /' "$tmp/err" | head -6
    fi
}

# --- the merged run equals the single process ---------------------------------------------------
for s in gpipe 1f1b interleaved zb-h1 zb-v dualpipe-v; do
    f=schedules/$s.yaml
    "$P" --simulate --quiet $NCCL "$f" >"$tmp/one.txt" 2>"$tmp/err" &&
        "$P" --simulate --json $NCCL --trace "$tmp/one.trace" "$f" >"$tmp/one.json" 2>>"$tmp/err" ||
        { bad "$s: the single-process run failed"; continue; }
    for n in 2 4; do
        mpi -np $n "$P" --simulate --quiet $NCCL "$f" >"$tmp/n.txt" 2>"$tmp/err" &&
            mpi -np $n "$P" --simulate --json $NCCL --trace "$tmp/n.trace" "$f" \
                >"$tmp/n.json" 2>>"$tmp/err"
        rc=$?
        if [ "$rc" -ne 0 ]; then
            bad "$s -np $n: exit $rc"
            sed 's/^/    /' "$tmp/err" | head -6
            continue
        fi
        for part in txt json trace; do
            if cmp -s "$tmp/one.$part" "$tmp/n.$part"; then ok; else
                bad "$s -np $n: the merged $part differs from the single process's"
                diff "$tmp/one.$part" "$tmp/n.$part" | head -6 | sed 's/^/    /'
            fi
        done
    done
done

# pipeline.data_parallel=2 (2 pipelines of 2): the merged simulation equals the single process's,
# one process per replica (-np 2) and per device (-np 4), the reductions met across processes;
# aligned reductions with a replica over several processes are refused at the key on every rank.
DP="--set pipeline.devices=4 --set pipeline.data_parallel=2"
for s in 1f1b zb-v; do
    # shellcheck disable=SC2086
    "$P" --simulate --json $NCCL $DP "schedules/$s.yaml" >"$tmp/one.json" 2>"$tmp/err" ||
        { bad "$s d=2: the single-process run failed"; continue; }
    for n in 2 4; do
        # shellcheck disable=SC2086
        mpi -np $n "$P" --simulate --json $NCCL $DP "schedules/$s.yaml" >"$tmp/n.json" 2>"$tmp/err"
        if cmp -s "$tmp/one.json" "$tmp/n.json"; then ok; else
            bad "$s d=2 -np $n: the merged JSON differs from the single process's"
            sed 's/^/    /' "$tmp/err" | head -6
        fi
    done
done
# shellcheck disable=SC2086
mpi -np 2 "$P" --simulate --json $NCCL $DP --set pipeline.reduce_align=aligned schedules/1f1b.yaml \
    >"$tmp/n.json" 2>"$tmp/err" && ok || bad "d=2 aligned -np 2 (a replica a process): refused"
# shellcheck disable=SC2086
mpi -np 4 sh -c "$WRAP" "$P" --simulate $NCCL $DP --set pipeline.reduce_align=aligned \
    schedules/1f1b.yaml >/dev/null 2>"$tmp/err"
same_rc 4 2 "d=2 aligned -np 4"
expect_err "pipeline.reduce_align=aligned: aligned reductions wait for every stage of a replica" \
    "d=2 aligned -np 4"

# An explicit split: two devices a process, as the even split of 4 over 2 gives.
mpi -np 2 "$P" --simulate --json $NCCL --set pipeline.devices_per_process=2 schedules/zb-h1.yaml \
    >"$tmp/n.json" 2>"$tmp/err"
"$P" --simulate --json $NCCL schedules/zb-h1.yaml >"$tmp/one.json" 2>/dev/null
cmp -s "$tmp/one.json" "$tmp/n.json" && ok || bad "devices_per_process=2: the report differs"

# --- transport auto, and the hosts ---------------------------------------------------------------
S=schedules/1f1b.yaml
# expect_out FILE PATTERN WHAT: a line of a launch's output.
expect_out() {
    if grep -q -- "$2" "$1"; then ok; else
        bad "$3: no '$2'"
        sed 's/^/    /' "$1" | head -8
        sed 's/^/    /' "$tmp/err" | head -4
    fi
}
# auto NPROC HOSTS WANT_BOUNDARIES WANT_JSON WANT_PROCESSES: the shipped file as it is, on HOSTS
# played hosts (0: the machine's own split).
auto() {
    env=""
    [ "$2" -gt 0 ] && env="-x PPSCHED_TEST_HOSTS=$2"
    # shellcheck disable=SC2086
    mpi $env -np "$1" sh -c "$WRAP" "$P" --simulate $S >"$tmp/n.txt" 2>"$tmp/err"
    same_rc "$1" 0 "auto -np $1 on $2 hosts"
    # shellcheck disable=SC2086
    mpi $env -np "$1" "$P" --simulate --json $S >"$tmp/n.json" 2>/dev/null
    expect_out "$tmp/n.txt" "^# pipeline: .*transport auto$" "auto -np $1: the pipeline line"
    expect_out "$tmp/n.txt" "^# boundaries: $3\$" "auto -np $1 on $2 hosts: the boundaries"
    expect_out "$tmp/n.json" "$4" "auto -np $1 on $2 hosts: the JSON's boundaries"
    expect_out "$tmp/err" "^# processes: $5\$" "auto -np $1 on $2 hosts: the processes"
}
auto 2 0 "0->1 peer, 1->2 ipc, 2->3 peer" \
    '"transport":"auto","boundaries":\[{"from":0,"to":1,"transport":"peer"},{"from":1,"to":2,"transport":"ipc"},{"from":2,"to":3,"transport":"peer"}\]}' \
    "2 (MPI) on 1 host: rank 0 devices 0-1 (host 0, local rank 0), rank 1 devices 2-3 (host 0, local rank 1)"
auto 4 0 "0->1->2->3 ipc" '{"from":2,"to":3,"transport":"ipc"}' \
    "4 (MPI) on 1 host: rank 0 device 0 (host 0, local rank 0), rank 1 device 1 (host 0, local rank 1), rank 2 device 2 (host 0, local rank 2), rank 3 device 3 (host 0, local rank 3)"
auto 4 2 "0->1 ipc, 1->2 nccl, 2->3 ipc" '{"from":1,"to":2,"transport":"nccl"}' \
    "4 (MPI) on 2 hosts: rank 0 device 0 (host 0, local rank 0), rank 1 device 1 (host 0, local rank 1), rank 2 device 2 (host 1, local rank 0), rank 3 device 3 (host 1, local rank 1)"
auto 2 2 "0->1 peer, 1->2 nccl, 2->3 peer" '{"from":1,"to":2,"transport":"nccl"}' \
    "2 (MPI) on 2 hosts: rank 0 devices 0-1 (host 0, local rank 0), rank 1 devices 2-3 (host 1, local rank 0)"
# interleaved over two hosts of two processes: the wrap-around boundary 3->0 crosses hosts too
mpi -x PPSCHED_TEST_HOSTS=2 -np 2 "$P" --simulate --quiet schedules/interleaved.yaml \
    >"$tmp/n.txt" 2>"$tmp/err"
expect_out "$tmp/n.txt" "^# boundaries: 0->1 peer, 1->2 nccl, 2->3 peer, 3->0 nccl$" \
    "interleaved on 2 hosts: the boundaries"

# --- show and check: rank 0 prints what one process prints -----------------------------------
for c in check show; do
    "$P" $c $S >"$tmp/one.txt" 2>&1
    mpi -np 2 sh -c "$WRAP" "$P" $c $S >"$tmp/n.txt" 2>"$tmp/err"
    same_rc 2 0 "$c under mpirun"
    if cmp -s "$tmp/one.txt" "$tmp/n.txt"; then ok; else
        bad "$c -np 2: the output differs from one process's"
        diff "$tmp/one.txt" "$tmp/n.txt" | head -6 | sed 's/^/    /'
    fi
done
mpi -np 3 sh -c "$WRAP" "$P" check $S >/dev/null 2>"$tmp/err"
same_rc 3 2 "check, 4 devices over 3 processes"
expect_err "pipeline.devices: 4 devices do not split evenly over 3 processes" \
    "check, 4 devices over 3 processes"
mpi -np 2 sh -c "$WRAP" "$P" compare $S schedules/gpipe.yaml >"$tmp/n.txt" 2>"$tmp/err"
same_rc 2 2 "compare under mpirun"
expect_err "ppsched: compare does not run under mpirun (2 processes): run \`ppsched compare ...\` without mpirun" \
    "compare under mpirun"
[ "$(grep -c 'does not run under mpirun' "$tmp/err")" -eq 1 ] && [ ! -s "$tmp/n.txt" ] && ok ||
    bad "compare under mpirun: said more than once, or printed a report"

# --- failures reach every rank ------------------------------------------------------------------
mpi -np 1 sh -c "$WRAP" "$P" --simulate --quiet $NCCL $S : \
    -np 1 sh -c "$WRAP" "$P" --simulate --quiet $NCCL tests/data/bad_syntax.yaml \
    >/dev/null 2>"$tmp/err"
same_rc 2 2 "a bad file only rank 1 reads"
expect_err "ppsched: rank 1 of 2 failed: input error" "a bad file only rank 1 reads"
expect_err "bad_syntax.yaml:3:2: invalid YAML" "a bad file only rank 1 reads"

mpi -np 1 sh -c "$WRAP" "$P" --simulate --quiet $NCCL $S : \
    -np 1 sh -c "$WRAP" "$P" --simulate --quiet $NCCL --set pipeline.micro_batches=16 $S \
    >/dev/null 2>"$tmp/err"
same_rc 2 2 "a plan only rank 1 has"
expect_err "rank 1: the plan differs from rank 0's" "a plan only rank 1 has"

mpi -np 2 sh -c "$WRAP" "$P" --simulate --quiet --set pipeline.transport=peer $S >/dev/null \
    2>"$tmp/err"
same_rc 2 2 "peer between processes"
expect_err "pipeline.transport=peer: the boundary from device 1 (rank 0) to device 2 (rank 1) goes over peer, which cannot cross processes (allowed: nccl, ipc, auto, and a GPU per pipeline device)" \
    "peer between processes"

# GPUs shared within each process: auto's ipc between the processes takes them
mpi -np 2 sh -c "$WRAP" "$P" --simulate --set 'pipeline.devices=[0,0,1,1]' $S \
    >"$tmp/n.txt" 2>"$tmp/err"
same_rc 2 0 "auto on shared GPUs, two processes"
expect_out "$tmp/n.txt" "^# boundaries: 0->1 shared, 1->2 ipc, 2->3 shared$" \
    "auto on shared GPUs, two processes"

mpi -np 3 sh -c "$WRAP" "$P" --simulate --quiet $NCCL $S >/dev/null 2>"$tmp/err"
same_rc 3 2 "4 devices over 3 processes"
expect_err "pipeline.devices: 4 devices do not split evenly over 3 processes" "4 devices over 3 processes"

# The sender of the first transfer between processes never posts: the receiver's rank times out
# naming its pending op and the rank it waits for; every rank leaves with 1.
mpi -x PPSCHED_TEST_DROP_SEND=0 -np 2 sh -c "$WRAP" "$P" --simulate --quiet $NCCL --timeout 2 $S \
    >/dev/null 2>"$tmp/err"
same_rc 2 1 "a transfer never posted"
expect_err "rank 1: op 5 (device 2, step 0, action 2RECV_F0) still pending after 2 s: waiting for rank 0 to post its end, op 4 (device 1, step 2, action 1SEND_F0)" \
    "a transfer never posted"
expect_err "ppsched: rank 1 of 2 failed: timeout" "a transfer never posted"

rm -rf "$tmp"
echo "check_mpi: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
