/*
 * execute_timing.c — the executor's clock and waits (see execute_internal.h): the one wait helper
 * with a timeout, the message that names each owned device's pending op when a step did not
 * finish in time, and reading step and op times back from the timing events.
 *
 * Times are elapsed times from each device's time origin ref[d] (recorded right after the step's
 * common `go`), so devices share one axis to within the skew world_measure_skew bounds. The
 * representative step of a run is the median one.
 */
#include "execute_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double exec_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

pp_status_t exec_poll_event(cudaEvent_t ev, double deadline)
{
    struct timespec pause = {0, 20000};
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess) return PP_OK;
        if (e != cudaErrorNotReady) {
            fprintf(stderr, "%s:%d: the step failed on the GPU: %s (%s)\n", __FILE__, __LINE__,
                    cudaGetErrorString(e), cudaGetErrorName(e));
            return PP_ERR_CUDA;
        }
        if (exec_now_s() > deadline) return PP_ERR_TIMEOUT;
        nanosleep(&pause, NULL);
    }
}

/* Whether op i has completed: its timing event where there is one (recorded at every replay),
 * else its dependency event (recorded only by eager steps). */
static int op_done(exec_t *x, int i)
{
    int src = x->done_op[i];
    if (!world_owns(&x->w, x->plan->ops[src].device)) return 0; /* another process's: unknown */
    cudaEvent_t ev = x->opts.timing ? x->ev_end[src] : x->ev_dep[src];
    return cudaEventQuery(ev) == cudaSuccess;
}

/* After a timeout: name the first unfinished op of every owned device, then abort NCCL. */
void exec_report_pending(exec_t *x, int step, double timeout_s)
{
    const pp_plan_t *plan = x->plan;
    char txt[32];
    if (exec_in_group(x)) /* every rank names its own pending ops */
        fprintf(stderr, "ppsched: rank %d: ", x->opts.group->rank);
    else
        fprintf(stderr, "ppsched: ");
    fprintf(stderr, "step %d did not finish within %g s; still pending:\n", step, timeout_s);
    if (x->gexec && !x->opts.timing)
        fprintf(stderr, "  (a replayed graph with timing off cannot name its ops: rerun with "
                        "--set run.graph=off or run.timing=on)\n");
    for (int d = 0; d < plan->n_devices; d++) {
        if (!world_owns(&x->w, d)) continue;
        for (int k = plan->prog_begin[d]; k < plan->prog_begin[d + 1]; k++) {
            int i = plan->prog_ops[k];
            const pp_op_t *op = &plan->ops[i];
            if (op_done(x, i)) continue;
            pp_action_t a = {op->kind, op->stage, op->mb, 0};
            fprintf(stderr, "  device %d (cuda %d), step %d, action %s on the %s stream", d,
                    x->w.cuda[d], op->pos, action_format(&a, txt, sizeof txt),
                    pp_role_name(op->role));
            for (int j = 0; j < op->n_deps; j++) {
                int dep = plan->deps[op->dep_begin + j];
                if (op_done(x, dep)) continue;
                const pp_op_t *o2 = &plan->ops[dep];
                pp_action_t b = {o2->kind, o2->stage, o2->mb, 0};
                fprintf(stderr, ", waiting for %s on device %d", action_format(&b, txt, sizeof txt),
                        o2->device);
                if (exec_in_group(x) && !world_owns(&x->w, o2->device))
                    fprintf(stderr, " (rank %d)", x->rank_of[o2->device]);
                break;
            }
            fputc('\n', stderr);
            break;
        }
    }
    (void)cudaGetLastError();
    p2p_abort(x->p2p);
}

pp_status_t exec_finish_step(exec_t *x, int step, double deadline)
{
    for (int d = 0; d < x->w.p; d++) {
        if (!world_owns(&x->w, d)) continue;
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[d]));
        pp_status_t st = exec_poll_event(x->w.stop[d], deadline);
        if (st == PP_ERR_TIMEOUT) exec_report_pending(x, step, x->opts.timeout_s);
        if (st != PP_OK) return st;
    }
    return PP_OK;
}

pp_status_t exec_read_step_ms(exec_t *x, double *out)
{
    double worst = 0;
    for (int d = 0; d < x->w.p; d++) {
        float ms;
        if (!world_owns(&x->w, d)) continue;
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[d]));
        PP_CUDA_CHECK(cudaEventElapsedTime(&ms, x->w.ref[d], x->w.stop[d]));
        if (ms > worst) worst = ms;
    }
    *out = worst;
    return PP_OK;
}

pp_status_t exec_read_op_times(exec_t *x, pp_op_time_t *t)
{
    const pp_plan_t *plan = x->plan;
    for (int i = 0; i < plan->n_ops; i++) {
        int src = x->done_op[i];
        int d = plan->ops[src].device;
        float a, b;
        if (!world_owns(&x->w, d)) continue;
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[d]));
        PP_CUDA_CHECK(cudaEventElapsedTime(&a, x->w.ref[d], x->ev_start[src]));
        PP_CUDA_CHECK(cudaEventElapsedTime(&b, x->w.ref[d], x->ev_end[src]));
        t[i].start_ms = a;
        t[i].end_ms = b;
    }
    return PP_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int exec_median_step(const double *step_ms, int steps)
{
    double *sorted = malloc(sizeof(double) * (size_t)steps);
    if (!sorted) return 0; /* any step will do */
    memcpy(sorted, step_ms, sizeof(double) * (size_t)steps);
    qsort(sorted, (size_t)steps, sizeof(double), cmp_double);
    double med = sorted[(steps - 1) / 2];
    free(sorted);
    int pick = 0;
    for (int k = 0; k < steps; k++)
        if (step_ms[k] == med) pick = k;
    return pick;
}

pp_status_t exec_keep_median(pp_timeline_t *tl, const double *step_ms, int steps,
                             const pp_op_time_t *times, int n_ops, int pick, int to_zero)
{
    memcpy(tl->step_ms, step_ms, sizeof(double) * (size_t)steps);
    if (pick < 0 || pick >= steps) pick = exec_median_step(step_ms, steps);
    if (!times) return PP_OK;
    const pp_op_time_t *t = &times[(size_t)pick * n_ops];
    double t0 = to_zero ? INFINITY : 0;
    for (int i = 0; to_zero && i < n_ops; i++)
        t0 = fmin(t0, t[i].start_ms);
    for (int i = 0; i < n_ops; i++) {
        tl->t[i].start_ms = t[i].start_ms - t0;
        tl->t[i].end_ms = t[i].end_ms - t0;
    }
    tl->has_op_times = 1;
    return PP_OK;
}
