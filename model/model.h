/*
 * model.h — the parameters of a stage: which tensors it holds, in which order, where each sits in
 * the stage's buffers, and how each is initialised. Shared by the GPU stage and the CPU reference.
 *
 * Order (also the order of stage_params_to_host / stage_grads_to_host):
 *   first stage:  wte[V,C], wpe[T,C]
 *   each block:   ln1_w[C], ln1_b[C], qkv_w[3C,C], qkv_b[3C], proj_w[C,C], proj_b[C],
 *                 ln2_w[C], ln2_b[C], fc_w[4C,C], fc_b[4C], fc2_w[C,4C], fc2_b[C]
 *   last stage:   lnf_w[C], lnf_b[C], lm_w[V,C]
 * Matrices are row-major [out, in] (y = x W^T + b). On the device every tensor starts at a multiple
 * of PP_PARAM_ALIGN elements (the gaps are zero and stay zero); on the host they are packed.
 *
 * Init (GPT-2): matrices N(0, 0.02), the residual projections proj_w and fc2_w N(0, 0.02 /
 * sqrt(2 * total_layers)), LayerNorm weights 1, biases 0. A value depends on the seed, the tensor's
 * kind and its global layer, and its element index only: stage k built anywhere equals the same
 * layers inside any other split. The LM head is not tied to wte: the first and the last stage
 * live on different GPUs, and tying would need a gradient exchange between them every step.
 *
 * Plain C11 (gcc) and CUDA (nvcc); model_init_pair also runs on the device. Uses libm.
 */
#ifndef PP_STAGES_MODEL_H
#define PP_STAGES_MODEL_H

#include "rng.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* The shape of one stage, as the CPU reference and the GPU stage both see it. */
typedef struct pp_model_shape {
    int hidden;       /* C */
    int heads;        /* H; hidden % heads == 0 */
    int seq_len;      /* T */
    int vocab;        /* V */
    int batch;        /* B: sequences per micro-batch */
    int n_layers;     /* blocks in this stage (may be 0) */
    int first_layer;  /* global index of the stage's first block */
    int total_layers; /* blocks in the whole model */
    int is_first;     /* owns wte, wpe */
    int is_last;      /* owns lnf, lm head */
} pp_model_shape_t;

typedef enum pp_param_kind {
    PP_PARAM_WTE = 0,
    PP_PARAM_WPE,
    PP_PARAM_LN1_W,
    PP_PARAM_LN1_B,
    PP_PARAM_QKV_W,
    PP_PARAM_QKV_B,
    PP_PARAM_PROJ_W,
    PP_PARAM_PROJ_B,
    PP_PARAM_LN2_W,
    PP_PARAM_LN2_B,
    PP_PARAM_FC_W,
    PP_PARAM_FC_B,
    PP_PARAM_FC2_W,
    PP_PARAM_FC2_B,
    PP_PARAM_LNF_W,
    PP_PARAM_LNF_B,
    PP_PARAM_LM_W,
    PP_PARAM_KIND_COUNT
} pp_param_kind_t;

/* Tensors per block: PP_PARAM_LN1_W .. PP_PARAM_FC2_B. */
#define PP_BLOCK_TENSORS (PP_PARAM_FC2_B - PP_PARAM_LN1_W + 1)
/* Device offsets of tensors are multiples of this many elements (128 bytes in bf16). */
#define PP_PARAM_ALIGN 64
#define PP_INIT_STD    0.02
#define PP_LN_EPS      1e-5f

typedef struct pp_param_tensor {
    pp_param_kind_t kind;
    int layer;     /* global block index; -1 for the embedding and head tensors */
    int rows;      /* out features (1 for vectors) */
    int cols;      /* in features (the length of a vector) */
    size_t numel;  /* rows * cols */
    size_t offset; /* element offset in the device buffers (PP_PARAM_ALIGN-aligned) */
    size_t packed; /* element offset in the packed host order */
    int decay;     /* 1: a matrix, AdamW weight decay applies; 0: bias or LayerNorm */
} pp_param_tensor_t;

static inline const char *model_param_name(pp_param_kind_t k)
{
    static const char *const names[PP_PARAM_KIND_COUNT] = {
        "wte",   "wpe",  "ln1_w", "ln1_b", "qkv_w", "qkv_b", "proj_w", "proj_b", "ln2_w",
        "ln2_b", "fc_w", "fc_b",  "fc2_w", "fc2_b", "lnf_w", "lnf_b",  "lm_w"};
    return (unsigned)k < PP_PARAM_KIND_COUNT ? names[k] : "?";
}

/* Number of parameter tensors of a stage. */
static inline int model_tensor_count(const pp_model_shape_t *s)
{
    return (s->is_first ? 2 : 0) + PP_BLOCK_TENSORS * s->n_layers + (s->is_last ? 3 : 0);
}

/* Shape of tensor `kind` as (rows, cols). */
static inline void model_param_shape(const pp_model_shape_t *s, pp_param_kind_t kind, int *rows,
                                     int *cols)
{
    int C = s->hidden;
    int r = 1, c = C;
    switch (kind) {
    case PP_PARAM_WTE: r = s->vocab; break;
    case PP_PARAM_WPE: r = s->seq_len; break;
    case PP_PARAM_QKV_W: r = 3 * C; break;
    case PP_PARAM_QKV_B: c = 3 * C; break;
    case PP_PARAM_PROJ_W: r = C; break;
    case PP_PARAM_FC_W: r = 4 * C; break;
    case PP_PARAM_FC_B: c = 4 * C; break;
    case PP_PARAM_FC2_W: r = C, c = 4 * C; break;
    case PP_PARAM_LM_W: r = s->vocab; break;
    default: break; /* vectors of C */
    }
    *rows = r;
    *cols = c;
}

/* Fill out[0 .. model_tensor_count) in the fixed order. Returns the device buffer length in
 * elements (padded); *n_packed (may be NULL) gets the parameter count. */
static inline size_t model_tensors(const pp_model_shape_t *s, pp_param_tensor_t *out,
                                   size_t *n_packed)
{
    int n = 0;
    size_t off = 0, packed = 0;
    int n_kinds = (s->is_first ? 2 : 0) + PP_BLOCK_TENSORS * s->n_layers + (s->is_last ? 3 : 0);
    for (int i = 0; i < n_kinds; i++) {
        pp_param_kind_t kind;
        int layer = -1;
        int j = i;
        if (s->is_first && j < 2) {
            kind = (pp_param_kind_t)(PP_PARAM_WTE + j);
        } else {
            if (s->is_first) j -= 2;
            if (j < PP_BLOCK_TENSORS * s->n_layers) {
                layer = s->first_layer + j / PP_BLOCK_TENSORS;
                kind = (pp_param_kind_t)(PP_PARAM_LN1_W + j % PP_BLOCK_TENSORS);
            } else {
                kind = (pp_param_kind_t)(PP_PARAM_LNF_W + (j - PP_BLOCK_TENSORS * s->n_layers));
            }
        }
        pp_param_tensor_t t;
        t.kind = kind;
        t.layer = layer;
        model_param_shape(s, kind, &t.rows, &t.cols);
        t.numel = (size_t)t.rows * (size_t)t.cols;
        t.offset = off;
        t.packed = packed;
        t.decay = t.rows > 1;
        if (out) out[n] = t;
        n++;
        off += (t.numel + PP_PARAM_ALIGN - 1) / PP_PARAM_ALIGN * PP_PARAM_ALIGN;
        packed += t.numel;
    }
    if (n_packed) *n_packed = packed;
    return off;
}

/* Index of tensor (kind, local block l) in the order above; l is ignored for non-block tensors. */
static inline int model_tensor_index(const pp_model_shape_t *s, pp_param_kind_t kind, int l)
{
    int base = s->is_first ? 2 : 0;
    if (kind <= PP_PARAM_WPE) return kind - PP_PARAM_WTE;
    if (kind >= PP_PARAM_LNF_W)
        return base + PP_BLOCK_TENSORS * s->n_layers + (kind - PP_PARAM_LNF_W);
    return base + PP_BLOCK_TENSORS * l + (kind - PP_PARAM_LN1_W);
}

/* Standard deviation of a matrix's init; 0 for tensors initialised to a constant. */
static inline double model_init_std(pp_param_kind_t kind, int total_layers)
{
    switch (kind) {
    case PP_PARAM_WTE:
    case PP_PARAM_WPE:
    case PP_PARAM_QKV_W:
    case PP_PARAM_FC_W:
    case PP_PARAM_LM_W: return PP_INIT_STD;
    case PP_PARAM_PROJ_W:
    case PP_PARAM_FC2_W: return PP_INIT_STD / sqrt(2.0 * (total_layers > 0 ? total_layers : 1));
    default: return 0.0;
    }
}

/* The value of a tensor initialised to a constant: 1 for LayerNorm weights, 0 otherwise. */
static inline float model_init_constant(pp_param_kind_t kind)
{
    return (kind == PP_PARAM_LN1_W || kind == PP_PARAM_LN2_W || kind == PP_PARAM_LNF_W) ? 1.0f
                                                                                        : 0.0f;
}

/* The identity of a tensor in the whole model: its kind and its global layer. */
static inline PP_HD uint64_t model_tensor_id(pp_param_kind_t kind, int layer)
{
    return ((uint64_t)(uint32_t)(layer + 1) << 8) | (uint64_t)kind;
}

/* Elements 2k and 2k+1 of the tensor with identity `id`: one Box-Muller transform of two hashed
 * uniforms, scaled by std. The same source runs on the host (reference, tests) and the device
 * (stage init); both are deterministic, and the two agree except for rare last-bit roundings of
 * log/sin/cos, which the tests allow for. */
static inline PP_HD void model_init_pair(uint64_t seed, uint64_t id, uint64_t k, double std,
                                         float *z0, float *z1)
{
    const double two_pi = 6.283185307179586476925286766559;
    double u1 = 1.0 - pp_unit53(pp_hash(seed, PP_RNG_PARAM, id, k, 0)); /* (0, 1] */
    double u2 = pp_unit53(pp_hash(seed, PP_RNG_PARAM, id, k, 1));
    double r = sqrt(-2.0 * log(u1)) * std;
    *z0 = (float)(r * cos(two_pi * u2));
    *z1 = (float)(r * sin(two_pi * u2));
}

/* Fill out[0 .. t->numel) with tensor t's initial values on the host. */
static inline void model_init_fill(uint64_t seed, int total_layers, const pp_param_tensor_t *t,
                                   float *out)
{
    double std = model_init_std(t->kind, total_layers);
    if (std == 0.0) {
        float constant = model_init_constant(t->kind);
        for (size_t i = 0; i < t->numel; i++)
            out[i] = constant;
        return;
    }
    uint64_t id = model_tensor_id(t->kind, t->layer);
    for (size_t i = 0; i < t->numel; i += 2) {
        float z0, z1;
        model_init_pair(seed, id, i / 2, std, &z0, &z1);
        out[i] = z0;
        if (i + 1 < t->numel) out[i + 1] = z1;
    }
}

#endif /* PP_STAGES_MODEL_H */
