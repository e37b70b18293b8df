/*
 * generate_v.c — generators on V placement (2p stages, device d holds stages d and 2p-1-d, so
 * the turn from stage p-1 to p stays on device p-1): ZB-V and DualPipeV.
 *
 * Both are written per device with counters: each push takes the next micro-batch of its (stage,
 * kind). ZB-V holds at most 2p chunk micro-batches per device, p micro-batch equivalents of a
 * one-stage-per-device schedule; DualPipeV's overlapped pairs (a forward of one chunk with a full
 * backward of the other) are pushed as the forward, then the backward: the IR has no composite
 * action, so a pair runs as its two halves in that order. Results are compute-only; the caller
 * frees `out`.
 */
#include "generate.h"

#include <stdlib.h>
#include <string.h>

/* Counters of one device: the next micro-batch per (stage, kind), and for DualPipeV the queue of
 * weight passes still to run, oldest first. */
typedef struct vdev {
    pp_schedule_t *out;
    int d, lo, hi, m; /* device, its chunk-0 stage d and chunk-1 stage 2p-1-d, micro-batches */
    int next[PP_ACT_W + 1][2];
    int *wq; /* DualPipeV: (stage, mb) of each pending W, 2 x 2m ints; NULL for ZB-V */
    int wq_head, wq_tail;
} vdev_t;

/* Push the next (kind, chunk) action. A full B takes the next backward number, as an I would,
 * and counts as its W too; an I queues its W. With skip_over_m, a micro-batch >= m is counted but
 * not pushed (ZB-V runs its order for max(m, 2p-1) micro-batches and drops the extra ones). */
static pp_status_t v_push(vdev_t *v, pp_action_kind_t kind, int chunk, int skip_over_m)
{
    int stage = chunk ? v->hi : v->lo;
    int mb = v->next[kind == PP_ACT_B ? PP_ACT_I : kind][chunk]++;
    if (kind == PP_ACT_B) v->next[PP_ACT_W][chunk]++;
    if (mb >= v->m && skip_over_m) return PP_OK;
    if (kind == PP_ACT_I && v->wq) {
        v->wq[2 * v->wq_tail] = stage;
        v->wq[2 * v->wq_tail++ + 1] = mb;
    }
    return schedule_push(v->out, v->d, kind, stage, mb);
}

static pp_status_t v_init(pp_schedule_t *out, const char *name, int p, int m)
{
    memset(out, 0, sizeof *out);
    if (!generate_sizes_ok(name, p, m, 2)) return PP_ERR_INPUT;
    PP_CHECK(schedule_init(out, p, 2 * p, m));
    generate_place_v(out->stage_device, p, 2);
    return PP_OK;
}

void generate_place_v(int *stage_device, int p, int v)
{
    for (int s = 0; s < p * v; s++)
        stage_device[s] = (s / p) % 2 == 0 ? s % p : p - 1 - s % p;
}

/* ============================== ZB-V ========================================================== */

/* Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024), Section 6 (ZB-V), in the order of
 * PyTorch pipelining's ScheduleZBVZeroBubble: device d warms up with 2(p-d)-1 chunk-0 forwards,
 * d (chunk-1 F, chunk-0 F) pairs and p-d (chunk-1 F, I, W) triples, then alternates
 * (chunk-0 F, I, W) and (chunk-1 F, I, W), then cools down with I passes and the remaining W. */
static pp_status_t zbv_device(vdev_t *v, int p)
{
    int n = v->m > 2 * p - 1 ? v->m : 2 * p - 1, d = v->d;
    for (int k = 0; k < 2 * (p - d) - 1; k++)
        PP_CHECK(v_push(v, PP_ACT_F, 0, 1));
    for (int k = 0; k < d; k++) {
        PP_CHECK(v_push(v, PP_ACT_F, 1, 1));
        PP_CHECK(v_push(v, PP_ACT_F, 0, 1));
    }
    for (int k = 0; k < p - d; k++) {
        PP_CHECK(v_push(v, PP_ACT_F, 1, 1));
        PP_CHECK(v_push(v, PP_ACT_I, 1, 1));
        PP_CHECK(v_push(v, PP_ACT_W, 1, 1));
    }
    while (v->next[PP_ACT_F][1] < v->next[PP_ACT_F][0] || v->next[PP_ACT_F][0] < n) {
        if (v->next[PP_ACT_F][0] < n) PP_CHECK(v_push(v, PP_ACT_F, 0, 1));
        PP_CHECK(v_push(v, PP_ACT_I, 0, 1));
        PP_CHECK(v_push(v, PP_ACT_W, 0, 1));
        PP_CHECK(v_push(v, PP_ACT_F, 1, 1));
        PP_CHECK(v_push(v, PP_ACT_I, 1, 1));
        PP_CHECK(v_push(v, PP_ACT_W, 1, 1));
    }
    for (int k = 0; k < d; k++) {
        PP_CHECK(v_push(v, PP_ACT_I, 0, 1));
        PP_CHECK(v_push(v, PP_ACT_I, 1, 1));
    }
    for (int k = 0; k < p - d; k++) {
        PP_CHECK(v_push(v, PP_ACT_I, 0, 1));
        PP_CHECK(v_push(v, PP_ACT_W, 0, 1));
    }
    for (int c = 1; c >= 0; c--)
        while (v->next[PP_ACT_W][c] < v->next[PP_ACT_I][c])
            PP_CHECK(v_push(v, PP_ACT_W, c, 1));
    return PP_OK;
}

pp_status_t generate_zbv(pp_schedule_t *out, int p, int m)
{
    pp_status_t st = v_init(out, "zb-v", p, m);
    for (int d = 0; st == PP_OK && d < p; d++) {
        vdev_t v = {.out = out, .d = d, .lo = d, .hi = 2 * p - 1 - d, .m = m};
        st = zbv_device(&v, p);
    }
    if (st != PP_OK) schedule_free(out);
    return st;
}

pp_status_t generate_cfg_zbv(pp_schedule_t *out, const pp_job_t *job)
{
    return generate_zbv(out, job->pipeline.n_devices, job->pipeline.micro_batches);
}

/* ============================== DualPipeV ===================================================== */

/* The oldest pending weight pass, when there is one. */
static pp_status_t v_push_w(vdev_t *v)
{
    if (v->wq_head == v->wq_tail) return PP_OK;
    int stage = v->wq[2 * v->wq_head], mb = v->wq[2 * v->wq_head + 1];
    v->wq_head++;
    v->next[PP_ACT_W][stage == v->hi]++;
    return schedule_push(v->out, v->d, PP_ACT_W, stage, mb);
}

/* An overlapped pair: the forward of chunk f, then the full backward of the other chunk. */
static pp_status_t v_push_pair(vdev_t *v, int f)
{
    PP_CHECK(v_push(v, PP_ACT_F, f, 0));
    PP_CHECK(v_push(v, PP_ACT_B, !f, 0));
    return schedule_mark_overlap(v->out, v->d);
}

/* The tail of DualPipeV (steps 6-8): backwards of both chunks, the second half as I with their W
 * deferred, then the remaining W. */
static pp_status_t dualpipev_tail(vdev_t *v, int p)
{
    int d = v->d, zb = 0;
    for (int i = 0; i < d + 1; i++) {
        if (i == (d + 1) / 2 && d % 2 == 1) zb = 1;
        PP_CHECK(v_push(v, zb ? PP_ACT_I : PP_ACT_B, 1, 0));
        if (i == (d + 1) / 2 && d % 2 == 0) zb = 1;
        PP_CHECK(v_push(v, zb ? PP_ACT_I : PP_ACT_B, 0, 0));
    }
    for (int i = 0; i < p - d - 1; i++) {
        PP_CHECK(v_push_w(v));
        PP_CHECK(v_push(v, zb ? PP_ACT_I : PP_ACT_B, 0, 0));
    }
    for (int i = 0; i < d + 1; i++)
        PP_CHECK(v_push_w(v));
    return PP_OK;
}

/* DeepSeek-V3 technical report (arXiv 2412.19437, Section 3.2.1, DualPipe) in its V form from
 * DeepSeek's DualPipe repository (dualpipev.py), in the order of PyTorch pipelining's
 * ScheduleDualPipeV: chunk-0 forwards, (F0, F1) pairs, (I1, W, F1) zero-bubble steps, then the
 * main part of overlapped pairs (F0 with B1, F1 with B0), then the tail. */
static pp_status_t dualpipev_device(vdev_t *v, int p)
{
    int d = v->d;
    for (int i = 0; i < 2 * (p - d - 1); i++)
        PP_CHECK(v_push(v, PP_ACT_F, 0, 0));
    for (int i = 0; i < d + 1; i++) {
        PP_CHECK(v_push(v, PP_ACT_F, 0, 0));
        PP_CHECK(v_push(v, PP_ACT_F, 1, 0));
    }
    for (int i = 0; i < p - d - 1; i++) {
        PP_CHECK(v_push(v, PP_ACT_I, 1, 0));
        PP_CHECK(v_push_w(v));
        PP_CHECK(v_push(v, PP_ACT_F, 1, 0));
    }
    for (int i = 0; i < v->m - 2 * p + d + 1; i++) {
        if (i == 0 && d == p - 1) { /* not overlapped: it shortens the bubble there */
            PP_CHECK(v_push(v, PP_ACT_F, 0, 0));
            PP_CHECK(v_push(v, PP_ACT_B, 1, 0));
        } else {
            PP_CHECK(v_push_pair(v, 0));
        }
        PP_CHECK(v_push_pair(v, 1));
    }
    for (int i = 0; i < p - d - 1; i++) {
        PP_CHECK(v_push(v, PP_ACT_B, 1, 0));
        PP_CHECK(v_push_pair(v, 1));
    }
    return dualpipev_tail(v, p);
}

pp_status_t generate_dualpipev(pp_schedule_t *out, int p, int m)
{
    if (m < 2 * p) {
        memset(out, 0, sizeof *out);
        fprintf(stderr,
                "dualpipe-v: needs at least as many micro-batches as stages (2 x %d devices = "
                "%d; got %d)\n",
                p, 2 * p, m);
        return PP_ERR_INPUT;
    }
    pp_status_t st = v_init(out, "dualpipe-v", p, m);
    int *wq = st == PP_OK ? malloc(sizeof *wq * 4 * (size_t)m) : NULL;
    if (st == PP_OK && !wq) {
        fprintf(stderr, "%s:%d: out of host memory generating dualpipe-v\n", __FILE__, __LINE__);
        st = PP_ERR_NOMEM;
    }
    for (int d = 0; st == PP_OK && d < p; d++) {
        vdev_t v = {.out = out, .d = d, .lo = d, .hi = 2 * p - 1 - d, .m = m, .wq = wq};
        st = dualpipev_device(&v, p);
    }
    free(wq);
    if (st != PP_OK) schedule_free(out);
    return st;
}

pp_status_t generate_cfg_dualpipev(pp_schedule_t *out, const pp_job_t *job)
{
    return generate_dualpipev(out, job->pipeline.n_devices, job->pipeline.micro_batches);
}
