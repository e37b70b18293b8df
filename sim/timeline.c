/*
 * timeline.c — the record of one run: a start and an end per plan op, the makespan of every timed
 * step, and each device's peak memory.
 *
 * Invariants: an initialised timeline owns three zeroed arrays sized n_ops, n_devices and n_steps
 * (each at least one element, so a zero count still gives a valid pointer), with has_op_times 0
 * until the producer fills t[] and sets it. timeline_free takes a NULL, zeroed or half-built
 * timeline and leaves it zeroed. timeline_merge puts the parts of several processes together:
 * every process sends rank 0 the times of the ops it owns, rank 0 merges and sends the whole back,
 * so every process holds the same timeline after.
 */
#include "timeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

pp_status_t timeline_init(pp_timeline_t *tl, pp_mode_t mode, int n_ops, int n_devices, int n_steps)
{
    pp_status_t st = PP_ERR_NOMEM;
    memset(tl, 0, sizeof *tl);
    if (n_ops < 0 || n_devices < 1 || n_devices > PP_MAX_DEVICES || n_steps < 0)
        PP_FAIL(PP_ERR_INTERNAL, "timeline_init: bad sizes (ops %d, devices %d, steps %d)", n_ops,
                n_devices, n_steps);
    tl->mode = mode;
    tl->n_ops = n_ops;
    tl->n_devices = n_devices;
    tl->n_steps = n_steps;
    tl->has_op_times = 0; /* set by whoever fills t[] (the simulator, a timed run) */
    tl->t = calloc(n_ops > 0 ? (size_t)n_ops : 1, sizeof *tl->t);
    if (!tl->t) goto fail;
    tl->peak_mem_bytes = calloc((size_t)n_devices, sizeof *tl->peak_mem_bytes);
    if (!tl->peak_mem_bytes) goto fail;
    tl->step_ms = calloc(n_steps > 0 ? (size_t)n_steps : 1, sizeof *tl->step_ms);
    if (!tl->step_ms) goto fail;
    return PP_OK;

fail:
    timeline_free(tl);
    fprintf(stderr, "%s:%d: out of host memory for a timeline of %d ops\n", __FILE__, __LINE__,
            n_ops);
    return st;
}

void timeline_free(pp_timeline_t *tl)
{
    if (!tl) return;
    free(tl->t);
    free(tl->peak_mem_bytes);
    free(tl->step_ms);
    memset(tl, 0, sizeof *tl);
}

double timeline_makespan(const pp_timeline_t *tl)
{
    if (!tl || tl->n_ops <= 0 || !tl->t) return 0.0;
    double lo = tl->t[0].start_ms, hi = tl->t[0].end_ms;
    for (int i = 1; i < tl->n_ops; i++) {
        if (tl->t[i].start_ms < lo) lo = tl->t[i].start_ms;
        if (tl->t[i].end_ms > hi) hi = tl->t[i].end_ms;
    }
    return hi - lo;
}

/* ---- merging the timelines of several processes ---------------------------------------------
 * What each process sends, in doubles: shift, skew, has_op_times, step_ms[n_steps],
 * peak_mem_bytes[n_devices], then start and end of every op. */
enum { MERGE_HEAD = 3 };

static size_t merge_len(const pp_timeline_t *tl)
{
    return MERGE_HEAD + (size_t)tl->n_steps + (size_t)tl->n_devices + 2 * (size_t)tl->n_ops;
}

static void merge_pack(double *b, const pp_timeline_t *tl, double shift_ms)
{
    b[0] = shift_ms;
    b[1] = tl->skew_ms;
    b[2] = tl->has_op_times;
    double *v = b + MERGE_HEAD;
    for (int k = 0; k < tl->n_steps; k++)
        *v++ = tl->step_ms[k];
    for (int d = 0; d < tl->n_devices; d++)
        *v++ = (double)tl->peak_mem_bytes[d];
    for (int i = 0; i < tl->n_ops; i++) {
        *v++ = tl->t[i].start_ms;
        *v++ = tl->t[i].end_ms;
    }
}

/* On rank 0: the merged timeline from every process's buffer (all[r * len ...]). */
static void merge_on_root(pp_timeline_t *tl, const pp_plan_t *plan, const int *rank_of,
                          const double *all, size_t len, int size)
{
    const size_t steps_at = MERGE_HEAD, peak_at = steps_at + (size_t)tl->n_steps,
                 ops_at = peak_at + (size_t)tl->n_devices;
    double lo = INFINITY;
    tl->skew_ms = 0;
    for (int r = 0; r < size; r++) {
        const double *b = all + (size_t)r * len;
        lo = fmin(lo, b[0]);
        tl->skew_ms = fmax(tl->skew_ms, b[1]);
        if (b[2] == 0) tl->has_op_times = 0;
    }
    for (int k = 0; k < tl->n_steps; k++) {
        double hi = 0;
        for (int r = 0; r < size; r++)
            hi = fmax(hi, all[(size_t)r * len] + all[(size_t)r * len + steps_at + (size_t)k]);
        tl->step_ms[k] = hi - lo;
    }
    for (int d = 0; d < tl->n_devices; d++)
        tl->peak_mem_bytes[d] = (size_t)all[(size_t)rank_of[d] * len + peak_at + (size_t)d];
    for (int i = 0; i < tl->n_ops; i++) {
        const double *b = all + (size_t)rank_of[plan->ops[i].device] * len;
        tl->t[i].start_ms = b[ops_at + 2 * (size_t)i] + b[0];
        tl->t[i].end_ms = b[ops_at + 2 * (size_t)i + 1] + b[0];
    }
}

/* Every process's copy from rank 0's merged one. */
static pp_status_t merge_share(pp_timeline_t *tl, pp_group_t *g)
{
    size_t len = merge_len(tl);
    double *b = malloc(sizeof *b * len);
    PP_ALLOC_CHECK(b);
    if (g->rank == 0) merge_pack(b, tl, 0);
    pp_status_t st = g->ops->bcast(g, b, sizeof *b * len, 0);
    if (st == PP_OK && g->rank != 0) {
        tl->skew_ms = b[1];
        tl->has_op_times = b[2] != 0;
        const double *v = b + MERGE_HEAD;
        for (int k = 0; k < tl->n_steps; k++)
            tl->step_ms[k] = *v++;
        for (int d = 0; d < tl->n_devices; d++)
            tl->peak_mem_bytes[d] = (size_t)*v++;
        for (int i = 0; i < tl->n_ops; i++) {
            tl->t[i].start_ms = *v++;
            tl->t[i].end_ms = *v++;
        }
    }
    free(b);
    return st;
}

pp_status_t timeline_merge(pp_timeline_t *tl, const pp_plan_t *plan, const int *rank_of,
                           pp_group_t *g, double shift_ms)
{
    const size_t len = merge_len(tl);
    double *mine = malloc(sizeof *mine * len), *all = NULL;
    pp_status_t st = PP_ERR_NOMEM;
    if (!mine) goto fail;
    if (g->rank == 0 && !(all = malloc(sizeof *all * len * (size_t)g->size))) goto fail;
    merge_pack(mine, tl, shift_ms);
    PP_CHECK_GOTO(g->ops->gather(g, mine, all, sizeof *mine * len, 0), st, fail);
    if (g->rank == 0) {
        merge_on_root(tl, plan, rank_of, all, len, g->size);
        if (tl->has_op_times) { /* the step starts at 0, as one process has it */
            double t0 = INFINITY;
            for (int i = 0; i < tl->n_ops; i++)
                t0 = fmin(t0, tl->t[i].start_ms);
            for (int i = 0; tl->n_ops > 0 && i < tl->n_ops; i++) {
                tl->t[i].start_ms -= t0;
                tl->t[i].end_ms -= t0;
            }
        }
    }
    free(mine);
    free(all);
    return merge_share(tl, g);
fail:
    if (st == PP_ERR_NOMEM)
        fprintf(stderr, "%s:%d: out of host memory merging a timeline of %d ops\n", __FILE__,
                __LINE__, tl->n_ops);
    free(mine);
    free(all);
    return st;
}
