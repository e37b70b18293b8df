#!/usr/bin/env python3
# torch_orders.py OUTDIR [--p 4] [--m 8] — PyTorch pipelining's own compute-only orders, written as
# its CSV (the _dump_csv form: one row per rank, one cell per action, an empty cell for an idle
# slot), for ppsched to import and simulate (tests/cpu/test_generate_kinds.c reads them from
# tests/data/). Each order comes from torch.distributed.pipelining._schedule_visualizer's
# get_schedule_ops, which builds the schedule on mock stages: no GPU and no process group needed.
#
# Writes torch_<name>_p<P>_m<M>.csv for ZB-V, interleaved zero-bubble and DualPipeV (the three the
# test compares with ppsched's generators) and, for reference, GPipe, 1F1B, interleaved 1F1B and
# looped BFS. A schedule that fails is reported and skipped; the exit status is 1 when any of the
# first three failed.
import argparse
import csv
import inspect
import os
import sys

# file name -> (PyTorch schedule name for get_schedule_class, stages per rank, compared by the test)
ORDERS = [
    ("zbv", "ZBVZeroBubble", 2, True),
    ("interleaved_zb", "InterleavedZeroBubble", 2, True),
    ("dualpipev", "DualPipeV", 2, True),
    ("gpipe", "GPipe", 1, False),
    ("1f1b", "1F1B", 1, False),
    ("interleaved_1f1b", "Interleaved1F1B", 2, False),
    ("looped_bfs", "LoopedBFS", 2, False),
]


def schedule_ops(name, p, m, per_rank):
    """The per-rank action lists (None for an idle slot) of schedule `name`."""
    from torch.distributed.pipelining import _schedule_visualizer as vis

    params = inspect.signature(vis.get_schedule_ops).parameters
    kwargs = {}
    if "num_stages_per_rank" in params:
        kwargs["num_stages_per_rank"] = per_rank
    if "add_spacing" in params:
        kwargs["add_spacing"] = False  # the order as the schedule holds it
    if "with_comms" in params:
        kwargs["with_comms"] = False  # compute-only: ppsched adds the transfers
    return vis.get_schedule_ops(name, p, m, **kwargs)


def lockstep_length(name, p, m, per_rank):
    """Steps of PyTorch's own lock-step dry run (_simulate_comms_compute) of the schedule with its
    transfers, one step per action (a transfer, and a full or overlapped backward, count one), or
    None where the schedule keeps no order with transfers. For reference only: ppsched's unit-cost
    makespan counts F = I = W = 1, B = 2 and free transfers."""
    from unittest import mock

    from torch.distributed.pipelining import schedules as S
    from torch.distributed.pipelining.stage import PipelineStage

    cls = S.get_schedule_class(name)
    stage = mock.create_autospec(PipelineStage, instance=True)
    stage.group_rank, stage.group_size, stage.submod = 0, p, None
    stage.num_stages = p * per_rank
    sched = cls(stage if per_rank == 1 else [stage] * per_rank, m)
    order = getattr(sched, "pipeline_order_with_comms", None)
    if not order:
        return None
    mapping = getattr(sched, "stage_index_to_group_rank", None)
    to_rank = (lambda s: mapping[s]) if mapping else (lambda s: s % p)
    steps = S._simulate_comms_compute(order, to_rank, p * per_rank)
    return max(len(r) for r in steps.values())


def cell(action):
    # str(_Action) is PyTorch's own text form: 0F3, 1I2, (0F3;5B1)OVERLAP_F_B
    return "" if action is None else str(action)


def write_csv(path, ops):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        for rank_ops in ops:
            w.writerow([cell(a) for a in rank_ops])


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("outdir")
    ap.add_argument("--p", type=int, default=4, help="pipeline ranks (default 4)")
    ap.add_argument("--m", type=int, default=8, help="micro-batches (default 8)")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    try:
        import torch

        print(f"# torch {torch.__version__}")
    except Exception as e:  # noqa: BLE001 - report and stop
        print(f"torch_orders: cannot import torch: {e}", file=sys.stderr)
        return 1
    failed = 0
    for fname, name, per_rank, needed in ORDERS:
        path = os.path.join(args.outdir, f"torch_{fname}_p{args.p}_m{args.m}.csv")
        try:
            ops = schedule_ops(name, args.p, args.m, per_rank)
            write_csv(path, ops)
            actions = sum(1 for r in ops for a in r if a is not None)
            overlap = sum(1 for r in ops for a in r if a is not None and "OVERLAP" in str(a))
            print(f"wrote {path}: {len(ops)} ranks, {actions} actions"
                  + (f" ({overlap} OVERLAP_F_B)" if overlap else ""))
            try:
                n = lockstep_length(name, args.p, args.m, per_rank)
                if n is not None:
                    print(f"  {name}: PyTorch's lock-step dry run with transfers: {n} steps")
            except Exception as e:  # noqa: BLE001 - informational only
                print(f"  {name}: no lock-step length ({type(e).__name__}: {e})")
        except Exception as e:  # noqa: BLE001 - one schedule's failure must not stop the others
            print(f"FAILED {name} (p={args.p}, m={args.m}): {type(e).__name__}: {e}",
                  file=sys.stderr)
            failed += needed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
