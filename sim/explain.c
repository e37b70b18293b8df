/*
 * explain.c — the idle split, the critical path and the what-if figures of explain.h.
 *
 * Both walks lean on plan.h's promises: every dependency of op k has a smaller index, a RECV sits
 * right after its SEND, and a channel runs its ops in plan order (so "the op before k on its
 * stream" is the previous op of the same channel in plan order: the device's compute, offload or
 * load stream, or its send or recv channel with one peer device, pp_channel_of). A broken promise
 * is a bug in lowering and returns PP_ERR_INTERNAL. Times are never trusted to be consistent (a
 * measured timeline carries clock skew): every cut point is clamped into its stretch, so the
 * reasons of a device always add up to its idle time and none is negative. The what-if figures
 * are explain_what_if.c's.
 */
#include "explain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const pp_idle_reason_info_t pp_idle_reasons[PP_IDLE_COUNT] = {
    [PP_IDLE_WARMUP] = {"warmup", "warm", "before the device's first compute op", "grey", "#c7c7c7",
                        PP_SHOWN_ALWAYS},
    [PP_IDLE_SCHEDULE] = {"schedule", "sched", "waiting for an upstream compute op", "yellow",
                          "#f2cf5b", PP_SHOWN_ALWAYS},
    [PP_IDLE_COMM] = {"comm", "comm", "waiting for a transfer still in flight", "terrible",
                      "#e45756", PP_SHOWN_ALWAYS},
    [PP_IDLE_LAUNCH] = {"launch", "launch", "inputs ready, the op had not started", "olive",
                        "#8c6d31", PP_SHOWN_ALWAYS},
    [PP_IDLE_COOLDOWN] = {"cooldown", "cool", "after the device's last compute op", "white",
                          "#dedede", PP_SHOWN_ALWAYS},
    [PP_IDLE_REDUCE] = {"reduce", "reduce", "waiting for its gradients' reduction", "rail_load",
                        "#9d7cc1", PP_SHOWN_REPLICAS},
    [PP_IDLE_OFFLOAD] = {"offload", "offload", "waiting for a host copy (run.offload)", "rail_load",
                         "#9467bd", PP_SHOWN_COPIES},
};

static double clamp(double x, double lo, double hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* ---- shared checks and per-op facts ---------------------------------------------------------- */

static pp_status_t check_fit(const pp_plan_t *plan, const pp_timeline_t *tl)
{
    if (tl->n_ops != plan->n_ops || !tl->has_op_times)
        PP_FAIL(PP_ERR_INTERNAL, "explain: timeline of %d ops (op times %s) for a plan of %d ops",
                tl->n_ops, tl->has_op_times ? "on" : "off", plan->n_ops);
    if (plan->n_devices < 1 || plan->n_devices > PP_MAX_DEVICES)
        PP_FAIL(PP_ERR_INTERNAL, "explain: plan has %d devices", plan->n_devices);
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        if (op->device < 0 || op->device >= plan->n_devices || op->role >= PP_ROLE_COUNT)
            PP_FAIL(PP_ERR_INTERNAL, "explain: op %d is on device %d, stream %d", k, op->device,
                    (int)op->role);
        if (op->n_deps < 0 || op->dep_begin < 0 || op->dep_begin + op->n_deps > plan->n_deps_total)
            PP_FAIL(PP_ERR_INTERNAL, "explain: op %d has deps [%d, +%d) outside the pool of %d", k,
                    op->dep_begin, op->n_deps, plan->n_deps_total);
        for (int j = 0; j < op->n_deps; j++) {
            int d = plan->deps[op->dep_begin + j];
            if (d < 0 || d >= k)
                PP_FAIL(PP_ERR_INTERNAL,
                        "explain: op %d depends on op %d, which is not earlier in plan order", k,
                        d);
        }
    }
    return PP_OK;
}

/* pred[k] = the op before k on its channel (-1 for the first). A transfer whose pairing is
 * broken counts on its device's channel with device 0. */
static void stream_preds(const pp_plan_t *plan, int *pred)
{
    int last[PP_MAX_CHANNELS]; /* 34 KiB */
    int n_chan = pp_channel_count(plan->n_devices);
    for (int i = 0; i < n_chan; i++)
        last[i] = -1;
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        int peer_ok = pp_role_row(op->role)->per_peer && op->peer >= 0 && op->peer < plan->n_ops;
        int key = pp_channel_of(plan->n_devices, op->device, op->role,
                                peer_ok ? plan->ops[op->peer].device : 0);
        pred[k] = last[key];
        last[key] = k;
    }
}

/* The paired op of a SEND/RECV when the pairing is well formed, else -1. */
static int partner(const pp_plan_t *plan, int k)
{
    int r = plan->ops[k].peer;
    if (!pp_action_is_comm(plan->ops[k].kind) || r < 0 || r >= plan->n_ops ||
        plan->ops[r].peer != k)
        return -1;
    return r;
}

/* ready[k] = the latest end of the compute ops k waits for through communication ops alone: its
 * own end for a compute op; for a SEND/RECV the max over its dependencies (and a RECV's SEND),
 * -INFINITY when there are none. */
static void compute_ready(const pp_plan_t *plan, const pp_timeline_t *tl, double *ready)
{
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        if (pp_action_is_compute(op->kind)) {
            ready[k] = tl->t[k].end_ms;
            continue;
        }
        double r = -INFINITY;
        for (int j = 0; j < op->n_deps; j++)
            r = fmax(r, ready[plan->deps[op->dep_begin + j]]);
        int s = partner(plan, k);
        if (s >= 0 && s < k) r = fmax(r, ready[s]);
        ready[k] = r;
    }
}

/* ---- idle split ------------------------------------------------------------------------------ */

typedef struct split_ctx {
    const pp_plan_t *plan;
    const pp_timeline_t *tl;
    pp_idle_split_t *s;
    const int *pred;
    const double *ready;
    int cap_gaps;
} split_ctx_t;

static void add_gap(split_ctx_t *c, int d, pp_idle_reason_t r, double a, double b, int op)
{
    c->s->by_device[d * PP_IDLE_COUNT + (int)r] += b - a;
    if (b > a && c->s->n_gaps < c->cap_gaps)
        c->s->gaps[c->s->n_gaps++] = (pp_gap_t){d, r, a, b, op};
}

/* An interior stretch [a, b) of device d that compute op k ended: schedule, comm, launch. */
static void split_interior(split_ctx_t *c, int d, double a, double b, int k)
{
    const pp_plan_t *plan = c->plan;
    const pp_op_t *op = &plan->ops[k];
    int p = c->pred[k];
    double u = p >= 0 ? c->tl->t[p].end_ms : -INFINITY, r = u, rc = u;
    for (int j = 0; j < op->n_deps; j++) {
        int dep = plan->deps[op->dep_begin + j];
        u = fmax(u, c->ready[dep]);
        r = fmax(r, c->tl->t[dep].end_ms);
        if (!pp_action_is_copy(plan->ops[dep].kind)) rc = fmax(rc, c->tl->t[dep].end_ms);
    }
    double cu = clamp(u, a, b), cc = fmax(cu, clamp(rc, a, b)), cr = fmax(cc, clamp(r, a, b));
    add_gap(c, d, PP_IDLE_SCHEDULE, a, cu, k);
    add_gap(c, d, PP_IDLE_COMM, cu, cc, k);
    add_gap(c, d, PP_IDLE_OFFLOAD, cc, cr, k);
    add_gap(c, d, PP_IDLE_LAUNCH, cr, b, k);
}

/* A compute op keyed by its start, for sorting. */
typedef struct op_start {
    double start;
    int op;
} op_start_t;

static int op_start_cmp(const void *x, const void *y)
{
    const op_start_t *a = x, *b = y;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    return (a->op > b->op) - (a->op < b->op);
}

/* The latest end of device d's REDUCE ops (-INFINITY without any). */
static double reduce_end(const pp_plan_t *plan, const pp_timeline_t *tl, int d)
{
    double e = -INFINITY;
    if (plan_replicas(plan) <= 1) return e;
    int j0 = plan->prog_ops ? plan->prog_begin[d] : 0;
    int j1 = plan->prog_ops ? plan->prog_begin[d + 1] : plan->n_ops;
    for (int j = j0; j < j1; j++) {
        int k = plan->prog_ops ? plan->prog_ops[j] : j;
        if (plan->ops[k].device == d && plan->ops[k].kind == PP_ACT_REDUCE)
            e = fmax(e, tl->t[k].end_ms);
    }
    return e;
}

/* Device d: its compute ops by start time (ties in plan order), swept once; busy accumulates
 * over the same union pieces, in the same order, as report.c's, so idle_ms matches it exactly. */
static void split_device(split_ctx_t *c, int d, op_start_t *ops, double t0, double t1)
{
    const pp_plan_t *plan = c->plan;
    const pp_op_time_t *t = c->tl->t;
    int n = 0;
    /* The device's own ops through prog_ops (all devices' scans cost p x ops at p = 64);
     * a plan built by hand without them is scanned whole. */
    int j0 = plan->prog_ops ? plan->prog_begin[d] : 0;
    int j1 = plan->prog_ops ? plan->prog_begin[d + 1] : plan->n_ops;
    for (int j = j0; j < j1; j++) {
        int k = plan->prog_ops ? plan->prog_ops[j] : j;
        if (plan->ops[k].device == d && pp_role_row(plan->ops[k].role)->computes)
            ops[n++] = (op_start_t){t[k].start_ms, k};
    }
    int sorted = 1; /* one stream runs them in program order: usually sorted already */
    for (int i = 1; i < n && sorted; i++)
        sorted = op_start_cmp(&ops[i - 1], &ops[i]) <= 0;
    if (!sorted) qsort(ops, (size_t)n, sizeof *ops, op_start_cmp);
    double busy = 0.0, lo = 0.0, hi = t0;
    for (int i = 0; i < n; i++) {
        int k = ops[i].op;
        if (i == 0) {
            add_gap(c, d, PP_IDLE_WARMUP, t0, fmax(t0, t[k].start_ms), k);
            lo = t[k].start_ms;
            hi = t[k].end_ms;
            continue;
        }
        if (t[k].start_ms > hi) {
            busy += hi - lo;
            split_interior(c, d, hi, t[k].start_ms, k);
            lo = t[k].start_ms;
            hi = t[k].end_ms;
        } else if (t[k].end_ms > hi) {
            hi = t[k].end_ms;
        }
    }
    if (n > 0) busy += hi - lo;
    if (n == 0) { /* a device without compute ops waits the whole step */
        add_gap(c, d, PP_IDLE_WARMUP, t0, t1, -1);
    } else {
        double r = clamp(reduce_end(plan, c->tl, d), fmin(hi, t1), t1);
        add_gap(c, d, PP_IDLE_REDUCE, fmin(hi, t1), r, -1);
        add_gap(c, d, PP_IDLE_COOLDOWN, r, t1, -1);
    }
    c->s->idle_ms[d] = (t1 - t0) - busy;
    c->s->busy_ms[d] = busy;
}

/* The split of `tl` (checked by check_fit) with the plan's stream predecessors `pred`. */
static pp_status_t idle_split(pp_idle_split_t *s, const pp_plan_t *plan, const pp_timeline_t *tl,
                              const int *pred)
{
    pp_status_t st = PP_ERR_NOMEM;
    op_start_t *ops = NULL;
    double *ready = NULL;

    memset(s, 0, sizeof *s);
    size_t n = (size_t)(plan->n_ops > 0 ? plan->n_ops : 1), p = (size_t)plan->n_devices;
    ops = malloc(sizeof *ops * n);
    ready = malloc(sizeof *ready * n);
    s->idle_ms = calloc(p, sizeof *s->idle_ms);
    s->busy_ms = calloc(p, sizeof *s->busy_ms);
    s->by_device = calloc(p * PP_IDLE_COUNT, sizeof *s->by_device);
    split_ctx_t c = {plan, tl, s, pred, ready, 3 * (int)n + 2 * (int)p};
    s->gaps = malloc(sizeof *s->gaps * (size_t)c.cap_gaps);
    if (!ops || !ready || !s->idle_ms || !s->busy_ms || !s->by_device || !s->gaps) goto fail;
    s->n_devices = plan->n_devices;

    double t0 = 0.0, t1 = 0.0;
    for (int k = 0; k < plan->n_ops; k++) {
        if (k == 0 || tl->t[k].start_ms < t0) t0 = tl->t[k].start_ms;
        if (k == 0 || tl->t[k].end_ms > t1) t1 = tl->t[k].end_ms;
    }
    s->span_ms = t1 - t0;
    compute_ready(plan, tl, ready);
    for (int d = 0; d < plan->n_devices; d++)
        split_device(&c, d, ops, t0, t1);
    for (int d = 0; d < plan->n_devices; d++)
        for (int r = 0; r < PP_IDLE_COUNT; r++)
            s->total_ms[r] += s->by_device[d * PP_IDLE_COUNT + r];
    free(ops);
    free(ready);
    return PP_OK;

fail:
    free(ops);
    free(ready);
    explain_idle_split_free(s);
    PP_FAIL(st, "out of host memory splitting the idle time of %d ops", plan->n_ops);
}

/* The start of every walk: `tl` fits the plan (check_fit), then pred[] (stream_preds) in *pred
 * (owned). */
static pp_status_t preds_new(const pp_plan_t *plan, const pp_timeline_t *tl, int **pred)
{
    PP_CHECK(check_fit(plan, tl));
    *pred = malloc(sizeof **pred * (size_t)(plan->n_ops > 0 ? plan->n_ops : 1));
    if (!*pred) PP_FAIL(PP_ERR_NOMEM, "out of host memory for the streams of %d ops", plan->n_ops);
    stream_preds(plan, *pred);
    return PP_OK;
}

pp_status_t explain_idle_split(pp_idle_split_t *s, const pp_plan_t *plan, const pp_timeline_t *tl)
{
    int *pred;
    memset(s, 0, sizeof *s);
    PP_CHECK(preds_new(plan, tl, &pred));
    pp_status_t st = idle_split(s, plan, tl, pred);
    free(pred);
    return st;
}

void explain_idle_split_free(pp_idle_split_t *s)
{
    if (!s) return;
    free(s->idle_ms);
    free(s->busy_ms);
    free(s->by_device);
    free(s->gaps);
    memset(s, 0, sizeof *s);
}

/* ---- critical path --------------------------------------------------------------------------- */

/* Considers candidate j for the constraint of the current link: the latest end wins; on a tie a
 * dependency beats a stream predecessor, then the later op. */
static void consider(const pp_timeline_t *tl, int j, pp_path_via_t via, int *best,
                     pp_path_via_t *best_via)
{
    if (j < 0) return;
    if (*best >= 0) {
        double e = tl->t[j].end_ms, be = tl->t[*best].end_ms;
        if (e < be) return;
        if (e == be && (via > *best_via || (via == *best_via && j < *best))) return;
    }
    *best = j;
    *best_via = via;
}

/* The constraints of op k (of both ends of a transfer, its partner left out). */
static void constraints_of(const pp_plan_t *plan, const pp_timeline_t *tl, const int *pred, int k,
                           int *best, pp_path_via_t *via)
{
    int side[2] = {k, partner(plan, k)};
    *best = -1;
    *via = PP_VIA_START;
    for (int i = 0; i < 2; i++) {
        int x = side[i];
        if (x < 0) continue;
        const pp_op_t *op = &plan->ops[x];
        for (int j = 0; j < op->n_deps; j++) {
            int d = plan->deps[op->dep_begin + j];
            if (d != side[0] && d != side[1]) consider(tl, d, PP_VIA_DEP, best, via);
        }
        consider(tl, pred[x], PP_VIA_STREAM, best, via);
    }
}

/* The critical path of `tl` (checked by check_fit) with the plan's stream predecessors. */
static pp_status_t critical_path(pp_critical_path_t *cp, const pp_plan_t *plan,
                                 const pp_timeline_t *tl, const int *pred)
{
    pp_status_t st = PP_ERR_NOMEM;

    memset(cp, 0, sizeof *cp);
    if (plan->n_ops == 0) return PP_OK;
    cp->links = malloc(sizeof *cp->links * (size_t)plan->n_ops);
    if (!cp->links) goto fail;

    int last = 0;
    double t0 = tl->t[0].start_ms;
    for (int k = 0; k < plan->n_ops; k++) {
        if (tl->t[k].end_ms >= tl->t[last].end_ms) last = k;
        t0 = fmin(t0, tl->t[k].start_ms);
    }
    /* Walk back; every step goes to a smaller index, so the walk ends. */
    for (int k = last; k >= 0;) {
        int next;
        pp_path_via_t via;
        constraints_of(plan, tl, pred, k, &next, &via);
        if (next >= k) {
            st = PP_ERR_INTERNAL;
            fprintf(stderr, "%s:%d: explain: op %d waits for the later op %d\n", __FILE__, __LINE__,
                    k, next);
            goto fail;
        }
        cp->links[cp->n++] = (pp_path_link_t){.op = k, .via = via};
        k = next;
    }
    /* First-to-last order (each link's via already names its tie to the one before). */
    for (int i = 0, j = cp->n - 1; i < j; i++, j--) {
        pp_path_link_t x = cp->links[i];
        cp->links[i] = cp->links[j];
        cp->links[j] = x;
    }
    double prev_end = t0;
    for (int i = 0; i < cp->n; i++) {
        int k = cp->links[i].op;
        const pp_op_t *op = &plan->ops[k];
        cp->links[i].device = op->device;
        cp->links[i].role = op->role;
        cp->links[i].action = (pp_action_t){op->kind, op->stage, op->mb, 0};
        cp->links[i].start_ms = tl->t[k].start_ms;
        cp->links[i].end_ms = tl->t[k].end_ms;
        double dur = tl->t[k].end_ms - tl->t[k].start_ms;
        cp->links[i].wait_ms = tl->t[k].start_ms - prev_end;
        cp->wait_ms += cp->links[i].wait_ms;
        if (pp_action_is_compute(plan->ops[k].kind))
            cp->compute_ms += dur;
        else
            cp->comm_ms += dur;
        prev_end = tl->t[k].end_ms;
    }
    cp->span_ms = prev_end - t0;
    return PP_OK;

fail:
    explain_critical_path_free(cp);
    if (st == PP_ERR_NOMEM)
        PP_FAIL(st, "out of host memory for the critical path of %d ops", plan->n_ops);
    return st;
}

pp_status_t explain_critical_path(pp_critical_path_t *cp, const pp_plan_t *plan,
                                  const pp_timeline_t *tl)
{
    int *pred;
    memset(cp, 0, sizeof *cp);
    PP_CHECK(preds_new(plan, tl, &pred));
    pp_status_t st = critical_path(cp, plan, tl, pred);
    free(pred);
    return st;
}

void explain_critical_path_free(pp_critical_path_t *cp)
{
    if (!cp) return;
    free(cp->links);
    memset(cp, 0, sizeof *cp);
}

/* ---- all of it ------------------------------------------------------------------------------- */

/* *s = a copy of a. */
static pp_status_t split_copy(pp_idle_split_t *s, const pp_idle_split_t *a)
{
    size_t p = (size_t)a->n_devices, g = (size_t)(a->n_gaps > 0 ? a->n_gaps : 1);
    *s = *a;
    s->idle_ms = malloc(sizeof *s->idle_ms * p);
    s->busy_ms = malloc(sizeof *s->busy_ms * p);
    s->by_device = malloc(sizeof *s->by_device * p * PP_IDLE_COUNT);
    s->gaps = malloc(sizeof *s->gaps * g);
    if (!s->idle_ms || !s->busy_ms || !s->by_device || !s->gaps) {
        explain_idle_split_free(s);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory copying an idle split of %d gaps", a->n_gaps);
    }
    memcpy(s->idle_ms, a->idle_ms, sizeof *s->idle_ms * p);
    memcpy(s->busy_ms, a->busy_ms, sizeof *s->busy_ms * p);
    memcpy(s->by_device, a->by_device, sizeof *s->by_device * p * PP_IDLE_COUNT);
    memcpy(s->gaps, a->gaps, sizeof *s->gaps * (size_t)a->n_gaps);
    return PP_OK;
}

pp_status_t explain_build(pp_explain_t *ex, const pp_plan_t *plan, const pp_timeline_t *tl,
                          const pp_timeline_t *sim, const pp_cost_model_t *cm)
{
    pp_status_t st;
    int *pred = NULL;
    memset(ex, 0, sizeof *ex);
    ex->replicas = plan_replicas(plan);
    ex->copies = plan->offload != 0;
    if (cm) {
        PP_CHECK_GOTO(explain_what_if(&ex->what_if, plan, cm), st, fail);
        ex->have_what_if = 1;
    }
    if (!tl->has_op_times) return PP_OK;
    /* One check and one set of stream predecessors for every walk below. */
    PP_CHECK_GOTO(preds_new(plan, tl, &pred), st, fail);
    PP_CHECK_GOTO(idle_split(&ex->split, plan, tl, pred), st, fail);
    PP_CHECK_GOTO(critical_path(&ex->path, plan, tl, pred), st, fail);
    if (sim == tl) { /* a simulated run: the same timeline, split once */
        PP_CHECK_GOTO(split_copy(&ex->split_sim, &ex->split), st, fail);
    } else if (sim && sim->has_op_times) {
        PP_CHECK_GOTO(check_fit(plan, sim), st, fail);
        PP_CHECK_GOTO(idle_split(&ex->split_sim, plan, sim, pred), st, fail);
    }
    free(pred);
    ex->known = 1;
    return PP_OK;

fail:
    free(pred);
    explain_free(ex);
    return st;
}

void explain_free(pp_explain_t *ex)
{
    if (!ex) return;
    explain_idle_split_free(&ex->split);
    explain_idle_split_free(&ex->split_sim);
    explain_critical_path_free(&ex->path);
    memset(ex, 0, sizeof *ex);
}
