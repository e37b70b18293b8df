/*
 * timeline.c — the record of one run: a start and an end per plan op, the makespan of every timed
 * step, and each device's peak memory.
 *
 * Invariants: an initialised timeline owns three zeroed arrays sized n_ops, n_devices and n_steps
 * (each at least one element, so a zero count still gives a valid pointer), with has_op_times 0
 * until the producer fills t[] and sets it. timeline_free takes a NULL, zeroed or half-built
 * timeline and leaves it zeroed.
 */
#include "timeline.h"

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
