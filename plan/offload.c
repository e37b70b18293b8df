/*
 * offload.c — run.offload in the core: where the lowering puts each micro-batch's OFFLOAD and
 * RELOAD (offload_place, and the lowering's part that inserts them), the rules a plan with them
 * must keep (plan_check_offload), and the device bytes of a plan with and without offload
 * (plan_stage_cfg, plan_device_bytes).
 *
 * A micro-batch's ops fall in two phases: the forward phase (RECV_F, F, SEND_F) fills the slot,
 * the backward phase (RECV_B, B or I, W, SEND_B) reads it. An offloaded micro-batch holds a device
 * slot in each phase and a pinned host slot in between: OFFLOAD (offload stream) copies the slot's
 * backward-read range out after the forward phase, RELOAD (load stream) copies it into a slot
 * before the backward phase. The lowering's part (lower_internal.h) places the copies in the
 * programs and gives each phase and host slot its holder; the rest reads programs and plans only
 * and prints `device d, step i, action X: ...` for a broken rule.
 */
#include "lower_internal.h"
#include "stage_cfg.h"

#include <stdlib.h>
#include <string.h>

/* 1 for the kinds of the backward phase (they use the slot RELOAD fills), by kind. */
static const char backward_phase[PP_ACT_COUNT] = {
    [PP_ACT_B] = 1,      [PP_ACT_I] = 1,      [PP_ACT_W] = 1,
    [PP_ACT_SEND_B] = 1, [PP_ACT_RECV_B] = 1, [PP_ACT_RELOAD] = 1,
};

int offload_phase(pp_action_kind_t k)
{
    return (int)k >= 0 && k < PP_ACT_COUNT ? backward_phase[k] : 0;
}

/* ============================== Placement ===================================================== */

/* Per (stage, mb) of one program: the forward's and the first backward's compute ordinal, the
 * last forward-phase action and the first backward-phase action. */
typedef struct place_scan {
    int *f, *b, *last0, *first1; /* [n_st * n_mb], -1 when absent */
    int *comp;                   /* [n]: action index of compute ordinal c */
    int *upto;                   /* [n]: compute actions at index <= i */
} place_scan_t;

static void scan_free(place_scan_t *S)
{
    free(S->f);
    free(S->b);
    free(S->last0);
    free(S->first1);
    free(S->comp);
    free(S->upto);
}

static pp_status_t scan_program(place_scan_t *S, const pp_program_t *prog, int n_st, int n_mb)
{
    size_t keys = (size_t)n_st * (size_t)n_mb, n = (size_t)(prog->n > 0 ? prog->n : 1);
    memset(S, 0, sizeof *S);
    S->f = malloc(sizeof(int) * keys);
    S->b = malloc(sizeof(int) * keys);
    S->last0 = malloc(sizeof(int) * keys);
    S->first1 = malloc(sizeof(int) * keys);
    S->comp = malloc(sizeof(int) * n);
    S->upto = malloc(sizeof(int) * n);
    if (!S->f || !S->b || !S->last0 || !S->first1 || !S->comp || !S->upto) {
        scan_free(S);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory placing offload copies");
    }
    for (size_t k = 0; k < keys; k++)
        S->f[k] = S->b[k] = S->last0[k] = S->first1[k] = -1;
    int nc = 0;
    for (int i = 0; i < prog->n; i++) {
        const pp_action_t *a = &prog->a[i];
        if (a->stage < 0 || a->stage >= n_st || a->mb < 0 || a->mb >= n_mb) continue;
        size_t key = (size_t)a->stage * (size_t)n_mb + (size_t)a->mb;
        int comp = pp_action_is_compute(a->kind);
        if (comp) S->comp[nc] = i;
        if (a->kind == PP_ACT_F && S->f[key] < 0) S->f[key] = nc;
        if ((a->kind == PP_ACT_B || a->kind == PP_ACT_I) && S->b[key] < 0) S->b[key] = nc;
        if (!offload_phase(a->kind)) S->last0[key] = i;
        if (offload_phase(a->kind) && S->first1[key] < 0) S->first1[key] = i;
        nc += comp;
        S->upto[i] = nc;
    }
    return PP_OK;
}

/* Where the RELOAD of a key whose forward is compute ordinal f and first backward b goes, with
 * the OFFLOAD `lag` compute ops after f and the RELOAD `ahead` before b (0: next to its phase's
 * actions): its action index, or -1 when no compute op would then run with neither copy holding
 * the slot (not worth it). *off gets the OFFLOAD's. */
static int place_key(const place_scan_t *S, size_t key, int n_comp, int lag, int ahead, int *off)
{
    int f = S->f[key], b = S->b[key];
    /* OFFLOAD after the lag-th compute op (the copy runs beside them; the slot is free after),
     * RELOAD `ahead` compute ops before the backward, each outside its phase's actions. */
    *off = f + lag < n_comp && S->comp[f + lag] > S->last0[key] ? S->comp[f + lag] : S->last0[key];
    int rel = b - ahead >= 0 ? S->comp[b - ahead] : S->comp[0];
    if (S->first1[key] >= 0 && S->first1[key] < rel) rel = S->first1[key];
    if (rel - 1 <= *off || S->upto[rel - 1] - S->upto[*off] < 1) return -1;
    return rel;
}

pp_status_t offload_place(const pp_program_t *prog, int n_st, int n_mb, int lookahead,
                          const pp_offload_key_t *pick, int *off_after, int *rel_before)
{
    place_scan_t S;
    PP_CHECK(scan_program(&S, prog, n_st, n_mb));
    int n_comp = prog->n > 0 ? S.upto[prog->n - 1] : 0;
    for (size_t key = 0; key < (size_t)n_st * (size_t)n_mb; key++) {
        int f = S.f[key], b = S.b[key], off = -1, rel = -1;
        if (f < 0 || b < 0 || b <= f || (pick && !pick[key].on)) continue;
        int lag = pick ? pick[key].lag : 1, ahead = pick ? pick[key].ahead : lookahead;
        int least = pick ? 0 : 1; /* without a pick, the next op and `lookahead` or nothing */
        lag = lag > least ? lag : least;
        ahead = ahead > least ? ahead : least;
        /* a pick too long for the key's lifetime is shortened, the longer of the two first */
        for (;;) {
            rel = place_key(&S, key, n_comp, lag, ahead, &off);
            if (rel >= 0 || (lag <= least && ahead <= least)) break;
            if (lag >= ahead)
                lag--;
            else
                ahead--;
        }
        if (rel < 0) continue;
        off_after[key] = off;
        rel_before[key] = rel;
    }
    scan_free(&S);
    return PP_OK;
}

/* ============================== The lowering's part (lower_internal.h) ====================== */

/* run.offload: whether the lowering places copies (activations: every eligible key; auto: the keys
 * `pick` chooses, none without a choice), what each stage with a key chosen keeps on the device
 * (auto: keep[s]), and the bytes each copy moves per stage (the stage's backward-read range less
 * what it keeps, stage_offload_bytes; 0 without offload). */
void lower_offload_setup(lower_t *L, pp_plan_t *plan, const pp_job_t *job,
                         const pp_offload_key_t *pick, const int *keep)
{
    int most = 0; /* the longest lookahead chosen */
    size_t keys = (size_t)L->n_st * (size_t)L->n_mb;
    L->pick = NULL;
    if (job && job->run.offload == PP_OFFLOAD_AUTO && pick) {
        int any = 0;
        for (size_t k = 0; k < keys; k++) {
            any |= pick[k].on;
            most = pick[k].on && pick[k].ahead > most ? pick[k].ahead : most;
        }
        L->pick = any ? pick : NULL;
    }
    L->offload = job && (job->run.offload == PP_OFFLOAD_ACTIVATIONS || L->pick);
    plan->offload = L->offload;
    plan->offload_lookahead = L->pick ? most : L->offload ? LOWER_OFFLOAD_LOOKAHEAD : 0;
    L->offload_bytes = plan->offload_bytes;
    L->offload_keep = plan->offload_keep;
    for (size_t k = 0; L->pick && keep && k < keys; k++)
        if (L->pick[k].on) plan->offload_keep[k / (size_t)L->n_mb] = keep[k / (size_t)L->n_mb];
    for (int s = 0; L->offload && s < L->n_st; s++) {
        pp_stage_cfg_t c;
        plan_stage_cfg(&c, job, plan, s);
        plan->offload_bytes[s] = stage_offload_bytes(&c);
    }
}

void lower_offload_unkeep(lower_t *L, pp_plan_t *plan, const pp_job_t *job)
{
    for (int s = 0; L->offload && s < L->n_st; s++) {
        int sends = 0;
        for (int mb = 0; mb < L->n_mb && !sends; mb++)
            sends = L->off_after[(size_t)s * L->n_mb + mb] >= 0;
        if (sends || plan->offload_keep[s] == 0) continue;
        pp_stage_cfg_t c;
        plan->offload_keep[s] = 0;
        plan_stage_cfg(&c, job, plan, s);
        plan->offload_bytes[s] = stage_offload_bytes(&c);
    }
}

/* offload auto: each stage's host_cap, from the copies placed (copy_head): the most keys between
 * their OFFLOAD and their RELOAD at once in program order (a RELOAD before action i gives its host
 * slot back before an OFFLOAD after it takes one), and LOWER_HOST_SPARE. */
static pp_status_t lower_host_caps(lower_t *L)
{
    int *now = calloc((size_t)L->n_st, sizeof *now);
    L->host_cap = calloc((size_t)L->n_st, sizeof *L->host_cap);
    if (!now || !L->host_cap) {
        free(now);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory placing offload copies");
    }
    size_t base = 0;
    for (int d = 0; d < L->n_dev; base += (size_t)L->sched->prog[d].n, d++)
        for (int i = 0; i < L->sched->prog[d].n; i++)
            for (int which = 0; which < 2; which++)
                for (int key = L->copy_head[2 * (base + (size_t)i) + which]; key >= 0;
                     key = L->copy_next[2 * key + which]) {
                    int s = key / L->n_mb;
                    now[s] += which ? 1 : -1;
                    if (now[s] > L->host_cap[s]) L->host_cap[s] = now[s];
                }
    for (int s = 0; s < L->n_st; s++)
        L->host_cap[s] = L->host_cap[s] > 0 ? L->host_cap[s] + LOWER_HOST_SPARE : 0;
    free(now);
    return PP_OK;
}

/* run.offload: where each device's copies go (offload_place); counts them per device into
 * `copies`. */
pp_status_t lower_offload_marks(lower_t *L, int *copies)
{
    size_t keys = (size_t)L->n_st * (size_t)L->n_mb;
    for (int d = 0; d < L->n_dev; d++)
        copies[d] = 0;
    if (!L->offload) return PP_OK;
    size_t n_written = 0;
    for (int d = 0; d < L->n_dev; d++)
        n_written += (size_t)L->sched->prog[d].n;
    L->off_after = malloc(sizeof *L->off_after * keys);
    L->rel_before = malloc(sizeof *L->rel_before * keys);
    L->copy_head = malloc(sizeof *L->copy_head * 2 * (n_written ? n_written : 1));
    L->copy_next = malloc(sizeof *L->copy_next * 2 * keys);
    if (!L->off_after || !L->rel_before || !L->copy_head || !L->copy_next)
        PP_FAIL(PP_ERR_NOMEM, "out of host memory placing offload copies");
    for (size_t k = 0; k < keys; k++)
        L->off_after[k] = L->rel_before[k] = -1;
    for (size_t i = 0; i < 2 * n_written; i++)
        L->copy_head[i] = -1;
    for (int d = 0; d < L->n_dev; d++)
        PP_CHECK(offload_place(&L->sched->prog[d], L->n_st, L->n_mb, LOWER_OFFLOAD_LOOKAHEAD,
                               L->pick, L->off_after, L->rel_before));
    size_t base = 0; /* device d's first written action */
    for (int d = 0; d < L->n_dev; base += (size_t)L->sched->prog[d].n, d++) {
        for (int i = 0; i < L->sched->prog[d].n; i++) {
            const pp_action_t *a = &L->sched->prog[d].a[i];
            int key = a->stage * L->n_mb + a->mb;
            if (a->kind != PP_ACT_F || L->off_after[key] < 0) continue;
            int *h = &L->copy_head[2 * (base + (size_t)L->rel_before[key])];
            L->copy_next[2 * key] = h[0], h[0] = key;
            h = &L->copy_head[2 * (base + (size_t)L->off_after[key]) + 1];
            L->copy_next[2 * key + 1] = h[0], h[0] = key;
            copies[d] += 2;
        }
    }
    return L->pick ? lower_host_caps(L) : PP_OK;
}

/* The copies of device d placed right before (kind RELOAD, at rel_before) or right after (kind
 * OFFLOAD, at off_after) its written action i. */
void lower_put_copies(lower_t *L, int *n, int d, size_t base, int i, pp_action_kind_t kind)
{
    if (!L->offload) return;
    int which = kind == PP_ACT_OFFLOAD;
    for (int key = L->copy_head[2 * (base + (size_t)i) + which]; key >= 0;
         key = L->copy_next[2 * key + which]) {
        int id = *n;
        lower_put_op(L, n, d, kind, key / L->n_mb, key % L->n_mb, i, 1);
        L->ops[id].bytes = L->offload_bytes[key / L->n_mb];
    }
}

void lower_host_slot_step(lower_t *L, host_state_t *H, int id)
{
    pp_op_t *o = &L->ops[id];
    size_t base = (size_t)o->stage * L->n_mb, key = base + (size_t)o->mb;
    if (o->kind == PP_ACT_OFFLOAD) {
        int h = 0, cap = L->host_cap ? L->host_cap[o->stage] : 0;
        while (H->busy[base + h]) /* at most n_mb holders at once, so h < n_mb */
            h++;
        for (int j = h + 1; j < cap && j < L->n_mb; j++) /* the free one given back first */
            if (!H->busy[base + j] && H->reader[base + j] < H->reader[base + h]) h = j;
        H->busy[base + h] = 1;
        H->held[key] = h;
        lower_add_dep(L, id, H->reader[base + h]);
        if (h + 1 > L->host_slots[o->stage]) L->host_slots[o->stage] = h + 1;
    } else if (o->kind == PP_ACT_RELOAD && H->held[key] >= 0) {
        H->busy[base + H->held[key]] = 0;
        H->reader[base + H->held[key]] = id;
    } else {
        return;
    }
    o->host = H->held[key];
}

/* The unit that holds a slot: (stage, mb) in its forward phase (2 * key) or, for a micro-batch the
 * lowering offloads, its backward phase (2 * key + 1), which holds a slot of its own. */
size_t lower_slot_unit(const lower_t *L, const pp_op_t *o)
{
    size_t key = (size_t)o->stage * L->n_mb + (size_t)o->mb;
    int split = L->offload && L->off_after[key] >= 0 && offload_phase(o->kind);
    return 2 * key + (size_t)split;
}

/* ============================== Memory ======================================================== */

size_t plan_device_bytes(const pp_plan_t *plan, const pp_job_t *job, int d, int plain)
{
    size_t b = 0;
    for (int s = 0; s < plan->n_stages; s++) {
        if (!plan_stage_on(plan, s, d)) continue;
        pp_stage_cfg_t c;
        plan_stage_cfg(&c, job, plan, s);
        if (plain && plan->plain_slots_per_stage) {
            c.n_slots = plan->plain_slots_per_stage[s];
            c.offload_keep = c.n_keep_slots = 0; /* whole slots */
        }
        b += stage_device_bytes(&c);
    }
    return b;
}

size_t plan_host_bytes(const pp_plan_t *plan, int d)
{
    size_t b = 0;
    for (int s = 0; s < plan->n_stages; s++)
        if (plan_stage_on(plan, s, d) && plan->host_slots_per_stage && plan->offload_bytes)
            b += (size_t)plan->host_slots_per_stage[s] * plan->offload_bytes[s];
    return b;
}

pp_status_t plan_plain_slots(pp_plan_t *plan)
{
    size_t keys = (size_t)plan->n_stages * (size_t)plan->n_mb;
    int *last = malloc(sizeof *last * (keys ? keys : 1));
    char *live = calloc(keys ? keys : 1, 1);
    int *now = calloc((size_t)plan->n_stages, sizeof *now);
    if (!last || !live || !now) {
        free(last);
        free(live);
        free(now);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory counting slots");
    }
    for (int s = 0; s < plan->n_stages; s++)
        plan->plain_slots_per_stage[s] = 0;
    for (int j = 0; j < plan->n_ops; j++) {
        const pp_op_t *o = &plan->ops[plan->prog_ops[j]];
        if (!pp_action_is_copy(o->kind)) last[(size_t)o->stage * plan->n_mb + o->mb] = j;
    }
    for (int j = 0; j < plan->n_ops; j++) { /* program order, device by device */
        const pp_op_t *o = &plan->ops[plan->prog_ops[j]];
        size_t key = (size_t)o->stage * plan->n_mb + o->mb;
        if (pp_action_is_copy(o->kind)) continue;
        if (!live[key]) {
            live[key] = 1;
            if (++now[o->stage] > plan->plain_slots_per_stage[o->stage])
                plan->plain_slots_per_stage[o->stage] = now[o->stage];
        }
        if (last[key] == j) now[o->stage]--;
    }
    free(last);
    free(live);
    free(now);
    return PP_OK;
}

/* ============================== Rules ========================================================= */

static pp_status_t bad(const pp_plan_t *plan, int i, const char *what)
{
    char txt[32];
    const pp_op_t *o = &plan->ops[i];
    pp_action_t a = {o->kind, o->stage, o->mb, 0};
    fprintf(stderr, "device %d, step %d, action %s: %s\n", o->device, o->pos,
            action_format(&a, txt, sizeof txt), what);
    return PP_ERR_INPUT;
}

static int depends_on(const pp_plan_t *plan, int i, int on)
{
    for (int j = 0; j < plan->ops[i].n_deps; j++)
        if (plan->deps[plan->ops[i].dep_begin + j] == on) return 1;
    return 0;
}

/* The copies of one offloaded (stage, mb): OFFLOAD `off`, RELOAD `rel`, its forward `f` and the
 * ops of its backward phase (`idx` by kind). */
static pp_status_t check_pair(const pp_plan_t *plan, const int *idx, int off, int rel, int f)
{
    const pp_op_t *o = &plan->ops[off], *r = &plan->ops[rel];
    int s = o->stage, host_n = plan->host_slots_per_stage ? plan->host_slots_per_stage[s] : 0;
    if (f < 0 || plan->ops[f].pos > o->pos || !depends_on(plan, off, f))
        return bad(plan, off, "does not follow and wait for its forward");
    if (r->device != o->device || r->pos < o->pos || !depends_on(plan, rel, off))
        return bad(plan, rel, "does not follow and wait for its OFFLOAD on the same device");
    if (o->host < 0 || o->host >= host_n || r->host != o->host)
        return bad(plan, rel, "its host slot is not its OFFLOAD's, or is out of range");
    size_t want = plan->offload_bytes ? plan->offload_bytes[s] : 0;
    if (o->bytes != want || r->bytes != want)
        return bad(plan, off, "does not move the stage's offload bytes");
    for (int k = 0; k < PP_ACT_COUNT; k++) {
        int i = idx[k];
        if (i < 0 || k == PP_ACT_RELOAD || !offload_phase((pp_action_kind_t)k)) continue;
        if (plan->ops[i].pos < r->pos) return bad(plan, i, "runs before its RELOAD");
        if (plan->ops[i].slot != r->slot)
            return bad(plan, i, "uses another slot than its RELOAD filled");
        int reads = k == PP_ACT_B || k == PP_ACT_I || k == PP_ACT_RECV_B;
        if (reads && !depends_on(plan, i, rel)) return bad(plan, i, "does not wait for its RELOAD");
    }
    return PP_OK;
}

pp_status_t plan_check_offload(const pp_plan_t *plan)
{
    size_t keys = (size_t)plan->n_stages * (size_t)plan->n_mb;
    int *idx = malloc(sizeof *idx * (size_t)PP_ACT_COUNT * (keys ? keys : 1));
    PP_ALLOC_CHECK(idx);
    for (size_t j = 0; j < (size_t)PP_ACT_COUNT * keys; j++)
        idx[j] = -1;
    pp_status_t st = PP_OK;
    for (int i = 0; i < plan->n_ops && st == PP_OK; i++) {
        const pp_op_t *o = &plan->ops[i];
        /* a compute kind may also run on the other compute stream (an overlapped pair's half) */
        int fits = o->role == pp_role_of_kind(o->kind) ||
                   (pp_action_is_compute(o->kind) && pp_role_row(o->role)->computes);
        if (!fits) st = bad(plan, i, "runs on the wrong stream");
        if (pp_action_is_copy(o->kind) && !plan->offload)
            st = bad(plan, i, "a copy in a plan without run.offload");
        if (st == PP_OK && pp_action_is_compute(o->kind) && plan->offload_keep &&
            plan->offload_keep[o->stage] > 0) {
            int k = plan->keep_slot ? plan->keep_slot[(size_t)o->stage * plan->n_mb + o->mb] : -1;
            if (k < 0 || k >= plan->keep_slots_per_stage[o->stage])
                st = bad(plan, i, "its kept region is out of range");
        }
        if (o->kind == PP_ACT_REDUCE) continue; /* its mb is a bucket (validate.c checks it) */
        idx[((size_t)o->stage * plan->n_mb + o->mb) * PP_ACT_COUNT + o->kind] = i;
    }
    for (size_t key = 0; key < keys && st == PP_OK; key++) {
        const int *k = &idx[key * PP_ACT_COUNT];
        int off = k[PP_ACT_OFFLOAD], rel = k[PP_ACT_RELOAD];
        if (off < 0 && rel < 0) continue;
        if (off < 0 || rel < 0)
            st = bad(plan, off < 0 ? rel : off, "has no matching OFFLOAD/RELOAD");
        else
            st = check_pair(plan, k, off, rel, k[PP_ACT_F]);
    }
    free(idx);
    return st;
}
