/*
 * report_inflight.c — the peak of in-flight micro-batches per device (report_peak_inflight,
 * report.h), for the report's per-device figures.
 *
 * A (stage, micro-batch) pair is in flight on its F's device from the start of its F to the end
 * of its last backward op (to the step's end when it has none). One table per pair (its first
 * F, its last backward op) and one sweep per device over its starts and ends, gathered in plan
 * order, where they come sorted but for pairs that overlap (sorted then): no sort of every op.
 */
#include "report.h"

#include <stdlib.h>

static int double_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* v[0..n) in ascending order; a device's times arrive almost always sorted already. */
static void sort_times(double *v, int n)
{
    for (int i = 1; i < n; i++)
        if (v[i - 1] > v[i]) {
            qsort(v, (size_t)n, sizeof *v, double_cmp);
            return;
        }
}

/* The most pairs in flight over one device's sorted starts s[0..n) and ends e[0..n): a sweep that
 * counts an end before a start at the same instant. */
static int sweep_peak(const double *s, const double *e, int n)
{
    int cur = 0, peak = 0;
    for (int i = 0, j = 0; i < n;) {
        if (j < n && e[j] <= s[i]) {
            cur--, j++;
        } else if (++cur, ++i, cur > peak) {
            peak = cur;
        }
    }
    return peak;
}

/* The key of op k's (stage, mb) pair: (replica * n_stages + stage) * n_mb + mb. */
static size_t pair_key(const pp_plan_t *plan, const pp_op_t *op)
{
    return ((size_t)plan_replica_of(plan, op->device) * (size_t)plan->n_stages +
            (size_t)op->stage) *
               (size_t)plan->n_mb +
           (size_t)op->mb;
}

/* Per (stage, mb) pair of each replica, key pair_key: fwd = its F that starts first, bwd = its
 * backward op that ends last (-1: none). */
static void inflight_pairs(const pp_plan_t *plan, const pp_timeline_t *tl, int *fwd, int *bwd)
{
    const pp_op_time_t *t = tl->t;
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        if (!pp_action_is_compute(op->kind)) continue;
        size_t key = pair_key(plan, op);
        if (op->kind == PP_ACT_F) {
            if (fwd[key] < 0 || t[k].start_ms < t[fwd[key]].start_ms) fwd[key] = k;
        } else if (bwd[key] < 0 || t[k].end_ms > t[bwd[key]].end_ms) {
            bwd[key] = k;
        }
    }
}

/* peak[d] = most (stage, mb) pairs of device d (its F's device) whose F has started and whose last
 * backward op has not ended, at any instant. A pair with no backward op stays in flight to the
 * step's end. Each device's starts and ends are gathered in plan order (sorted by time but for a
 * pair that overlaps another), then swept. */
pp_status_t report_peak_inflight(const pp_plan_t *plan, const pp_timeline_t *tl, int *peak)
{
    int p = plan->n_devices, begin[PP_MAX_DEVICES + 1] = {0}, at_s[PP_MAX_DEVICES],
        at_e[PP_MAX_DEVICES];
    size_t n_pairs = (size_t)plan->n_stages * (size_t)plan->n_mb * (size_t)plan_replicas(plan);
    int *fwd = malloc(sizeof *fwd * (n_pairs > 0 ? n_pairs : 1) * 2), *bwd = fwd + n_pairs;
    double *s = malloc(sizeof *s * (n_pairs > 0 ? n_pairs : 1) * 2), *e = s + n_pairs;
    if (!fwd || !s) {
        free(fwd);
        free(s);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory counting in-flight micro-batches");
    }
    for (size_t i = 0; i < 2 * n_pairs; i++)
        fwd[i] = -1;
    inflight_pairs(plan, tl, fwd, bwd);
    double t_end = 0.0;
    for (int k = 0; k < plan->n_ops; k++)
        if (tl->t[k].end_ms > t_end) t_end = tl->t[k].end_ms;
    for (size_t key = 0; key < n_pairs; key++) /* one start and one end per pair with an F */
        if (fwd[key] >= 0) begin[plan->ops[fwd[key]].device + 1]++;
    for (int d = 0; d < p; d++) {
        begin[d + 1] += begin[d];
        at_s[d] = at_e[d] = begin[d];
    }
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        if (!pp_action_is_compute(op->kind)) continue;
        size_t key = pair_key(plan, op);
        if (fwd[key] < 0) continue;
        int d = plan->ops[fwd[key]].device;
        if (fwd[key] == k) s[at_s[d]++] = tl->t[k].start_ms;
        if (bwd[key] == k) e[at_e[d]++] = tl->t[k].end_ms;
    }
    for (size_t key = 0; key < n_pairs; key++) /* no backward: in flight to the end */
        if (fwd[key] >= 0 && bwd[key] < 0) e[at_e[plan->ops[fwd[key]].device]++] = t_end;
    for (int d = 0; d < p; d++) {
        int n = begin[d + 1] - begin[d];
        sort_times(s + begin[d], n);
        sort_times(e + begin[d], n);
        peak[d] = sweep_peak(s + begin[d], e + begin[d], n);
    }
    free(fwd);
    free(s);
    return PP_OK;
}
