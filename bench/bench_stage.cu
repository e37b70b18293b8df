/*
 * bench_stage.cu — forward and backward of one micro-batch on one middle stage, timed with CUDA
 * events, launched eagerly and replayed from a CUDA graph, next to cuBLAS's bf16 GEMM rate at the
 * stage's own GEMM shapes measured in the same run.
 *
 *   bench_stage [--shape NAME[,NAME...]|both] [--iters N] [--warmup N] [--dtype bf16|fp32]
 *               [--eager-only]
 *
 * Shapes: one middle stage of a row of the preset table (model/preset.h): its hidden, heads,
 * sequence and micro-batch, layers / devices blocks. both = reference and small (the default):
 * hidden 1024, 16 heads, seq 1024, micro-batch 4, 6 blocks; hidden 512, 8 heads, seq 256,
 * micro-batch 2, 4 blocks. 7b = hidden 4096, 32 heads, seq 4096, micro-batch 1, 8 blocks (the
 * three stages take about 62.5 GiB together). One stage per run.recompute setting, side by
 * side, on one non-blocking stream, timed two ways (LAUNCHES). Eager: each iteration enqueues, for
 * every setting in turn, F then B and F then I then W with events between, and nothing waits until
 * all are enqueued, so the times hold whatever the host's launches leave the GPU waiting. Graph:
 * then (cuBLAS picked its algorithms outside capture) one such iteration per setting is captured
 * into one graph with external event records between the passes and replayed --iters times, one
 * wait per round. That is how the executor replays a step, so a pass's time is its kernels and
 * the graph's gaps between them; one graph per pass with plain events between the launches would
 * add a graph launch's start on the GPU to every pass, which a step does not pay. The waits fall
 * between rounds, outside the timed passes. Model FLOPs count the matmuls only (2·N·12·C² per
 * block forward plus 4·N·T·C for attention, causal counted in full), fwd + bwd = 3 × fwd.
 * stage_report.c prints the results. Exit 1 on a CUDA error, 2 on bad usage.
 */
#include "common/pp_cuda.h"
#include "kernels/kernels.h"
#include "model/preset.h"
#include "model/rng.h"
#include "stages/stage.h"
#include "stage_report.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef stage_report_shape_t bench_shape_t;
typedef stage_report_stats_t stats_t;
typedef stage_report_times_t times_t;
typedef stage_report_result_t result_t;

/* One middle stage of preset p: layers / devices blocks of its model, its micro-batch. */
static bench_shape_t shape_of(const pp_preset_t *p)
{
    bench_shape_t sh;
    sh.name = p->name;
    sh.hidden = p->model.hidden, sh.heads = p->model.heads, sh.seq_len = p->model.seq_len;
    sh.batch = p->micro_batch_size, sh.blocks = p->model.layers / p->devices;
    sh.layers = p->model.layers, sh.vocab = p->model.vocab;
    return sh;
}

#define N_MODES  STAGE_REPORT_MODES /* one stage per run.recompute setting, timed side by side */
#define N_PASSES 5                  /* samples an iteration: F, B, I, W, F + B */

/* Times every setting's stage, samples into t: [N_MODES][N_PASSES][iters]. */
typedef pp_status_t (*launch_fn)(pp_stage_t **stages, cudaStream_t s, int iters, double *t);

static pp_status_t time_eager(pp_stage_t **stages, cudaStream_t s, int iters, double *t);
static pp_status_t time_graph(pp_stage_t **stages, cudaStream_t s, int iters, double *t);

/* The ways of launching a stage's passes, eager first (--eager-only runs that row alone). */
static const struct launch_desc {
    const char *name; /* the table's `launch` column */
    const char *key;  /* infix of its JSON keys: fwd<key>_ms, ratio<key> */
    launch_fn time;
} LAUNCHES[] = {
    {"eager", "", time_eager},
    {"graph", "_graph", time_graph},
};
#define N_LAUNCHES ((int)(sizeof LAUNCHES / sizeof LAUNCHES[0]))
static_assert(N_LAUNCHES == STAGE_REPORT_LAUNCHES, "stage_report.h sizes run[] by LAUNCHES");

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static stats_t stats_of(double *v, int n)
{
    stats_t s;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    s.p10 = v[(int)floor(0.1 * (n - 1))];
    s.p90 = v[(int)ceil(0.9 * (n - 1))];
    return s;
}

/* Seeded values in [-amp, amp) as `dt`, copied to dev. */
static pp_status_t fill_device(void *dev, size_t n, uint64_t key, float amp, pp_dtype_t dt)
{
    float *h = (float *)malloc(n * sizeof(float));
    float *d = NULL;
    pp_status_t st = PP_OK;
    PP_ALLOC_CHECK(h);
    for (size_t i = 0; i < n; i++)
        h[i] = (float)((2.0 * pp_unit53(pp_hash(key, 7, i, 0, 0)) - 1.0) * amp);
    PP_CUDA_CHECK_GOTO(cudaMalloc((void **)&d, n * sizeof(float)), st, done);
    PP_CUDA_CHECK_GOTO(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice), st, done);
    PP_CHECK_GOTO(cast_fp32_to_dtype(dev, d, n, dt, 0), st, done);
    PP_CUDA_CHECK_GOTO(cudaStreamSynchronize(0), st, done);
done:
    cudaFree(d);
    free(h);
    return st;
}

/* cuBLAS bf16 (or fp32) GEMM rate at out[N,OC] = in[N,IC] · W[OC,IC]^T, the stage's forward
 * shapes, in TFLOP/s; *ms gets the time of one GEMM. */
static pp_status_t gemm_rate(pp_gemm_t *g, int N, int IC, int OC, pp_dtype_t dt, int iters,
                             cudaStream_t s, double *tflops, double *ms)
{
    void *a = NULL, *w = NULL, *c = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    pp_status_t st = PP_OK;
    size_t es = pp_dtype_size(dt);
    cudaDataType_t t = dt == PP_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    const float one = 1.0f, zero = 0.0f;
    float elapsed = 0.0f;
    PP_CUDA_CHECK_GOTO(cudaMalloc(&a, (size_t)N * IC * es), st, done);
    PP_CUDA_CHECK_GOTO(cudaMalloc(&w, (size_t)OC * IC * es), st, done);
    PP_CUDA_CHECK_GOTO(cudaMalloc(&c, (size_t)N * OC * es), st, done);
    PP_CHECK_GOTO(fill_device(a, (size_t)N * IC, 11, 1.0f, dt), st, done);
    PP_CHECK_GOTO(fill_device(w, (size_t)OC * IC, 12, 0.02f, dt), st, done);
    PP_CUDA_CHECK_GOTO(cudaEventCreate(&e0), st, done);
    PP_CUDA_CHECK_GOTO(cudaEventCreate(&e1), st, done);
    PP_CUBLAS_CHECK_GOTO(cublasSetStream(g->blas, s), st, done);
    for (int i = -5; i < iters; i++) {
        if (i == 0) PP_CUDA_CHECK_GOTO(cudaEventRecord(e0, s), st, done);
        /* Column-major view: out^T[OC,N] = W[OC,IC] · in^T[IC,N]. */
        PP_CUBLAS_CHECK_GOTO(cublasGemmEx(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, IC, &one, w, t,
                                          IC, a, t, IC, &zero, c, t, OC, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT),
                             st, done);
    }
    PP_CUDA_CHECK_GOTO(cudaEventRecord(e1, s), st, done);
    PP_CUDA_CHECK_GOTO(cudaEventSynchronize(e1), st, done);
    PP_CUDA_CHECK_GOTO(cudaEventElapsedTime(&elapsed, e0, e1), st, done);
    *ms = elapsed / iters;
    *tflops = 2.0 * N * IC * OC / (*ms * 1e-3) / 1e12;
done:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(a), cudaFree(w), cudaFree(c);
    return st;
}

/* The stage configuration of a shape under recompute setting `rc`. */
static pp_stage_cfg_t bench_cfg(const bench_shape_t *sh, pp_dtype_t dt, pp_recompute_t rc)
{
    pp_stage_cfg_t c;
    memset(&c, 0, sizeof c);
    c.hidden = sh->hidden;
    c.heads = sh->heads;
    c.seq_len = sh->seq_len;
    c.vocab = sh->vocab;
    c.micro_batch_size = sh->batch;
    c.n_layers = sh->blocks;
    c.first_layer = sh->blocks; /* the second stage */
    c.total_layers = sh->layers;
    c.dtype = dt;
    c.seed = 1234;
    c.n_slots = 1;
    c.n_wgrad_slots = 1;
    c.grad_scale = 1.0f;
    c.recompute = rc;
    return c;
}

/* cuBLAS at the stage's four forward GEMM shapes, before the stages take their memory. */
static pp_status_t gemm_ceiling(const bench_shape_t *sh, pp_dtype_t dt, cudaStream_t s, result_t *r)
{
    const int N = sh->batch * sh->seq_len, C = sh->hidden;
    const int ic[4] = {C, C, C, 4 * C}, oc[4] = {3 * C, C, 4 * C, C};
    double flops = 0.0, ms_sum = 0.0;
    pp_gemm_t g;
    pp_status_t st = PP_OK;
    memset(&g, 0, sizeof g);
    PP_CHECK(gemm_init(&g, 0));
    for (int k = 0; k < 4; k++) {
        double ms = 0.0;
        PP_CHECK_GOTO(gemm_rate(&g, N, ic[k], oc[k], dt, 50, s, &r->gemm_shape_tflops[k], &ms), st,
                      done);
        flops += 2.0 * N * ic[k] * oc[k];
        ms_sum += ms;
    }
    r->gemm_tflops = flops / (ms_sum * 1e-3) / 1e12;
done:
    gemm_free(&g);
    return st;
}

/* ---- timing ------------------------------------------------------------------------------- */

/* One iteration of one stage: F, B, F, I, W with events e[0..5] around them, recorded with
 * `flags` (cudaEventRecordExternal inside a capture: a plain record there only orders the capture
 * and records nothing on replay). */
static pp_status_t bench_iteration(pp_stage_t *stage, int i, cudaEvent_t *e, unsigned flags,
                                   cudaStream_t s)
{
    PP_CUDA_CHECK(cudaEventRecordWithFlags(e[0], s, flags));
    PP_CHECK(stage_forward(stage, 0, i, s));
    PP_CUDA_CHECK(cudaEventRecordWithFlags(e[1], s, flags));
    PP_CHECK(stage_backward(stage, 0, i, s));
    PP_CUDA_CHECK(cudaEventRecordWithFlags(e[2], s, flags));
    PP_CHECK(stage_forward(stage, 0, i, s));
    PP_CUDA_CHECK(cudaEventRecordWithFlags(e[3], s, flags));
    PP_CHECK(stage_backward_input(stage, 0, i, s));
    PP_CUDA_CHECK(cudaEventRecordWithFlags(e[4], s, flags));
    PP_CHECK(stage_backward_weight(stage, 0, i, s));
    PP_CUDA_CHECK(cudaEventRecordWithFlags(e[5], s, flags));
    return PP_OK;
}

/* Sample i of setting k, from its six events, into t ([N_MODES][N_PASSES][iters]). */
static pp_status_t read_sample(const cudaEvent_t *e, int k, int i, int iters, double *t)
{
    double *tk = t + (size_t)N_PASSES * iters * k;
    float f, b, ii, w;
    PP_CUDA_CHECK(cudaEventElapsedTime(&f, e[0], e[1]));
    PP_CUDA_CHECK(cudaEventElapsedTime(&b, e[1], e[2]));
    PP_CUDA_CHECK(cudaEventElapsedTime(&ii, e[3], e[4]));
    PP_CUDA_CHECK(cudaEventElapsedTime(&w, e[4], e[5]));
    tk[i] = f, tk[iters + i] = b, tk[2 * iters + i] = ii, tk[3 * iters + i] = w;
    tk[4 * iters + i] = (double)f + b;
    return PP_OK;
}

/* Medians and spreads of one setting's samples tk ([N_PASSES][iters]; sorted in place). */
static times_t times_of(double *tk, int iters, double flops, int l)
{
    times_t r;
    r.launch = LAUNCHES[l].name, r.key = LAUNCHES[l].key;
    r.fwd = stats_of(tk, iters);
    r.bwd = stats_of(tk + iters, iters);
    r.bwd_i = stats_of(tk + 2 * iters, iters);
    r.bwd_w = stats_of(tk + 3 * iters, iters);
    r.total = stats_of(tk + 4 * iters, iters);
    r.tflops = flops / (r.total.median * 1e-3) / 1e12;
    return r;
}

/* Eager: iterations interleaved (setting by setting inside each) so that drift of the clock or the
 * machine touches all alike, every one enqueued before the one wait. */
static pp_status_t time_eager(pp_stage_t **stages, cudaStream_t s, int iters, double *t)
{
    const int n_ev = 6 * iters * N_MODES;
    cudaEvent_t *ev = (cudaEvent_t *)calloc((size_t)n_ev, sizeof *ev);
    pp_status_t st = PP_OK;
    PP_ALLOC_CHECK(ev);
    for (int i = 0; i < n_ev; i++)
        PP_CUDA_CHECK_GOTO(cudaEventCreate(&ev[i]), st, done);
    for (int i = 0; i < iters; i++)
        for (int k = 0; k < N_MODES; k++)
            PP_CHECK_GOTO(bench_iteration(stages[k], i, ev + 6 * (i * N_MODES + k),
                                          cudaEventRecordDefault, s),
                          st, done);
    PP_CUDA_CHECK_GOTO(cudaStreamSynchronize(s), st, done);
    for (int i = 0; i < iters; i++)
        for (int k = 0; k < N_MODES; k++)
            PP_CHECK_GOTO(read_sample(ev + 6 * (i * N_MODES + k), k, i, iters, t), st, done);
done:
    for (int i = 0; i < n_ev; i++)
        if (ev[i]) cudaEventDestroy(ev[i]);
    free(ev);
    return st;
}

/* One iteration of `stage` captured from `s` into *g, events e[0..5] as external records. The
 * capture is ended on every path: an error leaves `s` out of capture and *g NULL. */
static pp_status_t capture_iteration(pp_stage_t *stage, cudaEvent_t *e, cudaStream_t s,
                                     cudaGraph_t *g)
{
    *g = NULL;
    PP_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    pp_status_t st = bench_iteration(stage, 0, e, cudaEventRecordExternal, s);
    cudaError_t ce = cudaStreamEndCapture(s, g);
    if (st != PP_OK) {
        if (ce == cudaSuccess && *g) cudaGraphDestroy(*g);
        *g = NULL;
        (void)cudaGetLastError(); /* the capture's own error, if it was invalidated */
        return st;
    }
    PP_CUDA_CHECK(ce);
    return PP_OK;
}

/* Graph: each setting's iteration captured once and replayed; per round every setting's graph
 * once, then a wait and the round's events read (round -1 is a warm-up that uploads the graphs). */
static pp_status_t time_graph(pp_stage_t **stages, cudaStream_t s, int iters, double *t)
{
    cudaEvent_t ev[N_MODES][6];
    cudaGraph_t g[N_MODES];
    cudaGraphExec_t ge[N_MODES];
    pp_status_t st = PP_OK;
    memset(ev, 0, sizeof ev), memset(g, 0, sizeof g), memset(ge, 0, sizeof ge);
    for (int k = 0; k < N_MODES; k++) {
        for (int j = 0; j < 6; j++)
            PP_CUDA_CHECK_GOTO(cudaEventCreate(&ev[k][j]), st, done);
        PP_CHECK_GOTO(capture_iteration(stages[k], ev[k], s, &g[k]), st, done);
        PP_CUDA_CHECK_GOTO(cudaGraphInstantiate(&ge[k], g[k], 0), st, done);
    }
    for (int i = -1; i < iters; i++) {
        for (int k = 0; k < N_MODES; k++)
            PP_CUDA_CHECK_GOTO(cudaGraphLaunch(ge[k], s), st, done);
        PP_CUDA_CHECK_GOTO(cudaStreamSynchronize(s), st, done);
        for (int k = 0; i >= 0 && k < N_MODES; k++)
            PP_CHECK_GOTO(read_sample(ev[k], k, i, iters, t), st, done);
    }
done:
    if (st != PP_OK) (void)cudaStreamSynchronize(s); /* no replay in flight past this point */
    for (int k = 0; k < N_MODES; k++) {
        if (ge[k]) cudaGraphExecDestroy(ge[k]);
        if (g[k]) cudaGraphDestroy(g[k]);
        for (int j = 0; j < 6; j++)
            if (ev[k][j]) cudaEventDestroy(ev[k][j]);
    }
    return st;
}

/* Set up setting k of shape sh: its figures in r, its stage built, its inputs filled, warm-up
 * iterations run on s. */
static pp_status_t bench_setup(const bench_shape_t *sh, pp_dtype_t dt, int k, int warmup,
                               cudaStream_t s, result_t *r, pp_stage_t **stage)
{
    pp_stage_cfg_t c = bench_cfg(sh, dt, (pp_recompute_t)k);
    const int N = sh->batch * sh->seq_len, C = sh->hidden, T = sh->seq_len;
    const double fwd = sh->blocks * (2.0 * N * 12.0 * C * C + 4.0 * N * T * C);
    r->shape = sh, r->recompute = c.recompute, r->flops = 3.0 * fwd;
    r->slot_bytes = stage_slot_bytes(&c), r->state_bytes = stage_state_bytes(&c);
    r->wgrad_bytes = stage_wgrad_slot_bytes(&c), r->work_bytes = stage_workspace_bytes(&c);
    PP_CHECK(stage_init(stage, &c));
    PP_CHECK(fill_device(stage_slot_x(*stage, 0), (size_t)N * C, 21, 1.0f, dt));
    PP_CHECK(fill_device(stage_slot_dy(*stage, 0), (size_t)N * C, 22, 1e-2f, dt));
    for (int i = 0; i < warmup; i++) {
        PP_CHECK(stage_forward(*stage, 0, i, s));
        PP_CHECK(stage_backward(*stage, 0, i, s));
    }
    return PP_OK;
}

/* What a step adds to a stage's passes: its gradients zeroed before the first and one AdamW step
 * after the last, on a stage of its own with the optimizer's state (built after the others are
 * freed) whose step count is read from device memory as in the executor's step, timed together
 * with events, 3 warm-up and `iters` timed; the bytes they move: per
 * parameter the fp32 gradient zeroed (4), AdamW's reads of gradient, master and moments (16) and
 * writes of master, moments (12) and the stored parameter. */
static pp_status_t bench_optimizer(const bench_shape_t *sh, pp_dtype_t dt, int iters,
                                   cudaStream_t s, result_t *r)
{
    pp_stage_cfg_t c = bench_cfg(sh, dt, PP_RECOMPUTE_NONE);
    c.with_optimizer = 1;
    pp_stage_t *st = NULL;
    cudaEvent_t e[2] = {NULL, NULL};
    int *d_step = NULL;
    double *t = (double *)malloc(sizeof(double) * (size_t)iters);
    pp_status_t status = PP_OK;
    if (!t) return PP_ERR_NOMEM;
    const pp_adamw_cfg_t opt = {1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f};
    PP_CHECK_GOTO(stage_init(&st, &c), status, done);
    for (int k = 0; k < 2; k++)
        PP_CUDA_CHECK_GOTO(cudaEventCreate(&e[k]), status, done);
    /* The step count from device memory, as the executor's replayed step reads it. */
    PP_CUDA_CHECK_GOTO(cudaMalloc((void **)&d_step, sizeof(int)), status, done);
    PP_CHECK_GOTO(stage_bind_counters(st, NULL, d_step), status, done);
    for (int i = -3; i < iters; i++) {
        const int step = i + 4;
        PP_CUDA_CHECK_GOTO(cudaMemcpyAsync(d_step, &step, sizeof step, cudaMemcpyHostToDevice, s),
                           status, done);
        PP_CUDA_CHECK_GOTO(cudaEventRecord(e[0], s), status, done);
        PP_CHECK_GOTO(stage_zero_grads(st, s), status, done);
        PP_CHECK_GOTO(stage_optimizer_step(st, &opt, i + 4, s), status, done);
        PP_CUDA_CHECK_GOTO(cudaEventRecord(e[1], s), status, done);
        PP_CUDA_CHECK_GOTO(cudaEventSynchronize(e[1]), status, done);
        float ms = 0;
        PP_CUDA_CHECK_GOTO(cudaEventElapsedTime(&ms, e[0], e[1]), status, done);
        if (i >= 0) t[i] = ms;
    }
    r->opt_ms = stats_of(t, iters).median;
    r->opt_gbps =
        (double)stage_param_count(&c) * (32.0 + (double)pp_dtype_size(dt)) / (r->opt_ms * 1e6);
done:
    for (int k = 0; k < 2; k++)
        if (e[k]) cudaEventDestroy(e[k]);
    if (d_step) cudaFree(d_step);
    stage_free(st);
    free(t);
    return status;
}

/* The shape under every recompute setting, one stage each, timed by the first n_launch rows of
 * LAUNCHES in turn. */
static pp_status_t bench_one(const bench_shape_t *sh, pp_dtype_t dt, int iters, int warmup,
                             int n_launch, result_t *r /* [N_MODES] */)
{
    pp_status_t st = PP_OK;
    pp_stage_t *stages[N_MODES] = {NULL};
    cudaStream_t s = NULL;
    double *t = NULL;
    memset(r, 0, N_MODES * sizeof *r);
    t = (double *)malloc(sizeof(double) * N_PASSES * N_MODES * (size_t)iters);
    if (!t) {
        fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
        st = PP_ERR_NOMEM;
        goto done;
    }
    PP_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), st, done);
    PP_CHECK_GOTO(gemm_ceiling(sh, dt, s, &r[0]), st, done);
    for (int k = 0; k < N_MODES; k++) {
        memcpy(r[k].gemm_shape_tflops, r[0].gemm_shape_tflops, sizeof r[0].gemm_shape_tflops);
        r[k].gemm_tflops = r[0].gemm_tflops;
        PP_CHECK_GOTO(bench_setup(sh, dt, k, warmup, s, &r[k], &stages[k]), st, done);
    }
    for (int l = 0; l < n_launch; l++) {
        PP_CHECK_GOTO(LAUNCHES[l].time(stages, s, iters, t), st, done);
        for (int k = 0; k < N_MODES; k++) {
            r[k].run[l] = times_of(t + (size_t)N_PASSES * iters * k, iters, r[k].flops, l);
            r[k].n_run = l + 1;
        }
    }
    for (int k = 0; k < N_MODES; k++) {
        stage_free(stages[k]);
        stages[k] = NULL;
    }
    PP_CHECK_GOTO(bench_optimizer(sh, dt, iters, s, &r[0]), st, done);
done:
    for (int k = 0; k < N_MODES; k++)
        stage_free(stages[k]);
    if (s) cudaStreamDestroy(s);
    free(t);
    return st;
}

/* ---- command line ------------------------------------------------------------------------- */

typedef stage_report_opts_t opts_t;

static void usage(FILE *f)
{
    char names[128];
    preset_names(names, sizeof names);
    fprintf(f,
            "usage: bench_stage [--shape NAME[,NAME...]|both] [--iters N (>= 20)] "
            "[--warmup N] [--dtype bf16|fp32] [--eager-only]\n"
            "  NAME: a model preset (%s); both: reference,small (the default)\n",
            names);
}

/* `--shape`: a comma-separated list of presets, or both; returns -1 to go on, or 2. */
static int parse_shapes(const char *arg, opts_t *o)
{
    char list[256], names[128];
    snprintf(list, sizeof list, "%s", strcmp(arg, "both") ? arg : "reference,small");
    o->n_shapes = 0;
    for (char *save = NULL, *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        const pp_preset_t *p = preset_find(w);
        if (!p || o->n_shapes == STAGE_REPORT_SHAPES) {
            preset_names(names, sizeof names);
            fprintf(stderr,
                    "bench_stage: --shape %s: %s (allowed: at most %d of %s, comma-separated, or "
                    "both)\n",
                    arg, p ? "too many shapes" : "unknown shape", STAGE_REPORT_SHAPES, names);
            return 2;
        }
        o->shapes[o->n_shapes++] = shape_of(p);
    }
    if (o->n_shapes == 0) {
        fprintf(stderr, "bench_stage: --shape '%s': no shape given\n", arg);
        return 2;
    }
    return -1;
}

/* The options into o; returns -1 to go on, or the exit code. */
static int parse_args(int argc, char **argv, opts_t *o)
{
    const char *shape = "both";
    memset(o, 0, sizeof *o);
    o->iters = 30, o->warmup = 5, o->n_launch = N_LAUNCHES, o->dt = PP_DTYPE_BF16;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--shape") && v)
            shape = v, i++;
        else if (!strcmp(argv[i], "--iters") && v)
            o->iters = atoi(v), i++;
        else if (!strcmp(argv[i], "--warmup") && v)
            o->warmup = atoi(v), i++;
        else if (!strcmp(argv[i], "--eager-only"))
            o->n_launch = 1;
        else if (!strcmp(argv[i], "--dtype") && v && !strcmp(v, "bf16"))
            o->dt = PP_DTYPE_BF16, i++;
        else if (!strcmp(argv[i], "--dtype") && v && !strcmp(v, "fp32"))
            o->dt = PP_DTYPE_FP32, i++;
        else if (!strcmp(argv[i], "--dtype") && v) {
            fprintf(stderr, "bench_stage: --dtype %s (allowed: bf16, fp32)\n", v);
            return 2;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "bench_stage: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (o->iters < 20 || o->warmup < 0) {
        fprintf(stderr, "bench_stage: --iters must be >= 20 (got %d), --warmup >= 0\n", o->iters);
        return 2;
    }
    return parse_shapes(shape, o);
}

int main(int argc, char **argv)
{
    opts_t o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
        fprintf(stderr, "bench_stage: no CUDA device\n");
        return 1;
    }
    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, 0);
    if (e != cudaSuccess) {
        fprintf(stderr, "bench_stage: cudaGetDeviceProperties: %s\n", cudaGetErrorString(e));
        return 1;
    }
    stage_report_preamble(&prop, &o);
    static result_t res[STAGE_REPORT_SHAPES * N_MODES];
    int n = 0;
    for (int k = 0; k < o.n_shapes; k++) {
        pp_status_t st = bench_one(&o.shapes[k], o.dt, o.iters, o.warmup, o.n_launch, &res[n]);
        if (st != PP_OK) {
            fprintf(stderr, "bench_stage: %s shape failed: %s\n", o.shapes[k].name,
                    pp_status_str(st));
            return pp_status_exit_code(st);
        }
        stage_report_shape(&res[n]);
        n += N_MODES;
    }
    stage_report_table(res, n);
    for (int i = 0; i < n; i += N_MODES)
        stage_report_verdicts(&res[i]);
    for (int i = 0; i < n; i++)
        stage_report_json(prop.name, &o, &res[i]);
    return 0;
}
