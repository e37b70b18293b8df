/*
 * generate_zb.c — zero-bubble generators on loop placement: ZB-H2 (one stage per device) and
 * interleaved zero-bubble (v stages per device). Both split the backward into I and W.
 *
 * ZB-H2 comes from a list scheduler run at unit costs (F = I = W = 1): the order is what each
 * device would run when it picks, whenever it is free, a ready I first (the critical path), else
 * the next F while fewer than 2p - 1 micro-batches are in flight on its stage, else the oldest
 * pending W. With m >= 2p - 1 the result spans (p-1)T_F + m(T_F + T_I + T_W) for any costs with
 * T_W <= T_F = T_I, the lower bound of one step (the last stage cannot start before p - 1
 * forwards), and holds at most 2p - 1 micro-batches per stage (checked by
 * tests/cpu/test_generate_kinds.c). Results are compute-only; the caller frees `out`.
 */
#include "generate.h"

#include <stdlib.h>
#include <string.h>

/* ============================== ZB-H2 ========================================================= */

/* Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024), Section 3.1, Figure 4: ZB-H2 adds
 * forwards to the warm-up until the first I arrives and moves W passes to the tail, turning the
 * trapezoid into a parallelogram; Section 3.2's heuristic (I first, F within a memory limit, W to
 * fill) builds it here. State of the unit-cost list scheduler, one stage per device: */
typedef struct zbh2 {
    int p, m;
    int *f_end, *i_end;   /* [p*m]: time F / I of (stage, mb) ends, -1 not yet run */
    int *next_f, *next_i; /* [p]: next micro-batch to forward / input-backward */
    int *w_head, *w_tail; /* [p]: pending W queue of the stage: mbs w_head .. w_tail-1 */
    int *free_at;         /* [p]: time the device is next free */
} zbh2_t;

static void zbh2_free(zbh2_t *z)
{
    free(z->f_end);
    free(z->i_end);
    free(z->next_f);
    free(z->next_i);
    free(z->w_head);
    free(z->w_tail);
    free(z->free_at);
}

/* One decision of device d at time t: push the action it runs, or nothing when none is ready. */
static pp_status_t zbh2_pick(zbh2_t *z, pp_schedule_t *out, int d, int t, int *picked)
{
    int p = z->p, m = z->m, cap = 2 * p - 1;
    int k = z->next_i[d];
    *picked = 1;
    if (k < m && z->f_end[d * m + k] >= 0 && z->f_end[d * m + k] <= t &&
        (d == p - 1 || (z->i_end[(d + 1) * m + k] >= 0 && z->i_end[(d + 1) * m + k] <= t))) {
        z->i_end[d * m + k] = t + 1;
        z->next_i[d]++;
        z->w_tail[d]++;
        return schedule_push(out, d, PP_ACT_I, d, k);
    }
    k = z->next_f[d];
    if (k < m && k - z->w_head[d] < cap &&
        (d == 0 || (z->f_end[(d - 1) * m + k] >= 0 && z->f_end[(d - 1) * m + k] <= t))) {
        z->f_end[d * m + k] = t + 1;
        z->next_f[d]++;
        return schedule_push(out, d, PP_ACT_F, d, k);
    }
    if (z->w_head[d] < z->w_tail[d]) return schedule_push(out, d, PP_ACT_W, d, z->w_head[d]++);
    *picked = 0;
    return PP_OK;
}

static pp_status_t fill_zbh2(pp_schedule_t *out, int p, int m)
{
    zbh2_t z = {.p = p, .m = m};
    pp_status_t st = PP_OK;
    size_t pm = (size_t)p * (size_t)m;
    z.f_end = malloc(sizeof(int) * pm);
    z.i_end = malloc(sizeof(int) * pm);
    z.next_f = calloc((size_t)p, sizeof(int));
    z.next_i = calloc((size_t)p, sizeof(int));
    z.w_head = calloc((size_t)p, sizeof(int));
    z.w_tail = calloc((size_t)p, sizeof(int));
    z.free_at = calloc((size_t)p, sizeof(int));
    if (!z.f_end || !z.i_end || !z.next_f || !z.next_i || !z.w_head || !z.w_tail || !z.free_at) {
        fprintf(stderr, "%s:%d: out of host memory generating zb-h2\n", __FILE__, __LINE__);
        st = PP_ERR_NOMEM;
        goto fail;
    }
    for (size_t j = 0; j < pm; j++)
        z.f_end[j] = z.i_end[j] = -1;
    /* Every unit of time each free device runs one action; 3m actions per device in all. */
    int left = 3 * p * m;
    for (int t = 0; left > 0; t++) {
        if (t > 6 * p * m + 3 * p) {
            st = PP_ERR_INTERNAL;
            fprintf(stderr, "%s:%d: zb-h2 list scheduler made no progress\n", __FILE__, __LINE__);
            goto fail;
        }
        for (int d = 0; d < p; d++) {
            if (z.free_at[d] > t) continue;
            int picked;
            PP_CHECK_GOTO(zbh2_pick(&z, out, d, t, &picked), st, fail);
            if (picked) z.free_at[d] = t + 1, left--;
        }
    }
fail:
    zbh2_free(&z);
    return st;
}

pp_status_t generate_zbh2(pp_schedule_t *out, int p, int m)
{
    memset(out, 0, sizeof *out);
    if (!generate_sizes_ok("zb-h2", p, m, 1)) return PP_ERR_INPUT;
    pp_status_t st = schedule_init(out, p, p, m);
    for (int d = 0; st == PP_OK && d < p; d++)
        out->stage_device[d] = d;
    if (st == PP_OK) st = fill_zbh2(out, p, m);
    if (st != PP_OK) {
        schedule_free(out);
        return st;
    }
    return PP_OK;
}

pp_status_t generate_cfg_zbh2(pp_schedule_t *out, const pp_job_t *job)
{
    return generate_zbh2(out, job->pipeline.n_devices, job->pipeline.micro_batches);
}

/* ============================== Interleaved zero-bubble ======================================= */

/* PyTorch pipelining's ScheduleInterleavedZeroBubble (the ZB1P schedule of Qi et al., ICLR 2024,
 * Section 4 on several chunks): Megatron's interleaved order with I in place of B, a warm-up of
 * (v-1)·r + (p-1-d) forwards on device d (r micro-batches per round), and from its d-th steady
 * step on, one W after every I, for the backward d steps earlier. Rounds: r = m / max(1, m / p),
 * which must divide m. Chunk c of device d is stage c·p + d. */
typedef struct izb {
    int p, v, d, r, warmup;
    int next[3][PP_MAX_STAGES]; /* next micro-batch per stage for F, I, W */
} izb_t;

static int izb_fwd_stage(const izb_t *z, int op)
{
    return ((op / z->r) % z->v) * z->p + z->d;
}
static int izb_bwd_stage(const izb_t *z, int op)
{
    return (z->v - 1 - ((op - z->warmup) / z->r) % z->v) * z->p + z->d;
}

/* Push kind `which` (0 F, 1 I, 2 W) of `stage` for its next micro-batch. */
static pp_status_t izb_push(izb_t *z, pp_schedule_t *out, int which, int stage)
{
    static const pp_action_kind_t kinds[3] = {PP_ACT_F, PP_ACT_I, PP_ACT_W};
    return schedule_push(out, z->d, kinds[which], stage, z->next[which][stage]++);
}

static pp_status_t izb_device(pp_schedule_t *out, int p, int m, int v, int r, int d)
{
    izb_t z = {.p = p, .v = v, .d = d, .r = r};
    int total = m * v;
    z.warmup = (v - 1) * r + (p - 1 - d);
    if (z.warmup > total) z.warmup = total;
    int *bwd_ops = malloc(sizeof(int) * (size_t)total), n_bwd = 0, n_w = 0;
    PP_ALLOC_CHECK(bwd_ops);
    pp_status_t st = PP_OK;
    for (int op = 0; st == PP_OK && op < total + z.warmup; op++) {
        if (op < total) st = izb_push(&z, out, 0, izb_fwd_stage(&z, op));
        if (st != PP_OK || op < z.warmup) continue;
        st = izb_push(&z, out, 1, izb_bwd_stage(&z, op));
        bwd_ops[n_bwd++] = op;
        if (st == PP_OK && op - z.warmup >= d)
            st = izb_push(&z, out, 2, izb_bwd_stage(&z, bwd_ops[n_w++]));
    }
    while (st == PP_OK && n_w < n_bwd)
        st = izb_push(&z, out, 2, izb_bwd_stage(&z, bwd_ops[n_w++]));
    free(bwd_ops);
    return st;
}

pp_status_t generate_interleaved_zb(pp_schedule_t *out, int p, int m, int v)
{
    memset(out, 0, sizeof *out);
    if (!generate_sizes_ok("interleaved-zb", p, m, v)) return PP_ERR_INPUT;
    int rounds = m / p > 1 ? m / p : 1;
    if (m % rounds != 0) {
        fprintf(stderr,
                "interleaved-zb: micro-batches (%d) must be a multiple of the rounds (%d = "
                "micro-batches / devices): each round runs the same number of micro-batches\n",
                m, rounds);
        return PP_ERR_INPUT;
    }
    pp_status_t st = schedule_init(out, p, p * v, m);
    for (int s = 0; st == PP_OK && s < p * v; s++)
        out->stage_device[s] = s % p;
    for (int d = 0; st == PP_OK && d < p; d++)
        st = izb_device(out, p, m, v, m / rounds, d);
    if (st != PP_OK) {
        schedule_free(out);
        return st;
    }
    return PP_OK;
}
