#!/bin/sh
# simhash.sh PPSCHED [OUT]: the `--simulate --json` report of every shipped schedule at m = 8 and
# 32, under the cost model's costs (the GPU description h100) and under hand-set costs, one line
# each: its sha256 and what ran. A change meant to leave behaviour alone leaves the list identical
# (`diff` two lists). The explicit schedules keep their own m; CSV imports too.
set -u
bin=${1:?usage: simhash.sh PPSCHED [OUT]}
out=${2:-/dev/stdout}
hand="--set cost.forward=1.0 --set cost.backward_input=1.1 --set cost.backward_weight=0.9 --set cost.send=0.05"
: >"$out"
for f in schedules/*.yaml; do
    for m in 8 32; do
        for costs in model hand; do
            set -- "$f" --simulate --json --gpu h100 --set pipeline.micro_batches=$m
            [ "$costs" = hand ] && set -- "$@" $hand
            r=$("$bin" "$@" 2>&1)
            rc=$?
            h=$(printf '%s\nrc=%d\n' "$r" "$rc" | sha256sum | cut -c1-16)
            echo "$h $f m=$m $costs rc=$rc" >>"$out"
        done
    done
done
