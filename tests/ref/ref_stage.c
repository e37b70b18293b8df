/*
 * ref_stage.c — the CPU reference of a stage in double precision (see ref_stage.h).
 *
 * Every layer is a plain loop over the definition, forward and backward side by side. Backward
 * overwrites input gradients (d_in =) and adds parameter gradients (dW +=); the residual stream's
 * gradient d_res is carried from the top of the stage down to its input. Nothing here is tuned:
 * it is meant to be read against the math.
 */
#include "ref_stage.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* --- layers ----------------------------------------------------------------------------------- */

/* out = (in - mean) * rstd * w + b over the last dimension C. */
static void layernorm_forward(double *out, double *mean, double *rstd, const double *in,
                              const double *w, const double *b, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const double *x = in + (size_t)n * C;
        double m = 0.0, v = 0.0;
        for (int c = 0; c < C; c++)
            m += x[c];
        m /= C;
        for (int c = 0; c < C; c++)
            v += (x[c] - m) * (x[c] - m);
        v /= C;
        double s = 1.0 / sqrt(v + (double)PP_LN_EPS);
        for (int c = 0; c < C; c++)
            out[(size_t)n * C + c] = (x[c] - m) * s * w[c] + b[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

/* dx = (may be +=) the input gradient; dw += sum dout * xhat, db += sum dout. */
static void layernorm_backward(double *dx, int accumulate, double *dw, double *db,
                               const double *dout, const double *in, const double *mean,
                               const double *rstd, const double *w, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const double *x = in + (size_t)n * C, *dy = dout + (size_t)n * C;
        double m1 = 0.0, m2 = 0.0;
        for (int c = 0; c < C; c++) {
            double xhat = (x[c] - mean[n]) * rstd[n];
            double dn = dy[c] * w[c];
            m1 += dn;
            m2 += dn * xhat;
            dw[c] += dy[c] * xhat;
            db[c] += dy[c];
        }
        m1 /= C;
        m2 /= C;
        for (int c = 0; c < C; c++) {
            double xhat = (x[c] - mean[n]) * rstd[n];
            double g = rstd[n] * (dy[c] * w[c] - m1 - xhat * m2);
            if (accumulate)
                dx[(size_t)n * C + c] += g;
            else
                dx[(size_t)n * C + c] = g;
        }
    }
}

/* out[n,o] = bias[o] + sum_c in[n,c] W[o,c]   (W row-major [OC, IC]; bias may be NULL). */
static void matmul_forward(double *out, const double *in, const double *W, const double *bias,
                           int N, int IC, int OC)
{
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0;
            for (int c = 0; c < IC; c++)
                s += in[(size_t)n * IC + c] * W[(size_t)o * IC + c];
            out[(size_t)n * OC + o] = s;
        }
}

/* din = dout W; dW += dout^T in; dbias += sum_n dout (dbias may be NULL). */
static void matmul_backward(double *din, double *dW, double *dbias, const double *dout,
                            const double *in, const double *W, int N, int IC, int OC)
{
    for (int n = 0; n < N; n++)
        for (int c = 0; c < IC; c++) {
            double s = 0.0;
            for (int o = 0; o < OC; o++)
                s += dout[(size_t)n * OC + o] * W[(size_t)o * IC + c];
            din[(size_t)n * IC + c] = s;
        }
    for (int o = 0; o < OC; o++) {
        for (int c = 0; c < IC; c++) {
            double s = 0.0;
            for (int n = 0; n < N; n++)
                s += dout[(size_t)n * OC + o] * in[(size_t)n * IC + c];
            dW[(size_t)o * IC + c] += s;
        }
        if (dbias) {
            double s = 0.0;
            for (int n = 0; n < N; n++)
                s += dout[(size_t)n * OC + o];
            dbias[o] += s;
        }
    }
}

/* Causal multi-head attention on qkv [B,T,3C] -> out [B,T,C], probabilities in att [B,H,T,T]. */
static void attention_forward(double *out, double *att, const double *qkv, int B, int T, int C,
                              int H)
{
    int hd = C / H;
    double scale = 1.0 / sqrt((double)hd);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const double *q = qkv + ((size_t)b * T + t) * 3 * C + h * hd;
                double *p = att + (((size_t)b * H + h) * T + t) * T;
                double mx = -INFINITY;
                for (int s = 0; s <= t; s++) {
                    const double *k = qkv + ((size_t)b * T + s) * 3 * C + C + h * hd;
                    double dot = 0.0;
                    for (int d = 0; d < hd; d++)
                        dot += q[d] * k[d];
                    p[s] = dot * scale;
                    if (p[s] > mx) mx = p[s];
                }
                double sum = 0.0;
                for (int s = 0; s <= t; s++) {
                    p[s] = exp(p[s] - mx);
                    sum += p[s];
                }
                for (int s = 0; s <= t; s++)
                    p[s] /= sum;
                for (int s = t + 1; s < T; s++)
                    p[s] = 0.0;
                double *o = out + ((size_t)b * T + t) * C + h * hd;
                for (int d = 0; d < hd; d++) {
                    double acc = 0.0;
                    for (int s = 0; s <= t; s++)
                        acc += p[s] * qkv[((size_t)b * T + s) * 3 * C + 2 * C + h * hd + d];
                    o[d] = acc;
                }
            }
}

/* dqkv = (overwritten) the gradient of qkv from dout [B,T,C]; dp is scratch of T doubles. */
static void attention_backward(double *dqkv, double *dp, const double *dout, const double *qkv,
                               const double *att, int B, int T, int C, int H)
{
    int hd = C / H;
    double scale = 1.0 / sqrt((double)hd);
    memset(dqkv, 0, sizeof(double) * (size_t)B * T * 3 * C);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const double *p = att + (((size_t)b * H + h) * T + t) * T;
                const double *dO = dout + ((size_t)b * T + t) * C + h * hd;
                /* dP[s] = dO . v_s ; dv_s += P[s] dO */
                double dot_pdp = 0.0;
                for (int s = 0; s <= t; s++) {
                    const double *v = qkv + ((size_t)b * T + s) * 3 * C + 2 * C + h * hd;
                    double *dv = dqkv + ((size_t)b * T + s) * 3 * C + 2 * C + h * hd;
                    double acc = 0.0;
                    for (int d = 0; d < hd; d++) {
                        acc += dO[d] * v[d];
                        dv[d] += p[s] * dO[d];
                    }
                    dp[s] = acc;
                    dot_pdp += p[s] * acc;
                }
                /* dS[s] = P[s] (dP[s] - sum P dP); dq += dS k * scale; dk_s += dS q * scale */
                const double *q = qkv + ((size_t)b * T + t) * 3 * C + h * hd;
                double *dq = dqkv + ((size_t)b * T + t) * 3 * C + h * hd;
                for (int s = 0; s <= t; s++) {
                    double ds = p[s] * (dp[s] - dot_pdp) * scale;
                    const double *k = qkv + ((size_t)b * T + s) * 3 * C + C + h * hd;
                    double *dk = dqkv + ((size_t)b * T + s) * 3 * C + C + h * hd;
                    for (int d = 0; d < hd; d++) {
                        dq[d] += ds * k[d];
                        dk[d] += ds * q[d];
                    }
                }
            }
}

#define GELU_K 0.7978845608028654 /* sqrt(2 / pi) */

static void gelu_forward(double *out, const double *in, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double x = in[i];
        out[i] = 0.5 * x * (1.0 + tanh(GELU_K * (x + 0.044715 * x * x * x)));
    }
}

static void gelu_backward(double *din, const double *dout, const double *in, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double x = in[i];
        double th = tanh(GELU_K * (x + 0.044715 * x * x * x));
        double du = GELU_K * (1.0 + 3.0 * 0.044715 * x * x);
        din[i] = dout[i] * (0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du);
    }
}

/* --- the stage -------------------------------------------------------------------------------- */

static size_t tensor_at(const ref_stage_t *r, pp_param_kind_t kind, int l)
{
    return r->tensors[model_tensor_index(&r->shape, kind, l)].packed;
}

double *ref_stage_param(ref_stage_t *r, pp_param_kind_t kind, int l)
{
    return r->params + tensor_at(r, kind, l);
}

double *ref_stage_grad(ref_stage_t *r, pp_param_kind_t kind, int l)
{
    return r->grads + tensor_at(r, kind, l);
}

static double *dalloc(size_t n, int *ok)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    if (!p) *ok = 0;
    return p;
}

int ref_stage_init(ref_stage_t *r, const pp_model_shape_t *shape, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    r->shape = *shape;
    r->seed = seed;
    const pp_model_shape_t *s = &r->shape;
    int ok = 1;
    size_t C = (size_t)s->hidden, N = (size_t)s->batch * s->seq_len, V = (size_t)s->vocab;
    size_t T = (size_t)s->seq_len, L = (size_t)s->n_layers;
    float *tmp = NULL;

    r->n_tensors = model_tensor_count(s);
    r->tensors = calloc((size_t)r->n_tensors + 1, sizeof *r->tensors);
    if (!r->tensors) goto fail;
    model_tensors(s, r->tensors, &r->n_params);
    r->params = dalloc(r->n_params, &ok);
    r->grads = dalloc(r->n_params, &ok);
    r->perm = calloc(V, sizeof *r->perm);
    r->tokens = calloc(N, sizeof *r->tokens);
    r->targets = calloc(N, sizeof *r->targets);
    r->res = calloc(L + 1, sizeof *r->res);
    r->blocks = calloc(L ? L : 1, sizeof *r->blocks);
    if (!ok || !r->perm || !r->tokens || !r->targets || !r->res || !r->blocks) goto fail;
    for (size_t l = 0; l <= L; l++)
        r->res[l] = dalloc(N * C, &ok);
    for (size_t l = 0; l < L; l++) {
        ref_block_t *b = &r->blocks[l];
        b->ln1 = dalloc(N * C, &ok);
        b->ln1_mean = dalloc(N, &ok);
        b->ln1_rstd = dalloc(N, &ok);
        b->qkv = dalloc(N * 3 * C, &ok);
        b->att = dalloc((size_t)s->batch * s->heads * T * T, &ok);
        b->atty = dalloc(N * C, &ok);
        b->x2 = dalloc(N * C, &ok);
        b->ln2 = dalloc(N * C, &ok);
        b->ln2_mean = dalloc(N, &ok);
        b->ln2_rstd = dalloc(N, &ok);
        b->fc = dalloc(N * 4 * C, &ok);
        b->gelu = dalloc(N * 4 * C, &ok);
    }
    if (s->is_last) {
        r->lnf = dalloc(N * C, &ok);
        r->lnf_mean = dalloc(N, &ok);
        r->lnf_rstd = dalloc(N, &ok);
        r->probs = dalloc(N * V, &ok);
    }
    r->d_res = dalloc(N * C, &ok);
    r->d_x2 = dalloc(N * C, &ok);
    r->d_a = dalloc(N * C, &ok);
    r->d_b = dalloc(N * C, &ok);
    r->d_qkv = dalloc(N * 3 * C, &ok);
    r->d_big = dalloc(N * (4 * C > V ? 4 * C : V), &ok);
    r->d_big2 = dalloc(N * 4 * C, &ok);
    r->d_att = dalloc(T, &ok);
    if (!ok) goto fail;

    data_perm_fill(seed, s->vocab, r->perm);
    size_t max_numel = 1;
    for (int i = 0; i < r->n_tensors; i++)
        if (r->tensors[i].numel > max_numel) max_numel = r->tensors[i].numel;
    tmp = malloc(max_numel * sizeof *tmp);
    if (!tmp) goto fail;
    for (int i = 0; i < r->n_tensors; i++) {
        const pp_param_tensor_t *t = &r->tensors[i];
        model_init_fill(seed, s->total_layers, t, tmp);
        for (size_t j = 0; j < t->numel; j++)
            r->params[t->packed + j] = tmp[j];
    }
    free(tmp);
    return 0;
fail:
    free(tmp);
    ref_stage_free(r);
    return -1;
}

void ref_stage_free(ref_stage_t *r)
{
    if (!r) return;
    if (r->res)
        for (int l = 0; l <= r->shape.n_layers; l++)
            free(r->res[l]);
    if (r->blocks)
        for (int l = 0; l < r->shape.n_layers; l++) {
            ref_block_t *b = &r->blocks[l];
            free(b->ln1), free(b->ln1_mean), free(b->ln1_rstd), free(b->qkv), free(b->att);
            free(b->atty), free(b->x2), free(b->ln2), free(b->ln2_mean), free(b->ln2_rstd);
            free(b->fc), free(b->gelu);
        }
    free(r->res), free(r->blocks), free(r->tensors), free(r->params), free(r->grads);
    free(r->perm), free(r->tokens), free(r->targets);
    free(r->lnf), free(r->lnf_mean), free(r->lnf_rstd), free(r->probs);
    free(r->d_res), free(r->d_x2), free(r->d_a), free(r->d_b), free(r->d_qkv), free(r->d_big);
    free(r->d_big2), free(r->d_att);
    memset(r, 0, sizeof *r);
}

void ref_stage_zero_grads(ref_stage_t *r)
{
    memset(r->grads, 0, r->n_params * sizeof(double));
}

double ref_stage_forward(ref_stage_t *r, const double *x, int mb, double *y)
{
    const pp_model_shape_t *s = &r->shape;
    int B = s->batch, T = s->seq_len, C = s->hidden, H = s->heads, V = s->vocab;
    int N = B * T, L = s->n_layers;
    size_t NC = (size_t)N * C;

    if (s->is_first) {
        const double *wte = ref_stage_param(r, PP_PARAM_WTE, 0);
        const double *wpe = ref_stage_param(r, PP_PARAM_WPE, 0);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                int n = b * T + t;
                int tok = data_token(r->seed, r->perm, V, mb, b, t);
                r->tokens[n] = tok;
                for (int c = 0; c < C; c++)
                    r->res[0][(size_t)n * C + c] =
                        wte[(size_t)tok * C + c] + wpe[(size_t)t * C + c];
            }
    } else {
        memcpy(r->res[0], x, NC * sizeof(double));
    }

    for (int l = 0; l < L; l++) {
        ref_block_t *bk = &r->blocks[l];
        const double *in = r->res[l];
        double *out = r->res[l + 1];
        layernorm_forward(bk->ln1, bk->ln1_mean, bk->ln1_rstd, in,
                          ref_stage_param(r, PP_PARAM_LN1_W, l),
                          ref_stage_param(r, PP_PARAM_LN1_B, l), N, C);
        matmul_forward(bk->qkv, bk->ln1, ref_stage_param(r, PP_PARAM_QKV_W, l),
                       ref_stage_param(r, PP_PARAM_QKV_B, l), N, C, 3 * C);
        attention_forward(bk->atty, bk->att, bk->qkv, B, T, C, H);
        matmul_forward(bk->x2, bk->atty, ref_stage_param(r, PP_PARAM_PROJ_W, l),
                       ref_stage_param(r, PP_PARAM_PROJ_B, l), N, C, C);
        for (size_t i = 0; i < NC; i++)
            bk->x2[i] += in[i];
        layernorm_forward(bk->ln2, bk->ln2_mean, bk->ln2_rstd, bk->x2,
                          ref_stage_param(r, PP_PARAM_LN2_W, l),
                          ref_stage_param(r, PP_PARAM_LN2_B, l), N, C);
        matmul_forward(bk->fc, bk->ln2, ref_stage_param(r, PP_PARAM_FC_W, l),
                       ref_stage_param(r, PP_PARAM_FC_B, l), N, C, 4 * C);
        gelu_forward(bk->gelu, bk->fc, (size_t)N * 4 * C);
        matmul_forward(out, bk->gelu, ref_stage_param(r, PP_PARAM_FC2_W, l),
                       ref_stage_param(r, PP_PARAM_FC2_B, l), N, 4 * C, C);
        for (size_t i = 0; i < NC; i++)
            out[i] += bk->x2[i];
    }
    if (y) memcpy(y, r->res[L], NC * sizeof(double));

    r->loss = 0.0;
    if (s->is_last) {
        layernorm_forward(r->lnf, r->lnf_mean, r->lnf_rstd, r->res[L],
                          ref_stage_param(r, PP_PARAM_LNF_W, 0),
                          ref_stage_param(r, PP_PARAM_LNF_B, 0), N, C);
        matmul_forward(r->probs, r->lnf, ref_stage_param(r, PP_PARAM_LM_W, 0), NULL, N, C, V);
        double total = 0.0;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                int n = b * T + t;
                double *p = r->probs + (size_t)n * V;
                int target = data_target(r->seed, r->perm, V, T, mb, b, t);
                r->targets[n] = target;
                double mx = -INFINITY, sum = 0.0;
                for (int v = 0; v < V; v++)
                    if (p[v] > mx) mx = p[v];
                for (int v = 0; v < V; v++)
                    sum += exp(p[v] - mx);
                total += log(sum) + mx - p[target];
                for (int v = 0; v < V; v++)
                    p[v] = exp(p[v] - mx) / sum;
            }
        r->loss = total / N;
    }
    return r->loss;
}

void ref_stage_backward(ref_stage_t *r, const double *dy, double grad_scale, double *dx)
{
    const pp_model_shape_t *s = &r->shape;
    int B = s->batch, T = s->seq_len, C = s->hidden, H = s->heads, V = s->vocab;
    int N = B * T, L = s->n_layers;
    size_t NC = (size_t)N * C;
    double *d_res = r->d_res;

    if (s->is_last) {
        /* dlogits = scale * (softmax - onehot) / N, then back through the head and final LN. */
        double *dlogits = r->d_big;
        for (int n = 0; n < N; n++)
            for (int v = 0; v < V; v++)
                dlogits[(size_t)n * V + v] =
                    grad_scale * (r->probs[(size_t)n * V + v] - (v == r->targets[n])) / N;
        matmul_backward(r->d_a, ref_stage_grad(r, PP_PARAM_LM_W, 0), NULL, dlogits, r->lnf,
                        ref_stage_param(r, PP_PARAM_LM_W, 0), N, C, V);
        layernorm_backward(d_res, 0, ref_stage_grad(r, PP_PARAM_LNF_W, 0),
                           ref_stage_grad(r, PP_PARAM_LNF_B, 0), r->d_a, r->res[L], r->lnf_mean,
                           r->lnf_rstd, ref_stage_param(r, PP_PARAM_LNF_W, 0), N, C);
    } else {
        memcpy(d_res, dy, NC * sizeof(double));
    }

    for (int l = L - 1; l >= 0; l--) {
        ref_block_t *bk = &r->blocks[l];
        double *d_gelu = r->d_big, *d_fc = r->d_big2;
        /* res_out = x2 + fc2(gelu(fc(ln2(x2)))) */
        matmul_backward(d_gelu, ref_stage_grad(r, PP_PARAM_FC2_W, l),
                        ref_stage_grad(r, PP_PARAM_FC2_B, l), d_res, bk->gelu,
                        ref_stage_param(r, PP_PARAM_FC2_W, l), N, 4 * C, C);
        gelu_backward(d_fc, d_gelu, bk->fc, (size_t)N * 4 * C);
        matmul_backward(r->d_a, ref_stage_grad(r, PP_PARAM_FC_W, l),
                        ref_stage_grad(r, PP_PARAM_FC_B, l), d_fc, bk->ln2,
                        ref_stage_param(r, PP_PARAM_FC_W, l), N, C, 4 * C);
        memcpy(r->d_x2, d_res, NC * sizeof(double));
        layernorm_backward(r->d_x2, 1, ref_stage_grad(r, PP_PARAM_LN2_W, l),
                           ref_stage_grad(r, PP_PARAM_LN2_B, l), r->d_a, bk->x2, bk->ln2_mean,
                           bk->ln2_rstd, ref_stage_param(r, PP_PARAM_LN2_W, l), N, C);
        /* x2 = res_in + proj(attention(qkv(ln1(res_in)))) */
        matmul_backward(r->d_b, ref_stage_grad(r, PP_PARAM_PROJ_W, l),
                        ref_stage_grad(r, PP_PARAM_PROJ_B, l), r->d_x2, bk->atty,
                        ref_stage_param(r, PP_PARAM_PROJ_W, l), N, C, C);
        attention_backward(r->d_qkv, r->d_att, r->d_b, bk->qkv, bk->att, B, T, C, H);
        matmul_backward(r->d_a, ref_stage_grad(r, PP_PARAM_QKV_W, l),
                        ref_stage_grad(r, PP_PARAM_QKV_B, l), r->d_qkv, bk->ln1,
                        ref_stage_param(r, PP_PARAM_QKV_W, l), N, C, 3 * C);
        memcpy(d_res, r->d_x2, NC * sizeof(double));
        layernorm_backward(d_res, 1, ref_stage_grad(r, PP_PARAM_LN1_W, l),
                           ref_stage_grad(r, PP_PARAM_LN1_B, l), r->d_a, r->res[l], bk->ln1_mean,
                           bk->ln1_rstd, ref_stage_param(r, PP_PARAM_LN1_W, l), N, C);
    }

    if (s->is_first) {
        double *dwte = ref_stage_grad(r, PP_PARAM_WTE, 0);
        double *dwpe = ref_stage_grad(r, PP_PARAM_WPE, 0);
        for (int n = 0; n < N; n++) {
            int t = n % T;
            for (int c = 0; c < C; c++) {
                dwte[(size_t)r->tokens[n] * C + c] += d_res[(size_t)n * C + c];
                dwpe[(size_t)t * C + c] += d_res[(size_t)n * C + c];
            }
        }
    }
    if (dx) memcpy(dx, d_res, NC * sizeof(double));
}

void ref_adamw_step(const pp_param_tensor_t *tensors, int n_tensors, double *params,
                    const double *grads, double *m, double *v, double lr, double beta1,
                    double beta2, double eps, double weight_decay, int step)
{
    double c1 = 1.0 - pow(beta1, step), c2 = 1.0 - pow(beta2, step);
    for (int i = 0; i < n_tensors; i++) {
        const pp_param_tensor_t *t = &tensors[i];
        double wd = t->decay ? weight_decay : 0.0;
        for (size_t j = t->packed; j < t->packed + t->numel; j++) {
            double g = grads[j];
            m[j] = beta1 * m[j] + (1.0 - beta1) * g;
            v[j] = beta2 * v[j] + (1.0 - beta2) * g * g;
            double mhat = m[j] / c1, vhat = v[j] / c2;
            params[j] -= lr * (mhat / (sqrt(vhat) + eps) + wd * params[j]);
        }
    }
}
