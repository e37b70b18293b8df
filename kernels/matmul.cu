/*
 * matmul.cu — the GEMMs of a transformer stage, through cuBLAS and cuBLASLt.
 *
 * Row-major tensors are handed to column-major cuBLAS as their transposes. Compute is fp32
 * (CUBLAS_COMPUTE_32F, never TF32), split-K partials too. Bias, residual add, GELU and the GELU
 * gradient go into cuBLASLt epilogues when the heuristic offers an algorithm for the key (GEMM,
 * epilogue, shape, alignments; descriptors built by matmul_lt.cu, plans cached in
 * pp_gemm_plans); otherwise, or with gemm->no_epilogue, the plain GEMM and the separate kernels
 * run with the same meaning. The bias gradient is one column-sum kernel after the weight GEMM:
 * chunk partials in gemm->workspace, added in a fixed order by the last block of each strip
 * (integer tickets in plans->counters, 0 at rest).
 * cuBLAS is bitwise reproducible on one stream with a user workspace, which gemm_bind keeps set.
 */
#include "kernel_util.cuh"
#include "matmul_lt.h"

#include <stdlib.h>
#include <string.h>

static cudaDataType_t cuda_type(pp_dtype_t t)
{
    return t == PP_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* ---- cuBLASLt plans -------------------------------------------------------------------------- */

/* Descriptors and the chosen algorithm of one fused GEMM. Building one costs tens of microseconds
 * of host time (heuristic query), so pp_gemm_t keeps the last PLAN_SLOTS. */
#define PLAN_SLOTS 32

typedef struct lt_plan {
    int used;
    pp_lt_key_t key;
    int found; /* 0: no algorithm, the caller falls back */
    pp_lt_desc_t d;
    cublasLtMatmulAlgo_t algo;
} lt_plan_t;

/* Column strips of one bias-gradient launch; wider outputs take several launches. */
#define BIAS_MAX_STRIPS 4096

struct pp_gemm_plans {
    lt_plan_t plan[PLAN_SLOTS];
    int next; /* round-robin victim when all slots are used */
    unsigned int
        *counters; /* device, BIAS_MAX_STRIPS tickets of the bias gradient, all 0 at rest */
};

static void lt_plan_release(lt_plan_t *p)
{
    gemm_lt_desc_free(&p->d);
    memset(p, 0, sizeof(*p));
}

/* Fills `p` (zeroed, key set) with descriptors (matmul_lt.cu) and the heuristic's first algorithm
 * for its key. p->found stays 0 when the heuristic has none. */
static pp_status_t lt_plan_build(lt_plan_t *p, cublasLtHandle_t lt, const void *bias,
                                 const void *aux, size_t workspace_bytes)
{
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    PP_CHECK(gemm_lt_desc_init(&p->d, &p->key, bias, aux));
    PP_CHECK(gemm_lt_heuristic(lt, &p->d, &p->key, workspace_bytes, 1, &heur, &found));
    if (found > 0) {
        p->algo = heur.algo;
        p->found = 1;
    }
    return PP_OK;
}

/* D = A·B (+ beta·C) through the epilogue of `key`, with the plan for it (built on first use).
 * c may equal d (in place); with beta = 0 pass c = d. Sets *ran = 1 when it ran; leaves 0 (and
 * returns PP_OK) when cuBLASLt has no algorithm for the key. */
static pp_status_t lt_matmul(int *ran, pp_gemm_t *g, const pp_lt_key_t *key, const void *a,
                             const void *b, float beta, const void *c, void *d, const void *bias,
                             const void *aux, cudaStream_t stream)
{
    struct pp_gemm_plans *plans = g->plans;
    const float one = 1.0f;
    lt_plan_t *p = NULL;
    *ran = 0;
    for (int i = 0; i < PLAN_SLOTS && !p; i++) {
        lt_plan_t *q = &plans->plan[i];
        if (q->used && memcmp(&q->key, key, sizeof(*key)) == 0) p = q;
    }
    if (!p) {
        int slot = -1;
        for (int i = 0; i < PLAN_SLOTS && slot < 0; i++)
            if (!plans->plan[i].used) slot = i;
        if (slot < 0) {
            slot = plans->next;
            plans->next = (plans->next + 1) % PLAN_SLOTS;
        }
        p = &plans->plan[slot];
        lt_plan_release(p);
        p->key = *key;
        pp_status_t st = lt_plan_build(p, g->lt, bias, aux, g->workspace_bytes);
        if (st != PP_OK) {
            lt_plan_release(p);
            return st;
        }
        p->used = 1;
    }
    if (!p->found) return PP_OK;
    PP_CHECK(gemm_lt_desc_point(&p->d, key, bias, aux));
    PP_CUBLAS_CHECK(cublasLtMatmul(g->lt, p->d.desc, &one, a, p->d.la, b, p->d.lb, &beta, c,
                                   p->d.lc, d, p->d.lc, &p->algo, g->workspace, g->workspace_bytes,
                                   stream));
    *ran = 1;
    return PP_OK;
}

/* ---- handles --------------------------------------------------------------------------------- */

pp_status_t gemm_init(pp_gemm_t *g, size_t workspace_bytes)
{
    pp_status_t st = PP_OK;
    if (!g) PP_FAIL(PP_ERR_INTERNAL, "gemm_init: NULL object");
    memset(g, 0, sizeof(*g));
    if (workspace_bytes == 0) workspace_bytes = PP_GEMM_WORKSPACE_BYTES;
    PP_CUBLAS_CHECK_GOTO(cublasCreate(&g->blas), st, fail);
    PP_CUBLAS_CHECK_GOTO(cublasLtCreate(&g->lt), st, fail);
    PP_CUDA_CHECK_GOTO(cudaMalloc(&g->workspace, workspace_bytes), st, fail);
    g->plans = (struct pp_gemm_plans *)calloc(1, sizeof(*g->plans));
    if (!g->plans) {
        fprintf(stderr, "%s:%d: out of host memory for the cuBLASLt plans\n", __FILE__, __LINE__);
        st = PP_ERR_NOMEM;
        goto fail;
    }
    PP_CUDA_CHECK_GOTO(cudaMalloc(&g->plans->counters, BIAS_MAX_STRIPS * sizeof(unsigned int)), st,
                       fail);
    PP_CUDA_CHECK_GOTO(cudaMemset(g->plans->counters, 0, BIAS_MAX_STRIPS * sizeof(unsigned int)),
                       st, fail);
    g->workspace_bytes = workspace_bytes;
    PP_CUBLAS_CHECK_GOTO(
        cublasSetMathMode(
            g->blas,
            (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
        st, fail);
    PP_CUBLAS_CHECK_GOTO(cublasSetWorkspace(g->blas, g->workspace, g->workspace_bytes), st, fail);
    return PP_OK;
fail:
    gemm_free(g);
    return st;
}

void gemm_free(pp_gemm_t *g)
{
    if (!g) return;
    if (g->plans) {
        for (int i = 0; i < PLAN_SLOTS; i++)
            lt_plan_release(&g->plans->plan[i]);
        if (g->plans->counters) cudaFree(g->plans->counters);
        free(g->plans);
    }
    if (g->lt) cublasLtDestroy(g->lt);
    if (g->blas) cublasDestroy(g->blas);
    if (g->workspace) cudaFree(g->workspace);
    memset(g, 0, sizeof(*g));
}

/* Points the cuBLAS handle at `stream`. cublasSetStream resets the handle's workspace to the
 * library pool, so ours is installed again after it; both are skipped when the stream is already
 * bound (rebinding costs the next GEMM many microseconds of host time). */
static pp_status_t gemm_bind(pp_gemm_t *g, cudaStream_t stream)
{
    cudaStream_t cur = NULL;
    PP_CUBLAS_CHECK(cublasGetStream(g->blas, &cur));
    if (cur == stream) return PP_OK;
    PP_CUBLAS_CHECK(cublasSetStream(g->blas, stream));
    PP_CUBLAS_CHECK(cublasSetWorkspace(g->blas, g->workspace, g->workspace_bytes));
    return PP_OK;
}

static pp_status_t gemm_check(const char *what, const pp_gemm_t *g, pp_dtype_t dtype)
{
    if (!dtype_ok(dtype)) PP_FAIL(PP_ERR_INTERNAL, "%s: bad dtype %d", what, (int)dtype);
    if (!g || !g->blas || !g->lt || !g->workspace || !g->plans || !g->plans->counters)
        PP_FAIL(PP_ERR_INTERNAL, "%s: gemm handles not initialised (gemm_init)", what);
    return PP_OK;
}

/* ---- small kernels --------------------------------------------------------------------------- */

/* out[n, oc] += bias[oc], for the forward when no fused epilogue is available. */
template <typename T> __global__ void add_bias_kernel(T *out, const T *bias, int N, int OC)
{
    const size_t total = (size_t)N * OC;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride)
        out[i] = from_f32<T>(to_f32(out[i]) + to_f32(bias[i % OC]));
}

/* Rows are split into at most BS_MAX_CHUNKS chunks of at least BS_MIN_ROWS rows. */
#define BS_MIN_ROWS   64
#define BS_MAX_CHUNKS 256

/* dbias[col] += Σ_rows dout[:, col] for the CS_COLS columns from col_base + blockIdx.x·CS_COLS,
 * one chunk of rows per blockIdx.y. P columns per thread: a 128-bit pack (OC a multiple of it,
 * dout 16-byte aligned) or 1. Thread (tx, ty) sums rows r0 + ty, r0 + ty + Y, ... of its
 * columns; the Y row lanes are added in order into partial[chunk][col]; the last block of the
 * strip adds the chunks in order (cs_sum_chunks) and updates dbias. */
template <typename T, int P>
__global__ void __launch_bounds__(CS_THREADS)
    bias_grad_kernel(float *dbias, float *partial, unsigned int *counters, const T *dout, int N,
                     int OC, int col_base, int rows_per_chunk)
{
    constexpr int X = CS_COLS / P, Y = CS_THREADS / X;
    __shared__ float sh[Y * CS_COLS];
    __shared__ float shf[CS_LANES * CS_COLS];
    __shared__ int last;
    const int tx = threadIdx.x % X, ty = threadIdx.x / X;
    const int c0 = col_base + blockIdx.x * CS_COLS, col = c0 + tx * P;
    const int chunk = blockIdx.y, r0 = chunk * rows_per_chunk;
    const int r1 = min(N, r0 + rows_per_chunk);
    float acc[P];
#pragma unroll
    for (int j = 0; j < P; j++)
        acc[j] = 0.0f;
    if (col < OC) {
#pragma unroll 4
        for (int r = r0 + ty; r < r1; r += Y) {
            const T *p = dout + (size_t)r * OC + col;
            if (P > 1) {
                pack128<T> v = load128cs(p);
#pragma unroll
                for (int j = 0; j < P; j++)
                    acc[j] += to_f32(v.v[j]);
            } else {
                acc[0] += to_f32(*p);
            }
        }
    }
#pragma unroll
    for (int j = 0; j < P; j++)
        sh[ty * CS_COLS + tx * P + j] = acc[j];
    __syncthreads();
    const int ncols = min(CS_COLS, OC - c0);
    if ((int)threadIdx.x < ncols) {
        float s = 0.0f;
        for (int y = 0; y < Y; y++)
            s += sh[y * CS_COLS + threadIdx.x];
        partial[(size_t)chunk * OC + c0 + threadIdx.x] = s;
    }
    if (!cs_last_block(&counters[blockIdx.x], gridDim.y, &last)) return;
    const float t = cs_sum_chunks(partial, (size_t)OC, c0, ncols, (int)gridDim.y, shf);
    if ((int)threadIdx.x < ncols) dbias[c0 + threadIdx.x] += t;
}

/* ---- forward --------------------------------------------------------------------------------- */

static pp_status_t shape_check(const char *what, int N, int IC, int OC)
{
    if (N < 0 || IC <= 0 || OC <= 0)
        PP_FAIL(PP_ERR_INTERNAL, "%s: bad shape N = %d, IC = %d, OC = %d", what, N, IC, OC);
    return PP_OK;
}

/* out[n, oc] += bias[oc] over N rows, with the kernel above. */
static pp_status_t add_bias(void *out, const void *bias, int N, int OC, pp_dtype_t dtype,
                            cudaStream_t stream)
{
    const int threads = 256;
    const unsigned grid = grid_for((size_t)N * OC, threads);
    if (dtype == PP_DTYPE_BF16)
        add_bias_kernel<bf16><<<grid, threads, 0, stream>>>((bf16 *)out, (const bf16 *)bias, N, OC);
    else
        add_bias_kernel<float>
            <<<grid, threads, 0, stream>>>((float *)out, (const float *)bias, N, OC);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* matmul_fwd_ex, with the caller's name in messages. */
static pp_status_t matmul_fwd_any(const char *what, void *out, const void *inp, const void *weight,
                                  const void *bias, const void *residual, void *pre_gelu, int N,
                                  int IC, int OC, pp_dtype_t dtype, pp_gemm_t *gemm,
                                  cudaStream_t stream)
{
    PP_CHECK(gemm_check(what, gemm, dtype));
    PP_CHECK(shape_check(what, N, IC, OC));
    if (residual && pre_gelu)
        PP_FAIL(PP_ERR_INTERNAL, "%s: a residual and a GELU output together are not supported",
                what);
    if (N == 0) return PP_OK;
    if (!out || !inp || !weight) PP_FAIL(PP_ERR_INTERNAL, "%s: NULL pointer", what);
    if (out == inp || out == weight || (bias && out == bias) || out == pre_gelu ||
        (pre_gelu && (pre_gelu == inp || pre_gelu == weight || pre_gelu == bias)))
        PP_FAIL(PP_ERR_INTERNAL, "%s: out and pre_gelu must not alias an input or each other",
                what);

    /* fused: one cublasLtMatmul whose epilogue adds the bias, takes the residual as C with
     * beta = 1, or writes gelu(·) to out and its input to pre_gelu */
    const int epi = pre_gelu ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                             : (bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    const bool want_lt = (bias || residual || pre_gelu) && !gemm->no_epilogue &&
                         (!pre_gelu || gemm_lt_rows_d(PP_LT_FWD, IC, OC) % 8 == 0);
    if (want_lt) {
        const void *c = residual ? residual : out;
        const pp_lt_key_t key =
            gemm_lt_key(PP_LT_FWD, epi, N, IC, OC, dtype, weight, inp, c, out, bias, pre_gelu);
        int ran = 0;
        PP_CHECK(lt_matmul(&ran, gemm, &key, weight, inp, residual ? 1.0f : 0.0f, c, out, bias,
                           pre_gelu, stream));
        if (ran) return PP_OK;
    }

    /* unfused, same meaning: GEMM (into pre_gelu for the GELU form; accumulating onto the
     * residual when it is out itself), bias kernel, then residual_fwd or gelu_fwd */
    void *dst = pre_gelu ? pre_gelu : out;
    const bool in_place = residual && residual == out;
    const cudaDataType_t t = cuda_type(dtype);
    const float one = 1.0f, beta = in_place ? 1.0f : 0.0f;
    PP_CHECK(gemm_bind(gemm, stream));
    PP_CUBLAS_CHECK(cublasGemmEx(gemm->blas, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, IC, &one, weight, t,
                                 IC, inp, t, IC, &beta, dst, t, OC, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
    if (bias) PP_CHECK(add_bias(dst, bias, N, OC, dtype, stream));
    if (residual && !in_place)
        PP_CHECK(residual_fwd(out, out, residual, (size_t)N * OC, dtype, stream));
    if (pre_gelu) PP_CHECK(gelu_fwd(out, pre_gelu, (size_t)N * OC, dtype, stream));
    return PP_OK;
}

pp_status_t matmul_fwd_ex(void *out, const void *inp, const void *weight, const void *bias,
                          const void *residual, void *pre_gelu, int N, int IC, int OC,
                          pp_dtype_t dtype, pp_gemm_t *gemm, cudaStream_t stream)
{
    return matmul_fwd_any("matmul_fwd_ex", out, inp, weight, bias, residual, pre_gelu, N, IC, OC,
                          dtype, gemm, stream);
}

pp_status_t matmul_fwd(void *out, const void *inp, const void *weight, const void *bias, int N,
                       int IC, int OC, pp_dtype_t dtype, pp_gemm_t *gemm, cudaStream_t stream)
{
    return matmul_fwd_any("matmul_fwd", out, inp, weight, bias, NULL, NULL, N, IC, OC, dtype, gemm,
                          stream);
}

/* ---- backward -------------------------------------------------------------------------------- */

pp_status_t matmul_bwd_input(void *dinp, const void *dout, const void *weight, int N, int IC,
                             int OC, int accumulate, pp_dtype_t dtype, pp_gemm_t *gemm,
                             cudaStream_t stream)
{
    PP_CHECK(gemm_check("matmul_bwd_input", gemm, dtype));
    PP_CHECK(shape_check("matmul_bwd_input", N, IC, OC));
    if (N == 0) return PP_OK;
    if (!dinp || !dout || !weight) PP_FAIL(PP_ERR_INTERNAL, "matmul_bwd_input: NULL pointer");
    const cudaDataType_t t = cuda_type(dtype);
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    PP_CHECK(gemm_bind(gemm, stream));
    /* column-major: dinpᵀ (IC×N) = W (IC×OC) · doutᵀ (OC×N) */
    PP_CUBLAS_CHECK(cublasGemmEx(gemm->blas, CUBLAS_OP_N, CUBLAS_OP_N, IC, N, OC, &one, weight, t,
                                 IC, dout, t, OC, &beta, dinp, t, IC, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
    return PP_OK;
}

pp_status_t matmul_bwd_input_dgelu(void *dinp, const void *dout, const void *weight,
                                   const void *pre_gelu, int N, int IC, int OC, pp_dtype_t dtype,
                                   pp_gemm_t *gemm, cudaStream_t stream)
{
    PP_CHECK(gemm_check("matmul_bwd_input_dgelu", gemm, dtype));
    PP_CHECK(shape_check("matmul_bwd_input_dgelu", N, IC, OC));
    if (N == 0) return PP_OK;
    if (!dinp || !dout || !weight || !pre_gelu)
        PP_FAIL(PP_ERR_INTERNAL, "matmul_bwd_input_dgelu: NULL pointer");
    if (dinp == dout || dinp == weight || dinp == pre_gelu)
        PP_FAIL(PP_ERR_INTERNAL, "matmul_bwd_input_dgelu: dinp must not alias an input");
    if (!gemm->no_epilogue && gemm_lt_rows_d(PP_LT_BWD_INPUT, IC, OC) % 8 == 0) {
        const pp_lt_key_t key = gemm_lt_key(PP_LT_BWD_INPUT, CUBLASLT_EPILOGUE_DGELU, N, IC, OC,
                                            dtype, weight, dout, dinp, dinp, NULL, pre_gelu);
        int ran = 0;
        PP_CHECK(
            lt_matmul(&ran, gemm, &key, weight, dout, 0.0f, dinp, dinp, NULL, pre_gelu, stream));
        if (ran) return PP_OK;
    }
    PP_CHECK(matmul_bwd_input(dinp, dout, weight, N, IC, OC, 0, dtype, gemm, stream));
    return gelu_bwd(dinp, pre_gelu, dinp, (size_t)N * IC, dtype, stream);
}

pp_status_t matmul_bwd_weight(float *dweight, float *dbias, const void *dout, const void *inp,
                              int N, int IC, int OC, pp_dtype_t dtype, pp_gemm_t *gemm,
                              cudaStream_t stream)
{
    PP_CHECK(gemm_check("matmul_bwd_weight", gemm, dtype));
    PP_CHECK(shape_check("matmul_bwd_weight", N, IC, OC));
    if (N == 0) return PP_OK;
    if (!dweight || !dout || !inp) PP_FAIL(PP_ERR_INTERNAL, "matmul_bwd_weight: NULL pointer");
    const cudaDataType_t t = cuda_type(dtype);
    const float one = 1.0f;
    PP_CHECK(gemm_bind(gemm, stream));
    /* column-major: dWᵀ (IC×OC) += inpᵀ (IC×N) · dout (N×OC); bf16 inputs, fp32 output */
    PP_CUBLAS_CHECK(cublasGemmEx(gemm->blas, CUBLAS_OP_N, CUBLAS_OP_T, IC, OC, N, &one, inp, t, IC,
                                 dout, t, OC, &one, dweight, CUDA_R_32F, IC, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
    if (!dbias) return PP_OK;
    /* column sums: partials in the (now idle) GEMM workspace, the chunks added in one kernel */
    int chunks = (N + BS_MIN_ROWS - 1) / BS_MIN_ROWS;
    if (chunks > BS_MAX_CHUNKS) chunks = BS_MAX_CHUNKS;
    size_t fit = gemm->workspace_bytes / ((size_t)OC * sizeof(float));
    if ((size_t)chunks > fit) chunks = (int)fit;
    if (chunks < 1)
        PP_FAIL(PP_ERR_INTERNAL, "matmul_bwd_weight: workspace of %zu bytes too small for OC = %d",
                gemm->workspace_bytes, OC);
    const int rows_per_chunk = (N + chunks - 1) / chunks;
    chunks = (N + rows_per_chunk - 1) / rows_per_chunk; /* no empty chunk */
    float *partial = (float *)gemm->workspace;
    const int P = dtype == PP_DTYPE_BF16 ? 8 : 4;
    const bool vec = OC % P == 0 && is_aligned16(dout);
    const int strips = (OC + CS_COLS - 1) / CS_COLS;
    for (int s0 = 0; s0 < strips; s0 += BIAS_MAX_STRIPS) {
        const int n = strips - s0 < BIAS_MAX_STRIPS ? strips - s0 : BIAS_MAX_STRIPS;
        const dim3 grid(n, chunks);
        const int base = s0 * CS_COLS;
        unsigned int *ctr = gemm->plans->counters;
        if (dtype == PP_DTYPE_BF16) {
            const bf16 *dy = (const bf16 *)dout;
            if (vec)
                bias_grad_kernel<bf16, 8><<<grid, CS_THREADS, 0, stream>>>(
                    dbias, partial, ctr, dy, N, OC, base, rows_per_chunk);
            else
                bias_grad_kernel<bf16, 1><<<grid, CS_THREADS, 0, stream>>>(
                    dbias, partial, ctr, dy, N, OC, base, rows_per_chunk);
        } else {
            const float *dy = (const float *)dout;
            if (vec)
                bias_grad_kernel<float, 4><<<grid, CS_THREADS, 0, stream>>>(
                    dbias, partial, ctr, dy, N, OC, base, rows_per_chunk);
            else
                bias_grad_kernel<float, 1><<<grid, CS_THREADS, 0, stream>>>(
                    dbias, partial, ctr, dy, N, OC, base, rows_per_chunk);
        }
        PP_CUDA_LAUNCH_CHECK();
    }
    return PP_OK;
}

/* ---- batched (attention) --------------------------------------------------------------------- */

pp_status_t gemm_strided_batched(void *c, const void *a, const void *b, int trans_a, int trans_b,
                                 int m, int n, int k, float alpha, float beta, long long stride_a,
                                 long long stride_b, long long stride_c, int batch,
                                 pp_dtype_t dtype, pp_gemm_t *gemm, cudaStream_t stream)
{
    PP_CHECK(gemm_check("gemm_strided_batched", gemm, dtype));
    if (m <= 0 || n <= 0 || k <= 0 || batch < 0)
        PP_FAIL(PP_ERR_INTERNAL,
                "gemm_strided_batched: bad shape m = %d, n = %d, k = %d, batch = %d", m, n, k,
                batch);
    if (stride_a < 0 || stride_b < 0 || stride_c < 0)
        PP_FAIL(PP_ERR_INTERNAL, "gemm_strided_batched: negative stride");
    if (batch == 0) return PP_OK;
    if (!a || !b || !c) PP_FAIL(PP_ERR_INTERNAL, "gemm_strided_batched: NULL pointer");
    const cudaDataType_t t = cuda_type(dtype);
    /* row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: B's storage comes first */
    const cublasOperation_t ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int ldb = trans_b ? k : n, lda = trans_a ? m : k;
    PP_CHECK(gemm_bind(gemm, stream));
    PP_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        gemm->blas, ob, oa, n, m, k, &alpha, b, t, ldb, stride_b, a, t, lda, stride_a, &beta, c, t,
        n, stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return PP_OK;
}
