/*
 * simulate.c — discrete-event simulation of a plan under a cost model.
 *
 * One pass over plan->ops in plan order is enough: plan.h promises that every dependency of op i
 * has a smaller index, that a RECV sits right after its SEND, and that a channel runs its ops in
 * plan order, so when op i is reached every time it depends on is already known. Those promises
 * are checked as we go; a broken one is a bug in lowering and returns PP_ERR_INTERNAL.
 * A SEND and its RECV are one transfer: both start when both sides are ready (each side's channel
 * free and its own dependencies done, the pair's mutual dependency left out) and end `send` later,
 * or at once on a LOCAL link. Every other op (compute, and the host copies of run.offload on the
 * offload and load streams) takes the time the cost table by kind gives it; a copy moves its bytes
 * at the host link's bandwidth, once its GPU's link in its direction is free (link_of: the
 * devices on one GPU share it). The d REDUCE ops of one stage and bucket (adjacent in plan order,
 * one per data-parallel replica) are one collective: all start at the latest of their ready
 * times and take the ring all-reduce of their bucket (cost_model_reduce); never under a part.
 * A device's compute stream is busy from 0 with its stages' heads, and its stages' tails follow
 * its last op of any stream; the step runs from 0 to the last end of an op or a tail.
 * The caller owns `tl`; the cost model owns its arrays.
 * simulate_makespans runs several cost models in the same pass ("lanes"): each lane does exactly
 * the arithmetic simulate_plan does, so its makespan is the same to the bit. Under a part
 * (simulate_plan_part: one process of several, one lane) only the owned devices' ops are timed,
 * and a transfer across processes exchanges its two ends' ready times.
 */
#include "simulate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

pp_status_t cost_model_uniform(pp_cost_model_t *cm, int n_stages, const pp_job_cost_t *c)
{
    memset(cm, 0, sizeof *cm);
    if (n_stages < 1 || n_stages > PP_MAX_STAGES)
        PP_FAIL(PP_ERR_INTERNAL, "cost_model_uniform: %d stages", n_stages);
    if (!(c->forward >= 0) || !(c->backward_input >= 0) || !(c->backward_weight >= 0) ||
        !(c->send >= 0) || !(c->host_link_gbps >= 0) ||
        !isfinite(c->forward + c->backward_input + c->backward_weight + c->send +
                  c->host_link_gbps))
        PP_FAIL(PP_ERR_INTERNAL,
                "cost_model_uniform: costs must be finite and >= 0 (forward %g, backward_input "
                "%g, backward_weight %g, send %g)",
                c->forward, c->backward_input, c->backward_weight, c->send);
    cm->f = malloc(sizeof(double) * (size_t)n_stages);
    cm->b = malloc(sizeof(double) * (size_t)n_stages);
    cm->i = malloc(sizeof(double) * (size_t)n_stages);
    cm->w = malloc(sizeof(double) * (size_t)n_stages);
    cm->head = calloc((size_t)n_stages, sizeof(double)); /* `cost:` prices neither */
    cm->tail = calloc((size_t)n_stages, sizeof(double));
    if (!cm->f || !cm->b || !cm->i || !cm->w || !cm->head || !cm->tail) goto fail;
    cm->n_stages = n_stages;
    for (int s = 0; s < n_stages; s++) {
        cm->f[s] = c->forward;
        cm->i[s] = c->backward_input;
        cm->w[s] = c->backward_weight;
        cm->b[s] = c->backward_input + c->backward_weight;
    }
    cm->send = c->send;
    cm->host_link_gbps = c->host_link_gbps;
    cm->overlap = c->overlap >= 0 && c->overlap <= 1 ? c->overlap : 0;
    cm->reduce_ranks = 1;
    return PP_OK;

fail:
    cost_model_free(cm);
    PP_FAIL(PP_ERR_NOMEM, "out of host memory for a cost model of %d stages", n_stages);
}

void cost_model_free(pp_cost_model_t *cm)
{
    if (!cm) return;
    free(cm->f);
    free(cm->b);
    free(cm->i);
    free(cm->w);
    free(cm->head);
    free(cm->tail);
    memset(cm, 0, sizeof *cm);
}

/* The duration of an op that runs alone on its stream, by kind (transfers are timed in pairs). */
typedef double (*op_cost_fn)(const pp_cost_model_t *cm, const pp_op_t *op);

static double cost_f(const pp_cost_model_t *cm, const pp_op_t *op)
{
    return cm->f[op->stage];
}
static double cost_b(const pp_cost_model_t *cm, const pp_op_t *op)
{
    return cm->b[op->stage];
}
static double cost_i(const pp_cost_model_t *cm, const pp_op_t *op)
{
    return cm->i[op->stage];
}
static double cost_w(const pp_cost_model_t *cm, const pp_op_t *op)
{
    return cm->w[op->stage];
}
/* A copy to or from pinned host memory: its bytes over the host link (GB/s = 1e6 bytes per ms);
 * free when the model has no link figure. */
static double cost_copy(const pp_cost_model_t *cm, const pp_op_t *op)
{
    return cm->host_link_gbps > 0 ? (double)op->bytes / (cm->host_link_gbps * 1e6) : 0.0;
}

/* A gradient bucket's reduction across the replicas (the group's ops all take it; sim_reduce). */
static double cost_reduce(const pp_cost_model_t *cm, const pp_op_t *op)
{
    return cost_model_reduce(cm, (double)op->bytes, cm->reduce_ranks, op->host > 1);
}

static const op_cost_fn op_cost[PP_ACT_COUNT] = {
    [PP_ACT_F] = cost_f,           [PP_ACT_B] = cost_b,          [PP_ACT_I] = cost_i,
    [PP_ACT_W] = cost_w,           [PP_ACT_OFFLOAD] = cost_copy, [PP_ACT_RELOAD] = cost_copy,
    [PP_ACT_REDUCE] = cost_reduce,
};

/* Checks the fields of op `k` that the simulation indexes with (n_stages: the fewest stages of
 * the cost models). */
static pp_status_t check_op(const pp_plan_t *plan, int n_stages, int k)
{
    const pp_op_t *op = &plan->ops[k];
    if (op->device < 0 || op->device >= plan->n_devices)
        PP_FAIL(PP_ERR_INTERNAL, "simulate: op %d has device %d (plan has %d)", k, op->device,
                plan->n_devices);
    if (op->role >= PP_ROLE_COUNT) /* an 8-bit field: never negative */
        PP_FAIL(PP_ERR_INTERNAL, "simulate: op %d has stream role %d", k, (int)op->role);
    if (op->kind >= PP_ACT_COUNT)
        PP_FAIL(PP_ERR_INTERNAL, "simulate: op %d has action kind %d", k, (int)op->kind);
    if (op->stage < 0 || op->stage >= n_stages)
        PP_FAIL(PP_ERR_INTERNAL, "simulate: op %d is on stage %d, the cost model has %d stages", k,
                op->stage, n_stages);
    if (op->n_deps < 0 || op->dep_begin < 0 || op->dep_begin + op->n_deps > plan->n_deps_total)
        PP_FAIL(PP_ERR_INTERNAL, "simulate: op %d has deps [%d, +%d) outside the pool of %d", k,
                op->dep_begin, op->n_deps, plan->n_deps_total);
    return PP_OK;
}

/* ---- one pass, several cost models ("lanes") ------------------------------------------------- */

/* The walk over the plan (channels, dependencies, pairs, the checks) is the same for every cost
 * model, and reading the times of an op's dependencies is most of its cost, so the what-if
 * models run side by side: lane l's time of op k sits next to the other lanes'. */
#define SIM_MAX_LANES 8

typedef struct lanes {
    const pp_plan_t *plan;
    int n;                            /* lanes */
    const pp_cost_model_t *const *cm; /* [n] */
    pp_op_time_t *t;                  /* lane 0's start and end of every op (a timeline), or NULL */
    int off;                          /* 1 with t, else 0: the lanes from off on keep ends only */
    double *end;                      /* [n_ops * (n - off)]: op k's end in lane l >= off */
    double *stream_free;              /* [n_chan * n] when each channel is free again */
    int last_compute[PP_MAX_DEVICES]; /* the device's latest op on its compute stream, -1 none */
    double *last_start;               /* [n_devices * n] its start */
    double *link_free;                /* [PP_MAX_DEVICES * 2 * n] when host link h (link_of)
                                         is free again each way (offload, load), lane by lane */
    double *dev_end;                  /* [n_devices * n] the latest end of the device's ops so far
                                         (-INFINITY: none), lane by lane */
    const pp_sim_part_t *part;        /* NULL, or (one lane) the devices this process owns */
    double *keep;                     /* part: [n_ops] ready times sent to other processes */
    double t1[SIM_MAX_LANES];         /* latest end of each lane */
} lanes_t;

static double *end_at(const lanes_t *S, int k, int l)
{
    return &S->end[(size_t)k * (size_t)(S->n - S->off) + (size_t)(l - S->off)];
}

static double end_of(const lanes_t *S, int k, int l)
{
    return l < S->off ? S->t[k].end_ms : *end_at(S, k, l);
}

/* Op k (on channel `chan`) runs from start to end in lane l. */
static void set_times(lanes_t *S, int k, int chan, int l, double start, double end)
{
    const pp_op_t *op = &S->plan->ops[k];
    if (l < S->off)
        S->t[k] = (pp_op_time_t){start, end};
    else
        *end_at(S, k, l) = end;
    S->stream_free[(size_t)chan * (size_t)S->n + (size_t)l] = end;
    double *dev_end = &S->dev_end[(size_t)op->device * (size_t)S->n + (size_t)l];
    if (end > *dev_end) *dev_end = end;
    if (end > S->t1[l]) S->t1[l] = end;
    if (op->role == PP_ROLE_COMPUTE) {
        S->last_compute[op->device] = k;
        S->last_start[(size_t)op->device * (size_t)S->n + (size_t)l] = start;
    }
}

/* Time op `k` may start in each lane as far as its own stream and dependencies go, leaving out a
 * dependency on op `skip` (its transfer partner). Fails when a dependency is not earlier in plan
 * order. */
static pp_status_t ready_time(const lanes_t *S, int k, int chan, int skip, double *ready)
{
    const pp_plan_t *plan = S->plan;
    const pp_op_t *op = &plan->ops[k];
    const double *sf = &S->stream_free[(size_t)chan * (size_t)S->n];
    for (int l = 0; l < S->n; l++)
        ready[l] = sf[l];
    for (int j = 0; j < op->n_deps; j++) {
        int d = plan->deps[op->dep_begin + j];
        if (d == skip) continue;
        if (d < 0 || d >= k)
            PP_FAIL(PP_ERR_INTERNAL,
                    "simulate: op %d depends on op %d, which is not earlier in plan order", k, d);
        for (int l = 0; l < S->n; l++) {
            double e = end_of(S, d, l);
            if (e > ready[l]) ready[l] = e;
        }
    }
    return PP_OK;
}

/* The backward half k of an overlapped pair starts no earlier than (1 - overlap) into its forward
 * half: the compute op before it in its device's program, earlier in plan order (lower.c), so
 * the latest op of the device's compute stream when k is reached. */
static pp_status_t pair_start(const lanes_t *S, int k, double *ready)
{
    const pp_plan_t *plan = S->plan;
    const pp_op_t *op = &plan->ops[k];
    const int f = plan_pair_forward(plan, k);
    if (f < 0)
        PP_FAIL(PP_ERR_INTERNAL, "simulate: op %d on the overlap stream has no forward half", k);
    if (f >= k || S->last_compute[op->device] != f)
        PP_FAIL(PP_ERR_INTERNAL, "simulate: op %d comes before the forward half %d of its pair", k,
                f);
    for (int l = 0; l < S->n; l++) {
        double fs = S->last_start[(size_t)op->device * (size_t)S->n + (size_t)l];
        double at = fs + (1.0 - S->cm[l]->overlap) * (end_of(S, f, l) - fs);
        if (at > ready[l]) ready[l] = at;
    }
    return PP_OK;
}

/* 1 when this process simulates device d (always without a part). */
static int owns(const pp_sim_part_t *part, int d)
{
    return !part || part->rank_of[d] == part->group->rank;
}

/* Under a part, a dependency on a device of another process other than the transfer partner
 * cannot be known here: lowering never makes one (plan.h), so it is a bug. */
static pp_status_t check_owned_deps(const pp_plan_t *plan, const pp_sim_part_t *part, int k,
                                    int skip)
{
    const pp_op_t *op = &plan->ops[k];
    for (int j = 0; part && j < op->n_deps; j++) {
        int d = plan->deps[op->dep_begin + j];
        if (d != skip && d >= 0 && d < plan->n_ops && !owns(part, plan->ops[d].device))
            PP_FAIL(PP_ERR_INTERNAL, "simulate: op %d depends on op %d of another process", k, d);
    }
    return PP_OK;
}

/* The pending end of a transfer across processes: which op waits for which rank. */
static void print_pending(const pp_plan_t *plan, const pp_sim_part_t *part, int mine, int theirs,
                          double timeout_s)
{
    char a[32], b[32];
    const pp_op_t *m = &plan->ops[mine], *t = &plan->ops[theirs];
    pp_action_t am = {m->kind, m->stage, m->mb, 0}, at = {t->kind, t->stage, t->mb, 0};
    fprintf(stderr,
            "ppsched: rank %d: op %d (device %d, step %d, action %s) still pending after %.3g s: "
            "waiting for rank %d to post its end, op %d (device %d, step %d, action %s)\n",
            part->group->rank, mine, m->device, m->pos, action_format(&am, a, sizeof a), timeout_s,
            part->rank_of[t->device], theirs, t->device, t->pos, action_format(&at, b, sizeof b));
}

/* The ready time of the other end of transfer (mine, theirs), from the process that owns it; ours
 * goes to it first (from `keep`, which lives until the group's flush). */
static pp_status_t meet(const pp_plan_t *plan, const pp_sim_part_t *part, int mine, int theirs,
                        double *keep, double *out)
{
    pp_group_t *g = part->group;
    const int peer = part->rank_of[plan->ops[theirs].device];
    const int send = plan->ops[mine].role == PP_ROLE_SEND ? mine : theirs;
    const int tag = send & 0x7fff; /* both sides meet in plan order: the tag only guards */
    if (mine != part->drop_send) PP_CHECK(g->ops->post_send(g, keep, peer, tag));
    pp_status_t st = g->ops->recv(g, out, peer, tag, part->deadline);
    if (st == PP_ERR_TIMEOUT) print_pending(plan, part, mine, theirs, part->timeout_s);
    return st;
}

/* The host link a copy of op `op` takes in lane l: its device's GPU's, its direction; NULL for
 * an op that is not a copy. */
static double *link_of(const lanes_t *S, const pp_op_t *op, int l)
{
    if (!pp_action_is_copy(op->kind)) return NULL;
    int h = S->cm[l]->link_of[op->device];
    h = h >= 0 && h < PP_MAX_DEVICES ? h : 0;
    size_t dir = op->kind == PP_ACT_RELOAD;
    return &S->link_free[((size_t)h * 2 + dir) * (size_t)S->n + (size_t)l];
}

/* An op that runs alone on its stream: compute, or a host copy (which also waits for its host's
 * link in its direction). */
static pp_status_t sim_alone(lanes_t *S, int k)
{
    const pp_op_t *op = &S->plan->ops[k];
    double ready[SIM_MAX_LANES];
    int chan = pp_plan_channel(S->plan, k);
    PP_CHECK(ready_time(S, k, chan, -1, ready));
    if (op->role == PP_ROLE_OVERLAP) PP_CHECK(pair_start(S, k, ready));
    for (int l = 0; l < S->n; l++) {
        double *link = link_of(S, op, l), end;
        if (link && *link > ready[l]) ready[l] = *link;
        ready[l] += S->cm[l]->gap_ms;
        end = ready[l] + op_cost[op->kind](S->cm[l], op);
        set_times(S, k, chan, l, ready[l], end);
        if (link) *link = end;
    }
    return PP_OK;
}

/* A SEND at k and its RECV right after it: one transfer, both ends starting when both are ready,
 * `send` later (at once on a link within a device). Under a part only the owned ends are timed;
 * an end on another process sends its ready time and receives the other's. */
static pp_status_t sim_pair(lanes_t *S, int k, int n_stages)
{
    const pp_plan_t *plan = S->plan;
    const pp_op_t *op = &plan->ops[k];
    const pp_sim_part_t *part = S->part;
    int r = k + 1;
    if (op->peer != r || r >= plan->n_ops || plan->ops[r].peer != k ||
        (plan->ops[r].kind != PP_ACT_RECV_F && plan->ops[r].kind != PP_ACT_RECV_B))
        PP_FAIL(PP_ERR_INTERNAL, "simulate: SEND op %d (peer %d) is not followed by its RECV", k,
                op->peer);
    PP_CHECK(check_op(plan, n_stages, r));
    double ready_s[SIM_MAX_LANES] = {0}, ready_r[SIM_MAX_LANES] = {0};
    int chan_s = pp_plan_channel(plan, k), chan_r = pp_plan_channel(plan, r);
    const int own_s = owns(part, op->device), own_r = owns(part, plan->ops[r].device);
    if (own_s) PP_CHECK(check_owned_deps(plan, part, k, r));
    if (own_s) PP_CHECK(ready_time(S, k, chan_s, r, ready_s));
    if (own_r) PP_CHECK(check_owned_deps(plan, part, r, k));
    if (own_r) PP_CHECK(ready_time(S, r, chan_r, k, ready_r));
    if (!own_s && !own_r) return PP_OK;
    if (own_s && !own_r) { /* one lane under a part (sim_run) */
        S->keep[k] = ready_s[0];
        PP_CHECK(meet(plan, part, k, r, &S->keep[k], &ready_r[0]));
    } else if (own_r && !own_s) {
        S->keep[r] = ready_r[0];
        PP_CHECK(meet(plan, part, r, k, &S->keep[r], &ready_s[0]));
    }
    int crosses = transport_row(op->link)->crosses_devices;
    for (int l = 0; l < S->n; l++) {
        double start = (ready_s[l] > ready_r[l] ? ready_s[l] : ready_r[l]) +
                       (crosses ? S->cm[l]->gap_ms : 0.0);
        double end = start + (crosses ? cost_model_send(S->cm[l], op->link) : 0.0);
        if (own_s) set_times(S, k, chan_s, l, start, end);
        if (own_r) set_times(S, r, chan_r, l, start, end);
    }
    return PP_OK;
}

/* Under a part (one lane): the latest ready time of group k's replicas, *start holding this
 * process's; it goes to every other process owning one of them and theirs come back (each
 * process walks the groups in plan order, so one message per pair and group). */
static pp_status_t reduce_meet(lanes_t *S, int k, int g, double *start)
{
    const pp_sim_part_t *part = S->part;
    pp_group_t *grp = part->group;
    const int tag = k & 0x7fff;
    int peers[PP_MAX_DEVICES], n = 0;
    for (int j = k; j < k + g; j++) {
        int rank = part->rank_of[S->plan->ops[j].device], seen = rank == grp->rank;
        for (int q = 0; q < n && !seen; q++)
            seen = peers[q] == rank;
        if (!seen) peers[n++] = rank;
    }
    S->keep[k] = *start;
    for (int q = 0; q < n; q++)
        PP_CHECK(grp->ops->post_send(grp, &S->keep[k], peers[q], tag));
    for (int q = 0; q < n; q++) {
        double theirs;
        pp_status_t st = grp->ops->recv(grp, &theirs, peers[q], tag, part->deadline);
        if (st == PP_ERR_TIMEOUT)
            fprintf(stderr,
                    "ppsched: rank %d: the reduction of stage %d bucket %d still waits after "
                    "%.3g s for rank %d's replicas\n",
                    grp->rank, S->plan->ops[k].stage, S->plan->ops[k].mb, part->timeout_s,
                    peers[q]);
        PP_CHECK(st);
        *start = fmax(*start, theirs);
    }
    return PP_OK;
}

/* The d REDUCE ops of one stage and bucket, from k on (their peer is k): one collective, every
 * replica starting at the latest ready time and all ending together (under a part, the other
 * processes' replicas' ready times come from them). Returns the group's size. */
static pp_status_t sim_reduce(lanes_t *S, int k, int n_stages, int *n_group)
{
    const pp_plan_t *plan = S->plan;
    const int g = plan_replicas(plan);
    double ready[SIM_MAX_LANES], start[SIM_MAX_LANES];
    int mine = 0; /* this process owns one of the group's replicas */
    *n_group = g;
    if (k + g > plan->n_ops) PP_FAIL(PP_ERR_INTERNAL, "simulate: REDUCE op %d has no group", k);
    for (int l = 0; l < S->n; l++) {
        start[l] = -INFINITY;
        if (S->cm[l]->reduce_ranks > 1 && S->cm[l]->reduce_ranks != g)
            PP_FAIL(PP_ERR_INTERNAL, "simulate: a cost model of %d replicas for a plan of %d",
                    S->cm[l]->reduce_ranks, g);
    }
    for (int j = k; j < k + g; j++) {
        const pp_op_t *o = &plan->ops[j];
        PP_CHECK(check_op(plan, n_stages, j));
        if (o->kind != PP_ACT_REDUCE || o->peer != k || o->stage != plan->ops[k].stage ||
            o->mb != plan->ops[k].mb)
            PP_FAIL(PP_ERR_INTERNAL, "simulate: REDUCE op %d is not in the group of op %d", j, k);
        if (!owns(S->part, o->device)) continue;
        mine = 1;
        PP_CHECK(check_owned_deps(plan, S->part, j, -1));
        PP_CHECK(ready_time(S, j, pp_plan_channel(plan, j), -1, ready));
        for (int l = 0; l < S->n; l++)
            start[l] = fmax(start[l], ready[l]);
    }
    if (!mine) return PP_OK; /* another process's group */
    if (S->part) PP_CHECK(reduce_meet(S, k, g, &start[0]));
    for (int j = k; j < k + g; j++)
        for (int l = 0; owns(S->part, plan->ops[j].device) && l < S->n; l++)
            set_times(S, j, pp_plan_channel(plan, j), l, start[l],
                      start[l] + op_cost[PP_ACT_REDUCE](S->cm[l], &plan->ops[j]));
    return PP_OK;
}

/* out[d] = the sum of `per_stage` over the stages device d holds in any replica (0 for a plan
 * without its stages' devices, which only a plan built by hand lacks). */
static void device_sums(const pp_plan_t *plan, const double *per_stage, double *out)
{
    for (int d = 0; d < plan->n_devices; d++)
        out[d] = 0.0;
    for (int r = 0; plan->stage_device && r < plan_replicas(plan); r++)
        for (int s = 0; s < plan->n_stages; s++) {
            int d = plan_stage_device(plan, s, r);
            if (d >= 0 && d < plan->n_devices) out[d] += per_stage[s];
        }
}

/* Each device's compute stream starts busy with its stages' heads: free at their sum, in every
 * lane. */
static void device_heads(lanes_t *S)
{
    double head[PP_MAX_DEVICES];
    for (int l = 0; l < S->n; l++) {
        device_sums(S->plan, S->cm[l]->head, head);
        for (int d = 0; d < S->plan->n_devices; d++) {
            int chan = pp_channel_of(S->plan->n_devices, d, PP_ROLE_COMPUTE, 0);
            S->stream_free[(size_t)chan * (size_t)S->n + (size_t)l] = head[d];
        }
    }
}

/* After the walk: each device with ops (of this process, under a part) runs its stages' tails
 * once its last op has ended; the lane's last end takes them in. */
static void device_tails(lanes_t *S)
{
    double tail[PP_MAX_DEVICES];
    for (int l = 0; l < S->n; l++) {
        device_sums(S->plan, S->cm[l]->tail, tail);
        for (int d = 0; d < S->plan->n_devices; d++) {
            double end = S->dev_end[(size_t)d * (size_t)S->n + (size_t)l];
            if (end > -INFINITY && end + tail[d] > S->t1[l]) S->t1[l] = end + tail[d];
        }
    }
}

/* Every op of the plan in plan order, in every lane. */
static pp_status_t sim_walk(lanes_t *S)
{
    const pp_plan_t *plan = S->plan;
    int n_stages = S->cm[0]->n_stages;
    for (int l = 1; l < S->n; l++)
        if (S->cm[l]->n_stages < n_stages) n_stages = S->cm[l]->n_stages;
    for (int d = 0; d < plan->n_devices; d++)
        S->last_compute[d] = -1;
    for (int l = 0; l < S->n; l++)
        S->t1[l] = -INFINITY;
    for (size_t k = 0; k < (size_t)plan->n_devices * (size_t)S->n; k++)
        S->dev_end[k] = -INFINITY;
    device_heads(S);
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        PP_CHECK(check_op(plan, n_stages, k));
        if (op->kind == PP_ACT_SEND_F || op->kind == PP_ACT_SEND_B) {
            PP_CHECK(sim_pair(S, k, n_stages));
            k++; /* the RECV is done too */
            continue;
        }
        if (op->kind == PP_ACT_REDUCE) {
            int g;
            PP_CHECK(sim_reduce(S, k, n_stages, &g));
            k += g - 1; /* the group is done */
            continue;
        }
        if (!op_cost[op->kind])
            PP_FAIL(PP_ERR_INTERNAL, "simulate: RECV op %d does not sit right after its SEND (%d)",
                    k, op->peer);
        if (!owns(S->part, op->device)) continue;
        PP_CHECK(check_owned_deps(plan, S->part, k, -1));
        PP_CHECK(sim_alone(S, k));
    }
    device_tails(S);
    return PP_OK;
}

/* Run the walk with n lanes over `cm` (t: lane 0's times; end: the other lanes'), under `part`
 * (one lane) or for every device; span[l]: lane l's step, from 0 (every device's start, where
 * its head begins) to the latest end of an op or a tail (0 without ops). */
static pp_status_t sim_run(const pp_plan_t *plan, const pp_cost_model_t *const *cm, int n,
                           const pp_sim_part_t *part, pp_op_time_t *t, double *end, double *span)
{
    for (int l = 0; l < n; l++)
        if (cm[l]->n_stages < plan->n_stages)
            PP_FAIL(PP_ERR_INTERNAL, "simulate: cost model has %d stages, the plan %d",
                    cm[l]->n_stages, plan->n_stages);
    if (plan->n_devices < 1 || plan->n_devices > PP_MAX_DEVICES || n < 1 || n > SIM_MAX_LANES ||
        (part && (n != 1 || !t)))
        PP_FAIL(PP_ERR_INTERNAL, "simulate: %d devices, %d cost models%s", plan->n_devices, n,
                part ? " under a part" : "");
    lanes_t S = {
        .plan = plan, .n = n, .cm = cm, .t = t, .off = t ? 1 : 0, .end = end, .part = part};
    S.stream_free = calloc((size_t)pp_channel_count(plan->n_devices) * (size_t)n, sizeof(double));
    S.last_start = calloc((size_t)plan->n_devices * (size_t)n, sizeof(double));
    S.link_free = calloc((size_t)PP_MAX_DEVICES * 2 * (size_t)n, sizeof(double));
    S.dev_end = malloc(sizeof(double) * (size_t)plan->n_devices * (size_t)n);
    S.keep = part ? calloc((size_t)(plan->n_ops > 0 ? plan->n_ops : 1), sizeof *S.keep) : NULL;
    pp_status_t st = PP_ERR_NOMEM;
    if (S.stream_free && S.last_start && S.link_free && S.dev_end && (!part || S.keep)) {
        st = sim_walk(&S);
        if (part) { /* the sends still in flight read keep[] */
            pp_status_t fl = part->group->ops->flush(part->group, part->deadline);
            if (st == PP_OK) st = fl;
        }
        for (int l = 0; l < n; l++) /* ops never start before 0 */
            span[l] = plan->n_ops > 0 && S.t1[l] > 0.0 ? S.t1[l] : 0.0;
    } else {
        fprintf(stderr, "%s:%d: out of host memory simulating %d ops\n", __FILE__, __LINE__,
                plan->n_ops);
    }
    free(S.stream_free);
    free(S.last_start);
    free(S.link_free);
    free(S.dev_end);
    free(S.keep);
    return st;
}

/* The timeline of cm[0] into tl (its owned devices only under a part, on the unshifted axis:
 * timeline_merge shifts the merged whole and keeps the latest part's step) and the steps of
 * cm[1..n) into step_ms. */
static pp_status_t sim_timeline(pp_timeline_t *tl, double *step_ms, const pp_plan_t *plan,
                                const pp_cost_model_t *const *cm, int n, const pp_sim_part_t *part)
{
    memset(tl, 0, sizeof *tl);
    if (n < 1 || n > SIM_MAX_LANES)
        PP_FAIL(PP_ERR_INTERNAL, "simulate: %d cost models in one pass (1..%d)", n, SIM_MAX_LANES);
    if (cm[0]->n_stages < plan->n_stages)
        PP_FAIL(PP_ERR_INTERNAL, "simulate: cost model has %d stages, the plan %d", cm[0]->n_stages,
                plan->n_stages);
    PP_CHECK(timeline_init(tl, PP_MODE_SIMULATE, plan->n_ops, plan->n_devices, 1));
    double span[SIM_MAX_LANES], *end = NULL;
    if (n > 1) {
        end = malloc(sizeof *end * (size_t)(plan->n_ops > 0 ? plan->n_ops : 1) * (size_t)(n - 1));
        if (!end) {
            timeline_free(tl);
            PP_FAIL(PP_ERR_NOMEM, "out of host memory simulating %d ops", plan->n_ops);
        }
    }
    pp_status_t st = sim_run(plan, cm, n, part, tl->t, end, span);
    free(end);
    if (st != PP_OK) {
        timeline_free(tl);
        return st;
    }
    for (int l = 1; l < n; l++)
        step_ms[l - 1] = span[l];
    if (!part) { /* op times relative to the earliest start, as a measured run has them */
        double t0 = 0.0;
        for (int k = 0; k < plan->n_ops; k++)
            if (k == 0 || tl->t[k].start_ms < t0) t0 = tl->t[k].start_ms;
        for (int k = 0; k < plan->n_ops; k++) {
            tl->t[k].start_ms -= t0;
            tl->t[k].end_ms -= t0;
        }
    }
    tl->step_ms[0] = span[0];
    tl->skew_ms = 0.0;
    tl->has_op_times = 1;
    return PP_OK;
}

pp_status_t simulate_plan_and(pp_timeline_t *tl, double *step_ms, const pp_plan_t *plan,
                              const pp_cost_model_t *const *cm, int n)
{
    return sim_timeline(tl, step_ms, plan, cm, n, NULL);
}

pp_status_t simulate_plan_part(pp_timeline_t *tl, const pp_plan_t *plan, const pp_cost_model_t *cm,
                               const pp_sim_part_t *part)
{
    return sim_timeline(tl, NULL, plan, &cm, 1, part);
}

pp_status_t simulate_plan(pp_timeline_t *tl, const pp_plan_t *plan, const pp_cost_model_t *cm)
{
    return sim_timeline(tl, NULL, plan, &cm, 1, NULL);
}

pp_status_t simulate_makespans(double *step_ms, const pp_plan_t *plan,
                               const pp_cost_model_t *const *cm, int n)
{
    size_t n_ops = (size_t)(plan->n_ops > 0 ? plan->n_ops : 1);
    if (n < 1 || n > SIM_MAX_LANES)
        PP_FAIL(PP_ERR_INTERNAL, "simulate: %d cost models in one pass (1..%d)", n, SIM_MAX_LANES);
    double *end = malloc(sizeof *end * n_ops * (size_t)n);
    if (!end) PP_FAIL(PP_ERR_NOMEM, "out of host memory simulating %d ops", plan->n_ops);
    pp_status_t st = sim_run(plan, cm, n, NULL, NULL, end, step_ms);
    free(end);
    return st;
}
