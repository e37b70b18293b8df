/*
 * bench_stage.cu — forward and backward of one micro-batch on one middle stage, timed with CUDA
 * events, next to cuBLAS's bf16 GEMM rate at the stage's own GEMM shapes measured in the same run.
 *
 *   bench_stage [--shape reference|small|both] [--iters N] [--warmup N] [--dtype bf16|fp32]
 *
 * Shapes: reference = hidden 1024, 16 heads, seq 1024, micro-batch 4, 6 blocks; small = hidden
 * 512, 8 heads, seq 256, micro-batch 2, 4 blocks. Each iteration enqueues F then B (and, in a
 * second loop, F then I then W) on one stream with events between; nothing synchronizes until all
 * iterations are enqueued. Model FLOPs count the matmuls only (2·N·12·C² per block forward plus
 * 4·N·T·C for attention, causal counted in full), fwd + bwd = 3 × fwd. Prints a `#` preamble, a
 * fixed-width table and one JSON line per shape. Exit 1 on a CUDA error, 2 on bad usage.
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
    stats_t fwd, bwd, bwd_i, bwd_w, total;
    double flops;       /* model FLOPs of fwd + bwd */
    double tflops;      /* at the median total time */
    double gemm_tflops; /* cuBLAS at the four forward GEMM shapes, time-weighted */
    double gemm_shape_tflops[4];
    size_t slot_bytes, state_bytes;
} result_t;

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

static pp_status_t bench_one(const bench_shape_t *sh, pp_dtype_t dt, int iters, int warmup,
                             result_t *r)
{
    pp_status_t st = PP_OK;
    pp_stage_t *stage = NULL;
    cudaStream_t s = NULL;
    cudaEvent_t *ev = NULL;
    double *t_f = NULL, *t_b = NULL, *t_i = NULL, *t_w = NULL, *t_t = NULL;
    pp_gemm_t g;
    memset(&g, 0, sizeof g);
    memset(r, 0, sizeof *r);
    r->shape = sh;

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
    c.grad_scale = 1.0f;
    r->slot_bytes = stage_slot_bytes(&c);
    r->state_bytes = stage_state_bytes(&c);

    const int N = sh->batch * sh->seq_len, C = sh->hidden, T = sh->seq_len;
    const double fwd = sh->blocks * (2.0 * N * 12.0 * C * C + 4.0 * N * T * C);
    r->flops = 3.0 * fwd;

    t_f = (double *)malloc(sizeof(double) * iters);
    t_b = (double *)malloc(sizeof(double) * iters);
    t_i = (double *)malloc(sizeof(double) * iters);
    t_w = (double *)malloc(sizeof(double) * iters);
    t_t = (double *)malloc(sizeof(double) * iters);
    ev = (cudaEvent_t *)calloc((size_t)6 * iters, sizeof *ev);
    if (!t_f || !t_b || !t_i || !t_w || !t_t || !ev) {
        fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
        st = PP_ERR_NOMEM;
        goto done;
    }
    PP_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), st, done);
    for (int i = 0; i < 6 * iters; i++)
        PP_CUDA_CHECK_GOTO(cudaEventCreate(&ev[i]), st, done);

    /* The GEMM ceiling first, before the stage takes its memory. */
    {
        const int ic[4] = {C, C, C, 4 * C}, oc[4] = {3 * C, C, 4 * C, C};
        double flops = 0.0, ms_sum = 0.0;
        PP_CHECK_GOTO(gemm_init(&g, 0), st, done);
        for (int k = 0; k < 4; k++) {
            double ms = 0.0;
            PP_CHECK_GOTO(gemm_rate(&g, N, ic[k], oc[k], dt, 50, s, &r->gemm_shape_tflops[k], &ms),
                          st, done);
            flops += 2.0 * N * ic[k] * oc[k];
            ms_sum += ms;
        }
        r->gemm_tflops = flops / (ms_sum * 1e-3) / 1e12;
        gemm_free(&g);
    }

    PP_CHECK_GOTO(stage_init(&stage, &c), st, done);
    PP_CHECK_GOTO(fill_device(stage_slot_x(stage, 0), (size_t)N * C, 21, 1.0f, dt), st, done);
    PP_CHECK_GOTO(fill_device(stage_slot_dy(stage, 0), (size_t)N * C, 22, 1e-2f, dt), st, done);

    for (int i = 0; i < warmup; i++) {
        PP_CHECK_GOTO(stage_forward(stage, 0, i, s), st, done);
        PP_CHECK_GOTO(stage_backward(stage, 0, i, s), st, done);
    }
    /* F then B, and F then I then W; all enqueued before the one wait. */
    for (int i = 0; i < iters; i++) {
        cudaEvent_t *e = ev + 6 * i;
        PP_CUDA_CHECK_GOTO(cudaEventRecord(e[0], s), st, done);
        PP_CHECK_GOTO(stage_forward(stage, 0, i, s), st, done);
        PP_CUDA_CHECK_GOTO(cudaEventRecord(e[1], s), st, done);
        PP_CHECK_GOTO(stage_backward(stage, 0, i, s), st, done);
        PP_CUDA_CHECK_GOTO(cudaEventRecord(e[2], s), st, done);
        PP_CHECK_GOTO(stage_forward(stage, 0, i, s), st, done);
        PP_CUDA_CHECK_GOTO(cudaEventRecord(e[3], s), st, done);
        PP_CHECK_GOTO(stage_backward_input(stage, 0, i, s), st, done);
        PP_CUDA_CHECK_GOTO(cudaEventRecord(e[4], s), st, done);
        PP_CHECK_GOTO(stage_backward_weight(stage, 0, i, s), st, done);
        PP_CUDA_CHECK_GOTO(cudaEventRecord(e[5], s), st, done);
    }
    PP_CUDA_CHECK_GOTO(cudaStreamSynchronize(s), st, done);
    for (int i = 0; i < iters; i++) {
        cudaEvent_t *e = ev + 6 * i;
        float f, b, ii, w;
        PP_CUDA_CHECK_GOTO(cudaEventElapsedTime(&f, e[0], e[1]), st, done);
        PP_CUDA_CHECK_GOTO(cudaEventElapsedTime(&b, e[1], e[2]), st, done);
        PP_CUDA_CHECK_GOTO(cudaEventElapsedTime(&ii, e[3], e[4]), st, done);
        PP_CUDA_CHECK_GOTO(cudaEventElapsedTime(&w, e[4], e[5]), st, done);
        t_f[i] = f, t_b[i] = b, t_i[i] = ii, t_w[i] = w, t_t[i] = (double)f + b;
    }
    r->fwd = stats_of(t_f, iters);
    r->bwd = stats_of(t_b, iters);
    r->bwd_i = stats_of(t_i, iters);
    r->bwd_w = stats_of(t_w, iters);
    r->total = stats_of(t_t, iters);
    r->tflops = r->flops / (r->total.median * 1e-3) / 1e12;
done:
    stage_free(stage);
    gemm_free(&g);
    if (ev)
        for (int i = 0; i < 6 * iters; i++)
            if (ev[i]) cudaEventDestroy(ev[i]);
    if (s) cudaStreamDestroy(s);
    free(ev), free(t_f), free(t_b), free(t_i), free(t_w), free(t_t);
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

    result_t res[2];
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
        printf("# %s: C %d, H %d, T %d, B %d, %d blocks; slot %.2f GiB, state %.2f GiB; cuBLAS "
               "GEMM N=%d: %dx%d %.0f, %dx%d %.0f, %dx%d %.0f, %dx%d %.0f TFLOP/s\n",
               sh->name, sh->hidden, sh->heads, sh->seq_len, sh->batch, sh->blocks,
               res[n].slot_bytes / 1073741824.0, res[n].state_bytes / 1073741824.0, N,
               3 * sh->hidden, sh->hidden, res[n].gemm_shape_tflops[0], sh->hidden, sh->hidden,
               res[n].gemm_shape_tflops[1], 4 * sh->hidden, sh->hidden, res[n].gemm_shape_tflops[2],
               sh->hidden, 4 * sh->hidden, res[n].gemm_shape_tflops[3]);
        n++;
    }

    printf("%-10s %6s %17s %17s %8s %8s %8s %8s %8s %6s\n", "shape", "tokens", "fwd", "bwd",
           "bwd_I", "bwd_W", "total", "model", "GEMM", "ratio");
    printf("%-10s %6s %17s %17s %8s %8s %8s %8s %8s %6s\n", "", "", "ms (p10..p90)",
           "ms (p10..p90)", "ms", "ms", "ms", "TFLOP/s", "TFLOP/s", "%");
    for (int i = 0; i < n; i++) {
        const result_t *r = &res[i];
        char f[32], b[32];
        snprintf(f, sizeof f, "%.3f (%.3f..%.3f)", r->fwd.median, r->fwd.p10, r->fwd.p90);
        snprintf(b, sizeof b, "%.3f (%.3f..%.3f)", r->bwd.median, r->bwd.p10, r->bwd.p90);
        printf("%-10s %6d %17s %17s %8.3f %8.3f %8.3f %8.1f %8.1f %6.1f\n", r->shape->name,
               r->shape->batch * r->shape->seq_len, f, b, r->bwd_i.median, r->bwd_w.median,
               r->total.median, r->tflops, r->gemm_tflops, 100.0 * r->tflops / r->gemm_tflops);
    }
    for (int i = 0; i < n; i++) {
        const result_t *r = &res[i];
        if (strcmp(r->shape->name, "reference")) continue;
        double ratio = r->tflops / r->gemm_tflops;
        printf("# verdict: reference shape at %.1f%% of the cuBLAS GEMM rate (target 60%%): %s\n",
               100.0 * ratio, ratio >= 0.6 ? "met" : "not met");
    }
    for (int i = 0; i < n; i++) {
        const result_t *r = &res[i];
        const bench_shape_t *sh = r->shape;
        printf("{\"bench\":\"stage\",\"device\":\"%s\",\"shape\":\"%s\",\"dtype\":\"%s\","
               "\"hidden\":%d,\"heads\":%d,\"seq_len\":%d,\"micro_batch_size\":%d,\"blocks\":%d,"
               "\"iters\":%d,\"fwd_ms\":%.4f,\"fwd_ms_p10\":%.4f,\"fwd_ms_p90\":%.4f,"
               "\"bwd_ms\":%.4f,\"bwd_ms_p10\":%.4f,\"bwd_ms_p90\":%.4f,\"bwd_input_ms\":%.4f,"
               "\"bwd_weight_ms\":%.4f,\"total_ms\":%.4f,\"model_tflops\":%.2f,"
               "\"gemm_tflops\":%.2f,\"ratio\":%.4f,\"slot_bytes\":%zu,\"state_bytes\":%zu}\n",
               prop.name, sh->name, pp_dtype_name(dt), sh->hidden, sh->heads, sh->seq_len,
               sh->batch, sh->blocks, iters, r->fwd.median, r->fwd.p10, r->fwd.p90, r->bwd.median,
               r->bwd.p10, r->bwd.p90, r->bwd_i.median, r->bwd_w.median, r->total.median, r->tflops,
               r->gemm_tflops, r->tflops / r->gemm_tflops, r->slot_bytes, r->state_bytes);
    }
    return 0;
}
