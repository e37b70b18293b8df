#!/bin/sh
# predict_check.sh [--profile | --from DIR] [BUILD] [PROFILE] [OUTDIR] — `make check-predict`: the
# cost and memory model against measurement on the GPUs present, with a verdict against the targets.
# --from DIR predicts again, with this build and no GPU, the cases an earlier check measured into
# DIR (its cases.tsv, setup and *.measured.json): the a-priori and the profile's columns are this
# build's, the measured ones DIR's (OUTDIR default: DIR-again). A change to the model is checked
# against stored measurements that way before a GPU runs it.
#
# Devices: p = 4 separate GPUs with four or more, 2 with two or three (the presets' 16 and 24
# layers and m = 8, 32 do not divide over 3), pipeline.devices=p; with one GPU every stage on it
# (pipeline.devices=1). CUDA_VISIBLE_DEVICES, where set, limits the count. The header says which.
#
# Cases: every generated schedule kind's shipped file (schedules/<kind>.yaml; `auto` too) at the
# reference and the small model preset (--set model=NAME), m = 8 and 32; then 1F1B at the
# reference shape with one sequence per micro-batch (pipeline.micro_batch_size=1: "reference/b1"),
# m = 8 and 32. PREDICT_KINDS="1f1b zb-v" keeps those files only. PREDICT_7B=1 adds the 7B-class
# shape on 4 devices: the shipped schedules/7b-{1f1b,interleaved,zb-h1,zb-v}.yaml (of
# PREDICT_KINDS) as they are, m = 16 with AdamW in the step (about 35 s a case on 4 H200s; needs 4
# GPUs of 64 GiB or more). Each case runs three times:
#   measured   5 timed steps after 2 warm-up; its JSON carries what the model predicted before
#              running on the GPU's description alone (step_ms_predicted, and each device's
#              peak_mem_predicted_bytes): the a-priori step and memory;
#   a priori   --simulate --gpu <gpu>: the same plan simulated on the description; its bubble is
#              the a-priori bubble (the measured JSON's bubble_simulated is not: it simulates the
#              run's own measured op times);
#   profile    --simulate --gpu <gpu> --set cost.profile=PROFILE: the step with the profile.
# PROFILE is a file written by `ppsched profile` (default profiles/<gpu>.yaml); --profile first
# makes it on this GPU (`ppsched profile schedules/1f1b.yaml --set pipeline.devices=1`, about 30 s).
#
# Prints one table (measured step, the a-priori and the profile's step and their errors; measured
# bubble, the a-priori one and the difference in pp; the fullest device's measured peak memory
# against its prediction), each checked figure marked ok or MISS against the targets (the TARGETS
# table below), then the ranking of the kinds by measured step against the a-priori ranking for
# each shape and m, and a verdict. A case the model says does not fit must be refused by the
# executor too (and is then no miss). Writes the raw JSON, table.txt and results.json (every row,
# mark and ranking) to OUTDIR, default bench/results/predict-<date>-<gpu>/ (-2, -3, ... appended
# when that day's has a table already). Needs python3.
# Exit: 0 every target met; 1 a target missed or a case that should have run did not (after
# printing everything); 2 bad usage, no GPU, a GPU with no description, no profile (nothing ran).
set -eu
usage="usage: predict_check.sh [--profile | --from DIR] [BUILD] [PROFILE] [OUTDIR]"
make_profile=0
from=""
case ${1:-} in
--profile) make_profile=1; shift ;;
--from)
    [ $# -ge 2 ] || { echo "predict_check.sh: --from needs a folder" >&2; echo "$usage" >&2; exit 2; }
    from=$2
    shift 2
    for f in cases.tsv setup; do
        [ -f "$from/$f" ] || { echo "predict_check.sh: --from $from: no $f there (a folder an earlier check wrote)" >&2; exit 2; }
    done ;;
-h | --help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
for a in "$@"; do
    case $a in -*) echo "predict_check.sh: unknown option '$a'" >&2; echo "$usage" >&2; exit 2 ;; esac
done
[ $# -le 3 ] || { echo "$usage" >&2; exit 2; }
build=${1:-build}
ppsched="$build/ppsched"
[ -x "$ppsched" ] || { echo "predict_check.sh: $ppsched not built (run make first)" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || { echo "predict_check.sh: python3 is needed for the table" >&2; exit 2; }

# The shipped files, one per generated kind (tests/check_bench_predict.sh checks the kind table has
# no other); PREDICT_KINDS keeps a few.
all_kinds="gpipe 1f1b interleaved zb-h1 zb-h2 zb-v dualpipe-v looped-bfs interleaved-zb auto"
kinds=${PREDICT_KINDS:-$all_kinds}
for k in $kinds; do
    case " $all_kinds " in *" $k "*) ;; *)
        echo "predict_check.sh: PREDICT_KINDS: unknown '$k' (allowed: $all_kinds)" >&2
        exit 2 ;;
    esac
done

# The value of `key=` in the setup file $1 (written by a measuring check).
setup_value() { sed -n "s/^$2=//p" "$1" | head -n 1; }

if [ -n "$from" ]; then
    p=$(setup_value "$from/setup" p) tag=$(setup_value "$from/setup" gpu)
    devices="$(setup_value "$from/setup" devices), measured at $(setup_value "$from/setup" commit); predicted again from $from"
    case "$p:$tag" in [124]:h100 | [124]:h200 | [124]:a100 | [124]:b200) ;; *)
        echo "predict_check.sh: --from $from: setup names p=$p gpu=$tag (want p 1, 2 or 4 and a GPU description)" >&2
        exit 2 ;;
    esac
else
n_gpu=0
command -v nvidia-smi >/dev/null 2>&1 && n_gpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${CUDA_VISIBLE_DEVICES+set}" = set ]; then
    n_vis=$(printf '%s\n' "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c . || true)
    if [ "$n_vis" -lt "$n_gpu" ]; then n_gpu=$n_vis; fi
fi
if [ "$n_gpu" -eq 0 ]; then
    echo "predict_check.sh: no GPU found: this compares predictions with measurements." >&2
    exit 2
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
case "$gpu" in
*H100*) tag=h100 ;;
*H200*) tag=h200 ;;
*A100*) tag=a100 ;;
*B200*) tag=b200 ;;
*)
    echo "predict_check.sh: no GPU description matches '$gpu' (allowed: H100, H200, A100, B200;" \
        "model/gpu.c): the a-priori prediction needs one" >&2
    exit 2 ;;
esac
if [ "$n_gpu" -ge 4 ]; then p=4; elif [ "$n_gpu" -ge 2 ]; then p=2; else p=1; fi
case $p in
1) devices="one $gpu, every stage on it (pipeline.devices=1)" ;;
*) devices="$p separate $gpu (pipeline.devices=$p)" ;;
esac
if [ "$n_gpu" -eq 3 ]; then devices="$devices, 2 of 3: the presets' layers and m do not divide over 3"; fi
fi

profile=${2:-profiles/$tag.yaml}
out=${3:-}
if [ -z "$out" ]; then
    base=bench/results/predict-$(date -u +%Y-%m-%d)-$tag
    if [ -n "$from" ]; then base=$from-again; fi
    out=$base
    n=2
    while [ -e "$out/table.txt" ]; do # a second call the same day keeps the first one's table
        out=$base-$n
        n=$((n + 1))
    done
fi
mkdir -p "$out"
start=$(date +%s)
made="shipped"
if [ "$make_profile" = 1 ]; then
    echo "# predict_check: making $profile on $gpu"
    "$ppsched" profile schedules/1f1b.yaml --set pipeline.devices=1 -o "$profile" 2>"$out/profile.err" ||
        { cat "$out/profile.err" >&2; echo "predict_check.sh: ppsched profile failed" >&2; exit 1; }
    made="made in the same call, $(($(date +%s) - start)) s"
fi
[ -f "$profile" ] || { echo "predict_check.sh: no profile $profile (make one: $ppsched profile schedules/1f1b.yaml --set pipeline.devices=1 -o $profile, or pass --profile)" >&2; exit 2; }
# --set cost.profile is relative to the schedule's folder: give it the profile's absolute path
profile_set=$(cd "$(dirname "$profile")" && pwd)/$(basename "$profile")
commit=${PPSCHED_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
to=""
command -v timeout >/dev/null 2>&1 && to="timeout 900"
export NCCL_NVLS_ENABLE=0 # NVLink SHARP stays off: point-to-point never uses it

# The cases, one line each: id, shape, schedule file, m, the --set options of the shape; --from:
# the earlier check's.
same=0 # --from into its own folder: its files stay where they are
if [ -n "$from" ]; then
    [ "$(cd "$from" && pwd)" = "$(cd "$out" && pwd)" ] && same=1
    [ "$same" = 1 ] || cp "$from/cases.tsv" "$out/cases.tsv"
    shapes=$(cut -f2 "$out/cases.tsv" | grep -v / | awk '!seen[$0]++' | tr '\n' ' ')
else
: >"$out/cases.tsv"
for shape in reference small; do
    for kind in $kinds; do
        for m in 8 32; do
            printf '%s\t%s\t%s\t%s\t%s\n' "$shape-$kind-m$m" "$shape" "$kind" "$m" \
                "--set model=$shape" >>"$out/cases.tsv"
        done
    done
done
case " $kinds " in *" 1f1b "*)
    for m in 8 32; do
        printf '%s\t%s\t%s\t%s\t%s\n' "reference-b1-1f1b-m$m" reference/b1 1f1b "$m" \
            "--set model=reference --set pipeline.micro_batch_size=1" >>"$out/cases.tsv"
    done ;;
esac
shapes="reference small"
if [ "${PREDICT_7B:-0}" = 1 ]; then
    if [ "$p" -eq 4 ]; then
        shapes="$shapes 7b"
        for kind in 1f1b interleaved zb-h1 zb-v; do
            case " $kinds " in *" $kind "*)
                printf '%s\t%s\t%s\t%s\t%s\n' "7b-$kind-m16" 7b "7b-$kind" 16 \
                    "--set model=7b" >>"$out/cases.tsv" ;;
            esac
        done
    else
        echo "# predict_check: PREDICT_7B=1 needs 4 GPUs ($p here): the 7B-class cases are left out"
    fi
fi
printf 'p=%s\ngpu=%s\ndevices=%s\ncommit=%s\n' "$p" "$tag" "$devices" "$commit" >"$out/setup"
fi
n_cases=$(wc -l <"$out/cases.tsv")
echo "# predict_check: $devices, profile $profile, commit $commit, $n_cases cases -> $out"

common="--set pipeline.devices=$p --set run.steps=5 --set run.warmup=2 --quiet --json"
i=0
tab=$(printf '\t')
while IFS="$tab" read -r id shape kind m sets; do
    i=$((i + 1))
    echo "# [$i/$n_cases] $shape $kind m=$m"
    b="$out/$id"
    if [ -n "$from" ]; then
        for f in measured.json measured.err; do
            if [ ! -f "$from/$id.$f" ]; then : >"$b.$f"; elif [ "$same" = 0 ]; then
                cp "$from/$id.$f" "$b.$f"
            fi
        done
    else
        # shellcheck disable=SC2086
        $to "$ppsched" schedules/$kind.yaml $common $sets --set pipeline.micro_batches=$m \
            >"$b.measured.json" 2>"$b.measured.err" </dev/null || true
    fi
    # shellcheck disable=SC2086
    "$ppsched" schedules/$kind.yaml $common $sets --set pipeline.micro_batches=$m \
        --simulate --gpu "$tag" >"$b.gpu.json" 2>"$b.gpu.err" </dev/null || true
    # shellcheck disable=SC2086
    "$ppsched" schedules/$kind.yaml $common $sets --set pipeline.micro_batches=$m \
        --simulate --gpu "$tag" --set cost.profile="$profile_set" >"$b.profile.json" 2>"$b.profile.err" </dev/null || true
done <"$out/cases.tsv"

# What each prediction applied (the profile's step factor, the pair overlap): DualPipeV at m = 8.
{
    echo "# bench/predict_check.sh on $devices, $(date -u +%Y-%m-%d), tree at $commit, profile $profile ($made)"
    for shape in $shapes; do
        for src in profile gpu; do
            set -- --gpu "$tag"
            if [ "$src" = profile ]; then set -- "$@" --set cost.profile="$profile_set"; fi
            line=$("$ppsched" schedules/dualpipe-v.yaml --simulate --set pipeline.devices="$p" \
                --set model="$shape" "$@" 2>/dev/null </dev/null | grep '^# cost model:' |
                sed 's/; ms per micro-batch.*//') || line="# cost model: ?"
            if [ "$src" = gpu ]; then src="a priori"; fi
            echo "# $shape, $src: ${line#\# }"
        done
    done
} >"$out/table.txt"
rc=0
PREDICT_AGAIN=$([ -n "$from" ] && echo 1 || echo 0) PREDICT_SECONDS=$(($(date +%s) - start)) \
    python3 - "$out" >>"$out/table.txt" <<'EOF' || rc=$?
import json, os, sys

# The targets: |predicted - measured| at most this much (step and memory in % of the measured,
# the bubble in percentage points). None: printed, not checked. A class of cases is a row.
TARGETS = {
    "pipeline": {"step": 3.0, "profile": 3.0, "bubble": 1.0, "mem": 2.0},
    # one sequence per micro-batch, the latency-bound regime: the step within 10 %
    "b1": {"step": 10.0, "profile": 10.0, "bubble": None, "mem": 2.0},
}
RANK_TIE = 1.0  # two kinds whose steps differ by less (%) may come in either order

out = sys.argv[1]
GIB = float(2**30)
AGAIN = os.environ.get("PREDICT_AGAIN") == "1"  # --from: predicted again by this build


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def first_error(path):
    try:
        with open(path) as f:
            lines = [l.strip() for l in f if l.strip()]
    except OSError:
        return "?"
    said = [l for l in lines if l.startswith("ppsched")]
    return (said or lines or ["no output"])[0]


def said(path, words):
    try:
        with open(path) as f:
            return words in f.read()
    except OSError:
        return False


def num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def fullest(r):
    """The measured peak and its prediction on the device with the largest measured peak."""
    devs = [d for d in (r or {}).get("per_device") or [] if (num(d.get("peak_mem_bytes")) or 0) > 0]
    if not devs:
        return None, None
    d = max(devs, key=lambda d: d["peak_mem_bytes"])
    pred = num(d.get("peak_mem_predicted_bytes"))
    return d["peak_mem_bytes"] / GIB, (pred / GIB if pred and pred > 0 else None)


def check(value, target):
    """'ok', 'MISS' or '-' (no target); a value that should be there and is not misses."""
    if target is None:
        return "-"
    return "MISS" if value is None or abs(value) > target else "ok"


def pct(pred, meas):
    return 100.0 * (pred - meas) / meas if pred is not None and meas else None


rows, misses = [], []
with open(os.path.join(out, "cases.tsv")) as f:
    cases = [l.rstrip("\n").split("\t") for l in f if l.strip()]
for cid, shape, sched, m, _ in cases:
    base = os.path.join(out, cid)
    meas, gpu, prof = (load(base + s) for s in (".measured.json", ".gpu.json", ".profile.json"))
    simulated = meas is not None and meas.get("mode") != "measure"  # a ppsched without CUDA
    if simulated:
        meas = None
    t = TARGETS["b1" if shape.endswith("/b1") else "pipeline"]
    row = {"id": cid, "shape": shape, "schedule": sched, "kind": (gpu or meas or {}).get("kind"),
           "m": int(m), "note": ""}
    row["step"] = num((meas or {}).get("step_ms"))
    row["step_apriori"] = num((meas or {}).get("step_ms_predicted"))
    row["step_profile"] = num((prof or {}).get("step_ms"))
    row["bubble"] = num((meas or {}).get("bubble"))
    row["bubble_apriori"] = num((gpu or {}).get("bubble"))
    row["bubble_profile"] = num((prof or {}).get("bubble"))  # results.json only, not checked
    row["mem_gib"], row["mem_pred_gib"] = fullest(meas)
    if AGAIN and meas is not None:  # this build's prediction, not the measuring one's
        row["step_apriori"] = num((gpu or {}).get("step_ms"))
        row["mem_pred_gib"] = None
        devs = (meas.get("per_device") or [], (gpu or {}).get("per_device") or [])
        if devs[0] and len(devs[0]) == len(devs[1]):
            k = max(range(len(devs[0])), key=lambda i: num(devs[0][i].get("peak_mem_bytes")) or 0)
            row["mem_pred_gib"] = (num(devs[1][k].get("peak_mem_bytes")) or 0) / GIB or None
    if meas is None and gpu is not None:  # the model's figure, for the row
        row["mem_pred_gib"] = max((num(d.get("peak_mem_bytes")) or 0) for d in gpu["per_device"]) / GIB
    row["step_err"] = pct(row["step_apriori"], row["step"])
    row["profile_err"] = pct(row["step_profile"], row["step"])
    bb = (row["bubble_apriori"], row["bubble"])
    row["bubble_pp"] = 100.0 * (bb[0] - bb[1]) if None not in bb else None
    row["mem_err"] = pct(row["mem_pred_gib"], row["mem_gib"])
    refused = said(base + ".measured.err", "does not fit in device memory")
    too_big = said(base + ".gpu.err", "would not fit")
    if meas is None and refused and too_big:
        row["note"] = "does not fit: predicted, and the executor refused it"
        row["marks"] = {k: "-" for k in ("step", "profile", "bubble", "mem")}
    else:
        row["marks"] = {"step": check(row["step_err"], t["step"]),
                        "profile": check(row["profile_err"], t["profile"]),
                        "bubble": check(row["bubble_pp"], t["bubble"]),
                        "mem": check(row["mem_err"], t["mem"])}
        if simulated:
            row["note"] = "not measured: ppsched simulated it (built without CUDA?)"
        elif meas is None:
            row["note"] = "did not run: " + first_error(base + ".measured.err")
            if too_big != refused:
                row["note"] += " (the model said it %s)" % ("does not fit" if too_big else "fits")
        elif too_big:
            row["note"] = "ran, but the model said it does not fit"
            row["marks"]["mem"] = "MISS"
        for src, path in (("a priori", ".gpu"), ("profile", ".profile")):
            if (gpu if src == "a priori" else prof) is None:
                row["note"] += "; %s: %s" % (src, first_error(base + path + ".err"))
        row["note"] = row["note"].lstrip("; ")
    for k, v in row["marks"].items():
        if v == "MISS":
            misses.append("%s %s m=%s %s" % (shape, sched, m, {"step": "step a priori",
                          "profile": "step with the profile", "bubble": "bubble",
                          "mem": "peak memory"}[k]))
    rows.append(row)


def f(v, fmt):
    return "-" if v is None else fmt % v


print("# targets: a-priori step within %g %%, bubble within %g pp, peak memory within %g %%; "
      "with the profile, step within %g %%; reference/b1 (one sequence per micro-batch): step "
      "within %g %% a priori and with the profile, memory within %g %%, bubble not checked; the "
      "ranking of the kinds by measured step is the a-priori ranking (steps within %g %% tie)"
      % (TARGETS["pipeline"]["step"], TARGETS["pipeline"]["bubble"], TARGETS["pipeline"]["mem"],
         TARGETS["pipeline"]["profile"], TARGETS["b1"]["step"], TARGETS["b1"]["mem"], RANK_TIE))
fmt = ("%-12s %-14s %3s %9s %9s %6s %-4s %9s %6s %-4s %6s %6s %6s %-4s %7s %7s %6s %-4s %s")
hfmt = "# %-10s" + fmt[5:]  # the header's first column two narrower, for the "# "
print((hfmt % ("shape", "schedule", "m", "step", "a priori", "err", "", "profile", "err", "",
               "bubble", "apriori", "diff", "", "memory", "pred", "err", "", "note")).rstrip())
print((hfmt % ("", "", "", "ms", "ms", "%", "", "ms", "%", "", "%", "%", "pp", "", "GiB", "GiB",
               "%", "", "")).rstrip())
for r in rows:
    mk = r["marks"]
    print((fmt % (r["shape"], r["schedule"], r["m"], f(r["step"], "%.2f"), f(r["step_apriori"], "%.2f"),
                  f(r["step_err"], "%+.1f"), mk["step"], f(r["step_profile"], "%.2f"),
                  f(r["profile_err"], "%+.1f"), mk["profile"],
                  f(None if r["bubble"] is None else 100 * r["bubble"], "%.2f"),
                  f(None if r["bubble_apriori"] is None else 100 * r["bubble_apriori"], "%.2f"),
                  f(r["bubble_pp"], "%+.2f"), mk["bubble"], f(r["mem_gib"], "%.2f"),
                  f(r["mem_pred_gib"], "%.2f"), f(r["mem_err"], "%+.1f"), mk["mem"],
                  r["note"])).rstrip())

# The ranking, per shape and m: every pair of kinds that both ran must come in the same order by
# measured step as by the a-priori step, unless one of the two orders is a tie.
rankings = []
for shape in [s for s in ("reference", "small", "7b") if any(r["shape"] == s for r in rows)]:
    for m in sorted({r["m"] for r in rows if r["shape"] == shape}):
        ran = [r for r in rows if r["shape"] == shape and r["m"] == m and r["step"] is not None
               and r["step_apriori"] is not None]
        if len(ran) < 2:
            continue
        inverted = []
        for i, a in enumerate(ran):
            for b in ran[i + 1:]:
                dm = pct(b["step"], a["step"])
                dp = pct(b["step_apriori"], a["step_apriori"])
                if abs(dm) > RANK_TIE and abs(dp) > RANK_TIE and (dm > 0) != (dp > 0):
                    inverted.append((b["schedule"], a["schedule"], dp, dm))
        order = lambda key: [r["schedule"] for r in sorted(ran, key=lambda r: (r[key], r["schedule"]))]
        rk = {"shape": shape, "m": m, "measured": order("step"), "apriori": order("step_apriori"),
              "inverted": [list(x[:2]) for x in inverted], "mark": "MISS" if inverted else "ok"}
        rankings.append(rk)
        print("# ranking %s m=%d: %s; measured %s; a priori %s%s"
              % (shape, m, rk["mark"], " < ".join(rk["measured"]), " < ".join(rk["apriori"]),
                 "".join("; %s against %s: a priori %+.1f %%, measured %+.1f %%" % x for x in inverted)))
        if inverted:
            misses.append("ranking %s m=%d (%s)" % (shape, m, ", ".join("%s/%s" % x[:2] for x in inverted)))

verdict = "MISS" if misses else "PASS"
with open(os.path.join(out, "results.json"), "w") as fo:
    json.dump({"targets": TARGETS, "rank_tie_pct": RANK_TIE, "rows": rows, "rankings": rankings,
               "misses": misses, "verdict": verdict}, fo, indent=1)
secs = os.environ.get("PREDICT_SECONDS", "?")
if misses:
    print("# verdict: MISS: %d %s missed over %d cases (%s s): %s"
          % (len(misses), "target" if len(misses) == 1 else "targets", len(rows), secs,
             "; ".join(misses)))
else:
    print("# verdict: PASS: every target met over %d cases (%s s)" % (len(rows), secs))
sys.exit(10 if misses else 0)  # 1 is python's own failure
EOF
cat "$out/table.txt"
case $rc in
0) exit 0 ;;
10) exit 1 ;;
*) echo "predict_check.sh: the table could not be made (python3 exit $rc)" >&2; exit 1 ;;
esac
