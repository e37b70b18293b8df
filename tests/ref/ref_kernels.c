/*
 * ref_kernels.c — the double-precision CPU references of kernels/, written as plain loops so each
 * can be read against its formula in ref_kernels.h, and the test helpers (splitmix64 random
 * numbers, bf16 rounding). Nothing here is fast; everything here is obvious.
 */
#include "ref_kernels.h"

#include <math.h>
#include <string.h>

/* ---- random numbers and bf16 ----------------------------------------------------------------- */

void ref_rng_seed(ref_rng_t *r, uint64_t seed)
{
    r->state = seed;
}

uint64_t ref_rng_next(ref_rng_t *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double ref_rng_uniform(ref_rng_t *r)
{
    return (double)(ref_rng_next(r) >> 11) * 0x1.0p-53;
}

double ref_rng_normal(ref_rng_t *r)
{
    double u1 = 1.0 - ref_rng_uniform(r); /* (0, 1] */
    double u2 = ref_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

int ref_rng_int(ref_rng_t *r, int n)
{
    return (int)(ref_rng_next(r) % (uint64_t)n);
}

void ref_fill_normal(ref_rng_t *r, double *x, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = scale * ref_rng_normal(r);
}

uint16_t ref_f32_to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float ref_bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float x;
    memcpy(&x, &u, sizeof(x));
    return x;
}

void ref_round(double *x, size_t n, int bf16)
{
    for (size_t i = 0; i < n; i++) {
        float f = (float)x[i];
        x[i] = bf16 ? (double)ref_bf16_to_f32(ref_f32_to_bf16(f)) : (double)f;
    }
}

/* ---- matmul ---------------------------------------------------------------------------------- */

void ref_matmul_fwd(double *out, const double *inp, const double *w, const double *bias, int N,
                    int IC, int OC)
{
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0;
            for (int i = 0; i < IC; i++)
                s += inp[(size_t)n * IC + i] * w[(size_t)o * IC + i];
            out[(size_t)n * OC + o] = s;
        }
}

void ref_matmul_bwd_input(double *dinp, const double *dout, const double *w, int N, int IC, int OC,
                          int accumulate)
{
    for (int n = 0; n < N; n++)
        for (int i = 0; i < IC; i++) {
            double s = 0.0;
            for (int o = 0; o < OC; o++)
                s += dout[(size_t)n * OC + o] * w[(size_t)o * IC + i];
            dinp[(size_t)n * IC + i] = (accumulate ? dinp[(size_t)n * IC + i] : 0.0) + s;
        }
}

void ref_matmul_bwd_weight(double *dw, double *dbias, const double *dout, const double *inp, int N,
                           int IC, int OC)
{
    for (int o = 0; o < OC; o++) {
        for (int i = 0; i < IC; i++) {
            double s = 0.0;
            for (int n = 0; n < N; n++)
                s += dout[(size_t)n * OC + o] * inp[(size_t)n * IC + i];
            dw[(size_t)o * IC + i] += s;
        }
        if (dbias) {
            double s = 0.0;
            for (int n = 0; n < N; n++)
                s += dout[(size_t)n * OC + o];
            dbias[o] += s;
        }
    }
}

void ref_gemm_strided_batched(double *c, const double *a, const double *b, int trans_a, int trans_b,
                              int m, int n, int k, double alpha, double beta, long long stride_a,
                              long long stride_b, long long stride_c, int batch)
{
    for (int p = 0; p < batch; p++) {
        const double *A = a + p * stride_a, *B = b + p * stride_b;
        double *Cm = c + p * stride_c;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double s = 0.0;
                for (int l = 0; l < k; l++) {
                    double x = trans_a ? A[(size_t)l * m + i] : A[(size_t)i * k + l];
                    double y = trans_b ? B[(size_t)j * k + l] : B[(size_t)l * n + j];
                    s += x * y;
                }
                double old = beta != 0.0 ? beta * Cm[(size_t)i * n + j] : 0.0;
                Cm[(size_t)i * n + j] = alpha * s + old;
            }
    }
}

/* ---- embedding ------------------------------------------------------------------------------- */

void ref_encoder_fwd(double *out, const int *tokens, const double *wte, const double *wpe, int B,
                     int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t n = (size_t)b * T + t;
            for (int c = 0; c < C; c++)
                out[n * C + c] = wte[(size_t)tokens[n] * C + c] + wpe[(size_t)t * C + c];
        }
}

void ref_encoder_bwd(double *dwte, double *dwpe, const double *dout, const int *tokens, int B,
                     int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t n = (size_t)b * T + t;
            for (int c = 0; c < C; c++) {
                if (dwte) dwte[(size_t)tokens[n] * C + c] += dout[n * C + c];
                if (dwpe) dwpe[(size_t)t * C + c] += dout[n * C + c];
            }
        }
}

/* ---- layernorm ------------------------------------------------------------------------------- */

#define REF_LN_EPS 1e-5

void ref_layernorm_fwd(double *out, double *mean, double *rstd, const double *inp, const double *w,
                       const double *b, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const double *x = inp + (size_t)n * C;
        double mu = 0.0, var = 0.0;
        for (int c = 0; c < C; c++)
            mu += x[c];
        mu /= C;
        for (int c = 0; c < C; c++)
            var += (x[c] - mu) * (x[c] - mu);
        var /= C;
        double rs = 1.0 / sqrt(var + REF_LN_EPS);
        for (int c = 0; c < C; c++)
            out[(size_t)n * C + c] = (x[c] - mu) * rs * w[c] + b[c];
        if (mean) mean[n] = mu;
        if (rstd) rstd[n] = rs;
    }
}

void ref_layernorm_bwd_input(double *dinp, const double *dout, const double *inp, const double *w,
                             const double *mean, const double *rstd, int N, int C, int accumulate)
{
    for (int n = 0; n < N; n++) {
        const double *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        double *dx = dinp + (size_t)n * C;
        double mg = 0.0, mgx = 0.0;
        for (int c = 0; c < C; c++) {
            double g = w[c] * dy[c];
            mg += g;
            mgx += g * (x[c] - mean[n]) * rstd[n];
        }
        mg /= C;
        mgx /= C;
        for (int c = 0; c < C; c++) {
            double xh = (x[c] - mean[n]) * rstd[n];
            double r = rstd[n] * (w[c] * dy[c] - mg - xh * mgx);
            dx[c] = (accumulate ? dx[c] : 0.0) + r;
        }
    }
}

void ref_layernorm_bwd_weight(double *dw, double *db, const double *dout, const double *inp,
                              const double *mean, const double *rstd, int N, int C)
{
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double dy = dout[(size_t)n * C + c];
            dw[c] += dy * (inp[(size_t)n * C + c] - mean[n]) * rstd[n];
            db[c] += dy;
        }
}

/* ---- GELU ------------------------------------------------------------------------------------ */

#define REF_GELU_K 0.79788456080286535588 /* sqrt(2/pi) */
#define REF_GELU_C 0.044715

double ref_gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(REF_GELU_K * (x + REF_GELU_C * x * x * x)));
}

double ref_gelu_grad(double x)
{
    double th = tanh(REF_GELU_K * (x + REF_GELU_C * x * x * x));
    double du = REF_GELU_K * (1.0 + 3.0 * REF_GELU_C * x * x);
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
}

void ref_gelu_fwd(double *out, const double *inp, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = ref_gelu(inp[i]);
}

void ref_gelu_bwd(double *dinp, const double *inp, const double *dout, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dinp[i] = ref_gelu_grad(inp[i]) * dout[i];
}

/* ---- attention ------------------------------------------------------------------------------- */

/* offset of (b, h, t, i) in the head layout, and of part p of (b, t, h, i) in the token layout */
static size_t head_off(int b, int h, int t, int i, int T, int H, int d)
{
    return (((size_t)b * H + h) * T + t) * d + i;
}

static size_t tok_off(int b, int t, int p, int h, int i, int T, int H, int d, int parts)
{
    size_t C = (size_t)H * d;
    return ((size_t)b * T + t) * parts * C + (size_t)p * C + (size_t)h * d + i;
}

void ref_attention_permute_qkv(double *q, double *k, double *v, const double *qkv, int B, int T,
                               int H, int d)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int i = 0; i < d; i++) {
                    size_t o = head_off(b, h, t, i, T, H, d);
                    q[o] = qkv[tok_off(b, t, 0, h, i, T, H, d, 3)];
                    k[o] = qkv[tok_off(b, t, 1, h, i, T, H, d, 3)];
                    v[o] = qkv[tok_off(b, t, 2, h, i, T, H, d, 3)];
                }
}

void ref_attention_unpermute_dqkv(double *dqkv, const double *dq, const double *dk,
                                  const double *dv, int B, int T, int H, int d)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int i = 0; i < d; i++) {
                    size_t o = head_off(b, h, t, i, T, H, d);
                    dqkv[tok_off(b, t, 0, h, i, T, H, d, 3)] = dq[o];
                    dqkv[tok_off(b, t, 1, h, i, T, H, d, 3)] = dk[o];
                    dqkv[tok_off(b, t, 2, h, i, T, H, d, 3)] = dv[o];
                }
}

void ref_attention_unpermute_out(double *out, const double *att, int B, int T, int H, int d)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int i = 0; i < d; i++)
                    out[tok_off(b, t, 0, h, i, T, H, d, 1)] = att[head_off(b, h, t, i, T, H, d)];
}

void ref_attention_permute_dout(double *datt, const double *dout, int B, int T, int H, int d)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int i = 0; i < d; i++)
                    datt[head_off(b, h, t, i, T, H, d)] = dout[tok_off(b, t, 0, h, i, T, H, d, 1)];
}

void ref_softmax_causal_fwd(double *P, const double *S, double scale, int BH, int T)
{
    for (size_t r = 0; r < (size_t)BH * T; r++) {
        const int t = (int)(r % (size_t)T);
        const double *s = S + r * T;
        double *p = P + r * T;
        double mx = -INFINITY, z = 0.0;
        for (int j = 0; j <= t; j++)
            if (scale * s[j] > mx) mx = scale * s[j];
        for (int j = 0; j <= t; j++)
            z += exp(scale * s[j] - mx);
        for (int j = 0; j < T; j++)
            p[j] = j <= t ? exp(scale * s[j] - mx) / z : 0.0;
    }
}

void ref_softmax_causal_bwd(double *dS, const double *dP, const double *P, double scale, int BH,
                            int T)
{
    for (size_t r = 0; r < (size_t)BH * T; r++) {
        const int t = (int)(r % (size_t)T);
        const double *dp = dP + r * T, *p = P + r * T;
        double *ds = dS + r * T;
        double sum = 0.0;
        for (int j = 0; j <= t; j++)
            sum += dp[j] * p[j];
        for (int j = 0; j < T; j++)
            ds[j] = j <= t ? scale * p[j] * (dp[j] - sum) : 0.0;
    }
}

/* lse of query row t of one head (q_t: d values; k: that head's [T,d] keys). */
static double causal_row_lse(const double *q_t, const double *k, int t, int d, double scale)
{
    double mx = -INFINITY, z = 0.0;
    for (int j = 0; j <= t; j++) {
        double s = 0.0;
        for (int i = 0; i < d; i++)
            s += q_t[i] * k[(size_t)j * d + i];
        if (scale * s > mx) mx = scale * s;
    }
    for (int j = 0; j <= t; j++) {
        double s = 0.0;
        for (int i = 0; i < d; i++)
            s += q_t[i] * k[(size_t)j * d + i];
        z += exp(scale * s - mx);
    }
    return mx + log(z);
}

/* P_tj of one head from the row's lse. */
static double causal_p(const double *q_t, const double *k_j, int d, double scale, double lse)
{
    double s = 0.0;
    for (int i = 0; i < d; i++)
        s += q_t[i] * k_j[i];
    return exp(scale * s - lse);
}

static double dot_d(const double *a, const double *b, int d)
{
    double s = 0.0;
    for (int i = 0; i < d; i++)
        s += a[i] * b[i];
    return s;
}

void ref_attention_causal_fwd(double *o, double *lse, const double *q, const double *k,
                              const double *v, int BH, int T, int d, double scale)
{
    for (int bh = 0; bh < BH; bh++) {
        const size_t h = (size_t)bh * T * d;
        for (int t = 0; t < T; t++) {
            const double *q_t = q + h + (size_t)t * d;
            double *o_t = o + h + (size_t)t * d;
            const double l = causal_row_lse(q_t, k + h, t, d, scale);
            if (lse) lse[(size_t)bh * T + t] = l;
            for (int i = 0; i < d; i++)
                o_t[i] = 0.0;
            for (int j = 0; j <= t; j++) {
                const double p = causal_p(q_t, k + h + (size_t)j * d, d, scale, l);
                for (int i = 0; i < d; i++)
                    o_t[i] += p * v[h + (size_t)j * d + i];
            }
        }
    }
}

void ref_attention_causal_bwd(double *dq, double *dk, double *dv, const double *dout,
                              const double *q, const double *k, const double *v, int BH, int T,
                              int d, double scale)
{
    const size_t n = (size_t)BH * T * d;
    for (size_t i = 0; i < n; i++)
        dq[i] = dk[i] = dv[i] = 0.0;
    for (int bh = 0; bh < BH; bh++) {
        const size_t h = (size_t)bh * T * d;
        for (int t = 0; t < T; t++) {
            const double *q_t = q + h + (size_t)t * d, *do_t = dout + h + (size_t)t * d;
            const double l = causal_row_lse(q_t, k + h, t, d, scale);
            double rowdot = 0.0; /* Σ_j P_tj dP_tj */
            for (int j = 0; j <= t; j++) {
                const double *k_j = k + h + (size_t)j * d, *v_j = v + h + (size_t)j * d;
                rowdot += causal_p(q_t, k_j, d, scale, l) * dot_d(do_t, v_j, d);
            }
            for (int j = 0; j <= t; j++) {
                const double *k_j = k + h + (size_t)j * d, *v_j = v + h + (size_t)j * d;
                const double p = causal_p(q_t, k_j, d, scale, l);
                const double ds = scale * p * (dot_d(do_t, v_j, d) - rowdot);
                for (int i = 0; i < d; i++) {
                    dv[h + (size_t)j * d + i] += p * do_t[i];
                    dq[h + (size_t)t * d + i] += ds * k_j[i];
                    dk[h + (size_t)j * d + i] += ds * q_t[i];
                }
            }
        }
    }
}

/* ---- cross-entropy --------------------------------------------------------------------------- */

void ref_crossentropy(double *losses, double *dlogits, const double *logits, const int *targets,
                      double grad_scale, int N, int V)
{
    for (int n = 0; n < N; n++) {
        const double *x = logits + (size_t)n * V;
        double mx = -INFINITY, z = 0.0;
        for (int j = 0; j < V; j++)
            if (x[j] > mx) mx = x[j];
        for (int j = 0; j < V; j++)
            z += exp(x[j] - mx);
        losses[n] = log(z) + mx - x[targets[n]];
        if (dlogits)
            for (int j = 0; j < V; j++)
                dlogits[(size_t)n * V + j] =
                    (exp(x[j] - mx) / z - (j == targets[n] ? 1.0 : 0.0)) * grad_scale / N;
    }
}

/* ---- AdamW ----------------------------------------------------------------------------------- */

void ref_adamw_update(double *p, double *m, double *v, const double *g, size_t n, double lr,
                      double beta1, double beta2, double eps, double weight_decay, int step)
{
    double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step);
    for (size_t i = 0; i < n; i++) {
        m[i] = beta1 * m[i] + (1.0 - beta1) * g[i];
        v[i] = beta2 * v[i] + (1.0 - beta2) * g[i] * g[i];
        double mhat = m[i] / bc1, vhat = v[i] / bc2;
        p[i] -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * p[i]);
    }
}
