/*
 * simulate.h — discrete-event simulation of a plan under a cost model.
 *
 * Each channel (plan.h: a device's compute, overlap, offload or load stream, its send or recv
 * channel with one peer device) runs its ops in plan order, one at a time; an op starts when its
 * channel is free and every dependency has ended, so a transfer waits only for transfers of the
 * same directed pair. A SEND and its RECV are one transfer: both start at the later of the two
 * ready times and end one transfer of its link later (cost_model_send; 0 for a LOCAL link). Compute
 * and communication streams of a device overlap, as on a GPU. With uniform costs and free
 * communication the result matches the closed forms of the schedules exactly. The copies of
 * run.offload run on their own streams (offload, load) and take bytes / host_link_gbps; the
 * devices on one GPU (link_of) share its PCIe link to the host, each direction apart: a copy also
 * waits until its link in its direction is free, in plan order (one copy at a time, at the full
 * rate). The
 * backward half of an overlapped pair (its second compute stream, overlap) starts once (1 -
 * overlap) of its forward half has run: with overlap 0 the pair runs as one after the other (the
 * closed forms hold), with 1 at once. The d REDUCE ops of one stage and bucket (adjacent in plan
 * order, one per replica) are one collective: all start at the latest of their ready times and
 * end together, cost_model_reduce later (over the network link when the group spans hosts).
 * Around its ops each device runs its stages' heads and tails (pp_cost_model_t): the head on its
 * compute stream from 0, before its first compute op can start, and the tail once every op of the
 * device has ended (the executor joins the device's streams into its compute stream first). The
 * step runs from 0, when every device starts, to the end of the last op or tail; the timeline's op
 * times are shifted to start at its earliest op, so the step exceeds the ops' makespan by what ran
 * outside them (heads, tails, and the gap before the first op).
 *
 * Under several processes (pp_group.h) each simulates only the ops of the devices it owns, in the
 * same plan order, and the two ends of a transfer across processes meet by message: each side
 * sends the other its ready time and both start the transfer at the later one. So a process that
 * posts in another order, or never posts, leaves its peer waiting, and the wait ends at a
 * deadline with the pending op named. timeline_merge (timeline.h) puts the parts together.
 */
#ifndef PP_SIMULATE_H
#define PP_SIMULATE_H

#include "common/pp_group.h"
#include "model/job.h"
#include "plan/plan.h"
#include "timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Cost of every compute kind on every stage, in ms, and of one transfer. Built from the config's
 * `cost:` section (uniform) or from measured op times (per stage). */
typedef struct pp_cost_model {
    int n_stages;
    double *f, *b, *i, *w; /* [n_stages] each; b is the full backward */
    double *head, *tail;   /* [n_stages] each: what the stage adds to its device's step outside
                              its ops (cost_stage_tail): its gradients zeroed before the device's
                              first op, its optimizer after the device's last (0: none) */
    double send;           /* one cross-device transfer (a transport with no figure of its own) */
    double send_by[PP_TRANSPORT_COUNT]; /* one transfer over each transport, where it has a
                                           figure of its own (> 0); 0: `send` */
    double host_link_gbps; /* OFFLOAD and RELOAD: GB/s each direction (0: free) */
    int link_of[PP_MAX_DEVICES]; /* the host link of each pipeline device's copies (job_copy_link;
                                    0 for all: one link): devices with one link share it, each
                                    direction */
    double gap_ms;               /* a replayed step's latency between ops: a compute op, a copy or
                                    a transfer between devices starts this long after its stream
                                    and its inputs are free (0: at once; gpu.h's gap_us) */
    double overlap;              /* 0..1 (cost.overlap): an overlapped pair's backward half starts
                                    once (1 - overlap) of its forward half has run; 0 runs them serially */
    int reduce_ranks;            /* REDUCE: the replicas of the collective (d; 0 or 1: none) */
    double reduce_gbps[2];       /* REDUCE: bandwidth within one host [0] and between hosts [1],
                                    GB/s (0: reductions are free) */
    double reduce_latency_ms[2]; /* and the latency of one ring step on each */
} pp_cost_model_t;

/* One ring all-reduce of `bytes` over `ranks` replicas on link `net` (0: within a host, 1:
 * between hosts) under cm: 2 (d-1)/d x bytes / bandwidth + 2 (d-1) x latency. A reduce-scatter
 * plus all-gather (run.optimizer_sharding: zero1) moves the same bytes in the same steps. */
static inline double cost_model_reduce(const pp_cost_model_t *cm, double bytes, int ranks, int net)
{
    const double gbps = cm->reduce_gbps[net ? 1 : 0];
    if (ranks <= 1 || !(gbps > 0)) return 0.0;
    return 2.0 * (ranks - 1) / ranks * bytes / (gbps * 1e6) +
           2.0 * (ranks - 1) * cm->reduce_latency_ms[net ? 1 : 0];
}

pp_status_t cost_model_uniform(pp_cost_model_t *cm, int n_stages, const pp_job_cost_t *c);

/* The time of one transfer over transport t under cm: t's own figure, else cm->send. */
static inline double cost_model_send(const pp_cost_model_t *cm, pp_transport_t t)
{
    return (int)t >= 0 && t < PP_TRANSPORT_COUNT && cm->send_by[t] > 0 ? cm->send_by[t] : cm->send;
}
void cost_model_free(pp_cost_model_t *cm);

/* Simulate `plan`; fills `tl` (initialised here, mode SIMULATE, one step: step_ms[0] from 0 to the
 * last op's or tail's end). */
pp_status_t simulate_plan(pp_timeline_t *tl, const pp_plan_t *plan, const pp_cost_model_t *cm);

/* simulate_plan under cm[0] into tl, and step_ms[l - 1] = the step simulate_plan gives under
 * cm[l] for l = 1 .. n - 1 (n 1..8), in the same pass over the plan. */
pp_status_t simulate_plan_and(pp_timeline_t *tl, double *step_ms, const pp_plan_t *plan,
                              const pp_cost_model_t *const *cm, int n);

/* step_ms[l] = the step simulate_plan gives under cm[l], for n (1..8) cost models in one pass
 * over the plan (each op's times under every model side by side: the walk and the reads of its
 * dependencies are shared). */
pp_status_t simulate_makespans(double *step_ms, const pp_plan_t *plan,
                               const pp_cost_model_t *const *cm, int n);

/* One process's share of a simulation over several processes. */
typedef struct pp_sim_part {
    pp_group_t *group;  /* the processes; this one is group->rank */
    const int *rank_of; /* [plan->n_devices]: the process that owns each device */
    double deadline;    /* group_now_s() by which every exchange must have completed */
    double timeout_s;   /* the wait that deadline stands for, for the message */
    int drop_send;      /* a test's injected fault: the SEND op whose ready time this process
                           never sends (-1: none) */
} pp_sim_part_t;

/* Simulate the ops of the devices part->group->rank owns (others stay 0), on the same time axis
 * as simulate_plan's before its shift to 0 (timeline_merge shifts the merged whole). On a
 * deadline: the pending transfer and the rank it waits for are printed; PP_ERR_TIMEOUT. */
pp_status_t simulate_plan_part(pp_timeline_t *tl, const pp_plan_t *plan, const pp_cost_model_t *cm,
                               const pp_sim_part_t *part);

#ifdef __cplusplus
}
#endif

#endif /* PP_SIMULATE_H */
