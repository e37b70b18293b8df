/*
 * generate.c — the built-in schedule generators: compute actions (F/B/I/W) per device, in order.
 *
 * Every generator fills a fresh pp_schedule_t (schedule_init here; the caller frees it, also on
 * failure) and sets stage_device. The results are compute-only: plan_lower adds SEND/RECV.
 * Invariants, with uniform costs and free communication (checked by tests/cpu/test_generate.c):
 * GPipe and 1F1B span m + p - 1 units of one stage's F+B, interleaved m + (p-1)/v, ZB-H1
 * m + (p-1)/3 when m >= p. Peak in-flight micro-batches on stage i: GPipe m, 1F1B min(p-i, m),
 * ZB-H1 at most p.
 */
#include "generate.h"
#include "kinds.h"

#include <stdlib.h>
#include <string.h>

/* Allocate `out` with one stage per device (stage d on device d). */
static pp_status_t init_one_stage_per_device(pp_schedule_t *out, int p, int m)
{
    PP_CHECK(schedule_init(out, p, p, m));
    for (int d = 0; d < p; d++)
        out->stage_device[d] = d;
    return PP_OK;
}

int generate_sizes_ok(const char *name, int p, int m, int v)
{
    if (p >= 1 && p <= PP_MAX_DEVICES && m >= 1 && m <= PP_MAX_MICRO_BATCHES && v >= 1 &&
        (long)p * v <= PP_MAX_STAGES)
        return 1;
    fprintf(stderr,
            "%s: needs 1..%d devices, 1..%d micro-batches and 1..%d stages in all (got %d "
            "devices, %d micro-batches, %d chunks)\n",
            name, PP_MAX_DEVICES, PP_MAX_MICRO_BATCHES, PP_MAX_STAGES, p, m, v);
    return 0;
}

/* ============================== GPipe ========================================================= */

/* All forwards, then all backwards. Backwards run in the order 0..m-1 (first in, first out): the
 * last stage can start the backward of micro-batch 0 as soon as its last forward is done, and
 * every earlier stage receives gradients in the same order it sent activations. */
static pp_status_t fill_gpipe(pp_schedule_t *out, int p, int m)
{
    memset(out, 0, sizeof *out);
    if (!generate_sizes_ok("gpipe", p, m, 1)) return PP_ERR_INPUT;
    PP_CHECK(init_one_stage_per_device(out, p, m));
    for (int d = 0; d < p; d++) {
        for (int k = 0; k < m; k++)
            PP_CHECK(schedule_push(out, d, PP_ACT_F, d, k));
        for (int k = 0; k < m; k++)
            PP_CHECK(schedule_push(out, d, PP_ACT_B, d, k));
    }
    return PP_OK;
}

/* ============================== 1F1B ========================================================== */

/* Stage i: w = min(p-i-1, m) warm-up forwards, m-w steady (F, B) pairs, w cool-down backwards. */
static pp_status_t fill_1f1b(pp_schedule_t *out, int p, int m)
{
    memset(out, 0, sizeof *out);
    if (!generate_sizes_ok("1f1b", p, m, 1)) return PP_ERR_INPUT;
    PP_CHECK(init_one_stage_per_device(out, p, m));
    for (int i = 0; i < p; i++) {
        int w = p - i - 1 < m ? p - i - 1 : m;
        for (int k = 0; k < w; k++)
            PP_CHECK(schedule_push(out, i, PP_ACT_F, i, k));
        for (int k = 0; k < m - w; k++) {
            PP_CHECK(schedule_push(out, i, PP_ACT_F, i, w + k));
            PP_CHECK(schedule_push(out, i, PP_ACT_B, i, k));
        }
        for (int k = m - w; k < m; k++)
            PP_CHECK(schedule_push(out, i, PP_ACT_B, i, k));
    }
    return PP_OK;
}

/* ============================== Interleaved 1F1B ============================================== */

/* Megatron's order. Each device runs m*v "virtual" forwards and as many backwards. Virtual
 * index j covers micro-batches in groups of p: the group (j / (p*v)) holds micro-batches
 * p*(j / (p*v)) .. +p-1, and within a group chunk (j / p) % v runs for all p micro-batches before
 * the next chunk starts. Backwards walk the chunks in reverse (the last chunk is nearest the loss).
 * Chunk c of device d is stage c*p + d (loop placement). */
static void interleaved_virtual(int p, int v, int d, int j, int backward, int *stage, int *mb)
{
    int chunk = (j / p) % v;
    if (backward) chunk = v - 1 - chunk;
    *stage = chunk * p + d;
    *mb = (j / (p * v)) * p + j % p;
}

/* Device d warms up with 2(p-d-1) + (v-1)p forwards (capped at m*v), then alternates one forward
 * and one backward, then drains the remaining backwards. The doubled per-device term is what
 * keeps the forward of the next chunk from waiting on the gradient of the previous one. With v = 1
 * this is plain 1F1B (generate_1f1b), which needs no m % p. */
static pp_status_t fill_interleaved(pp_schedule_t *out, int p, int m, int v)
{
    memset(out, 0, sizeof *out);
    if (!generate_sizes_ok("interleaved", p, m, v)) return PP_ERR_INPUT;
    if (v == 1) return fill_1f1b(out, p, m);
    if (m % p != 0) {
        fprintf(stderr,
                "interleaved: micro-batches (%d) must be a multiple of the devices (%d): the order "
                "runs micro-batches in groups of one per device\n",
                m, p);
        return PP_ERR_INPUT;
    }
    PP_CHECK(schedule_init(out, p, p * v, m));
    for (int s = 0; s < p * v; s++)
        out->stage_device[s] = s % p;
    int total = m * v;
    for (int d = 0; d < p; d++) {
        int w = 2 * (p - d - 1) + (v - 1) * p;
        if (w > total) w = total;
        int stage, mb;
        for (int j = 0; j < w; j++) {
            interleaved_virtual(p, v, d, j, 0, &stage, &mb);
            PP_CHECK(schedule_push(out, d, PP_ACT_F, stage, mb));
        }
        for (int j = 0; j < total - w; j++) {
            interleaved_virtual(p, v, d, w + j, 0, &stage, &mb);
            PP_CHECK(schedule_push(out, d, PP_ACT_F, stage, mb));
            interleaved_virtual(p, v, d, j, 1, &stage, &mb);
            PP_CHECK(schedule_push(out, d, PP_ACT_B, stage, mb));
        }
        for (int j = total - w; j < total; j++) {
            interleaved_virtual(p, v, d, j, 1, &stage, &mb);
            PP_CHECK(schedule_push(out, d, PP_ACT_B, stage, mb));
        }
    }
    return PP_OK;
}

/* ============================== ZB-H1 ========================================================= */

/* Zero-bubble H1 (Qi et al., ICLR 2024). The backward is split into I (input gradient, on the
 * critical path) and W (weight gradient, free to move). Stage i runs the 1F1B skeleton with I in
 * place of B, warm-up p-i-1 forwards and steady (F, I) pairs, but its W passes lag its I passes by
 * i micro-batches: W(k-i) follows I(k). The i postponed W passes run after the last I, where 1F1B
 * would idle waiting for gradients, so every stage finishes together. With F = I = W the makespan
 * is 3m + p - 1 for m >= p (bubble (p-1)/(3m+p-1)), and stage i holds at most
 * (p-i-1) + (i+1) = p micro-batches between F and W. */
static pp_status_t fill_zbh1(pp_schedule_t *out, int p, int m)
{
    memset(out, 0, sizeof *out);
    if (!generate_sizes_ok("zb-h1", p, m, 1)) return PP_ERR_INPUT;
    PP_CHECK(init_one_stage_per_device(out, p, m));
    for (int i = 0; i < p; i++) {
        int w = p - i - 1 < m ? p - i - 1 : m;
        for (int k = 0; k < w; k++)
            PP_CHECK(schedule_push(out, i, PP_ACT_F, i, k));
        for (int k = 0; k < m; k++) {
            if (k + w < m) PP_CHECK(schedule_push(out, i, PP_ACT_F, i, k + w));
            PP_CHECK(schedule_push(out, i, PP_ACT_I, i, k));
            if (k - i >= 0) PP_CHECK(schedule_push(out, i, PP_ACT_W, i, k - i));
        }
        for (int k = m - i > 0 ? m - i : 0; k < m; k++)
            PP_CHECK(schedule_push(out, i, PP_ACT_W, i, k));
    }
    return PP_OK;
}

/* ============================== Looped BFS ==================================================== */

/* Lamy-Poirier, "Breadth-First Pipeline Parallelism" (MLSys 2023), as PyTorch pipelining's
 * ScheduleLoopedBFS orders it: each device runs its chunks one after the other, all m forwards of
 * a chunk before the next, then the backwards chunk by chunk in reverse. PyTorch runs each chunk's
 * backwards in reverse micro-batch order; here they run first in, first out, as GPipe's do: the
 * same bubble, and parameter gradients accumulate in micro-batch order, as in the one-device run.
 * Loop placement: chunk c of device d is stage c*p + d. */
static pp_status_t fill_looped_bfs(pp_schedule_t *out, int p, int m, int v)
{
    memset(out, 0, sizeof *out);
    if (!generate_sizes_ok("looped-bfs", p, m, v)) return PP_ERR_INPUT;
    PP_CHECK(schedule_init(out, p, p * v, m));
    for (int s = 0; s < p * v; s++)
        out->stage_device[s] = s % p;
    for (int d = 0; d < p; d++) {
        for (int c = 0; c < v; c++)
            for (int k = 0; k < m; k++)
                PP_CHECK(schedule_push(out, d, PP_ACT_F, c * p + d, k));
        for (int c = v - 1; c >= 0; c--)
            for (int k = 0; k < m; k++)
                PP_CHECK(schedule_push(out, d, PP_ACT_B, c * p + d, k));
    }
    return PP_OK;
}

/* The public generators leave `out` empty (freed) when they fail. */
static pp_status_t finish(pp_schedule_t *out, pp_status_t st)
{
    if (st != PP_OK) schedule_free(out);
    return st;
}

pp_status_t generate_gpipe(pp_schedule_t *out, int p, int m)
{
    return finish(out, fill_gpipe(out, p, m));
}
pp_status_t generate_1f1b(pp_schedule_t *out, int p, int m)
{
    return finish(out, fill_1f1b(out, p, m));
}
pp_status_t generate_zbh1(pp_schedule_t *out, int p, int m)
{
    return finish(out, fill_zbh1(out, p, m));
}
pp_status_t generate_looped_bfs(pp_schedule_t *out, int p, int m, int v)
{
    return finish(out, fill_looped_bfs(out, p, m, v));
}
pp_status_t generate_interleaved(pp_schedule_t *out, int p, int m, int v)
{
    return finish(out, fill_interleaved(out, p, m, v));
}

/* ============================== Dispatch ====================================================== */

/* The generators of the kind table (kinds.c): p, m and v from a resolved config. */
static int cfg_chunks(const pp_job_t *job)
{
    const pp_job_pipeline_t *pc = &job->pipeline;
    int p = pc->n_devices > 0 ? pc->n_devices : 1;
    int stages = pc->stages > 0 ? pc->stages : p * (pc->chunks > 0 ? pc->chunks : 1);
    return stages % p == 0 ? stages / p : 0;
}

pp_status_t generate_cfg_gpipe(pp_schedule_t *out, const pp_job_t *job)
{
    return generate_gpipe(out, job->pipeline.n_devices, job->pipeline.micro_batches);
}

pp_status_t generate_cfg_1f1b(pp_schedule_t *out, const pp_job_t *job)
{
    return generate_1f1b(out, job->pipeline.n_devices, job->pipeline.micro_batches);
}

pp_status_t generate_cfg_interleaved(pp_schedule_t *out, const pp_job_t *job)
{
    return generate_interleaved(out, job->pipeline.n_devices, job->pipeline.micro_batches,
                                cfg_chunks(job));
}

pp_status_t generate_cfg_zbh1(pp_schedule_t *out, const pp_job_t *job)
{
    return generate_zbh1(out, job->pipeline.n_devices, job->pipeline.micro_batches);
}

pp_status_t generate_cfg_looped_bfs(pp_schedule_t *out, const pp_job_t *job)
{
    return generate_looped_bfs(out, job->pipeline.n_devices, job->pipeline.micro_batches,
                               cfg_chunks(job));
}

pp_status_t generate_cfg_interleaved_zb(pp_schedule_t *out, const pp_job_t *job)
{
    return generate_interleaved_zb(out, job->pipeline.n_devices, job->pipeline.micro_batches,
                                   cfg_chunks(job));
}

pp_status_t generate_schedule(pp_schedule_t *out, const pp_job_t *job)
{
    memset(out, 0, sizeof *out);
    const pp_job_pipeline_t *pc = &job->pipeline;
    const pp_kind_row_t *row = sched_kind(job->kind);
    char msg[512];
    if (!row->generate) { /* the written rows: config/written.c builds them */
        fprintf(stderr, "schedule %s: the order is written, not generated\n", row->name);
        return PP_ERR_INPUT;
    }
    int v = cfg_chunks(job);
    if (v < 1) {
        fprintf(stderr, "schedule %s: stages (%d) must be a multiple of devices (%d)\n",
                row->name, pc->stages, pc->n_devices);
        return PP_ERR_INPUT;
    }
    if (sched_kind_check(job->kind, pc->n_devices, pc->micro_batches, v, msg,
                         sizeof msg) != PP_KIND_OK ||
        sched_kind_check_placement(job->kind, v, pc->placement, msg, sizeof msg) !=
            PP_KIND_OK) {
        fprintf(stderr, "schedule %s\n", msg);
        return PP_ERR_INPUT;
    }
    return row->generate(out, job);
}
