#!/usr/bin/env python3
# torch_one_gpu.py — the whole model on one GPU in PyTorch, eager and torch.compile, side by side
# with ppsched's one-device run of the same model (its --json report, --ours). Used by
# bench/run_one_gpu.sh (`make bench-peer PEER=one-gpu`).
#
# The model is torch_peer.py's (ppsched's pre-LN GPT: token + position embedding, blocks of
# LN -> QKV -> causal SDPA -> proj -> residual -> LN -> fc -> GELU(tanh) -> fc2 -> residual, final
# LN, untied LM head, all linears with biases but the head), GPT-2 init, built as one stage. The
# training step is ppsched's with run.optimizer=adamw:
#   - parameters and activations in bf16, GEMMs with fp32 accumulation (cuBLAS), attention through
#     F.scaled_dot_product_attention(is_causal=True) (the flash kernel);
#   - m micro-batches one after another, each loss the mean cross-entropy (fp32) over its tokens
#     divided by m; the parameter gradients of the m micro-batches summed in fp32 accumulators
#     (copied from the first micro-batch's bf16 gradients, then added);
#   - AdamW (fused) on an fp32 master copy: lr 3e-4, betas 0.9 / 0.95, eps 1e-8, weight decay 0.1
#     on matrices (embeddings and the head included), none on biases and LayerNorm; then the
#     master copied back into the bf16 parameters.
# "compile" is torch.compile (default mode) of the model together with its loss, "compile-graphs"
# the same in mode "reduce-overhead" (its CUDA graphs, as ppsched replays a step from graphs);
# the optimizer step is the same fused kernel in all. Each mode: warm-up steps (compile happens in the first),
# then timed steps, each between two CUDA events; median and p10..p90. --device cpu runs the same
# logic on the CPU (host clock) to check the script without a GPU.
import argparse
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_peer  # noqa: E402  (the model, its init and the presets; imports no torch itself)

MODES = ("eager", "compile", "compile-graphs")
COMPILE_MODE = {"eager": None, "compile": "default", "compile-graphs": "reduce-overhead"}
ADAMW = dict(lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)  # ppsched's defaults


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="ppsched's whole model on one GPU in PyTorch, eager and torch.compile, "
        "next to ppsched's own one-device report")
    ap.add_argument("--preset", choices=sorted(torch_peer.PRESETS), default="reference",
                    help="model and micro-batch shape (default: reference)")
    ap.add_argument("--micro-batches", type=int, default=8, help="m (default: 8)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per mode (default: 10)")
    ap.add_argument("--warmup", type=int, default=3,
                    help="untimed steps per mode before them; compile happens in the first "
                    "(default: 3)")
    ap.add_argument("--modes", default=",".join(MODES),
                    help=f"comma-separated, from {','.join(MODES)} (default: all)")
    ap.add_argument("--seed", type=int, default=1234, help="parameters and tokens (default: 1234)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cuda (default), or cpu to check the script without a GPU")
    ap.add_argument("--ours", metavar="FILE", default=None,
                    help="ppsched's --json report of the same model, m and optimizer on one device")
    ap.add_argument("--ours-step0", metavar="FILE", default=None,
                    help="ppsched's --json report of one step with no warm-up: its loss is step 0's")
    ap.add_argument("--label", default="", help="a note for the table's preamble (commit, date)")
    ap.add_argument("--json", metavar="FILE", default=None,
                    help="also append the JSON line to FILE")
    a = ap.parse_args(argv)
    a.mode_list = [x.strip() for x in a.modes.split(",") if x.strip()]
    for x in a.mode_list:
        if x not in MODES:
            ap.error(f"--modes: unknown mode '{x}' (allowed: {', '.join(MODES)})")
    if a.micro_batches < 1 or a.steps < 1 or a.warmup < 1:
        ap.error("--micro-batches and --steps must be >= 1, --warmup >= 1 (compile needs one)")
    a.shape = dict(torch_peer.PRESETS[a.preset])
    return a


class Trainer:
    """One model (bf16), its fp32 master copy, fp32 gradient accumulators and AdamW, and the
    tokens of one step. step() runs one training step; step_fn is the model with its loss, eager
    or compiled."""

    def __init__(self, env, a, device, mode):
        torch, nn, F = env["torch"], env["nn"], env["F"]
        self.torch = torch
        s, m = a.shape, a.micro_batches
        self.m = m
        model = torch_peer.build_stage_module(env, s, 0, 1, device, torch.bfloat16, a.seed)
        self.model = model
        self.params = [p for p in model.parameters()]
        self.master = [p.detach().float().clone() for p in self.params]
        self.acc = [torch.zeros_like(mp) for mp in self.master]
        for mp, g in zip(self.master, self.acc):
            mp.grad = g  # the optimizer reads the fp32 sums in place
        decay = [mp for mp in self.master if mp.dim() >= 2]
        no_decay = [mp for mp in self.master if mp.dim() < 2]
        fused = {"fused": True} if device.type == "cuda" else {"foreach": True}
        self.opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": ADAMW["weight_decay"]},
             {"params": no_decay, "weight_decay": 0.0}],
            lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"], **fused)

        def loss_of(tokens, targets):
            logits = model(tokens)
            return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten()) / m

        cmode = COMPILE_MODE[mode]
        self.step_fn = torch.compile(loss_of, mode=cmode) if cmode else loss_of
        # CUDA-graph trees reuse their output buffers at the next replay: mark each micro-batch
        # as a new step and copy the loss out before it.
        self.graphs = cmode == "reduce-overhead" and device.type == "cuda"
        tokens, targets = torch_peer.make_tokens(torch, s, m, a.seed + 1, device)
        B = s["micro_batch_size"]
        # Each micro-batch its own tensor (offset 0), as ppsched's slots.
        self.tokens = [tokens[k * B:(k + 1) * B].clone() for k in range(m)]
        self.targets = [targets[k * B:(k + 1) * B].clone() for k in range(m)]

    def step(self):
        """One training step; returns the step's loss (the mean over its tokens) as a tensor."""
        torch = self.torch
        total = None
        for k in range(self.m):
            if self.graphs:
                torch.compiler.cudagraph_mark_step_begin()
            loss = self.step_fn(self.tokens[k], self.targets[k])
            loss.backward()
            with torch.no_grad():
                grads = [p.grad for p in self.params]
                if k == 0:
                    for g32, g in zip(self.acc, grads):
                        g32.copy_(g)
                else:
                    try:  # one multi-tensor launch where the build takes mixed dtypes
                        torch._foreach_add_(self.acc, grads)
                    except (RuntimeError, TypeError):
                        for g32, g in zip(self.acc, grads):
                            g32.add_(g)
                for p in self.params:
                    p.grad = None
                total = loss.detach().clone() if total is None else total + loss.detach()
        self.opt.step()
        with torch.no_grad():
            for p, mp in zip(self.params, self.master):
                p.copy_(mp)
        return total


def quantile(sorted_values, q):
    return torch_peer.quantile(sorted_values, q)


def run_mode(env, a, device, mode):
    """Build, warm up (compiling where asked), time; the result dict. Frees what it built."""
    torch = env["torch"]
    is_cuda = device.type == "cuda"
    t_build = time.perf_counter()
    tr = Trainer(env, a, device, mode)
    if is_cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    losses = []
    t0 = time.perf_counter()
    for _ in range(a.warmup):
        losses.append(tr.step())
    if is_cuda:
        torch.cuda.synchronize(device)
    warm_s = time.perf_counter() - t0
    times_ms = []
    for _ in range(a.steps):
        if is_cuda:
            ev0 = torch.cuda.Event(enable_timing=True)
            ev1 = torch.cuda.Event(enable_timing=True)
            ev0.record()
            losses.append(tr.step())
            ev1.record()
            times_ms.append((ev0, ev1))
        else:
            h0 = time.perf_counter()
            losses.append(tr.step())
            times_ms.append((time.perf_counter() - h0) * 1e3)
    if is_cuda:
        torch.cuda.synchronize(device)
        times_ms = [e0.elapsed_time(e1) for e0, e1 in times_ms]
        peak = torch.cuda.max_memory_allocated(device)
    else:
        peak = 0
    loss_values = [float(x) for x in losses]
    total_s = time.perf_counter() - t_build
    del tr, losses
    if is_cuda:
        torch.cuda.empty_cache()
    st = sorted(times_ms)
    median = quantile(st, 0.5)
    s = a.shape
    tokens_per_step = a.micro_batches * s["micro_batch_size"] * s["seq_len"]
    return {"framework": "pytorch-" + mode, "step_ms": median, "step_ms_p10": quantile(st, 0.1),
            "step_ms_p90": quantile(st, 0.9), "tokens_per_s": tokens_per_step / (median / 1e3),
            "loss_first": loss_values[0], "loss_last": loss_values[-1],
            "peak_mem_bytes": int(peak), "warmup_s": round(warm_s, 2),
            "total_s": round(total_s, 2), "steps": a.steps, "warmup": a.warmup}


def load_ours(path):
    """ppsched's report (one JSON object, possibly over several lines) as a row, or None."""
    if not path:
        return None
    try:
        text = open(path).read()
        r = json.JSONDecoder().raw_decode(text[text.index("{"):])[0]
    except (OSError, ValueError) as e:
        print(f"torch_one_gpu.py: cannot read ppsched's report {path}: {e}", file=sys.stderr)
        return None
    peak = max((d.get("peak_mem_bytes") or 0 for d in r.get("per_device", [])), default=0)
    return {"framework": "ppsched", "mode": r.get("mode"), "step_ms": r.get("step_ms"),
            "step_ms_p10": r.get("step_ms_p10"), "step_ms_p90": r.get("step_ms_p90"),
            "tokens_per_s": r.get("tokens_per_s"), "loss_last": r.get("loss"),
            "peak_mem_bytes": peak, "devices": r.get("devices"),
            "micro_batches": r.get("micro_batches")}


def num(x, fmt):
    return format(x, fmt) if isinstance(x, (int, float)) and math.isfinite(x) else "-"


def report(a, rows, ours, device_name, torch_version, out=sys.stdout):
    """The side-by-side table and the verdict lines; returns the JSON record."""
    s = a.shape
    ln_v = math.log(s["vocab"])
    print(f"# one GPU, whole model: ppsched vs PyTorch {torch_version} eager and torch.compile, "
          f"{device_name}, bf16{', ' + a.label if a.label else ''}", file=out)
    print(f"# model {a.preset}: layers {s['layers']}, hidden {s['hidden']}, heads {s['heads']}, "
          f"seq {s['seq_len']}, vocab {s['vocab']}, micro-batch {s['micro_batch_size']}; "
          f"m = {a.micro_batches}; AdamW (fp32 master, fp32 gradient sums) inside every step",
          file=out)
    clock = "CUDA events" if a.device == "cuda" else "host clock"
    print(f"# PyTorch: {a.warmup} warm-up + {a.steps} timed steps per mode ({clock}); "
          "speed-up = their step ms / ppsched's (= ppsched tokens/s / theirs)", file=out)
    fmt = "{:>22} {:>9} {:>17} {:>11} {:>9} {:>9} {:>9} {:>9}"
    print(fmt.format("run", "step", "p10..p90", "tokens/s", "speed-up", "loss", "peak mem",
                     "ready"), file=out)
    print(fmt.format("", "(ms)", "(ms)", "", "(ppsched)", "(last)", "(GiB)", "(s)"), file=out)
    table = ([("ppsched", ours)] if ours else []) + [("pytorch " + r["framework"][8:], r)
                                                     for r in rows]
    our_ms = ours.get("step_ms") if ours else None
    for name, r in table:
        if "error" in r:
            print(f"{name:>22}  failed: {r['error']}", file=out)
            continue
        ms = r.get("step_ms")
        sp = (ms / our_ms if isinstance(ms, (int, float)) and isinstance(our_ms, (int, float))
              and our_ms > 0 and r is not ours else None)
        spread = f"{num(r.get('step_ms_p10'), '.2f')}..{num(r.get('step_ms_p90'), '.2f')}"
        print(fmt.format(name, num(ms, ".2f"), spread, num(r.get("tokens_per_s"), ".4g"),
                         (num(sp, ".3f") + "x") if sp else "-", num(r.get("loss_last"), ".4f"),
                         num((r.get("peak_mem_bytes") or 0) / 2**30, ".2f"),
                         num(r.get("warmup_s"), ".1f")), file=out)
    rec = {"bench": "one_gpu", "device": device_name, "torch_version": torch_version,
           "preset": a.preset, "model": {k: s[k] for k in ("layers", "hidden", "heads", "seq_len",
                                                            "vocab", "micro_batch_size")},
           "m": a.micro_batches, "optimizer": "adamw", "dtype": "bf16", "label": a.label,
           "ppsched": ours}
    for r in rows:
        key = r["framework"][8:]
        rec[key] = r
        if our_ms and r.get("step_ms"):
            rec["speedup_vs_" + key] = r["step_ms"] / our_ms
    # Same init scale: at step 0 every loss is near ln V (near-uniform predictions at GPT-2 init,
    # whatever the tokens: ppsched's synthetic walk or PyTorch's random ones), and the two agree.
    # Later steps differ on purpose: ppsched's task is learnable and new every step, PyTorch
    # repeats one batch of random tokens.
    notes, firsts = [], []
    for name, r in table:
        first = r.get("loss_first")
        if not isinstance(first, (int, float)):
            continue
        firsts.append(f"{name} {first:.4f}")
        if abs(first - ln_v) > 0.5:
            notes.append(f"{name}'s step-0 loss {first:.4f} is far from ln V = {ln_v:.4f}")
    if ours and not isinstance(ours.get("loss_first"), (int, float)):
        notes.append("ppsched's step-0 loss is missing")
    rec["loss_check"] = "ok" if not notes else "; ".join(notes)
    print(f"# step-0 loss: {', '.join(firsts) or '-'}; ln V = {ln_v:.4f}: "
          + ("same range" if not notes else "; ".join(notes)), file=out)
    if ours and ours.get("mode") != "measure":
        print(f"# note: ppsched's report is {ours.get('mode')}, not a measurement", file=out)
    print("ONE_GPU_JSON " + json.dumps(rec), file=out)
    return rec


def main(argv=None):
    a = parse_args(argv)
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError as e:
        print(f"torch_one_gpu.py: needs PyTorch: {e}", file=sys.stderr)
        return 2
    env = {"torch": torch, "nn": nn, "F": F}
    env["Block"], env["StageModule"] = torch_peer.build_model_classes(torch, nn, F)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            print("torch_one_gpu.py: no CUDA device (use --device cpu to check the script)",
                  file=sys.stderr)
            return 2
        device = torch.device("cuda", 0)
        torch.cuda.set_device(device)
        device_name = torch.cuda.get_device_name(device)
    else:
        device = torch.device("cpu")
        device_name = "CPU"
    ours = load_ours(a.ours)
    step0 = load_ours(a.ours_step0)
    if ours and step0 and isinstance(step0.get("loss_last"), (int, float)):
        ours["loss_first"] = step0["loss_last"]
    rows = []
    failed = 0
    for mode in a.mode_list:
        try:
            r = run_mode(env, a, device, mode)
        except Exception as e:  # one mode failing (a compiler error) must not lose the other
            failed = 1
            why = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            print(f"# pytorch {mode} failed: {why}", file=sys.stderr, flush=True)
            rows.append({"framework": "pytorch-" + mode, "error": why})
            if device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        print(f"# pytorch {mode}: {r['step_ms']:.2f} ms a step, ready after {r['warmup_s']:.1f} s "
              f"of warm-up", file=sys.stderr, flush=True)
        rows.append(r)
    rec = report(a, rows, ours, device_name, torch.__version__)
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(rec) + "\n")
    return 1 if failed or (a.ours and not ours) else 0


if __name__ == "__main__":
    sys.exit(main())
