#!/usr/bin/env python3
"""peer_table.py LOGS OUT — the table of `make bench-peer`'s pipelines, from the runs' files.

Reads LOGS/ppsched-PRESET-SCHEDULE-mM.json (ppsched --json), LOGS/torch-PRESET-*.jsonl
(bench/torch_peer.py) and LOGS/megatron-PRESET-*.jsonl (bench/megatron_peer.py), writes every
record to OUT/peer.jsonl and the table to OUT/peer.md, and prints the table. One row per preset,
schedule and m: each framework's median step, ppsched's speed-up over PyTorch and "vs
Megatron-Core 1F1B", Megatron-Core's 1F1B step at that preset and m over the row's ppsched step
(the yardstick every ppsched schedule is set against). Run by bench/run_peer.sh, which passes
what it ran in the environment:

  PEER_PRESETS, PEER_SCHEDULES, PEER_MICRO_BATCHES  what was run (space-separated)
  PEER_FRAMEWORKS     the peers run beside ppsched: pytorch, megatron-core (space-separated)
  PEER_P, PEER_N_GPU, PEER_GPU, PEER_COMMIT, PEER_TORCH_VERSION, PEER_SHAPE_LINE, PEER_OPTIMIZER
  PEER_MEGATRON_MISSING  why Megatron-Core was not run (it is then not in PEER_FRAMEWORKS)

Exit status: 0 when every expected cell was measured, 1 otherwise.
"""
import glob
import json
import os
import sys
import time

# Megatron-Core's pipeline schedules (bench/megatron_peer.py): the rows that expect its step.
MEGATRON_SCHEDULES = ("1f1b", "interleaved")


def load_ppsched(path):
    """ppsched --json prints one report object (over several lines)."""
    try:
        text = open(path).read()
        start = text.index("{")
        return json.JSONDecoder().raw_decode(text[start:])[0]
    except (OSError, ValueError):
        return None


def load_jsonl(paths, preset, into, records):
    """Each measured line of the files, the first per (preset, schedule, m), into `into`."""
    for path in sorted(paths):
        for line in open(path).read().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "error" in r or (preset, r.get("schedule"), r.get("m")) in into:
                continue
            records.append(r)
            into[(preset, r["schedule"], r["m"])] = r


def num(x, fmt):
    return format(x, fmt) if isinstance(x, (int, float)) else "-"


def ratio(num_ms, den_ms):
    if isinstance(num_ms, (int, float)) and isinstance(den_ms, (int, float)) and den_ms > 0:
        return num_ms / den_ms
    return None


def main():
    logs, out = sys.argv[1:3]
    env = os.environ
    presets = env["PEER_PRESETS"].split()
    schedules = env["PEER_SCHEDULES"].split()
    micro_batches = [int(x) for x in env["PEER_MICRO_BATCHES"].split()]
    frameworks = env.get("PEER_FRAMEWORKS", "").split()
    p = int(env["PEER_P"])
    optimizer = env.get("PEER_OPTIMIZER", "none")
    missing = env.get("PEER_MEGATRON_MISSING", "")

    records = []
    pps, pts, mcs = {}, {}, {}
    for preset in presets:
        for m in micro_batches:
            for s in schedules:
                r = load_ppsched(os.path.join(logs, f"ppsched-{preset}-{s}-m{m}.json"))
                if r is None:
                    continue
                rec = {"framework": "ppsched", "schedule": s, "preset": preset, "p": p, "m": m,
                       "stages": r.get("stages"), "mode": r.get("mode"),
                       "step_ms": r.get("step_ms"), "step_ms_p10": r.get("step_ms_p10"),
                       "step_ms_p90": r.get("step_ms_p90"), "tokens_per_s": r.get("tokens_per_s"),
                       "optimizer": optimizer, "report": r}
                records.append(rec)
                pps[(preset, s, m)] = rec
        load_jsonl(glob.glob(os.path.join(logs, f"torch-{preset}-*.jsonl")), preset, pts, records)
        load_jsonl(glob.glob(os.path.join(logs, f"megatron-{preset}-*.jsonl")), preset, mcs,
                   records)

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "peer.jsonl"), "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")

    rows, expected, measured = [], 0, 0
    for preset in presets:
        for s in schedules:
            for m in micro_batches:
                a, b, c = pps.get((preset, s, m)), pts.get((preset, s, m)), mcs.get((preset, s, m))
                m1 = mcs.get((preset, "1f1b", m))
                a_ms = a and a.get("step_ms")
                b_ms = b and b.get("step_ms")
                c_ms = c and c.get("step_ms")
                vs_torch = ratio(b_ms, a_ms)
                vs_mcore = ratio(m1 and m1.get("step_ms"), a_ms)
                cells = [a_ms]
                if "pytorch" in frameworks:
                    cells.append(b_ms)
                if "megatron-core" in frameworks and s in MEGATRON_SCHEDULES:
                    cells.append(c_ms)
                expected += len(cells)
                measured += sum(1 for x in cells if isinstance(x, (int, float)))
                notes = []
                if a and a.get("mode") != "measure":
                    notes.append(f"ppsched {a.get('mode')}")
                for name, r in (("pytorch", b), ("megatron-core", c)):
                    if r and r.get("p") != p:
                        notes.append(f"{name} on {r.get('p')} GPUs")
                rows.append([preset, s, str(m), num(a_ms, ".2f"), num(b_ms, ".2f"),
                             num(c_ms, ".2f"), num(vs_torch, ".2f") + ("x" if vs_torch else ""),
                             num(vs_mcore, ".2f") + ("x" if vs_mcore else ""),
                             num(a and a.get("tokens_per_s"), ".4g"), "; ".join(notes)])

    mrec = next(iter(mcs.values()), None)
    if "megatron-core" in frameworks and mrec:
        mline = (f"Megatron-Core {mrec.get('megatron_core_version')}: {mrec.get('spec')} layer "
                 f"spec, attention {mrec.get('attention')}, fusions {mrec.get('fusions')}, "
                 f"TransformerEngine {mrec.get('te_version') or 'not installed'}; its 1F1B "
                 f"batches its send/recv, its interleaved (v = 2) overlaps them")
    elif "megatron-core" in frameworks:
        mline = "Megatron-Core: no run finished (see peer-logs/megatron-*.log)"
    else:
        mline = f"Megatron-Core: not run: {missing or 'not asked for'}"
    if optimizer == "adamw":
        oline = ("AdamW inside every step (lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on "
                 "matrices): ppsched and Megatron-Core with fp32 master weights and gradients "
                 "(Megatron: " + ((mrec or {}).get("optimizer_impl") or "its mixed-precision "
                                  "optimizer") + "), PyTorch torch.optim.AdamW (fused) over its "
                 "bf16 parameters")
    else:
        oline = "no side runs an optimizer step"
    date = time.strftime("%Y-%m-%d", time.gmtime())
    pre = [f"ppsched vs torch.distributed.pipelining {env.get('PEER_TORCH_VERSION', '')} and "
           f"Megatron-Core, {p} of {env.get('PEER_N_GPU', '?')}x {env.get('PEER_GPU', '?')}, bf16, "
           f"commit {env.get('PEER_COMMIT', 'unknown')}, {date}",
           "step = median step time; vs PyTorch = PyTorch ms / ppsched ms; vs Megatron-Core 1F1B = "
           "Megatron-Core's 1F1B ms (same preset and m) / this row's ppsched ms; ppsched 2 warm-up "
           "+ 10 timed steps, the peers 2 + 8",
           "ppsched: step start to the last device's end (device clock), peer copies; "
           "the peers: barrier to cuda.synchronize (host clock) on the slowest rank, NCCL",
           oline,
           "attention fused on every side (ppsched: its own flash-style kernel in bf16; PyTorch: "
           "SDPA)",
           mline,
           env.get("PEER_SHAPE_LINE", ""),
           "interleaved: v = 2 on every side; zb: ppsched ZB-H1 (v = 1) vs PyTorch "
           "ScheduleInterleavedZeroBubble (v = 2); zb-v (at a preset): ppsched alone"]
    names = ["preset", "schedule", "m", "ppsched", "pytorch", "megatron", "vs PyTorch",
             "vs Megatron-Core 1F1B", "ppsched", ""]
    units = ["", "", "", "(ms)", "(ms)", "(ms)", "", "", "tokens/s", ""]
    widths = [10, 12, 4, 10, 10, 10, 11, 22, 11, 0]

    def line(cells):
        return " ".join(c.rjust(w) if w else c for c, w in zip(cells, widths)).rstrip()

    for t in pre:
        print("# " + t)
    print(line(names))
    print(line(units))
    for r in rows:
        print(line(r))
    print(f"# {measured} of {expected} cells measured (ppsched, and each peer run where it has "
          f"the schedule); results in {out}/peer.jsonl, peer.md")

    with open(os.path.join(out, "peer.md"), "w") as f:
        f.write("# ppsched vs PyTorch pipelining and Megatron-Core\n\n")
        for t in pre:
            f.write(t + ".  \n")
        f.write("\n| preset | schedule | m | ppsched (ms) | PyTorch (ms) | Megatron-Core (ms) "
                "| vs PyTorch | vs Megatron-Core 1F1B | ppsched tokens/s | note |\n")
        f.write("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
        for r in rows:
            f.write("| " + " | ".join(r) + " |\n")
    return 0 if measured == expected else 1


if __name__ == "__main__":
    sys.exit(main())
