/*
 * bench_bgrad.cu — whether cuBLASLt's BGRADB epilogue should carry the weight pass's bias
 * gradients. At the four weight-gradient GEMMs of a reference block (N = 4096 tokens, hidden
 * 1024: fc2 4096→1024, fc 1024→4096, proj 1024→1024, qkv 1024→3072; bf16 inputs, fp32
 * dW += doutᵀ·inp with beta = 1, as matmul_bwd_weight runs them) it reports whether the heuristic
 * offers a BGRADB algorithm (same preferences as kernels/matmul.cu: 32 MiB workspace, fp32
 * split-K partials only), its split-K count and reduction scheme, whether the epilogue overwrites
 * the bias vector or adds to it, whether five runs give the same bits (dW and the bias), the
 * largest difference of its bias gradient to colsum_bwd's and of its dW to the plain GEMM's, and
 * the median times of the plain GEMM (cublasGemmEx, what the W pass runs), the plain GEMM +
 * colsum_bwd over dout, and the BGRADB GEMM.
 *
 *   bench_bgrad [--iters N]
 *
 * Prints a `#` preamble, a fixed-width table and one JSON line per shape. Exit 1 on a CUDA or
 * cuBLAS error, 2 on bad usage.
 */
#define BENCH_NAME "bench_bgrad"
#include "bench_util.h"

#include "common/pp_cuda.h"
#include "kernels/kernels.h"

#include <algorithm>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#define N_TOK    4096
#define WS_BYTES ((size_t)32 << 20)
#define RUNS     5 /* for the bitwise check */

typedef struct wshape {
    const char *name;
    int IC, OC;
} wshape_t;

static const wshape_t SHAPES[] = {
    {"fc2", 4096, 1024}, {"fc", 1024, 4096}, {"proj", 1024, 1024}, {"qkv", 1024, 3072}};

/* Everything one shape needs on the device. */
typedef struct bufs {
    uint16_t *inp, *dout;     /* bf16 [N, IC], [N, OC] */
    float *dw, *dw0, *dw_ref; /* [OC, IC]: working, start, after the plain GEMM */
    float *bias, *col;        /* [OC]: the epilogue's output, colsum_bwd's */
    void *ws;
} bufs_t;

/* What one shape gave. */
typedef struct result {
    int found, splitk;
    uint32_t scheme;
    int overwrites, adds, same_bits;
    double bias_err, dw_err;
    float us_plain, us_colsum, us_bgrad;
} result_t;

/* ---- inputs ---------------------------------------------------------------------------------- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;

static int upload_random(void *dst, size_t n, int bf16)
{
    return bench_upload_random(&g_rng, dst, n, bf16);
}

static int bufs_init(bufs_t *b, const wshape_t *s)
{
    const size_t w = (size_t)s->OC * s->IC;
    memset(b, 0, sizeof *b);
    CK(cudaMalloc(&b->inp, (size_t)N_TOK * s->IC * 2));
    CK(cudaMalloc(&b->dout, (size_t)N_TOK * s->OC * 2));
    CK(cudaMalloc(&b->dw, w * 4));
    CK(cudaMalloc(&b->dw0, w * 4));
    CK(cudaMalloc(&b->dw_ref, w * 4));
    CK(cudaMalloc(&b->bias, (size_t)s->OC * 4));
    CK(cudaMalloc(&b->col, (size_t)s->OC * 4));
    CK(cudaMalloc(&b->ws, WS_BYTES));
    if (upload_random(b->inp, (size_t)N_TOK * s->IC, 1) ||
        upload_random(b->dout, (size_t)N_TOK * s->OC, 1))
        return -1;
    return upload_random(b->dw0, w, 0);
}

static void bufs_free(bufs_t *b)
{
    void *p[] = {b->inp, b->dout, b->dw, b->dw0, b->dw_ref, b->bias, b->col, b->ws};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        cudaFree(p[i]);
    memset(b, 0, sizeof *b);
}

/* ---- the two GEMMs --------------------------------------------------------------------------- */

/* Column-major: dWᵀ (IC×OC) += inpᵀ (IC×N) · dout (N×OC), as matmul_bwd_weight. */
static int plain_gemm(cublasHandle_t h, const wshape_t *s, bufs_t *b, cudaStream_t st)
{
    const float one = 1.0f;
    CKB(cublasSetStream(h, st));
    CKB(cublasSetWorkspace(h, b->ws, WS_BYTES));
    CKB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, s->IC, s->OC, N_TOK, &one, b->inp, CUDA_R_16BF,
                     s->IC, b->dout, CUDA_R_16BF, s->OC, &one, b->dw, CUDA_R_32F, s->IC,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}

typedef struct bplan {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} bplan_t;

static int bgrad_plan(cublasLtHandle_t lt, const wshape_t *s, bufs_t *b, bplan_t *p, result_t *r)
{
    const cublasOperation_t opa = CUBLAS_OP_N, opb = CUBLAS_OP_T;
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BGRADB;
    const uint64_t ws = WS_BYTES;
    const uint32_t red = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    CKB(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CKB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    CKB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    CKB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    CKB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b->bias,
                                       sizeof b->bias));
    CKB(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_16BF, s->IC, N_TOK, s->IC));
    CKB(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_16BF, s->OC, N_TOK, s->OC));
    CKB(cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_32F, s->IC, s->OC, s->IC));
    CKB(cublasLtMatmulPreferenceCreate(&pref));
    CKB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                             sizeof ws));
    CKB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &red,
                                             sizeof red));
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->la, p->lb, p->lc, p->lc,
                                                       pref, 1, &heur, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    r->found = hs == CUBLAS_STATUS_SUCCESS && found > 0;
    if (!r->found) return 0;
    p->algo = heur.algo;
    int32_t sk = 1;
    size_t wr = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk,
                                             sizeof sk, &wr) == CUBLAS_STATUS_SUCCESS)
        r->splitk = sk;
    cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                         &r->scheme, sizeof r->scheme, &wr);
    return 0;
}

static int bgrad_gemm(cublasLtHandle_t lt, bplan_t *p, bufs_t *b, cudaStream_t st)
{
    const float one = 1.0f;
    CKB(cublasLtMatmul(lt, p->desc, &one, b->inp, p->la, b->dout, p->lb, &one, b->dw, p->lc, b->dw,
                       p->lc, &p->algo, b->ws, WS_BYTES, st));
    return 0;
}

static void bplan_free(bplan_t *p)
{
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    memset(p, 0, sizeof *p);
}

/* ---- checks and timing ----------------------------------------------------------------------- */

static int colsum(const wshape_t *s, bufs_t *b, cudaStream_t st)
{
    pp_colsum_task_t t;
    memset(&t, 0, sizeof t);
    t.C = s->OC;
    t.dy = b->dout;
    t.d_sum = b->col;
    return colsum_bwd(&t, 1, N_TOK, b->ws, WS_BYTES, PP_DTYPE_BF16, st) == PP_OK ? 0 : -1;
}

static double max_diff(const std::vector<float> &a, const std::vector<float> &b, double shift)
{
    double m = 0;
    for (size_t i = 0; i < a.size(); i++)
        m = std::max(m, fabs((double)a[i] - shift - (double)b[i]));
    return m;
}

/* Overwrite or add (the bias starts at 1000), the difference to colsum_bwd and to the plain
 * GEMM's dW, and the bits of RUNS runs from the same start. */
static int check_semantics(cublasLtHandle_t lt, cublasHandle_t h, const wshape_t *s, bufs_t *b,
                           bplan_t *p, result_t *r, cudaStream_t st)
{
    const size_t w = (size_t)s->OC * s->IC;
    std::vector<float> thousand((size_t)s->OC, 1000.0f), col((size_t)s->OC), bias((size_t)s->OC),
        first_bias, ref(w), dw(w), first_dw;
    CK(cudaMemsetAsync(b->col, 0, (size_t)s->OC * 4, st));
    if (colsum(s, b, st)) return -1;
    CK(cudaMemcpyAsync(b->dw_ref, b->dw0, w * 4, cudaMemcpyDeviceToDevice, st));
    std::swap(b->dw, b->dw_ref);
    if (plain_gemm(h, s, b, st)) return -1;
    std::swap(b->dw, b->dw_ref);
    CK(cudaMemcpyAsync(col.data(), b->col, col.size() * 4, cudaMemcpyDeviceToHost, st));
    CK(cudaMemcpyAsync(ref.data(), b->dw_ref, w * 4, cudaMemcpyDeviceToHost, st));
    r->same_bits = 1;
    for (int run = 0; run < RUNS; run++) {
        CK(cudaMemcpyAsync(b->bias, thousand.data(), thousand.size() * 4, cudaMemcpyHostToDevice,
                           st));
        CK(cudaMemcpyAsync(b->dw, b->dw0, w * 4, cudaMemcpyDeviceToDevice, st));
        if (bgrad_gemm(lt, p, b, st)) return -1;
        CK(cudaMemcpyAsync(bias.data(), b->bias, bias.size() * 4, cudaMemcpyDeviceToHost, st));
        CK(cudaMemcpyAsync(dw.data(), b->dw, w * 4, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        if (run == 0) {
            first_bias = bias, first_dw = dw;
            continue;
        }
        r->same_bits &= memcmp(first_bias.data(), bias.data(), bias.size() * 4) == 0 &&
                        memcmp(first_dw.data(), dw.data(), w * 4) == 0;
    }
    const double tol = 1e-2; /* sums of 4096 values of magnitude 1 in fp32 */
    const double over = max_diff(first_bias, col, 0.0), add = max_diff(first_bias, col, 1000.0);
    r->overwrites = over < tol;
    r->adds = add < tol;
    r->bias_err = std::min(over, add);
    r->dw_err = max_diff(first_dw, ref, 0.0);
    return 0;
}

/* Median µs of `iters` runs of `what` (0 plain, 1 plain + colsum, 2 BGRADB) after two warm-up
 * runs, from CUDA events (bench_util.h). */
static int time_it(int what, int iters, cublasLtHandle_t lt, cublasHandle_t h, const wshape_t *s,
                   bufs_t *b, bplan_t *p, cudaStream_t st, float *median)
{
    auto run = [&]() -> int {
        int bad = what == 2 ? bgrad_gemm(lt, p, b, st) : plain_gemm(h, s, b, st);
        if (!bad && what == 1) bad = colsum(s, b, st);
        return bad;
    };
    return bench_time_us(run, iters, 2, st, median);
}

/* ---- driver ---------------------------------------------------------------------------------- */

static int run_shape(const wshape_t *s, int iters, cublasLtHandle_t lt, cublasHandle_t h,
                     cudaStream_t st, result_t *r)
{
    bufs_t b;
    bplan_t p;
    memset(r, 0, sizeof *r);
    memset(&p, 0, sizeof p);
    r->splitk = 1;
    int bad = bufs_init(&b, s) || bgrad_plan(lt, s, &b, &p, r);
    if (!bad) {
        CK(cudaMemcpyAsync(b.dw, b.dw0, (size_t)s->OC * s->IC * 4, cudaMemcpyDeviceToDevice, st));
        bad = time_it(0, iters, lt, h, s, &b, &p, st, &r->us_plain) ||
              time_it(1, iters, lt, h, s, &b, &p, st, &r->us_colsum);
    }
    if (!bad && r->found)
        bad = time_it(2, iters, lt, h, s, &b, &p, st, &r->us_bgrad) ||
              check_semantics(lt, h, s, &b, &p, r, st);
    bplan_free(&p);
    bufs_free(&b);
    return bad ? -1 : 0;
}

static void print_row(const wshape_t *s, const result_t *r)
{
    printf("  %-5s %5d %5d %5s %6d %6u %-9s %5s %10.2e %10.2e %8.2f %8.2f %8.2f\n", s->name, s->IC,
           s->OC, r->found ? "yes" : "no", r->splitk, r->scheme,
           !r->found       ? "-"
           : r->overwrites ? "overwrite"
           : r->adds       ? "add"
                           : "neither",
           !r->found      ? "-"
           : r->same_bits ? "yes"
                          : "NO",
           r->bias_err, r->dw_err, r->us_plain, r->us_colsum, r->us_bgrad);
}

int main(int argc, char **argv)
{
    int iters = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc && atoi(argv[i + 1]) > 0) {
            iters = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_bgrad [--iters N]\n");
            return 2;
        }
    }
    cudaDeviceProp prop;
    cudaStream_t st = NULL;
    cublasHandle_t h = NULL;
    cublasLtHandle_t lt = NULL;
    if (cudaSetDevice(0) != cudaSuccess || cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
        cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess ||
        cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "bench_bgrad: no CUDA device or cuBLAS\n");
        return 1;
    }
    printf("# bench_bgrad: weight GEMMs of a reference block (N %d, bf16 in, fp32 dW +=), BGRADB "
           "against the plain GEMM + colsum_bwd, %d iterations, device 0: %s\n",
           N_TOK, iters, prop.name);
    printf("# %-5s %5s %5s %5s %6s %6s %-9s %5s %10s %10s %8s %8s %8s\n", "gemm", "IC", "OC",
           "algo", "splitk", "scheme", "bias", "same", "bias_err", "dw_err", "plain", "+colsum",
           "bgradb");
    printf("# %-5s %5s %5s %5s %6s %6s %-9s %5s %10s %10s %8s %8s %8s\n", "", "", "", "", "", "",
           "", "bits", "", "", "us", "us", "us");
    result_t r[4];
    for (int k = 0; k < 4; k++) {
        if (run_shape(&SHAPES[k], iters, lt, h, st, &r[k])) return 1;
        print_row(&SHAPES[k], &r[k]);
    }
    for (int k = 0; k < 4; k++)
        printf("{\"bench\":\"bgrad\",\"gemm\":\"%s\",\"found\":%d,\"splitk\":%d,\"scheme\":%u,"
               "\"overwrites\":%d,\"adds\":%d,\"same_bits\":%d,\"bias_err\":%.3e,\"dw_err\":%.3e,"
               "\"us_plain\":%.3f,\"us_plain_colsum\":%.3f,\"us_bgradb\":%.3f}\n",
               SHAPES[k].name, r[k].found, r[k].splitk, r[k].scheme, r[k].overwrites, r[k].adds,
               r[k].same_bits, r[k].bias_err, r[k].dw_err, r[k].us_plain, r[k].us_colsum,
               r[k].us_bgrad);
    cublasLtDestroy(lt);
    cublasDestroy(h);
    cudaStreamDestroy(st);
    return 0;
}
