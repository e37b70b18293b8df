/*
 * execute_group.c — the executor as one process of an MPI launch (pp_group.h; see
 * execute_internal.h): which devices this process drives, how every process learns of a failure
 * on any, and how the timelines of all become one.
 *
 * Invariants: device numbers stay global; a process owns the consecutive run of devices its rank
 * gives it, and on several hosts drives them as CUDA ordinals local_rank * k .. + k - 1 of its
 * host (on one host, the ordinals pipeline.devices lists). Every collective here is called by
 * every process the same number of times, whatever failed: once per step (exec_step_agree, which
 * also keeps the step's launch time), once after the run. A process's op times are read from its
 * own device clock; the merge moves them onto rank 0's by the difference of the host times the
 * representative step was launched at, corrected by the clock offset measured with ping-pongs.
 * The residual skew reported is the offset's error bound plus this process's own device skew.
 * The loss and, when asked, the gradients come from the processes that own their stages.
 */
#include "execute_internal.h"

#include <stdlib.h>
#include <string.h>

pp_status_t exec_share_devices(exec_t *x, int *cuda, int n_vis)
{
    pp_group_t *g = x->opts.group;
    const int p = x->plan->n_devices;
    const int spans_hosts = g->local_size < g->size;
    group_split_devices(g, p, x->job->pipeline.devices_per_process, x->rank_of);
    for (int d = 0, j = 0; d < p; d++) {
        if (x->rank_of[d] != g->rank) continue;
        if (spans_hosts) cuda[d] = g->local_rank * (p / g->size) + j++;
        if (cuda[d] < 0 || cuda[d] >= n_vis)
            PP_REFUSE(PP_ERR_DEVICE,
                    "rank %d (local rank %d): pipeline device %d is CUDA device %d, but only %d "
                    "are visible",
                    g->rank, g->local_rank, d, cuda[d], n_vis);
    }
    world_own_share(&x->w, p, cuda, x->rank_of, g->rank);
    x->launch_s = calloc((size_t)(x->job->run.warmup + x->job->run.steps + 1), sizeof(double));
    PP_ALLOC_CHECK(x->launch_s);
    return PP_OK;
}

pp_status_t exec_step_agree(exec_t *x, pp_status_t st, int step)
{
    if (!exec_in_group(x)) return st;
    PP_CHECK(group_agree(x->opts.group, st));
    x->launch_s[step] = group_now_s();
    return PP_OK;
}

/* Where this process's representative step starts on rank 0's clock, in ms after rank 0's. */
static pp_status_t shift_of(exec_t *x, int pick, double *shift_ms)
{
    pp_group_t *g = x->opts.group;
    double root = x->launch_s[pick];
    PP_CHECK(g->ops->bcast(g, &root, sizeof root, 0));
    *shift_ms = (x->launch_s[pick] - root) * 1e3 - x->clock_offset_ms;
    return PP_OK;
}

pp_status_t exec_group_merge(exec_t *x, pp_timeline_t *tl, pp_exec_result_t *res,
                             const double *step_ms, const pp_op_time_t *times)
{
    pp_group_t *g = x->opts.group;
    const int steps = x->job->run.steps, warmup = x->job->run.warmup;
    int pick = exec_median_step(step_ms, steps);
    double shift = 0;
    PP_CHECK(g->ops->bcast(g, &pick, sizeof pick, 0));
    pp_status_t st = exec_keep_median(tl, step_ms, steps, times, x->plan->n_ops, pick, 0);
    tl->skew_ms += x->clock_residual_ms;
    PP_CHECK(group_agree(g, st));
    PP_CHECK(shift_of(x, warmup + pick, &shift));
    PP_CHECK(timeline_merge(tl, x->plan, x->rank_of, g, shift));
    if (!res || !res->loss) return PP_OK;
    /* each replica's share of the loss from the process owning its last stage, added in replica
     * order as one process adds them */
    const int last = x->plan->n_stages - 1, total = res->n_steps;
    for (int r = 0; r < x->replicas; r++)
        PP_CHECK(g->ops->bcast(g, x->replica_loss + (size_t)r * total,
                               sizeof *res->loss * (size_t)total,
                               x->rank_of[plan_stage_device(x->plan, last, r)]));
    for (int k = 0; k < total; k++) {
        res->loss[k] = 0;
        for (int r = 0; r < x->replicas; r++)
            res->loss[k] += x->replica_loss[(size_t)r * total + k];
    }
    return PP_OK;
}

pp_status_t exec_group_grads(exec_t *x, pp_exec_result_t *res, pp_status_t st)
{
    pp_group_t *g = x->opts.group;
    const pp_plan_t *plan = x->plan;
    PP_CHECK(group_agree(g, st));
    size_t off = 0;
    for (int s = 0; s < plan->n_stages; s++) {
        size_t n = stage_param_count(&x->scfg[s]);
        PP_CHECK(g->ops->bcast(g, res->grads + off, n * sizeof(float),
                               x->rank_of[plan->stage_device[s]]));
        off += n;
    }
    return PP_OK;
}
