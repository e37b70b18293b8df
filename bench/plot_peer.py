#!/usr/bin/env python3
"""plot_peer.py PEER.jsonl OUT.svg [--m M] — ppsched next to its peers as an SVG bar chart.

Reads the JSON lines bench/run_peer.sh writes (one per framework, preset, schedule and m) and draws,
for each model preset, the tokens/s of each framework present (ppsched, PyTorch pipelining,
Megatron-Core) per schedule at one micro-batch count (default: the largest present), with
ppsched's speed-up over PyTorch above each group. Plain SVG, no plotting library.
The y axis has round ticks (1, 2 or 5 times a power of ten, five or so of them) and every label
stays inside the frame: the chart is as wide as its longest line of text needs.
"""
import argparse
import json
import math
import sys
from xml.sax.saxutils import escape

SCHEDULES = ["gpipe", "1f1b", "interleaved", "zb"]
COLOURS = {"ppsched": "#4c78a8", "pytorch": "#f58518", "megatron-core": "#54a24b"}
LEGEND = {"ppsched": "ppsched", "pytorch": "PyTorch pipelining", "megatron-core": "Megatron-Core"}
CHAR_W = 0.62  # a character's advance in em, sans-serif, a little generous: text must not touch the edge


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("step_ms") is None:
                continue
            rows[(r["framework"], r["preset"], r["schedule"], int(r["m"]))] = r
    return rows


def round_step(raw):
    """The smallest of 1, 2, 5 times a power of ten that is at least raw."""
    if not raw > 0:
        return 1.0
    mag = 10.0 ** math.floor(math.log10(raw))
    for f in (1.0, 2.0, 5.0, 10.0):
        if f * mag >= raw * (1 - 1e-9):
            return f * mag
    return 10.0 * mag


def y_axis(top_val, n=5):
    """Ticks 0, step, ... up to the first one at or above top_val: about n of them."""
    step = round_step(top_val / n)
    k = max(1, math.ceil(top_val / step - 1e-9))
    return step, [i * step for i in range(k + 1)]


def tick_label(v, step):
    """0, 200k, 1.5M, 750: in the step's unit, with as many decimals as the step needs."""
    if v == 0:
        return "0"
    div, suffix = (1e6, "M") if step >= 1e6 else (1e3, "k") if step >= 1e3 else (1.0, "")
    digits = max(0, -math.floor(math.log10(step / div) + 1e-9))
    return "%.*f%s" % (digits, v / div, suffix)


def text_w(s, size=12):
    return len(s) * CHAR_W * size


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jsonl")
    ap.add_argument("svg")
    ap.add_argument("--m", type=int, default=None, help="micro-batch count to plot (default: largest)")
    ap.add_argument("--title", default=None,
                    help="default: ppsched vs the frameworks present")
    a = ap.parse_args()
    rows = load(a.jsonl)
    if not rows:
        sys.exit("plot_peer.py: no measured rows in %s" % a.jsonl)
    frameworks = [fw for fw in COLOURS if any(k[0] == fw for k in rows)]
    if a.title is None:
        a.title = "ppsched vs " + " and ".join(LEGEND[fw] for fw in frameworks[1:])
    m = a.m or max(k[3] for k in rows)
    presets = [p for p in ("reference", "small") if any(k[1] == p and k[3] == m for k in rows)]
    if not presets:
        sys.exit("plot_peer.py: no rows at m = %d in %s" % (m, a.jsonl))
    # one scale for every panel, so the axis labels on the left hold for all of them; 12 % head
    # room above the tallest bar for its speed-up label
    vals = [r["tokens_per_s"] for k, r in rows.items()
            if k[3] == m and k[1] in presets and k[0] in frameworks]
    step, ticks = y_axis(max(vals) * 1.12)
    top_val = ticks[-1]
    labels = [tick_label(v, step) for v in ticks]
    subtitle = ("tokens/s per training step, m = %d, same model, schedules and GPUs; "
                "numbers above the bars: ppsched's speed-up over PyTorch" % m)
    panel_w, plot_h, top, bottom, right = 420, 300, 84, 64, 24
    left = max(70, int(math.ceil(max(text_w(s) for s in labels))) + 20)
    legend_w = 160 * (len(frameworks) - 1) + 18 + text_w(LEGEND[frameworks[-1]])
    width = max(left + panel_w * len(presets) - 30 + right,
                int(math.ceil(left + max(text_w(subtitle), text_w(a.title, 16), legend_w))) + right)
    height = top + plot_h + bottom
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (width, height),
           '<rect x="0" y="0" width="%d" height="%d" fill="white"/>' % (width, height),
           '<text x="%d" y="26" font-size="16" font-weight="bold">%s</text>' % (left, escape(a.title)),
           '<text x="%d" y="44" fill="#555">%s</text>' % (left, escape(subtitle))]
    y0 = top + plot_h
    for pi, preset in enumerate(presets):
        x0 = left + pi * panel_w
        out.append('<text x="%d" y="%d" font-weight="bold">%s model</text>' % (x0, top - 16, preset))
        for v, label in zip(ticks, labels):
            y = y0 - plot_h * v / top_val
            out.append('<line class="ytick" x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>'
                       % (x0, y, x0 + panel_w - 30, y))
            if pi == 0:
                out.append('<text class="ytick" x="%d" y="%.1f" text-anchor="end">%s</text>'
                           % (x0 - 8, y + 4, label))
        group = (panel_w - 30) / len(SCHEDULES)
        bar_w = (group - 20) / len(frameworks)
        for si, s in enumerate(SCHEDULES):
            gx = x0 + si * group
            step = {}
            for fi, fw in enumerate(frameworks):
                r = rows.get((fw, preset, s, m))
                if not r:
                    continue
                v = r["tokens_per_s"]
                step[fw] = r["step_ms"]
                bh = plot_h * v / top_val
                bx = gx + 10 + fi * bar_w
                out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">'
                           '<title>%s %s: %.0f tokens/s, %.2f ms</title></rect>'
                           % (bx, y0 - bh, bar_w - 2, bh, COLOURS[fw], fw, s, v, r["step_ms"]))
            if step.get("ppsched") and step.get("pytorch"):
                hi = max(rows[(fw, preset, s, m)]["tokens_per_s"] for fw in step)
                out.append('<text x="%.1f" y="%.1f" text-anchor="middle" font-weight="bold">%.1fx</text>'
                           % (gx + group / 2, y0 - plot_h * hi / top_val - 6,
                              step["pytorch"] / step["ppsched"]))
            out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (gx + group / 2, y0 + 18, s))
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>' % (x0, y0, x0 + panel_w - 30, y0))
    ly = height - 16
    for fi, fw in enumerate(frameworks):
        lx = left + fi * 160
        out.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>'
                   % (lx, ly - 10, COLOURS[fw], lx + 18, ly, LEGEND[fw]))
    out.append("</svg>")
    with open(a.svg, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
