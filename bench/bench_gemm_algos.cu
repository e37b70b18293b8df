/*
 * bench_gemm_algos.cu — whether another cuBLASLt algorithm than the one a stage runs would make a
 * transformer block's GEMMs faster. For each GEMM of a block as kernels/matmul.cu issues it
 * (F: qkv, proj, fc, fc2 with their epilogues, proj and fc2 with the residual as C, beta = 1;
 * I: the four input gradients, fc2's with DGELU; W: the four weight gradients, fp32 dW += with
 * beta = 1) it times the stage's own call (matmul_fwd_ex, matmul_bwd_input_dgelu,
 * matmul_bwd_input, matmul_bwd_weight: cuBLASLt or cublasGemmEx, whichever the stage uses), then
 * every algorithm the heuristic returns (up to 16) for the same GEMM as a cuBLASLt matmul with
 * matmul.cu's own descriptors and preferences (kernels/matmul_lt.h). It reports rank 0, the
 * fastest rank, its configuration, whether it repeats its bits over 3 runs and whether its output
 * is within tolerance of rank 0's. For the fc2 input gradient also DGELU_BGRAD (bias gradient of
 * D's type, then fp32) and the plain GEMM + GELU-gradient kernel (matmul.cu's fallback). Per
 * pass: the sum of today's times and of the best ones.
 *
 *   bench_gemm_algos [--shape reference|small|both] [--iters N] [--seed S] [--all]
 *
 * reference: N = 4096 tokens, C = 1024; small: N = 512, C = 512; bf16 in and out, fp32 compute.
 * Times: median of --iters (30) runs after 5 warm-up runs, CUDA events around each run. --all
 * prints every algorithm's time and configuration. Prints a `#` preamble, a fixed-width table and
 * one JSON line per GEMM and per pass. Exit 1 on a CUDA or cuBLAS error, 2 on bad usage.
 */
#define BENCH_NAME "bench_gemm_algos"
#include "bench_util.h"

#include "common/pp_cuda.h"
#include "kernels/kernels.h"
#include "kernels/matmul_lt.h"

#include <algorithm>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#define MAX_ALGOS 16
#define WARMUP    5
#define RUNS      3 /* for the bitwise check */

#define CKP(call)                                                                                  \
    do {                                                                                           \
        if ((call) != PP_OK) return -1;                                                            \
    } while (0)

/* ---- the GEMMs of a block -------------------------------------------------------------------- */

typedef struct shape {
    const char *name;
    int N, C;
} shape_t;

static const shape_t SHAPES[] = {{"reference", 4096, 1024}, {"small", 512, 512}};

/* One GEMM of a block: its pass, its layer, the matmul_lt.h kind and epilogue, in and out
 * features in units of C, and whether the forward takes the residual as C (beta = 1). */
typedef struct role {
    const char *pass, *name;
    int gemm, epilogue;
    int ic, oc;
    int residual;
} role_t;

static const role_t ROLES[] = {
    {"F", "qkv", PP_LT_FWD, CUBLASLT_EPILOGUE_BIAS, 1, 3, 0},
    {"F", "proj", PP_LT_FWD, CUBLASLT_EPILOGUE_BIAS, 1, 1, 1},
    {"F", "fc", PP_LT_FWD, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 1, 4, 0},
    {"F", "fc2", PP_LT_FWD, CUBLASLT_EPILOGUE_BIAS, 4, 1, 1},
    {"I", "fc2", PP_LT_BWD_INPUT, CUBLASLT_EPILOGUE_DGELU, 4, 1, 0},
    {"I", "fc", PP_LT_BWD_INPUT, CUBLASLT_EPILOGUE_DEFAULT, 1, 4, 0},
    {"I", "proj", PP_LT_BWD_INPUT, CUBLASLT_EPILOGUE_DEFAULT, 1, 1, 0},
    {"I", "qkv", PP_LT_BWD_INPUT, CUBLASLT_EPILOGUE_DEFAULT, 1, 3, 0},
    {"W", "fc2", PP_LT_BWD_WEIGHT, CUBLASLT_EPILOGUE_DEFAULT, 4, 1, 0},
    {"W", "fc", PP_LT_BWD_WEIGHT, CUBLASLT_EPILOGUE_DEFAULT, 1, 4, 0},
    {"W", "proj", PP_LT_BWD_WEIGHT, CUBLASLT_EPILOGUE_DEFAULT, 1, 1, 0},
    {"W", "qkv", PP_LT_BWD_WEIGHT, CUBLASLT_EPILOGUE_DEFAULT, 1, 3, 0},
};
#define N_ROLES (int)(sizeof(ROLES) / sizeof(ROLES[0]))
static const char *const PASSES[] = {"F", "I", "W"};

static const char *epilogue_name(int e)
{
    return e == CUBLASLT_EPILOGUE_BIAS            ? "bias"
           : e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ? "gelu_aux_bias"
           : e == CUBLASLT_EPILOGUE_DGELU         ? "dgelu"
           : e == CUBLASLT_EPILOGUE_DGELU_BGRAD   ? "dgelu_bgrad"
                                                  : "none";
}

/* The device buffers of one GEMM. a, b: the A and B operands (weight and input, or input and
 * output gradient for W); d: the output (fp32 for W); c: the residual (F with beta = 1);
 * d0: dW's starting values (W); bias: [rows of D] (fp32 room); aux: the GELU matrix (size of D). */
typedef struct bufs {
    int N, IC, OC;
    size_t na, nb, nd;
    void *a, *b, *c, *d, *d0, *bias, *aux;
} bufs_t;

/* ---- inputs ---------------------------------------------------------------------------------- */

static uint64_t g_rng; /* seeded per shape from --seed */

static int upload_random(void *dst, size_t n, int bf16)
{
    return bench_upload_random(&g_rng, dst, n, bf16);
}

static void bufs_free(bufs_t *b)
{
    void *p[] = {b->a, b->b, b->c, b->d, b->d0, b->bias, b->aux};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i]) cudaFree(p[i]);
    memset(b, 0, sizeof *b);
}

/* Allocate and fill the buffers of role r at shape s (every input random, D too). */
static int bufs_init(bufs_t *b, const role_t *r, const shape_t *s)
{
    memset(b, 0, sizeof *b);
    b->N = s->N, b->IC = r->ic * s->C, b->OC = r->oc * s->C;
    const size_t N = (size_t)b->N, IC = (size_t)b->IC, OC = (size_t)b->OC;
    const int wgrad = r->gemm == PP_LT_BWD_WEIGHT;
    b->na = wgrad ? N * IC : IC * OC;
    b->nb = r->gemm == PP_LT_FWD ? N * IC : N * OC;
    b->nd = wgrad ? IC * OC : r->gemm == PP_LT_FWD ? N * OC : N * IC;
    const size_t ed = wgrad ? 4 : 2;
    CK(cudaMalloc(&b->a, b->na * 2));
    CK(cudaMalloc(&b->b, b->nb * 2));
    CK(cudaMalloc(&b->d, b->nd * ed));
    CK(cudaMalloc(&b->bias, (size_t)gemm_lt_rows_d(r->gemm, b->IC, b->OC) * 4));
    CK(cudaMalloc(&b->aux, b->nd * 2));
    if (r->residual) CK(cudaMalloc(&b->c, b->nd * 2));
    if (wgrad) CK(cudaMalloc(&b->d0, b->nd * 4));
    if (upload_random(b->a, b->na, 1) || upload_random(b->b, b->nb, 1) ||
        upload_random(b->d, b->nd, !wgrad) ||
        upload_random(b->bias, (size_t)gemm_lt_rows_d(r->gemm, b->IC, b->OC), 1) ||
        upload_random(b->aux, b->nd, 1) || (b->c && upload_random(b->c, b->nd, 1)) ||
        (b->d0 && upload_random(b->d0, b->nd, 0)))
        return -1;
    return 0;
}

/* ---- the stage's call and the cuBLASLt matmul ------------------------------------------------ */

/* What the stage runs for role r today, through matmul.cu's public functions. */
static int stage_call(const role_t *r, bufs_t *b, pp_gemm_t *g, cudaStream_t st)
{
    const pp_dtype_t bf = PP_DTYPE_BF16;
    if (r->gemm == PP_LT_FWD)
        CKP(matmul_fwd_ex(b->d, b->b, b->a, b->bias, b->c,
                          r->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ? b->aux : NULL, b->N,
                          b->IC, b->OC, bf, g, st));
    else if (r->gemm == PP_LT_BWD_INPUT && r->epilogue == CUBLASLT_EPILOGUE_DGELU)
        CKP(matmul_bwd_input_dgelu(b->d, b->b, b->a, b->aux, b->N, b->IC, b->OC, bf, g, st));
    else if (r->gemm == PP_LT_BWD_INPUT)
        CKP(matmul_bwd_input(b->d, b->b, b->a, b->N, b->IC, b->OC, 0, bf, g, st));
    else
        CKP(matmul_bwd_weight((float *)b->d, NULL, b->b, b->a, b->N, b->IC, b->OC, bf, g, st));
    return 0;
}

/* One cuBLASLt GEMM with matmul.cu's descriptors and the heuristic's algorithms for it. */
typedef struct lt_call {
    pp_lt_key_t key;
    pp_lt_desc_t d;
    const void *c;
    float beta;
    int found;
    cublasLtMatmulHeuristicResult_t heur[MAX_ALGOS];
    float us[MAX_ALGOS]; /* median µs of each rank, -1 when it would not run */
} lt_call_t;

/* The key and descriptors of role r's GEMM with epilogue `epi` (C: the residual, or D itself). */
static int lt_call_init(lt_call_t *l, const role_t *r, int epi, bufs_t *b)
{
    memset(l, 0, sizeof *l);
    const int wgrad = r->gemm == PP_LT_BWD_WEIGHT;
    l->c = r->residual ? b->c : b->d;
    l->beta = r->residual || wgrad ? 1.0f : 0.0f;
    l->key = gemm_lt_key(r->gemm, epi, b->N, b->IC, b->OC, PP_DTYPE_BF16, b->a, b->b, l->c, b->d,
                         b->bias, b->aux);
    CKP(gemm_lt_desc_init(&l->d, &l->key, b->bias, b->aux));
    return 0;
}

static int lt_call_query(lt_call_t *l, pp_gemm_t *g)
{
    CKP(gemm_lt_heuristic(g->lt, &l->d, &l->key, g->workspace_bytes, MAX_ALGOS, l->heur,
                          &l->found));
    return 0;
}

static cublasStatus_t lt_run(const lt_call_t *l, int rank, bufs_t *b, pp_gemm_t *g, cudaStream_t st)
{
    const float one = 1.0f;
    return cublasLtMatmul(g->lt, l->d.desc, &one, b->a, l->d.la, b->b, l->d.lb, &l->beta, l->c,
                          l->d.lc, b->d, l->d.lc, &l->heur[rank].algo, g->workspace,
                          g->workspace_bytes, st);
}

/* ---- timing ---------------------------------------------------------------------------------- */

/* Median µs of `iters` runs of f() after WARMUP runs (bench_util.h). */
template <typename F> static int time_us(F f, int iters, cudaStream_t st, float *median)
{
    return bench_time_us(f, iters, WARMUP, st, median);
}

/* Times every rank; a rank whose first run is refused gets -1 (its status on stderr). */
static int lt_call_sweep(lt_call_t *l, bufs_t *b, pp_gemm_t *g, int iters, cudaStream_t st)
{
    for (int k = 0; k < l->found; k++) {
        cublasStatus_t s = lt_run(l, k, b, g, st);
        if (s != CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "# bench_gemm_algos: rank %d refused at run: %s\n", k,
                    cublasGetStatusString(s));
            l->us[k] = -1.0f;
            continue;
        }
        auto run = [&]() -> int {
            CKB(lt_run(l, k, b, g, st));
            return 0;
        };
        if (time_us(run, iters, st, &l->us[k])) return -1;
    }
    return 0;
}

static int best_rank(const lt_call_t *l)
{
    int best = -1;
    for (int k = 0; k < l->found; k++)
        if (l->us[k] >= 0 && (best < 0 || l->us[k] < l->us[best])) best = k;
    return best;
}

/* ---- algorithm configuration ----------------------------------------------------------------- */

/* The configuration attributes read from an algorithm, and their sizes in bytes. */
typedef struct cfg_attr {
    cublasLtMatmulAlgoConfigAttributes_t attr;
    const char *name;
    size_t size;
} cfg_attr_t;

static const cfg_attr_t CFG_ATTRS[] = {
    {CUBLASLT_ALGO_CONFIG_ID, "algo_id", 4},
    {CUBLASLT_ALGO_CONFIG_TILE_ID, "tile", 4},
    {CUBLASLT_ALGO_CONFIG_STAGES_ID, "stages", 4},
    {CUBLASLT_ALGO_CONFIG_SPLITK_NUM, "splitk", 4},
    {CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, "reduction", 4},
    {CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, "swizzle", 4},
    {CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, "custom", 4},
    {CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, "cluster", 2},
    {CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, "inner", 2},
};
#define N_CFG (int)(sizeof(CFG_ATTRS) / sizeof(CFG_ATTRS[0]))

/* Each attribute's value, -1 where this cuBLASLt does not give it. */
static void algo_config(const cublasLtMatmulAlgo_t *a, long long v[N_CFG])
{
    for (int i = 0; i < N_CFG; i++) {
        uint32_t u32 = 0;
        uint16_t u16 = 0;
        size_t written = 0;
        void *p = CFG_ATTRS[i].size == 2 ? (void *)&u16 : (void *)&u32;
        cublasStatus_t s = cublasLtMatmulAlgoConfigGetAttribute(a, CFG_ATTRS[i].attr, p,
                                                                CFG_ATTRS[i].size, &written);
        const long long got = CFG_ATTRS[i].size == 2 ? (long long)u16 : (long long)u32;
        v[i] = s == CUBLAS_STATUS_SUCCESS ? got : -1;
    }
}

static void print_config(FILE *f, const cublasLtMatmulAlgo_t *a, int json)
{
    long long v[N_CFG];
    algo_config(a, v);
    for (int i = 0; i < N_CFG; i++) {
        if (json)
            fprintf(f, ",\"%s\":%lld", CFG_ATTRS[i].name, v[i]);
        else
            fprintf(f, "%s%s=%lld", i ? " " : "", CFG_ATTRS[i].name, v[i]);
    }
}

/* ---- checks ---------------------------------------------------------------------------------- */

/* D after one run of rank k (W: from dW's starting values), as floats. */
static int lt_output(const lt_call_t *l, int k, const role_t *r, bufs_t *b, pp_gemm_t *g,
                     cudaStream_t st, std::vector<float> *out)
{
    const int wgrad = r->gemm == PP_LT_BWD_WEIGHT;
    if (wgrad) CK(cudaMemcpyAsync(b->d, b->d0, b->nd * 4, cudaMemcpyDeviceToDevice, st));
    CKB(lt_run(l, k, b, g, st));
    out->resize(b->nd);
    if (wgrad) {
        CK(cudaMemcpyAsync(out->data(), b->d, b->nd * 4, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        return 0;
    }
    std::vector<uint16_t> h(b->nd);
    CK(cudaMemcpyAsync(h.data(), b->d, b->nd * 2, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    for (size_t i = 0; i < b->nd; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(&(*out)[i], &u, 4);
    }
    return 0;
}

/* What the fastest rank gave against rank 0. */
typedef struct check {
    int same_bits, within_tol;
    double err; /* max |best − rank 0| / max |rank 0| */
} check_t;

/* RUNS runs of rank `best` give the same bits, and differ from rank 0 by at most 2^-7 (bf16 D,
 * two units in the last place at the largest value) or 2^-16 (fp32 dW) of rank 0's largest
 * magnitude. */
static int lt_check(const lt_call_t *l, int best, const role_t *r, bufs_t *b, pp_gemm_t *g,
                    cudaStream_t st, check_t *c)
{
    std::vector<float> ref, first, cur;
    if (lt_output(l, 0, r, b, g, st, &ref)) return -1;
    c->same_bits = 1;
    for (int run = 0; run < RUNS; run++) {
        if (lt_output(l, best, r, b, g, st, run ? &cur : &first)) return -1;
        if (run) c->same_bits &= memcmp(cur.data(), first.data(), first.size() * 4) == 0;
    }
    double diff = 0, scale = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        diff = std::max(diff, fabs((double)first[i] - ref[i]));
        scale = std::max(scale, fabs((double)ref[i]));
    }
    c->err = scale > 0 ? diff / scale : diff;
    c->within_tol = c->err <= (r->gemm == PP_LT_BWD_WEIGHT ? ldexp(1.0, -16) : ldexp(1.0, -7));
    return 0;
}

/* ---- one GEMM -------------------------------------------------------------------------------- */

/* What one GEMM gave. */
typedef struct outcome {
    float us_stage;     /* the stage's call */
    int stage_lt;       /* the stage runs cuBLASLt (1) or cublasGemmEx (0) */
    int rank0_is_stage; /* the sweep's rank 0 is the algorithm of the stage's plan */
    int best;           /* fastest rank, -1 when none ran */
    check_t chk;
    lt_call_t l;
} outcome_t;

/* The stage's call, then the sweep of its GEMM as a cuBLASLt matmul, then the checks. */
static int run_role(const role_t *r, bufs_t *b, pp_gemm_t *g, int iters, cudaStream_t st,
                    outcome_t *o)
{
    memset(o, 0, sizeof *o);
    o->best = -1;
    auto stage = [&]() -> int { return stage_call(r, b, g, st); };
    if (time_us(stage, iters, st, &o->us_stage)) return -1;
    if (lt_call_init(&o->l, r, r->epilogue, b) || lt_call_query(&o->l, g)) return -1;
    const int fused = r->gemm == PP_LT_FWD || r->epilogue == CUBLASLT_EPILOGUE_DGELU;
    o->stage_lt = fused && o->l.found > 0;
    if (o->stage_lt) { /* the stage's plan asks for one algorithm */
        cublasLtMatmulHeuristicResult_t one;
        int n = 0;
        CKP(gemm_lt_heuristic(g->lt, &o->l.d, &o->l.key, g->workspace_bytes, 1, &one, &n));
        o->rank0_is_stage = n == 1 && memcmp(&one.algo, &o->l.heur[0].algo, sizeof one.algo) == 0;
    }
    if (lt_call_sweep(&o->l, b, g, iters, st)) return -1;
    o->best = best_rank(&o->l);
    if (o->best >= 0 && o->l.us[0] >= 0 && lt_check(&o->l, o->best, r, b, g, st, &o->chk))
        return -1;
    return 0;
}

/* Rank 0's algorithm with split-K forced to 2..4 (fp32 partials reduced in a fixed order), where
 * cuBLASLt accepts it: what a tile-starved GEMM (few output tiles for the SMs, long k) would gain.
 * One `# splitk` line per GEMM; -1 where the configuration is refused. */
static int run_splitk(const lt_call_t *l, const role_t *r, bufs_t *b, pp_gemm_t *g, int iters,
                      cudaStream_t st)
{
    if (l->found < 1) return 0;
    float us[3] = {-1.0f, -1.0f, -1.0f};
    for (int s = 2; s <= 4; s++) {
        lt_call_t one = *l;
        const int32_t k = s;
        const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
        cublasLtMatmulAlgo_t *a = &one.heur[0].algo;
        cublasLtMatmulHeuristicResult_t chk;
        if (cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &k,
                                                 sizeof k) != CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                 sizeof scheme) != CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulAlgoCheck(g->lt, l->d.desc, l->d.la, l->d.lb, l->d.lc, l->d.lc, a,
                                    &chk) != CUBLAS_STATUS_SUCCESS ||
            chk.workspaceSize > g->workspace_bytes ||
            lt_run(&one, 0, b, g, st) != CUBLAS_STATUS_SUCCESS)
            continue;
        auto run = [&]() -> int {
            CKB(lt_run(&one, 0, b, g, st));
            return 0;
        };
        if (time_us(run, iters, st, &us[s - 2])) return -1;
    }
    printf("# splitk %s %-5s rank0 %8.2f us | splitk 2 %8.2f | 3 %8.2f | 4 %8.2f\n", r->pass,
           r->name, l->us[0], us[0], us[1], us[2]);
    return 0;
}

/* The fc2 input gradient's other ways: DGELU_BGRAD (bias of D's type, then fp32), the plain
 * GEMM + GELU-gradient kernel (matmul.cu's fallback), and the plain GEMM alone. */
typedef struct extras {
    int bgrad_found, f32_found;
    float us_bgrad_r0, us_bgrad_best, us_f32_r0, us_f32_best, us_fallback, us_plain;
    const char *f32_state;
} extras_t;

static void sweep_summary(const lt_call_t *l, float *r0, float *best)
{
    const int k = best_rank(l);
    *r0 = l->found > 0 ? l->us[0] : -1.0f;
    *best = k >= 0 ? l->us[k] : -1.0f;
}

static int run_bgrad(const role_t *r, bufs_t *b, pp_gemm_t *g, int iters, cudaStream_t st, int f32,
                     extras_t *x)
{
    lt_call_t l;
    const int32_t t32 = CUDA_R_32F;
    if (lt_call_init(&l, r, CUBLASLT_EPILOGUE_DGELU_BGRAD, b)) return -1;
    int bad = 0;
    if (f32 && cublasLtMatmulDescSetAttribute(l.d.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t32,
                                              sizeof t32) != CUBLAS_STATUS_SUCCESS) {
        x->f32_state = "refused_by_descriptor";
    } else {
        bad = lt_call_query(&l, g) || lt_call_sweep(&l, b, g, iters, st);
        if (f32) {
            x->f32_found = l.found;
            sweep_summary(&l, &x->us_f32_r0, &x->us_f32_best);
            x->f32_state = !l.found ? "no_algorithm" : best_rank(&l) < 0 ? "refused_at_run" : "ok";
        } else {
            x->bgrad_found = l.found;
            sweep_summary(&l, &x->us_bgrad_r0, &x->us_bgrad_best);
        }
    }
    gemm_lt_desc_free(&l.d);
    return bad ? -1 : 0;
}

static int run_extras(const role_t *r, bufs_t *b, pp_gemm_t *g, int iters, cudaStream_t st,
                      extras_t *x)
{
    memset(x, 0, sizeof *x);
    x->us_f32_r0 = x->us_f32_best = -1.0f;
    if (run_bgrad(r, b, g, iters, st, 0, x) || run_bgrad(r, b, g, iters, st, 1, x)) return -1;
    g->no_epilogue = 1;
    auto fallback = [&]() -> int { return stage_call(r, b, g, st); };
    const int bad = time_us(fallback, iters, st, &x->us_fallback);
    g->no_epilogue = 0;
    auto plain = [&]() -> int {
        CKP(matmul_bwd_input(b->d, b->b, b->a, b->N, b->IC, b->OC, 0, PP_DTYPE_BF16, g, st));
        return 0;
    };
    return bad || time_us(plain, iters, st, &x->us_plain) ? -1 : 0;
}

/* ---- output ---------------------------------------------------------------------------------- */

static void print_header(void)
{
    printf("# %-4s %-5s %5s %5s %-13s %-6s %8s %5s %8s %4s %8s %8s %4s %4s %9s  %s\n", "pass",
           "gemm", "IC", "OC", "epilogue", "stage", "stage", "algos", "rank0", "best", "best",
           "saving", "same", "tol", "err", "best algorithm");
    printf("# %-4s %-5s %5s %5s %-13s %-6s %8s %5s %8s %4s %8s %8s %4s %4s %9s\n", "", "", "", "",
           "", "runs", "us", "", "us", "rank", "us", "us", "bits", "", "");
}

static float saving(const outcome_t *o)
{
    return o->best < 0 ? 0.0f : std::max(0.0f, o->us_stage - o->l.us[o->best]);
}

static void print_row(const role_t *r, const bufs_t *b, const outcome_t *o, int all)
{
    const char *path = o->stage_lt ? (o->rank0_is_stage ? "lt" : "lt!r0") : "gemmex";
    printf("  %-4s %-5s %5d %5d %-13s %-6s %8.2f %5d %8.2f %4d %8.2f %8.2f %4s %4s %9.2e  ",
           r->pass, r->name, b->IC, b->OC, epilogue_name(r->epilogue), path, o->us_stage,
           o->l.found, o->l.found ? o->l.us[0] : -1.0f, o->best,
           o->best >= 0 ? o->l.us[o->best] : -1.0f, saving(o), o->chk.same_bits ? "yes" : "NO",
           o->chk.within_tol ? "yes" : "NO", o->chk.err);
    if (o->best >= 0) print_config(stdout, &o->l.heur[o->best].algo, 0);
    printf("\n");
    for (int k = 0; all && k < o->l.found; k++) {
        printf("      rank %2d %8.2f us  workspace %9zu  waves %5.2f  ", k, o->l.us[k],
               o->l.heur[k].workspaceSize, o->l.heur[k].wavesCount);
        print_config(stdout, &o->l.heur[k].algo, 0);
        printf("\n");
    }
}

static void print_json(const shape_t *s, const role_t *r, const bufs_t *b, const outcome_t *o)
{
    printf("{\"bench\":\"gemm_algos\",\"shape\":\"%s\",\"pass\":\"%s\",\"gemm\":\"%s\",\"N\":%d,"
           "\"IC\":%d,\"OC\":%d,\"epilogue\":\"%s\",\"stage_path\":\"%s\",\"rank0_is_stage\":%d,"
           "\"us_stage\":%.3f,\"found\":%d,\"us_rank0\":%.3f,\"best_rank\":%d,\"us_best\":%.3f,"
           "\"same_bits\":%d,\"within_tol\":%d,\"err\":%.3e",
           s->name, r->pass, r->name, b->N, b->IC, b->OC, epilogue_name(r->epilogue),
           o->stage_lt ? "lt" : "gemmex", o->rank0_is_stage, o->us_stage, o->l.found,
           o->l.found ? o->l.us[0] : -1.0f, o->best, o->best >= 0 ? o->l.us[o->best] : -1.0f,
           o->chk.same_bits, o->chk.within_tol, o->chk.err);
    if (o->best >= 0) print_config(stdout, &o->l.heur[o->best].algo, 1);
    printf(",\"us_ranks\":[");
    for (int k = 0; k < o->l.found; k++)
        printf("%s%.3f", k ? "," : "", o->l.us[k]);
    printf("]}\n");
}

static void print_extras(const shape_t *s, const outcome_t *o, const extras_t *x)
{
    printf("# fc2 input gradient, other ways (us): dgelu rank0 %.2f best %.2f | dgelu_bgrad "
           "(bias bf16) %d algos rank0 %.2f best %.2f | dgelu_bgrad (bias fp32) %s, %d algos "
           "rank0 %.2f best %.2f | plain GEMM + gelu_bwd %.2f | plain GEMM alone %.2f\n",
           o->l.found ? o->l.us[0] : -1.0f, o->best >= 0 ? o->l.us[o->best] : -1.0f, x->bgrad_found,
           x->us_bgrad_r0, x->us_bgrad_best, x->f32_state, x->f32_found, x->us_f32_r0,
           x->us_f32_best, x->us_fallback, x->us_plain);
    printf("{\"bench\":\"gemm_algos\",\"shape\":\"%s\",\"gemm\":\"fc2_dgrad_ways\","
           "\"bgrad_found\":%d,\"us_bgrad_rank0\":%.3f,\"us_bgrad_best\":%.3f,"
           "\"bgrad_f32\":\"%s\",\"bgrad_f32_found\":%d,\"us_bgrad_f32_rank0\":%.3f,"
           "\"us_bgrad_f32_best\":%.3f,\"us_plain_gelu_bwd\":%.3f,\"us_plain\":%.3f}\n",
           s->name, x->bgrad_found, x->us_bgrad_r0, x->us_bgrad_best, x->f32_state, x->f32_found,
           x->us_f32_r0, x->us_f32_best, x->us_fallback, x->us_plain);
}

/* Per pass: today's times (the stage's calls) and the best (the faster of today's and the
 * sweep's fastest), summed over the pass's GEMMs. */
static void print_passes(const shape_t *s, const outcome_t *o)
{
    for (int p = 0; p < 3; p++) {
        double today = 0, best = 0;
        for (int i = 0; i < N_ROLES; i++)
            if (!strcmp(ROLES[i].pass, PASSES[p])) {
                today += o[i].us_stage;
                best += o[i].us_stage - saving(&o[i]);
            }
        printf("# pass %s: today %.2f us, best %.2f us, saving %.2f us a block (%.1f %%)\n",
               PASSES[p], today, best, today - best, today > 0 ? 100 * (today - best) / today : 0);
        printf("{\"bench\":\"gemm_algos\",\"shape\":\"%s\",\"pass\":\"%s\",\"us_today\":%.3f,"
               "\"us_best\":%.3f}\n",
               s->name, PASSES[p], today, best);
    }
}

/* ---- driver ---------------------------------------------------------------------------------- */

static int run_shape(const shape_t *s, int iters, int all, pp_gemm_t *g, cudaStream_t st)
{
    std::vector<outcome_t> o((size_t)N_ROLES);
    std::vector<bufs_t> bs((size_t)N_ROLES);
    extras_t x;
    printf("# shape %s: N %d tokens, C %d\n", s->name, s->N, s->C);
    print_header();
    int bad = 0;
    for (int i = 0; i < N_ROLES && !bad; i++) {
        bufs_t *b = &bs[(size_t)i];
        bad = bufs_init(b, &ROLES[i], s) || run_role(&ROLES[i], b, g, iters, st, &o[(size_t)i]);
        if (!bad) print_row(&ROLES[i], b, &o[(size_t)i], all);
        if (!bad) bad = run_splitk(&o[(size_t)i].l, &ROLES[i], b, g, iters, st);
        if (!bad && ROLES[i].epilogue == CUBLASLT_EPILOGUE_DGELU) {
            bad = run_extras(&ROLES[i], b, g, iters, st, &x);
            if (!bad) print_extras(s, &o[(size_t)i], &x);
        }
        if (!bad) print_json(s, &ROLES[i], b, &o[(size_t)i]);
        gemm_lt_desc_free(&o[(size_t)i].l.d);
        bufs_free(b);
    }
    if (!bad) print_passes(s, o.data());
    return bad ? -1 : 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_gemm_algos [--shape reference|small|both] [--iters N] "
                    "[--seed S] [--all]\n");
    return 2;
}

int main(int argc, char **argv)
{
    int iters = 30, all = 0, first = 0, last = 0;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--iters") && v && atoi(v) > 0) {
            iters = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--seed") && v && strtoull(v, NULL, 10) > 0) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--shape") && v &&
                   (!strcmp(v, "reference") || !strcmp(v, "small") || !strcmp(v, "both"))) {
            first = !strcmp(v, "small");
            last = strcmp(v, "reference") ? 1 : 0;
            i++;
        } else if (!strcmp(argv[i], "--all")) {
            all = 1;
        } else {
            return usage();
        }
    }
    cudaDeviceProp prop;
    cudaStream_t st = NULL;
    pp_gemm_t g;
    memset(&g, 0, sizeof g);
    if (cudaSetDevice(0) != cudaSuccess || cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
        cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess ||
        gemm_init(&g, 0) != PP_OK) {
        fprintf(stderr, "bench_gemm_algos: no CUDA device or cuBLAS\n");
        return 1;
    }
    printf("# bench_gemm_algos: a block's GEMMs as the stage runs them against every algorithm of "
           "the cuBLASLt heuristic (up to %d, workspace %zu MiB, fp32 split-K partials), bf16 "
           "in/out, fp32 compute, median of %d after %d warm-up, seed %llu, cuBLASLt %zu, "
           "device 0: %s\n",
           MAX_ALGOS, g.workspace_bytes >> 20, iters, WARMUP, seed, cublasLtGetVersion(),
           prop.name);
    printf("# stage runs: lt (cuBLASLt, the sweep's rank 0), lt!r0 (cuBLASLt, an algorithm other "
           "than rank 0), gemmex (cublasGemmEx); saving = stage - best when positive\n");
    int bad = 0;
    for (int k = first; k <= last && !bad; k++) {
        g_rng = 0x9e3779b97f4a7c15ULL ^ (seed * 0x2545f4914f6cdd1dULL);
        bad = run_shape(&SHAPES[k], iters, all, &g, st);
    }
    gemm_free(&g);
    cudaStreamDestroy(st);
    return bad ? 1 : 0;
}
