#!/usr/bin/env python3
# torch_peer.py — the same model and schedules as ppsched, run by PyTorch's
# torch.distributed.pipelining: one process per GPU (torchrun), NCCL, bf16. Used by run_peer.sh.
#
# Model: ppsched's pre-LN GPT blocks (model/model.h), with causal attention through
# F.scaled_dot_product_attention(is_causal=True) (a fused kernel; ppsched's bf16 path fuses attention
# too, with its own flash-style kernel). Data: seeded random tokens, made once per configuration outside the timed step
# (ppsched makes its tokens on the GPU inside the step; either cost is negligible). A step is
# schedule.step(), with no optimizer step by default (ppsched's default too) or, with
# --optimizer adamw, torch.optim.AdamW (fused on CUDA) after it, inside the timed step, with
# ppsched's hyper-parameters, over the bf16 parameters themselves (no fp32 master copy: less work
# than ppsched's AdamW, which keeps one); gradients are set to None before the barrier.
# Step time = max over ranks of barrier -> step -> cuda.synchronize.
import os

# Before torch.distributed is imported: no NVLink SHARP (NVLS) and no multicast memory.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import argparse
import gc
import inspect
import json
import math
import sys
import time

# Shapes of the presets: the model keys of docs/schedule-format.md, plus the micro-batch size.
PRESETS = {
    "reference": dict(layers=24, hidden=1024, heads=16, seq_len=1024, vocab=8192,
                      micro_batch_size=4),
    "small": dict(layers=16, hidden=512, heads=8, seq_len=256, vocab=8192, micro_batch_size=2),
    # A smoke test that runs anywhere (e.g. --device cpu on a machine without a GPU).
    "tiny": dict(layers=8, hidden=64, heads=4, seq_len=32, vocab=256, micro_batch_size=2),
}

# name -> (PyTorch class, stages per rank). Interleaved ones place stages r and r + p on rank r
# (loop placement), which is what PyTorch's interleaved schedules expect.
SCHEDULES = {
    "gpipe": ("ScheduleGPipe", 1),
    "1f1b": ("Schedule1F1B", 1),
    "interleaved": ("ScheduleInterleaved1F1B", 2),
    "zb": ("ScheduleInterleavedZeroBubble", 2),
    # Not in the default list: the zero-bubble schedule with one stage per rank (ZB-H1's shape).
    "zb1": ("ScheduleInterleavedZeroBubble", 1),
}
DEFAULT_SCHEDULES = "gpipe,1f1b,interleaved,zb"


def usage_error(msg):
    """Print a usage error (rank 0 only, so torchrun's log shows it once) and exit with code 2.
    The message names the script that runs (megatron_peer.py shares these helpers)."""
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"{os.path.basename(sys.argv[0]) or 'torch_peer.py'}: {msg}", file=sys.stderr)
    sys.exit(2)


def int_list(text, what):
    """Parse '8,32' into [8, 32]; every value a positive integer."""
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        usage_error(f"{what}: '{text}' is not a comma-separated list of integers")
    if not values or any(v < 1 for v in values):
        usage_error(f"{what}: '{text}' needs one or more positive integers")
    return values


def add_shape_args(ap):
    """The model's shape: a preset, each key overridable, and the name the results carry."""
    ap.add_argument("--preset", choices=sorted(PRESETS), default="reference",
                    help="model and micro-batch shape (default: reference)")
    for key in ("layers", "hidden", "heads", "seq_len", "vocab", "micro_batch_size"):
        ap.add_argument("--" + key.replace("_", "-"), dest=key, type=int, default=None,
                        help=f"override the preset's {key}")
    ap.add_argument("--name", default=None,
                    help="the shape's name in the table and the JSON (default: the preset's); "
                    "run_peer.sh names a ppsched preset so, with every key above given")


def resolve_shape(a):
    """a.shape from the preset and the overrides (usage error for a bad one); a.preset becomes
    the name the results carry."""
    shape = dict(PRESETS[a.preset])
    for key in shape:
        if getattr(a, key) is not None:
            value = getattr(a, key)
            if value < 1:
                usage_error(f"--{key.replace('_', '-')}: {value} is not a positive integer")
            shape[key] = value
    if shape["hidden"] % shape["heads"]:
        usage_error(f"hidden {shape['hidden']} does not split into {shape['heads']} heads")
    a.shape = shape
    if a.name:
        a.preset = a.name


# ppsched's AdamW (run.optimizer: adamw): lr and weight decay are its run.lr and run.weight_decay
# defaults (docs/schedule-format.md), betas and eps those exec/execute_step.c passes; weight decay
# on matrices and embeddings only, not on biases and LayerNorm (model/model.h, `decay`).
ADAMW_BETAS = (0.9, 0.95)
ADAMW_EPS = 1e-8


def add_optimizer_args(ap):
    ap.add_argument("--optimizer", choices=["none", "adamw"], default="none",
                    help="the update closing each step, inside the timed step (default: none)")
    ap.add_argument("--lr", type=float, default=3e-4, help="AdamW learning rate (default: 3e-4)")
    ap.add_argument("--weight-decay", type=float, default=0.1,
                    help="AdamW decoupled weight decay on matrices (default: 0.1)")


def add_run_args(ap, schedules, default):
    """The options every peer script takes: which schedules, m, steps, seed and dtype."""
    ap.add_argument("--schedules", default=default,
                    help=f"comma-separated, from {','.join(schedules)} (default: {default})")
    ap.add_argument("--micro-batches", default="8,32",
                    help="m values, comma-separated (default: 8,32)")
    ap.add_argument("--steps", type=int, default=10,
                    help="timed steps per configuration (default: 10)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps before them (default: 3)")
    ap.add_argument("--seed", type=int, default=1234, help="parameters and tokens (default: 1234)")
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16",
                    help="parameters and activations (default: bf16)")


def check_run_args(a, schedules):
    """add_run_args' options checked and resolved (the shape, the schedule and m lists), or a
    usage error; returns a."""
    resolve_shape(a)
    a.schedule_list = [s.strip() for s in a.schedules.split(",") if s.strip()]
    for s in a.schedule_list:
        if s not in schedules:
            usage_error(f"--schedules: unknown schedule '{s}' (allowed: {', '.join(schedules)})")
    if not a.schedule_list:
        usage_error("--schedules: no schedule given")
    a.m_list = int_list(a.micro_batches, "--micro-batches")
    if a.steps < 1 or a.warmup < 0:
        usage_error("--steps must be >= 1 and --warmup >= 0")
    return a


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="ppsched's model and schedules under torch.distributed.pipelining. "
        "Run with: torchrun --standalone --nproc_per_node=N bench/torch_peer.py [options]",
    )
    add_shape_args(ap)
    add_run_args(ap, SCHEDULES, DEFAULT_SCHEDULES)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cuda: one GPU per rank, NCCL (default); cpu: gloo, to check the script "
                    "on a machine without a GPU")
    ap.add_argument("--json", metavar="FILE", default=None,
                    help="write one JSON object per configuration to FILE (rank 0)")
    add_optimizer_args(ap)
    a = ap.parse_args(argv)
    return check_run_args(a, SCHEDULES)


def check_config(shape, sched, p, m):
    """The reason (schedule, p, m) cannot run, or None. Mirrors PyTorch's own checks, made here
    so that every rank refuses before any collective instead of one rank failing inside one."""
    v = SCHEDULES[sched][1]
    n_stages = p * v
    if shape["layers"] % n_stages:
        return f"{shape['layers']} layers do not split into {n_stages} stages"
    if sched in ("1f1b",) and m < p:
        return f"1f1b needs at least as many micro-batches as ranks ({m} < {p})"
    if SCHEDULES[sched][0].startswith("ScheduleInterleaved"):
        rounds = max(1, m // p)
        if m % rounds:
            return f"{sched} needs m to be a multiple of max(1, m // p) = {rounds} (m = {m})"
    return None


# --------------------------------------------------------------------------------------------
# The model: one stage = [token + position embedding] + blocks + [final LN, LM head]
# --------------------------------------------------------------------------------------------

def build_model_classes(torch, nn, F):
    """The module classes, defined once torch is imported (the file parses without torch)."""

    class Block(nn.Module):
        """x -> LN1 -> QKV -> causal MHA -> proj -> +x -> LN2 -> fc -> GELU(tanh) -> fc2 -> +."""

        def __init__(self, hidden, heads):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(hidden, eps=1e-5)
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.proj = nn.Linear(hidden, hidden)
            self.ln2 = nn.LayerNorm(hidden, eps=1e-5)
            self.fc = nn.Linear(hidden, 4 * hidden)
            self.fc2 = nn.Linear(4 * hidden, hidden)

        def forward(self, x):
            B, T, C = x.shape
            H = self.heads
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)  # heads side by side, as ppsched
            q = q.view(B, T, H, C // H).transpose(1, 2)
            k = k.view(B, T, H, C // H).transpose(1, 2)
            v = v.view(B, T, H, C // H).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # scale 1/sqrt(C/H)
            y = y.transpose(1, 2).reshape(B, T, C)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class StageModule(nn.Module):
        """Blocks [first_layer, first_layer + n_layers) of the model, with the embedding on the
        first stage and the final LN + untied LM head on the last (the loss is the schedule's
        loss_fn). Input: tokens [B, T] (first stage) or the residual stream [B, T, C]."""

        def __init__(self, shape, n_layers, is_first, is_last):
            super().__init__()
            C, T, V = shape["hidden"], shape["seq_len"], shape["vocab"]
            self.is_first, self.is_last = is_first, is_last
            self.wte = nn.Embedding(V, C) if is_first else None
            self.wpe = nn.Embedding(T, C) if is_first else None
            if is_first:
                self.register_buffer("pos", torch.arange(T), persistent=False)
            self.blocks = nn.ModuleList(Block(C, shape["heads"]) for _ in range(n_layers))
            self.lnf = nn.LayerNorm(C, eps=1e-5) if is_last else None
            self.lm_head = nn.Linear(C, V, bias=False) if is_last else None

        def forward(self, x):
            if self.is_first:
                x = self.wte(x) + self.wpe(self.pos[: x.shape[1]])
            for block in self.blocks:
                x = block(x)
            if self.is_last:
                x = self.lm_head(self.lnf(x))
            return x

    return Block, StageModule


def init_stage_(torch, nn, module, total_layers):
    """GPT-2 init, as model/model.h: matrices and embeddings N(0, 0.02), the residual
    projections (proj, fc2) N(0, 0.02 / sqrt(2 * total_layers)), biases 0, LayerNorm 1 and 0."""
    std = 0.02
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            nn.init.normal_(sub.weight, mean=0.0, std=std)
            if sub.bias is not None:
                nn.init.zeros_(sub.bias)
        elif isinstance(sub, nn.Embedding):
            nn.init.normal_(sub.weight, mean=0.0, std=std)
        elif isinstance(sub, nn.LayerNorm):
            nn.init.ones_(sub.weight)
            nn.init.zeros_(sub.bias)
    for block in module.blocks:
        nn.init.normal_(block.proj.weight, mean=0.0, std=std / math.sqrt(2.0 * total_layers))
        nn.init.normal_(block.fc2.weight, mean=0.0, std=std / math.sqrt(2.0 * total_layers))


def build_stage_module(env, shape, stage_index, n_stages, device, dtype, seed):
    """Stage `stage_index` of `n_stages` (layers split evenly), built and initialised on `device`
    and cast to `dtype`. The values depend on (seed, stage_index, n_stages) only."""
    torch, nn = env["torch"], env["nn"]
    per_stage = shape["layers"] // n_stages
    torch.manual_seed(seed * 1009 + stage_index)
    with torch.device(device):
        module = env["StageModule"](shape, per_stage, stage_index == 0, stage_index == n_stages - 1)
    init_stage_(torch, nn, module, shape["layers"])
    return module.to(dtype=dtype)


def make_adamw(torch, a, modules, is_cuda):
    """torch.optim.AdamW over the modules' parameters with ppsched's hyper-parameters (decay on
    matrices and embeddings, none on biases and LayerNorm), or None without --optimizer adamw."""
    if a.optimizer != "adamw":
        return None
    params = [p for mod in modules for p in mod.parameters()]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": a.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    kwargs = {"fused": True} if is_cuda else {}
    return torch.optim.AdamW(groups, lr=a.lr, betas=ADAMW_BETAS, eps=ADAMW_EPS, **kwargs)


def make_loss_fn(F, m, scale_in_loss):
    """Mean cross-entropy over the micro-batch's tokens, in fp32. With scale_in_loss the loss is
    divided by m here (and the schedule does not rescale gradients afterwards), which is how
    ppsched folds 1/m into the loss gradient; the m losses of a step then sum to its mean loss."""
    div = float(m) if scale_in_loss else 1.0

    def loss_fn(logits, target):
        return F.cross_entropy(logits.flatten(0, 1).float(), target.flatten()) / div

    return loss_fn


def make_tokens(torch, shape, m, seed, device):
    """Tokens [m * B, T] (the schedule splits them into m micro-batches along dim 0) and the
    next-token targets (the last position wraps to the first token)."""
    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    n, T = m * shape["micro_batch_size"], shape["seq_len"]
    tokens = torch.randint(0, shape["vocab"], (n, T), generator=g, dtype=torch.int64)
    targets = torch.roll(tokens, shifts=-1, dims=1)
    return tokens.to(device), targets.to(device)


def barrier(dist, device):
    """All ranks meet; with NCCL on the rank's own GPU (no guess of the device)."""
    if device.type == "cuda":
        dist.barrier(device_ids=[device.index])
    else:
        dist.barrier()


def quantile(sorted_values, q):
    """Linear interpolation between order statistics, as ppsched's report."""
    n = len(sorted_values)
    pos = q * (n - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def pipeline_stats(torch, dist, device, times_ms, loss, tokens_per_step, count=None):
    """The pipeline's figures from every rank's: the step time is the slowest rank's (median,
    p10, p90 over the timed steps, and tokens/s at the median), the loss the sum of the ranks'
    shares (only the last stage's rank has one), the peak memory the largest rank's, and
    `count` (when given) the sum of the ranks' counts. Every rank calls it, in the same order."""
    is_cuda = device.type == "cuda"
    stat_dev = device if is_cuda else torch.device("cpu")
    t = torch.tensor(times_ms, dtype=torch.float64, device=stat_dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    peak = torch.cuda.max_memory_allocated(device) if is_cuda else 0
    loss_t = torch.tensor([loss], dtype=torch.float64, device=stat_dev)
    dist.all_reduce(loss_t, op=dist.ReduceOp.SUM)
    peak_t = torch.tensor([float(peak)], dtype=torch.float64, device=stat_dev)
    dist.all_reduce(peak_t, op=dist.ReduceOp.MAX)
    out = {}
    if count is not None:
        n_t = torch.tensor([float(count)], dtype=torch.float64, device=stat_dev)
        dist.all_reduce(n_t, op=dist.ReduceOp.SUM)
        out["count"] = int(n_t.item())
    step_ms = sorted(t.tolist())
    median = quantile(step_ms, 0.5)
    out.update({
        "step_ms": median,
        "step_ms_p10": quantile(step_ms, 0.1),
        "step_ms_p90": quantile(step_ms, 0.9),
        "tokens_per_s": tokens_per_step / (median / 1e3),
        "loss": loss_t.item(),
        "peak_mem_bytes": int(peak_t.item()),
    })
    return out


# --------------------------------------------------------------------------------------------
# One configuration: build, time, free
# --------------------------------------------------------------------------------------------

def run_config(env, a, sched, m, rank, p, device):
    """Build (schedule, m), run warm-up + timed steps and return the result dict (complete on
    rank 0). Every rank frees what it built before returning."""
    torch, dist, F, pipelining = env["torch"], env["dist"], env["F"], env["pipelining"]
    shape = a.shape
    cls_name, v = SCHEDULES[sched]
    n_stages = p * v
    stage_ids = [rank + k * p for k in range(v)]
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    is_cuda = device.type == "cuda"

    def sync():
        if is_cuda:
            torch.cuda.synchronize(device)

    cls = getattr(pipelining, cls_name)
    scale_in_loss = "scale_grads" in inspect.signature(cls.__init__).parameters
    modules = [build_stage_module(env, shape, s, n_stages, device, dtype, a.seed)
               for s in stage_ids]
    stages = [pipelining.PipelineStage(mod, s, n_stages, device)
              for mod, s in zip(modules, stage_ids)]
    kwargs = {"loss_fn": make_loss_fn(F, m, scale_in_loss)}
    if scale_in_loss:
        kwargs["scale_grads"] = False
    single = cls_name in ("ScheduleGPipe", "Schedule1F1B")  # one stage per rank, not a list
    schedule = cls(stages[0] if single else stages, m, **kwargs)

    optimizer = make_adamw(torch, a, modules, is_cuda)

    has_first = 0 in stage_ids
    has_last = (n_stages - 1) in stage_ids
    tokens, targets = make_tokens(torch, shape, m, a.seed + 1, device)
    step_params = inspect.signature(schedule.step).parameters
    step_args = (tokens,) if has_first else ()
    if not has_first:
        del tokens
    if not has_last:
        del targets

    if is_cuda:
        torch.cuda.reset_peak_memory_stats(device)
    times_ms = []
    losses = []
    gc.collect()
    for it in range(a.warmup + a.steps):
        for mod in modules:
            mod.zero_grad(set_to_none=True)
        step_kwargs = {}
        if has_last:
            losses = []
            step_kwargs["target"] = targets
            step_kwargs["losses"] = losses
            if "return_outputs" in step_params:
                step_kwargs["return_outputs"] = False  # no merged logits: ppsched keeps none
        sync()
        barrier(dist, device)
        sync()
        if it == a.warmup:
            gc.disable()  # no collector pauses inside timed steps
        t0 = time.perf_counter()
        schedule.step(*step_args, **step_kwargs)
        if optimizer is not None:
            optimizer.step()
        sync()
        t1 = time.perf_counter()
        if it >= a.warmup:
            times_ms.append((t1 - t0) * 1e3)
    gc.enable()

    # Step time of the pipeline = the slowest rank's; loss from the last stage; peak memory.
    loss = 0.0
    if has_last:
        loss = sum(float(x.detach()) for x in losses) * (1.0 if scale_in_loss else 1.0 / m)
    stats = pipeline_stats(torch, dist, device, times_ms, loss,
                           m * shape["micro_batch_size"] * shape["seq_len"])

    del schedule, stages, modules, step_args, losses, optimizer
    if has_first:
        del tokens
    if has_last:
        del targets
    gc.collect()
    if is_cuda:
        torch.cuda.empty_cache()
    barrier(dist, device)

    return {
        "framework": "pytorch",
        "schedule": sched,
        "torch_schedule": cls_name,
        "preset": a.preset,
        "p": p,
        "stages": n_stages,
        "m": m,
        "micro_batch_size": shape["micro_batch_size"],
        "model": {k: shape[k] for k in ("layers", "hidden", "heads", "seq_len", "vocab")},
        **stats,
        "steps": a.steps,
        "warmup": a.warmup,
        "dtype": a.dtype,
        "optimizer": a.optimizer,
        "optimizer_impl": ("torch.optim.AdamW (%s) on the %s parameters"
                           % ("fused" if is_cuda else "foreach", a.dtype)
                           if a.optimizer == "adamw" else None),
        "torch_version": torch.__version__,
    }


def print_table(results, a, p, device_name, torch_version, out=sys.stdout, title=None):
    """Fixed-width table: a '#' preamble (its first line `title`, by default this framework's),
    a names row and a units row, then one line each."""
    s = a.shape
    opt = "" if a.optimizer == "none" else f", {a.optimizer} in the step"
    if title is None:
        title = f"torch.distributed.pipelining {torch_version}"
    print(f"# {title} on {p} x {device_name}, {a.dtype}{opt}", file=out)
    print(f"# preset {a.preset}: layers {s['layers']}, hidden {s['hidden']}, heads {s['heads']}, "
          f"seq {s['seq_len']}, vocab {s['vocab']}, micro-batch {s['micro_batch_size']}; "
          f"{a.warmup} warm-up + {a.steps} timed steps", file=out)
    fmt = "{:>12} {:>7} {:>6} {:>10} {:>10} {:>10} {:>12} {:>9} {:>8}"
    print(fmt.format("schedule", "stages", "m", "step", "p10", "p90", "tokens/s", "peak mem",
                     "loss"), file=out)
    print(fmt.format("", "", "", "(ms)", "(ms)", "(ms)", "", "(GiB)", ""), file=out)
    for r in results:
        if "error" in r:
            print(f"{r['schedule']:>12} {'':>7} {r['m']:>6}  skipped: {r['error']}", file=out)
            continue
        print(fmt.format(r["schedule"], r["stages"], r["m"], f"{r['step_ms']:.2f}",
                         f"{r['step_ms_p10']:.2f}", f"{r['step_ms_p90']:.2f}",
                         f"{r['tokens_per_s']:.4g}", f"{r['peak_mem_bytes'] / 2**30:.2f}",
                         f"{r['loss']:.4f}"), file=out)
    n_ok = sum(1 for r in results if "error" not in r)
    print(f"# {n_ok} of {len(results)} configurations ran; step = median over timed steps of the "
          f"slowest rank", file=out)


def main(argv=None):
    a = parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "0"))
    if world < 2 or "LOCAL_RANK" not in os.environ:
        usage_error("run under torchrun with 2 or more processes, e.g. "
                    "torchrun --standalone --nproc_per_node=4 bench/torch_peer.py")
    try:
        import torch
        import torch.distributed as dist
        import torch.nn as nn
        import torch.nn.functional as F
        import torch.distributed.pipelining as pipelining
    except ImportError as e:
        usage_error(f"needs PyTorch with torch.distributed.pipelining: {e}")
    env = {"torch": torch, "dist": dist, "nn": nn, "F": F, "pipelining": pipelining}
    env["Block"], env["StageModule"] = build_model_classes(torch, nn, F)

    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    if a.device == "cuda":
        if not torch.cuda.is_available() or torch.cuda.device_count() <= local_rank:
            usage_error(f"rank {rank}: no CUDA device {local_rank} (use --device cpu to check the "
                        "script without a GPU)")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group(backend="nccl", device_id=device)
        device_name = torch.cuda.get_device_name(device)
    else:
        device = torch.device("cpu")
        dist.init_process_group(backend="gloo")
        device_name = "CPU (gloo)"
    p = dist.get_world_size()

    configs = [(s, m) for s in a.schedule_list for m in a.m_list]
    results = []
    json_file = open(a.json, "w") if (a.json and rank == 0) else None
    try:
        for sched, m in configs:
            reason = check_config(a.shape, sched, p, m)
            if reason:
                r = {"framework": "pytorch", "schedule": sched, "preset": a.preset, "p": p, "m": m,
                     "error": reason}
            else:
                r = run_config(env, a, sched, m, rank, p, device)
            if rank == 0:
                results.append(r)
                if "error" in r:
                    print(f"# {sched} m={m}: skipped: {r['error']}", file=sys.stderr, flush=True)
                else:
                    print(f"# {sched} m={m}: {r['step_ms']:.2f} ms, "
                          f"{r['tokens_per_s']:.4g} tokens/s", file=sys.stderr, flush=True)
                if json_file:
                    json_file.write(json.dumps(r) + "\n")
                    json_file.flush()
    finally:
        if json_file:
            json_file.close()
    if rank == 0:
        print_table(results, a, p, device_name, torch.__version__)
        sys.stdout.flush()
    barrier(dist, device)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
