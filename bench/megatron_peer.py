#!/usr/bin/env python3
# megatron_peer.py — the same model as ppsched under Megatron-Core's pipeline schedules: one
# process per GPU (torchrun), NCCL, bf16. Used by run_peer.sh beside torch_peer.py.
#
# Model: megatron.core's GPTModel with the local layer spec (get_gpt_layer_local_spec: Megatron's
# own linear layers, torch LayerNorm), ppsched's shape and blocks (model/model.h): pre-LN, biases,
# GELU (tanh) MLP of 4h, learned positions, untied LM head, no dropout, GPT-2 init. Core
# attention: a module put into the spec's core_attention slot that calls
# F.scaled_dot_product_attention(is_causal=True) (--attention sdpa, the default with the local
# spec); Megatron's own unfused DotProductAttention (--attention local); or, where
# TransformerEngine imports, the TE spec (--spec te) with TE's fused attention. Every result says
# which. Bias + GELU and bias + residual are Megatron's fused functions (torch.compile) where
# that compiles, else the plain ops (--fusions).
#
# The step is Megatron-LM's train_step: zero the grad buffers, get_forward_backward_func()'s
# schedule (1F1B: virtual size None; interleaved: 2, model chunk k of rank r = stage k * p + r),
# finalize_model_grads, then Megatron's mixed-precision optimizer (fp32 master weights and fp32
# gradient buffers, as ppsched; torch.optim.AdamW inside, or TE's FusedAdam where TE imports) with
# ppsched's AdamW hyper-parameters (--optimizer adamw), all inside the timed step. DDP and the
# p2p settings are Megatron-LM's defaults: batched, synchronised send/recv for 1F1B, overlapped
# for interleaved. Data: seeded random tokens, made once per configuration. Step time = max over
# ranks of barrier -> step -> cuda.synchronize, as torch_peer.py.
#
# Megatron-Core is not part of a PyTorch install: bench/peer_wheels.sh downloads what it needs
# (on a machine with network), and run_peer.sh installs it on one without (PEER_WHEELS=DIR).
import os

# Before torch.distributed is imported: no NVLink SHARP (NVLS) and no multicast memory.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import argparse
import gc
import importlib.util
import json
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peer import print_table as torch_print_table  # noqa: E402
from torch_peer import (  # noqa: E402  (the shared shape, AdamW and statistics helpers)
    ADAMW_BETAS,
    ADAMW_EPS,
    add_optimizer_args,
    add_run_args,
    add_shape_args,
    check_run_args,
    barrier,
    pipeline_stats,
    usage_error,
)

# name -> (virtual pipeline size, Megatron-Core's schedule function)
SCHEDULES = {
    "1f1b": (None, "forward_backward_pipelining_without_interleaving"),
    "interleaved": (2, "forward_backward_pipelining_with_interleaving"),
}
DEFAULT_SCHEDULES = "1f1b,interleaved"
MEGATRON_VERSION = "0.19.2"  # the version this script was written against (peer_wheels.sh)

CARRY = ("carry it as files: on a machine with network `sh bench/peer_wheels.sh DIR` downloads "
         "the wheels, then here `PEER_WHEELS=DIR make bench-peer` (or "
         "`python3 -m pip install --no-index --no-deps --target /tmp/site DIR/*.whl` and "
         "PYTHONPATH=/tmp/site)")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="ppsched's model under Megatron-Core's pipeline schedules. "
        "Run with: torchrun --standalone --nproc_per_node=N bench/megatron_peer.py [options]",
    )
    add_shape_args(ap)
    add_run_args(ap, SCHEDULES, DEFAULT_SCHEDULES)
    ap.add_argument("--spec", choices=["auto", "local", "te"], default="auto",
                    help="layer spec: local (Megatron-Core's own modules), te (TransformerEngine's), "
                    "auto: te where transformer_engine imports, else local (default: auto)")
    ap.add_argument("--attention", choices=["auto", "sdpa", "local", "spec"], default="auto",
                    help="core attention: sdpa (F.scaled_dot_product_attention, causal), local "
                    "(Megatron's unfused DotProductAttention), spec (the spec's own); auto: sdpa "
                    "with the local spec, the spec's own (TE's fused) with te (default: auto)")
    ap.add_argument("--fusions", choices=["auto", "on", "off"], default="auto",
                    help="Megatron's fused bias + GELU and bias + residual (torch.compile): on, "
                    "off, or auto: on where a probe compiles (default: auto)")
    add_optimizer_args(ap)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cuda: one GPU per rank, NCCL (default); cpu: gloo, for "
                    "tests/megatron_cpu.py, which sends Megatron-Core's own CUDA calls to the CPU "
                    "(a check of this script without a GPU, no measurement)")
    ap.add_argument("--json", metavar="FILE", default=None,
                    help="write one JSON object per configuration to FILE (rank 0)")
    a = ap.parse_args(argv)
    return check_run_args(a, SCHEDULES)


def check_config(shape, sched, p, m):
    """The reason (schedule, p, m) cannot run, or None: Megatron-Core's own checks (the layer
    split, the interleaved schedule's micro-batch groups of p), made before any collective."""
    v = SCHEDULES[sched][0] or 1
    if shape["layers"] % (p * v):
        return f"{shape['layers']} layers do not split into {p * v} stages"
    if v > 1 and m < p:
        return f"{sched} needs at least as many micro-batches as ranks ({m} < {p})"
    if v > 1 and m % p:  # groups of p micro-batches; a last group smaller than p is refused
        return f"{sched} needs m to be a multiple of p = {p} (m = {m})"
    return None


# --------------------------------------------------------------------------------------------
# Imports: Megatron-Core found, then loaded (its failures name how to carry it)
# --------------------------------------------------------------------------------------------

def import_megatron():
    """megatron.core's modules this script calls, in a dict; a usage error (exit 2) naming how to
    carry the package where it is missing or one of its own imports is."""
    if importlib.util.find_spec("megatron") is None:
        usage_error(f"Megatron-Core (megatron.core) is not importable by {sys.executable}: "
                    + CARRY)
    try:
        import megatron.core
        from megatron.core import parallel_state, tensor_parallel
        from megatron.core.distributed import (
            DistributedDataParallel,
            DistributedDataParallelConfig,
            finalize_model_grads,
        )
        from megatron.core.models.gpt import GPTModel
        from megatron.core.models.gpt import gpt_layer_specs
        from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
        from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler
        from megatron.core.pipeline_parallel import get_forward_backward_func
        from megatron.core.transformer.module import Float16Module, MegatronModule
        from megatron.core.transformer.transformer_config import TransformerConfig
    except ImportError as e:
        usage_error(f"Megatron-Core is there but does not import ({e}): {CARRY}")
    return {
        "version": getattr(megatron.core, "__version__", "unknown"),
        "parallel_state": parallel_state,
        "tensor_parallel": tensor_parallel,
        "DDP": DistributedDataParallel,
        "DDPConfig": DistributedDataParallelConfig,
        "finalize_model_grads": finalize_model_grads,
        "GPTModel": GPTModel,
        "specs": gpt_layer_specs,
        "OptimizerConfig": OptimizerConfig,
        "get_megatron_optimizer": get_megatron_optimizer,
        "OptimizerParamScheduler": OptimizerParamScheduler,
        "get_forward_backward_func": get_forward_backward_func,
        "Float16Module": Float16Module,
        "MegatronModule": MegatronModule,
        "TransformerConfig": TransformerConfig,
    }


def te_version():
    """TransformerEngine's version where its PyTorch part imports (and Megatron-Core sees it),
    else None."""
    try:
        import transformer_engine
        import transformer_engine.pytorch  # noqa: F401
        from megatron.core.extensions.transformer_engine import HAVE_TE
    except Exception:  # any failure (ImportError, a missing library) means: not usable here
        return None
    if not HAVE_TE:
        return None
    return getattr(transformer_engine, "__version__", "unknown")


# --------------------------------------------------------------------------------------------
# Core attention through PyTorch's SDPA, in the spec's core_attention slot
# --------------------------------------------------------------------------------------------

def make_sdpa_attention(torch, F, MegatronModule):
    """A core attention module with DotProductAttention's constructor and forward signature
    (megatron/core/transformer/attention.py, CoreAttentionBuilder / CoreAttentionInterface):
    query, key, value [sq, b, heads, head_dim] -> [sq, b, heads * head_dim], causal, scaled by
    1/sqrt(head_dim) (or the config's softmax_scale), no dropout."""

    class SDPAttention(MegatronModule):
        def __init__(self, config, layer_number, attn_mask_type, attention_type,
                     attention_dropout=None, softmax_scale=None, cp_comm_type=None,
                     pg_collection=None, **unused):
            super().__init__(config=config)
            self.softmax_scale = softmax_scale
            self.attn_mask_type = attn_mask_type

        def forward(self, query, key, value, attention_mask, attn_mask_type=None,
                    attention_bias=None, packed_seq_params=None, **unused):
            assert attention_bias is None and packed_seq_params is None, \
                "SDPAttention: no attention bias, no packed sequences"
            if key.size(2) != query.size(2):  # grouped-query attention: repeat the kv heads
                rep = query.size(2) // key.size(2)
                key = key.repeat_interleave(rep, dim=2)
                value = value.repeat_interleave(rep, dim=2)
            q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))  # [b, h, s, d]
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.softmax_scale)
            sq, b, h, d = query.shape
            return y.permute(2, 0, 1, 3).reshape(sq, b, h * d)

    return SDPAttention


def gelu_tanh(x):
    """ppsched's GELU (tanh approximation), unfused: the activation when the fusions are off."""
    import torch.nn.functional as F
    return F.gelu(x, approximate="tanh")


def fusions_compile(torch, device):
    """Whether Megatron's fused bias + GELU (forward and backward) compiles and runs here: it is
    torch.compile'd, which needs Triton and a C compiler. (True, '') or (False, why)."""
    try:
        from megatron.core.fusions.fused_bias_gelu import bias_gelu_impl
        from megatron.core.fusions.fused_bias_dropout import bias_dropout_add_fused_train
        dt = torch.bfloat16 if device.type == "cuda" else torch.float32
        x = torch.randn(8, 2, 16, device=device, dtype=dt, requires_grad=True)
        b = torch.randn(16, device=device, dtype=dt, requires_grad=True)
        y = bias_gelu_impl(x, b)
        y = bias_dropout_add_fused_train((y, b), x, 0.0)
        y.float().sum().backward()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return True, ""
    except Exception as e:  # a compiler or Triton failure of any kind: run without them
        return False, f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


# --------------------------------------------------------------------------------------------
# One schedule: parallel state, model chunks, optimizer; then each m
# --------------------------------------------------------------------------------------------

def build_config(mc, torch, a, p, v, spec, fusions, is_cuda):
    """ppsched's model as a TransformerConfig (a field left out keeps Megatron-Core's default)."""
    s = a.shape
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    return mc["TransformerConfig"](
        num_layers=s["layers"],
        hidden_size=s["hidden"],
        num_attention_heads=s["heads"],
        ffn_hidden_size=4 * s["hidden"],
        kv_channels=s["hidden"] // s["heads"],
        num_query_groups=s["heads"],
        hidden_dropout=0.0,
        attention_dropout=0.0,
        layernorm_epsilon=1e-5,
        normalization="LayerNorm",
        add_bias_linear=True,  # every linear layer has a bias (the LM head has none: GPTModel's)
        activation_func=torch.nn.functional.gelu if fusions else gelu_tanh,
        bias_activation_fusion=fusions,  # bias + GELU fused: Megatron's tanh GELU
        bias_dropout_fusion=fusions,
        masked_softmax_fusion=False,  # its CUDA kernels are not in the wheel
        init_method_std=0.02,  # output layers: 0.02 / sqrt(2 * layers), Megatron's default
        bf16=a.dtype == "bf16",
        params_dtype=dtype,
        pipeline_dtype=dtype,
        tensor_model_parallel_size=1,
        pipeline_model_parallel_size=p,
        virtual_pipeline_model_parallel_size=v,
        sequence_parallel=False,
        variable_seq_lengths=False,
        # Megatron-LM's defaults: outputs freed once sent; interleaved overlaps its send/recv,
        # 1F1B batches them (batch_p2p_comm = not overlap_p2p_comm)
        deallocate_pipeline_outputs=True,
        overlap_p2p_comm=v is not None,
        batch_p2p_comm=v is None,
        gradient_accumulation_fusion=spec == "te",  # the local spec's needs apex's extension
        use_cpu_initialization=not is_cuda,
        perform_initialization=True,
    )


def build_chunks(mc, torch, a, config, layer_spec, v, device, is_cuda):
    """The rank's model chunks (one, or v for interleaving), each a GPTModel in Float16Module (bf16)
    in Megatron's DDP with fp32 gradient buffers, as Megatron-LM's get_model builds them."""
    ps = mc["parallel_state"]
    s = a.shape
    ddp_config = mc["DDPConfig"](grad_reduce_in_fp32=True, overlap_grad_reduce=False,
                                 use_distributed_optimizer=False)
    chunks = []
    for k in range(v or 1):
        vp_stage = k if v else None
        model = mc["GPTModel"](
            config=config,
            transformer_layer_spec=layer_spec,
            vocab_size=s["vocab"],
            max_sequence_length=s["seq_len"],
            pre_process=ps.is_pipeline_first_stage(ignore_virtual=False, vp_stage=vp_stage),
            post_process=ps.is_pipeline_last_stage(ignore_virtual=False, vp_stage=vp_stage),
            parallel_output=True,
            share_embeddings_and_output_weights=False,
            position_embedding_type="learned_absolute",
            vp_stage=vp_stage,
        )
        for param in model.parameters():
            mc["tensor_parallel"].set_defaults_if_not_set_tensor_model_parallel_attributes(param)
        if is_cuda:
            model.cuda(device)
        if a.dtype == "bf16":
            model = mc["Float16Module"](config, model)
        model = mc["DDP"](config=config, ddp_config=ddp_config, module=model,
                          disable_bucketing=k > 0)
        chunks.append(model)
    return chunks


def build_optimizer(mc, a, chunks):
    """Megatron's optimizer over the chunks with ppsched's AdamW and a constant learning rate (the
    scheduler sets each group's lr and its weight decay: none on biases and LayerNorm), or
    (None, None) without --optimizer adamw."""
    if a.optimizer != "adamw":
        return None, None
    cfg = mc["OptimizerConfig"](
        optimizer="adam", lr=a.lr, min_lr=a.lr, weight_decay=a.weight_decay,
        adam_beta1=ADAMW_BETAS[0], adam_beta2=ADAMW_BETAS[1], adam_eps=ADAMW_EPS,
        decoupled_weight_decay=True, bf16=a.dtype == "bf16",
        params_dtype=chunks[0].config.params_dtype, clip_grad=0.0,
        use_distributed_optimizer=False)
    optimizer = mc["get_megatron_optimizer"](cfg, chunks, use_gloo_process_groups=False)
    scheduler = mc["OptimizerParamScheduler"](
        optimizer, init_lr=a.lr, max_lr=a.lr, min_lr=a.lr, lr_warmup_steps=0,
        lr_decay_steps=1 << 30, lr_decay_style="constant", start_wd=a.weight_decay,
        end_wd=a.weight_decay, wd_incr_steps=1 << 30, wd_incr_style="constant")
    return optimizer, scheduler


def optimizer_name(optimizer):
    """Megatron's optimizer and the one inside it, e.g.
    'Float16OptimizerWithFloat16Params(torch.optim.adamw.AdamW)' (through a ChainedOptimizer)."""
    names = []
    for o in getattr(optimizer, "chained_optimizers", [optimizer]):
        base = getattr(o, "optimizer", None)
        inner = f"{type(base).__module__}.{type(base).__name__}" if base is not None else ""
        names.append(f"{type(o).__name__}({inner})")
    return ", ".join(sorted(set(names)))


def make_batches(torch, shape, m, seed, device):
    """m micro-batches: tokens [b, T], next-token labels (the last position wraps to the first
    token) and positions, as torch_peer.py makes them."""
    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    b, T = shape["micro_batch_size"], shape["seq_len"]
    tokens = torch.randint(0, shape["vocab"], (m * b, T), generator=g, dtype=torch.int64)
    labels = torch.roll(tokens, shifts=-1, dims=1)
    pos = torch.arange(T, dtype=torch.int64).unsqueeze(0).expand(b, T).contiguous().to(device)
    return [{"tokens": tokens[i * b:(i + 1) * b].to(device),
             "labels": labels[i * b:(i + 1) * b].to(device),
             "position_ids": pos} for i in range(m)]


def forward_step(data_iterator, model):
    """Megatron's forward_step_func contract: (output, loss_func). GPTModel given labels returns
    the per-token loss [b, s] on the last stage (the hidden states elsewhere)."""
    batch = next(data_iterator)
    output = model(batch["tokens"], batch["position_ids"], None, labels=batch["labels"])
    return output, loss_func


def loss_func(output_tensor):
    """Mean cross-entropy of the micro-batch; the schedule divides it by m (2-tuple form)."""
    loss = output_tensor.float().mean()
    return loss, {"lm loss": loss.clone().detach()}


def run_schedule(env, a, sched, rank, p, device):
    """Build the parallel state, the model and the optimizer for `sched`, run each m, tear down.
    Returns the results (complete on rank 0)."""
    torch, dist, mc = env["torch"], env["dist"], env["mc"]
    ps = mc["parallel_state"]
    v, fb_name = SCHEDULES[sched]
    is_cuda = device.type == "cuda"
    ms = [(m, check_config(a.shape, sched, p, m)) for m in a.m_list]
    if all(reason for _, reason in ms):
        return [{"framework": "megatron-core", "schedule": sched, "preset": a.preset, "p": p,
                 "m": m, "error": reason} for m, reason in ms]

    ps.initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=p,
                                 virtual_pipeline_model_parallel_size=v,
                                 create_gloo_process_groups=False)
    # Megatron-LM's seeding: a seed per pipeline rank, then the model-parallel RNG tracker
    seed = a.seed + 100 * ps.get_pipeline_model_parallel_rank()
    torch.manual_seed(seed)
    if is_cuda:
        mc["tensor_parallel"].model_parallel_cuda_manual_seed(seed)

    config = build_config(mc, torch, a, p, v, env["spec"], env["fusions"], is_cuda)
    chunks = build_chunks(mc, torch, a, config, env["layer_spec"], v, device, is_cuda)
    optimizer, scheduler = build_optimizer(mc, a, chunks)
    # What Megatron-LM's setup sets on the config before training
    config.finalize_model_grads_func = mc["finalize_model_grads"]
    if optimizer is not None:
        config.grad_scale_func = optimizer.scale_loss
    fb_func = mc["get_forward_backward_func"]()
    assert fb_func.__name__ == fb_name, f"{sched}: Megatron-Core chose {fb_func.__name__}"
    is_last = ps.is_pipeline_last_stage(ignore_virtual=True)
    n_params = sum(prm.numel() for c in chunks for prm in c.parameters())

    def sync():
        if is_cuda:
            torch.cuda.synchronize(device)

    results = []
    for m, reason in ms:
        if reason:
            results.append({"framework": "megatron-core", "schedule": sched, "preset": a.preset,
                            "p": p, "m": m, "error": reason})
            continue
        batches = make_batches(torch, a.shape, m, a.seed + 1, device)
        if is_cuda:
            torch.cuda.reset_peak_memory_stats(device)
        times_ms, step_losses = [], []
        gc.collect()
        for it in range(a.warmup + a.steps):
            iters = [iter(batches) for _ in chunks]  # each chunk draws the m micro-batches
            sync()
            barrier(dist, device)
            sync()
            if it == a.warmup:
                gc.disable()  # no collector pauses inside timed steps
            t0 = time.perf_counter()
            for chunk in chunks:
                chunk.zero_grad_buffer()
            if optimizer is not None:
                optimizer.zero_grad()
            step_losses = fb_func(forward_step_func=forward_step, data_iterator=iters,
                                  model=chunks, num_microbatches=m,
                                  seq_length=a.shape["seq_len"],
                                  micro_batch_size=a.shape["micro_batch_size"],
                                  forward_only=False)
            if optimizer is not None:
                optimizer.step()
                scheduler.step(increment=1)
            sync()
            t1 = time.perf_counter()
            if it >= a.warmup:
                times_ms.append((t1 - t0) * 1e3)
        gc.enable()

        loss = 0.0
        if is_last and step_losses:
            loss = sum(float(d["lm loss"]) for d in step_losses) / m
        stats = pipeline_stats(torch, dist, device, times_ms, loss,
                               m * a.shape["micro_batch_size"] * a.shape["seq_len"],
                               count=n_params)
        del batches, step_losses
        barrier(dist, device)

        results.append({
            "framework": "megatron-core",
            "schedule": sched,
            "megatron_schedule": fb_name,
            "preset": a.preset,
            "p": p,
            "v": v or 1,
            "stages": p * (v or 1),
            "m": m,
            "micro_batch_size": a.shape["micro_batch_size"],
            "model": {k: a.shape[k] for k in ("layers", "hidden", "heads", "seq_len", "vocab")},
            "parameters": stats.pop("count"),
            **stats,
            "steps": a.steps,
            "warmup": a.warmup,
            "dtype": a.dtype,
            "spec": env["spec"],
            "attention": env["attention"],
            "fusions": "on" if env["fusions"] else "off" + (f" ({env['fusions_why']})"
                                                            if env["fusions_why"] else ""),
            "optimizer": a.optimizer,
            "optimizer_impl": optimizer_name(optimizer) if optimizer is not None else None,
            "p2p": "overlapped" if config.overlap_p2p_comm else "batched",
            "megatron_core_version": mc["version"],
            "torch_version": torch.__version__,
            "te_version": env["te_version"],
        })

    del optimizer, scheduler, chunks, fb_func
    config.finalize_model_grads_func = None
    config.grad_scale_func = None
    gc.collect()
    if is_cuda:
        torch.cuda.empty_cache()
    barrier(dist, device)
    ps.destroy_model_parallel()
    return results


def print_table(results, a, p, device_name, env, out=sys.stdout):
    """torch_peer.py's table, its first line naming Megatron-Core and how it ran."""
    title = (f"Megatron-Core {env['mc']['version']} (torch {env['torch'].__version__})")
    torch_print_table(results, a, p, device_name, env["torch"].__version__, out, title)
    print(f"# Megatron-Core: spec {env['spec']}, attention {env['attention']}, fusions "
          f"{'on' if env['fusions'] else 'off'}", file=out)


def main(argv=None):
    a = parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "0"))
    if world < 2 or "LOCAL_RANK" not in os.environ:
        usage_error("run under torchrun with 2 or more processes, e.g. "
                    "torchrun --standalone --nproc_per_node=4 bench/megatron_peer.py")
    if importlib.util.find_spec("megatron") is None:  # before torch: the message CI can check
        usage_error(f"Megatron-Core (megatron.core) is not importable by {sys.executable}: "
                    + CARRY)
    try:
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F
    except ImportError as e:
        usage_error(f"needs PyTorch: {e}")
    mc = import_megatron()
    env = {"torch": torch, "dist": dist, "mc": mc}

    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    if a.device == "cuda":
        if not torch.cuda.is_available() or torch.cuda.device_count() <= local_rank:
            usage_error(f"rank {rank}: no CUDA device {local_rank}")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group(backend="nccl", device_id=device)
        device_name = torch.cuda.get_device_name(device)
    else:
        device = torch.device("cpu")
        dist.init_process_group(backend="gloo")
        device_name = "CPU (gloo)"
    p = dist.get_world_size()

    # The layer spec and its core attention
    env["te_version"] = te_version()
    spec = a.spec
    if spec == "auto":
        spec = "te" if env["te_version"] else "local"
    if spec == "te" and not env["te_version"]:
        usage_error("--spec te: transformer_engine does not import here (use --spec local)")
    attention = a.attention
    if attention == "auto":
        attention = "sdpa" if spec == "local" else "spec"
    if spec == "te":
        layer_spec = mc["specs"].get_gpt_layer_with_transformer_engine_spec()
    else:
        layer_spec = mc["specs"].get_gpt_layer_local_spec()
    if attention == "sdpa":
        layer_spec.submodules.self_attention.submodules.core_attention = make_sdpa_attention(
            torch, F, mc["MegatronModule"])
    env["spec"], env["layer_spec"] = spec, layer_spec
    env["attention"] = {"sdpa": "sdpa (F.scaled_dot_product_attention, causal)",
                        "local": "megatron-local (DotProductAttention, unfused)",
                        "spec": "te (TEDotProductAttention)" if spec == "te"
                        else "megatron-local (DotProductAttention, unfused)"}[attention]

    # Fusions: every rank must agree (a rank without them runs other kernels, same maths)
    fusions, why = (a.fusions == "on"), ""
    if a.fusions == "auto":
        fusions, why = fusions_compile(torch, device)
    flag = torch.tensor([1.0 if fusions else 0.0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    if fusions and flag.item() < 1.0:
        fusions, why = False, "another rank could not compile them"
    env["fusions"], env["fusions_why"] = fusions, why
    if rank == 0 and why:
        print(f"# fusions off: {why}", file=sys.stderr, flush=True)

    results = []
    json_file = open(a.json, "w") if (a.json and rank == 0) else None
    try:
        for sched in a.schedule_list:
            for r in run_schedule(env, a, sched, rank, p, device):
                if rank != 0:
                    continue
                results.append(r)
                if "error" in r:
                    print(f"# {sched} m={r['m']}: skipped: {r['error']}", file=sys.stderr,
                          flush=True)
                else:
                    print(f"# {sched} m={r['m']}: {r['step_ms']:.2f} ms, "
                          f"{r['tokens_per_s']:.4g} tokens/s", file=sys.stderr, flush=True)
                if json_file:
                    json_file.write(json.dumps(r) + "\n")
                    json_file.flush()
    finally:
        if json_file:
            json_file.close()
    if rank == 0:
        print_table(results, a, p, device_name, env)
        sys.stdout.flush()
    barrier(dist, device)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
