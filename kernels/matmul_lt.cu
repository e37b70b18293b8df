/*
 * matmul_lt.cu — the cuBLASLt descriptors and heuristic query of a stage's GEMMs (matmul_lt.h).
 *
 * Each GEMM kind is one row of LT_KINDS (operations, stored shapes, output type) and each
 * epilogue one row of LT_EPILOGUES (which pointers it reads); the descriptors are built from
 * those rows only. Compute is CUBLAS_COMPUTE_32F with fp32 scale; the preference allows only
 * fp32 split-K partials. Host-side only: nothing is enqueued.
 */
#include "matmul_lt.h"

#include "common/pp_cuda.h"

#include <string.h>

/* The shape a stored matrix dimension takes. */
enum { DIM_N = 0, DIM_IC = 1, DIM_OC = 2 };

/* One GEMM kind: operations on A and B, the stored (rows, columns) of A, B and D, leading
 * dimension = rows; d_fp32: C and D are fp32 whatever the inputs. */
typedef struct lt_kind {
    cublasOperation_t opa, opb;
    int a[2], b[2], d[2];
    int d_fp32;
} lt_kind_t;

static const lt_kind_t LT_KINDS[PP_LT_GEMM_KINDS] = {
    /* PP_LT_FWD */ {
        CUBLAS_OP_T, CUBLAS_OP_N, {DIM_IC, DIM_OC}, {DIM_IC, DIM_N}, {DIM_OC, DIM_N}, 0},
    /* PP_LT_BWD_INPUT */
    {CUBLAS_OP_N, CUBLAS_OP_N, {DIM_IC, DIM_OC}, {DIM_OC, DIM_N}, {DIM_IC, DIM_N}, 0},
    /* PP_LT_BWD_WEIGHT */
    {CUBLAS_OP_N, CUBLAS_OP_T, {DIM_IC, DIM_N}, {DIM_OC, DIM_N}, {DIM_IC, DIM_OC}, 1},
};

/* One epilogue: whether it reads (or writes) the bias vector and the aux matrix. */
typedef struct lt_epilogue {
    cublasLtEpilogue_t epilogue;
    int bias, aux;
} lt_epilogue_t;

static const lt_epilogue_t LT_EPILOGUES[] = {
    {CUBLASLT_EPILOGUE_DEFAULT, 0, 0},  {CUBLASLT_EPILOGUE_BIAS, 1, 0},
    {CUBLASLT_EPILOGUE_GELU_AUX, 0, 1}, {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 1, 1},
    {CUBLASLT_EPILOGUE_DGELU, 0, 1},    {CUBLASLT_EPILOGUE_DGELU_BGRAD, 1, 1},
};

static const lt_epilogue_t *lt_epilogue_row(int e)
{
    for (size_t i = 0; i < sizeof(LT_EPILOGUES) / sizeof(LT_EPILOGUES[0]); i++)
        if ((int)LT_EPILOGUES[i].epilogue == e) return &LT_EPILOGUES[i];
    return NULL;
}

static int lt_dim(int which, const pp_lt_key_t *k)
{
    return which == DIM_N ? k->N : which == DIM_IC ? k->IC : k->OC;
}

/* Largest power of two (≤ 256) that divides the address. */
static uint32_t ptr_alignment(const void *p)
{
    uint32_t a = 256;
    while (a > 1 && ((uintptr_t)p % a) != 0)
        a >>= 1;
    return a;
}

int gemm_lt_rows_d(int gemm, int IC, int OC)
{
    return LT_KINDS[gemm].d[0] == DIM_OC ? OC : IC;
}

pp_lt_key_t gemm_lt_key(int gemm, int epilogue, int N, int IC, int OC, pp_dtype_t dtype,
                        const void *a, const void *b, const void *c, const void *d,
                        const void *bias, const void *aux)
{
    pp_lt_key_t k;
    memset(&k, 0, sizeof(k));
    k.gemm = gemm;
    k.epilogue = epilogue;
    k.N = N;
    k.IC = IC;
    k.OC = OC;
    k.dtype = (int)dtype;
    k.al_a = ptr_alignment(a);
    k.al_b = ptr_alignment(b);
    k.al_c = ptr_alignment(c);
    k.al_d = ptr_alignment(d);
    k.al_bias = ptr_alignment(bias);
    k.al_aux = ptr_alignment(aux);
    return k;
}

void gemm_lt_desc_free(pp_lt_desc_t *d)
{
    if (!d) return;
    if (d->lc) cublasLtMatrixLayoutDestroy(d->lc);
    if (d->lb) cublasLtMatrixLayoutDestroy(d->lb);
    if (d->la) cublasLtMatrixLayoutDestroy(d->la);
    if (d->desc) cublasLtMatmulDescDestroy(d->desc);
    memset(d, 0, sizeof(*d));
}

pp_status_t gemm_lt_desc_point(pp_lt_desc_t *d, const pp_lt_key_t *k, const void *bias,
                               const void *aux)
{
    const lt_epilogue_t *e = lt_epilogue_row(k->epilogue);
    if (!e) PP_FAIL(PP_ERR_INTERNAL, "gemm_lt_desc_point: epilogue %d not supported", k->epilogue);
    if (e->bias)
        PP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &bias, sizeof(bias)));
    if (e->aux)
        PP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            d->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    return PP_OK;
}

/* The aux matrix's leading dimension and type (those of D). */
static pp_status_t lt_desc_aux(pp_lt_desc_t *d, const pp_lt_key_t *k, cudaDataType_t t)
{
    const int64_t aux_ld = gemm_lt_rows_d(k->gemm, k->IC, k->OC);
    const int32_t aux_type = (int32_t)t;
    PP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                   &aux_ld, sizeof(aux_ld)));
    PP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        d->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type, sizeof(aux_type)));
    return PP_OK;
}

pp_status_t gemm_lt_desc_init(pp_lt_desc_t *d, const pp_lt_key_t *k, const void *bias,
                              const void *aux)
{
    pp_status_t st = PP_OK;
    memset(d, 0, sizeof(*d));
    if (k->gemm < 0 || k->gemm >= PP_LT_GEMM_KINDS || !lt_epilogue_row(k->epilogue))
        PP_FAIL(PP_ERR_INTERNAL, "gemm_lt_desc_init: bad key (gemm %d, epilogue %d)", k->gemm,
                k->epilogue);
    const lt_kind_t *r = &LT_KINDS[k->gemm];
    const cudaDataType_t t = k->dtype == PP_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    const cudaDataType_t td = r->d_fp32 ? CUDA_R_32F : t;
    const cublasLtEpilogue_t epi = (cublasLtEpilogue_t)k->epilogue;
    const int ar = lt_dim(r->a[0], k), br = lt_dim(r->b[0], k), dr = lt_dim(r->d[0], k);

    PP_CUBLAS_CHECK_GOTO(cublasLtMatmulDescCreate(&d->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), st,
                         fail);
    PP_CUBLAS_CHECK_GOTO(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                        &r->opa, sizeof(r->opa)),
                         st, fail);
    PP_CUBLAS_CHECK_GOTO(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                        &r->opb, sizeof(r->opb)),
                         st, fail);
    PP_CUBLAS_CHECK_GOTO(
        cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)),
        st, fail);
    PP_CHECK_GOTO(gemm_lt_desc_point(d, k, bias, aux), st, fail);
    if (lt_epilogue_row(k->epilogue)->aux) PP_CHECK_GOTO(lt_desc_aux(d, k, t), st, fail);
    PP_CUBLAS_CHECK_GOTO(cublasLtMatrixLayoutCreate(&d->la, t, ar, lt_dim(r->a[1], k), ar), st,
                         fail);
    PP_CUBLAS_CHECK_GOTO(cublasLtMatrixLayoutCreate(&d->lb, t, br, lt_dim(r->b[1], k), br), st,
                         fail);
    PP_CUBLAS_CHECK_GOTO(cublasLtMatrixLayoutCreate(&d->lc, td, dr, lt_dim(r->d[1], k), dr), st,
                         fail);
    return PP_OK;
fail:
    gemm_lt_desc_free(d);
    return st;
}

/* One uint32_t attribute of the preference. */
static pp_status_t lt_pref_u32(cublasLtMatmulPreference_t pref,
                               cublasLtMatmulPreferenceAttributes_t attr, uint32_t v)
{
    PP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)));
    return PP_OK;
}

pp_status_t gemm_lt_heuristic(cublasLtHandle_t lt, const pp_lt_desc_t *d, const pp_lt_key_t *k,
                              size_t workspace_bytes, int requested,
                              cublasLtMatmulHeuristicResult_t *results, int *found)
{
    pp_status_t st = PP_OK;
    cublasLtMatmulPreference_t pref = NULL;
    const uint64_t ws = workspace_bytes;
    *found = 0;
    PP_CUBLAS_CHECK_GOTO(cublasLtMatmulPreferenceCreate(&pref), st, done);
    PP_CUBLAS_CHECK_GOTO(cublasLtMatmulPreferenceSetAttribute(
                             pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
                         st, done);
    /* fp32 split-K partials only */
    PP_CHECK_GOTO(lt_pref_u32(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                              CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE),
                  st, done);
    PP_CHECK_GOTO(lt_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, k->al_a), st, done);
    PP_CHECK_GOTO(lt_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, k->al_b), st, done);
    PP_CHECK_GOTO(lt_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, k->al_c), st, done);
    PP_CHECK_GOTO(lt_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, k->al_d), st, done);
    /* no algorithm is not an error: the caller falls back to the unfused kernels */
    if (cublasLtMatmulAlgoGetHeuristic(lt, d->desc, d->la, d->lb, d->lc, d->lc, pref, requested,
                                       results, found) != CUBLAS_STATUS_SUCCESS)
        *found = 0;
done:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    return st;
}
