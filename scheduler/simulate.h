/*
 * simulate.h — discrete-event simulation of a plan under a cost model.
 *
 * Each channel (plan.h: a device's compute, overlap, offload or load stream, its send or recv
 * channel with one peer device) runs its ops in plan order, one at a time; an op starts when its
 * channel is free and every dependency has ended, so a transfer waits only for transfers of the
 * same directed pair. A SEND and its RECV are one transfer: both start at the later of the two
 * ready times and end `send` later (0 for a LOCAL link). Compute and communication streams of a
 * device overlap, as on a GPU. With uniform costs and free communication the result matches the
 * closed forms of the schedules exactly. The copies of run.offload run on their own streams
 * (offload, load) and take bytes / host_link_gbps. The backward half of an overlapped pair (its
 * second compute stream, overlap) starts once (1 - overlap) of its forward half has run: with
 * overlap 0 the pair runs as one after the other (the closed forms hold), with 1 at once.
 */
#ifndef PP_SIMULATE_H
#define PP_SIMULATE_H

#include "config.h"
#include "plan.h"
#include "timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Cost of every compute kind on every stage, in ms, and of one transfer. Built from the config's
 * `cost:` section (uniform) or from measured op times (per stage). */
typedef struct pp_cost_model {
    int n_stages;
    double *f, *b, *i, *w; /* [n_stages] each; b is the full backward */
    double send;           /* one cross-device transfer */
    double host_link_gbps; /* OFFLOAD and RELOAD: GB/s each direction (0: free) */
    double overlap;        /* 0..1 (cost.overlap): an overlapped pair's backward half starts
                              once (1 - overlap) of its forward half has run; 0 runs them serially */
} pp_cost_model_t;

pp_status_t cost_model_uniform(pp_cost_model_t *cm, int n_stages, const pp_cost_cfg_t *c);
void cost_model_free(pp_cost_model_t *cm);

/* Simulate `plan`; fills `tl` (initialised here, mode SIMULATE, one step). */
pp_status_t simulate_plan(pp_timeline_t *tl, const pp_plan_t *plan, const pp_cost_model_t *cm);

/* simulate_plan under cm[0] into tl, and step_ms[l - 1] = the makespan simulate_plan gives under
 * cm[l] for l = 1 .. n - 1 (n 1..8), in the same pass over the plan. */
pp_status_t simulate_plan_and(pp_timeline_t *tl, double *step_ms, const pp_plan_t *plan,
                              const pp_cost_model_t *const *cm, int n);

/* step_ms[l] = the makespan simulate_plan gives under cm[l], for n (1..8) cost models in one pass
 * over the plan (each op's times under every model side by side: the walk and the reads of its
 * dependencies are shared). */
pp_status_t simulate_makespans(double *step_ms, const pp_plan_t *plan,
                               const pp_cost_model_t *const *cm, int n);

#ifdef __cplusplus
}
#endif

#endif /* PP_SIMULATE_H */
