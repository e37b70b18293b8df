/*
 * run_offload.c — run.offload: auto, the choice of the (stage, micro-batch) slots that go to the
 * host (run_offload_auto, run.h).
 *
 * The plain plan (nothing offloaded) is simulated once: a key's idle lifetime is the time from the
 * end of its forward to the start of its backward, and its round trip two copies of the stage's
 * offload bytes over the host link. Each device ranks its keys by lifetime less round trip,
 * longest first, and sizes each key's copies on the plain timeline: its OFFLOAD after as many
 * compute ops (`lag`) as end before its copy does (the slot is free again when the op after them
 * starts), its RELOAD as many before its backward (`ahead`) as leave the copy's time between the
 * end of the op before them and the backward's start.
 * A plan's slots are counted in program order, so a long lag or lookahead keeps a slot held and
 * may leave the peak where it was; shorter ones free more memory and expose more copy time. So
 * each pair of caps on lag and lookahead (CAPS, longest first) is tried: under each, the shortest
 * prefix of the ranking of every device over the limit under which memory_predict (the executor's
 * sizing) fits memory_limit_bytes (a binary search per device, all devices in each lowering: a
 * device's slots depend only on its own copies), simulated; the quickest step wins, the first on a
 * tie, and one as quick as the plain plan's ends the search. Nothing is offloaded where everything
 * fits; where nothing fits, every key under the caps the least over the limit.
 * Where the quickest of those costs time, slots may go in part (search_partial): under each caps
 * whose whole slots fit, with the fewest keys and with every key, each device keeps on it the most
 * of a slot's tensors (the smallest) that still fits, so its copies move the fewest bytes and are
 * the shortest; simulated, the quickest of all wins (whole slots on a tie).
 */
#include "run.h"

#include "model/cost.h"
#include "plan/stage_cfg.h"
#include "sim/cost_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

/* The caps tried on every key's lag and lookahead, in compute ops (-1: the key's own), from the
 * longest (the copies the most hidden, the fewest slots freed) to the shortest. A lag of 0 (the
 * OFFLOAD right after the forward) frees no slot the next op could not reuse anyway; a lookahead
 * of 0 (the RELOAD right before the backward phase) holds the slot the shortest. */
static const int CAPS[][2] = {{-1, -1}, {-1, 2}, {2, -1}, {2, 2}, {2, 1},
                              {1, 2},   {1, 1},  {2, 0},  {1, 0}};
#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* One key of one device's ranking. */
typedef struct auto_key {
    int key;      /* stage * n_mb + mb */
    double slack; /* idle lifetime less the round trip, ms: larger goes first */
    int lag;      /* the OFFLOAD after this many compute ops: they cover its copy */
    int ahead;    /* the RELOAD this many compute ops before the backward: they cover its copy */
} auto_key_t;

/* What one choice works with. */
typedef struct auto_ctx {
    pp_run_t *r;
    const pp_gpu_t *gpu;
    auto_key_t *keys;              /* every device's ranking, device after device */
    int first[PP_MAX_DEVICES + 1]; /* device d's ranking: keys[first[d] .. first[d + 1]) */
    pp_offload_key_t *pick;        /* [n_st * n_mb] scratch for plan_lower_partial */
    int *keep;                     /* [n_st] scratch for plan_lower_partial */
    const pp_cost_model_t *cm;     /* the plain plan's */
} auto_ctx_t;

/* One setting: how many of each device's ranking, what each device's stages keep of a slot, and
 * the caps. */
typedef struct auto_take {
    int take[PP_MAX_DEVICES];
    int keep[PP_MAX_DEVICES]; /* the slot's tensors kept on the device (offload_keep; 0: whole) */
    int cap_lag, cap_ahead;   /* -1: none */
} auto_take_t;

static int key_cmp(const void *x, const void *y)
{
    const auto_key_t *a = x, *b = y;
    if (a->slack != b->slack) return a->slack > b->slack ? -1 : 1;
    return (a->key > b->key) - (a->key < b->key);
}

static int capped(int v, int cap)
{
    return cap >= 0 && v > cap ? cap : v;
}

/* Device d's keys of the plain plan, ranked, from keys[n] on; comp: scratch of n_ops. Returns
 * the new n. */
static int rank_device(const pp_plan_t *plan, const pp_job_t *job, const pp_timeline_t *tl,
                       double gbps, int d, auto_key_t *keys, int n, int *comp)
{
    const int *prog = plan->prog_ops + plan->prog_begin[d];
    int n_prog = plan->prog_begin[d + 1] - plan->prog_begin[d], nc = 0, n0 = n;
    for (int j = 0; j < n_prog; j++) /* compute ordinal c -> plan op */
        if (pp_action_is_compute(plan->ops[prog[j]].kind)) comp[nc++] = prog[j];
    for (int c = 0; c < nc; c++) {
        const pp_op_t *o = &plan->ops[comp[c]];
        if (o->kind != PP_ACT_F) continue;
        int cb = -1; /* the key's first backward */
        for (int e = c + 1; e < nc && cb < 0; e++) {
            const pp_op_t *q = &plan->ops[comp[e]];
            if (q->stage == o->stage && q->mb == o->mb &&
                (q->kind == PP_ACT_B || q->kind == PP_ACT_I))
                cb = e;
        }
        if (cb < c + 2) continue; /* no compute op between: the lowering would keep it */
        pp_stage_cfg_t sc;
        plan_stage_cfg(&sc, job, plan, o->stage);
        double copy = gbps > 0 ? (double)stage_offload_bytes(&sc) / (gbps * 1e6) : 0.0;
        double f1 = tl->t[comp[c]].end_ms, b0 = tl->t[comp[cb]].start_ms;
        int lag = 1, ahead = 0;
        /* the slot is taken again at the earliest by the op after the lag-th (its start), and
         * the RELOAD's slot is free at the latest once the op before its place has ended */
        while (lag < cb - c - 1 && tl->t[comp[c + lag + 1]].start_ms - f1 < copy)
            lag++;
        while (ahead < cb - c - 1 && b0 - tl->t[comp[cb - ahead - 1]].end_ms < copy)
            ahead++;
        keys[n++] = (auto_key_t){o->stage * plan->n_mb + o->mb, b0 - f1 - 2.0 * copy, lag, ahead};
    }
    qsort(keys + n0, (size_t)(n - n0), sizeof *keys, key_cmp);
    return n;
}

/* Lower r's schedule with setting t into plan; predict its memory. */
static pp_status_t lower_taking(pp_plan_t *plan, pp_mem_pred_t *mem, auto_ctx_t *x,
                                const auto_take_t *t)
{
    const pp_run_t *r = x->r;
    memset(x->pick, 0, sizeof *x->pick * (size_t)r->sched.n_stages * (size_t)r->sched.n_mb);
    for (int d = 0; d < r->sched.n_devices; d++)
        for (int i = 0; i < t->take[d]; i++) {
            const auto_key_t *e = &x->keys[x->first[d] + i];
            x->pick[e->key] =
                (pp_offload_key_t){1, capped(e->lag, t->cap_lag), capped(e->ahead, t->cap_ahead)};
        }
    for (int st = 0; st < r->sched.n_stages; st++)
        x->keep[st] = t->keep[r->plan.stage_device[st]];
    PP_CHECK(plan_lower_partial(plan, &r->sched, &r->job, x->pick, x->keep));
    pp_status_t st = memory_predict(mem, &r->job, plan, x->gpu, r->have_prof ? &r->prof : NULL);
    if (st != PP_OK) plan_free(plan);
    return st;
}

/* Setting t's memory alone; *fits: every device within the limit, over[d]: device d is not;
 * *excess (may be NULL): the bytes over the limit, summed over the devices. */
static pp_status_t probe(auto_ctx_t *x, const auto_take_t *t, int *fits, int *over, double *excess)
{
    pp_plan_t plan;
    pp_mem_pred_t mem;
    PP_CHECK(lower_taking(&plan, &mem, x, t));
    plan_free(&plan);
    *fits = mem.n_over == 0;
    for (int d = 0; excess && d < mem.n_devices; d++)
        *excess += mem.dev[d].total > mem.limit ? mem.dev[d].total - mem.limit : 0.0;
    for (int d = 0; over && d < mem.n_devices; d++)
        over[d] = mem.dev[d].total > mem.limit;
    return PP_OK;
}

/* Every key of each device over the limit in the plain plan (r->mem), none of the others (a
 * device's copies can cost its neighbours a slot where pairing a transfer needs one). */
static void take_over(const auto_ctx_t *x, auto_take_t *t)
{
    for (int d = 0; d < x->r->sched.n_devices; d++)
        t->take[d] = x->r->mem.dev[d].total > x->r->mem.limit ? x->first[d + 1] - x->first[d] : 0;
}

/* Under t's caps, the fewest keys of each device's ranking that fit, into t->take (a binary
 * search per device: lo keys do not fit, hi do); *fits 0 when even all of them do not, and then
 * *excess their bytes over the limit. */
static pp_status_t shortest(auto_ctx_t *x, auto_take_t *t, int *fits, double *excess)
{
    int p = x->r->sched.n_devices, lo[PP_MAX_DEVICES], hi[PP_MAX_DEVICES], over[PP_MAX_DEVICES];
    take_over(x, t);
    *excess = 0.0;
    PP_CHECK(probe(x, t, fits, NULL, excess));
    if (!*fits) return PP_OK;
    for (int d = 0; d < p; d++)
        lo[d] = 0, hi[d] = t->take[d];
    for (;;) {
        int more = 0;
        for (int d = 0; d < p; d++) {
            t->take[d] = hi[d] > lo[d] + 1 ? (lo[d] + hi[d]) / 2 : hi[d];
            more |= hi[d] > lo[d] + 1;
        }
        if (!more) return probe(x, t, fits, NULL, excess); /* hi of each, checked together */
        PP_CHECK(probe(x, t, fits, over, NULL));
        for (int d = 0; d < p; d++)
            if (hi[d] > lo[d] + 1) *(over[d] ? &lo[d] : &hi[d]) = t->take[d];
    }
}

/* The step of setting t, simulated under the plain plan's cost model (a copy's price does not
 * depend on the plan). */
static pp_status_t step_of(auto_ctx_t *x, const auto_take_t *t, double *step)
{
    pp_plan_t plan;
    pp_mem_pred_t mem;
    pp_timeline_t tl;
    PP_CHECK(lower_taking(&plan, &mem, x, t));
    pp_status_t st = simulate_plan(&tl, &plan, x->cm);
    plan_free(&plan);
    PP_CHECK(st);
    *step = tl.step_ms[0];
    timeline_free(&tl);
    return PP_OK;
}

/* Every caps of CAPS under which every key (take_over) fits, each with the fewest keys of each
 * device's ranking that still fit (shortest), simulated: the quickest into *best (its step into
 * *best_ms), the search ending at one as quick as the plain plan (plain_ms: nothing is quicker);
 * *excess 0. Where none fits, the caps the least over the limit, every key, and *excess its bytes
 * over. */
static pp_status_t search(auto_ctx_t *x, double plain_ms, auto_take_t *best, double *excess,
                          double *best_ms_out)
{
    double best_ms = INFINITY;
    *excess = INFINITY;
    for (int i = 0; i < N_OF(CAPS); i++) {
        auto_take_t t = {.cap_lag = CAPS[i][0], .cap_ahead = CAPS[i][1]};
        int fits;
        double over, ms;
        PP_CHECK(shortest(x, &t, &fits, &over));
        if (!fits) {
            if (isinf(best_ms) && over < *excess) *best = t, *excess = over;
            continue;
        }
        PP_CHECK(step_of(x, &t, &ms));
        if (ms < best_ms) *best = t, best_ms = ms, *excess = 0.0;
        if (best_ms <= plain_ms * (1.0 + 1e-9)) break;
    }
    *best_ms_out = best_ms;
    return PP_OK;
}

/* The most tensors of a slot device d's stages may keep on the device (stage_offload_pieces). */
static int device_pieces(const auto_ctx_t *x, int d)
{
    const pp_run_t *r = x->r;
    int most = 0;
    for (int s = 0; s < r->plan.n_stages; s++) {
        if (r->plan.stage_device[s] != d) continue;
        pp_stage_cfg_t c;
        plan_stage_cfg(&c, &r->job, &r->plan, s);
        int n = stage_offload_pieces(&c);
        most = n > most ? n : most;
    }
    return most;
}

/* With t's keys and caps (which fit with whole slots), the most tensors each offloading device
 * keeps of a slot and still fits, into t->keep: the fewest bytes its copies move (a binary search
 * per device, as in shortest: lo fits, hi does not; keeping more only adds memory). */
static pp_status_t most_kept(auto_ctx_t *x, auto_take_t *t)
{
    int p = x->r->sched.n_devices, lo[PP_MAX_DEVICES], hi[PP_MAX_DEVICES], over[PP_MAX_DEVICES];
    int fits;
    for (int d = 0; d < p; d++) {
        lo[d] = 0;
        hi[d] = t->take[d] > 0 && d < x->r->plan.n_devices ? device_pieces(x, d) + 1 : 1;
        t->keep[d] = 0;
    }
    for (;;) {
        int more = 0;
        for (int d = 0; d < p; d++) {
            t->keep[d] = hi[d] > lo[d] + 1 ? (lo[d] + hi[d]) / 2 : lo[d];
            more |= hi[d] > lo[d] + 1;
        }
        if (!more) return PP_OK; /* lo of each: each fit when it was tried */
        PP_CHECK(probe(x, t, &fits, over, NULL));
        for (int d = 0; d < p; d++)
            if (hi[d] > lo[d] + 1) *(over[d] ? &hi[d] : &lo[d]) = t->keep[d];
    }
}

/* Partial slots, where whole ones cost time (best_ms over the plain plan's): under each caps of
 * CAPS, with the fewest keys that fit whole (shortest) and with every key of each device over the
 * limit, each keeping the most of a slot that still fits (most_kept), simulated; one quicker than
 * *best replaces it. */
static pp_status_t search_partial(auto_ctx_t *x, double plain_ms, auto_take_t *best,
                                  double *best_ms)
{
    for (int i = 0; i < N_OF(CAPS) && *best_ms > plain_ms * (1.0 + 1e-9); i++)
        for (int every = 0; every < 2; every++) {
            auto_take_t t = {.cap_lag = CAPS[i][0], .cap_ahead = CAPS[i][1]};
            int fits, any = 0;
            double over = 0.0, ms;
            if (every) {
                take_over(x, &t);
                PP_CHECK(probe(x, &t, &fits, NULL, NULL));
            } else {
                PP_CHECK(shortest(x, &t, &fits, &over));
            }
            if (!fits) break; /* whole slots do not fit under these caps; parts add kept regions */
            PP_CHECK(most_kept(x, &t));
            for (int d = 0; d < x->r->sched.n_devices; d++)
                any |= t.keep[d] > 0;
            if (!any) continue;
            PP_CHECK(step_of(x, &t, &ms));
            if (ms < *best_ms) *best = t, *best_ms = ms;
        }
    return PP_OK;
}

/* The bytes over the limit of memory prediction m, summed over the devices. */
static double over_limit(const pp_mem_pred_t *m)
{
    double over = 0.0;
    for (int d = 0; d < m->n_devices; d++)
        over += m->dev[d].total > m->limit ? m->dev[d].total - m->limit : 0.0;
    return over;
}

/* Lower r->plan with the chosen setting (a valid plan replaces it; where nothing fits and no
 * setting comes nearer than the plain plan, that stays); the note when it does not fit. */
static pp_status_t choose(auto_ctx_t *x, const pp_timeline_t *tl, int *comp)
{
    pp_run_t *r = x->r;
    double gbps = cost_host_link_gbps(&r->job), excess;
    int n = 0;
    for (int d = 0; d < r->plan.n_devices; d++) {
        x->first[d] = n;
        n = rank_device(&r->plan, &r->job, tl, gbps, d, x->keys, n, comp);
    }
    x->first[r->plan.n_devices] = n;
    auto_take_t t;
    double best_ms;
    PP_CHECK(search(x, tl->step_ms[0], &t, &excess, &best_ms));
    r->offload_whole_ms = best_ms;
    if (excess == 0.0) PP_CHECK(search_partial(x, tl->step_ms[0], &t, &best_ms));
    if (excess > 0.0 && excess >= over_limit(&r->mem)) { /* copies that buy nothing: none */
        snprintf(
            r->offload_note, sizeof r->offload_note,
            "ppsched: run.offload: auto: device %d needs %.2f GiB, over the limit of %.2f GiB, "
            "and sending its slots to the host does not lower it (raise run.memory_limit, or "
            "add devices)",
            r->mem.fullest, r->mem.dev[r->mem.fullest].total / GIB, r->mem.limit / GIB);
        return PP_OK;
    }
    pp_plan_t plan;
    pp_mem_pred_t mem;
    PP_CHECK(lower_taking(&plan, &mem, x, &t));
    pp_status_t st = plan_validate(&plan);
    if (st != PP_OK) {
        plan_free(&plan);
        return st;
    }
    plan_free(&r->plan);
    r->plan = plan;
    r->mem = mem;
    if (mem.n_over > 0)
        snprintf(r->offload_note, sizeof r->offload_note,
                 "ppsched: run.offload: auto: device %d needs %.2f GiB with every slot it can "
                 "offload on the host, over the limit of %.2f GiB (raise run.memory_limit to at "
                 "least that, or add devices)",
                 mem.fullest, mem.dev[mem.fullest].total / GIB, mem.limit / GIB);
    return PP_OK;
}

/* The plain plan's memory; where a device is over the limit, its cost model and timeline. */
static pp_status_t plain_facts(pp_run_t *r, const pp_gpu_t *present, const pp_gpu_t *gpu,
                               pp_cost_model_t *cm, pp_timeline_t *tl)
{
    const pp_profile_t *prof = r->have_prof ? &r->prof : NULL;
    PP_CHECK(memory_predict(&r->mem, &r->job, &r->plan, gpu, prof));
    if (r->mem.n_over == 0) return PP_OK; /* nothing to choose: no timeline needed */
    PP_CHECK(cost_model_build(cm, &r->job, &r->plan, present, prof, NULL));
    return simulate_plan(tl, &r->plan, cm);
}

pp_status_t run_offload_auto(pp_run_t *r, const pp_gpu_t *present)
{
    if (r->job.run.offload != PP_OFFLOAD_AUTO) return PP_OK;
    const pp_gpu_t *gpu = cost_gpu_for(&r->job.cost_src, present, r->have_prof ? &r->prof : NULL);
    if (gpu == r->offload_gpu) return PP_OK;
    r->offload_note[0] = '\0';
    r->offload_whole_ms = 0.0;
    if (r->plan.offload) { /* a choice for another GPU: from the plain plan again */
        pp_plan_t plain;
        PP_CHECK(plan_lower(&plain, &r->sched, &r->job));
        plan_free(&r->plan);
        r->plan = plain;
    }
    r->offload_gpu = gpu;
    pp_cost_model_t cm = {0};
    pp_timeline_t tl = {0};
    pp_status_t st = plain_facts(r, present, gpu, &cm, &tl);
    if (st != PP_OK || r->mem.n_over == 0) { /* everything fits: the plain plan */
        cost_model_free(&cm);
        timeline_free(&tl);
        return st;
    }
    /* a key is a (stage, micro-batch); every data-parallel replica ranks its own copy of each */
    size_t keys = (size_t)r->plan.n_stages * (size_t)r->plan.n_mb,
           ranked = keys * (size_t)plan_replicas(&r->plan);
    auto_ctx_t x = {.r = r, .gpu = gpu, .cm = &cm};
    x.pick = malloc(sizeof *x.pick * (keys ? keys : 1));
    x.keep = calloc((size_t)r->plan.n_stages, sizeof *x.keep);
    x.keys = malloc(sizeof *x.keys * (ranked ? ranked : 1));
    int *comp = malloc(sizeof *comp * (size_t)(r->plan.n_ops > 0 ? r->plan.n_ops : 1));
    st = PP_ERR_NOMEM;
    if (x.pick && x.keep && x.keys && comp)
        st = choose(&x, &tl, comp);
    else
        fprintf(stderr, "%s:%d: out of host memory choosing offload slots\n", __FILE__, __LINE__);
    free(x.pick);
    free(x.keep);
    free(x.keys);
    free(comp);
    cost_model_free(&cm);
    timeline_free(&tl);
    return st;
}
