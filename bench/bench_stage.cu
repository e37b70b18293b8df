/*
 * bench_stage.cu — forward and backward of one micro-batch on one middle stage, timed with CUDA
 * events, next to cuBLAS's bf16 GEMM rate at the stage's own GEMM shapes measured in the same run.
 *
 *   bench_stage [--shape reference|small|both] [--iters N] [--warmup N] [--dtype bf16|fp32]
 *
 * Shapes: reference = hidden 1024, 16 heads, seq 1024, micro-batch 4, 6 blocks; small = hidden
 * 512, 8 heads, seq 256, micro-batch 2, 4 blocks. Each shape runs one stage per run.recompute
 * setting (none, selective, full), side by side: each iteration enqueues, for every setting in
 * turn, F then B and F then I then W on one stream with events between; nothing synchronizes
 * until all iterations are enqueued. Prints the slot, I->W buffer (MiB per block) and workspace
 * of each setting, and whether the slot meets its goal. Model FLOPs count the matmuls only
 * (2·N·12·C² per block forward plus 4·N·T·C for attention, causal counted in full), fwd + bwd = 3 ×
 * fwd. Prints a `#` preamble, a fixed-width table and one JSON line per shape. Exit 1 on a CUDA
 * error, 2 on bad usage.
 */
#include "../common/pp_cuda.h"
#include "../kernels/kernels.h"
#include "../stages/rng.h"
#include "../stages/stage.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench_shape {
    const char *name;
    int hidden, heads, seq_len, batch, blocks;
} bench_shape_t;

static const bench_shape_t SHAPES[] = {
    {"reference", 1024, 16, 1024, 4, 6},
    {"small", 512, 8, 256, 2, 4},
};

typedef struct stats {
    double median, p10, p90;
} stats_t;

typedef struct result {
    const bench_shape_t *shape;
    pp_recompute_t recompute;
    stats_t fwd, bwd, bwd_i, bwd_w, total;
    double flops;       /* model FLOPs of fwd + bwd */
    double tflops;      /* at the median total time */
    double gemm_tflops; /* cuBLAS at the four forward GEMM shapes, time-weighted */
    double gemm_shape_tflops[4];
    size_t slot_bytes, state_bytes, wgrad_bytes, work_bytes;
} result_t;

#define N_MODES PP_RECOMPUTE_COUNT /* one stage per run.recompute setting, timed side by side */

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
    c.vocab = 8192;
    c.micro_batch_size = sh->batch;
    c.n_layers = sh->blocks;
    c.first_layer = sh->blocks;
    c.total_layers = 4 * sh->blocks;
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

/* One iteration of one stage: F, B, F, I, W with events e[0..5] around them. */
static pp_status_t bench_iteration(pp_stage_t *stage, int i, cudaEvent_t *e, cudaStream_t s)
{
    PP_CUDA_CHECK(cudaEventRecord(e[0], s));
    PP_CHECK(stage_forward(stage, 0, i, s));
    PP_CUDA_CHECK(cudaEventRecord(e[1], s));
    PP_CHECK(stage_backward(stage, 0, i, s));
    PP_CUDA_CHECK(cudaEventRecord(e[2], s));
    PP_CHECK(stage_forward(stage, 0, i, s));
    PP_CUDA_CHECK(cudaEventRecord(e[3], s));
    PP_CHECK(stage_backward_input(stage, 0, i, s));
    PP_CUDA_CHECK(cudaEventRecord(e[4], s));
    PP_CHECK(stage_backward_weight(stage, 0, i, s));
    PP_CUDA_CHECK(cudaEventRecord(e[5], s));
    return PP_OK;
}

/* Medians and spreads of mode k's iterations from its events. */
static pp_status_t bench_collect(cudaEvent_t *ev, int k, int iters, double *t, result_t *r)
{
    double *t_f = t, *t_b = t + iters, *t_i = t + 2 * iters, *t_w = t + 3 * iters;
    double *t_t = t + 4 * iters;
    for (int i = 0; i < iters; i++) {
        cudaEvent_t *e = ev + 6 * (i * N_MODES + k);
        float f, b, ii, w;
        PP_CUDA_CHECK(cudaEventElapsedTime(&f, e[0], e[1]));
        PP_CUDA_CHECK(cudaEventElapsedTime(&b, e[1], e[2]));
        PP_CUDA_CHECK(cudaEventElapsedTime(&ii, e[3], e[4]));
        PP_CUDA_CHECK(cudaEventElapsedTime(&w, e[4], e[5]));
        t_f[i] = f, t_b[i] = b, t_i[i] = ii, t_w[i] = w, t_t[i] = (double)f + b;
    }
    r->fwd = stats_of(t_f, iters);
    r->bwd = stats_of(t_b, iters);
    r->bwd_i = stats_of(t_i, iters);
    r->bwd_w = stats_of(t_w, iters);
    r->total = stats_of(t_t, iters);
    r->tflops = r->flops / (r->total.median * 1e-3) / 1e12;
    return PP_OK;
}

/* The shape under every recompute setting, one stage each, iterations interleaved (mode by mode
 * inside each iteration) so that drift of the clock or the machine touches all alike. */
static pp_status_t bench_one(const bench_shape_t *sh, pp_dtype_t dt, int iters, int warmup,
                             result_t *r /* [N_MODES] */)
{
    pp_status_t st = PP_OK;
    pp_stage_t *stages[N_MODES] = {NULL};
    cudaStream_t s = NULL;
    cudaEvent_t *ev = NULL;
    double *t = NULL;
    const int N = sh->batch * sh->seq_len, C = sh->hidden, T = sh->seq_len;
    const double fwd = sh->blocks * (2.0 * N * 12.0 * C * C + 4.0 * N * T * C);
    const int n_ev = 6 * iters * N_MODES;
    memset(r, 0, N_MODES * sizeof *r);
    t = (double *)malloc(sizeof(double) * 5 * iters);
    ev = (cudaEvent_t *)calloc((size_t)n_ev, sizeof *ev);
    if (!t || !ev) {
        fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
        st = PP_ERR_NOMEM;
        goto done;
    }
    PP_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), st, done);
    for (int i = 0; i < n_ev; i++)
        PP_CUDA_CHECK_GOTO(cudaEventCreate(&ev[i]), st, done);
    PP_CHECK_GOTO(gemm_ceiling(sh, dt, s, &r[0]), st, done);
    for (int k = 0; k < N_MODES; k++) {
        pp_stage_cfg_t c = bench_cfg(sh, dt, (pp_recompute_t)k);
        memcpy(r[k].gemm_shape_tflops, r[0].gemm_shape_tflops, sizeof r[0].gemm_shape_tflops);
        r[k].gemm_tflops = r[0].gemm_tflops;
        r[k].shape = sh, r[k].recompute = c.recompute, r[k].flops = 3.0 * fwd;
        r[k].slot_bytes = stage_slot_bytes(&c), r[k].state_bytes = stage_state_bytes(&c);
        r[k].wgrad_bytes = stage_wgrad_slot_bytes(&c), r[k].work_bytes = stage_workspace_bytes(&c);
        PP_CHECK_GOTO(stage_init(&stages[k], &c), st, done);
        PP_CHECK_GOTO(fill_device(stage_slot_x(stages[k], 0), (size_t)N * C, 21, 1.0f, dt), st,
                      done);
        PP_CHECK_GOTO(fill_device(stage_slot_dy(stages[k], 0), (size_t)N * C, 22, 1e-2f, dt), st,
                      done);
        for (int i = 0; i < warmup; i++) {
            PP_CHECK_GOTO(stage_forward(stages[k], 0, i, s), st, done);
            PP_CHECK_GOTO(stage_backward(stages[k], 0, i, s), st, done);
        }
    }
    /* All enqueued before the one wait. */
    for (int i = 0; i < iters; i++)
        for (int k = 0; k < N_MODES; k++)
            PP_CHECK_GOTO(bench_iteration(stages[k], i, ev + 6 * (i * N_MODES + k), s), st, done);
    PP_CUDA_CHECK_GOTO(cudaStreamSynchronize(s), st, done);
    for (int k = 0; k < N_MODES; k++)
        PP_CHECK_GOTO(bench_collect(ev, k, iters, t, &r[k]), st, done);
done:
    for (int k = 0; k < N_MODES; k++)
        stage_free(stages[k]);
    if (ev)
        for (int i = 0; i < n_ev; i++)
            if (ev[i]) cudaEventDestroy(ev[i]);
    if (s) cudaStreamDestroy(s);
    free(ev), free(t);
    return st;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_stage [--shape reference|small|both] [--iters N (>= 20)] "
               "[--warmup N] [--dtype bf16|fp32]\n");
}

int main(int argc, char **argv)
{
    const char *shape = "both";
    int iters = 30, warmup = 5;
    pp_dtype_t dt = PP_DTYPE_BF16;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--shape") && v)
            shape = v, i++;
        else if (!strcmp(argv[i], "--iters") && v)
            iters = atoi(v), i++;
        else if (!strcmp(argv[i], "--warmup") && v)
            warmup = atoi(v), i++;
        else if (!strcmp(argv[i], "--dtype") && v) {
            if (!strcmp(v, "bf16"))
                dt = PP_DTYPE_BF16;
            else if (!strcmp(v, "fp32"))
                dt = PP_DTYPE_FP32;
            else {
                fprintf(stderr, "bench_stage: --dtype %s (allowed: bf16, fp32)\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "bench_stage: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (iters < 20 || warmup < 0) {
        fprintf(stderr, "bench_stage: --iters must be >= 20 (got %d), --warmup >= 0\n", iters);
        return 2;
    }
    int use[2] = {!strcmp(shape, "reference") || !strcmp(shape, "both"),
                  !strcmp(shape, "small") || !strcmp(shape, "both")};
    if (!use[0] && !use[1]) {
        fprintf(stderr, "bench_stage: --shape %s (allowed: reference, small, both)\n", shape);
        return 2;
    }
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
    printf("# bench_stage: one middle stage, forward + backward of one micro-batch\n");
    printf("# device 0: %s, %.1f GiB, %d SMs\n", prop.name, prop.totalGlobalMem / 1073741824.0,
           prop.multiProcessorCount);
    printf(
        "# dtype %s, warm-up %d, iterations %d (median, p10..p90), vocab unused (middle stage)\n",
        pp_dtype_name(dt), warmup, iters);

    result_t res[2 * N_MODES];
    int n = 0;
    for (int k = 0; k < 2; k++) {
        if (!use[k]) continue;
        pp_status_t st = bench_one(&SHAPES[k], dt, iters, warmup, &res[n]);
        if (st != PP_OK) {
            fprintf(stderr, "bench_stage: %s shape failed: %s\n", SHAPES[k].name,
                    pp_status_str(st));
            return pp_status_exit_code(st);
        }
        const bench_shape_t *sh = &SHAPES[k];
        int N = sh->batch * sh->seq_len;
        printf("# %s: C %d, H %d, T %d, B %d, %d blocks; state %.2f GiB; cuBLAS "
               "GEMM N=%d: %dx%d %.0f, %dx%d %.0f, %dx%d %.0f, %dx%d %.0f TFLOP/s\n",
               sh->name, sh->hidden, sh->heads, sh->seq_len, sh->batch, sh->blocks,
               res[n].state_bytes / 1073741824.0, N, 3 * sh->hidden, sh->hidden,
               res[n].gemm_shape_tflops[0], sh->hidden, sh->hidden, res[n].gemm_shape_tflops[1],
               4 * sh->hidden, sh->hidden, res[n].gemm_shape_tflops[2], sh->hidden, 4 * sh->hidden,
               res[n].gemm_shape_tflops[3]);
        n += N_MODES;
    }

    printf("%-10s %-9s %17s %17s %8s %8s %8s %8s %6s %8s %8s %8s\n", "shape", "recompute", "fwd",
           "bwd", "bwd_I", "bwd_W", "total", "model", "ratio", "slot", "I->W", "work");
    printf("%-10s %-9s %17s %17s %8s %8s %8s %8s %6s %8s %8s %8s\n", "", "", "ms (p10..p90)",
           "ms (p10..p90)", "ms", "ms", "ms", "TFLOP/s", "%", "MiB/blk", "MiB/blk", "MiB");
    for (int i = 0; i < n; i++) {
        const result_t *r = &res[i];
        const double blocks = r->shape->blocks > 0 ? r->shape->blocks : 1;
        char f[32], b[32];
        snprintf(f, sizeof f, "%.3f (%.3f..%.3f)", r->fwd.median, r->fwd.p10, r->fwd.p90);
        snprintf(b, sizeof b, "%.3f (%.3f..%.3f)", r->bwd.median, r->bwd.p10, r->bwd.p90);
        printf("%-10s %-9s %17s %17s %8.3f %8.3f %8.3f %8.1f %6.1f %8.2f %8.2f %8.1f\n",
               r->shape->name, stage_recompute_name(r->recompute), f, b, r->bwd_i.median,
               r->bwd_w.median, r->total.median, r->tflops, 100.0 * r->tflops / r->gemm_tflops,
               r->slot_bytes / blocks / 1048576.0, r->wgrad_bytes / blocks / 1048576.0,
               r->work_bytes / 1048576.0);
    }
    /* The goals: the slot at most PyTorch's per block (134 MiB reference, 8.4 MiB small), and
     * 60 % of the GEMM rate at the reference shape; the recompute settings' cost against none. */
    for (int i = 0; i < n; i += N_MODES) {
        const result_t *r = &res[i];
        const int ref = !strcmp(r->shape->name, "reference");
        const double per_block = r->slot_bytes / (double)r->shape->blocks / 1048576.0;
        const double goal = ref ? 134.0 : 8.4;
        printf("# verdict: %s slot %.2f MiB a block (goal <= %.1f, PyTorch's): %s\n",
               r->shape->name, per_block, goal, per_block <= goal ? "met" : "not met");
        if (ref) {
            double ratio = r->tflops / r->gemm_tflops;
            printf("# verdict: reference shape at %.1f%% of the cuBLAS GEMM rate (target 60%%): "
                   "%s\n",
                   100.0 * ratio, ratio >= 0.6 ? "met" : "not met");
        }
        /* The backward before this layout was I then W over the whole stage, with the same
         * kernels: the split columns time exactly that order. */
        const double split = r->fwd.median + r->bwd_i.median + r->bwd_w.median;
        printf("# %s, none: F + B %.3f ms, F + I + W (the previous B's order) %.3f ms: %+.1f%% "
               "(goal: within 3%%)\n",
               r->shape->name, r->total.median, split, 100.0 * (r->total.median / split - 1.0));
        for (int k = 1; k < N_MODES; k++)
            printf("# %s, recompute %s: total %+.1f%% against none, slot %.1f%% of none's\n",
                   r->shape->name, stage_recompute_name(r[k].recompute),
                   100.0 * (r[k].total.median / r->total.median - 1.0),
                   100.0 * r[k].slot_bytes / r->slot_bytes);
    }
    for (int i = 0; i < n; i++) {
        const result_t *r = &res[i];
        const bench_shape_t *sh = r->shape;
        printf("{\"bench\":\"stage\",\"device\":\"%s\",\"shape\":\"%s\",\"dtype\":\"%s\","
               "\"recompute\":\"%s\",\"hidden\":%d,\"heads\":%d,\"seq_len\":%d,"
               "\"micro_batch_size\":%d,\"blocks\":%d,"
               "\"iters\":%d,\"fwd_ms\":%.4f,\"fwd_ms_p10\":%.4f,\"fwd_ms_p90\":%.4f,"
               "\"bwd_ms\":%.4f,\"bwd_ms_p10\":%.4f,\"bwd_ms_p90\":%.4f,\"bwd_input_ms\":%.4f,"
               "\"bwd_weight_ms\":%.4f,\"total_ms\":%.4f,\"model_tflops\":%.2f,"
               "\"gemm_tflops\":%.2f,\"ratio\":%.4f,\"slot_bytes\":%zu,\"state_bytes\":%zu,"
               "\"wgrad_slot_bytes\":%zu,\"workspace_bytes\":%zu}\n",
               prop.name, sh->name, pp_dtype_name(dt), stage_recompute_name(r->recompute),
               sh->hidden, sh->heads, sh->seq_len, sh->batch, sh->blocks, iters, r->fwd.median,
               r->fwd.p10, r->fwd.p90, r->bwd.median, r->bwd.p10, r->bwd.p90, r->bwd_i.median,
               r->bwd_w.median, r->total.median, r->tflops, r->gemm_tflops,
               r->tflops / r->gemm_tflops, r->slot_bytes, r->state_bytes, r->wgrad_bytes,
               r->work_bytes);
    }
    return 0;
}
