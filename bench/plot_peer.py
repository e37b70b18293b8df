#!/usr/bin/env python3
"""plot_peer.py PEER.jsonl OUT.svg [--m M] — ppsched next to PyTorch pipelining as an SVG bar chart.

Reads the JSON lines bench/run_peer.sh writes (one per framework, preset, schedule and m) and draws,
for each model preset, the tokens/s of both frameworks per schedule at one micro-batch count
(default: the largest present), with the speed-up above each pair. Plain SVG, no plotting library.
"""
import argparse
import json
import sys
from xml.sax.saxutils import escape

SCHEDULES = ["gpipe", "1f1b", "interleaved", "zb"]
COLOURS = {"ppsched": "#4c78a8", "pytorch": "#f58518"}


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jsonl")
    ap.add_argument("svg")
    ap.add_argument("--m", type=int, default=None, help="micro-batch count to plot (default: largest)")
    ap.add_argument("--title", default="ppsched vs PyTorch pipelining")
    a = ap.parse_args()
    rows = load(a.jsonl)
    if not rows:
        sys.exit("plot_peer.py: no measured rows in %s" % a.jsonl)
    m = a.m or max(k[3] for k in rows)
    presets = [p for p in ("reference", "small") if any(k[1] == p and k[3] == m for k in rows)]
    panel_w, h, top, bottom, left = 420, 330, 70, 60, 70
    width = left + panel_w * len(presets) + 20
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (width, h + top + bottom),
           '<rect x="0" y="0" width="%d" height="%d" fill="white"/>' % (width, h + top + bottom),
           '<text x="%d" y="26" font-size="16" font-weight="bold">%s</text>' % (left, escape(a.title)),
           '<text x="%d" y="44" fill="#555">tokens/s per training step, m = %d, same model, '
           'schedules and GPUs; numbers above the bars: ppsched speed-up</text>' % (left, m)]
    # one scale for every panel, so the axis labels on the left hold for all of them
    vals = [r["tokens_per_s"] for k, r in rows.items() if k[3] == m and k[1] in presets]
    top_val = max(vals) * 1.15
    for pi, preset in enumerate(presets):
        x0 = left + pi * panel_w
        plot_h = h - 30
        y0 = top + plot_h
        out.append('<text x="%d" y="%d" font-weight="bold">%s model</text>' % (x0, top - 6, preset))
        for k in range(5):
            v = top_val * k / 4
            y = y0 - plot_h * k / 4
            out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>' % (x0, y, x0 + panel_w - 30, y))
            if pi == 0:
                out.append('<text x="%d" y="%.1f" text-anchor="end">%.0fk</text>' % (x0 - 6, y + 4, v / 1e3))
        group = (panel_w - 30) / len(SCHEDULES)
        for si, s in enumerate(SCHEDULES):
            gx = x0 + si * group
            pair = []
            for fi, fw in enumerate(COLOURS):
                r = rows.get((fw, preset, s, m))
                if not r:
                    pair.append(None)
                    continue
                v = r["tokens_per_s"]
                pair.append(r["step_ms"])
                bh = plot_h * v / top_val
                bx = gx + 10 + fi * (group - 20) / 2
                out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">'
                           '<title>%s %s: %.0f tokens/s, %.2f ms</title></rect>'
                           % (bx, y0 - bh, (group - 20) / 2 - 2, bh, COLOURS[fw], fw, s, v, r["step_ms"]))
            if pair[0] and pair[1]:
                hi = max(rows[(fw, preset, s, m)]["tokens_per_s"] for fw in COLOURS)
                out.append('<text x="%.1f" y="%.1f" text-anchor="middle" font-weight="bold">%.1fx</text>'
                           % (gx + group / 2, y0 - plot_h * hi / top_val - 6, pair[1] / pair[0]))
            out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (gx + group / 2, y0 + 18, s))
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>' % (x0, y0, x0 + panel_w - 30, y0))
    ly = h + top + bottom - 16
    for fi, fw in enumerate(COLOURS):
        lx = left + fi * 140
        out.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>'
                   % (lx, ly - 10, COLOURS[fw], lx + 18, ly, "ppsched" if fw == "ppsched" else "PyTorch pipelining"))
    out.append("</svg>")
    with open(a.svg, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
