#!/bin/sh
# peer_shape.sh PPSCHED NAME [P] — the shape of the model preset NAME (model/preset.c) as ppsched
# resolves it, for the scripts that hand it to another framework. Prints one line:
#   p m b layers hidden heads seq_len vocab
# p and m are those of the shipped schedules/NAME-1f1b.yaml where there is one (7b: 4 devices,
# m = 16), else P (default 4) and schedules/1f1b.yaml's m; b (sequences per micro-batch) and the
# model come from ppsched's own table of the run (`--set model=NAME`, simulated, no GPU used), so
# no number of a preset is written twice. Exit 2 with ppsched's message for an unknown name, 1
# when its table cannot be read.
set -u
usage="usage: peer_shape.sh PPSCHED NAME [P]"
ppsched=${1:?$usage}
name=${2:?$usage}
p=${3:-4}
root=$(cd "$(dirname "$0")/.." && pwd)
file=$root/schedules/$name-1f1b.yaml
if [ -f "$file" ]; then
    set -- "$file"
else
    set -- "$root/schedules/1f1b.yaml" --set pipeline.devices="$p"
fi
err=$(mktemp)
# --simulate exits 1 for a shape that does not fit the h100 description; its table is whole.
table=$(CUDA_VISIBLE_DEVICES='' "$ppsched" "$@" --set model="$name" --simulate --quiet 2>"$err")
rc=$?
if [ $rc -eq 2 ]; then
    cat "$err" >&2
    rm -f "$err"
    exit 2
fi
rm -f "$err"
model=$(printf '%s\n' "$table" | sed -n 's/^# model: \([0-9]*\) layers, hidden \([0-9]*\), \([0-9]*\) heads, seq \([0-9]*\), vocab \([0-9]*\),.*/\1 \2 \3 \4 \5/p')
pipe=$(printf '%s\n' "$table" | sed -n 's/^# pipeline: p \([0-9]*\) devices,.* m \([0-9]*\) micro-batches of \([0-9]*\) sequence.*/\1 \2 \3/p')
if [ -z "$model" ] || [ -z "$pipe" ]; then
    echo "peer_shape.sh: no '# model:' and '# pipeline:' lines in $ppsched's table (exit $rc)" >&2
    exit 1
fi
echo "$pipe $model"
