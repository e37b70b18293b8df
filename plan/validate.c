/*
 * validate.c — the rules of a valid schedule, checked on a schedule as written (schedule_validate)
 * and on a lowered plan (plan_validate).
 *
 * Both read per-device programs: the schedule's own, or the plan's (prog_ops) with positions as in
 * the plan. The first problem found is printed as one line, `device d, step i, action X: ...`
 * (i 0-based in that device's program), or `device d: action X is missing (...)` for an action
 * that never appears, and the function returns PP_ERR_INPUT; for a written schedule the line
 * starts with where device d's program was written (`file:line:col: `, schedule_origin).
 * Deadlocks are found by plan_lower's dry run (it names each stuck device, at the same place),
 * which the run chain does once, right after schedule_validate; plan_validate checks that the
 * plan's order never waits on a later op.
 * A little over 500 lines: the rules for programs and for plans share the table of where each
 * action was seen (seen_t), so they stay together.
 */
#include "plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Where each (kind, stage, mb) was first seen: a table sized by the actions the programs hold
 * (not stages x micro-batches, which a short file can make huge): direct when the schedule is
 * dense, as every complete one is, else open addressing. Per stage, the owner and how many
 * micro-batches have a forward and a backward. */
typedef struct seen_entry {
    uint64_t key; /* seen_key + 1; 0 = empty */
    int dev, pos; /* device and step in its program */
} seen_entry_t;

typedef struct seen {
    int n_st, n_mb;
    seen_entry_t *tab; /* [mask + 1], or one entry per key when dense */
    uint64_t mask;
    int dense;  /* the schedule has at least 1/8 of all keys: a direct table is no larger */
    int *owner; /* [n_st]: device of the stage's first action, -1 none */
    int *n_fwd; /* [n_st]: micro-batches with an F */
    int *n_bwd; /* [n_st]: micro-batches with a B or an I */
    const pp_schedule_t *src; /* a written schedule: where each device's program came from */
} seen_t;

static uint64_t seen_key(const seen_t *S, pp_action_kind_t k, int stage, int mb)
{
    return ((uint64_t)k * (uint64_t)S->n_st + (uint64_t)stage) * (uint64_t)S->n_mb + (uint64_t)mb;
}

/* The entry of key, or the empty one where it would go. */
static seen_entry_t *seen_slot(const seen_t *S, uint64_t key)
{
    if (S->dense) return &S->tab[key];
    uint64_t h = ((key + 1) * 0x9e3779b97f4a7c15ull) >> 20;
    for (;; h++) {
        seen_entry_t *e = &S->tab[h & S->mask];
        if (e->key == 0 || e->key == key + 1) return e;
    }
}

/* Step of (kind, stage, mb), or -1 when it never appears. */
static int seen_pos(const seen_t *S, pp_action_kind_t k, int stage, int mb)
{
    if (stage < 0 || stage >= S->n_st || mb < 0 || mb >= S->n_mb) return -1;
    const seen_entry_t *e = seen_slot(S, seen_key(S, k, stage, mb));
    return e->key ? e->pos : -1;
}

static void seen_free(seen_t *S)
{
    free(S->tab);
    free(S->owner);
    free(S->n_fwd);
    free(S->n_bwd);
    memset(S, 0, sizeof *S);
}

/* Tables for programs holding n_actions actions in all. */
static pp_status_t seen_init(seen_t *S, int n_st, int n_mb, size_t n_actions)
{
    memset(S, 0, sizeof *S);
    S->n_st = n_st;
    S->n_mb = n_mb;
    size_t cap = 64, keys = (size_t)PP_ACT_COUNT * (size_t)n_st * (size_t)n_mb;
    while (cap < 2 * n_actions)
        cap *= 2;
    S->mask = cap - 1;
    S->dense = keys <= 4 * cap;
    if (S->dense) cap = keys;
    S->tab = calloc(cap, sizeof *S->tab);
    S->owner = malloc(sizeof *S->owner * (size_t)n_st);
    S->n_fwd = calloc((size_t)n_st, sizeof *S->n_fwd);
    S->n_bwd = calloc((size_t)n_st, sizeof *S->n_bwd);
    if (!S->tab || !S->owner || !S->n_fwd || !S->n_bwd) {
        seen_free(S);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory validating a schedule");
    }
    for (int s = 0; s < n_st; s++)
        S->owner[s] = -1;
    return PP_OK;
}

/* Print `where` of device d's program (schedule_origin; nothing for a generated schedule or a
 * plan). */
static void origin(const seen_t *S, int d)
{
    char where[PP_ORIGIN_NAME_MAX + 32];
    if (S->src) fputs(schedule_origin(S->src, d, where, sizeof where), stderr);
}

/* Print `[where] device d, step i, action X: ` (the caller finishes the line). */
static void at(const seen_t *S, int d, int i, const pp_action_t *a)
{
    char txt[32];
    origin(S, d);
    fprintf(stderr, "device %d, step %d, action %s: ", d, i, action_format(a, txt, sizeof txt));
}

/* ============================== The rules ===================================================== */

/* Pass 1: ranges, one device per stage, no action twice. */
static pp_status_t check_unique(seen_t *S, const pp_program_t *prog, int n_dev, const int *placed)
{
    for (int d = 0; d < n_dev; d++) {
        for (int i = 0; i < prog[d].n; i++) {
            const pp_action_t *a = &prog[d].a[i];
            if (a->kind < 0 || a->kind >= PP_ACT_COUNT || a->stage < 0 || a->stage >= S->n_st ||
                a->mb < 0 || a->mb >= S->n_mb) {
                at(S, d, i, a);
                fprintf(stderr,
                        "stage or micro-batch out of range (stages 0..%d, micro-batches "
                        "0..%d)\n",
                        S->n_st - 1, S->n_mb - 1);
                return PP_ERR_INPUT;
            }
            int *owner = &S->owner[a->stage];
            if (*owner < 0) *owner = d;
            if (*owner != d) {
                at(S, d, i, a);
                fprintf(stderr,
                        "stage %d already runs on device %d (each stage lives on one "
                        "device)\n",
                        a->stage, *owner);
                return PP_ERR_INPUT;
            }
            if (placed && placed[a->stage] >= 0 && placed[a->stage] != d) {
                at(S, d, i, a);
                fprintf(stderr, "stage %d is placed on device %d\n", a->stage, placed[a->stage]);
                return PP_ERR_INPUT;
            }
            uint64_t key = seen_key(S, a->kind, a->stage, a->mb);
            seen_entry_t *e = seen_slot(S, key);
            if (e->key) {
                at(S, d, i, a);
                fprintf(stderr, "appears twice (first at device %d, step %d)\n", e->dev, e->pos);
                return PP_ERR_INPUT;
            }
            *e = (seen_entry_t){key + 1, d, i};
            S->n_fwd[a->stage] += a->kind == PP_ACT_F;
            S->n_bwd[a->stage] += a->kind == PP_ACT_B || a->kind == PP_ACT_I;
        }
    }
    return PP_OK;
}

/* `a` at step i needs `need` (same stage's device) earlier in the program. `what` says why. */
static int need_before(const seen_t *S, int d, int i, const pp_action_t *a, pp_action_kind_t need,
                       const char *what)
{
    pp_action_t n = {need, a->stage, a->mb, 0};
    char txt[32];
    int j = seen_pos(S, need, a->stage, a->mb);
    if (j < 0) {
        at(S, d, i, a);
        fprintf(stderr, "%s %s is missing\n", what, action_format(&n, txt, sizeof txt));
        return 0;
    }
    if (j > i) {
        at(S, d, i, a);
        fprintf(stderr, "runs before %s %s (step %d)\n", what, action_format(&n, txt, sizeof txt),
                j);
        return 0;
    }
    return 1;
}

/* The other half of a transfer must exist somewhere. */
static int need_pair(const seen_t *S, int d, int i, const pp_action_t *a, pp_action_kind_t kind,
                     int stage)
{
    pp_action_t n = {kind, stage, a->mb, 0};
    char txt[32];
    if (seen_pos(S, kind, stage, a->mb) >= 0) return 1;
    at(S, d, i, a);
    if (kind == PP_ACT_RECV_F || kind == PP_ACT_RECV_B)
        fprintf(stderr, "unmatched: no %s receives it\n", action_format(&n, txt, sizeof txt));
    else
        fprintf(stderr, "nothing sends it: no %s in the schedule\n",
                action_format(&n, txt, sizeof txt));
    return 0;
}

/* Pass 2: order and matching, action by action. `comm`: transfers are part of the programs, so
 * every input must be received before it is used. */
static pp_status_t check_order(const seen_t *S, const pp_program_t *prog, int n_dev, int comm)
{
    int last = S->n_st - 1;
    for (int d = 0; d < n_dev; d++) {
        for (int i = 0; i < prog[d].n; i++) {
            const pp_action_t *a = &prog[d].a[i];
            int s = a->stage, k = a->mb, ok = 1;
            switch (a->kind) {
            case PP_ACT_F:
                if (comm && s > 0) ok = need_before(S, d, i, a, PP_ACT_RECV_F, "its input");
                break;
            case PP_ACT_B:
            case PP_ACT_I:
                ok = need_before(S, d, i, a, PP_ACT_F, "its forward");
                if (ok && a->kind == PP_ACT_B &&
                    (seen_pos(S, PP_ACT_I, s, k) >= 0 || seen_pos(S, PP_ACT_W, s, k) >= 0)) {
                    at(S, d, i, a);
                    fprintf(stderr,
                            "micro-batch %d of stage %d has both a full backward B and a "
                            "split backward I/W\n",
                            k, s);
                    ok = 0;
                }
                if (ok && a->kind == PP_ACT_I && seen_pos(S, PP_ACT_W, s, k) < 0) {
                    at(S, d, i, a);
                    fprintf(stderr, "no %dW%d follows it (a split backward needs both I and W)\n",
                            s, k);
                    ok = 0;
                }
                if (ok && comm && s < last)
                    ok = need_before(S, d, i, a, PP_ACT_RECV_B, "its output gradient");
                break;
            case PP_ACT_W:
                ok = need_before(S, d, i, a, PP_ACT_I, "its input-gradient backward");
                break;
            case PP_ACT_SEND_F:
                if (s == last) {
                    at(S, d, i, a);
                    fprintf(stderr, "stage %d is the last stage: there is no stage %d to send to\n",
                            s, s + 1);
                    ok = 0;
                }
                if (ok) ok = need_before(S, d, i, a, PP_ACT_F, "the forward it sends,");
                if (ok) ok = need_pair(S, d, i, a, PP_ACT_RECV_F, s + 1);
                break;
            case PP_ACT_RECV_F:
                if (s == 0) {
                    at(S, d, i, a);
                    fprintf(stderr, "stage 0 is the first stage: no stage sends it an input\n");
                    ok = 0;
                }
                if (ok) ok = need_pair(S, d, i, a, PP_ACT_SEND_F, s - 1);
                break;
            case PP_ACT_SEND_B:
                if (s == 0) {
                    at(S, d, i, a);
                    fprintf(stderr, "stage 0 is the first stage: there is no stage -1 to send a "
                                    "gradient to\n");
                    ok = 0;
                }
                if (ok)
                    ok = need_before(S, d, i, a,
                                     seen_pos(S, PP_ACT_B, s, k) >= 0 ? PP_ACT_B : PP_ACT_I,
                                     "the backward it sends,");
                if (ok) ok = need_pair(S, d, i, a, PP_ACT_RECV_B, s - 1);
                break;
            case PP_ACT_RECV_B:
                if (s == last) {
                    at(S, d, i, a);
                    fprintf(stderr, "stage %d is the last stage: no stage sends it a gradient\n",
                            s);
                    ok = 0;
                }
                if (ok) ok = need_pair(S, d, i, a, PP_ACT_SEND_B, s + 1);
                break;
            default: break;
            }
            if (!ok) return PP_ERR_INPUT;
        }
    }
    return PP_OK;
}

/* Pass 3: every (stage, mb) has its forward and a backward. */
static pp_status_t check_complete(const seen_t *S)
{
    for (int s = 0; s < S->n_st; s++) {
        if (S->owner[s] < 0) {
            fprintf(stderr, "stage %d has no action on any device (action %dF0 is missing)\n", s,
                    s);
            return PP_ERR_INPUT;
        }
        /* Actions are unique and no (stage, mb) has both B and I: full counts are complete. */
        if (S->n_fwd[s] == S->n_mb && S->n_bwd[s] == S->n_mb) continue;
        for (int k = 0; k < S->n_mb; k++) {
            if (seen_pos(S, PP_ACT_F, s, k) < 0) {
                origin(S, S->owner[s]);
                fprintf(stderr,
                        "device %d: action %dF%d is missing (stage %d, micro-batch %d has no "
                        "forward)\n",
                        S->owner[s], s, k, s, k);
                return PP_ERR_INPUT;
            }
            if (seen_pos(S, PP_ACT_B, s, k) < 0 && seen_pos(S, PP_ACT_I, s, k) < 0) {
                origin(S, S->owner[s]);
                fprintf(stderr,
                        "device %d: action %dB%d is missing (stage %d, micro-batch %d has no "
                        "backward: neither %dB%d nor %dI%d + %dW%d)\n",
                        S->owner[s], s, k, s, k, s, k, s, k, s, k);
                return PP_ERR_INPUT;
            }
        }
    }
    return PP_OK;
}

/* All three passes over per-device programs; src (may be NULL) names where they were written. */
static pp_status_t check_programs(const pp_program_t *prog, int n_dev, int n_st, int n_mb,
                                  const int *placed, int comm, const pp_schedule_t *src)
{
    seen_t S;
    size_t n_actions = 0;
    for (int d = 0; d < n_dev; d++)
        n_actions += (size_t)prog[d].n;
    PP_CHECK(seen_init(&S, n_st, n_mb, n_actions));
    S.src = src;
    pp_status_t st = check_unique(&S, prog, n_dev, placed);
    if (st == PP_OK) st = check_order(&S, prog, n_dev, comm);
    if (st == PP_OK) st = check_complete(&S);
    seen_free(&S);
    return st;
}

/* ============================== schedule_validate ============================================= */

pp_status_t schedule_validate(const pp_schedule_t *sched)
{
    if (!sched || !sched->prog || sched->n_devices < 1 || sched->n_stages < 1 || sched->n_mb < 1) {
        fprintf(stderr, "schedule: no devices, stages or micro-batches to check\n");
        return PP_ERR_INPUT;
    }
    return check_programs(sched->prog, sched->n_devices, sched->n_stages, sched->n_mb,
                          sched->stage_device, sched->has_comm, sched);
}

/* ============================== plan_validate ================================================= */

/* "X (device d, step i)" for a plan op. */
static const char *plan_op_name(const pp_plan_t *plan, int i, char *buf, size_t size)
{
    char txt[32];
    const pp_op_t *o = &plan->ops[i];
    pp_action_t a = {o->kind, o->stage, o->mb, 0};
    snprintf(buf, size, "%s (device %d, step %d)", action_format(&a, txt, sizeof txt), o->device,
             o->pos);
    return buf;
}

static void plan_at(const pp_plan_t *plan, int i)
{
    const pp_op_t *o = &plan->ops[i];
    pp_action_t a = {o->kind, o->stage, o->mb, 0};
    const seen_t none = {0};
    at(&none, o->device, o->pos, &a);
}

/* The arrays hang together: devices in range, prog_ops a grouping of all ops by device with
 * matching positions. acts[j] gets the action of prog_ops[j] (the programs as the plan runs them,
 * read in the same walk). */
static pp_status_t plan_check_shape(const pp_plan_t *plan, pp_action_t *acts)
{
    if (plan->n_devices < 1 || plan->n_stages < 1 || plan->n_mb < 1 || plan->n_ops < 0 ||
        (plan->n_ops > 0 && (!plan->ops || !plan->prog_ops)) || !plan->prog_begin ||
        !plan->stage_device || !plan->slots_per_stage) {
        fprintf(stderr, "plan: empty or half-built (no ops, programs or placement)\n");
        return PP_ERR_INPUT;
    }
    if (plan->n_devices % plan_replicas(plan) != 0) {
        fprintf(stderr, "plan: %d devices are not %d replicas\n", plan->n_devices,
                plan_replicas(plan));
        return PP_ERR_INPUT;
    }
    if (plan->prog_begin[0] != 0 || plan->prog_begin[plan->n_devices] != plan->n_ops) {
        fprintf(stderr, "plan: device programs cover %d..%d, not the %d ops\n", plan->prog_begin[0],
                plan->prog_begin[plan->n_devices], plan->n_ops);
        return PP_ERR_INPUT;
    }
    for (int d = 0; d < plan->n_devices; d++) {
        if (plan->prog_begin[d + 1] < plan->prog_begin[d]) {
            fprintf(stderr, "plan: device %d's program ends before it begins\n", d);
            return PP_ERR_INPUT;
        }
    }
    char *listed = calloc((size_t)(plan->n_ops > 0 ? plan->n_ops : 1), 1);
    PP_ALLOC_CHECK(listed);
    for (int d = 0; d < plan->n_devices; d++) {
        for (int j = plan->prog_begin[d]; j < plan->prog_begin[d + 1]; j++) {
            int i = plan->prog_ops[j];
            if (i < 0 || i >= plan->n_ops || listed[i] || plan->ops[i].device != d ||
                plan->ops[i].pos != j - plan->prog_begin[d]) {
                fprintf(stderr,
                        "plan: device %d, step %d: program entry %d does not name an op "
                        "of this device at this step (or names it twice)\n",
                        d, j - plan->prog_begin[d], i);
                free(listed);
                return PP_ERR_INPUT;
            }
            listed[i] = 1;
            acts[j] = (pp_action_t){plan->ops[i].kind, plan->ops[i].stage, plan->ops[i].mb, 0};
        }
    }
    free(listed);
    for (int s = 0; s < plan->n_stages; s++) {
        if (plan->stage_device[s] < 0 || plan->stage_device[s] >= plan_pipe_devices(plan)) {
            fprintf(stderr, "plan: stage %d is placed on device %d, out of 0..%d\n", s,
                    plan->stage_device[s], plan_pipe_devices(plan) - 1);
            return PP_ERR_INPUT;
        }
    }
    return PP_OK;
}

/* Transfers: peers point at each other, the RECV right after its SEND, the right stage boundary,
 * and a link that fits the placement. */
static pp_status_t plan_check_pairs(const pp_plan_t *plan)
{
    char txt[96];
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *o = &plan->ops[i];
        if (!pp_action_is_comm(o->kind)) continue;
        if (o->role !=
            (o->kind == PP_ACT_SEND_F || o->kind == PP_ACT_SEND_B ? PP_ROLE_SEND : PP_ROLE_RECV)) {
            plan_at(plan, i);
            fprintf(stderr, "runs on the %s stream\n", pp_role_name(o->role));
            return PP_ERR_INPUT;
        }
        if (o->role != PP_ROLE_SEND) continue;
        const pp_op_t *r = i + 1 < plan->n_ops ? &plan->ops[i + 1] : NULL;
        pp_action_kind_t want = o->kind == PP_ACT_SEND_F ? PP_ACT_RECV_F : PP_ACT_RECV_B;
        int stage = o->kind == PP_ACT_SEND_F ? o->stage + 1 : o->stage - 1;
        if (o->peer != i + 1 || !r || r->peer != i || r->kind != want || r->stage != stage ||
            r->mb != o->mb) {
            plan_at(plan, i);
            fprintf(stderr, "its matching %d%s%d must follow it in the plan and name it as peer\n",
                    stage, action_kind_name(want), o->mb);
            return PP_ERR_INPUT;
        }
        int local = plan->stage_device[o->stage] == plan->stage_device[stage];
        /* Both ends name the same transport, one that crosses devices exactly when they differ. */
        if (o->link != r->link || o->link == PP_TRANSPORT_NONE ||
            (unsigned)o->link >= PP_TRANSPORT_COUNT ||
            transport_row(o->link)->crosses_devices == local) {
            plan_at(plan, i);
            fprintf(stderr, "link %s does not fit a transfer to %s\n", transport_name(o->link),
                    plan_op_name(plan, i + 1, txt, sizeof txt));
            return PP_ERR_INPUT;
        }
    }
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *o = &plan->ops[i];
        if (o->role == PP_ROLE_RECV && (i == 0 || o->peer != i - 1 || plan->ops[i - 1].peer != i)) {
            plan_at(plan, i);
            fprintf(stderr, "does not sit right after its SEND in the plan\n");
            return PP_ERR_INPUT;
        }
    }
    return PP_OK;
}

/* Index of the op (kind, stage, mb) in a table built by plan_check_order, -1 when absent. */
static int plan_find(const int *idx, const pp_plan_t *plan, pp_action_kind_t k, int s, int mb)
{
    if (s < 0 || s >= plan->n_stages || mb < 0 || mb >= plan->n_mb) return -1;
    return idx[((size_t)k * plan->n_stages + (size_t)s) * plan->n_mb + (size_t)mb];
}

static int has_dep(const pp_plan_t *plan, int i, int on)
{
    for (int j = 0; j < plan->ops[i].n_deps; j++)
        if (plan->deps[plan->ops[i].dep_begin + j] == on) return 1;
    return 0;
}

/* The dry run: walking the plan in order, every op only waits for ops already run; each channel
 * (plan.h) runs in program order; each op waits for the data it consumes; slots stay in range. */
static pp_status_t plan_check_order(const pp_plan_t *plan)
{
    char txt[96];
    const size_t per_replica = (size_t)PP_ACT_COUNT * (size_t)plan->n_stages * (size_t)plan->n_mb;
    size_t n_idx = per_replica * (size_t)plan_replicas(plan);
    int *idx = malloc(sizeof *idx * n_idx);
    int n_chan = pp_channel_count(plan->n_devices);
    int *last_pos = malloc(sizeof *last_pos * (size_t)n_chan);
    if (!idx || !last_pos) {
        free(idx);
        free(last_pos);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory validating a plan");
    }
    for (size_t j = 0; j < n_idx; j++)
        idx[j] = -1;
    for (int j = 0; j < n_chan; j++)
        last_pos[j] = -1;
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *o = &plan->ops[i];
        if (o->kind == PP_ACT_REDUCE) continue; /* its bucket is no micro-batch */
        idx[per_replica * (size_t)plan_replica_of(plan, o->device) +
            ((size_t)o->kind * plan->n_stages + (size_t)o->stage) * plan->n_mb + (size_t)o->mb] = i;
    }
    pp_status_t st = PP_ERR_INPUT;
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *o = &plan->ops[i];
        if (o->dep_begin < 0 || o->n_deps < 0 || o->dep_begin + o->n_deps > plan->n_deps_total) {
            plan_at(plan, i);
            fprintf(stderr, "its dependency list is out of the plan's pool\n");
            goto fail;
        }
        for (int j = 0; j < o->n_deps; j++) {
            int on = plan->deps[o->dep_begin + j];
            if (on < 0 || on >= plan->n_ops) {
                plan_at(plan, i);
                fprintf(stderr, "depends on op %d, which does not exist\n", on);
                goto fail;
            }
            if (on >= i) {
                plan_at(plan, i);
                fprintf(stderr, "waits for %s, which never runs before it\n",
                        plan_op_name(plan, on, txt, sizeof txt));
                goto fail;
            }
        }
        /* A send channel runs in the order of its receives (each RECV follows its SEND). */
        int *lp = &last_pos[pp_plan_channel(plan, i)];
        if (o->role != PP_ROLE_SEND && o->pos < *lp) {
            plan_at(plan, i);
            fprintf(stderr,
                    "is enqueued on its %s channel after step %d, which comes later in the "
                    "program\n",
                    pp_role_name(o->role), *lp);
            goto fail;
        }
        *lp = o->pos;
        /* The data this op consumes (in its own replica). */
        int need = -1;
        const int *ridx = idx + per_replica * (size_t)plan_replica_of(plan, o->device);
        switch (o->kind) {
        case PP_ACT_F: need = plan_find(ridx, plan, PP_ACT_RECV_F, o->stage, o->mb); break;
        case PP_ACT_B:
        case PP_ACT_I:
            need = plan_find(ridx, plan, PP_ACT_F, o->stage, o->mb);
            if (need >= 0 && !has_dep(plan, i, need)) break;
            need = plan_find(ridx, plan, PP_ACT_RECV_B, o->stage, o->mb);
            break;
        case PP_ACT_W: need = plan_find(ridx, plan, PP_ACT_I, o->stage, o->mb); break;
        case PP_ACT_SEND_F: need = plan_find(ridx, plan, PP_ACT_F, o->stage, o->mb); break;
        case PP_ACT_SEND_B:
            need = plan_find(ridx, plan, PP_ACT_B, o->stage, o->mb);
            if (need < 0) need = plan_find(ridx, plan, PP_ACT_I, o->stage, o->mb);
            break;
        case PP_ACT_REDUCE: break; /* plan_check_reduce */
        default: need = o->peer; break;
        }
        if (need >= 0 && !has_dep(plan, i, need)) {
            plan_at(plan, i);
            fprintf(stderr, "does not wait for %s, whose data it uses\n",
                    plan_op_name(plan, need, txt, sizeof txt));
            goto fail;
        }
        if (o->kind != PP_ACT_REDUCE &&
            (o->slot < 0 || o->slot >= plan->slots_per_stage[o->stage])) {
            plan_at(plan, i);
            fprintf(stderr, "slot %d is out of stage %d's %d slots\n", o->slot, o->stage,
                    plan->slots_per_stage[o->stage]);
            goto fail;
        }
    }
    st = PP_OK;
fail:
    free(idx);
    free(last_pos);
    return st;
}

/* The reductions across replicas: none in a plan of one replica; each REDUCE on the reduce stream
 * of its stage's device, in a group of d adjacent ops (one per replica, in replica order, the
 * first named as peer by all) of one stage and bucket, waiting for its stage's last backward op
 * (B or W) of its replica; and no op waits for a REDUCE (only the step's end does). */
static pp_status_t plan_check_reduce(const pp_plan_t *plan)
{
    const int d = plan_replicas(plan);
    int *last = malloc(sizeof *last * (size_t)plan->n_stages * (size_t)d);
    PP_ALLOC_CHECK(last);
    for (int j = 0; j < plan->n_stages * d; j++)
        last[j] = -1;
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *o = &plan->ops[i];
        if (o->kind == PP_ACT_B || o->kind == PP_ACT_W)
            last[plan_replica_of(plan, o->device) * plan->n_stages + o->stage] = i;
    }
    pp_status_t st = PP_ERR_INPUT;
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *o = &plan->ops[i];
        for (int j = 0; j < o->n_deps; j++) {
            int on = plan->deps[o->dep_begin + j];
            if (on >= 0 && on < plan->n_ops && plan->ops[on].kind == PP_ACT_REDUCE) {
                plan_at(plan, i);
                fprintf(stderr, "waits for a reduction (only the step's end may)\n");
                goto fail;
            }
        }
        if (o->kind != PP_ACT_REDUCE) continue;
        const int r = plan_replica_of(plan, o->device), first = i - r;
        if (d <= 1) {
            plan_at(plan, i);
            fprintf(stderr, "a reduction in a plan of one replica\n");
            goto fail;
        }
        if (o->role != PP_ROLE_REDUCE || o->device != plan_stage_device(plan, o->stage, r) ||
            o->peer != first || first < 0 || plan->ops[first].kind != PP_ACT_REDUCE ||
            plan->ops[first].stage != o->stage || plan->ops[first].mb != o->mb ||
            plan_replica_of(plan, plan->ops[first].device) != 0) {
            plan_at(plan, i);
            fprintf(stderr,
                    "not in a group of %d adjacent reductions of stage %d, one per replica on "
                    "the reduce stream of the stage's device\n",
                    d, o->stage);
            goto fail;
        }
        int want = last[r * plan->n_stages + o->stage];
        if (want < 0 || !has_dep(plan, i, want)) {
            plan_at(plan, i);
            fprintf(stderr, "does not wait for stage %d's last backward op\n", o->stage);
            goto fail;
        }
    }
    st = PP_OK;
fail:
    free(last);
    return st;
}

/* check_programs on each replica's devices (the REDUCE ops left out: plan_check_reduce's). */
static pp_status_t plan_check_replicas(const pp_plan_t *plan, const pp_action_t *acts)
{
    const int d = plan_replicas(plan), p = plan_pipe_devices(plan);
    pp_program_t *prog = calloc((size_t)(p > 0 ? p : 1), sizeof *prog);
    pp_action_t *mine = malloc(sizeof *mine * (size_t)(plan->n_ops > 0 ? plan->n_ops : 1));
    pp_status_t st = prog && mine ? PP_OK : PP_ERR_NOMEM;
    if (st == PP_ERR_NOMEM) fprintf(stderr, "out of host memory validating a plan\n");
    for (int r = 0; st == PP_OK && r < d; r++) {
        int n = 0;
        for (int i = 0; i < p; i++) {
            int dev = r * p + i, at0 = n;
            for (int j = plan->prog_begin[dev]; j < plan->prog_begin[dev + 1]; j++)
                if (acts[j].kind != PP_ACT_REDUCE) mine[n++] = acts[j];
            prog[i].a = mine + at0;
            prog[i].n = prog[i].cap = n - at0;
        }
        st = check_programs(prog, p, plan->n_stages, plan->n_mb, plan->stage_device, 1, NULL);
    }
    free(prog);
    free(mine);
    return st;
}

pp_status_t plan_validate(const pp_plan_t *plan)
{
    if (!plan) {
        fprintf(stderr, "plan: none to check\n");
        return PP_ERR_INPUT;
    }
    /* The rules on the programs, as the plan runs them (transfers included), replica by replica. */
    pp_action_t *acts = malloc(sizeof *acts * (size_t)(plan->n_ops > 0 ? plan->n_ops : 1));
    if (!acts) PP_FAIL(PP_ERR_NOMEM, "out of host memory validating a plan");
    pp_status_t st = plan_check_shape(plan, acts);
    if (st == PP_OK) st = plan_check_replicas(plan, acts);
    free(acts);
    PP_CHECK(st);
    PP_CHECK(plan_check_pairs(plan));
    PP_CHECK(plan_check_reduce(plan));
    PP_CHECK(plan_check_order(plan));
    return plan_check_offload(plan); /* offload.c */
}
