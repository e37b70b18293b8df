/*
 * kernels.h — the CUDA kernels of a transformer stage and their launchers: matmul (cuBLAS /
 * cuBLASLt), embedding, LayerNorm, GELU, residual, attention permutes, causal softmax, fused
 * softmax cross-entropy, AdamW, casts and fills.
 *
 * Rules for every launcher: arguments are outputs, inputs, parameters, sizes, dtype, then the
 * stream last. Activations and parameters are stored as `dtype` (fp32 or bf16); all math is fp32.
 * Parameter-gradient accumulators are always fp32 and are added to (+=), never overwritten.
 * Nothing here allocates memory (scratch comes from the caller, sized by the *_scratch_bytes
 * helpers) or synchronizes the host: each launcher enqueues on `stream` and returns. Results are
 * deterministic: two runs on the same inputs are bitwise identical (no float atomics).
 * Each launcher checks its sizes and pointers (PP_ERR_INTERNAL with a message on a bad one) and the
 * launch itself (PP_ERR_CUDA / PP_ERR_CUBLAS). Shapes: N = B*T tokens, C hidden, H heads,
 * d = C/H, V vocabulary, IC/OC in/out features; every matrix is row-major and densely packed.
 */
#ifndef PP_KERNELS_H
#define PP_KERNELS_H

#include "common/pp_status.h"
#include "model/kernel_sizes.h"

/* cublasLt.h declares one function without a prototype; keep C builds with -Werror clean. */
#if !defined(__cplusplus) && defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#endif
#include <cublasLt.h>
#if !defined(__cplusplus) && defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PP_LAYERNORM_EPS 1e-5f
/* PP_GEMM_WORKSPACE_BYTES and the *_scratch_bytes helpers are in kernel_sizes.h (plain C). */

/* ---- matmul (matmul.cu) ---------------------------------------------------------------------- */

/* The caller's cuBLAS state. One pp_gemm_t serves one device; calls that share it must not run
 * concurrently on two streams (they share the workspace). TF32 is never used: fp32 GEMMs are
 * true fp32 (CUBLAS_COMPUTE_32F), bf16 GEMMs accumulate in fp32. */
typedef struct pp_gemm {
    cublasHandle_t blas;         /* cuBLAS handle, pinned to `workspace` */
    cublasLtHandle_t lt;         /* cuBLASLt handle (fused bias epilogue) */
    void *workspace;             /* device memory owned by this object */
    size_t workspace_bytes;      /* its size */
    struct pp_gemm_plans *plans; /* cuBLASLt plans by shape, built on first use (internal) */
    int no_epilogue; /* 0 (gemm_init): fuse through cuBLASLt epilogues where offered; nonzero:
                        never, the separate kernels run instead (tests, timing comparisons) */
} pp_gemm_t;

/* Create both handles and allocate `workspace_bytes` (0: PP_GEMM_WORKSPACE_BYTES) of workspace on
 * the current device. On failure everything built so far is released and *g is zeroed. */
pp_status_t gemm_init(pp_gemm_t *g, size_t workspace_bytes);
/* Release what gemm_init built; accepts NULL, a zeroed or a half-built object. */
void gemm_free(pp_gemm_t *g);

/* out[N,OC] = inp[N,IC] · weight[OC,IC]ᵀ + bias[OC] (bias may be NULL). All storage `dtype`.
 * The bias is fused through a cuBLASLt epilogue where one is available. */
pp_status_t matmul_fwd(void *out, const void *inp, const void *weight, const void *bias, int N,
                       int IC, int OC, pp_dtype_t dtype, pp_gemm_t *gemm, cudaStream_t stream);

/* matmul_fwd with one optional addition fused into the GEMM's epilogue (at most one of the two;
 * both non-NULL is refused with PP_ERR_INTERNAL). bias may be NULL in every form.
 *   residual == NULL, pre_gelu == NULL: exactly matmul_fwd.
 *   residual != NULL: out = inp·weightᵀ + bias + residual[N,OC] (the residual stream's add).
 *     out may be residual itself (in place); otherwise the two must not overlap.
 *   pre_gelu != NULL: pre_gelu[N,OC] = inp·weightᵀ + bias and out = gelu(pre_gelu), the tanh
 *     approximation of gelu_fwd (the MLP's first layer; pre_gelu is what the backward needs).
 * All storage `dtype`. Fused (cuBLASLt BIAS epilogue with C = residual and beta = 1; GELU_AUX_BIAS
 * with the aux matrix = pre_gelu, which needs OC a multiple of 8) the sum is formed in fp32 and
 * rounded once; where cuBLASLt offers no algorithm for the shape and pointers, or
 * gemm->no_epilogue is set, the GEMM, the bias kernel, residual_fwd and gelu_fwd run in turn with
 * the same meaning (one rounding each). out and pre_gelu must not alias inp, weight, bias or each
 * other. */
pp_status_t matmul_fwd_ex(void *out, const void *inp, const void *weight, const void *bias,
                          const void *residual, void *pre_gelu, int N, int IC, int OC,
                          pp_dtype_t dtype, pp_gemm_t *gemm, cudaStream_t stream);

/* dinp[N,IC] (=, or += when accumulate) dout[N,OC] · weight[OC,IC]. Storage `dtype`. */
pp_status_t matmul_bwd_input(void *dinp, const void *dout, const void *weight, int N, int IC,
                             int OC, int accumulate, pp_dtype_t dtype, pp_gemm_t *gemm,
                             cudaStream_t stream);

/* dinp[N,IC] = (dout[N,OC] · weight[OC,IC]) ∘ gelu'(pre_gelu[N,IC]): the input gradient of a
 * matmul whose input was gelu(pre_gelu), taken through the GELU (tanh approximation, as gelu_bwd).
 * In the MLP: dout is the block output's gradient, weight the second layer's, pre_gelu the first
 * layer's output saved by matmul_fwd_ex. Fused through the cuBLASLt DGELU epilogue (aux matrix =
 * pre_gelu, IC a multiple of 8) where offered, else matmul_bwd_input then gelu_bwd. Storage
 * `dtype`. dinp must not alias dout, weight or pre_gelu. */
pp_status_t matmul_bwd_input_dgelu(void *dinp, const void *dout, const void *weight,
                                   const void *pre_gelu, int N, int IC, int OC, pp_dtype_t dtype,
                                   pp_gemm_t *gemm, cudaStream_t stream);

/* dweight[OC,IC] (fp32) += dout[N,OC]ᵀ · inp[N,IC]; dbias[OC] (fp32, may be NULL) += the column
 * sums of dout (fixed-order reduction). dout and inp are stored as `dtype`. */
pp_status_t matmul_bwd_weight(float *dweight, float *dbias, const void *dout, const void *inp,
                              int N, int IC, int OC, pp_dtype_t dtype, pp_gemm_t *gemm,
                              cudaStream_t stream);

/* One task of colsum_bwd: column sums over the N rows of [N, C] tensors (C the task's width).
 *   d_sum[c]  += Σ_n dy[n, c]
 *   d_xhat[c] += Σ_n dy[n, c] · (x[n, c] − mean[n]) · rstd[n]   (when x is not NULL)
 *   d_res[c]  += Σ_n res[n, c]                                  (when res is not NULL)
 * So a linear layer's bias gradient is {dy = its output gradient, d_sum = dbias}, and a
 * LayerNorm's parameter gradients with the bias gradient of the layer whose output gradient
 * joins the residual stream there are {dy = the gradient at the LN output, d_sum = db, x = the LN
 * input, mean, rstd = its statistics, d_xhat = dw, res = that output gradient, d_res = its
 * dbias}: the same sums as matmul_bwd_weight's dbias and layernorm_bwd_weight. The gradients are
 * fp32; dy, x and res are stored as the call's dtype.
 * A task of partial sums instead has dy NULL and `partial` set: column sums made elsewhere, e.g.
 * per row block by attention_flash_bwd (its colsum) or per chunk of rows by
 * layernorm_bwd_input_add (its colsum), fp32, quantity q an [n_partial, C] array (row stride C)
 * at partial + q·n_partial·C:
 *   d_sum[c]  += Σ_r partial[r, c]                     (q = 0)
 *   d_xhat[c] += Σ_r partial[n_partial + r, c]         (q = 1, when d_xhat is not NULL)
 *   d_res[c]  += Σ_r partial[2·n_partial + r, c]       (q = 2, when d_res is not NULL)
 * (x and res NULL), added by the second launch in the order of the chunks of a tensor task. */
typedef struct pp_colsum_task {
    int C;
    const void *dy; /* NULL for a task of partial sums */
    float *d_sum;
    const void *x; /* NULL: no d_xhat */
    const float *mean, *rstd;
    float *d_xhat;
    const void *res; /* NULL: no d_res */
    float *d_res;
    const float *partial; /* a task of partial sums: [quantity][n_partial, C] fp32; else NULL */
    int n_partial;
} pp_colsum_task_t;

#define PP_COLSUM_MAX_TASKS 4

/* The sums of 1..PP_COLSUM_MAX_TASKS tasks over the same N rows, in two launches whatever the
 * count (three when plain tasks, dy only, sit beside tasks with x or res: the plain ones take a
 * first launch of their own, in the same order): partial sums per chunk of rows into `scratch`
 * (scratch_bytes, 4-byte aligned; any device memory free until the last launch ends, e.g. the
 * GEMM workspace between GEMMs), then the chunks added in a fixed order and += to the gradients.
 * Tasks of partial sums skip the first launch: the last adds their rows as it adds chunks.
 * Deterministic (no atomics; the order depends on N, the widths, n_partial and scratch_bytes
 * only). PP_ERR_INTERNAL when the scratch cannot hold one chunk's partials (4 bytes per output
 * column of the tensor tasks). */
pp_status_t colsum_bwd(const pp_colsum_task_t *tasks, int n_tasks, int N, void *scratch,
                       size_t scratch_bytes, pp_dtype_t dtype, cudaStream_t stream);

/* Batched row-major GEMM, for attention: for each i < batch,
 *   C_i[m,n] = alpha · op(A_i) · op(B_i) + beta · C_i
 * where op(A_i) is [m,k]: A_i is stored [m,k] (trans_a = 0) or [k,m] (trans_a = 1), and op(B_i)
 * is [k,n]: B_i is stored [k,n] (trans_b = 0) or [n,k] (trans_b = 1). X_i = X + i·stride_x
 * elements. A, B, C are stored as `dtype`; compute is fp32. Examples with Q,K,V,O as [BH,T,d]
 * and S,P as [BH,T,T]: S = Q·Kᵀ is (S, Q, K, 0, 1, T, T, d); O = P·V is (O, P, V, 0, 0, T, d, T);
 * dP = dO·Vᵀ is (dP, dO, V, 0, 1, T, T, d); dV = Pᵀ·dO is (dV, P, dO, 1, 0, T, d, T);
 * dQ = dS·K is (dQ, dS, K, 0, 0, T, d, T); dK = dSᵀ·Q is (dK, dS, Q, 1, 0, T, d, T). */
pp_status_t gemm_strided_batched(void *c, const void *a, const void *b, int trans_a, int trans_b,
                                 int m, int n, int k, float alpha, float beta, long long stride_a,
                                 long long stride_b, long long stride_c, int batch,
                                 pp_dtype_t dtype, pp_gemm_t *gemm, cudaStream_t stream);

/* ---- embedding (embedding.cu) ---------------------------------------------------------------- */

/* out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]. tokens are int32 in [0, V). */
pp_status_t encoder_fwd(void *out, const int *tokens, const void *wte, const void *wpe, int B,
                        int T, int C, pp_dtype_t dtype, cudaStream_t stream);

/* dwte[V,C] (fp32) += Σ over positions of dout rows, by token; dwpe[T,C] (fp32) += Σ over the
 * batch of dout[b,t,:]. Deterministic: the positions are stably sorted by token in `scratch`
 * (encoder_bwd_scratch_bytes(B, T, V) bytes, any 256-byte-aligned device memory), then every
 * row is summed in position order. Either gradient pointer may be NULL to skip it. */
pp_status_t encoder_bwd(float *dwte, float *dwpe, const void *dout, const int *tokens,
                        void *scratch, int B, int T, int C, int V, pp_dtype_t dtype,
                        cudaStream_t stream);

/* ---- layernorm (layernorm.cu) ---------------------------------------------------------------- */

/* out = (inp − mean) · rstd · w + b per row of inp[N,C], eps PP_LAYERNORM_EPS. Saves mean[N] and
 * rstd[N] (fp32) for the backward; either may be NULL. One warp per row; a packed row of up to
 * 2048 bf16 / 1024 fp32 is read once into registers unless the environment sets
 * PPSCHED_LAYERNORM=unfused (the same bits either way). */
pp_status_t layernorm_fwd(void *out, float *mean, float *rstd, const void *inp, const void *w,
                          const void *b, int N, int C, pp_dtype_t dtype, cudaStream_t stream);

/* dinp[N,C] (=, or += when accumulate: the residual stream's gradient) of layernorm_fwd:
 * dinp = rstd · (g − mean(g) − x̂ · mean(g · x̂)), g = w · dout, x̂ = (inp − mean) · rstd.
 * dinp must not alias dout or inp. */
pp_status_t layernorm_bwd_input(void *dinp, const void *dout, const void *inp, const void *w,
                                const float *mean, const float *rstd, int N, int C, int accumulate,
                                pp_dtype_t dtype, cudaStream_t stream);

/* dinp[N,C] = dres[N,C] + the input gradient of layernorm_fwd (the formula of
 * layernorm_bwd_input), in one pass: the residual stream's gradient joined with the branch's.
 * dinp may be dres itself (in place; then it is layernorm_bwd_input with accumulate = 1) or must
 * not overlap it; dinp must not alias dout or inp.
 *
 * colsum: NULL, or where the call also writes the column sums of its inputs over chunks of rows
 * (fp32, layernorm_bwd_input_colsum_bytes(N, C) bytes, 4-byte aligned, not overlapping a tensor):
 * with R = layernorm_bwd_input_colsum_rows(N) chunks of layernorm_colsum_chunk_rows(N) rows
 * (kernel_sizes.h; the last may be shorter), for chunk i, column c and q = 0, 1, 2
 *   colsum[(q·R + i)·C + c] = Σ over the rows n of chunk i of  dout[n,c]            (q = 0)
 *                                                              dout[n,c] · x̂[n,c]   (q = 1)
 *                                                              dres[n,c]            (q = 2)
 * with x̂ = (inp − mean) · rstd as colsum_bwd computes it and dres as it is before dinp replaces
 * it: each quantity an [R, C] array, whose rows added up are the LayerNorm's db, dw and the
 * residual branch's bias gradient (colsum_bwd takes the array as it is: a task of partial sums
 * with n_partial = R and d_sum, d_xhat, d_res). Every element is written by
 * one thread, all of them by the call, in an order that depends only on N, C and whether the
 * pointers allow 16-byte loads: deterministic. dinp has the bits it has with colsum NULL. */
pp_status_t layernorm_bwd_input_add(void *dinp, float *colsum, const void *dres, const void *dout,
                                    const void *inp, const void *w, const float *mean,
                                    const float *rstd, int N, int C, pp_dtype_t dtype,
                                    cudaStream_t stream);

/* dw[C] (fp32) += Σ_rows dout · x̂; db[C] (fp32) += Σ_rows dout. Deterministic: per-chunk partial
 * sums in `scratch` (layernorm_bwd_weight_scratch_bytes(N, C) bytes), then an ordered sum. */
pp_status_t layernorm_bwd_weight(float *dw, float *db, const void *dout, const void *inp,
                                 const float *mean, const float *rstd, void *scratch, int N, int C,
                                 pp_dtype_t dtype, cudaStream_t stream);

/* ---- GELU, residual (elementwise.cu) --------------------------------------------------------- */

/* out = gelu(inp), tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). out may alias
 * inp. n elements. */
pp_status_t gelu_fwd(void *out, const void *inp, size_t n, pp_dtype_t dtype, cudaStream_t stream);
/* dinp = gelu'(inp) · dout. dinp may alias dout. */
pp_status_t gelu_bwd(void *dinp, const void *inp, const void *dout, size_t n, pp_dtype_t dtype,
                     cudaStream_t stream);

/* out = a + b (out may alias a or b). */
pp_status_t residual_fwd(void *out, const void *a, const void *b, size_t n, pp_dtype_t dtype,
                         cudaStream_t stream);
/* acc += x. */
pp_status_t add_inplace(void *acc, const void *x, size_t n, pp_dtype_t dtype, cudaStream_t stream);

/* ---- attention pieces (attention.cu) --------------------------------------------------------- */

/* Split qkv[N,3C] (per token: q | k | v, each C = H·d wide with heads contiguous) into
 * q, k, v [B,H,T,d]: q[b,h,t,i] = qkv[b,t, h·d + i], k at offset C, v at offset 2C. */
pp_status_t attention_permute_qkv(void *q, void *k, void *v, const void *qkv, int B, int T, int H,
                                  int d, pp_dtype_t dtype, cudaStream_t stream);
/* Backward of attention_permute_qkv: dqkv[N,3C] = the inverse permutation of dq, dk, dv. */
pp_status_t attention_unpermute_dqkv(void *dqkv, const void *dq, const void *dk, const void *dv,
                                     int B, int T, int H, int d, pp_dtype_t dtype,
                                     cudaStream_t stream);
/* out[b,t, h·d + i] = att[b,h,t,i]: heads back side by side, out is [N,C]. */
pp_status_t attention_unpermute_out(void *out, const void *att, int B, int T, int H, int d,
                                    pp_dtype_t dtype, cudaStream_t stream);
/* Backward of attention_unpermute_out: datt[b,h,t,i] = dout[b,t, h·d + i]. */
pp_status_t attention_permute_dout(void *datt, const void *dout, int B, int T, int H, int d,
                                   pp_dtype_t dtype, cudaStream_t stream);

/* P[BH,T,T] = causal softmax of scale·S over each row: for query row t, keys j ≤ t get
 * exp(scale·S − max) / Σ, keys j > t get exactly 0. fp32 math, max subtraction. P may alias S.
 * One warp per row; T up to 2048 (any T ≥ 1 works). */
pp_status_t softmax_causal_fwd(void *P, const void *S, float scale, int BH, int T, pp_dtype_t dtype,
                               cudaStream_t stream);
/* dS = scale · P ∘ (dP − Σ_j dP_j·P_j) on j ≤ t, 0 above the diagonal. dS may alias dP. */
pp_status_t softmax_causal_bwd(void *dS, const void *dP, const void *P, float scale, int BH, int T,
                               pp_dtype_t dtype, cudaStream_t stream);

/* ---- fused causal attention (flash_attention.cu) --------------------------------------------- */

/* attention_flash_supported (kernel_sizes.h) says which shapes the fused kernels take. At d = 64
 * both launchers run 128-row blocks (flash_wide.cu) unless the environment sets
 * PPSCHED_FLASH_TILE=64 (read at every call) for the 64-row kernels; d = 128 always takes those.
 * PPSCHED_FLASH_BWD=unfused (read at every call) runs the 128-row backward without Dr and the
 * column sums inside it: flash_bwd_dot_kernel first, and no colsum. */

/* Layout of q, k, v, o and their gradients: element (b, h, t, i) of x is x[(b·T + t)·ld + h·d + i],
 * token-major rows with head h in columns h·d..h·d + d − 1 and a row stride `ld` ≥ H·d, a
 * multiple of 8. So q, k, v may sit side by side in one QKV matmul output (ld = 3·H·d) and o be
 * the [B·T, H·d] input of the output projection; the head layout [B,H,T,d] is B·H batches of one
 * head with ld = d. lse and the scratch are [B,H,T]. Pointers are 16-byte aligned.
 *
 * o = causal softmax(scale · q kᵀ) v with scale = 1/√d, without writing the T×T scores: keys
 * j ≤ t take part in query row t. lse (fp32) = log Σ_{j≤t} exp(scale · q_t·k_j), the row
 * statistics the backward needs. o must not overlap an input. fp32 accumulation and softmax
 * statistics. */
pp_status_t attention_flash_fwd(void *o, int ld_o, float *lse, const void *q, const void *k,
                                const void *v, int ld_qkv, int B, int H, int T, int d,
                                pp_dtype_t dtype, cudaStream_t stream);

/* Gradients dq, dk, dv (=, bf16, row stride ld_d) of attention_flash_fwd from dout (row stride
 * ld_o, like o), the forward's inputs, its output o and lse. P is recomputed from q, k and lse;
 * dS = scale · P ∘ (dP − rowsum(dout∘o)). `scratch` is attention_flash_bwd_scratch_bytes(B, H, T)
 * bytes of device memory (4-byte aligned). Deterministic: dk, dv per key block and dq per query
 * block, each written by one thread. The outputs must not overlap each other or an input.
 *
 * colsum: NULL, or (only where attention_flash_bwd_colsum_ok(d), and with dq, dk, dv side by
 * side in one [B·T, 3C] matrix G, C = H·d: dk = dq + C, dv = dk + C elements, ld_d = 3C) the
 * column sums of G as stored, per block of 128 rows of a sequence: colsum[(b·⌈T/128⌉ + i)·3C + j]
 * (fp32, = Σ over t in 128i..min(128i + 127, T − 1) of G[b·T + t, j] in bf16, added in a fixed
 * order; attention_flash_bwd_colsum_bytes(B, H, T, d) bytes, 4-byte aligned), each element
 * written by one thread, all of them by the call. The sum over i of a column is the bias gradient
 * of the QKV matmul (colsum_bwd's partial task). PP_ERR_INTERNAL where the call cannot. */
pp_status_t attention_flash_bwd(void *dq, void *dk, void *dv, int ld_d, const void *dout,
                                const void *q, const void *k, const void *v, int ld_qkv,
                                const void *o, int ld_o, const float *lse, void *scratch,
                                float *colsum, int B, int H, int T, int d, pp_dtype_t dtype,
                                cudaStream_t stream);
/* attention_flash_bwd_colsum_ok(d) (kernel_sizes.h): whether a call at head size d takes a colsum.
 */

/* ---- cross-entropy (crossentropy.cu) --------------------------------------------------------- */

/* Fused softmax + cross-entropy over logits[N,V]: losses[i] (fp32) = −log softmax(logits_i)[t_i]
 * with t_i = targets[i] in [0, V); dlogits[N,V] = (softmax(logits_i) − onehot(t_i)) · grad_scale
 * / N, stored as `dtype`. dlogits may alias logits, or be NULL to compute the losses only.
 * One block per row. */
pp_status_t crossentropy_fwd_bwd(float *losses, void *dlogits, const void *logits,
                                 const int *targets, float grad_scale, int N, int V,
                                 pp_dtype_t dtype, cudaStream_t stream);
/* *acc += mean(losses[0..N)) with a fixed-order single-block sum (fp32 throughout). */
pp_status_t loss_mean_accumulate(float *acc, const float *losses, int N, cudaStream_t stream);

/* ---- AdamW (adamw.cu) ------------------------------------------------------------------------ */

/* One AdamW step (decoupled weight decay, bias correction; step ≥ 1) over n parameters:
 *   m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²;  m̂ = m/(1−β1^step);  v̂ = v/(1−β2^step)
 *   p = p − lr·(m̂/(√v̂ + eps) + weight_decay·p)
 * param_master (fp32) is updated in place; param_storage (`dtype`) receives the new value rounded
 * to the storage type. For fp32, param_storage may equal param_master (one write) or be NULL. */
pp_status_t adamw_update(float *param_master, void *param_storage, const float *grad, float *m,
                         float *v, size_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, int step, pp_dtype_t dtype, cudaStream_t stream);

/* adamw_update whose step count is read on the device from *d_step when the kernel runs (for
 * replayed CUDA graphs); with d_step NULL it is adamw_update with `step`. The bias corrections are
 * then computed on the device in double precision, as the host does. */
pp_status_t adamw_update_counted(float *param_master, void *param_storage, const float *grad,
                                 float *m, float *v, size_t n, float lr, float beta1, float beta2,
                                 float eps, float weight_decay, int step, const int *d_step,
                                 pp_dtype_t dtype, cudaStream_t stream);

/* ---- utilities (util.cu) --------------------------------------------------------------------- */

/* dst (`dtype`) = src (fp32), rounded to nearest even for bf16. For fp32 a copy (dst may equal
 * src, then nothing is done). */
pp_status_t cast_fp32_to_dtype(void *dst, const float *src, size_t n, pp_dtype_t dtype,
                               cudaStream_t stream);
/* dst (fp32) = src (`dtype`), exact. */
pp_status_t cast_dtype_to_fp32(float *dst, const void *src, size_t n, pp_dtype_t dtype,
                               cudaStream_t stream);
/* dst[0..n) = value (fp32). Zeroing is cudaMemsetAsync; this is for other values. */
pp_status_t fill_fp32(float *dst, float value, size_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* PP_KERNELS_H */
