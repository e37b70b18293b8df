/*
 * report_reduce.c — the report's part on the gradient reductions across data-parallel replicas
 * (pipeline.data_parallel): each stage's reduction time in replica 0 (the other replicas' REDUCE
 * ops start and end with it), how much of it the pipeline hid (ran before the step's last compute
 * op ended, on any device) and how much its own device computed through, and the table's lines on
 * them. Nothing here with one replica, so a report of one pipeline reads as before.
 */
#include "report.h"
#include "report_io.h"

#include <math.h>
#include <stdlib.h>

/* A time interval, for the union of a device's compute ops. */
typedef struct span {
    double a, b;
} span_t;

static int span_cmp(const void *x, const void *y)
{
    const span_t *p = x, *q = y;
    return (p->a > q->a) - (p->a < q->a);
}

/* The part of [a, b) inside the union of device dev's compute ops; buf holds [n_ops] spans. */
static double device_overlap(const pp_plan_t *plan, const pp_timeline_t *tl, int dev, double a,
                             double b, span_t *buf)
{
    int n = 0;
    for (int j = plan->prog_begin[dev]; j < plan->prog_begin[dev + 1]; j++) {
        int k = plan->prog_ops[j];
        if (!pp_role_row(plan->ops[k].role)->computes) continue;
        double x = fmax(a, tl->t[k].start_ms), y = fmin(b, tl->t[k].end_ms);
        if (y > x) buf[n++] = (span_t){x, y};
    }
    qsort(buf, (size_t)n, sizeof *buf, span_cmp);
    double sum = 0.0, lo = 0.0, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (buf[i].a > hi) {
            if (hi > lo) sum += hi - lo;
            lo = buf[i].a, hi = buf[i].b;
        } else if (buf[i].b > hi) {
            hi = buf[i].b;
        }
    }
    return hi > lo ? sum + hi - lo : sum;
}

pp_status_t report_build_reduce(pp_report_t *r, const pp_plan_t *plan, const pp_timeline_t *tl)
{
    if (r->replicas <= 1 || !tl->has_op_times) return PP_OK;
    r->reduce = calloc((size_t)plan->n_stages, sizeof *r->reduce);
    span_t *buf = malloc(sizeof *buf * (size_t)(plan->n_ops > 0 ? plan->n_ops : 1));
    if (!r->reduce || !buf) {
        free(buf);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory for a report's reductions");
    }
    double t_compute = -INFINITY;
    for (int k = 0; k < plan->n_ops; k++)
        if (pp_role_row(plan->ops[k].role)->computes) t_compute = fmax(t_compute, tl->t[k].end_ms);
    for (int s = 0; s < plan->n_stages; s++)
        r->reduce[s].stage = s;
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        if (op->kind != PP_ACT_REDUCE || plan_replica_of(plan, op->device) != 0) continue;
        pp_report_reduce_t *x = &r->reduce[op->stage];
        double a = tl->t[k].start_ms, b = tl->t[k].end_ms;
        x->buckets++;
        x->bytes += (double)op->bytes;
        x->ms += b - a;
        x->hidden_ms += fmax(0.0, fmin(b, t_compute) - a);
        x->device_hidden_ms += device_overlap(plan, tl, op->device, a, b, buf);
    }
    free(buf);
    return PP_OK;
}

void report_table_reduce_setup(pp_out_t *o, const pp_report_t *r, const pp_job_t *job)
{
    const pp_job_pipeline_t *pl = &job->pipeline;
    char bucket[32];
    out_cell(bucket, sizeof bucket, pl->reduce_bucket_mb > 0, "buckets of %d MiB",
             pl->reduce_bucket_mb);
    out_printf(o,
               "# reductions: each stage's fp32 gradients over its %d replicas, %s, %s, ring "
               "all-reduce%s on nvlink-nccl within a host (%d GPUs), ib between hosts\n",
               r->replicas, pl->reduce_bucket_mb > 0 ? bucket : "one bucket a stage",
               pl->reduce_align == PP_REDUCE_ALIGNED ? "aligned" : "as ready",
               job->run.optimizer_sharding == PP_SHARD_ZERO1
                   ? " as reduce-scatter + all-gather (zero1: optimizer state sharded)"
                   : "",
               PP_HOST_GPUS);
}

void report_table_reduce(pp_out_t *o, const pp_report_t *r)
{
    if (!r->reduce) return;
    out_printf(o, "#\n# %-18s %8s %10s %10s %10s %10s %10s\n", "reduce per stage", "buckets", "MiB",
               "ms", "hidden", "exposed", "on-device");
    for (int s = 0; s < r->stages; s++) {
        const pp_report_reduce_t *x = &r->reduce[s];
        char label[32];
        snprintf(label, sizeof label, "stage %d", x->stage);
        out_printf(o, "# %-18s %8d %10.1f %10.3f %10.3f %10.3f %10.3f\n", label, x->buckets,
                   x->bytes / (1024.0 * 1024.0), x->ms, x->hidden_ms, x->ms - x->hidden_ms,
                   x->device_hidden_ms);
    }
    out_printf(o, "# (hidden: while any device still computed; on-device: while its own device "
                  "computed)\n");
}
