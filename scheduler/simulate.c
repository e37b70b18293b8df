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
 * at the host link's bandwidth. The caller owns `tl`; the cost model owns its four arrays.
 */
#include "simulate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

pp_status_t cost_model_uniform(pp_cost_model_t *cm, int n_stages, const pp_cost_cfg_t *c)
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
    if (!cm->f || !cm->b || !cm->i || !cm->w) goto fail;
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

static const op_cost_fn op_cost[PP_ACT_COUNT] = {
    [PP_ACT_F] = cost_f, [PP_ACT_B] = cost_b,          [PP_ACT_I] = cost_i,
    [PP_ACT_W] = cost_w, [PP_ACT_OFFLOAD] = cost_copy, [PP_ACT_RELOAD] = cost_copy,
};

/* Checks the fields of op `k` that the simulation indexes with. */
static pp_status_t check_op(const pp_plan_t *plan, const pp_cost_model_t *cm, int k)
{
    const pp_op_t *op = &plan->ops[k];
    if (op->device < 0 || op->device >= plan->n_devices)
        PP_FAIL(PP_ERR_INTERNAL, "simulate: op %d has device %d (plan has %d)", k, op->device,
                plan->n_devices);
    if ((int)op->role < 0 || op->role >= PP_ROLE_COUNT)
        PP_FAIL(PP_ERR_INTERNAL, "simulate: op %d has stream role %d", k, (int)op->role);
    if ((int)op->kind < 0 || op->kind >= PP_ACT_COUNT)
        PP_FAIL(PP_ERR_INTERNAL, "simulate: op %d has action kind %d", k, (int)op->kind);
    if (op->stage < 0 || op->stage >= cm->n_stages)
        PP_FAIL(PP_ERR_INTERNAL, "simulate: op %d is on stage %d, the cost model has %d stages", k,
                op->stage, cm->n_stages);
    if (op->n_deps < 0 || op->dep_begin < 0 || op->dep_begin + op->n_deps > plan->n_deps_total)
        PP_FAIL(PP_ERR_INTERNAL, "simulate: op %d has deps [%d, +%d) outside the pool of %d", k,
                op->dep_begin, op->n_deps, plan->n_deps_total);
    return PP_OK;
}

/* Time op `k` may start as far as its own stream and dependencies go, leaving out a dependency on
 * op `skip` (its transfer partner). Fails when a dependency is not earlier in plan order. */
static pp_status_t ready_time(const pp_plan_t *plan, const pp_timeline_t *tl,
                              const double *stream_free, int k, int skip, double *out)
{
    const pp_op_t *op = &plan->ops[k];
    double t = stream_free[pp_plan_channel(plan, k)];
    for (int j = 0; j < op->n_deps; j++) {
        int d = plan->deps[op->dep_begin + j];
        if (d == skip) continue;
        if (d < 0 || d >= k)
            PP_FAIL(PP_ERR_INTERNAL,
                    "simulate: op %d depends on op %d, which is not earlier in plan order", k, d);
        if (tl->t[d].end_ms > t) t = tl->t[d].end_ms;
    }
    *out = t;
    return PP_OK;
}

/* The backward half k of an overlapped pair starts no earlier than (1 - overlap) into its forward
 * half: the compute op before it in its device's program, earlier in plan order (lower.c). */
static pp_status_t pair_start(const pp_plan_t *plan, const pp_timeline_t *tl,
                              const pp_cost_model_t *cm, int k, double *ready)
{
    const pp_op_t *op = &plan->ops[k];
    const int *prog = plan->prog_ops + plan->prog_begin[op->device];
    for (int j = op->pos - 1; j >= 0; j--) {
        int f = prog[j];
        if (plan->ops[f].role != PP_ROLE_COMPUTE) continue;
        if (f >= k)
            PP_FAIL(PP_ERR_INTERNAL, "simulate: op %d comes before the forward half %d of its pair",
                    k, f);
        double at = tl->t[f].start_ms + (1.0 - cm->overlap) * (tl->t[f].end_ms - tl->t[f].start_ms);
        if (at > *ready) *ready = at;
        return PP_OK;
    }
    PP_FAIL(PP_ERR_INTERNAL, "simulate: op %d on the overlap stream has no forward half", k);
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

/* Transfer SEND k / RECV r: both start when both sides are ready, end `send` later (at once on a
 * link within a device). Under a part, only the owned ends are timed; an end on another process
 * sends its ready time and receives the other's. */
static pp_status_t sim_transfer(pp_timeline_t *tl, const pp_plan_t *plan, const pp_cost_model_t *cm,
                                double *stream_free, const pp_sim_part_t *part, double *keep, int k)
{
    const pp_op_t *op = &plan->ops[k];
    const int r = k + 1;
    if (op->peer != r || r >= plan->n_ops || plan->ops[r].peer != k ||
        (plan->ops[r].kind != PP_ACT_RECV_F && plan->ops[r].kind != PP_ACT_RECV_B))
        PP_FAIL(PP_ERR_INTERNAL, "simulate: SEND op %d (peer %d) is not followed by its RECV", k,
                op->peer);
    PP_CHECK(check_op(plan, cm, r));
    const int own_s = owns(part, op->device), own_r = owns(part, plan->ops[r].device);
    double ready_s = 0, ready_r = 0;
    if (own_s) PP_CHECK(check_owned_deps(plan, part, k, r));
    if (own_s) PP_CHECK(ready_time(plan, tl, stream_free, k, r, &ready_s));
    if (own_r) PP_CHECK(check_owned_deps(plan, part, r, k));
    if (own_r) PP_CHECK(ready_time(plan, tl, stream_free, r, k, &ready_r));
    if (!own_s && !own_r) return PP_OK;
    if (own_s && !own_r) {
        keep[k] = ready_s;
        PP_CHECK(meet(plan, part, k, r, &keep[k], &ready_r));
    } else if (own_r && !own_s) {
        keep[r] = ready_r;
        PP_CHECK(meet(plan, part, r, k, &keep[r], &ready_s));
    }
    double start = ready_s > ready_r ? ready_s : ready_r;
    double end = start + (transport_row(op->link)->crosses_devices ? cm->send : 0.0);
    if (own_s) {
        tl->t[k] = (pp_op_time_t){start, end};
        stream_free[pp_plan_channel(plan, k)] = end;
    }
    if (own_r) {
        tl->t[r] = (pp_op_time_t){start, end};
        stream_free[pp_plan_channel(plan, r)] = end;
    }
    return PP_OK;
}

/* Every op of the owned devices in plan order. */
static pp_status_t sim_ops(pp_timeline_t *tl, const pp_plan_t *plan, const pp_cost_model_t *cm,
                           double *stream_free, const pp_sim_part_t *part, double *keep)
{
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        PP_CHECK(check_op(plan, cm, k));
        if (op->kind == PP_ACT_SEND_F || op->kind == PP_ACT_SEND_B) {
            PP_CHECK(sim_transfer(tl, plan, cm, stream_free, part, keep, k));
            k++; /* the RECV is done too */
            continue;
        }
        if (!op_cost[op->kind])
            PP_FAIL(PP_ERR_INTERNAL, "simulate: RECV op %d does not sit right after its SEND (%d)",
                    k, op->peer);
        if (!owns(part, op->device)) continue;
        double ready;
        PP_CHECK(check_owned_deps(plan, part, k, -1));
        PP_CHECK(ready_time(plan, tl, stream_free, k, -1, &ready));
        if (op->role == PP_ROLE_OVERLAP) PP_CHECK(pair_start(plan, tl, cm, k, &ready));
        tl->t[k].start_ms = ready;
        tl->t[k].end_ms = ready + op_cost[op->kind](cm, op);
        stream_free[pp_plan_channel(plan, k)] = tl->t[k].end_ms;
    }
    return PP_OK;
}

pp_status_t simulate_plan_part(pp_timeline_t *tl, const pp_plan_t *plan, const pp_cost_model_t *cm,
                               const pp_sim_part_t *part)
{
    pp_status_t st = PP_OK;
    double *stream_free = NULL, *keep = NULL;

    memset(tl, 0, sizeof *tl);
    if (cm->n_stages < plan->n_stages)
        PP_FAIL(PP_ERR_INTERNAL, "simulate: cost model has %d stages, the plan %d", cm->n_stages,
                plan->n_stages);
    PP_CHECK(timeline_init(tl, PP_MODE_SIMULATE, plan->n_ops, plan->n_devices, 1));
    stream_free = calloc((size_t)pp_channel_count(plan->n_devices), sizeof *stream_free);
    keep = part ? calloc(plan->n_ops > 0 ? (size_t)plan->n_ops : 1, sizeof *keep) : NULL;
    if (!stream_free || (part && !keep)) {
        st = PP_ERR_NOMEM;
        fprintf(stderr, "%s:%d: out of host memory simulating %d ops\n", __FILE__, __LINE__,
                plan->n_ops);
        goto fail;
    }
    st = sim_ops(tl, plan, cm, stream_free, part, keep);
    if (part) { /* the sends still in flight read keep[] */
        pp_status_t fl = part->group->ops->flush(part->group, part->deadline);
        if (st == PP_OK) st = fl;
    }
    if (st != PP_OK) goto fail;
    if (!part) { /* times relative to the earliest start (timeline_merge does it for parts) */
        double t0 = 0.0;
        for (int k = 0; k < plan->n_ops; k++)
            if (k == 0 || tl->t[k].start_ms < t0) t0 = tl->t[k].start_ms;
        for (int k = 0; k < plan->n_ops; k++) {
            tl->t[k].start_ms -= t0;
            tl->t[k].end_ms -= t0;
        }
        tl->step_ms[0] = timeline_makespan(tl);
    }
    tl->skew_ms = 0.0;
    tl->has_op_times = 1;
    free(stream_free);
    free(keep);
    return PP_OK;

fail:
    free(stream_free);
    free(keep);
    timeline_free(tl);
    return st;
}

pp_status_t simulate_plan(pp_timeline_t *tl, const pp_plan_t *plan, const pp_cost_model_t *cm)
{
    return simulate_plan_part(tl, plan, cm, NULL);
}
