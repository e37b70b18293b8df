/*
 * matmul_lt.h — the cuBLASLt descriptors of a stage's GEMMs, built in one place: matmul.cu's
 * plans run them, bench/bench_gemm_algos.cu sweeps the heuristic's algorithms over them.
 *
 * A key (pp_lt_key_t) names everything the descriptors and the heuristic's answer depend on: the
 * GEMM kind, the epilogue, the shape, the dtype and the pointer alignments. Compute is fp32
 * (CUBLAS_COMPUTE_32F, never TF32), split-K partials too (reduction scheme mask: compute type
 * only). Nothing here enqueues work; descriptors are owned by the caller (_init/_free).
 */
#ifndef PP_MATMUL_LT_H
#define PP_MATMUL_LT_H

#include "kernels.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The three GEMMs of a linear layer in the column-major view cuBLAS sees (W stored [OC,IC] is
 * IC×OC with leading dimension IC; row-major activations [N,X] are X×N):
 *   PP_LT_FWD         outᵀ (OC×N) = Wᵀ · inpᵀ (IC×N)          A = W (op T), B = inp (op N)
 *   PP_LT_BWD_INPUT   dinpᵀ (IC×N) = W · doutᵀ (OC×N)         A = W (op N), B = dout (op N)
 *   PP_LT_BWD_WEIGHT  dWᵀ (IC×OC) += inpᵀ (IC×N) · dout (N×OC) A = inp (op N), B = dout (op T),
 *                     C and D fp32 whatever the inputs */
enum { PP_LT_FWD = 0, PP_LT_BWD_INPUT = 1, PP_LT_BWD_WEIGHT = 2, PP_LT_GEMM_KINDS = 3 };

/* Everything the descriptors and the algorithm depend on. Only 4-byte fields: no padding, so keys
 * compare with memcmp. */
typedef struct pp_lt_key {
    int gemm;     /* PP_LT_FWD, PP_LT_BWD_INPUT or PP_LT_BWD_WEIGHT */
    int epilogue; /* cublasLtEpilogue_t */
    int N, IC, OC;
    int dtype;                                        /* pp_dtype_t of A, B (and C, D, bias, aux
                                                         except for PP_LT_BWD_WEIGHT's fp32 C, D) */
    uint32_t al_a, al_b, al_c, al_d, al_bias, al_aux; /* pointer alignments (bytes) chosen for */
} pp_lt_key_t;

/* The descriptors of one key. lc serves C and D (same shape and type; C may be D). */
typedef struct pp_lt_desc {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
} pp_lt_desc_t;

/* The key of one call; c is the C matrix (D itself when beta = 0), bias and aux may be NULL. */
pp_lt_key_t gemm_lt_key(int gemm, int epilogue, int N, int IC, int OC, pp_dtype_t dtype,
                        const void *a, const void *b, const void *c, const void *d,
                        const void *bias, const void *aux);

/* Rows of D in the column-major view: the aux matrix (GELU input) has this leading dimension,
 * which cuBLASLt requires to be a multiple of 8. */
int gemm_lt_rows_d(int gemm, int IC, int OC);

/* Build the descriptors of `k` with the call's bias and aux pointers (cuBLASLt reads their
 * alignment from the descriptor). On failure what was built is released and *d is zeroed. */
pp_status_t gemm_lt_desc_init(pp_lt_desc_t *d, const pp_lt_key_t *k, const void *bias,
                              const void *aux);
/* Release the descriptors; accepts a zeroed or half-built object. */
void gemm_lt_desc_free(pp_lt_desc_t *d);
/* Point the descriptors at this call's bias and aux (those the key's epilogue reads). */
pp_status_t gemm_lt_desc_point(pp_lt_desc_t *d, const pp_lt_key_t *k, const void *bias,
                               const void *aux);

/* Up to `requested` algorithms of the heuristic for `k` under matmul.cu's preferences (at most
 * workspace_bytes of workspace, fp32 split-K partials, the key's alignments), best first, in
 * results[0 .. *found). *found = 0 when the heuristic has none (not an error: the caller falls
 * back); an error only when the preference cannot be built. */
pp_status_t gemm_lt_heuristic(cublasLtHandle_t lt, const pp_lt_desc_t *d, const pp_lt_key_t *k,
                              size_t workspace_bytes, int requested,
                              cublasLtMatmulHeuristicResult_t *results, int *found);

#ifdef __cplusplus
}
#endif

#endif
