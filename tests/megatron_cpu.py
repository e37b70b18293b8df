#!/usr/bin/env python3
"""megatron_cpu.py BENCH_DIR [megatron_peer.py options] — bench/megatron_peer.py --device cpu on a
machine without a GPU, under torchrun (gloo), for tests/check_bench_peer.sh where PyTorch and
Megatron-Core import. Megatron-Core 0.19 allocates a few tensors on "cuda" by name and asks for
CUDA streams and the tensor type's "torch.cuda." name in its schedules, DDP and optimizer; this
redirects those to the CPU (and the CUDA RNG tracker, which Megatron's own attention forks, to
one that forks nothing) before running the script's main(), so its calls into Megatron-Core
(the schedules, DDP, finalize_model_grads, the optimizer) are checked for what they take and
return. It measures nothing.

With --print-groups, rank 0 prints each optimizer group's lr, betas, eps, weight decay and the
dimensions of its parameters ("group ..." lines) once the optimizer is built.
"""
import contextlib
import functools
import os
import sys

import torch


def _on_cpu(kwargs):
    device = kwargs.get("device")
    if device is not None and str(device).startswith("cuda"):
        kwargs["device"] = "cpu"
    return kwargs


def _wrap(f):
    @functools.wraps(f)
    def g(*args, **kwargs):
        return f(*args, **_on_cpu(kwargs))
    return g


class _Stream:
    def wait_event(self, *a):
        pass

    def wait_stream(self, *a):
        pass


def redirect_cuda():
    for name in ("zeros", "empty", "ones", "tensor", "full", "arange", "randn"):
        setattr(torch, name, _wrap(getattr(torch, name)))
    torch.cuda.current_device = lambda: torch.device("cpu")
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.current_stream = lambda *a, **k: _Stream()
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.nn.Module.cuda = lambda self, *a, **k: self
    type_name = torch.Tensor.type

    def cuda_type(self, *a, **k):
        t = type_name(self, *a, **k)
        if not a and not k and isinstance(t, str) and t.startswith("torch.") and ".cuda." not in t:
            t = "torch.cuda." + t[len("torch."):]
        return t

    torch.Tensor.type = cuda_type


class _NoTracker:
    """The CUDA RNG tracker's stand-in (the CPU run seeds none): forks into nothing, as no
    dropout runs."""

    def fork(self, *a, **k):
        return contextlib.nullcontext()


def redirect_rng_tracker():
    import megatron.core.tensor_parallel as tp
    tp.get_cuda_rng_tracker = lambda *a, **k: _NoTracker()


def main():
    bench = sys.argv[1]
    args = [x for x in sys.argv[2:] if x != "--print-groups"]
    print_groups = "--print-groups" in sys.argv[2:]
    redirect_cuda()
    redirect_rng_tracker()
    sys.path.insert(0, bench)
    sys.argv = [os.path.join(bench, "megatron_peer.py")] + args
    import megatron_peer

    if print_groups:
        build = megatron_peer.build_optimizer

        def build_and_print(mc, a, chunks):
            optimizer, scheduler = build(mc, a, chunks)
            if optimizer is not None and int(os.environ.get("RANK", "0")) == 0:
                for g in optimizer.param_groups:
                    dims = sorted({p.dim() for p in g["params"]})
                    print(f"group lr {g['lr']} betas {tuple(g['betas'])} eps {g['eps']} "
                          f"weight_decay {g['weight_decay']} dims {dims}", flush=True)
            return optimizer, scheduler

        megatron_peer.build_optimizer = build_and_print
    return megatron_peer.main()


if __name__ == "__main__":
    sys.exit(main())
