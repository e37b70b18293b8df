/*
 * gen_auto.c — the `auto` schedule kind: an order built from the stages' own F, I, W costs, in
 * the manner of the zero-bubble authors' automatic scheduling heuristic (one stage per device).
 *
 * A greedy list schedule over simulated time. Each device runs, as soon as it can, an F whose
 * activation has arrived while fewer than `limit` micro-batches are in flight on the stage
 * (forward done, W not yet) or an I whose gradient has arrived, alternating the two when both
 * are ready (warm-up forwards until the first gradient comes back, then one F one I), else a
 * deferred W when the wait for the next F or I is at least as long as the W (the W fills the idle
 * time without delaying the critical path) or when the in-flight limit blocks every F; the W's
 * left at the end close the step. Among the devices, the one that can start earliest goes first.
 * The result is compute-only (plan_lower adds the communication) and is validated and lowered
 * like any other schedule; the simulator, not this estimate, gives its step time.
 * Each row of the variants table builds its order in memory of its own (auto_build), so rows can
 * be built at once on several threads; gen_auto_pick.c ranks them and keeps the best.
 */
#include "model/cost.h"
#include "sim/cost_model.h"
#include "gen_auto.h"
#include "generate.h"
#include "plan/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One device's progress while the order is built. */
typedef struct auto_dev {
    double clock; /* when its last op ends */
    int nf;       /* next forward's micro-batch */
    int ni;       /* next input-gradient's micro-batch (< nf) */
    int nw;       /* next weight-gradient's micro-batch (< ni) */
    int last_i;   /* 1 when its last F or I was an I: an F goes first next when both are ready */
} auto_dev_t;

/* The state of the greedy schedule: p devices (= stages), m micro-batches. */
typedef struct auto_state {
    int p, m;
    const pp_auto_costs_t *c;
    int warm_cap; /* 1: before its first I, stage s runs at most p - s forwards (ZB-H1's warm-up) */
    double w_gap; /* a W fills a wait at least w_gap times its own length */
    int limit_w;  /* 1: at the in-flight limit, after an I, a W goes before the next I */
    int limit_used;  /* 1 once that rule made a choice in this variant (else limit_w was moot) */
    auto_dev_t *dev; /* [p] */
    struct auto_choice *choice; /* [p]: what each device would do next (auto_fill) */
    int tsize;                  /* leaves of the tournament: the power of two >= p */
    int *tree;     /* [2 * tsize]: tree[i] = the winner below node i (auto_first), -1 none; the
                      leaves tsize + s hold device s */
    double *f_end; /* [p * m]: end of F(s, k), NAN until scheduled */
    double *i_end; /* [p * m]: end of I(s, k), NAN until scheduled */
} auto_state_t;

/* What one device would do next, and when it would start. */
typedef struct auto_choice {
    pp_action_kind_t kind;
    double start; /* INFINITY: it cannot go before another device does something */
    int by_limit; /* 1: the in-flight rule of limit_w made it */
} auto_choice_t;

/* When the input of the next F of device s arrives (*known 0: a lower bound from its producer). */
static double ready_f(const auto_state_t *a, int s, int *known)
{
    const auto_dev_t *d = &a->dev[s];
    *known = 1;
    if (s == 0) return 0.0;
    double e = a->f_end[(s - 1) * a->m + d->nf];
    if (!isnan(e)) return e + a->c->send;
    *known = 0;
    return a->dev[s - 1].clock + a->c->f[s - 1] + a->c->send;
}

/* When the gradient of the next I of device s arrives (its own F when s is the last stage). */
static double ready_i(const auto_state_t *a, int s, int *known)
{
    const auto_dev_t *d = &a->dev[s];
    *known = 1;
    if (s == a->p - 1) return a->f_end[s * a->m + d->ni];
    double e = a->i_end[(s + 1) * a->m + d->ni];
    if (!isnan(e)) return e + a->c->send;
    *known = 0;
    return a->dev[s + 1].clock + a->c->i[s + 1] + a->c->send;
}

static auto_choice_t auto_choose(const auto_state_t *a, int s)
{
    const auto_dev_t *d = &a->dev[s];
    auto_choice_t none = {PP_ACT_W, INFINITY, 0};
    int can_i = d->ni < d->nf, can_f = d->nf < a->m && d->nf - d->nw < a->c->limit;
    if (a->warm_cap && d->ni == 0 && d->nf >= a->p - s) can_f = 0;
    int can_w = d->nw < d->ni, ki = 0, kf = 0;
    double ti = can_i ? ready_i(a, s, &ki) : INFINITY;
    double tf = can_f ? ready_f(a, s, &kf) : INFINITY;
    int i_now = can_i && ki && ti <= d->clock, f_now = can_f && kf && tf <= d->clock;
    /* At the in-flight limit, after an I, a W frees the memory the next F needs. */
    if (a->limit_w && can_w && d->nf < a->m && d->nf - d->nw >= a->c->limit && d->last_i)
        return (auto_choice_t){PP_ACT_W, d->clock, 1};
    if (f_now && (d->last_i || !i_now)) return (auto_choice_t){PP_ACT_F, d->clock, 0};
    if (i_now) return (auto_choice_t){PP_ACT_I, d->clock, 0};
    double next = fmin(ti, tf); /* known or a lower bound */
    if (can_w && next - d->clock >= a->w_gap * a->c->w[s])
        return (auto_choice_t){PP_ACT_W, d->clock, 0};
    if (can_w && !can_f && !ki && d->nf - d->nw >= a->c->limit)
        return (auto_choice_t){PP_ACT_W, d->clock, 0};
    if (can_i && ki && (!kf || ti <= tf)) return (auto_choice_t){PP_ACT_I, ti, 0};
    if (can_f && kf) return (auto_choice_t){PP_ACT_F, fmax(tf, d->clock), 0};
    if (can_w && !can_i && !can_f) return (auto_choice_t){PP_ACT_W, d->clock, 0};
    return none;
}

/* Commit device s's choice: its end time, its counters, the action in the order. */
static pp_status_t auto_commit(auto_state_t *a, pp_schedule_t *out, int s, auto_choice_t ch)
{
    auto_dev_t *d = &a->dev[s];
    const pp_auto_costs_t *c = a->c;
    int k;
    double end;
    if (ch.kind == PP_ACT_F) {
        k = d->nf++;
        d->last_i = 0;
        end = a->f_end[s * a->m + k] = ch.start + c->f[s];
    } else if (ch.kind == PP_ACT_I) {
        k = d->ni++;
        d->last_i = 1;
        end = a->i_end[s * a->m + k] = ch.start + c->i[s];
    } else {
        k = d->nw++;
        end = ch.start + c->w[s];
    }
    d->clock = end;
    return schedule_push(out, s, ch.kind, s, k);
}

/* When no device can start (every one waits on an op nobody has scheduled), the one with the
 * earliest clock that holds a deferred W runs it; -1 when none does. */
static int auto_force_w(const auto_state_t *a)
{
    int best = -1;
    for (int s = 0; s < a->p; s++)
        if (a->dev[s].nw < a->dev[s].ni && (best < 0 || a->dev[s].clock < a->dev[best].clock))
            best = s;
    return best;
}

/* The device of a and b whose choice starts first, the lower index on a tie; -1 for neither (a
 * choice that cannot start, INFINITY or NAN, never wins). */
static int auto_first(const auto_state_t *a, int x, int y)
{
    double sx = x >= 0 ? a->choice[x].start : INFINITY, sy = y >= 0 ? a->choice[y].start : INFINITY;
    int okx = sx < INFINITY, oky = sy < INFINITY;
    if (!okx || !oky) return okx ? x : oky ? y : -1;
    if (sx != sy) return sx < sy ? x : y;
    return x < y ? x : y;
}

/* Devices lo..hi (consecutive) choose again; the tournament above their leaves is replayed once,
 * level by level (a node's winner depends only on its children's, so the tree is the same as
 * after one replay per device). */
static void auto_rechoose(auto_state_t *a, int lo, int hi)
{
    for (int s = lo; s <= hi; s++) {
        a->choice[s] = auto_choose(a, s);
        a->limit_used |= a->choice[s].by_limit;
    }
    for (int i = (a->tsize + lo) / 2, j = (a->tsize + hi) / 2; i >= 1; i /= 2, j /= 2)
        for (int n = i; n <= j; n++)
            a->tree[n] = auto_first(a, a->tree[2 * n], a->tree[2 * n + 1]);
}

/* Each step commits the device whose choice starts first (the lowest index on a tie): the winner
 * of a tournament over the devices' choices. A choice of device s reads only s's state and its
 * neighbours' (ready_f: s - 1, ready_i: s + 1), so after a commit on device b only b - 1, b and
 * b + 1 choose again and only their paths up the tournament are replayed. */
static pp_status_t auto_fill(auto_state_t *a, pp_schedule_t *out)
{
    long total = 3L * a->p * a->m;
    for (int i = 0; i < 2 * a->tsize; i++)
        a->tree[i] = i >= a->tsize && i - a->tsize < a->p ? i - a->tsize : -1;
    auto_rechoose(a, 0, a->p - 1);
    for (long n = 0; n < total; n++) {
        int best = auto_first(a, a->tree[1], -1); /* -1 also when a lone device cannot start */
        auto_choice_t bc = best >= 0 ? a->choice[best] : (auto_choice_t){PP_ACT_W, INFINITY, 0};
        if (best < 0) {
            best = auto_force_w(a);
            if (best < 0) PP_FAIL(PP_ERR_INTERNAL, "auto: no device can make progress");
            bc = (auto_choice_t){PP_ACT_W, a->dev[best].clock, 0};
        }
        PP_CHECK(auto_commit(a, out, best, bc));
        auto_rechoose(a, best > 0 ? best - 1 : 0, best + 1 < a->p ? best + 1 : a->p - 1);
    }
    return PP_OK;
}

/* One row's order into `out` (initialised here); *makespan: when its last op ends. */
static pp_status_t auto_variant(auto_state_t *a, pp_schedule_t *out, double *makespan)
{
    memset(a->dev, 0, sizeof *a->dev * (size_t)a->p);
    a->limit_used = 0;
    for (long k = 0; k < (long)a->p * a->m; k++)
        a->f_end[k] = a->i_end[k] = NAN;
    PP_CHECK(schedule_init(out, a->p, a->p, a->m));
    for (int d = 0; d < a->p; d++)
        out->stage_device[d] = d;
    PP_CHECK(auto_fill(a, out));
    *makespan = 0;
    for (int d = 0; d < a->p; d++)
        *makespan = fmax(*makespan, a->dev[d].clock);
    return PP_OK;
}

/* The variants tried (as the zero-bubble authors' scheduler tries several settings and keeps the
 * best): warm-up capped or not, W filling waits of at least 1 or 2 times its length. */
static const struct {
    int warm_cap;
    double w_gap;
    int limit_w;
} auto_variants[AUTO_ROWS] = {{0, 1.0, 1}, {1, 1.0, 1}, {0, 2.0, 1}, {1, 2.0, 1},
                              {0, 1.0, 0}, {1, 1.0, 0}, {0, 2.0, 0}, {1, 2.0, 0}};

int auto_twin(int v)
{
    for (int u = 0; u < v && !auto_variants[v].limit_w; u++)
        if (auto_variants[u].limit_w && auto_variants[u].warm_cap == auto_variants[v].warm_cap &&
            auto_variants[u].w_gap == auto_variants[v].w_gap)
            return u;
    return -1;
}

pp_status_t auto_build(pp_auto_cand_t *k, int row, int p, int m, const pp_auto_costs_t *c)
{
    auto_state_t a = {p, m, c, 0, 1.0, 1, 0, NULL, NULL, 1, NULL, NULL, NULL};
    pp_status_t st = PP_ERR_NOMEM;
    a.warm_cap = auto_variants[row].warm_cap;
    a.w_gap = auto_variants[row].w_gap;
    a.limit_w = auto_variants[row].limit_w;
    a.dev = calloc((size_t)p, sizeof *a.dev);
    a.choice = calloc((size_t)p, sizeof *a.choice);
    while (a.tsize < p)
        a.tsize *= 2;
    a.tree = malloc(sizeof *a.tree * 2 * (size_t)a.tsize);
    a.f_end = malloc(sizeof *a.f_end * (size_t)p * (size_t)m);
    a.i_end = malloc(sizeof *a.i_end * (size_t)p * (size_t)m);
    if (!a.dev || !a.choice || !a.tree || !a.f_end || !a.i_end) {
        fprintf(stderr, "auto: out of host memory building an order of %d x %d\n", p, m);
        goto fail;
    }
    st = auto_variant(&a, &k->order, &k->span);
    k->limit_used = a.limit_used;
fail:
    if (st != PP_OK) schedule_free(&k->order);
    free(a.dev);
    free(a.choice);
    free(a.tree);
    free(a.f_end);
    free(a.i_end);
    return st;
}

/* The stages' costs as the config prices them (hand-set `cost:` or the model on the config's GPU
 * description; a profile calibrates the prediction later, not the order), on a plan's outline. */
static pp_status_t auto_costs_of(pp_cost_model_t *cm, const pp_job_t *job, int p)
{
    pp_plan_t outline;
    memset(&outline, 0, sizeof outline);
    outline.n_devices = outline.n_stages = p;
    outline.chunks = 1;
    outline.n_mb = job->pipeline.micro_batches;
    outline.kind = job->kind;
    outline.boundary_bytes = (size_t)job->pipeline.micro_batch_size * (size_t)job->model.seq_len *
                             (size_t)job->model.hidden * pp_dtype_size(job->model.dtype);
    outline.slots_per_stage = calloc((size_t)p, sizeof *outline.slots_per_stage);
    PP_ALLOC_CHECK(outline.slots_per_stage);
    pp_status_t st = cost_model_build(cm, job, &outline, NULL, NULL, NULL);
    free(outline.slots_per_stage);
    return st;
}

pp_status_t generate_cfg_auto(pp_schedule_t *out, const pp_job_t *job)
{
    int p = job->pipeline.n_devices, m = job->pipeline.micro_batches;
    pp_cost_model_t cm;
    memset(out, 0, sizeof *out);
    memset(&cm, 0, sizeof cm);
    PP_CHECK(auto_costs_of(&cm, job, p));
    /* The in-flight limit of ZB-H1 (p micro-batches on every stage): the same activation memory. */
    pp_auto_costs_t c = {cm.f, cm.i, cm.w, cm.send, p};
    pp_status_t st = generate_auto(out, p, m, &c, job);
    cost_model_free(&cm);
    return st;
}
