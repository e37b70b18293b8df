/*
 * ref_stage.h — a pipeline stage on the CPU in double precision: the model of stages/stage.h
 * (pre-LN blocks, embedding on the first stage, final LN + LM head + cross-entropy on the last),
 * written plainly, loop by loop, to check the GPU stage and the kernels against.
 *
 * Parameters come from the same init as the GPU stage (model/model.h: the fp32 values, held as
 * doubles) and the data from the same generator (stages/data.h). Parameters and gradients are
 * packed in the order of model.h, which is also the order of stage_params_to_host. A ref_stage_t
 * holds the activations of its last forward; backward uses them and adds to the gradients.
 * Plain C11, no CUDA.
 */
#ifndef PP_REF_STAGE_H
#define PP_REF_STAGE_H

#include "stages/data.h"
#include "model/model.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ref_block {
    double *ln1, *ln1_mean, *ln1_rstd; /* LN1 out [N,C], stats [N] */
    double *qkv;                       /* [N,3C]: q | k | v, head h at columns h*hd .. */
    double *att;                       /* softmax probabilities [B,H,T,T] (upper triangle 0) */
    double *atty;                      /* attention output [N,C] (input of proj) */
    double *x2;                        /* residual after attention [N,C] */
    double *ln2, *ln2_mean, *ln2_rstd; /* LN2 out [N,C], stats [N] */
    double *fc;                        /* fc out, before GELU [N,4C] */
    double *gelu;                      /* GELU out [N,4C] */
} ref_block_t;

typedef struct ref_stage {
    pp_model_shape_t shape;
    uint64_t seed;
    int n_tensors;
    pp_param_tensor_t *tensors; /* [n_tensors], model.h order */
    size_t n_params;
    double *params;                    /* [n_params] packed */
    double *grads;                     /* [n_params] packed, += by backward */
    int32_t *perm;                     /* [V] the data permutation */
    int *tokens, *targets;             /* [N] of the last forward (first / last stage) */
    double **res;                      /* [L+1][N,C] residual stream: res[0] input, res[L] output */
    ref_block_t *blocks;               /* [L] saved activations */
    double *lnf, *lnf_mean, *lnf_rstd; /* final LN (last stage) */
    double *probs;                     /* [N,V] softmax of the logits (last stage) */
    double loss;                       /* mean loss of the last forward */
    /* backward scratch */
    double *d_res, *d_x2, *d_a, *d_b, *d_qkv, *d_big, *d_big2, *d_att;
} ref_stage_t;

/* Build a stage: allocate, init parameters from `seed`, zero gradients. Returns 0, or -1 when out
 * of memory (the half-built stage is freed). */
int ref_stage_init(ref_stage_t *r, const pp_model_shape_t *shape, uint64_t seed);
void ref_stage_free(ref_stage_t *r);

/* Parameters / gradients of tensor (kind, local block l) (l ignored outside blocks). */
double *ref_stage_param(ref_stage_t *r, pp_param_kind_t kind, int l);
double *ref_stage_grad(ref_stage_t *r, pp_param_kind_t kind, int l);

/* Forward of micro-batch `mb` (the data index). `x` is the input [B*T*C] (ignored on the first
 * stage, which embeds its own tokens); `y` (may be NULL) gets the output of the last block (the
 * input of the final LN on the last stage). Returns the mean loss on the last stage, 0 otherwise.
 */
double ref_stage_forward(ref_stage_t *r, const double *x, int mb, double *y);

/* Backward of the last forward. `dy` is the output gradient [B*T*C] (ignored on the last stage,
 * whose gradient starts at the loss, scaled by grad_scale). Parameter gradients += ; `dx` (may be
 * NULL) gets the input gradient (on the first stage: the gradient of the embedding output). */
void ref_stage_backward(ref_stage_t *r, const double *dy, double grad_scale, double *dx);

void ref_stage_zero_grads(ref_stage_t *r);

/* One AdamW step on packed params (decoupled weight decay on the tensors with decay = 1):
 * m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2, p -= lr (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps)
 * + wd p). `step` counts from 1. */
void ref_adamw_step(const pp_param_tensor_t *tensors, int n_tensors, double *params,
                    const double *grads, double *m, double *v, double lr, double beta1,
                    double beta2, double eps, double weight_decay, int step);

#ifdef __cplusplus
}
#endif

#endif /* PP_REF_STAGE_H */
