/*
 * ref_kernels.h — CPU references of the kernels in kernels/kernels.h, in double precision, plus
 * the seeded random numbers and bf16 rounding the kernel tests share.
 *
 * Each ref_* function computes what its kernel launcher is documented to compute, loop by loop,
 * on dense row-major double arrays (tensors of any storage dtype are compared after conversion).
 * Accumulating outputs follow the kernels: parameter gradients are added to (+=); functions with
 * an `accumulate` flag add when it is 1 and overwrite when it is 0. Plain C11, no CUDA.
 */
#ifndef PP_REF_KERNELS_H
#define PP_REF_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- random numbers and bf16 ----------------------------------------------------------------- */

typedef struct ref_rng {
    uint64_t state;
} ref_rng_t;

void ref_rng_seed(ref_rng_t *r, uint64_t seed);
uint64_t ref_rng_next(ref_rng_t *r);  /* splitmix64 */
double ref_rng_uniform(ref_rng_t *r); /* [0, 1) with 53 random bits */
double ref_rng_normal(ref_rng_t *r);  /* N(0, 1), Box–Muller */
int ref_rng_int(ref_rng_t *r, int n); /* uniform in [0, n) */
void ref_fill_normal(ref_rng_t *r, double *x, size_t n, double scale); /* x = scale · N(0,1) */

/* float <-> bf16 bit patterns: round to nearest even, NaN kept NaN. */
uint16_t ref_f32_to_bf16(float x);
float ref_bf16_to_f32(uint16_t b);
/* x rounded to the nearest float (bf16 = 0) or bf16 (bf16 = 1) value, in place. */
void ref_round(double *x, size_t n, int bf16);

/* ---- matmul ---------------------------------------------------------------------------------- */

/* out[N,OC] = inp[N,IC] · w[OC,IC]ᵀ + bias[OC] (bias may be NULL). */
void ref_matmul_fwd(double *out, const double *inp, const double *w, const double *bias, int N,
                    int IC, int OC);
/* dinp[N,IC] (= or += with accumulate) dout[N,OC] · w[OC,IC]. */
void ref_matmul_bwd_input(double *dinp, const double *dout, const double *w, int N, int IC, int OC,
                          int accumulate);
/* dw[OC,IC] += doutᵀ · inp; dbias[OC] (may be NULL) += column sums of dout. */
void ref_matmul_bwd_weight(double *dw, double *dbias, const double *dout, const double *inp, int N,
                           int IC, int OC);
/* Row-major batched GEMM with the conventions of gemm_strided_batched. */
void ref_gemm_strided_batched(double *c, const double *a, const double *b, int trans_a, int trans_b,
                              int m, int n, int k, double alpha, double beta, long long stride_a,
                              long long stride_b, long long stride_c, int batch);

/* ---- embedding ------------------------------------------------------------------------------- */

void ref_encoder_fwd(double *out, const int *tokens, const double *wte, const double *wpe, int B,
                     int T, int C);
/* dwte[V,C] += by token; dwpe[T,C] += over the batch. */
void ref_encoder_bwd(double *dwte, double *dwpe, const double *dout, const int *tokens, int B,
                     int T, int C);

/* ---- layernorm (eps 1e-5) -------------------------------------------------------------------- */

void ref_layernorm_fwd(double *out, double *mean, double *rstd, const double *inp, const double *w,
                       const double *b, int N, int C);
/* dinp (= or +=), from the saved mean and rstd. */
void ref_layernorm_bwd_input(double *dinp, const double *dout, const double *inp, const double *w,
                             const double *mean, const double *rstd, int N, int C, int accumulate);
/* dw += Σ dout·x̂, db += Σ dout. */
void ref_layernorm_bwd_weight(double *dw, double *db, const double *dout, const double *inp,
                              const double *mean, const double *rstd, int N, int C);

/* ---- GELU (tanh approximation), residual ----------------------------------------------------- */

double ref_gelu(double x);
double ref_gelu_grad(double x); /* d gelu / dx */
void ref_gelu_fwd(double *out, const double *inp, size_t n);
void ref_gelu_bwd(double *dinp, const double *inp, const double *dout, size_t n);

/* ---- attention ------------------------------------------------------------------------------- */

/* qkv[N,3C] -> q, k, v [B,H,T,d], and the inverse. */
void ref_attention_permute_qkv(double *q, double *k, double *v, const double *qkv, int B, int T,
                               int H, int d);
void ref_attention_unpermute_dqkv(double *dqkv, const double *dq, const double *dk,
                                  const double *dv, int B, int T, int H, int d);
/* att[B,H,T,d] -> out[N,C], and the inverse. */
void ref_attention_unpermute_out(double *out, const double *att, int B, int T, int H, int d);
void ref_attention_permute_dout(double *datt, const double *dout, int B, int T, int H, int d);
/* P = causal softmax of scale·S per row (0 above the diagonal); dS = scale·P∘(dP − Σ dP∘P). */
void ref_softmax_causal_fwd(double *P, const double *S, double scale, int BH, int T);
void ref_softmax_causal_bwd(double *dS, const double *dP, const double *P, double scale, int BH,
                            int T);

/* Causal attention on q, k, v, o [BH,T,d], keys j ≤ t for query t, scores scale·q_t·k_j:
 * o_t = Σ_j P_tj v_j with P_tj = exp(scale·q_t·k_j − lse_t), lse_t = log Σ_{j≤t} exp(scale·q_t·k_j)
 * ([BH,T]; may be NULL). The backward overwrites dq, dk, dv [BH,T,d] with the gradients of
 * Σ dout∘o: dv_j = Σ_t P_tj dout_t, dS_tj = scale·P_tj (dout_t·v_j − Σ_i P_ti dout_t·v_i),
 * dq_t = Σ_j dS_tj k_j, dk_j = Σ_t dS_tj q_t. */
void ref_attention_causal_fwd(double *o, double *lse, const double *q, const double *k,
                              const double *v, int BH, int T, int d, double scale);
void ref_attention_causal_bwd(double *dq, double *dk, double *dv, const double *dout,
                              const double *q, const double *k, const double *v, int BH, int T,
                              int d, double scale);

/* ---- cross-entropy --------------------------------------------------------------------------- */

/* losses[i] = −log softmax(logits_i)[t_i]; dlogits (may be NULL) = (softmax − onehot)·scale/N. */
void ref_crossentropy(double *losses, double *dlogits, const double *logits, const int *targets,
                      double grad_scale, int N, int V);

/* ---- AdamW ----------------------------------------------------------------------------------- */

/* One step (step ≥ 1) on p, m, v in place; decoupled weight decay. */
void ref_adamw_update(double *p, double *m, double *v, const double *g, size_t n, double lr,
                      double beta1, double beta2, double eps, double weight_decay, int step);

#ifdef __cplusplus
}
#endif

#endif /* PP_REF_KERNELS_H */
